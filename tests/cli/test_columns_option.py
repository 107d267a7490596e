"""``--columns``: which file columns hold an edge's time, source and destination, for
files whose header (or key, or position) is not graphcep's. The expected matches are
worked out by hand: a triangle a -> b -> c -> a at 1, 2, 3 s, whatever the layout."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from tests.paths import EXAMPLES

TRIANGLE = [("a", "b", 1), ("b", "c", 2), ("c", "a", 3)]
WANT = [{"x1": "a", "x2": "b", "x3": "c"}]


def run(tmp_path: Path, data: Path, *options: str) -> tuple[int, list[dict]]:
    out = tmp_path / "m.jsonl"
    code = main(["run", str(EXAMPLES / "triangle.sal"), "--input", str(data), "--engine",
                 "local", "-o", str(out), "--rejects", str(tmp_path / "r.jsonl"), *options])
    rows = [json.loads(line) for line in out.read_text().splitlines()] if code == 0 else []
    return code, [dict(sorted(r["bindings"].items())) for r in rows]


@pytest.mark.parametrize(("name", "text", "columns"), [
    ("h.csv", "time,from,to\n" + "".join(f"{t},{s},{d}\n" for s, d, t in TRIANGLE),
     "t=time,src=from,dst=to"),
    ("h.tsv", "to\tfrom\tlength\ttime\n"
     + "".join(f"{d}\t{s}\t0\t{t}\n" for s, d, t in TRIANGLE), "src=from,dst=to,t=time"),
    ("p.txt", "".join(f"{t} {s} {d}\n" for s, d, t in TRIANGLE), "t=0,src=1,dst=2"),
    ("k.jsonl", "".join(json.dumps({"when": t, "from": s, "to": d, "t": "kept"}) + "\n"
                        for s, d, t in TRIANGLE), "t=when,src=from,dst=to"),
])
def test_columns_place_the_edge_fields(tmp_path, capsys, name, text, columns):
    data = tmp_path / name
    data.write_text(text)
    options = ["--format", "snap"] if name.endswith(".txt") else []
    assert run(tmp_path, data, *options, "--columns", columns) == (0, WANT)


def test_a_parquet_file_s_columns_are_placed_by_name(tmp_path, capsys):
    data = tmp_path / "p.parquet"
    s, d, t = zip(*TRIANGLE, strict=True)
    pq.write_table(pa.table({"from": list(s), "to": list(d), "ts": list(t)}), data)
    assert run(tmp_path, data, "--columns", "t=ts,src=from,dst=to") == (0, WANT)


def test_a_jsonl_key_named_like_a_placed_field_is_kept_as_an_attribute(tmp_path, capsys):
    data = tmp_path / "k.jsonl"
    data.write_text("".join(json.dumps({"when": t, "from": s, "to": d, "t": "kept"}) + "\n"
                            for s, d, t in TRIANGLE))
    out = tmp_path / "m.jsonl"
    assert main(["run", str(EXAMPLES / "triangle.sal"), "--input", str(data), "--engine",
                 "local", "-o", str(out), "--columns", "t=when,src=from,dst=to"]) == 0
    edges = json.loads(out.read_text())["edges"]
    assert [e["t"] for e in edges] == [1, 2, 3]


@pytest.mark.parametrize(("name", "text", "columns", "says"), [
    ("h.csv", "time,from,to\n1,a,b\n", "t=nope,src=from,dst=to",
     "h.csv: no column 'nope' for t (--columns): the file's columns are 'time', 'from', 'to'"),
    ("k.jsonl", '{"t": 1, "src": "a", "dst": "b"}\n', "t=0,src=1,dst=2",
     "--columns names the keys of JSON lines (t=time), not positions"),
    ("f.vast.csv", "1,a,b\n", "t=0,src=1,dst=2",
     "--columns places the columns of csv, tsv, snap, parquet, jsonl input, not of vast"),
])
def test_columns_a_file_cannot_have_are_one_line(tmp_path, capsys, name, text, columns, says):
    data = tmp_path / name
    data.write_text(text)
    fmt = ["--format", "vast"] if name.endswith(".vast.csv") else []
    assert run(tmp_path, data, *fmt, "--columns", columns)[0] == 2
    err = capsys.readouterr().err
    assert says in err and len(err.strip().splitlines()) == 1 and "Traceback" not in err


@pytest.mark.parametrize(("columns", "says"), [
    ("t=time,src=from", "dst not placed"),
    ("t=time,src=from,dst=to,x=y", "unknown edge field 'x'"),
    ("t=time,src=from,dst=time", "one column is given for two fields"),
    ("t=time,t=when,src=a,dst=b", "t is placed twice"),
    ("time", "expected FIELD=COLUMN pairs"),
])
def test_a_bad_columns_option_is_one_line_before_any_work(tmp_path, capsys, columns, says):
    data = tmp_path / "h.csv"
    data.write_text("time,from,to\n1,a,b\n")
    assert main(["run", str(EXAMPLES / "triangle.sal"), "--input", str(data), "--engine",
                 "local", "--columns", columns]) == 2
    err = capsys.readouterr().err
    assert "argument --columns" in err and says in err and "Traceback" not in err


def test_without_columns_a_header_of_other_names_is_read_by_them_or_refused(tmp_path, capsys):
    """Never by position under a header: ``time,from,to`` says which column is which (a
    note says how it was read); names graphcep does not know are refused in one line
    naming the file's columns and --columns."""
    data = tmp_path / "h.csv"
    data.write_text("time,from,to\n" + "".join(f"{t},{s},{d}\n" for s, d, t in TRIANGLE))
    given = run(tmp_path, data, "--columns", "t=time,src=from,dst=to")
    assert given[0] == 0 and given[1]
    capsys.readouterr()
    assert run(tmp_path, data) == given
    err = capsys.readouterr().err
    assert err == (f"graphcep: note: {data}: header read by its names as --columns "
                   "t=time,src=from,dst=to (the file's columns are 'time', 'from', 'to')\n")
    other = tmp_path / "o.csv"
    other.write_text("when_sent,a,b\n1,a,b\n")
    assert main(["run", str(EXAMPLES / "triangle.sal"), "--input", str(other), "--engine",
                 "local", "-o", str(tmp_path / "m.jsonl")]) == 2
    err = capsys.readouterr().err
    assert err == (f"graphcep: {other}: the header does not say which columns hold t, src and "
                   "dst (no column for t; no column for src; no column for dst); the file's "
                   "columns are 'when_sent', 'a', 'b': pass --columns t=COL,src=COL,dst=COL\n")


@pytest.mark.parametrize(("columns", "says"), [
    ("t=nope,src=from,dst=to", "no column 'nope' for t (--columns): the file's columns are "
     "'from', 'to', 'ts'"),
    ("t=7,src=0,dst=1", "no column 7 for t (--columns): the file has 3 columns"),
])
def test_a_parquet_column_the_file_lacks_is_one_line(tmp_path, capsys, columns, says):
    data = tmp_path / "p.parquet"
    pq.write_table(pa.table({"from": ["a"], "to": ["b"], "ts": [1]}), data)
    assert run(tmp_path, data, "--columns", columns)[0] == 2
    err = capsys.readouterr().err
    assert f"p.parquet: {says}" in err and len(err.strip().splitlines()) == 1
