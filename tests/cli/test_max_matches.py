"""``graphcep run --max-matches`` and ``--count``: a run past the bound stops with one
line and exit status 3, what it wrote being complete records in every output; counting
gives the number of records a run writes, and the oracle's."""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from graphcep.lang.sal import parse_query
from graphcep.runtime import local
from tests.oracle import brute_force_matches
from tests.paths import EXAMPLES

TRIANGLE = EXAMPLES / "triangle.sal"
SIX_EDGES = [("a", "b"), ("b", "c"), ("c", "a"), ("b", "a"), ("c", "b"), ("a", "c")]


def write_repeated(path: Path, reps: int) -> list[dict]:
    """The six edges repeated ``reps`` times, one a millisecond (``src dst t`` lines); the
    edges as the oracle reads them."""
    pairs = SIX_EDGES * reps
    path.write_text("".join(f"{s} {d} {i / 1000:.3f}\n" for i, (s, d) in enumerate(pairs)))
    return [{"t": i * 1000, "src": s, "dst": d, "seq": i} for i, (s, d) in enumerate(pairs)]


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def records(target: Path, fmt: str) -> int:
    """The complete match records in an output (each one parsed)."""
    files = sorted(target.iterdir()) if target.is_dir() else [target]
    if fmt == "parquet":
        return sum(pq.read_table(f).num_rows for f in files)
    if fmt == "dot":
        texts = [f.read_text() for f in files]
        assert all(t.startswith("digraph") and t.endswith("  }\n}\n") for t in texts)
        return sum(t.count("  subgraph \"cluster_") for t in texts)
    return sum(len([json.loads(line) for line in f.read_text().splitlines()]) for f in files)


@pytest.fixture
def small_chunks(monkeypatch):
    """Chunks of 16 matches: the bound falls inside a chunk, after many."""
    monkeypatch.setattr(local, "MATCH_CHUNK_ROWS", 16)


@pytest.mark.parametrize("name,fmt", [("m.jsonl", "jsonl"), ("m.parquet", "parquet"),
                                      ("m.dot", "dot"), ("parts.jsonl/", "jsonl")])
def test_a_run_past_max_matches_stops_with_one_line_and_exit_3(tmp_path, capsys, small_chunks,
                                                               name, fmt):
    stream = tmp_path / "edges.txt"
    write_repeated(stream, 6)
    target = tmp_path / name
    code = main(["run", str(TRIANGLE), "-i", str(stream), "--engine", "local",
                 "-o", str(target), "--max-matches", "50", "--summary", "json",
                 "--rejects", str(tmp_path / "rejects.jsonl")])
    captured = capsys.readouterr()
    assert code == 3
    (line,) = captured.err.strip().splitlines()
    assert "--max-matches 50" in line and "50 written" in line
    summary = last_json(captured.out)
    assert summary["matches"] == 50 and summary["stopped"] == "--max-matches 50"
    assert records(target, fmt) == 50


def test_the_console_prints_the_matches_before_the_bound(tmp_path, capsys, small_chunks):
    stream = tmp_path / "edges.txt"
    write_repeated(stream, 6)
    code = main(["run", str(TRIANGLE), "-i", str(stream), "--engine", "local",
                 "--max-matches", "20", "--limit", "100",
                 "--rejects", str(tmp_path / "rejects.jsonl")])
    captured = capsys.readouterr()
    assert code == 3
    assert "match 20 " in captured.out and "match 21 " not in captured.out
    assert "stopped at --max-matches 20" in captured.out
    assert len(captured.err.strip().splitlines()) == 1


def test_exactly_max_matches_is_within_the_bound(tmp_path, capsys, small_chunks):
    stream = tmp_path / "edges.txt"
    edges = write_repeated(stream, 4)
    total = len(brute_force_matches(parse_query(TRIANGLE.read_text()), edges))
    base = ["run", str(TRIANGLE), "-i", str(stream), "--engine", "local", "-o",
            str(tmp_path / "m.jsonl"), "--summary", "json",
            "--rejects", str(tmp_path / "rejects.jsonl")]
    assert main([*base, "--max-matches", str(total)]) == 0
    summary = last_json(capsys.readouterr().out)
    assert summary["matches"] == total and "stopped" not in summary
    assert main([*base, "--max-matches", str(total - 1)]) == 3
    assert records(tmp_path / "m.jsonl", "jsonl") == total - 1


