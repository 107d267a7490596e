"""Exact time-sharded replay on Spark: the strategies of :func:`run_spark`.

Spark runtime: read edge files with Spark, replay time shards of them in parallel tasks.

**Exact time-sharded replay.** Event time is cut into shards of length
``L >= extent`` (the query's largest start-time gap). Each edge belongs to the shard
holding its start time and is *also* copied into the next shard when it lies within one
extent of that shard's start, because a match completed there may still use it. A Spark
task replays its shard in stream order with the in-process runtime
(:func:`graphcep.runtime.local.replay`): copied edges only warm the engine up, and since a
push reports exactly the matches whose last edge it delivers, a match is reported by the
shard that holds its last edge -- exactly once, with no deduplication step.

Shards are placed on partitions explicitly (:func:`partition_keys`): with a handful of
shards, Spark's hash partitioning of the shard number would often put two shards in one
task and leave a core idle.

**Cells.** A SAL query can be cut by vertices instead of time: HyperCube cells
(:mod:`graphcep.runtime.hypercube`), routed in the JVM and placed one per partition the
same way; see ``"cells"`` in :func:`run_spark`.

**Jobs.** What is replayed is a :class:`~graphcep.jobs.base.ReplayJob`: a SAL query
(:class:`~graphcep.jobs.subgraph.SubgraphJob`, extent = the largest start-time gap of a match) or a
DDST event pattern (:class:`~graphcep.jobs.ddst.DDSTJob`, extent = its time window
``W``: window ``k`` holds the edges with ``t >= t_k - W``, so a shard starting at ``s``
warms up on ``[s - W, s)``). Every strategy below runs either kind unchanged.

**Count windows** (DDST ``WITHIN N EDGES``) reach back ``N - 1`` *edges*, a span of time
nobody knows in advance, so they are cut by *edge rank* instead of time: the edges are
numbered in stream order (each partition sorted locally and offset by the counts of the
partitions before it; with no usable order, the stream is first range-partitioned on
``(t, seq)``, one shuffle), each partition is a shard in place, and its warm-up is the
``N - 1`` edges ranked just before its first -- the time-ordered-partitions code with the
rank in place of ``t``. Sorting costs one shuffle, but DDST engines spend far more per
edge than a sort does, so the parallel replay pays for it.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import normalize_edges, sort_stream
from graphcep.jobs.base import Extent, ReplayJob
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.hypercube import Shares, choose_shares
from graphcep.runtime.local import RunStats, count_job, replay_job_chunks
from graphcep.runtime.spark.cells import (
    cell_budget,
    cell_routes,
    check_cells,
    keyed_grid,
    run_cells,
)
from graphcep.runtime.spark.profile import stage_mark, stage_seconds, summed, task_phases
from graphcep.runtime.spark.session import check_column_names
from graphcep.runtime.spark.tasks import (
    COUNT_SCHEMA,
    PACKED_TYPE,
    TaskPlan,
    count_batch,
    counted,
    driver_threads,
    ipc_bytes,
    packed,
    partition_keys,
    received,
    replay_shard,
    replay_single,
    runs_in_driver,
    task_rows,
    task_schema,
    unpacked,
)
from graphcep.timing import NESTED, Phases

#: the column holding an edge's 0-based place in stream order (count windows)
RANK = "_rank"


#: "auto" splits a stream (time shards, partitions in place, cells) only when every part
#: would hold at least this many edges; smaller streams run as one replay (in the driver,
#: with every core it has). A Spark task pays a fixed cost before it matches anything --
#: its Python worker, loading the compiled kernels, the edges' trip to it and its matches'
#: back -- about half a second on the 2-core development machine, what one core's engine
#: matches about 500,000 edges in; at a million edges a part the fixed cost is at most a
#: third of its work (the measurements are in bench/RESULTS.md, "The Spark path").
MIN_SHARD_EDGES = 1_000_000


#: "auto" runs a keyed query as cells only when its busiest cell holds at most this many
#: times the mean cell's edges (a hub vertex loads its key's cell; time shards do not skew)
CELL_SKEW = 1.25


def plan_shards(t_min: int, t_max: int, extent_us: int, shards: int) -> int:
    """Shard length: at least the extent (so copies go to one next shard only)."""
    span = max(t_max - t_min + 1, 1)
    return max(extent_us, -(-span // max(shards, 1)), 1)


def run_spark(
    spark,
    job: ReplayJob | Any,
    edges_df: Any,
    *,
    shards: int | None = None,
    shard_length_us: int | None = None,
    strategy: str = "auto",
    count: bool = False,
) -> tuple[pa.Table, RunStats]:
    """All matches of the job's query over ``edges_df``, replayed in parallel Spark tasks.

    Exact strategies (``strategy="auto"`` picks with :func:`choose_strategy`):

    ``"single"``
        One engine replays the whole stream, using every core: for streams shorter than
        two extents, where time shards would mostly re-read each other's edges, and for
        queries with features. Up to ``DRIVER_REPLAY_ROWS`` edges it runs in the driver
        (see :func:`replay_single`), beyond that in one task.
    ``"partitions"``
        When the DataFrame's partitions hold disjoint, increasing time ranges (a
        time-ordered file split into blocks, an ordered table), every partition is a
        shard as it stands: nothing is shuffled. The edges within one extent before each
        partition's start -- its warm-up -- are collected once and broadcast.
    ``"shuffle"``
        Otherwise edges are cut into time shards at least one extent long; each edge also
        goes to the next shard when within one extent of its start; shards are shuffled
        onto partitions of their own.
    ``"cells"``
        HyperCube partitioning by vertices, not time (:mod:`graphcep.runtime.hypercube`):
        a grid of at most ``shards`` cells (default: one per core) from
        :func:`~graphcep.runtime.hypercube.choose_shares`; Spark SQL sends each edge to
        every cell it must reach (:func:`route_spark`, ``pmod(xxhash64(v), s)`` in the
        JVM: exactly one cell for a star keyed on its centre), each cell is shuffled onto
        a partition of its own, and each task replays its cell in stream order and keeps
        the matches whose home cell it is. No warm-up, and each engine's window holds
        only its cell's edges, so keyed queries beat time shards; queries whose edges
        go to several cells (the triangle: 5 copies on 2 x 2 x 2) do not. Cells are not
        also cut in time: on 2 cores, time shards inside cells would only add warm-up.
        SAL jobs without vertex features only (a ValueError otherwise); a grid of one
        cell runs as ``"single"``.

    ``edges_df`` may also be an Arrow table the driver holds already (a Parquet file read
    by the driver): a stream that runs as one replay in the driver (``"single"``, below
    ``DRIVER_REPLAY_ROWS`` edges) is then matched there, without the edges' round trip
    through the JVM; any other plan hands the table to Spark first.

    ``count``: the tasks count their matches instead of making them (the SAL search
    counts in its compiled loop); the statistics hold the count, the table none.

    "auto" splits a stream only when each part holds at least ``MIN_SHARD_EDGES`` edges:
    below twice that, the whole stream runs as ``"single"``.

    Queries with vertex features run as one shard: a feature such as ``topk`` counts
    items over the whole stream, which time shards do not see. DDST count windows use
    ``"partitions"`` and ``"shuffle"`` by edge rank (see the module docstring).

    Why "auto" picks as it does -- ``"single"`` for short streams, ``"cells"`` only for
    keyed queries that would otherwise shuffle time shards (:func:`keyed_grid`, when the
    busiest cell holds at most ``CELL_SKEW`` times the mean), ``"partitions"`` for
    time-ordered input -- is measured in ``bench/RESULTS.md`` ("Spark strategies").
    """

    run = plan_spark(spark, job, edges_df, shards=shards, shard_length_us=shard_length_us,
                     strategy=strategy, count=count)
    schema = schema_of_run(run.job, count)
    with run.replaying():
        table = run.collected()
    found = counted(table) if count else table.num_rows
    if count or not table.num_rows:
        table = run.job.output.schema.empty_table()
    else:
        table = table.cast(schema)
    return table, run.finish(found)


@dataclass
class SparkRun:
    """A run :func:`plan_spark` planned: its statistics pass is done, its replay not.

    The matches are taken once, in one of three ways: :meth:`frame` (a lazy Spark
    DataFrame, the Python API's), :meth:`batches` (record batches as the driver writes
    them, a bounded number held at a time, the command line's) or :meth:`collected` (one
    table); then :meth:`finish` gives the run's statistics."""

    spark: Any
    job: ReplayJob  #: the job, bound to the data
    count: bool
    stats: RunStats  #: edges and what the plan did (``extra``); matches once taken
    plan: TaskPlan | None  #: None: no edge to replay
    phases: Phases = field(default_factory=Phases)
    timings: Any = None
    mark: Any = None
    started: float = field(default_factory=time.perf_counter)

    def frame(self, shape: Any, schema: Any) -> Any:
        """The tasks' rows as a lazy DataFrame of the Spark type ``schema``, each task's
        batches passed through ``shape`` (None when there is no edge: no task to run)."""
        if self.plan is None:
            return None
        return self.plan.mapped(shape, schema)

    def batches(self, limit: int | None = None) -> Iterator[pa.RecordBatch]:
        """The matches (or counts), batch by batch, the driver holding one task's output
        at a time, and that on disk until read (:func:`driver_batches`); a task makes at
        most ``limit`` matches."""
        if self.plan is not None:
            try:
                yield from driver_batches(self.plan, self.job, self.count, limit)
            finally:
                self.plan.release()

    def collected(self) -> pa.Table:
        """Every match (or count) in one table."""
        schema = schema_of_run(self.job, self.count)
        if self.plan is None:
            return schema.empty_table()
        try:
            if self.plan.local is not None:
                return pa.Table.from_batches(list(self.plan.local()), schema)
            frame = self.plan.mapped(lambda batches: batches, task_schema(self.job, self.count))
            return frame.toArrow()
        finally:
            self.plan.release()

    @contextmanager
    def replaying(self, besides: Callable[[], float] = lambda: 0.0) -> Iterator[None]:
        """The phase of the Spark job taking the matches, less the seconds ``besides``
        says were spent on other work meanwhile (writing them); none for a replay in the
        driver, which names its own."""
        started = time.perf_counter()
        try:
            yield
        finally:
            if self.timings is not None:
                self.phases.add(f"spark replay job ({self.stats.extra['strategy']}: tasks, "
                                "shuffle, collecting matches)",
                                time.perf_counter() - started - besides())

    def finish(self, found: int) -> RunStats:
        """The run's statistics once its ``found`` matches were taken: the tasks' and
        stages' seconds nested under the replay's phase."""
        if self.timings is not None:
            self.phases.update(stage_seconds(self.spark, self.mark), NESTED)
            self.phases.update(summed(self.timings.value), NESTED)
        self.stats.matches = found
        self.stats.seconds = time.perf_counter() - self.started
        self.stats.phases = self.phases.seconds
        return self.stats


