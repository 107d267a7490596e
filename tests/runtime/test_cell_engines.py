"""Partition-parallel streaming: HyperCube cells in worker processes.

Oracle: the brute-force matcher on the edges that are not late (as in test_streaming), and
the single-engine operator; cell counts 2, 8 and 27 (one cell, a 2x2x2 and a 3x3x3 grid
for the triangle), with out-of-order arrival, restarts from the checkpoint and a re-run
batch.
"""

from __future__ import annotations

import pyarrow as pa
import pytest

from graphcep.events import table_to_matches
from graphcep.io.generator import generate_netflow
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.runtime.streaming.cell_engines import CellEngines
from graphcep.runtime.streaming.driver import StreamOperator
from tests.oracle import brute_force_matches
from tests.runtime.test_streaming import FEATURE_QUERY, TRIANGLE, arrival_batches, late_seqs

S = 1_000_000
FAN_OUT = """{ hub e1 a; hub e2 b; starttime(e1) < starttime(e2);
               starttime(e2) - starttime(e1) <= 2; }"""


def match_keys(tables: list[pa.Table]) -> list[tuple[int, ...]]:
    """Each match as its edges' seqs in query-edge order (the oracle's form), sorted."""
    return sorted(tuple(e.seq for e in m.edges) for t in tables for m in table_to_matches(t))


def run_operator(job: SubgraphJob, batches: list[pa.Table], lateness: int, directory=None,
                 restart_at=(), rerun=(), **cells) -> list[pa.Table]:
    """Matches of ``batches`` (flushed at the end); operators replaced before the batches
    in ``restart_at`` (a restart from the checkpoint), batches in ``rerun`` run twice."""
    found: dict[int, pa.Table] = {}  # by batch id: a re-run batch replaces its output

    def operator() -> StreamOperator:
        return StreamOperator(job, lateness_us=lateness, checkpoint=directory,
                              on_matches=lambda m, b: found.__setitem__(b, m), **cells)

    ops = [operator()]
    try:
        for batch_id, batch in enumerate(batches):
            if batch_id in restart_at:
                ops.append(operator())
            if batch_id in rerun:
                ops[-1].process(batch_id, batch)
                ops.append(operator())  # it died after the sink write: Spark re-runs
            ops[-1].process(batch_id, batch)
        ops[-1].flush()
    finally:
        for op in ops:
            op.close()
    return list(found.values())


@pytest.fixture(scope="module")
def shuffled() -> tuple[pa.Table, list[pa.Table]]:
    table = generate_netflow(400, 80, 50, seed=7).select(["t", "src", "dst", "dur", "seq"])
    delays = [(i * 7919) % (3 * S) for i in range(table.num_rows)]  # up to 3 s out of order
    return table, arrival_batches(table, delays, list(range(0, 400, 40)))


@pytest.mark.parametrize("query", [TRIANGLE, FAN_OUT], ids=["triangle", "fan-out"])
@pytest.mark.parametrize("cells", [2, 8, 27])
def test_cells_match_exactly_like_one_engine(shuffled, query, cells):
    table, batches = shuffled
    job = SubgraphJob.create(parse_program(query)).bind(0)
    lateness = 2 * S
    late = late_seqs(batches, lateness)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    oracle = sorted(brute_force_matches(job.query, on_time))
    got = match_keys(run_operator(job, batches, lateness, cells=cells, processes=2))
    assert len(oracle) > 5, "the stream should hold matches"
    assert got == oracle  # each match once: no cell reports another's


def test_cells_restart_from_the_log_and_rerun_a_batch(shuffled, tmp_path):
    _, batches = shuffled
    job = SubgraphJob.create(parse_program(TRIANGLE)).bind(0)
    straight = match_keys(run_operator(job, batches, 2 * S))
    restarted = match_keys(run_operator(job, batches, 2 * S, tmp_path / "ckpt",
                                        restart_at=(3, 6), rerun=(8,), cells=8, processes=2))
    assert straight and restarted == straight


def test_cells_need_a_query_without_features():
    with pytest.raises(ValueError, match="vertex features"):
        CellEngines(SubgraphJob.create(parse_program(FEATURE_QUERY), fmt="vast"), cells=4)


def test_a_worker_whose_cells_get_no_edge_answers_with_no_match():
    """Two workers, eight cells, a push of one edge: one worker gets no row at all (as a
    stream's last, small flush often does) and must answer, not fail."""
    job = SubgraphJob.create(parse_program(FAN_OUT)).bind(0)
    one = generate_netflow(1, 5, 1, seed=3).select(["t", "src", "dst", "dur", "seq"])
    with CellEngines(job, cells=8, processes=2) as engines:
        assert engines.push(one).num_rows == 0
        assert engines.state_size()["edges"] >= 1
