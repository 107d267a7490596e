"""What one replay runs, in the driver or in one Spark task, and how its shards are placed on partitions.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from graphcep.cores import usable_cores
from graphcep.hashing import spark_hash_long
from graphcep.jobs.base import ReplayJob
from graphcep.runtime.local import count_job, replay_job_chunks
from graphcep.timing import Phases

#: What a task (or the driver) spent receiving the rows it replays.
RECEIVING = "receiving rows (JVM to Python)"

#: What the driver spent collecting the edges of a replay it runs itself.
COLLECTING_EDGES = "collecting the edges to the driver"

# the "single" strategy replays streams up to this many edges in the driver
DRIVER_REPLAY_ROWS = 20_000_000


def spark_schema(job: ReplayJob):
    """The Spark type of the job's match rows, for ``mapInArrow``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(job.output.schema)


def received(batches: Iterator[pa.RecordBatch], timings: Any = None) -> pa.Table | None:
    """The rows a ``mapInArrow`` task received, or None when there are none: an empty
    partition sends no batch at all, and ``pa.Table.from_batches`` needs at least one (or
    a schema). Every function that replays a partition starts with this; the seconds the
    rows took to arrive go to the accumulator ``timings`` when given."""
    started = time.perf_counter()
    batches = list(batches)
    if timings is not None:
        timings.add({RECEIVING: time.perf_counter() - started})
    if not batches:
        return None
    table = pa.Table.from_batches(batches)
    return table if table.num_rows else None


#: What a ``mapInArrow`` task runs: the batches of its partition in, match rows out.
PartitionRun = Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]]


@dataclass
class TaskPlan:
    """How a strategy finds the matches, before anything runs: the DataFrame whose
    partitions are the tasks and what each task runs on its partition (``run``), or, for
    a replay in the driver, ``local`` (a generator of the same record batches, made when
    it is called); ``extra`` says what the strategy did (the run's statistics).

    A plan is lazy: a caller takes its rows as a DataFrame (:meth:`frame`, the Python
    API's matches), in bounded chunks (the command line's output), or all at once.
    ``release`` runs once the rows are taken (frames persisted for the plan)."""

    frame: Any
    run: PartitionRun | None
    extra: dict[str, Any]
    local: Callable[[], Iterator[pa.RecordBatch]] | None = None
    release: Callable[[], None] = field(default=lambda: None)

    def mapped(self, shape: Callable[[Iterator[pa.RecordBatch]], Iterator[pa.RecordBatch]],
               schema: Any) -> Any:
        """The tasks' rows as a lazy DataFrame of ``schema`` (a Spark type), each task's
        batches passed through ``shape``."""
        run = self.run
        if run is None:
            raise ValueError("a replay in the driver has no DataFrame of matches")
        return self.frame.mapInArrow(lambda batches: shape(run(batches)), schema)