def driver_batches(plan: TaskPlan, job: ReplayJob, count: bool, limit: int | None
                   ) -> Iterator[pa.RecordBatch]:
    """The rows of ``plan`` in the driver, in task order, without holding them all.

    Counts (one row a task) are collected. Matches are not: each task packs its chunks as
    Arrow IPC bytes, one row a chunk (:func:`~graphcep.runtime.spark.tasks.packed`), the
    packed rows are persisted on the executors' disks by one job that runs every task in
    parallel and sends the driver each chunk's size; the chunks are then regrouped, in
    order, into parts of at most :data:`DRIVER_PART_BYTES` (or one chunk), which the
    driver reads back one by one (``toLocalIterator``): it holds one part at a time (the
    JVM) and one chunk (Python), however many chunks one task made. ``limit`` caps each task's matches (``--max-matches``: the
    driver stops after that many anyway)."""
    if plan.local is not None:
        yield from plan.local()
        return
    if count:
        yield from plan.mapped(lambda batches: batches, task_schema(job, True)).toArrow(
            ).to_batches()
        return
    from pyspark import StorageLevel

    frame = plan.mapped(lambda batches: packed(batches, limit), PACKED_TYPE)
    frame = frame.persist(StorageLevel.DISK_ONLY)
    try:
        rows = frame.rdd.map(lambda row: row[0])
        # every task at once (their output stays on disk); the driver gets the sizes
        sizes = rows.mapPartitions(lambda blobs: [[len(blob) for blob in blobs]]).collect()
        for blob in _split_by_bytes(rows, sizes, DRIVER_PART_BYTES).toLocalIterator():
            yield from unpacked(blob)
    finally:
        frame.unpersist()


