"""Partition-parallel scaling of graphcep's engine on 1..16 worker processes, without Spark.

What it measures
----------------
On Spark every task of :func:`graphcep.runtime.spark.run_spark` replays one *time shard*
(:func:`graphcep.runtime.spark.replay_shard`: the edges of a time range plus, as warm-up,
the edges within one query extent before it) or one HyperCube *cell*
(:func:`graphcep.runtime.hypercube.replay_cell`: the edges routed to the cell, keeping the
matches whose home it is). This benchmark runs exactly those task functions in ``P`` worker
processes (``--procs``, default the powers of two up to the core count) and reports, for
each ``P``: wall seconds, stream edges per wall second, speedup and efficiency against
``P = 1``, load balance, and the number of matches -- which must equal the single-process
count (and the same checksum of match ids) for every ``P``.

Why
---
On the 2-core development machine the Spark rows of ``bench/triangles.py`` mostly measure
Spark's overheads (scheduling, the JVM-to-Python transfer, collecting matches). What a
cluster multiplies is the part measured here: independent engines on independent
partitions. It needs only numpy, pyarrow and numba (no pyspark, no Java), so it runs as
``PYTHONPATH=src python -m bench.scaling`` on any many-core machine.

How
---
* Stream: S2's parameters (25,000 vertices, 60,000 edges/s) at ``--edges`` edges, made by
  :func:`graphcep.io.generator.generate_netflow` in chunks of 1M edges (chunk ``k`` with
  seed ``1 + k``; start times continue at the same rate, so the first 1M edges are S2
  itself), core columns only, cached under ``bench/data/``. Query: the temporal triangle
  of ``examples/triangle.sal`` (W = 10 s).
* Untimed, the parent does what Spark's shuffle would: it cuts ``P * --tasks-per-proc``
  time shards as ``_replay_shuffled`` does (:func:`~graphcep.runtime.spark.plan_shards`,
  shards at least one extent long, each with the extent before it as warm-up), or routes
  edges to the cells of :func:`~graphcep.runtime.hypercube.choose_shares`'s grid for that
  many cells (:func:`~graphcep.runtime.hypercube.route`), and writes each task's input as an
  Arrow IPC file. Task ``i`` goes to worker ``i mod P``.
* Each worker (a ``spawn``-ed process: one engine thread, Arrow's CPU pool at one thread)
  reads its files into memory and replays a tiny stream through the same code (numba
  compilation), then waits. The timed region runs from the start signal to the end of the
  last worker (``time.perf_counter``, the system-wide monotonic clock); best of
  ``--repeat`` rounds. Workers return match counts and checksums, not match records.
* ``--ceiling`` separates the machine's share of lost efficiency from partitioning's: for
  each P, P processes run *the same* work at once -- a register-only loop (what the cores
  alone give: clock under load, shared physical cores) and one engine task on the
  stream's first ``--ceiling-edges`` edges (what the cores, caches and memory give to P
  engines). With no partitioning involved, any loss there is the machine's; the time
  shards' efficiency over it is what partitioning costs (warm-up copies, uneven shards).
"""

from __future__ import annotations

import argparse
import contextlib
import datetime
import functools
import multiprocessing
import os
import platform
import queue
import re
import sys
import tempfile
import threading
import time
import traceback
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa

from bench.triangles import (
    DATA_DIR,
    MIB,
    ROOT,
    add_record_arguments,
    record,
    shell,
    snapshot_source,
    source_state,
    triangle_query,
    use_source,
)

if TYPE_CHECKING:
    from multiprocessing.context import BaseContext

    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.runtime.hypercube import Shares

VERTICES = 25_000
RATE = 60_000  # edges per second of event time
SEED = 1
CHUNK = 1_000_000  # edges per generate_netflow call
CORE = ["t", "src", "dst", "dur", "seq"]
DEFAULT_EDGES = 12_000_000
TARGET_PROCS = 16
TARGET_RATE = 1_000_000
TARGET_SPEEDUP = 12.0
TARGET = (f"partition-parallel engine on {TARGET_PROCS} processes ≥ {TARGET_RATE:,} edges/s "
          f"with 1 → {TARGET_PROCS} scaling ≥ {TARGET_SPEEDUP:g}×")


def usable_cores() -> int:
    """Cores this process may run on (the affinity mask where the OS has one)."""
    if hasattr(os, "sched_getaffinity"):
        return len(os.sched_getaffinity(0))
    return os.cpu_count() or 1


# -- the stream --------------------------------------------------------------------------


def stream_path(edges: int) -> Path:
    return DATA_DIR / f"scaling-S2-e{edges}-v{VERTICES}-r{RATE}-s{SEED}.arrow"