def test_count_equals_the_records_a_run_writes_and_the_oracle(tmp_path, capsys):
    stream = tmp_path / "edges.txt"
    edges = write_repeated(stream, 7)
    expected = len(brute_force_matches(parse_query(TRIANGLE.read_text()), edges))
    base = ["run", str(TRIANGLE), "-i", str(stream), "--engine", "local", "--summary",
            "json", "--rejects", str(tmp_path / "rejects.jsonl")]
    assert main([*base, "--count"]) == 0
    counted = last_json(capsys.readouterr().out)
    assert main([*base, "-o", str(tmp_path / "m.jsonl")]) == 0
    capsys.readouterr()
    assert counted["counted"] is True
    assert counted["matches"] == records(tmp_path / "m.jsonl", "jsonl") == expected


def test_count_is_not_bound_by_max_matches(tmp_path, capsys):
    stream = tmp_path / "edges.txt"
    edges = write_repeated(stream, 5)
    expected = len(brute_force_matches(parse_query(TRIANGLE.read_text()), edges))
    assert main(["run", str(TRIANGLE), "-i", str(stream), "--engine", "local", "--count",
                 "--max-matches", "1", "--rejects", str(tmp_path / "rejects.jsonl")]) == 0
    out = capsys.readouterr().out
    assert f"{expected:,} matches" in out and "--count" in out


@pytest.mark.parametrize("extra", [["-o", "m.jsonl"], ["--draw", "2"], ["--report", "r.html"],
                                   ["--timeline", "t.png"]])
def test_count_refuses_what_it_would_leave_empty(tmp_path, capsys, extra, monkeypatch):
    monkeypatch.chdir(tmp_path)
    stream = tmp_path / "edges.txt"
    write_repeated(stream, 1)
    assert main(["run", str(TRIANGLE), "-i", str(stream), "--engine", "local", "--count",
                 *extra]) == 2
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert "--count" in line and extra[0] in line
    assert not (tmp_path / extra[1]).exists()


def test_max_matches_must_be_a_positive_number(tmp_path, capsys):
    stream = tmp_path / "edges.txt"
    write_repeated(stream, 1)
    assert main(["run", str(TRIANGLE), "-i", str(stream), "--engine", "local",
                 "--max-matches", "0"]) == 2
    assert "--max-matches" in capsys.readouterr().err


@pytest.mark.spark
def test_a_spark_run_past_max_matches_stops_alike(tmp_path, capsys, spark):
    stream = tmp_path / "edges.txt"
    write_repeated(stream, 6)
    target = tmp_path / "m.jsonl"
    code = main(["run", str(TRIANGLE), "-i", str(stream), "-o", str(target),
                 "--max-matches", "50", "--summary", "json", "--master", "local[2]",
                 "--rejects", str(tmp_path / "rejects.jsonl")])
    captured = capsys.readouterr()
    assert code == 3
    assert "--max-matches 50" in captured.err.strip().splitlines()[-1]
    assert last_json(captured.out)["stopped"] == "--max-matches 50"
    assert records(target, "jsonl") == 50


def test_subscribe_counts_and_stops_alike(tmp_path, capsys):
    """Subscriptions (another engine, whose pushes return their matches at once): the
    count equals the records written, and a bound below them stops the run."""
    subs, seq = EXAMPLES / "subs" / "figure3.subs", EXAMPLES / "subs" / "figure3.seq"
    base = ["subscribe", str(subs), "--input", str(seq), "--summary", "json",
            "--rejects", str(tmp_path / "rejects.jsonl")]
    assert main([*base, "-o", str(tmp_path / "all.jsonl")]) == 0
    written = records(tmp_path / "all.jsonl", "jsonl")
    capsys.readouterr()
    assert main([*base, "--count"]) == 0
    assert last_json(capsys.readouterr().out)["matches"] == written > 2
    assert main([*base, "-o", str(tmp_path / "two.jsonl"), "--max-matches", "2"]) == 3
    assert "--max-matches 2" in capsys.readouterr().err
    assert records(tmp_path / "two.jsonl", "jsonl") == 2
