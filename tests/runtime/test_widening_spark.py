"""Progressive window widening in batch on Spark (graphcep.runtime.spark.widening): the
same match rows, in the same order, and the same per-level figures as the in-process
run, for a SAL triangle and a ν-expression on streams with slow instances injected."""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from graphcep import jobs
from graphcep.cli import main
from graphcep.io.formats import ReaderOptions
from graphcep.io.readers import guess_format, read_edges
from graphcep.jobs import as_job
from graphcep.lang.nu import parse_nu
from graphcep.lang.sequences import parse_subscriptions
from graphcep.patterns.subgraph import QueryBuilder
from graphcep.runtime.spark.widening import run_widening_spark
from graphcep.runtime.widening import run_widening
from tests.oracle import brute_force_matches
from tests.paths import EXAMPLES

pytestmark = pytest.mark.spark

S = 1_000_000
#: a temporal triangle with no time bound: only the windows bound it
TRIANGLE = (QueryBuilder("triangle").edge("a", "e1", "b").edge("b", "e2", "c")
            .edge("c", "e3", "a").before("e1", "e2").before("e2", "e3").build())
NU = "#X ~> #Y . Y ~> #Z . Z ~> X"


def slow_stream(seed: int, background: int = 300, horizon_s: int = 200) -> pa.Table:
    """Background edges among a few hosts (which close triangles of their own) and
    triangles injected with hops from a millisecond to a minute apart."""
    rng = np.random.default_rng(seed)
    t = rng.integers(0, horizon_s * S, background)
    src, dst = rng.integers(0, 8, background), rng.integers(0, 8, background)
    rows = [(int(a), f"h{s}", f"h{d}") for a, s, d in zip(t, src, dst, strict=True) if s != d]
    for i in range(12):
        start, gap = int(rng.integers(0, horizon_s * S)), int(10 ** rng.integers(3, 8))
        rows += [(start, f"u{i}", f"v{i}"), (start + gap, f"v{i}", f"w{i}"),
                 (start + 2 * gap, f"w{i}", f"u{i}")]
    t, src, dst = zip(*sorted(rows), strict=True)
    return pa.table({"t": list(t), "src": list(src), "dst": list(dst)})


#: subscriptions on each source's destinations (positions numbered over the whole stream)
SUBS = "pingpong: @x.@y.@x\nback: @x.@x"
JOBS = {"sal": lambda: as_job(TRIANGLE), "nu": lambda: as_job(parse_nu(NU, "triangle")),
        "subs": lambda: as_job(parse_subscriptions(SUBS, "subs"))}


def figures(stats) -> list[dict]:
    return [{k: v for k, v in level.as_dict().items() if k != "detector_seconds"}
            for level in stats.levels]


@pytest.mark.parametrize(("keep", "base_us"), [(3, S), (8, S // 10)])
@pytest.mark.parametrize("kind", sorted(JOBS))
def test_spark_reports_the_in_process_rows_and_figures(spark, kind, keep, base_us):
    edges = slow_stream(keep)
    local, local_stats = run_widening(JOBS[kind](), edges, keep=keep, base_us=base_us)
    remote, remote_stats = run_widening_spark(spark, JOBS[kind](), edges, keep=keep,
                                              base_us=base_us)
    assert local.num_rows > 0 and set(local.column("pww_level").to_pylist()) != {0}
    assert remote.equals(local)  # same rows, fields and order
    assert figures(remote_stats) == figures(local_stats)
    assert (remote_stats.edges, remote_stats.matches) == (local_stats.edges, local.num_rows)


def test_a_duration_bound_and_a_spark_frame_give_the_in_process_rows(spark):
    edges = slow_stream(7)
    local, local_stats = run_widening(as_job(TRIANGLE), edges, keep=4, base_us=S,
                                      max_duration_us=10 * S)
    remote, remote_stats = run_widening_spark(spark, as_job(TRIANGLE),
                                              spark.createDataFrame(edges), keep=4,
                                              base_us=S, max_duration_us=10 * S, tasks=3)
    assert remote.equals(local) and figures(remote_stats) == figures(local_stats)


def test_an_empty_stream_runs_no_task(spark):
    edges = pa.table({"t": pa.array([], pa.int64()), "src": pa.array([], pa.string()),
                      "dst": pa.array([], pa.string())})
    matches, stats = run_widening_spark(spark, as_job(TRIANGLE), edges, keep=2, base_us=S)
    assert matches.num_rows == 0 and stats.edges == 0


def test_the_cli_runs_pww_on_spark_by_default_and_equals_the_local_engine(spark, tmp_path,
                                                                          capsys):
    query = tmp_path / "triangle.nu"
    query.write_text(NU + "\n")
    edges = slow_stream(3)
    csv = tmp_path / "e.csv"
    csv.write_text("t,src,dst\n" + "".join(
        f"{t / S},{s},{d}\n" for t, s, d in zip(*(edges.column(c).to_pylist()
                                                   for c in ("t", "src", "dst")), strict=True)))
    runs = {}
    for engine in ("default", "local"):
        out = tmp_path / f"{engine}.jsonl"
        args = ["run", str(query), "-i", str(csv), "--pww", "5", "--pww-base", "0.5",
                "-o", str(out), "--summary", "json", "--rejects", str(tmp_path / "r.jsonl")]
        assert main(args + ([] if engine == "default" else ["--engine", "local"])) == 0
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        levels = [{k: v for k, v in s.items() if k != "detector_seconds"}
                  for s in summary["pww_levels"]]
        runs[engine] = (summary["engine"], summary["matches"], levels,
                        sorted(rows, key=lambda r: r["match_id"]))
    assert runs["default"][0] == "spark" and runs["local"][0] == "local"
    assert runs["default"][1] > 0 and runs["default"][1:] == runs["local"][1:]


def test_cli_pww_on_generated_netflows_equals_the_local_engine_and_the_oracle(
        spark, tmp_path, capsys):
    """``gen netflow`` flows (every VAST attribute, which made each window sent to Spark
    carry the whole stream) and examples/triangle.sal under ``--pww 64``: the default
    engine writes the rows of ``--engine local``, in order, and they are the triangles
    the brute-force matcher finds (each spans at most a few of the 64 records)."""
    flows = tmp_path / "bg.csv"
    assert main(["gen", "netflow", "--edges", "300", "--vertices", "5", "--rate", "0.5",
                 "--seed", "11", "-o", str(flows)]) == 0
    rows = {}
    for engine in ("default", "local"):
        out = tmp_path / f"{engine}.jsonl"
        args = ["run", str(EXAMPLES / "triangle.sal"), "--input", str(flows), "--pww", "64",
                "-o", str(out), "--rejects", str(tmp_path / "r.jsonl")]
        assert main(args + ([] if engine == "default" else ["--engine", "local"])) == 0
        rows[engine] = [json.loads(line) for line in out.read_text().splitlines()]
    capsys.readouterr()
    assert rows["default"] == rows["local"]
    edges = read_edges([str(flows)], guess_format(str(flows)), ReaderOptions()).edges
    query = jobs.load(str(EXAMPLES / "triangle.sal"), {}).query
    truth = brute_force_matches(query, edges.select(["t", "src", "dst", "dur", "seq"])
                                .to_pylist())
    found = [tuple(e["seq"] for e in row["edges"]) for row in rows["default"]]
    assert len(truth) > 10 and sorted(found) == sorted(truth)