def generate_stream(edges: int) -> pa.Table:
    """``edges`` edges with S2's parameters: ``generate_netflow`` in chunks of :data:`CHUNK`
    (chunk ``k`` seeded ``SEED + k``), start times and ``seq`` continued across chunks."""
    from graphcep.io.generator import arrival_times, generate_netflow

    times = arrival_times(edges, RATE)
    parts = []
    for k, first in enumerate(range(0, edges, CHUNK)):
        n = min(CHUNK, edges - first)
        part = generate_netflow(n, VERTICES, RATE, seed=SEED + k).select(CORE)
        part = part.set_column(0, "t", pa.array(times[first:first + n]))
        seq = np.arange(first + 1, first + n + 1, dtype=np.int64)
        parts.append(part.set_column(4, "seq", pa.array(seq)))
    return pa.concat_tables(parts).combine_chunks()


def write_ipc(table: pa.Table, path: Path) -> None:
    with pa.OSFile(str(path), "wb") as sink, pa.ipc.new_file(sink, table.schema) as writer:
        writer.write_table(table)


def read_ipc(path: Path | str) -> pa.Table:
    """An Arrow IPC file read fully into memory."""
    with pa.OSFile(str(path)) as source:
        return pa.ipc.open_file(source).read_all()


def load_stream(edges: int) -> pa.Table:
    """The stream from the cache, generated and cached on first use."""
    path = stream_path(edges)
    if not path.exists():
        DATA_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(f".tmp{os.getpid()}")
        write_ipc(generate_stream(edges), tmp)
        tmp.replace(path)
    return read_ipc(path)


#: A keyed query (``hub`` on every edge): HyperCube sends each edge to one cell.
FAN_OUT = """{ hub e1 a; hub e2 b; starttime(e1) < starttime(e2);
              starttime(e2) - starttime(e1) <= 0.1; }"""
#: ``--query`` name -> (what the report calls it, its RESULTS.md section markers' name)
QUERIES = {"triangle": ("triangle W = 10 s", "bench.scaling"),
           "fanout": ("keyed fan-out hub -> a, hub -> b within 0.1 s", "bench.scaling-fanout"),
           "nu-triangle": ("the triangle as a timed ν-expression (examples/nu/triangle.nu, "
                           "W = 10 s; compiled token game; time shards only)",
                           "bench.scaling-nu")}


def query_job(name: str, table: pa.Table) -> SubgraphJob:
    """The query as ``run_spark`` binds it: a job with the data's longest duration."""
    from graphcep.events import max_duration_of
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_program
    from graphcep.patterns.program import Program

    if name == "nu-triangle":
        from graphcep.jobs.nu import NuJob
        from graphcep.lang.nu import parse_nu_file

        # the state bound above the ~1.1M tokens a 10 s window of S2-rate traffic holds
        return NuJob(parse_nu_file(ROOT / "examples" / "nu" / "triangle.nu"),
                     max_tokens=20_000_000)
    program = Program(queries=[triangle_query()]) if name == "triangle" else parse_program(FAN_OUT)
    return SubgraphJob.create(program).bind(max_duration_of(table))


# -- cutting the work (the shuffle's stand-in, untimed) -----------------------------------


@dataclass(frozen=True)
class Task:
    """One Spark task's input: a time shard or a cell, as an Arrow IPC file."""

    kind: str  # "shard" or "cell"
    index: int  # shard number or cell id
    path: str
    rows: int


@dataclass
class Plan:
    """The tasks of one run and how the stream was cut."""

    strategy: str
    procs: int
    tasks: list[Task]
    layout: str
    prep_s: float
    shares: Shares | None = None

    def groups(self) -> list[list[Task]]:
        """Tasks per worker (task ``i`` to worker ``i mod P``); workers without one omitted."""
        per: list[list[Task]] = [[] for _ in range(self.procs)]
        for i, task in enumerate(self.tasks):
            per[i % self.procs].append(task)
        return [group for group in per if group]


def tagged_shard(table: pa.Table, shard: int, warm_lo: int, lo: int, hi: int) -> pa.Table:
    """Rows ``warm_lo:hi`` as a shuffled shard arrives in a task: ``_shard`` and ``_owned``
    (False for the warm-up rows ``warm_lo:lo``)."""
    rows = table.slice(warm_lo, hi - warm_lo)
    owned = np.arange(warm_lo, hi) >= lo
    rows = rows.append_column("_shard", pa.array(np.full(rows.num_rows, shard, np.int64)))
    return rows.append_column("_owned", pa.array(owned))