#: The most packed bytes one read of the driver fetches (a part of the tasks' output, cut
#: at chunk boundaries; a chunk larger than this is a part of its own).
DRIVER_PART_BYTES = 64 * 2**20


def part_starts(sizes: list[int], bound: int) -> list[int]:
    """The ordinals (in stream order over all chunks) where each part starts, parts cut
    at chunk boundaries so that each holds at most ``bound`` bytes, or one chunk.

    Examples
    --------
    >>> part_starts([5, 5, 5, 20, 1, 1], 10)
    [0, 2, 3, 4]
    """
    starts, held = [], bound + 1
    for ordinal, size in enumerate(sizes):
        if held + size > bound:
            starts.append(ordinal)
            held = 0
        held += size
    return starts


def _split_by_bytes(rows: Any, sizes: list[list[int]], bound: int) -> Any:
    """The tasks' packed chunks (``rows``, an RDD of bytes, one partition a task whose
    chunk sizes are ``sizes``) regrouped, in the same order, into partitions of at most
    ``bound`` bytes each (:func:`part_starts`): what ``toLocalIterator`` fetches at once."""
    import bisect

    offsets = np.concatenate([[0], np.cumsum([len(task) for task in sizes])]).tolist()
    starts = part_starts([size for task in sizes for size in task], bound)
    if not starts:
        return rows
    numbered = rows.mapPartitionsWithIndex(
        lambda task, blobs: enumerate(blobs, offsets[task]))
    return numbered.partitionBy(
        len(starts), lambda ordinal: bisect.bisect_right(starts, ordinal) - 1
    ).mapPartitions(lambda pairs: (blob for _, blob in sorted(pairs, key=lambda p: p[0])))


