"""``graphcep run --max-matches`` and ``--count``: a run past the bound stops with one
line and exit status 3, what it wrote being complete records in every output; counting
gives the number of records a run writes, and the oracle's."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from graphcep.lang.sal import parse_query
from graphcep.runtime import local
from tests.oracle import brute_force_matches, cycles_in_order
from tests.paths import EXAMPLES, ROOT

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


#: two SUBGRAPHs of one program: the triangle, and a link answered within 10 s
TWO_QUERIES = """
SUBGRAPH triangle {
    x1 e1 x2; x2 e2 x3; x3 e3 x1;
    starttime(e3) - starttime(e1) <= 10;
    starttime(e1) < starttime(e2);
    starttime(e2) < starttime(e3);
}
SUBGRAPH answer {
    x1 e1 x2; x2 e2 x1;
    starttime(e1) < starttime(e2);
    starttime(e2) - starttime(e1) <= 10;
}
"""

#: the run in a process whose address space cannot hold one push's matches as records
UNDER_A_MEMORY_LIMIT = """
import resource, sys
resource.setrlimit(resource.RLIMIT_AS, (3 * 2**30, 3 * 2**30))
sys.path[:0] = [{src!r}]
from graphcep.cli import main
sys.exit(main(sys.argv[1:]))
"""


def run_under_a_memory_limit(args: list[str]) -> subprocess.CompletedProcess:
    script = UNDER_A_MEMORY_LIMIT.format(src=str(ROOT / "src"))
    return subprocess.run([sys.executable, "-c", script, *args], capture_output=True,
                          text=True, timeout=600)


def several_queries(tmp_path: Path, how: str) -> tuple[list[str], int]:
    """The queries' arguments (a program of two SUBGRAPHs, or a rules directory of them
    and the triangle) and how many matches the six edges repeated 400 times give them all:
    64,480,000, records of gigabytes, every edge within one push."""
    if how == "program":
        (tmp_path / "two.sal").write_text(TWO_QUERIES)
        return [str(tmp_path / "two.sal")], cycles_in_order(SIX_EDGES * 400, 3) + \
            cycles_in_order(SIX_EDGES * 400, 2)
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "triangle.sal").write_text(TRIANGLE.read_text())
    return ["--rules", str(rules)], cycles_in_order(SIX_EDGES * 400, 3)


@pytest.mark.parametrize("how", ["program", "rules"])
def test_several_queries_stop_at_max_matches_within_bounded_memory(tmp_path, how):
    """Each query's engine hands its matches out in chunks: the bound is checked chunk by
    chunk, not after one push made every match (which this process cannot hold)."""
    queries, total = several_queries(tmp_path, how)
    write_repeated(tmp_path / "edges.txt", 400)
    target = tmp_path / "m.jsonl"
    done = run_under_a_memory_limit(
        ["run", *queries, "-i", str(tmp_path / "edges.txt"), "--engine", "local",
         "--max-matches", "1000", "-o", str(target), "--summary", "json",
         "--rejects", str(tmp_path / "rejects.jsonl")])
    assert done.returncode == 3, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "--max-matches 1000" in line and "1,000 written" in line
    assert last_json(done.stdout)["matches"] == records(target, "jsonl") == 1000 < total


@pytest.mark.parametrize("how", ["program", "rules"])
def test_several_queries_count_what_the_oracle_counts_within_bounded_memory(tmp_path, how):
    queries, total = several_queries(tmp_path, how)
    write_repeated(tmp_path / "edges.txt", 400)
    done = run_under_a_memory_limit(
        ["run", *queries, "-i", str(tmp_path / "edges.txt"), "--engine", "local",
         "--count", "--summary", "json", "--rejects", str(tmp_path / "rejects.jsonl")])
    assert done.returncode == 0, done.stderr[-2000:]
    summary = last_json(done.stdout)
    assert summary["counted"] is True and summary["matches"] == total


def test_rules_count_equals_the_records_they_write_and_the_brute_force(tmp_path, capsys):
    """A rules directory of two kinds: the count equals the records the rules write, each
    rule's those of the brute-force oracle (SAL) and of dynamic programming (ν)."""
    rules = tmp_path / "rules"
    rules.mkdir()
    (rules / "triangle.sal").write_text(TRIANGLE.read_text())
    (rules / "answer.nu").write_text("<#X ~> #Y . Y ~> X>[0, 10]")
    edges = write_repeated(tmp_path / "edges.txt", 7)
    expected = {"triangle.sal": len(brute_force_matches(parse_query(TRIANGLE.read_text()),
                                                        edges)),
                "answer.nu": cycles_in_order(SIX_EDGES * 7, 2)}
    base = ["run", "--rules", str(rules), "-i", str(tmp_path / "edges.txt"), "--engine",
            "local", "--summary", "json", "--rejects", str(tmp_path / "rejects.jsonl")]
    assert main([*base, "--count"]) == 0
    counted = last_json(capsys.readouterr().out)
    assert main([*base, "-o", str(tmp_path / "m.jsonl")]) == 0
    written = [json.loads(line)["rule"]
               for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert {name: written.count(name) for name in expected} == expected
    assert counted["counted"] is True
    assert counted["matches"] == len(written) == sum(expected.values())


def test_a_nu_run_stops_at_max_matches_within_bounded_memory(tmp_path):
    """40,000 questions, then 40,000 answers each closing all of them, in one push:
    1,600,000,000 matches, which the game hands out between links."""
    (tmp_path / "back.nu").write_text("<#X ~> #Y . Y ~> X>[0, 10]")
    pairs = [("a", "b")] * 40_000 + [("b", "a")] * 40_000
    (tmp_path / "links.txt").write_text(
        "".join(f"{s} {d} {i / 10_000:.4f}\n" for i, (s, d) in enumerate(pairs)))
    target = tmp_path / "m.jsonl"
    done = run_under_a_memory_limit(
        ["run", str(tmp_path / "back.nu"), "-i", str(tmp_path / "links.txt"), "--engine",
         "local", "--max-matches", "1000", "-o", str(target), "--summary", "json",
         "--rejects", str(tmp_path / "rejects.jsonl")])
    assert done.returncode == 3, done.stderr[-2000:]
    (line,) = done.stderr.strip().splitlines()
    assert "--max-matches 1000" in line
    assert last_json(done.stdout)["matches"] == records(target, "jsonl") == 1000


def test_a_stream_counts_its_matches_in_the_driver_only(tmp_path, capsys):
    incoming = tmp_path / "in"
    incoming.mkdir()
    code = main(["stream", str(TRIANGLE), "--source", str(incoming), "--checkpoint",
                 str(tmp_path / "ck"), "--output", str(tmp_path / "out") + "/", "--once",
                 "--matching", "executors", "--max-matches", "5"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 2
    assert "--matching executors" in line and "--max-matches" in line