def shard_tables(table: pa.Table, extent: int, shards: int) -> tuple[list[pa.Table], int]:
    """Time shards of a stream-ordered table as ``_replay_shuffled`` cuts them: shard ``s``
    owns ``[t_min + s L, t_min + (s + 1) L)`` and warms up on the extent before it."""
    from graphcep.runtime.spark import plan_shards

    t = table.column("t").to_numpy()
    t_min, t_max = int(t[0]), int(t[-1])
    length = plan_shards(t_min, t_max, extent, shards)
    count = -(-(t_max - t_min + 1) // length)
    out = []
    for s in range(count):
        start = t_min + s * length
        lo, hi = (int(i) for i in np.searchsorted(t, [start, start + length]))
        warm_lo = int(np.searchsorted(t, start - extent)) if s else lo
        out.append(tagged_shard(table, s, warm_lo, lo, hi))
    return out, length


def cell_tables(table: pa.Table, job: SubgraphJob, budget: int) -> tuple[list[tuple[int, pa.Table]], Shares]:
    """Each cell's edges (stream order kept) for ``choose_shares``' grid of at most ``budget``
    cells; a one-cell grid is the whole stream, unrouted (as ``replay_cells`` runs it)."""
    from graphcep.runtime.hypercube import choose_shares, route

    shares = choose_shares(job.query, budget)
    if shares.cells == 1:
        return [(0, table)], shares
    cells, rows = route(table, job, shares)
    bounds = np.flatnonzero(np.diff(cells)) + 1
    parts = zip(np.split(cells, bounds), np.split(rows, bounds), strict=True)
    return [(int(c[0]), table.take(r)) for c, r in parts if len(c)], shares


def make_plan(strategy: str, procs: int, per_proc: int, table: pa.Table, job: SubgraphJob,
              workdir: Path) -> Plan:
    """Cut the stream for ``procs`` workers and write every task's input file."""
    started = time.perf_counter()
    shares = None
    if strategy == "time":
        shards, length = shard_tables(table, job.extent().size, procs * per_proc)
        inputs = list(enumerate(shards))
        layout = f"{len(shards)} shard(s) of {length / 1e6:g} s"
    else:
        inputs, shares = cell_tables(table, job, procs * per_proc)
        layout = f"{grid_text(shares)} cell(s), {len(inputs)} non-empty"
    prep_s = time.perf_counter() - started
    kind = "shard" if strategy == "time" else "cell"
    tasks = []
    for index, part in inputs:
        path = workdir / f"{kind}-{index}.arrow"
        write_ipc(part.select(job.needed_columns(part.column_names) + extra_columns(part)), path)
        tasks.append(Task(kind, index, str(path), part.num_rows))
    return Plan(strategy, procs, tasks, layout, prep_s, shares)


def grid_text(shares: Shares) -> str:
    return f"{'x'.join(str(s) for s in shares.shares)} = {shares.cells}"


def extra_columns(part: pa.Table) -> list[str]:
    return [c for c in ("_shard", "_owned") if c in part.column_names]


# -- the workers -------------------------------------------------------------------------


def run_task(job: SubgraphJob, shares: Shares | None, task: Task, table: pa.Table) -> pa.Table:
    """Exactly what one Spark task runs for a shard or a cell (or, for the machine's
    ceiling, :data:`SPIN_STEPS` steps of a register-only loop)."""
    if task.kind == "spin":
        spin_kernel()(SPIN_STEPS)
        return table.schema.empty_table()
    if task.kind == "shard":
        from graphcep.runtime.spark import replay_shard

        return pa.Table.from_batches(list(replay_shard(job, table)), job.output.schema)
    from graphcep.runtime.hypercube import replay_cell

    assert shares is not None
    return replay_cell(job, table, shares, task.index)


#: Steps of the register-only loop of the machine-ceiling runs (about a second).
SPIN_STEPS = 300_000_000


@functools.cache
def spin_kernel() -> Any:
    """A compiled loop that touches no memory: its scaling is the cores' own (clock
    frequency under load, shared physical cores), free of caches and memory bandwidth."""
    from numba import njit

    @njit(cache=False)
    def spin(steps: int) -> int:
        x = np.uint64(88172645463325252)
        for _ in range(steps):  # xorshift64*: each step needs the last, no closed form
            x ^= x >> np.uint64(12)
            x ^= x << np.uint64(25)
            x ^= x >> np.uint64(27)
            x *= np.uint64(2685821657736338717)
        return x

    return spin


def checksum(matches: pa.Table) -> int:
    """Order-free checksum of the match ids: the sum of their XXH64, modulo 2**64."""
    from graphcep.hashing import vertex_hash

    if matches.num_rows == 0:
        return 0
    return int(vertex_hash(matches.column("match_id")).view(np.uint64).sum(dtype=np.uint64))


def warm_up(job: SubgraphJob, shares: Shares | None) -> float:
    """Compile the engine's numba code (or load it from numba's cache) on a tiny dense
    stream, through the same task functions as the timed run; seconds spent."""
    from graphcep.io.generator import generate_netflow

    started = time.perf_counter()
    tiny = generate_netflow(2_000, 40, 1_000, seed=7).select(CORE)
    run_task(job, None, Task("shard", 1, "", 0), tagged_shard(tiny, 1, 0, 1_000, 2_000))
    if shares is not None:
        run_task(job, shares, Task("cell", 0, "", 0), tiny)
    return time.perf_counter() - started


def graphcep_source() -> str:
    """Where this process imported graphcep from."""
    import graphcep

    return str(Path(graphcep.__file__).resolve().parent)


def worker(index: int, job: SubgraphJob, shares: Shares | None, tasks: list[Task], ready: Any,
           starts: list[Any], results: Any, batch_edges: int = 0) -> None:
    """A worker process: load the inputs, compile, then replay them once per round."""
    try:
        pa.set_cpu_count(1)
        pa.set_io_thread_count(1)
        inputs = [(task, read_ipc(task.path)) for task in tasks]
        if batch_edges:
            from graphcep.runtime import local

            local.replay.__kwdefaults__["batch_edges"] = batch_edges
        jit_s = warm_up(job, shares)
        if any(task.kind == "spin" for task in tasks):
            spin_kernel()(10)
        for start in starts:
            ready.wait()
            start.wait()
            began, cpu = time.perf_counter(), time.process_time()
            found = [run_task(job, shares, task, table) for task, table in inputs]
            ended = time.perf_counter()
            results.put({"worker": index, "began": began, "ended": ended, "jit_s": jit_s,
                         "cpu": time.process_time() - cpu, "source": graphcep_source(),
                         "matches": sum(m.num_rows for m in found),
                         "checksum": sum(checksum(m) for m in found) % 2**64,
                         "rows": sum(t.rows for t in tasks)})
    except Exception:  # reported to the parent, which stops the run
        results.put({"worker": index, "error": traceback.format_exc()})
        ready.abort()


# -- running one plan --------------------------------------------------------------------


@dataclass
class Run:
    """One strategy at one P: the best round and what every round found."""

    strategy: str
    procs: int
    layout: str
    tasks: int
    workers: int
    input_rows: int
    prep_s: float
    jit_s: float
    walls: list[float]
    matches: int
    checksum: int
    busy: list[float] = field(default_factory=list)
    rows: list[int] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)
    oversubscribed: bool = False
    note: str = ""

    @property
    def wall(self) -> float:
        return min(self.walls)


