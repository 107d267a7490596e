"""The default path: what a run loads, how Parquet is read, where a run's plan runs, what
``--profile`` reports. Matches are checked against the brute-force oracle."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from graphcep.io.formats import ReaderOptions
from graphcep.io.generator import generate_netflow, write_edges
from graphcep.io.readers import read_edges
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from tests.oracle import brute_force_matches

SRC = Path(__file__).resolve().parents[2] / "src"

TRIANGLE = """{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e3) - starttime(e1) <= 10;
                starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }"""
#: a predicate on an attribute column, which a projected Parquet read must keep
PORTED = """{ x1 e1 x2; x2 e2 x3; starttime(e1) < starttime(e2);
              starttime(e2) - starttime(e1) <= 4; e2.DestPort != 80; }"""


def seqs(matches: pa.Table) -> list[tuple[int, ...]]:
    """Each match's edge seqs in query-edge order, duplicates kept."""
    return [tuple(e["seq"] for e in edges) for edges in matches.column("edges").to_pylist()]


def oracle(query_text: str, table: pa.Table) -> set[tuple[int, ...]]:
    return brute_force_matches(parse_program(query_text).queries[0], table.to_pylist())


@pytest.fixture(scope="module")
def small() -> pa.Table:
    """240 edges over 12 hosts, 20 edges/s (12 s: longer than one extent of the triangle)."""
    return generate_netflow(240, 12, 20, seed=5)


def run_child(code: str) -> str:
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True, env={"PYTHONPATH": str(SRC), "PATH": "/usr/bin:/bin"})
    return done.stdout.strip()


# -- what a run loads ---------------------------------------------------------------------


def test_the_cli_imports_no_compiler():
    """numba loads beside the reading of a run (or when a command counts), never with the
    CLI itself: its import is a sixth of a second of every command's start-up."""
    assert run_child("import sys, graphcep.cli; "
                     "print(sorted(m for m in sys.modules if m.split('.')[0] in "
                     "('numba', 'llvmlite', 'pyspark', 'matplotlib')))") == "[]"


def test_a_local_sal_run_loads_no_pandas_spark_or_ddst_kernel(small, tmp_path):
    """Nothing of pandas or Spark, nothing of DDST but its option names (``schema``)."""
    data = tmp_path / "s.parquet"
    write_edges(small, data, "parquet")
    query = tmp_path / "q.sal"
    query.write_text(TRIANGLE)
    loaded = run_child(
        "import sys, contextlib, io\n"
        "from graphcep.cli import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    assert main(['run', {str(query)!r}, '--input', {str(data)!r}, '--engine', "
        f"'local', '-o', {str(tmp_path / 'm.jsonl')!r}]) == 0\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'pyspark') "
        "or m.startswith('graphcep.engines.ddst.') and m != 'graphcep.engines.ddst.schema'))\n")
    assert loaded == "[]"
    rows = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    found = sorted(tuple(e["seq"] for e in row["edges"]) for row in rows)
    assert found == sorted(oracle(TRIANGLE, small))


def test_pyarrow_sees_pandas_once_pandas_is_imported():
    """Deferred, pandas still converts as pandas once something imports it."""
    out = run_child(
        "from graphcep.lazy_pandas import defer_pandas\n"
        "defer_pandas()\n"
        "import sys, pyarrow as pa\n"
        "pa.array([1, 2]); assert 'pandas' not in sys.modules\n"
        "import pandas as pd\n"
        "print(pa.array(pd.Series(pd.Categorical(['a', 'b', 'a']))).type, "
        "pa.table(pd.DataFrame({'x': [1]})).num_rows)\n")
    assert out == "dictionary<values=string, indices=int8, ordered=0> 1"


def test_kernels_come_from_the_cache_in_a_fresh_process():
    """After one process compiled (or loaded) them, the next loads every kernel the
    triangle uses from numba's cache: nothing is compiled again."""
    code = ("from graphcep.engines.subgraph import kernel\n"
            "from graphcep.engines.subgraph.engine import load_kernels\n"
            "load_kernels()\n"
            "used = [f for f in vars(kernel).values() if hasattr(f, 'stats') "
            "and f.signatures]\n"
            "print(len(used), sum(sum(f.stats.cache_misses.values()) for f in used))\n")
    run_child(code)
    used, misses = run_child(code).split()
    assert int(used) >= 5 and misses == "0"


# -- Parquet read column-projected ----------------------------------------------------------


