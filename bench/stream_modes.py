"""The two streaming modes side by side: matching in the driver (``StreamOperator`` in
``foreachBatch``) and in the executors (cells as Spark keys, ``runtime/streaming/cells.py``),
the SAL temporal triangle (W = 10 s) over generated netflow (60k edges/s of event time).

1. *Files* (``--master``, default ``local[2]``): the same Parquet files as a file stream,
   one file per micro-batch, lateness 2 s; a last file holds one far edge whose watermark
   releases every buffered edge. Each mode runs once to warm up (JVM, Python workers,
   compilation), then ``--repeat`` timed runs on fresh checkpoints; the best is reported,
   as edges per second of the whole query.
2. *Offered rates* (``--rate-masters``, default ``local[1]`` and ``local[2]``): the
   generator source (Spark's ``rate-micro-batch`` source: ``rate`` rows a second, offered
   one micro-batch a second, in both modes) at increasing offered rates, each mode for
   ``--seconds`` per rate after a warm-up run; a mode's rates stop rising after the first
   it cannot sustain. *Sustained*: edges matched per second after the first quarter of the
   run; a rate counts as sustained when the latency stays bounded -- its p99 at most 2 s
   and the edges matched at least 90 % of the rate (a mode that falls behind sees its
   latency grow through the run: the sustainable throughput of Karimov et al., ICDE
   2018) -- and the highest rate matched (at a rate it could not sustain: saturated) is
   the mode's *capacity*. *Latency* of a match:
   the wall time its part was written minus the arrival of its last edge (edge ``i``
   arrives with micro-batch ``i // rate``, due ``i // rate`` seconds after the first on
   Spark's one-second trigger grid: a batch run late counts its wait);
   p50 and p99 over the matches after the first quarter. Per-core efficiency: the
   capacity over the master's cores.
3. *Projection to N executors* (stated as such, not measured): the executor mode's
   capacity with one cell on ``local[1]`` (one core: routing, shuffle and one cell)
   divided by the share of the stream the busiest cell of N cells receives (routing
   copies included, measured by routing 200k generated edges to ``choose_shares``' grid):
   what N one-core executors sustain if each hosts one cell and the shuffle costs what it
   costs on one machine. A second projection starts instead from one cell's rate on its
   own work in the files run (the edges over its steps' and the tasks' reading and
   routing seconds, from the cells' profile, the same phases ``--profile`` prints): what
   N executors would sustain if Spark's fixed per-batch work were amortized over large
   enough batches.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from bench.nu import machine_lines
from bench.triangles import record
from graphcep.io.sinks import Sink

START_MARK, END_MARK = "<!-- bench.stream_modes:start -->", "<!-- bench.stream_modes:end -->"
TRIANGLE = """{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);
 starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }"""
LATENESS_US = 2_000_000
#: a rate is sustained when the latency stays bounded: p99 at most this (seconds)
MAX_P99_S = 2.0


class _Count(Sink):
    """A sink that counts the matches written (a :class:`Sink`: the driver mode hands it
    a batch's matches in chunks, ``write_chunks``)."""

    def __init__(self) -> None:
        self.rows = 0

    def write(self, table: pa.Table, batch_id: int | None = None) -> None:
        self.rows += table.num_rows


def write_files(directory: Path, edges: int, vertices: int, files: int) -> None:
    """The stream as ``files`` Parquet files (modification times in order) and the far edge."""
    from graphcep.io.generator import generate_netflow

    table = generate_netflow(edges, vertices, 60_000, seed=1).select(
        ["t", "src", "dst", "dur", "seq"])
    far = pa.table({"t": [10**12], "src": ["far1"], "dst": ["far2"], "dur": [0],
                    "seq": [edges + 1]}).cast(table.schema)
    step = -(-edges // files)
    parts = [table.slice(i * step, step) for i in range(files)] + [far]
    directory.mkdir(parents=True)
    for i, part in enumerate(parts):
        path = directory / f"part-{i:04d}.parquet"
        pq.write_table(part, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def run_mode(spark, job, source: Path, checkpoint: Path, cells: int | None
             ) -> tuple[float, int, object]:
    """Seconds, matches and (executor mode) the cells' profile of one run: the driver
    mode when ``cells`` is None."""
    from graphcep.io.readers import ReaderOptions
    from graphcep.runtime.streaming.cells import StateFiles, start_cells_stream
    from graphcep.runtime.streaming.cells_run import CellsProfile
    from graphcep.runtime.streaming.driver import StreamOperator
    from graphcep.runtime.streaming.query import run_available_now
    from graphcep.runtime.streaming.sources import FileSource

    sink = _Count()
    started = time.perf_counter()
    profile = CellsProfile(tasks=spark.sparkContext.defaultParallelism)
    clock = [started]

    def on_batch(batch_id, output) -> None:
        now = time.perf_counter()
        profile.add(batch_id, output.stats, now - clock[0])
        clock[0] = now
    # the far edge's file alone reads as epoch milliseconds as well as microseconds: the
    # unit said, as a user says it
    files = FileSource(str(source), "parquet", ReaderOptions(time_unit="us"),
                       max_files_per_trigger=1)
    if cells is None:
        operator = StreamOperator(job, lateness_us=LATENESS_US, checkpoint=checkpoint, sink=sink)
        run_available_now(spark, operator, files, checkpoint=checkpoint, on_report=None)
    else:  # the files read in the executors, as graphcep stream --matching executors reads them
        start_cells_stream(spark, None, job, cells=cells, lateness_us=LATENESS_US,
                           checkpoint=str(checkpoint), sink=sink, on_batch=on_batch,
                           available_now=True, source=files,
                           states=StateFiles(f"{checkpoint}-states")).awaitTermination()
    return time.perf_counter() - started, sink.rows, profile


class _Latencies(Sink):
    """A sink that records, per match, when its part was written and the generator row of
    its last edge (edge ``seq`` is row ``seq - 1``); :meth:`latencies` sets them against
    when those rows were due."""

    def __init__(self) -> None:
        self.started = time.time()
        self.samples: list[tuple[float, int]] = []  # (written, last row)

    def write(self, table: pa.Table, batch_id: int | None = None) -> None:
        now = time.time()
        if table.num_rows == 0:
            return
        edges = table.column("edges").combine_chunks()
        seqs = pc.struct_field(pc.list_flatten(edges), "seq").to_numpy()
        last = np.zeros(table.num_rows, np.int64)
        np.maximum.at(last, pc.list_parent_indices(edges).to_numpy(), seqs)
        self.samples.extend((now, int(row)) for row in last - 1)

    def latencies(self, first_trigger: float, rows_per_batch: int, interval: float,
                  since: float) -> np.ndarray:
        """Seconds from each row's due time to its match's part, for the parts written
        after ``since``. Row ``r`` is offered with micro-batch ``k = r // rows_per_batch``:
        batch 0 at ``first_trigger``, batch ``k`` on Spark's processing-time grid after it
        (the trigger runs batches at whole multiples of ``interval``)."""
        written = np.array([at for at, _ in self.samples if at >= since])
        batch = np.array([row for at, row in self.samples if at >= since]) // rows_per_batch
        grid = np.floor(first_trigger / interval) * interval
        due = np.where(batch == 0, first_trigger, grid + batch * interval)
        return written - due

    def close(self) -> None:
        pass


def _first_trigger(query) -> float:
    """When the query's micro-batch 0 started (its progress's trigger time, epoch s)."""
    from datetime import datetime

    first = min(query.recentProgress, key=lambda progress: progress["batchId"])
    return datetime.fromisoformat(first["timestamp"].replace("Z", "+00:00")).timestamp()


class _Progress:
    """Edges matched over time (from the progress reports of either mode)."""

    def __init__(self) -> None:
        self.points: list[tuple[float, int]] = [(time.time(), 0)]

    def __call__(self, report) -> None:
        self.points.append((time.time(), self.points[-1][1] + report.edges_in))

    def sustained(self, since: float) -> float:
        after = [(t, n) for t, n in self.points if t >= since]
        before = max((p for p in self.points if p[0] < since), default=self.points[0])
        if not after or after[-1][0] <= before[0]:
            return 0.0
        return (after[-1][1] - before[1]) / (after[-1][0] - before[0])


def run_rate(spark, job, work: Path, rate: int, vertices: int, seconds: float,
             cells: int | None) -> dict:
    """One mode at one offered rate: sustained edges/s, p50/p99 latency (s)."""
    from graphcep.api_stream import start_cells
    from graphcep.runtime.streaming.cells_run import CellsRun
    from graphcep.runtime.streaming.driver import StreamOperator
    from graphcep.runtime.streaming.query import start_stream
    from graphcep.runtime.streaming.sources import GeneratorSource

    source = GeneratorSource(vertices, rate, seed=1, event_rate=60_000)
    sink, progress = _Latencies(), _Progress()
    progress.points[0] = (sink.started, 0)
    operator = None
    if cells is None:
        operator = StreamOperator(job, lateness_us=0, checkpoint=work, sink=sink)
        query = start_stream(spark, operator, source, checkpoint=work, on_report=progress)
    else:
        run = CellsRun(job, cells=cells, lateness_us=0, checkpoint=work, attrs=pa.schema([]),
                       on_report=progress, sinks={"matches": sink, "late": None,
                                                  "rejects": None})
        query = start_cells(spark, run, source)
        operator = run  # stopped between micro-batches, as graphcep stream stops it
    return measured(query, source, sink, progress, rate, seconds, operator)


def measured(query, source, sink: _Latencies, progress: _Progress, rate: int,
             seconds: float, operator=None) -> dict:
    """Run ``query`` for ``seconds``, then stop it (between micro-batches where the
    driver's ``operator`` drives it, as ``graphcep stream`` stops): the edges/s
    sustained after the first quarter of the run, whether the rate was sustained (p99
    bounded, 90 % matched) and the p50 and p99 latency (s) of the matches ``sink`` saw."""
    from graphcep.runtime.streaming.query import stop_between_batches

    query.awaitTermination(seconds)
    if operator is not None:
        stop_between_batches(query, operator)
    else:
        query.stop()
    since = sink.started + seconds / 4
    latency = sink.latencies(_first_trigger(query), source.rows_per_batch(), source.interval(),
                             since)
    sustained = progress.sustained(since)
    p99 = float(np.percentile(latency, 99)) if len(latency) else float("inf")
    return {"sustained": sustained, "ok": sustained >= 0.9 * rate and p99 <= MAX_P99_S,
            "p50": float(np.percentile(latency, 50)) if len(latency) else float("nan"),
            "p99": p99}


def rate_rows(master: str, job, work: Path, args, vertices: int | None = None,
              rates: dict[str, str] | None = None) -> tuple[list[str], dict]:
    """Section 2 on one master: table rows, and each mode's capacity (``rates``: the
    offered rates per mode, default ``--rates`` for the driver and each of
    ``--rate-cells``; ``vertices``: default ``--vertices``)."""
    from graphcep.runtime.spark import spark_session

    vertices = vertices or args.vertices
    rates = rates or {c: args.rates for c in ["driver", *args.rate_cells.split(",")]}
    spark = spark_session(master, shuffle_partitions=2)
    cores = spark.sparkContext.defaultParallelism
    rows, best = [], {}
    modes = [("driver" if c == "driver" else f"executors, {c} cells",
              None if c == "driver" else int(c)) for c in rates]
    for (name, cells), offered in zip(modes, rates.values(), strict=True):
        # a warm-up long enough for Spark's first plan and the cell hosts' start
        run_rate(spark, job, work / f"warm-{master}-{vertices}-{name}", 5_000, vertices, 15,
                 cells)
        for rate in (int(r) for r in offered.split(",")):
            got = run_rate(spark, job, work / f"{master}-{vertices}-{name}-{rate}", rate,
                           vertices, args.seconds, cells)
            # a rate it cannot sustain saturates it: what it matched then is its capacity
            best[name] = max(best.get(name, 0.0), got["sustained"])
            rows.append(f"| {master} | {name} | {rate:,} | {got['sustained']:,.0f} | "
                        f"{'yes' if got['ok'] else 'no'} | {got['p50']:.2f} | "
                        f"{got['p99']:.2f} |")
            print(rows[-1], flush=True)
            if not got["ok"]:
                break
    spark.stop()
    effic = [f"| {master} | {name} | {rate:,.0f} | {rate / cores:,.0f} |"
             for name, rate in best.items()]
    return rows, {"cores": cores, "best": best, "efficiency": effic}


def profile_row(name: str, profile) -> str:
    """The executor mode's profile of its best files run (``--profile``'s phases)."""
    seconds = profile.seconds
    cells = sum(v for k, v in seconds.items() if k not in ("read", "route"))
    return (f"| {name} | {profile.steps} | {profile.restored} | "
            f"{seconds.get('read', 0) + seconds.get('route', 0):.2f} | {cells:.2f} | "
            f"{seconds.get('match', 0):.2f} | "
            f"{seconds.get('snapshot', 0) + seconds.get('state out', 0):.2f} | "
            f"{profile.busiest:.2f} | {profile.rest:.2f} |")


def projection(job, per_core: float, counts: list[int], own: float = 0.0,
               vertices: int = 3_000) -> list[str]:
    """Section 3: the busiest cell's share of N cells, and N executors' projected rate
    (from ``per_core``, and from ``own``: one cell's rate on its own work alone), for the
    stream over ``vertices`` vertices; and the busiest cell's share of the matching work,
    measured: the busiest cell's engine timed on its rows with their roles (what the cells
    run, ``route_roles``) against one engine on the whole stream, ``per_core`` divided by
    it."""
    from graphcep.io.generator import generate_netflow
    from graphcep.runtime.hypercube import route_roles, with_roles
    from graphcep.runtime.streaming.cells import cell_grid

    edges = generate_netflow(200_000, vertices, 60_000, seed=1).select(
        ["t", "src", "dst", "dur", "seq"])
    whole = _engine_seconds(job, edges)
    rows = []
    for n in counts:
        shares = cell_grid(job, n)
        cells, routed, roles = route_roles(edges, job, shares)
        loads = np.bincount(cells, minlength=shares.cells)
        busiest, mine = loads.max() / edges.num_rows, cells == int(loads.argmax())
        # the busiest cell's alone: the most of many noisy timings would be the noise's
        work = (_engine_seconds(job, with_roles(edges.take(routed[mine]), roles[mine]))
                / whole if shares.cells > 1 else 1.0)
        grid = "x".join(map(str, shares.shares))
        rows.append(f"| {n} | {grid} ({shares.cells}) | {len(cells) / edges.num_rows:.2f} | "
                    f"{busiest:.3f} | {per_core / busiest:,.0f} | "
                    f"{f'{own / busiest:,.0f}' if own else '-'} | {work:.3f} | "
                    f"{per_core / work:,.0f} |")
    return rows


def _engine_seconds(job, edges: pa.Table, repeat: int = 3) -> float:
    """The least seconds of ``repeat`` runs of a single-thread engine over ``edges``,
    pushed a second of event time at a time as a micro-batch of the generator's brings
    them (the engine made before the clock starts, as a cell's lives on)."""
    from graphcep.events import sort_stream

    edges = sort_stream(edges)
    seconds = edges.column("t").to_numpy() // 1_000_000
    cuts = np.flatnonzero(np.diff(seconds)) + 1
    starts, stops = np.r_[0, cuts], np.r_[cuts, len(seconds)]
    best = float("inf")
    for _ in range(repeat):
        engine = job.new_engine(threads=1)
        started = time.perf_counter()
        for start, stop in zip(starts, stops, strict=True):
            engine.push(edges.slice(int(start), int(stop - start)))
        best = min(best, time.perf_counter() - started)
    return best


#: the projection tables' header (:func:`projection`)
PROJECTION_HEADER = [
    "| N | grid (cells) | copies per edge | busiest cell's share | projected edges/s | "
    "projected, cells' own work | busiest cell's share of the matching work (measured) | "
    "projected from that work |", "|---|---|---|---|---|---|---|---|"]


#: S2's vertices (bench/RESULTS.md's streams: 25,000 vertices, 60,000 edges/s of event time)
S2_VERTICES = 25_000


def s2_rows(job, work: Path, args) -> list[str]:
    """Section 4: the driver and one cell on ``local[1]`` at ``--s2-rates`` over S2, and
    the projection to N one-core executors from that cell's capacity and S2's grid."""
    if not args.s2_rates:
        return []
    rates = dict(part.split("=") for part in args.s2_rates.split(";"))
    rows, summary = rate_rows("local[1]", job, work, args, S2_VERTICES, rates)
    one = summary["best"].get("executors, 1 cells", 0.0)
    projected = projection(job, one, [int(n) for n in args.project.split(",")], 0.0,
                           S2_VERTICES)
    return ["", f"4. S2 (the triangle over {S2_VERTICES:,} vertices, 60,000 edges/s of event "
            "time, as bench/RESULTS.md's S2), local[1], offered rates as in 2.:", "",
            "| master | mode | offered edges/s | sustained edges/s | sustained? | p50 s | "
            "p99 s |", "|---|---|---|---|---|---|---|", *rows, "",
            f"Projection, not a measurement, as in 3., from one cell's capacity on S2 "
            f"({one:,.0f} edges/s):", "",
            *PROJECTION_HEADER, *projected]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_modes",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--vertices", type=int, default=3_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cells", default="1,2,8", help="comma list of executor-mode cells")
    parser.add_argument("--repeat", type=int, default=1)
    parser.add_argument("--rates", default="10000,20000,30000,40000,80000",
                        help="offered rates, edges/s (section 2)")
    parser.add_argument("--rate-masters", default="local[1],local[2]")
    parser.add_argument("--rate-cells", default="1,2,8",
                        help="comma list of executor-mode cells (section 2)")
    parser.add_argument("--seconds", type=float, default=15.0, help="per offered rate")
    parser.add_argument("--project", default="1,8,27,64",
                        help="executor counts for the projection")
    parser.add_argument("--s2-rates",
                        default="driver=100000,200000,300000,400000;1=100000,150000,200000,250000",
                        help="section 4: offered rates per mode on S2 (local[1]); empty: skip")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_program
    from graphcep.runtime.spark import spark_session

    header = machine_lines("python -m bench.stream_modes " + " ".join(argv or sys.argv[1:]))
    work = Path(tempfile.mkdtemp(prefix="stream-modes-"))
    write_files(work / "in", args.edges, args.vertices, args.files)
    spark = spark_session(args.master, shuffle_partitions=2)
    job = SubgraphJob.create(parse_program(TRIANGLE))
    modes = [("driver", None)] + [(f"executors, {c} cells", int(c))
                                  for c in args.cells.split(",")]
    rows, profiles, own = [], [], {}
    for name, cells in modes:
        times, matches = [], set()
        for run in range(args.repeat + 1):
            seconds, found, profile = run_mode(spark, job, work / "in",
                                               work / f"ck-{name}-{run}", cells)
            matches.add(found)
            if run:
                times.append((seconds, profile))
        best, profile = min(times, key=lambda pair: pair[0])
        rows.append(f"| {name} | {best:.2f} | {args.edges / best:,.0f} | "
                    f"{', '.join(map(str, sorted(matches)))} |")
        print(rows[-1], flush=True)
        if cells is not None:
            profiles.append(profile_row(name, profile))
            spent = profile.busiest + sum(profile.seconds.get(p, 0.0) for p in ("read", "route"))
            own[cells] = args.edges / spent if spent else 0.0
    spark.stop()
    load = os.getloadavg()[0]
    rate_table, summary = [], {}
    for master in args.rate_masters.split(","):
        got, summary[master] = rate_rows(master, job, work, args)
        rate_table += got
    one = summary.get("local[1]", {}).get("best", {}).get("executors, 1 cells", 0.0)
    projected = projection(job, one, [int(n) for n in args.project.split(",")],
                           own.get(1, 0.0), args.vertices)
    s2_section = s2_rows(job, work, args)
    text = "\n".join([
        "### Streaming modes: driver against executors", "", *header,
        f"- load average (1 min) at the end {load:.2f}; 1. files: Spark {args.master}, "
        f"{args.edges:,} edges over {args.vertices:,} vertices in {args.files} files, one "
        f"per micro-batch", "",
        "| mode | best seconds | edges/s | matches |", "|---|---|---|---|", *rows, "",
        "Where the executor mode's time went in those runs (seconds; phases summed over "
        "tasks, cells and batches, as `--profile` prints them; the busiest cell's step "
        "summed over batches; the rest of the batches' wall time is Spark's scheduling "
        "and shuffle and the driver's writing):", "",
        "| mode | cell steps | restored from stored states | reading + routing | cells' phases | "
        "matching | snapshot + state out | busiest cell | Spark and the driver |",
        "|---|---|---|---|---|---|---|---|---|", *profiles, "",
        f"2. Offered rates (generator, {args.seconds:.0f} s per rate, lateness 0; latency: "
        "part written minus arrival of the match's last edge):", "",
        "| master | mode | offered edges/s | sustained edges/s | sustained? | p50 s | p99 s |",
        "|---|---|---|---|---|---|---|", *rate_table, "",
        "Per-core efficiency (capacity: the highest rate matched at any offered rate, the "
        "saturated one included, over the master's cores):", "",
        "| master | mode | capacity edges/s | per core |", "|---|---|---|---|",
        *[line for m in summary.values() for line in m["efficiency"]], "",
        f"3. Projection, not a measurement: N one-core executors, one cell each, from the "
        f"executor mode's capacity with one cell on local[1] ({one:,.0f} edges/s) divided "
        "by the busiest cell's share of the stream; and, the same way, from one cell's rate on "
        f"its own work alone in the files run ({own.get(1, 0.0):,.0f} edges/s: the edges "
        "over the busiest cell's and the reading and routing seconds), what N executors would sustain if Spark's "
        "per-batch work were amortized over batches large enough; and from the busiest "
        "cell's share of the matching work, measured: every cell's engine timed on its "
        "rows with the roles it plays them in (as the cells run them) over one engine on "
        "the whole stream, the busiest cell's (the most edges) -- a cell's work can fall faster "
        "than its share of the edges, as it searches only for its own matches:", "",
        *PROJECTION_HEADER, *projected, *s2_section])
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