def next_report(results: Any, procs: list[Any], timeout: float) -> dict:
    """The next worker report; fails when a worker died without one or time ran out."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return results.get(timeout=1.0)
        except queue.Empty:
            dead = [p.exitcode for p in procs if p.exitcode not in (None, 0)]
            if dead:
                raise RuntimeError(f"a worker process died (exit codes {dead})") from None
    raise TimeoutError(f"no worker report within {timeout:g} s")


def failure(results: Any, procs: list[Any]) -> RuntimeError:
    """The workers' errors after a failed round, the root cause first (the others only saw
    the barrier break)."""
    errors = []
    with contextlib.suppress(queue.Empty):
        while True:
            report = results.get(timeout=2.0)
            if "error" in report:
                errors.append(f"worker {report['worker']}:\n{report['error']}")
    errors.sort(key=lambda e: "BrokenBarrierError" in e)
    codes = [p.exitcode for p in procs]
    return RuntimeError(f"worker failed (exit codes {codes}):\n"
                        + ("\n".join(errors[:1]) or "(no report: killed, or out of time)"))


def collect(results: Any, procs: list[Any], t0: float, timeout: float) -> list[dict]:
    """One round's reports, one per worker; a worker's error stops the run."""
    reports = []
    for _ in procs:
        report = next_report(results, procs, timeout)
        if "error" in report:
            raise RuntimeError(f"worker {report['worker']} failed:\n{report['error']}")
        report["wall"] = report["ended"] - t0
        reports.append(report)
    return reports


def run_plan(plan: Plan, job: SubgraphJob, repeat: int, ctx: BaseContext, timeout: float,
             batch_edges: int = 0) -> list[list[dict]]:
    """Start one process per worker, release them together ``repeat`` times; the reports."""
    groups = plan.groups()
    ready = ctx.Barrier(len(groups) + 1)
    starts = [ctx.Event() for _ in range(repeat)]
    results = ctx.Queue()
    procs = [ctx.Process(target=worker, daemon=True,
                         args=(i, job, plan.shares, g, ready, starts, results, batch_edges))
             for i, g in enumerate(groups)]
    for proc in procs:
        proc.start()
    rounds = []
    try:
        for start in starts:
            try:
                ready.wait(timeout)
            except threading.BrokenBarrierError:  # a worker aborted it: its report says why
                raise failure(results, procs) from None
            t0 = time.perf_counter()
            start.set()
            rounds.append(collect(results, procs, t0, timeout))
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.terminate()
    return rounds


def summarize(plan: Plan, rounds: list[list[dict]], cores: int) -> Run:
    """The run's figures; every round must find the same matches."""
    found = {(sum(r["matches"] for r in reports), sum(r["checksum"] for r in reports) % 2**64)
             for reports in rounds}
    if len(found) != 1:
        raise AssertionError(f"{plan.strategy} P={plan.procs}: rounds disagree: {found}")
    (matches, check), = found
    sources = {r["source"] for reports in rounds for r in reports}
    if sources != {graphcep_source()}:
        raise AssertionError(f"workers imported graphcep from {sources}, not {graphcep_source()}")
    walls = [max(r["wall"] for r in reports) for reports in rounds]
    best = rounds[walls.index(min(walls))]
    return Run(plan.strategy, plan.procs, plan.layout, len(plan.tasks), len(plan.groups()),
               sum(t.rows for t in plan.tasks), plan.prep_s, max(r["jit_s"] for r in best),
               walls, matches, check, busy=[r["ended"] - r["began"] for r in best],
               rows=[r["rows"] for r in best], cpu=[r["cpu"] for r in best],
               oversubscribed=plan.procs > cores)


