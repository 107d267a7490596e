"""A newcomer's input: the common mistakes give the right answer or one clear line and a
non-zero exit, never a silently wrong answer with status 0.

The data is SNAP CollegeMsg written the ways a user would write it (times in
milliseconds, other header names, pandas Parquet, a directory with its SOURCE.md). The
expected count of temporal triangles within one hour comes from the plain-Python counter of
:mod:`tests.cli.test_college_msg` (per-vertex time lists and ``bisect``), which agrees with
the published 1,653.
"""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from graphcep.io.formats import InputError
from tests.cli.conftest import COLLEGE
from tests.cli.test_college_msg import HOUR, count_triangles
from tests.paths import FIXTURES

VAST_SAMPLE = FIXTURES / "ctu13_vast_sample.csv"


def run(tmp_path: Path, query: Path, inputs: list[str], *options: str,
        command: str = "run") -> int:
    return main([command, str(query), "--input", *inputs, "--engine", "local",
                 "-o", str(tmp_path / "m.jsonl"), "--rejects", str(tmp_path / "r.jsonl"),
                 "--summary", "json", *options])


def summary(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def write_csv(path: Path, header: str, rows: list[str]) -> Path:
    path.write_text(header + "\n" + "".join(row + "\n" for row in rows))
    return path


# -- 1. times in milliseconds -------------------------------------------------------------
def test_milliseconds_read_as_seconds_are_refused_naming_the_unit(
        tmp_path, query, events, triangles, capsys):
    data = write_csv(tmp_path / "ms.csv", "src,dst,t",
                     [f"{s},{d},{t * 1000}" for s, d, t in events])
    assert run(tmp_path, query, [str(data)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    (line,) = captured.err.splitlines()
    assert line.startswith(f"graphcep: {data}: times read as seconds fall in year ")
    assert "as milliseconds they are 2004-04-15 14:56:01" in line
    assert "pass --time-unit ms" in line
    assert not (tmp_path / "m.jsonl").exists()
    # the unit given: read as meant
    assert run(tmp_path, query, [str(data)], "--time-unit", "ms") == 0
    assert summary(capsys.readouterr().out)["matches"] == triangles


def test_relative_seconds_from_zero_stay_accepted(tmp_path, query, events, capsys):
    """Small times are no proof of a wrong unit: a stream starting at 0 is read as given."""
    first = events[0][2]
    data = write_csv(tmp_path / "rel.csv", "src,dst,t",
                     [f"{s},{d},{t - first}" for s, d, t in events[:2000]])
    assert run(tmp_path, query, [str(data)]) == 0
    expected = count_triangles([(s, d, t - first) for s, d, t in events[:2000]], HOUR)
    assert summary(capsys.readouterr().out)["matches"] == expected


# -- 2, 3. headers with other names ---------------------------------------------------------
@pytest.mark.parametrize(("header", "order", "note"), [
    ("timestamp,sender,receiver", "tsd", "t=timestamp,src=sender,dst=receiver"),
    ("time,from,to", "tsd", "t=time,src=from,dst=to"),
])
def test_a_header_of_known_names_is_read_by_them_and_says_so(
        tmp_path, query, events, triangles, capsys, header, order, note):
    data = write_csv(tmp_path / "h.csv", header, [f"{t},{s},{d}" for s, d, t in events])
    assert run(tmp_path, query, [str(data)]) == 0
    captured = capsys.readouterr()
    assert summary(captured.out)["matches"] == triangles
    assert summary(captured.out)["rejected"] == 0
    (line,) = captured.err.splitlines()
    assert line.startswith(f"graphcep: note: {data}: header read by its names as "
                           f"--columns {note}")


def test_a_header_of_unknown_names_is_refused_naming_its_columns(tmp_path, query, capsys):
    data = write_csv(tmp_path / "u.csv", "when_sent,who,whom", ["1082040961,1,2"])
    assert run(tmp_path, query, [str(data)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"graphcep: {data}: the header does not say which columns hold")
    assert line.endswith("the file's columns are 'when_sent', 'who', 'whom': pass --columns "
                         "t=COL,src=COL,dst=COL")


# -- 4. pandas Parquet, integer seconds -------------------------------------------------------
def write_pandas_parquet(path: Path, events) -> Path:
    pd = pytest.importorskip("pandas")
    frame = pd.DataFrame({"src": [s for s, _, _ in events], "dst": [d for _, d, _ in events],
                          "t": [t for _, _, t in events]})
    frame.to_parquet(path)
    return path


def test_pandas_parquet_integer_seconds_are_refused_naming_the_unit(
        tmp_path, query, events, triangles, capsys):
    data = write_pandas_parquet(tmp_path / "pd.parquet", events)
    assert run(tmp_path, query, [str(data)]) == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith(f"graphcep: {data}: times read as microseconds fall in 1970-01-01 ")
    assert "pass --time-unit s" in line
    assert run(tmp_path, query, [str(data)], "--time-unit", "s") == 0
    assert summary(capsys.readouterr().out)["matches"] == triangles


def test_parquet_with_graphcep_unit_metadata_is_read_in_its_unit(tmp_path, events):
    """A file that says its unit is never second-guessed (the user's word or the file's)."""
    from graphcep.io.readers import read_edges

    table = pa.table({"src": [str(s) for s, _, _ in events[:10]],
                      "dst": [str(d) for _, d, _ in events[:10]],
                      "t": [t for _, _, t in events[:10]]})
    path = tmp_path / "own.parquet"
    pq.write_table(table.replace_schema_metadata({"graphcep.time_unit": "s"}), path)
    assert read_edges(path).edges.column("t").to_pylist() == [
        t * 1_000_000 for _, _, t in events[:10]]
    pq.write_table(table, path)  # no metadata: refused, named
    with pytest.raises(InputError, match="pass --time-unit s"):
        read_edges(path)


# -- 5. the wrong --format on VAST ------------------------------------------------------------
def test_vast_read_as_csv_is_told_the_format_not_the_time_format(tmp_path, query, capsys):
    assert run(tmp_path, query, [str(VAST_SAMPLE)], "--format", "csv") == 2
    captured = capsys.readouterr()
    (line,) = captured.err.splitlines()
    assert line.startswith("graphcep: no input line was accepted: 2000 lines rejected")
    assert line.endswith(f"no line of {VAST_SAMPLE} reads as csv: it has the shape of vast: "
                         "pass --format vast")
    assert "--time-format" not in line
    assert run(tmp_path, query, [str(VAST_SAMPLE)], "--format", "vast") == 0


@pytest.mark.parametrize(("lines", "fmt", "shape"), [
    (["1 2 1082040961", "3 4 1082155839"], "csv", "snap"),
    (['{"src": "a", "dst": "b", "t": 1}'], "csv", "jsonl"),
    (["a\tb\t1", "b\tc\t2"], "jsonl", "tsv"),
    ([",".join(["1312964022", "0", "0", "10.0.0.1", *["0"] * 6, "10.0.0.1", "10.0.0.2",
                *["0"] * 12])], "snap", "netflow5"),
])
def test_a_wholly_rejected_file_is_told_the_format_of_its_shape(tmp_path, lines, fmt, shape):
    from graphcep.io.readers import read_edges

    path = tmp_path / "x.data"
    path.write_text("".join(line + "\n" for line in lines))
    reasons = read_edges(path, fmt).rejects.column("reason").to_pylist()
    assert reasons and all(r.endswith(f"it has the shape of {shape}: pass --format {shape}]")
                           for r in reasons)


# -- 6. every line rejected -------------------------------------------------------------------
def test_a_run_that_accepts_no_line_exits_2_with_the_reject_summary(tmp_path, query, capsys):
    assert run(tmp_path, query, [str(COLLEGE)], "--format", "jsonl") == 2
    captured = capsys.readouterr()
    assert summary(captured.out)["edges"] == 0
    (line,) = captured.err.splitlines()
    assert line.startswith("graphcep: no input line was accepted: 59835 lines rejected: ")
    assert f"see {tmp_path / 'r.jsonl'}" in line
    # an empty input is no failure: nothing was rejected
    empty = tmp_path / "empty.csv"
    empty.write_text("src,dst,t\n")
    assert run(tmp_path, query, [str(empty)]) == 0


def test_subscribe_that_accepts_no_line_exits_2(tmp_path, capsys):
    subs = tmp_path / "s.subs"
    subs.write_text("s: a.b\n")
    data = tmp_path / "x.csv"
    data.write_text("a,b,c,d\n1,2\n")  # neither line reads as an edge
    assert run(tmp_path, subs, [str(data)], command="subscribe") == 2
    assert capsys.readouterr().err.startswith("graphcep: no input line was accepted: 2 lines ")


# -- 7. a directory holding notes beside its data -------------------------------------------
def test_a_directory_reads_its_data_and_names_the_notes_it_skipped(
        tmp_path, query, triangles, capsys):
    folder = tmp_path / "snap-CollegeMsg"
    folder.mkdir()
    shutil.copy(COLLEGE, folder / COLLEGE.name)
    (folder / "SOURCE.md").write_text("# SNAP CollegeMsg\n\nsource: https://snap.stanford.edu\n")
    (folder / "README").write_text("see SOURCE.md\n")
    (folder / ".DS_Store").write_bytes(b"\0\0\0\1Bud1")
    assert run(tmp_path, query, [f"{folder}/"]) == 0
    captured = capsys.readouterr()
    assert (summary(captured.out)["matches"], summary(captured.out)["rejected"]) == (triangles, 0)
    (line,) = captured.err.splitlines()
    assert line == (f"graphcep: note: skipped 2 files of the input directories, which hold no "
                    f"snap data: {folder}/README, {folder}/SOURCE.md")


def test_a_directory_of_one_format_skips_files_named_for_another(tmp_path):
    from graphcep.io.readers import read_edges

    (tmp_path / "a.csv").write_text("src,dst,t\na,b,1\n")
    pq.write_table(pa.table({"src": ["x"], "dst": ["y"], "t": [2.0]}), tmp_path / "b.parquet")
    with pytest.warns(UserWarning, match=r"skipped 1 file .* no csv data: .*b\.parquet"):
        read = read_edges(tmp_path)
    assert read.edges.column("src").to_pylist() == ["a"] and read.rejects.num_rows == 0
    # named, a file is always read (and gets the format hint)
    named = read_edges([tmp_path / "a.csv", tmp_path / "b.parquet"])
    assert named.rejects.num_rows > 0


def test_a_directory_of_notes_only_is_one_line(tmp_path, query, capsys):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "SOURCE.md").write_text("notes\n")
    assert run(tmp_path, query, [str(tmp_path / "d")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "no input files in" in line and "(only SOURCE.md: notes, files of another format" in line


# -- subscriptions options and files ------------------------------------------------------------
@pytest.mark.parametrize("option", ["--key", "--symbol"])
def test_an_empty_key_or_symbol_field_is_refused(tmp_path, capsys, option):
    subs = tmp_path / "s.subs"
    subs.write_text("s: a.b\n")
    data = tmp_path / "x.seq"
    data.write_text("a b\n")
    assert run(tmp_path, subs, [str(data)], option, "", command="subscribe") == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert f"argument {option}: expected a field name, got an empty one" in line


def test_a_subscriptions_file_without_subscriptions_matches_nothing(tmp_path, capsys):
    subs = tmp_path / "none.subs"
    subs.write_text("# paused: every subscription removed\n")
    data = tmp_path / "x.seq"
    data.write_text("a b a b\n")
    assert run(tmp_path, subs, [str(data)], command="subscribe") == 0
    out = summary(capsys.readouterr().out)
    assert (out["edges"], out["matches"]) == (4, 0)


def test_a_truncated_seq_gzip_keeps_the_lines_before_the_damage(tmp_path, capsys):
    import random

    rng = random.Random(5)
    lines = [" ".join(rng.choice("abcdefgh") for _ in range(8)) for _ in range(3000)]
    whole = gzip.compress("".join(line + "\n" for line in lines).encode())
    data = tmp_path / "cut.seq.gz"
    data.write_bytes(whole[: len(whole) // 3])
    subs = tmp_path / "s.subs"
    subs.write_text("ab: a.b\n")
    assert run(tmp_path, subs, [str(data)], command="subscribe") == 0
    out = summary(capsys.readouterr().out)
    rejects = [json.loads(r) for r in (tmp_path / "r.jsonl").read_text().splitlines()]
    (damage,) = rejects
    kept = damage["line"] - 1
    assert 0 < kept < len(lines)
    assert damage["reason"] == f"damaged gzip: unexpected end of data after line {kept}"
    assert out["edges"] == 8 * kept
    # the oracle: "a" directly followed by "b" in the one key's sequence of the kept lines
    symbols = " ".join(lines[:kept]).split()
    pairs = zip(symbols, symbols[1:], strict=False)
    assert out["matches"] == sum(pair == ("a", "b") for pair in pairs)


def test_motifs_refuses_a_delta_given_twice(capsys):
    assert main(["motifs", "-i", str(COLLEGE), "--delta", "300,300"]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "argument --delta" in line and "the same δ given twice" in line
    assert main(["motifs", "-i", str(COLLEGE), "--delta", "10,10.0"]) == 2
    assert "'10' and '10.0'" in capsys.readouterr().err


@pytest.mark.parametrize(("name", "fmt", "read"), [
    ("SOURCE.md", None, False), ("README", None, False), ("LICENSE.txt", None, False),
    ("notes.pdf", "snap", False), ("CollegeMsg.txt.gz", "snap", True), ("edges", "snap", True),
    ("source.csv", "csv", True), ("flows.csv", "vast", True), ("b.parquet", "csv", False),
    ("a.csv", "parquet", False), ("x.json", "jsonl", True), ("x.json", "csv", False),
    ("trace.log", "syscall", True), ("packed.bz2", "snap", True),
])
def test_which_files_of_a_directory_hold_data(name, fmt, read):
    from graphcep.io.readers import holds_data

    assert holds_data(Path(name), fmt) is read