def plan_spark(spark, job: ReplayJob | Any, edges_df: Any, *, shards: int | None = None,
               shard_length_us: int | None = None, strategy: str = "auto",
               count: bool = False, lazy: bool = False,
               parts: list[Any] | None = None) -> SparkRun:
    """:func:`run_spark`'s run, planned but not replayed: the statistics pass is done (one
    small aggregate), the replay waits for the caller to take its matches
    (:class:`SparkRun`).

    ``lazy``: no step of the plan may run in the driver or collect there, so the matches
    can stay a DataFrame (the Python API): a single replay runs in a task, not the
    driver; time-ordered partitions are shuffled into time shards instead of being used
    in place (which collects their warm-ups); count windows run as one replay (their
    shards are ranked and their warm-ups collected). Every plan is exact.

    ``parts``: the statistics pass's rows (per partition of ``edges_df``: ``p``,
    ``t_min``, ``t_max``, ``d_max``, ``n``), when the caller made them in a pass of its
    own; the pass then runs only where a keyed grid needs its cells' counts.
    """
    job = _as_job(job)
    started = time.perf_counter()
    phases = Phases()
    if isinstance(edges_df, pa.Table):
        held = None if lazy else _in_driver(spark, job, edges_df, shards, shard_length_us,
                                            strategy, phases, count)
        if held is not None:
            return held
        with phases.phase("handing the edges to Spark (Arrow to the JVM)"):
            edges_df = spark.createDataFrame(edges_df)
    check_column_names(spark, edges_df.columns)
    job.check_columns(edges_df.columns)
    if strategy == "cells":
        check_cells(job, shard_length_us)
    # keyed queries may run as cells: count each cell's edges in the same pass
    auto = strategy == "auto" and shards is None and shard_length_us is None
    keyed = keyed_grid(spark, job) if auto else None
    if parts is None or keyed is not None:
        with phases.phase("spark statistics pass (reads the input)"):
            parts, cell_edges = _partition_stats(edges_df, job, keyed)
    else:
        cell_edges = None
    n = sum(int(r["n"]) for r in parts)
    if n == 0:
        return SparkRun(spark, job.bind(0), count, RunStats(), None, phases, started=started)
    job = job.bind(max(int(r["d_max"] or 0) for r in parts))
    extent = job.extent()
    # ship only what the engine reads: wide netflow rows would cost transfer time for nothing
    edges_df = edges_df.select(*job.needed_columns(edges_df.columns))
    if strategy == "auto":
        strategy = choose_strategy(parts, extent, job, shards, shard_length_us, cell_edges)
    if lazy:
        strategy = _lazy_strategy(strategy, extent)
    timings = task_phases(spark)
    mark = stage_mark(spark)
    plan = _replay(spark, job, edges_df, strategy, parts, extent, n, shards,
                   shard_length_us, keyed, timings, count, lazy)
    stats = RunStats(edges=n)
    stats.extra.update({f"extent_{extent.unit}": extent.size, **plan.extra})
    return SparkRun(spark, job, count, stats, plan, phases, timings, mark, started)