def measure(strategy: str, procs: int, table: pa.Table, job: SubgraphJob, args: argparse.Namespace,
            ctx: BaseContext) -> Run:
    """Plan, run and summarize one strategy at one P (input files removed afterwards)."""
    with tempfile.TemporaryDirectory(prefix="graphcep-scaling-", dir=args.tmp) as workdir:
        plan = make_plan(strategy, procs, args.tasks_per_proc, table, job, Path(workdir))
        print(f"[{time.strftime('%H:%M:%S')}] {strategy} P={procs}: {plan.layout}, "
              f"{len(plan.tasks)} task(s)", file=sys.stderr, flush=True)
        rounds = run_plan(plan, job, args.repeat, ctx, args.timeout, args.batch_edges)
    run = summarize(plan, rounds, args.cores)
    print(f"    wall {', '.join(f'{w:.2f}' for w in run.walls)} s; best round: CPU/busy "
          f"{cpu_share(run)}; matches {run.matches:,}",
          file=sys.stderr, flush=True)
    return run


def single_engine_cells(reference: Run, procs: int, cores: int, shares: Shares) -> Run:
    """Cells on a one-cell grid: the same computation as P = 1 (one engine, whole stream);
    reported from that run rather than rerun (Spark would run it as "single", threaded)."""
    return Run(**{**reference.__dict__, "strategy": "cells", "procs": procs,
                  "layout": f"{grid_text(shares)} cell(s)", "oversubscribed": procs > cores,
                  "note": "1-cell grid: one engine on the whole stream (the P=1 run, not rerun)"})


def run_all(table: pa.Table, job: SubgraphJob, args: argparse.Namespace) -> list[Run]:
    """Every strategy at every P, P = 1 first (the reference)."""
    from graphcep.runtime.hypercube import choose_shares

    ctx = multiprocessing.get_context(args.start_method)
    runs: list[Run] = []
    single: Run | None = None
    for strategy in args.strategies:
        for procs in args.procs:
            if strategy == "cells" and single is not None:
                shares = choose_shares(job.query, procs * args.tasks_per_proc)
                if shares.cells == 1:
                    runs.append(single_engine_cells(single, procs, args.cores, shares))
                    continue
            run = measure(strategy, procs, table, job, args, ctx)
            if procs == 1 and args.tasks_per_proc == 1:
                single = run
            runs.append(run)
    return runs


# -- the machine's own ceiling -----------------------------------------------------------


@dataclass
class Ceiling:
    """``procs`` processes running the same work at once; wall over the one-process wall is
    what the machine itself charges ``procs`` processes (ideal 1: no partitioning involved)."""

    procs: int
    spin_wall: float
    engine_wall: float


def ceiling_runs(table: pa.Table, job: SubgraphJob, args: argparse.Namespace) -> list[Ceiling]:
    """For each P: P copies of the register-only loop, then P copies of one engine task
    (the stream's first ``--ceiling-edges`` edges as one shard), all released together."""
    ctx = multiprocessing.get_context(args.start_method)
    rows = min(args.ceiling_edges, table.num_rows)
    shard = tagged_shard(table, 0, 0, 0, rows)
    out = []
    with tempfile.TemporaryDirectory(prefix="graphcep-ceiling-", dir=args.tmp) as workdir:
        path = Path(workdir) / "shard-0.arrow"
        write_ipc(shard.select(job.needed_columns(shard.column_names) + extra_columns(shard)),
                  path)
        for procs in args.procs:
            walls = {}
            for kind in ("spin", "shard"):
                tasks = [Task(kind, 0, str(path), rows) for _ in range(procs)]
                plan = Plan(f"ceiling-{kind}", procs, tasks, "", 0.0)
                rounds = run_plan(plan, job, args.repeat, ctx, args.timeout, args.batch_edges)
                walls[kind] = min(max(r["wall"] for r in reports) for reports in rounds)
            print(f"[{time.strftime('%H:%M:%S')}] ceiling P={procs}: loop {walls['spin']:.2f} s,"
                  f" engine {walls['shard']:.2f} s", file=sys.stderr, flush=True)
            out.append(Ceiling(procs, walls["spin"], walls["shard"]))
    return out


