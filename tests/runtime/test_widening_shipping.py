"""What window widening on Spark sends its tasks (graphcep.runtime.spark.widening),
without a JVM: a stand-in for the Spark context pickles each task as ``parallelize``
sends it, counts the bytes and runs the tasks in this process.

Each task is sent its windows' records, each once, in a table of its own: what goes to
Spark grows with the stream's records, not with its windows times the stream (an Arrow
slice pickles with its parent's buffers, so a window sent as a slice of the stream
carries the whole stream). The rows are the in-process run's, and Theorem 1 holds
against the brute-force matcher (tests/oracle.py)."""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator

import numpy as np
import pyarrow as pa
import pytest

from graphcep import jobs
from graphcep.io.generator import generate_netflow
from graphcep.runtime.spark import widening as spark_widening
from graphcep.runtime.spark.widening import deal_cuts, run_widening_spark
from graphcep.runtime.widening import WindowCut, plan_cuts, plan_windows, planner, run_widening
from tests.oracle import brute_force_matches
from tests.paths import EXAMPLES
from tests.widening_oracle import assert_theorem_1

S = 1_000_000


class Shipping:
    """A stand-in for a SparkSession: ``parallelize`` pickles each item (Spark sends each
    task its own), adds up the bytes, and stops with a failed assertion once they pass
    ``most`` (so a run that would ship gigabytes fails before holding them); the tasks
    then run in this process on the unpickled items."""

    defaultParallelism = 8

    def __init__(self, most: int) -> None:
        self.most, self.sent = most, 0

    @property
    def sparkContext(self) -> Shipping:
        return self

    def parallelize(self, items: list, slices: int) -> _Partitions:
        assert slices == len(items)  # one item a task
        received = []
        for item in items:
            blob = pickle.dumps(item)
            self.sent += len(blob)
            assert self.sent <= self.most, f"more than {self.most:,} bytes sent to Spark"
            received.append(pickle.loads(blob))
        return _Partitions(received)


class _Partitions:
    def __init__(self, items: list) -> None:
        self.items = items

    def mapPartitions(self, work: Callable[[Iterator], Iterator]) -> _Partitions:  # noqa: N802
        return _Partitions([out for item in self.items for out in work(iter([item]))])

    def collect(self) -> list:
        return self.items


def triangle():
    """The temporal triangle within 10 s (examples/triangle.sal)."""
    return jobs.load(str(EXAMPLES / "triangle.sal"), {})


def stream_bytes(edges: pa.Table) -> int:
    return len(pickle.dumps(edges.combine_chunks()))


def figures(stats) -> list[dict]:
    return [{k: v for k, v in level.as_dict().items() if k != "detector_seconds"}
            for level in stats.levels]


@pytest.mark.parametrize("edges", [600, 2400])
def test_spark_is_sent_a_few_times_the_stream_not_windows_times_the_stream(edges):
    """The netflows of ``gen netflow --rate 0.5`` with their VAST attributes (a host for
    15 flows): about three windows a record. A window sent as a slice of the stream
    pickles with the whole stream: windows x stream, hundreds of streams here."""
    flows = generate_netflow(edges, edges // 15, "0.5", 3)
    most = 8 * stream_bytes(flows)
    shipping = Shipping(most)
    remote, remote_stats = run_widening_spark(shipping, triangle(), flows, keep=64, base_us=S)
    windows = sum(level.windows for level in remote_stats.levels)
    assert windows > 100  # each window sent with the stream would be > 100 streams
    assert 0 < shipping.sent <= most
    local, local_stats = run_widening(triangle(), flows, keep=64, base_us=S)
    assert remote.equals(local) and figures(remote_stats) == figures(local_stats)


def test_tasks_cut_from_their_records_find_the_in_process_rows_and_theorem_1_holds():
    """A dense stream (5 hosts, an edge every 2 s): triangles within 10 s, found in
    windows of levels 2 to 4; tasks of one window up to all of them."""
    flows = generate_netflow(600, 5, "0.5", 11)
    truth = brute_force_matches(triangle().query, flows.select(
        ["t", "src", "dst", "dur", "seq"]).to_pylist())
    local, _ = run_widening(triangle(), flows, keep=4, base_us=S)
    for tasks in (1, 13):
        remote, _ = run_widening_spark(Shipping(1 << 30), triangle(), flows, keep=4,
                                       base_us=S, tasks=tasks)
        assert remote.equals(local)
    found = [tuple(e["seq"] for e in row) for row in local.column("edges").to_pylist()]
    assert len(truth) > 20 and set(local.column("pww_level").to_pylist()) != {0}
    position = {seq: i for i, seq in enumerate(flows.column("seq").to_pylist())}
    assert_theorem_1(found, truth, lambda m: max(position[s] for s in m)
                     - min(position[s] for s in m) + 1 <= 4)


@pytest.mark.parametrize("at_a_time", [1 << 16, 7])
def test_cuts_are_the_planners_windows_as_row_numbers(monkeypatch, at_a_time):
    """Whether the records are cut at once or 7 at a time (batches of 10 s hold about 5
    records, so cuts fall inside batches)."""
    monkeypatch.setattr(planner, "CUT_RECORDS", at_a_time)
    flows = generate_netflow(400, 8, "0.5", 5)
    job = triangle()
    windows, _ = plan_windows(job.orient, flows, keep=5, base_us=10 * S)
    records, cuts, _ = plan_cuts(job.orient, flows, keep=5, base_us=10 * S)
    assert [(c.level, c.order) for c in cuts] == [(w.level, w.order) for w in windows]
    for cut, window in zip(cuts, windows, strict=True):
        assert cut.window(records).records.equals(window.records)


def test_windows_are_dealt_in_runs_of_neighbours_and_none_over_the_task_bound(monkeypatch):
    rng = np.random.default_rng(2)
    sizes = rng.integers(1, 50, 300)
    cuts = [WindowCut(0, i, np.arange(n)) for i, n in enumerate(sizes)]
    runs = deal_cuts(cuts, 4)
    assert len(runs) == 4 and [c for run in runs for c in run] == cuts
    loads = [sum(len(c.rows) for c in run) for run in runs]
    assert max(loads) - min(loads) <= 2 * sizes.max()  # about equal
    monkeypatch.setattr(spark_widening, "TASK_RECORDS", 500)
    runs = deal_cuts(cuts, 4)
    assert [c for run in runs for c in run] == cuts
    assert len(runs) >= sizes.sum() // 500
    assert all(sum(len(c.rows) for c in run) <= 500 + sizes.max() for run in runs)
    assert deal_cuts(cuts[:2], 8) == [[cuts[0]], [cuts[1]]] and deal_cuts([], 8) == []