def _lazy_strategy(strategy: str, extent: Extent) -> str:
    """The strategy a lazy plan runs for ``strategy``: one that collects nothing in the
    driver (:func:`plan_spark`)."""
    if extent.unit == "edges" and strategy in ("partitions", "shuffle"):
        return "single"
    return "shuffle" if strategy == "partitions" else strategy


def schema_of_run(job: ReplayJob, count: bool) -> pa.Schema:
    """The Arrow schema of what a run's tasks give: match rows, or counts."""
    return COUNT_SCHEMA if count else job.output.schema


def _replay(spark, job: ReplayJob, edges_df, strategy: str, parts, extent: Extent, n: int,
            shards: int | None, shard_length_us: int | None, keyed: Shares | None,
            timings: Any, count: bool = False, lazy: bool = False) -> TaskPlan:
    """The plan of one strategy (``count``: its tasks count); the tasks add the seconds of
    their phases to the accumulator ``timings``."""
    if strategy == "single":
        return replay_single(spark, job, edges_df, n, timings, count, lazy)
    if strategy == "partitions":
        pinned, pinned_parts, release = _pinned(edges_df, parts)
        if not _time_ordered(pinned_parts):
            release()
            raise ValueError("strategy 'partitions' needs partitions in increasing time order")
        plan = _replay_in_place(spark, job, pinned, pinned_parts, extent, timings, count)
        return _released_after(plan, release)
    if strategy == "shuffle" and extent.unit == "edges":
        return _replay_rank_shards(spark, job, edges_df, extent, shards, shard_length_us,
                                   timings, count)
    if strategy == "shuffle":
        return _replay_shuffled(spark, job, edges_df, parts, extent.size, shards,
                                shard_length_us, timings, count)
    if strategy == "cells":
        grid = keyed or choose_shares(job.cell_query(), cell_budget(spark, shards))
        return run_cells(spark, job, edges_df, n, grid, timings, count, lazy)
    if strategy == "keys":
        return _replay_keys(spark, job, edges_df, shards, timings, count)
    raise ValueError(
        f"unknown strategy {strategy!r}: auto, single, partitions, shuffle, cells or keys")


def _released_after(plan: TaskPlan, release) -> TaskPlan:
    """``plan``, running ``release`` too once its rows are taken."""
    before = plan.release

    def both() -> None:
        before()
        release()

    plan.release = both
    return plan