def ceiling_rows(ceilings: list[Ceiling], runs: list[Run], edges: int) -> list[str]:
    """The machine's ceiling beside the partitioned runs' efficiency: what is left after the
    machine's own share is what partitioning costs (warm-up copies, uneven shards)."""
    one = ceilings[0]
    lines = [
        "| P | register-only loop: wall s, efficiency | one engine task in every process: "
        "wall s, efficiency | time shards: efficiency | time shards / engine ceiling |",
        "|" + "---|" * 5,
    ]
    for c in ceilings:
        loop, engine = one.spin_wall / c.spin_wall, one.engine_wall / c.engine_wall
        run = next((r for r in runs if r.strategy == "time" and r.procs == c.procs), None)
        base = baseline(runs, "time")
        shards = f"{base.wall / run.wall / c.procs:.0%}" if run and base else "-"
        over = f"{base.wall / run.wall / c.procs / engine:.0%}" if run and base else "-"
        lines.append(f"| {c.procs} | {c.spin_wall:.2f}, {loop:.0%} | {c.engine_wall:.2f}, "
                     f"{engine:.0%} | {shards} | {over} |")
    return lines


# -- reporting ---------------------------------------------------------------------------


def mismatches(runs: list[Run]) -> list[str]:
    """Runs whose matches differ from the first run (P = 1: one engine, whole stream)."""
    ref = runs[0]
    return [f"{r.strategy} P={r.procs}: {r.matches:,} matches (checksum {r.checksum:#x}) vs "
            f"{ref.matches:,} (checksum {ref.checksum:#x}) at P=1"
            for r in runs if (r.matches, r.checksum) != (ref.matches, ref.checksum)]


def baseline(runs: list[Run], strategy: str) -> Run | None:
    return next((r for r in runs if r.strategy == strategy and r.procs == 1), None)


def table_rows(runs: list[Run], edges: int) -> list[str]:
    head = ("| strategy | P | layout | input rows (× stream) | wall s (best) | edges/s | speedup "
            "| efficiency | busiest worker: busy / mean, rows / mean | CPU / busy | matches "
            "| notes |")
    lines = [head, "|" + "---|" * 12]
    for r in runs:
        base = baseline(runs, r.strategy)
        speedup = base.wall / r.wall if base else float("nan")
        notes = [r.note] if r.note else []
        if r.oversubscribed:
            notes.append("OVERSUBSCRIBED (more processes than cores)")
        if r.workers < r.procs:
            notes.append(f"only {r.workers} of {r.procs} workers have work")
        lines.append(
            f"| {r.strategy} | {r.procs} | {r.layout} | {r.input_rows:,} "
            f"({r.input_rows / edges:.2f}) | {r.wall:.2f} | {edges / r.wall:,.0f} | "
            f"{speedup:.2f}× | {speedup / r.procs:.0%} | {balance(r.busy)}, {balance(r.rows)} "
            f"| {cpu_share(r)} | {r.matches:,} | {'; '.join(notes)} |")
    return lines


def cpu_share(run: Run) -> str:
    """Worker CPU seconds over worker busy seconds: below 1 when the workers waited for a
    core (other processes on the machine, or more workers than cores)."""
    return f"{sum(run.cpu) / sum(run.busy):.2f}" if sum(run.busy) else "-"


def balance(values: list[float] | list[int]) -> str:
    """The largest value over the mean (1.00 = perfectly even)."""
    if not values or not sum(values):
        return "-"
    return f"{max(values) / (sum(values) / len(values)):.2f}"


def projection(runs: list[Run], edges: int, job: SubgraphJob, per_proc: int, executors: int,
               cores_each: int) -> list[str]:
    """Cluster throughput from the largest measured, not oversubscribed P of each strategy."""
    from graphcep.runtime.hypercube import choose_shares

    total = executors * cores_each
    lines = []
    for strategy in dict.fromkeys(r.strategy for r in runs):
        measured = [r for r in runs if r.strategy == strategy and not r.oversubscribed]
        if not measured:
            continue
        r = max(measured, key=lambda run: run.procs)
        rate = edges / r.wall
        if strategy == "time":
            projected = rate * total / r.procs
            why = (f"{rate / r.procs:,.0f} edges/s per process × {total} processes; assumes "
                   f"shards as long as here (a stream {total / r.procs:g}× as long), the same "
                   f"efficiency, and that the shuffle and match collection keep up")
        else:
            here = choose_shares(job.query, r.procs * per_proc)
            there = choose_shares(job.query, total * per_proc)
            projected = rate * here.max_load / there.max_load
            why = (f"the rate × busiest cell's share of the stream on grid {grid_text(here)} "
                   f"({here.max_load:.3g}) / on grid {grid_text(there)} ({there.max_load:.3g}), "
                   f"choose_shares' model: the busiest cell sets the wall time; assumes the "
                   f"shuffle of the copies keeps up")
        lines.append(f"- {strategy}: measured {rate:,.0f} edges/s on {r.procs} process(es) → "
                     f"projected {projected:,.0f} edges/s on {executors} executors × "
                     f"{cores_each} cores ({why})")
    return lines


