"""Cell hosts (:mod:`graphcep.runtime.streaming.cell_hosts`): a slot's host keeps the cells'
engines alive whichever task connects, its steps equal the brute-force matcher's matches,
and a host that died is started anew, its cells rebuilt from their state files."""

from __future__ import annotations

import os
import signal
import time

import pyarrow as pa

from graphcep.runtime.streaming.cell_hosts import alive, connect, socket_path
from graphcep.runtime.streaming.cells import (
    CellRunner,
    StateFiles,
    cell_grid,
    collect_outputs,
    edges_part,
    flush_cell,
    packed_rows,
    routed_rows,
)
from tests.oracle import brute_force_matches
from tests.runtime.test_spark_cells import S, keys, stream_batches, triangle_job
from tests.runtime.test_streaming import late_seqs


def host_steps(runner: CellRunner, batches, slot: int, hosts: list[int],
               kill_after: int) -> tuple[list[pa.Table], dict[int, bytes], list[tuple]]:
    """Each batch's cells stepped through host ``slot``, one connection a batch (a task
    each), the host killed after batch ``kill_after``; ``hosts`` gets the hosts' pids.
    The matches, the cells' states after the last batch, and (batch, cell, stats) per
    step."""
    stored: dict[int, bytes] = {}
    found, steps = [], []
    for number, batch in enumerate(batches):
        packed = packed_rows(routed_rows(edges_part(batch), runner.job, runner.shares))
        with connect(slot, runner) as host:
            assert host is not None
            for cell, payload in zip(packed.column("_cell").to_pylist(),
                                     packed.column("rows").to_pylist(), strict=True):
                out, stored[cell] = host.step(cell, stored.get(cell), [payload], number, -1)
                output = collect_outputs(out)  # the matches spilled to a file of the batch's
                steps.append((number, cell, output.stats[0]))
                hosts.append(steps[-1][2]["process"])
                found.extend(output.match_chunks())
        if number == kill_after:
            os.kill(hosts[-1], signal.SIGKILL)
            _wait_gone(hosts[-1])
    return found, stored, steps


def _wait_gone(pid: int) -> None:
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and alive(pid):
        time.sleep(0.05)


def test_a_host_keeps_the_engines_alive_and_a_dead_one_is_replaced(tmp_path):
    """Every connection is a task of its own, as Spark's workers make them: the host's
    engines serve every step but a cell's first; killed, the next task starts a new host
    whose first step of each cell rebuilds it from the cell's files. The matches are the
    brute-force matcher's, each once."""
    table, batches = stream_batches(600, 120)
    job = triangle_job()
    files = StateFiles(tmp_path / "cells")
    runner = CellRunner(job, cell_grid(job, 8), 2 * S, pa.schema([]), files)
    slot, hosts = 1000 + os.getpid() % 1000, []  # a slot of this test's own
    try:
        found, stored, steps = host_steps(runner, batches, slot, hosts, kill_after=2)
    finally:
        for pid in set(hosts):
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
        socket_path(slot).unlink(missing_ok=True)  # the killed host could not
    found.extend(flush_cell(job, runner.shares, cell, files.read(blob), files).matches
                 for cell, blob in stored.items())
    late = late_seqs(batches, 2 * S)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    got = keys(found)
    assert len(got) == len(set(got)), "a match was reported twice"
    assert set(got) == brute_force_matches(job.query, on_time)
    before = {pid for number, _, stats in steps if number <= 2 for pid in [stats["process"]]}
    after = {stats["process"] for number, _, stats in steps if number > 2}
    assert len(before) == len(after) == 1 and before != after and os.getpid() not in before
    restored = [(number, cell) for number, cell, stats in steps if stats["restored"]]
    first_after = {}
    for number, cell, _ in steps:
        if number > 2:
            first_after.setdefault(cell, number)
    assert sorted(restored) == sorted((n, c) for c, n in first_after.items())  # no other