def _in_driver(spark, job: ReplayJob, table: pa.Table, shards: int | None,
               shard_length_us: int | None, strategy: str, phases: Phases,
               count: bool = False) -> SparkRun | None:
    """The run of a stream the driver holds when it runs as one replay in the driver
    (:func:`replay_single`'s rule), its steps' seconds nested in ``phases`` once its
    matches are taken; None when the plan needs Spark."""
    started = time.perf_counter()
    job.check_columns(table.column_names)
    if strategy not in ("auto", "single") or not runs_in_driver(table.num_rows):
        return None
    if not table.num_rows:
        return SparkRun(spark, job.bind(0), count, RunStats(), None, phases, started=started)
    t_min, t_max = pc.min_max(table.column("t")).values()
    d_max = pc.max(table.column("dur")).as_py() if "dur" in table.column_names else 0
    parts = [{"p": 0, "t_min": t_min.as_py(), "t_max": t_max.as_py(), "d_max": d_max,
              "n": table.num_rows}]
    job = job.bind(d_max or 0)
    extent = job.extent()
    if strategy == "auto" and choose_strategy(parts, extent, job, shards,
                                              shard_length_us) != "single":
        return None
    table = table.select(job.needed_columns(table.column_names))

    def in_driver() -> Iterator[pa.RecordBatch]:
        steps = Phases()
        threads = driver_threads(spark)
        if count:
            parts: Counter[str] = Counter()
            found = count_job(job, table, threads=threads, phases=steps, parts=parts)
            yield count_batch(found, parts)
        else:
            for chunk in replay_job_chunks(job, table, threads=threads, phases=steps):
                yield from chunk.cast(job.output.schema).to_batches()
        phases.add("replay in the driver (single)", sum(steps.seconds.values()))
        phases.update(steps.seconds, NESTED)

    extra = {"strategy": "single", "shards": 1, "where": "driver"}
    stats = RunStats(edges=table.num_rows)
    stats.extra.update({f"extent_{extent.unit}": extent.size, **extra})
    return SparkRun(spark, job, count, stats, TaskPlan(None, None, extra, local=in_driver),
                    phases, started=started)


def _as_job(job: Any) -> ReplayJob:
    """A bare query runs as a job with default options (:func:`graphcep.jobs.as_job`)."""
    from graphcep.jobs import as_job

    return as_job(job)


def _pinned(edges_df, parts):
    """``edges_df`` with partitions that stay the same in every job, their stats, and what
    unpins them (once the plan's rows are taken).

    Warm-ups are cut at each partition's start, so every job must see the same
    partitions: an uncached range partitioning would be re-sampled each time.
    """
    if edges_df.storageLevel.useMemory or edges_df.storageLevel.useDisk:
        return edges_df, parts, lambda: None
    pinned = edges_df.persist()
    try:
        return pinned, _partition_stats(pinned)[0], pinned.unpersist
    except BaseException:
        pinned.unpersist()
        raise


def _partition_stats(edges_df, job: ReplayJob | None = None,
                     grid: Shares | None = None) -> tuple[list, list[int] | None]:
    """Per input partition: first and last start time, longest duration, edge count; and,
    given a keyed ``grid`` (one cell per edge), the edges of each cell, from the same pass.
    """
    from pyspark.sql import functions as F

    longest = F.max("dur") if "dur" in edges_df.columns else F.lit(0)
    keys = [F.spark_partition_id().alias("p")]
    if grid is not None:
        (_, (cell,)), = cell_routes(job, grid, edges_df)  # eligibility aside: a load figure
        keys.append(cell.alias("cell"))
    rows = (
        edges_df.groupBy(*keys)
        .agg(F.min("t").alias("t_min"), F.max("t").alias("t_max"),
             longest.alias("d_max"), F.count(F.lit(1)).alias("n"))
        .collect()
    )
    if grid is None:
        return sorted(rows, key=lambda r: r["p"]), None  # sorted here: orderBy costs a job
    cells = [0] * grid.cells
    by_part: dict[int, list] = {}
    for r in rows:
        cells[int(r["cell"])] += int(r["n"])
        by_part.setdefault(int(r["p"]), []).append(r)
    merged = [
        {"p": p, "t_min": min(r["t_min"] for r in rs), "t_max": max(r["t_max"] for r in rs),
         "d_max": max((r["d_max"] for r in rs if r["d_max"] is not None), default=None),
         "n": sum(int(r["n"]) for r in rs)}
        for p, rs in sorted(by_part.items())
    ]
    return merged, cells


def _time_ordered(parts) -> bool:
    return all(a["t_max"] < b["t_min"] for a, b in zip(parts, parts[1:], strict=False))