def target_lines(runs: list[Run], edges: int, cores: int) -> list[str]:
    """The target, MET / MISSED per strategy, or why it was not measured."""
    sixteen = [r for r in runs if r.procs == TARGET_PROCS and not r.oversubscribed]
    if not sixteen:
        extra = ("; the 16-process run above is oversubscribed"
                 if any(r.procs == TARGET_PROCS for r in runs) else "")
        return [f"- {TARGET}: not measured here ({cores} cores{extra})"]
    lines = []
    for r in sixteen:
        base = baseline(runs, r.strategy)
        speedup = base.wall / r.wall if base else 0.0
        rate = edges / r.wall
        met = rate >= TARGET_RATE and speedup >= TARGET_SPEEDUP
        lines.append(f"- {TARGET} -- {r.strategy}: {rate:,.0f} edges/s, {speedup:.2f}× → "
                     f"{'MET' if met else 'MISSED'}")
    return lines


def versions() -> str:
    out = []
    for name in ("numpy", "pyarrow", "pandas", "numba"):
        try:
            out.append(f"{name} {metadata.version(name)}")
        except metadata.PackageNotFoundError:
            out.append(f"{name} absent")
    return ", ".join(out)


def machine_lines(state: str) -> list[str]:
    """The machine and graphcep's state, without Spark or Java (cf. triangles.machine_info)."""
    model = re.search(r"Model name:\s*(.+)", shell(["lscpu"]))
    meminfo = Path("/proc/meminfo")
    mem = re.search(r"MemTotal:\s+(\d+) kB", meminfo.read_text()) if meminfo.exists() else None
    status = shell(["git", "--no-optional-locks", "status", "--porcelain",
                    "--untracked-files=all", "src"])
    dirty = [line.split(maxsplit=1)[1] for line in status.splitlines() if line.strip()]
    ram = f"RAM {int(mem.group(1)) / MIB / MIB:.1f} GiB" if mem else "RAM ?"
    return [
        f"- date: {datetime.datetime.now(datetime.UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- CPU: {model.group(1) if model else '?'}, {os.cpu_count()} cores "
        f"({usable_cores()} usable); {ram}",
        f"- Python {platform.python_version()}; {versions()}",
        f"- graphcep: git {shell(['git', 'rev-parse', '--short', 'HEAD']) or '?'} "
        + (f"+ uncommitted changes in {', '.join(dirty)}" if dirty else "(src/ clean)")
        + f"; src digest {state}",
    ]


def load_average() -> str:
    return ", ".join(f"{x:.2f}" for x in os.getloadavg()) if hasattr(os, "getloadavg") else "?"


def ceiling_text(ceilings: list[Ceiling], runs: list[Run], edges: int,
                 args: argparse.Namespace) -> list[str]:
    if not ceilings:
        return []
    return [
        f"Machine ceiling (`--ceiling`): P processes each run the same work at once, so any "
        f"loss is the machine's (clock under load, shared cores, caches, memory), not "
        f"partitioning's: a loop of {SPIN_STEPS:,} register-only steps, and one engine task "
        f"(the stream's first {min(args.ceiling_edges, edges):,} edges as one shard); "
        f"efficiency = one process's wall / P processes' wall, best of {args.repeat}.",
        "",
        *ceiling_rows(ceilings, runs, edges),
        "",
    ]


