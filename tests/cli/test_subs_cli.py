"""`graphcep run` / `explain` on a subscriptions file, end to end (in-process engine)."""

from __future__ import annotations

import json

import pytest

from graphcep.cli import main
from tests.sequences_oracle import occurrences

FLOWS = "t,src,dst\n0,h,22\n1,h,80\n2,g,22\n3,h,22\n4,h,80\n5,h,443\n6,g,80\n"
SUBS = "# probes\nprobe: 22.@x.22.@x\npair: @a.@b\n"


def write(tmp_path):
    (tmp_path / "flows.csv").write_text(FLOWS)
    (tmp_path / "s.subs").write_text(SUBS)
    return str(tmp_path / "s.subs"), str(tmp_path / "flows.csv")


def expected(key_field, symbol_field):
    rows = [line.split(",") for line in FLOWS.split("\n")[1:] if line]
    column = {"src": 1, "dst": 2}
    sequences = {}
    for row in rows:
        sequences.setdefault(row[column[key_field]], []).append(row[column[symbol_field]])
    found = set()
    for sid, items in (("probe", ("22", ("x",), "22", ("x",))), ("pair", (("a",), ("b",)))):
        for key, seq in sequences.items():
            found |= {(sid, key, start) for start, _ in occurrences(items, seq)}
    return found


def test_run_local_reports_what_the_oracle_finds(tmp_path, capsys):
    subs, flows = write(tmp_path)
    out = tmp_path / "out.jsonl"
    for key, symbol in (("src", "dst"), ("dst", "src")):
        status = main(["run", subs, "--input", flows, "--engine", "local", "--key", key,
                       "--symbol", symbol, "-o", str(out), "--summary", "json"])
        assert status == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert summary["key"] == key and summary["subs_engine"] == "tree"
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert {(r["subscription"], r["key"], r["start"]) for r in rows} == expected(key, symbol)
        out.unlink()


def test_naive_engine_and_console(tmp_path, capsys):
    subs, flows = write(tmp_path)
    assert main(["run", subs, "--input", flows, "--engine", "local", "--subs-engine",
                 "naive"]) == 0
    text = capsys.readouterr().out
    assert "subscription=probe  key=h  positions 0..3" in text and "@x=80" in text


def test_explain_prints_the_tree(tmp_path, capsys):
    subs, _ = write(tmp_path)
    assert main(["explain", subs]) == 0
    text = capsys.readouterr().out
    assert "22.@x1.22.@x1  [probe]" in text and "pattern tree: 2 nodes" in text


def test_a_missing_field_and_other_kinds_options_are_refused(tmp_path, capsys):
    subs, flows = write(tmp_path)
    assert main(["run", subs, "--input", flows, "--engine", "local", "--key", "port"]) != 0
    assert "--key 'port'" in capsys.readouterr().err
    assert main(["run", subs, "--input", flows, "--engine", "local", "--anchored"]) != 0
    assert "does not apply to a subscriptions file" in capsys.readouterr().err


def test_errors_in_the_file_name_line_and_column(tmp_path, capsys):
    (tmp_path / "bad.subs").write_text("ok: a\nbad: a..b\n")
    (tmp_path / "flows.csv").write_text(FLOWS)
    status = main(["run", str(tmp_path / "bad.subs"), "--input", str(tmp_path / "flows.csv"),
                   "--engine", "local"])
    assert status != 0
    assert "bad.subs:2:8: subscription 'bad'" in capsys.readouterr().err


@pytest.mark.spark
def test_spark_partitions_by_key_and_equals_the_oracle(tmp_path, capsys, spark):
    """On Spark a subscription job is partitioned by its key column (every occurrence lies
    in one key's sequence): the rows equal the oracle's and the in-process run's."""
    from graphcep.io.generator import generate_netflow, write_edges

    flows = tmp_path / "many.csv"
    write_edges(generate_netflow(4000, 12, 100, 3).select(["t", "src", "dst", "dur"]),
                str(flows), "csv")
    (tmp_path / "s.subs").write_text("back: @x.@y.@x\nthree: @x.@y.@z.@x\n")
    results = {}
    for engine in ("local", "spark"):
        out = tmp_path / f"{engine}.jsonl"
        status = main(["run", str(tmp_path / "s.subs"), "--input", str(flows), "--engine",
                       engine, "--master", "local[2]", "--shards", "3", "-o", str(out),
                       "--summary", "json"])
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert status == 0
        results[engine] = {(r["subscription"], r["key"], r["start"], r["end"])
                           for r in map(json.loads, out.read_text().splitlines())}
    assert summary["strategy"] == "keys"
    assert results["spark"] == results["local"] and len(results["local"]) > 100