def choose_strategy(parts, extent: Extent, job: ReplayJob, shards, shard_length_us,
                    cell_edges: list[int] | None = None) -> str:
    """How to cut the work, from per-partition time ranges (see :func:`run_spark`).

    Time shards pay for parallelism with warm-up: a shard re-reads one extent of edges
    before its start. A stream shorter than two extents therefore runs as one task
    (whose engine then uses every core); features need the whole stream in one task too;
    so does a stream of fewer than twice ``MIN_SHARD_EDGES`` edges, as every task pays a
    fixed cost before it matches.
    Time-ordered partitions are used in place when they are, on average, at least one
    extent long. Otherwise the stream must be shuffled: a keyed query that sends every
    edge to one cell (``cell_edges``, the edges per cell of :func:`keyed_grid`) is shuffled
    into cells when its busiest cell holds at most ``CELL_SKEW`` times the mean, else
    edges are shuffled into time shards. A count window's extent is in edges, and so is
    the stream's length it is compared with.
    """
    if job.partition_key() is not None:
        return "keys"
    if shards is not None or shard_length_us is not None:
        return "shuffle"
    edges = sum(int(r["n"]) for r in parts)
    if extent.unit == "edges":
        span = edges
    else:
        span = max(int(r["t_max"]) for r in parts) - min(int(r["t_min"]) for r in parts)
    if job.whole_stream or span < 2 * extent.size or edges < 2 * MIN_SHARD_EDGES:
        return "single"
    if len(parts) > 1 and _time_ordered(parts) and span / len(parts) >= extent.size:
        return "partitions"
    if cell_edges and max(cell_edges) <= CELL_SKEW * sum(cell_edges) / len(cell_edges):
        return "cells"
    return "shuffle"


def _replay_keys(spark, job: ReplayJob, edges_df, shards: int | None, timings: Any = None,
                 count: bool = False):
    """A job whose stream splits by a column (:meth:`ReplayJob.partition_key`): hash the
    edges on it into ``shards`` partitions (default: one per core); each task replays its
    partition in stream order in one engine, which therefore sees every edge of its keys."""
    from pyspark.sql import functions as F

    key = job.partition_key()
    if key not in edges_df.columns:
        raise QueryError(f"job {job.name!r} partitions by the field {key!r}, which the "
                         f"stream lacks (fields: {edges_df.columns})")
    parts = shards or spark.sparkContext.defaultParallelism
    placed = edges_df.repartition(parts, F.col(key))

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = received(batches, timings)
        if table is not None:
            yield from task_rows(job, table, None, count=count, timings=timings)

    return TaskPlan(placed, run_partition, {"strategy": "keys", "shards": parts, "key": key})


def _replay_in_place(spark, job: ReplayJob, edges_df, parts, extent: Extent,
                     timings: Any = None, count: bool = False):
    """Every partition of ``edges_df`` (in increasing stream order) is a shard as it stands.

    Its warm-up is the preceding extent: in time, or, for count windows, in edge rank
    (:func:`_ranked` numbers the edges first).
    """
    if extent.unit == "edges":
        ranked, starts = _ranked(edges_df, parts)
        return _replay_partitions(spark, job, ranked, starts, extent.size, RANK, timings,
                                  count)
    starts = {int(r["p"]): int(r["t_min"]) for r in parts}
    return _replay_partitions(spark, job, edges_df, starts, extent.size, "t", timings, count)