def report(runs: list[Run], edges: int, job: SubgraphJob, args: argparse.Namespace,
           machine: list[str], ceilings: list[Ceiling] | None = None) -> str:
    span = (edges - 1) / RATE
    extent = job.extent().size / 1e6
    bad = mismatches(runs)
    return "\n".join([
        f"## Partition-parallel scaling (S2 parameters, {QUERIES[args.query][0]}, no Spark)",
        "",
        f"Command: `PYTHONPATH=src python -m bench.scaling {' '.join(args.argv)}`".rstrip(),
        "",
        f"- stream: {edges:,} edges, |V| = {VERTICES:,}, {RATE:,} edges/s, span {span:.1f} s "
        f"= {span / extent:.1f} extents of {extent:g} s; chunks of {CHUNK:,} edges seeded "
        f"{SEED}, {SEED + 1}, ...",
        f"- each worker: one `{args.start_method}` process, one engine thread, Arrow CPU pool 1; "
        f"{args.tasks_per_proc} task(s) per process; inputs cut untimed and read from Arrow "
        f"IPC files before the start signal; numba compiled before it (max "
        f"{max(r.jit_s for r in runs):.1f} s per worker); best of {args.repeat} round(s)"
        + (f"; engine batches of {args.batch_edges:,} edges" if args.batch_edges else ""),
        "- edges/s = stream edges / wall s; speedup = wall at P=1 / wall; efficiency = "
        "speedup / P; input rows count warm-up copies (time) or cell copies (cells)",
        "",
        *table_rows(runs, edges),
        "",
        (f"Matches: {runs[0].matches:,} at every P (checksum {runs[0].checksum:#x})" if not bad
         else "Matches: MISMATCH\n" + "\n".join(f"- {line}" for line in bad)),
        "",
        *ceiling_text(ceilings or [], runs, edges, args),
        "Target:",
        *target_lines(runs, edges, args.cores),
        "",
        "Projection (not measured):",
        *projection(runs, edges, job, args.tasks_per_proc, args.executors,
                    args.executor_cores),
        "",
        "Machine:",
        *machine,
        f"- load average before: {args.load_before}; after: {load_average()}",
    ])


# -- command line ------------------------------------------------------------------------


def default_procs(cores: int) -> list[int]:
    """Powers of two up to the core count."""
    return [1 << i for i in range(cores.bit_length()) if 1 << i <= cores]


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.scaling",
                                     description=(__doc__ or "").split("\n")[0])
    parser.add_argument("--edges", type=int, default=DEFAULT_EDGES, help="stream edges")
    parser.add_argument("--strategy", choices=("time", "cells", "both"), default="both")
    parser.add_argument("--query", choices=tuple(QUERIES), default="triangle",
                        help="triangle (cells copy edges) or a keyed fan-out (one cell each)")
    parser.add_argument("--procs", default="",
                        help="comma list of process counts (default: powers of two up to the "
                             "core count; more than the cores is run but marked oversubscribed)")
    parser.add_argument("--tasks-per-proc", type=int, default=1,
                        help="time shards (cell budget) per process (Spark's default is 4 "
                             "shards per core)")
    parser.add_argument("--repeat", type=int, default=3, help="timed rounds per P (best kept)")
    parser.add_argument("--start-method", choices=("spawn", "forkserver"), default="spawn")
    parser.add_argument("--tmp", default=None, help="folder for the task input files")
    parser.add_argument("--timeout", type=float, default=600.0,
                        help="seconds to wait for the workers, per round")
    parser.add_argument("--executors", type=int, default=8, help="projection: executors")
    parser.add_argument("--executor-cores", type=int, default=16, help="projection: cores each")
    parser.add_argument("--ceiling", action="store_true",
                        help="also measure the machine's ceiling: P copies of the same work")
    parser.add_argument("--ceiling-edges", type=int, default=2_000_000,
                        help="edges of the engine task each ceiling process runs")
    parser.add_argument("--batch-edges", type=int, default=0,
                        help="edges per engine push in the workers (default: replay's own)")
    add_record_arguments(parser)
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    args.cores = usable_cores()
    procs = [int(p) for p in args.procs.split(",") if p] or default_procs(args.cores)
    if min(procs) < 1 or args.tasks_per_proc < 1 or args.repeat < 1 or args.edges < 2:
        parser.error("--procs, --tasks-per-proc, --repeat must be >= 1 and --edges >= 2")
    args.procs = sorted(set(procs) | {1})  # P = 1 is the reference
    args.strategies = ["time", "cells"] if args.strategy == "both" else [args.strategy]
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    args.load_before = load_average()
    snapshot, state = snapshot_source() if args.snapshot else (None, source_state())
    if snapshot is not None:
        use_source(snapshot)  # this process and the spawned workers import one version
    from graphcep.events import normalize_edges, sort_stream

    table = sort_stream(normalize_edges(load_stream(args.edges)))
    job = query_job(args.query, table)
    runs = run_all(table, job, args)
    ceilings = ceiling_runs(table, job, args) if args.ceiling else []
    machine = machine_lines(state)
    if snapshot is not None:
        machine.append(f"- graphcep imported (here and in every worker) from a copy of src/ "
                       f"taken at the start (bench/data/{snapshot.name})")
    text = report(runs, table.num_rows, job, args, machine, ceilings)
    print(text)
    if mismatches(runs):
        print("\n!!! MATCH COUNTS DISAGREE ACROSS P: NOT RECORDED !!!", file=sys.stderr)
        return 1
    if args.record:
        marks = QUERIES[args.query][1]
        record(text, f"<!-- {marks}:start -->", f"<!-- {marks}:end -->")
    return 0


if __name__ == "__main__":
    sys.exit(main())