def test_projected_parquet_read_is_the_full_read_of_those_columns(small, tmp_path):
    bad = small.set_column(0, "t", pa.array([None, *small.column("t").to_pylist()[1:]],
                                            pa.int64()))
    data = tmp_path / "s.parquet"
    pq.write_table(bad, data)
    full = read_edges(data, "parquet")
    kept = read_edges(data, "parquet", ReaderOptions(attributes=("DestPort",)))
    assert kept.edges.column_names == ["t", "src", "dst", "dur", "seq", "DestPort"]
    assert kept.edges.equals(full.edges.select(kept.edges.column_names))
    assert kept.rejects.equals(full.rejects)  # the reject shows its whole row
    assert "SourcePort" in kept.rejects.column("text")[0].as_py()


def test_cli_reads_the_predicates_fields_and_matches_the_oracle(small, tmp_path):
    data = tmp_path / "s.parquet"
    write_edges(small, data, "parquet")
    query = tmp_path / "q.sal"
    query.write_text(PORTED)
    out = tmp_path / "m.parquet"
    assert main(["run", str(query), "--input", str(data), "--engine", "local",
                 "-o", str(out)]) == 0
    found = seqs(pq.read_table(out))
    assert len(found) == len(set(found)) and set(found) == oracle(PORTED, small)


# -- where the plan runs ------------------------------------------------------------------


@pytest.mark.spark
def test_a_table_the_driver_holds_is_matched_there(spark, small):
    from graphcep.runtime.spark import run_spark

    job = SubgraphJob.create(parse_program(TRIANGLE))
    matches, stats = run_spark(spark, job, small)
    assert (stats.extra["strategy"], stats.extra["where"]) == ("single", "driver")
    assert sorted(seqs(matches)) == sorted(oracle(TRIANGLE, small))


@pytest.mark.spark
def test_a_table_split_into_shards_goes_to_spark(spark, small):
    """With the size rule off (the tests' default), 12 s of stream is 4 shards of 3 s."""
    from graphcep.runtime.spark import run_spark

    job = SubgraphJob.create(parse_program(TRIANGLE.replace("<= 10", "<= 3")))
    matches, stats = run_spark(spark, job, small, shards=4)
    assert (stats.extra["strategy"], stats.extra["shards"]) == ("shuffle", 4)
    assert any(name.startswith("  tasks: warm-up") for name in stats.phases)
    found = seqs(matches)
    assert len(found) == len(set(found))
    assert set(found) == oracle(TRIANGLE.replace("<= 10", "<= 3"), small)


def test_auto_runs_small_streams_as_one_replay(monkeypatch):
    from graphcep.jobs.base import Extent
    from graphcep.runtime.spark import replay

    monkeypatch.setattr(replay, "MIN_SHARD_EDGES", 1_000_000)
    job = SubgraphJob.create(parse_program(TRIANGLE))
    ordered = [{"p": p, "t_min": 100 * p, "t_max": 100 * p + 99, "n": n} for p, n in
               enumerate([400_000] * 4)]  # 1.6 M edges: fewer than two parts
    assert replay.choose_strategy(ordered, Extent(10), job, None, None) == "single"
    ordered = [{**r, "n": 600_000} for r in ordered]  # 2.4 M edges: two parts at least
    assert replay.choose_strategy(ordered, Extent(10), job, None, None) == "partitions"
    small = [{**r, "n": 10} for r in ordered]
    assert replay.choose_strategy(small, Extent(10), job, 4, None) == "shuffle"  # --shards


# -- --profile ------------------------------------------------------------------------------


@pytest.mark.parametrize("engine", ["local", pytest.param("spark", marks=pytest.mark.spark)])
def test_profile_names_the_phases(engine, small, tmp_path, capsys, request):
    if engine == "spark":
        request.getfixturevalue("spark")
    data = tmp_path / "s.parquet"
    write_edges(small, data, "parquet")
    query = tmp_path / "q.sal"
    query.write_text(TRIANGLE)
    args = ["run", str(query), "--input", str(data), "--profile", "--summary", "json",
            "-o", str(tmp_path / "m.parquet")]
    if engine == "local":
        args += ["--engine", "local"]
    else:
        args += ["--master", "local[2]"]
    assert main(args) == 0
    captured = capsys.readouterr()
    phases = json.loads(captured.out.strip().splitlines()[-1])["phases"]
    wanted = {"local": ["reading the input", "matching (engine, match records)",
                        "writing matches and rejects"],
              "spark": ["spark start-up (JVM, session)", "replay in the driver (single)",
                        "  matching (engine, match records)", "writing matches and rejects"]}
    assert all(name in phases for name in wanted[engine]), phases
    assert "phase" in captured.err and "total" in captured.err
    assert sorted(seqs(pq.read_table(tmp_path / "m.parquet"))) == sorted(
        oracle(TRIANGLE, small))