def _ranked(edges_df, parts):
    """``edges_df`` with each edge's 0-based place in stream order in column :data:`RANK`,
    and the rank of each partition's first edge. The partitions must hold increasing
    stretches of the stream: a partition, sorted, follows the counts of those before it."""
    from pyspark import TaskContext
    from pyspark.sql.types import LongType, StructField, StructType

    starts: dict[int, int] = {}
    total = 0
    for r in sorted(parts, key=lambda r: r["p"]):
        starts[int(r["p"])] = total
        total += int(r["n"])
    schema = StructType([*edges_df.schema.fields, StructField(RANK, LongType())])

    def number(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        own = received(batches)
        if own is None:
            return
        own = sort_stream(own)
        first = starts[TaskContext.get().partitionId()]
        rank = pa.array(np.arange(first, first + own.num_rows, dtype=np.int64))
        yield from own.append_column(RANK, rank).to_batches()

    return edges_df.mapInArrow(number, schema), starts


def _replay_rank_shards(spark, job: ReplayJob, edges_df, extent: Extent, shards,
                        shard_length_us, timings: Any = None, count: bool = False):
    """Count windows with no usable order: range-partition the stream on ``(t, seq)`` (one
    shuffle) into ``shards`` stretches of about equal edge counts, then replay in place."""
    if shard_length_us is not None:
        raise ValueError("a count window is cut by edge rank: give shards, not shard_length_us")
    stretches = shards or max(2, 4 * spark.sparkContext.defaultParallelism)
    ordered = edges_df.repartitionByRange(stretches, "t", "seq")
    pinned, parts, release = _pinned(ordered, None)
    plan = _released_after(_replay_in_place(spark, job, pinned, parts, extent, timings,
                                            count), release)
    plan.extra["strategy"] = "shuffle"
    return plan


def _replay_partitions(spark, job: ReplayJob, edges_df, starts: dict[int, int], extent: int,
                       pos: str = "t", timings: Any = None, count: bool = False):
    """Each partition replays its own edges after a broadcast warm-up: the edges within
    one extent before its first edge, measured on column ``pos`` (``starts``: each
    partition's first value of it)."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    first = min(starts, key=starts.__getitem__)
    windows = [(start - extent, start) for p, start in starts.items() if p != first]
    near_start = F.lit(False)
    for lo, hi in windows:
        near_start = near_start | ((F.col(pos) >= lo) & (F.col(pos) < hi))
    tails = edges_df.where(near_start).toArrow()
    tails = sort_stream(normalize_edges(tails)) if tails.num_rows else None
    shared = spark.sparkContext.broadcast(ipc_bytes(tails) if tails is not None else b"")

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        own = received(batches, timings)
        if own is None:
            return
        start = starts[TaskContext.get().partitionId()]
        warm = None
        if shared.value:
            everything = pa.ipc.open_stream(shared.value).read_all()
            in_range = pc.and_(pc.greater_equal(everything.column(pos), start - extent),
                               pc.less(everything.column(pos), start))
            warm = everything.filter(in_range)
        yield from task_rows(job, own, warm, count=count, timings=timings)

    return TaskPlan(edges_df, run_partition,
                    {"strategy": "partitions", "shards": len(starts),
                     "warmup_edges": 0 if tails is None else tails.num_rows})


def _replay_shuffled(spark, job: ReplayJob, edges_df, parts, extent: int, shards,
                     shard_length_us, timings: Any = None, count: bool = False):
    from pyspark.sql import functions as F

    t_min = min(int(r["t_min"]) for r in parts)
    t_max = max(int(r["t_max"]) for r in parts)
    if job.whole_stream:
        length = t_max - t_min + 1
    else:
        shards = shards or max(2, 4 * spark.sparkContext.defaultParallelism)
        length = shard_length_us or plan_shards(t_min, t_max, extent, shards)
    length = max(length, extent, 1)
    shard_count = -(-(t_max - t_min + 1) // length)

    shard = F.floor((F.col("t") - F.lit(t_min)) / F.lit(length)).cast("long")
    owned = edges_df.withColumn("_shard", shard).withColumn("_owned", F.lit(True))
    next_start = F.lit(t_min) + (F.col("_shard") + 1) * F.lit(length)
    copies = (
        owned.where((F.col("t") >= next_start - F.lit(extent)) & (F.col("_shard") + 1 < shard_count))
        .withColumn("_shard", F.col("_shard") + 1)
        .withColumn("_owned", F.lit(False))
    )
    sharded = owned.unionByName(copies)
    nparts = max(1, min(shard_count, spark.sparkContext.defaultParallelism * 2))
    keys = F.array(*[F.lit(k).cast("long") for k in partition_keys(nparts)])
    key_of_shard = F.element_at(keys, ((F.col("_shard") % nparts) + 1).cast("int"))
    placed = sharded.withColumn("_key", key_of_shard).repartition(nparts, "_key")

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = received(batches, timings)
        if table is None:
            return
        table = table.drop_columns(["_key"])
        for shard_id in sorted(pc.unique(table.column("_shard")).to_pylist()):
            rows = table.filter(pc.equal(table.column("_shard"), shard_id))
            yield from replay_shard(job, rows, timings, count)

    return TaskPlan(placed, run_partition,
                    {"strategy": "shuffle", "shards": shard_count, "shard_length_us": length})