def replay_single(spark, job: ReplayJob, edges_df, n: int, timings: Any = None,
                  count: bool = False, lazy: bool = False) -> TaskPlan:
    """One engine replays everything.

    Up to ``DRIVER_REPLAY_ROWS`` edges the engine runs in the driver (unless ``lazy``:
    the matches must then stay a DataFrame): Spark collects the partitions as Arrow in
    parallel and the driver's engine uses its cores. A single task would instead receive
    every row through one JVM-to-Python pipe (on the benchmark's 1M edges that pipe alone
    cost more than collecting and matching together). Larger streams run in one task, so
    the driver never has to hold them.
    """
    threads = driver_threads(spark)
    if runs_in_driver(n) and not lazy:
        def in_driver() -> Iterator[pa.RecordBatch]:
            started = time.perf_counter()
            table = edges_df.toArrow()
            if timings is not None:
                timings.add({COLLECTING_EDGES: time.perf_counter() - started})
            if table.num_rows:
                yield from task_rows(job, table, None, count=count, threads=threads,
                                     timings=timings)

        return TaskPlan(None, None, {"strategy": "single", "shards": 1, "where": "driver"},
                        local=in_driver)

    def run_all(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = received(batches, timings)
        if table is not None:
            yield from task_rows(job, table, None, count=count, threads=threads,
                                 timings=timings)

    # lazy: a shuffle into the one task, not a coalesce, so that the steps before it run
    # in tasks of their own partitions (the Python API numbers its rows by them)
    one = edges_df.repartition(1) if lazy else edges_df.coalesce(1)
    return TaskPlan(one, run_all, {"strategy": "single", "shards": 1, "where": "task"})


def runs_in_driver(n: int) -> bool:
    """Whether a single replay of ``n`` edges runs in the driver (else in one task)."""
    return n <= DRIVER_REPLAY_ROWS


def driver_threads(spark) -> int:
    """Threads for an engine in the driver: the session's cores, at most this process's."""
    return max(1, min(spark.sparkContext.defaultParallelism, usable_cores()))


def ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def partition_keys(parts: int) -> list[int]:
    """One integer per partition that Spark's hash partitioning sends to that partition.

    Shard ``i`` is tagged with key ``i % parts`` of this list, so repartitioning by the tag
    spreads shards evenly instead of letting hash collisions stack them in one task.
    """
    found: dict[int, int] = {}
    candidate = 0
    while len(found) < parts:
        found.setdefault(spark_hash_long(candidate) % parts, candidate)
        candidate += 1
    return [found[p] for p in range(parts)]


def replay_shard(job: ReplayJob, table: pa.Table, timings: Any = None,
                 count: bool = False) -> Iterator[pa.RecordBatch]:
    """What one shuffled Spark task runs: warm up on the copied edges, report the shard's own
    matches, as record batches of at most one chunk each (:func:`task_rows`)."""
    owned_mask = table.column("_owned")
    edges = table.drop_columns(["_shard", "_owned"])
    return task_rows(job, edges.filter(owned_mask), edges.filter(pc.invert(owned_mask)),
                     count=count, timings=timings)


def replay_chunks(job: ReplayJob, own: pa.Table, warm: pa.Table | None,
                  threads: int = 1, timings: Any = None) -> Iterator[pa.Table]:
    """Replay one shard, its matches in chunks as they are found
    (:func:`~graphcep.runtime.local.replay_job_chunks`): a task holds one chunk of them at
    a time, never a table of all. Spark runs one task per core, so one thread unless told
    otherwise. The seconds of its phases go to the accumulator ``timings`` when given
    (:func:`~graphcep.runtime.spark.profile.task_phases`), once the replay ends."""
    phases = Phases()
    yield from replay_job_chunks(job, own, warmup=warm, threads=threads, phases=phases)
    if timings is not None:
        timings.add(phases.seconds)


#: What a counting task yields: how many matches its shard completes, in one row (``part``
#: null), or one row per part where the engine counts its parts apart (``part``: a rule's
#: name, :func:`~graphcep.runtime.local.part_counts`).
COUNT_SCHEMA = pa.schema([("matches", pa.int64()), ("part", pa.string())])


def count_batch(found: int, parts: Mapping[str, int]) -> pa.RecordBatch:
    """A counting task's rows (:data:`COUNT_SCHEMA`): ``found`` in one row, or, where
    there are ``parts``, the count of each (they add up to ``found``)."""
    rows = sorted(parts.items()) if parts else [(None, found)]
    return pa.record_batch([pa.array([count for _, count in rows], pa.int64()),
                            pa.array([part for part, _ in rows], pa.string())],
                           schema=COUNT_SCHEMA)


def task_schema(job: ReplayJob, count: bool = False):
    """The Spark type of a task's rows: the job's match rows, or one count
    (:data:`COUNT_SCHEMA`) when the run counts (``graphcep run --count``)."""
    if not count:
        return spark_schema(job)
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(COUNT_SCHEMA)


def task_rows(job: ReplayJob, own: pa.Table, warm: pa.Table | None, *, count: bool = False,
              threads: int = 1, timings: Any = None,
              keep: Callable[[pa.Table], pa.Table] | None = None) -> Iterator[pa.RecordBatch]:
    """What a task yields for one shard: its matches, chunk by chunk as they are found
    (:func:`replay_chunks`), those ``keep`` keeps of each chunk when given; or, when
    ``count``, how many there are (:func:`count_batch`: counted by the engine, no match
    made, unless ``keep`` must look at each)."""
    if not count:
        chunks = replay_chunks(job, own, warm, threads=threads, timings=timings)
        yield from batches_of(map(keep, chunks) if keep is not None else chunks)
        return
    parts: Counter[str] = Counter()  # cells (keep) split no job of several parts
    if keep is not None:
        found = sum(keep(chunk).num_rows
                    for chunk in replay_chunks(job, own, warm, threads=threads, timings=timings))
    else:
        phases = Phases()
        found = count_job(job, own, warmup=warm, threads=threads, phases=phases, parts=parts)
        if timings is not None:
            timings.add(phases.seconds)
    yield count_batch(found, parts)


def counted(table: pa.Table) -> int:
    """The matches counted by the tasks of a counting run (their :data:`COUNT_SCHEMA` rows)."""
    return int(pc.sum(table.column("matches")).as_py() or 0) if table.num_rows else 0


def counted_parts(table: pa.Table) -> dict[str, int]:
    """Each part's matches among the rows of a counting run's tasks (:func:`count_batch`;
    none for a job of one part)."""
    named = table.filter(pc.is_valid(table.column("part")))
    summed = named.group_by("part").aggregate([("matches", "sum")])
    return dict(zip(summed.column("part").to_pylist(),
                    summed.column("matches_sum").to_pylist(), strict=True))


def batches_of(tables: Iterator[pa.Table]) -> Iterator[pa.RecordBatch]:
    """The record batches of each table in turn (what a ``mapInArrow`` task yields)."""
    for table in tables:
        yield from table.to_batches()


def replay_edges(job: ReplayJob, own: pa.Table, warm: pa.Table | None,
                 threads: int = 1, timings: Any = None) -> pa.Table:
    """:func:`replay_chunks`'s matches in one table (a replay in the driver, whose
    matches the driver collects anyway)."""
    parts = list(replay_chunks(job, own, warm, threads=threads, timings=timings))
    return pa.concat_tables(parts) if parts else job.output.schema.empty_table()


#: The Spark type of packed task output (:func:`packed`): one row per chunk of matches.
PACKED_TYPE = "chunk binary"


def packed(batches: Iterator[pa.RecordBatch], limit: int | None = None
           ) -> Iterator[pa.RecordBatch]:
    """A task's match batches as Arrow IPC bytes, one row a batch (:data:`PACKED_TYPE`),
    at most ``limit`` matches in all: rows the driver takes one at a time
    (:func:`~graphcep.runtime.spark.replay.driver_batches`), where Spark's rows of the
    matches themselves would be converted twice (Arrow to Spark rows, then back)."""
    room = limit
    for batch in batches:
        if room is not None:
            if room <= 0:
                return
            batch = batch.slice(0, room)
            room -= batch.num_rows
        if batch.num_rows:
            blob = ipc_bytes(pa.Table.from_batches([batch]))
            yield pa.record_batch([pa.array([blob], pa.binary())], names=["chunk"])


def unpacked(blob: bytes) -> Iterator[pa.RecordBatch]:
    """The match batches of one :func:`packed` row."""
    yield from pa.ipc.open_stream(blob).read_all().to_batches()
