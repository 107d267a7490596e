"""Streaming DataFrames in: :meth:`graphcep.api.Query.stream`, and the start of every stream.

::

    events = spark.readStream.schema("sender string, receiver string, ts timestamp") \\
                  .json("incoming/")
    running = q.stream(events, src="sender", dst="receiver", time="ts", lateness=5,
                       checkpoint="ckpt/", output="matches/")
    running.awaitTermination()

:func:`stream` takes a streaming Spark DataFrame the user built (any source Spark reads:
files, Kafka, rate, a table) and matches it with the operator of ``graphcep stream``
(:class:`~graphcep.runtime.streaming.driver.StreamOperator`): event time, a reorder buffer of
``lateness`` seconds, late edges written (never dropped silently), rows that cannot be
edges written as rejects, and exactly once through ``checkpoint``. It returns a
:class:`MatchStream`, Spark's ``StreamingQuery`` with graphcep's stop and errors.

:func:`start_matching` is the one place a stream starts, for this API and for the command
line's ``stream`` (:mod:`graphcep.cli.stream`): a source gives a streaming DataFrame
(``source.stream_df``) and turns each micro-batch of it into edges (``source.read_batch``);
the command line's sources read files, sockets, Kafka and the generator, the API's
:class:`DataFrameSource` a frame's columns.

Decisions
---------
* **Same columns, same rules as** :meth:`~graphcep.api.Query.match`: the frame's schema is
  checked before the stream starts by the batch API's own checks (a missing column named
  with a guess, a type that cannot hold what it is mapped to, ``time_unit`` with
  timestamps); Spark selects the columns needed (the rest never leave the executors) and
  each micro-batch is converted by the batch API's conversion, so a stream and the same
  rows given to ``q.match`` give the same edges, bit for bit (floats as their shortest
  decimal, timestamps whatever their unit).
* **Same identity.** ``seq`` numbers the rows 1, 2, ... in the stream's order (the
  micro-batches in order, the rows of one in the order Spark hands them over), as
  ``q.match`` numbers a frame's rows and the readers a headerless file's lines; an integer
  ``seq`` column the frame has is kept. Spark keeps a file's rows in order, but deals the
  files of one micro-batch to partitions by size: a directory of several files read in
  one micro-batch is numbered in Spark's order (give ``seq``, or ``maxFilesPerTrigger=1``).
* **Bad rows are rejects, not failures.** A batch frame with a row that cannot be an edge
  is refused whole; a stream writes such rows to ``rejects`` (default
  ``CHECKPOINT/rejects``, one part per micro-batch, ``line`` = the row's ``seq``) and goes
  on. Numbers without ``time_unit`` are checked per micro-batch as ``q.match`` checks a
  frame: epoch milliseconds read as seconds stop the stream with the unit to pass.
* **The driver matches**, as ``graphcep stream --matching driver`` does: the micro-batches
  reach the operator through ``foreachBatch`` in this process, so the session is a
  classic one (Spark Connect runs ``foreachBatch`` in a process of its own).
* **In the executors**, :func:`match_stream` (``Query.match`` on a streaming DataFrame)
  returns a streaming DataFrame of matches made by the HyperCube cells of ``graphcep
  stream --matching executors`` (:func:`cells_output`; their states in Spark's state
  store, so any sink serves), and :func:`start_cells` is the command line's executor-mode
  start (the same cells, stepped in ``foreachBatch``, their states recorded beside the
  checkpoint: Spark's stateful operator left out of each batch). Each task converts its
  rows as :meth:`DataFrameSource.read_batch` converts a micro-batch and numbers them
  within its chunk; the cells number the chunks in the order ``toArrow`` would hand them
  to the driver (:attr:`~graphcep.runtime.streaming.sources.SourcePart.chunks`), so the
  ``seq`` and ``match_id`` are this module's.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pyarrow as pa

    from graphcep.frame_edges import ColumnMapping
    from graphcep.runtime.streaming.driver import BatchReport, Pace, StreamOperator, StreamTotals
    from graphcep.runtime.streaming.sources import SourceBatch, SourcePart

__all__ = ["DataFrameSource", "MatchStream", "cells_output", "match_stream", "start_cells",
           "start_matching", "stream", "widened_job"]


class MatchStream:
    """A running stream of matches: Spark's ``StreamingQuery`` (its ``id``, ``status``,
    ``lastProgress``, ``isActive``... are this object's), with graphcep's
    :meth:`awaitTermination`, :meth:`stop` and :meth:`flush`.

    Parameters
    ----------
    query
        Spark's streaming query that hands the micro-batches to ``operator``.
    operator
        The stream's :class:`~graphcep.runtime.streaming.driver.StreamOperator`.
    source
        Where the micro-batches come from (named in errors).
    on_report
        Called with the :class:`~graphcep.runtime.streaming.driver.BatchReport` of the
        end-of-input flush too.
    plain_errors
        Raise a micro-batch's :class:`ValueError` or :class:`TypeError` (a row, a unit, a
        field the query reads) as one of that type, as the batch API raises it; otherwise
        as :class:`~graphcep.runtime.streaming.query.BatchFailure` (the command line's exit
        status tells them apart).
    sink
        The sink of the matches, closed by :meth:`stop` (None: its owner closes it).
    """

    def __init__(self, query: Any, operator: StreamOperator, source: Any,
                 on_report: Callable[[BatchReport], None] | None = None,
                 plain_errors: bool = False, sink: Any = None) -> None:
        self.query = query
        self.sink = sink
        self.operator = operator
        self.source = source
        self.on_report = on_report
        self.plain_errors = plain_errors

    def __getattr__(self, name: str) -> Any:
        if name == "query":  # not set yet (a copy being made): no recursion
            raise AttributeError(name)
        return getattr(self.query, name)

    @property
    def totals(self) -> StreamTotals:
        """Edges, matches, late edges, rejects... over the whole stream (restarts
        included: they are checkpointed)."""
        return self.operator.totals

    def awaitTermination(self, timeout: float | None = None) -> bool:  # noqa: N802 (Spark's)
        """Wait until the stream stops (at most ``timeout`` seconds); whether it has.

        What stopped it is raised in one line: a micro-batch's error as
        :class:`~graphcep.runtime.streaming.query.BatchFailure` (nothing of that micro-batch
        is committed: a restart runs it again; as a :class:`ValueError` or
        :class:`TypeError` under ``plain_errors``), the stream's refusal of its edges as a
        :class:`ValueError`, anything else as
        :class:`~graphcep.runtime.streaming.sources.StreamFailure`."""
        from graphcep.runtime.streaming.query import await_query

        with _errors_as_the_api_raises(self.plain_errors):
            await_query(self.query, self.operator, timeout, self.source)
        return not self.query.isActive

    def stop(self) -> None:
        """Stop after the micro-batch under way, if any (Spark's own ``stop`` would break
        into it); what a restart on the same checkpoint goes on from."""
        from graphcep.runtime.streaming.query import stop_between_batches

        stop_between_batches(self.query, self.operator)
        if self.sink is not None:
            self.sink.close()

    def flush(self) -> BatchReport:
        """End of input: match the edges the reorder buffer still holds (a finite stream has
        no later edge to move the watermark past them). Written as the micro-batch after
        the last and not checkpointed: a restart that reads more matches them then,
        once."""
        report = self.operator.flush()
        if self.on_report is not None:
            self.on_report(report)
        return report


def start_matching(spark: Any, operator: StreamOperator, source: Any, *,
                   checkpoint: str | os.PathLike[str], once: bool = False,
                   trigger_seconds: float | None = None,
                   on_report: Callable[[BatchReport], None] | None = None,
                   batch_offset: int = 0, pace: Pace | None = None,
                   plain_errors: bool = False) -> MatchStream:
    """Start matching ``source``'s streaming DataFrame with ``operator``: the one start of
    :func:`stream` and of ``graphcep stream``.

    ``source`` gives the streaming DataFrame (``stream_df(spark)``) and each micro-batch's
    edges (``read_batch(batch_df, operator)``), as the sources of
    :mod:`graphcep.runtime.streaming.sources` do. ``once``: match what the source holds now,
    flush the reorder buffer and return the finished stream (Spark's ``availableNow``
    trigger); otherwise it runs until stopped, a micro-batch every ``trigger_seconds``
    (default: back to back). ``batch_offset``, ``pace``: as
    :func:`~graphcep.runtime.streaming.query.start_stream` takes them; ``plain_errors`` as
    :class:`MatchStream` takes it.
    """
    from graphcep.runtime.streaming.query import run_available_now, start_stream

    if once:
        with _errors_as_the_api_raises(plain_errors):
            query = run_available_now(spark, operator, source, checkpoint=checkpoint,
                                      on_report=on_report, batch_offset=batch_offset)
    else:
        query = start_stream(spark, operator, source, checkpoint=checkpoint,
                             trigger_seconds=trigger_seconds, on_report=on_report,
                             batch_offset=batch_offset, pace=pace)
    return MatchStream(query, operator, source, on_report, plain_errors)


@contextlib.contextmanager
def _errors_as_the_api_raises(plain: bool) -> Iterator[None]:
    """A micro-batch's :class:`ValueError` or :class:`TypeError`, raised as one of that
    type when ``plain`` (one line: the micro-batch, the error, and that a restart runs
    it again)."""
    from graphcep.runtime.streaming.query import BatchFailure

    try:
        yield
    except BatchFailure as failure:
        cause = failure.cause
        if not plain or not isinstance(cause, ValueError | TypeError):
            raise
        kind = ValueError if isinstance(cause, ValueError) else TypeError
        raise kind(f"micro-batch {failure.batch_id}: {' '.join(str(cause).split())} "
                   "(not committed: a restart on the checkpoint runs it again)") from cause


@dataclass
class DataFrameSource:
    """A streaming DataFrame's rows as edges, its columns mapped as
    :meth:`~graphcep.api.Query.match` maps a frame's (the module docstring says how).

    Made by :func:`stream`, which checks the mapping against the frame's schema first.
    """

    frame: Any
    mapping: ColumnMapping
    time_unit: str | None
    keep: Sequence[str] | None
    #: the frame's columns the edges are read from (core fields and kept columns)
    selected: tuple[str, ...] = ()

    def __getstate__(self) -> dict[str, Any]:
        """Without the frame, which lives in the driver: an executor task that reads its
        rows (:meth:`read_part`) gets the mapping only."""
        return {**self.__dict__, "frame": None}

    def stream_df(self, spark: Any) -> Any:
        """The frame, only the columns the edges read (selected in Spark)."""
        return self.frame.select(*(f"`{name}`" for name in self.selected))

    def describe(self) -> str:
        return f"a streaming DataFrame ({_described(self.mapping)})"

    def read_batch(self, batch_df: Any, operator: StreamOperator) -> SourceBatch:
        """One micro-batch's rows as edges, numbered on from the rows before, and those
        that cannot be edges as rejects (``file``: the stream's description)."""
        import pyarrow as pa

        from graphcep.frame_edges import edge_rows
        from graphcep.io.readers import READ_REJECT_SCHEMA
        from graphcep.runtime.streaming.sources import SourceBatch

        rows = batch_df.toArrow()
        if rows.num_rows == 0:
            return SourceBatch(None)
        edges, rejects = edge_rows(rows, self.mapping, self.time_unit, self.keep,
                                    row_offset=operator.totals.lines)
        name = pa.array([self.describe()] * rejects.num_rows, pa.string())
        rejects = pa.Table.from_arrays([name, *rejects.columns], schema=READ_REJECT_SCHEMA)
        return SourceBatch(edges, rejects, 0, rows.num_rows)

    def read_part(self, rows: pa.Table, place: tuple[int, int]) -> SourcePart:
        """One executor task's rows as edges (executor mode, :func:`match_stream`): one
        chunk of the micro-batch at ``place`` (the task's partition, the Arrow batch's
        number in it), so that the cells number the rows on from the rows before, in the
        order ``toArrow`` hands a micro-batch to the driver mode (an integer ``seq``
        column the frame has is kept instead); rows that cannot be edges are counted
        (:func:`match_stream`)."""
        import numpy as np
        import pyarrow as pa

        from graphcep.frame_edges import edge_rows
        from graphcep.io.readers import READ_REJECT_SCHEMA
        from graphcep.runtime.streaming.sources import SourcePart

        edges, rejects = edge_rows(rows, self.mapping, self.time_unit, self.keep)
        name = pa.array([self.describe()] * rejects.num_rows, pa.string())
        rejects = pa.Table.from_arrays([name, *rejects.columns], schema=READ_REJECT_SCHEMA)
        if "seq" in self.selected:  # numbered by the frame
            return SourcePart(edges, [], rows.num_rows, rejects)
        key = (place[0] << 32) | place[1]  # one chunk per Arrow batch of a task
        edges = edges.append_column("_file", pa.array(np.full(edges.num_rows, key, np.int64)))
        return SourcePart(edges, [], rows.num_rows, rejects, [(place, key, rows.num_rows)])


def stream(query: Any, data: Any, *, src: str = "src", dst: str = "dst", time: str = "t",
           dur: str | None = None, time_unit: str | None = None,
           columns: Sequence[str] | None = None, lateness: float = 0,
           checkpoint: str | os.PathLike[str], output: str | os.PathLike[str] | None = None,
           on_matches: Callable[[pa.Table, int], None] | None = None,
           late: str | os.PathLike[str] | None = None,
           rejects: str | os.PathLike[str] | None = None, trigger: float | None = None,
           once: bool = False, on_report: Callable[[BatchReport], None] | None = None,
           pww: int | None = None, pww_base: float | str = 1,
           pww_max_duration: float | str | None = None,
           snapshot_interval: float | None = None) -> MatchStream:
    """Match ``query`` continuously over the streaming Spark DataFrame ``data``.

    Parameters
    ----------
    query
        A :class:`graphcep.api.Query` (:func:`graphcep.load`, :func:`graphcep.parse`).
    data
        A streaming DataFrame (``spark.readStream...``), one edge per row.
    src, dst, time, dur, time_unit, columns
        The columns and units, as :meth:`~graphcep.api.Query.match` reads them.
    lateness
        Seconds an edge may trail the newest one and still be matched (the reorder
        buffer); later edges are written to ``late``.
    checkpoint
        Directory of the stream's offsets and state: a restart with the same one goes on
        exactly where the last stopped (nothing matched twice, nothing lost).
    output
        Directory of one part of matches per micro-batch: ``OUT/`` (JSON lines),
        ``OUT.parquet/`` or ``OUT.dot/``, as ``graphcep stream -o``.
    on_matches
        Called with each micro-batch's matches (an Arrow table of the nested record) and
        its id, after ``output``; one of them is needed. A micro-batch of more than
        65,536 matches comes in several calls with the same id, one per chunk.
    late, rejects
        Directories of the late edges and of the rows that cannot be edges (default
        ``CHECKPOINT/late``, ``CHECKPOINT/rejects``).
    trigger
        Seconds between micro-batches (default: back to back).
    once
        Match what the source holds now, flush the reorder buffer, return the finished
        stream (files, Kafka: the batch-equivalent run, restartable).
    on_report
        Called with each micro-batch's :class:`~graphcep.runtime.streaming.driver.BatchReport`
        (``print`` its ``line()`` for ``graphcep stream``'s progress lines).
    pww, pww_base, pww_max_duration
        Progressive window widening, as :meth:`~graphcep.api.Query.match` takes it
        (``graphcep stream --pww L``): the micro-batches feed level 0, and the levels'
        state is checkpointed with the rest.
    snapshot_interval
        Seconds between snapshots of an engine that is more than its window
        (subscriptions, vertex features, anchored or unbounded ν-expressions, a
        widening); each micro-batch in
        between checkpoints only the edges it released, which a restart replays
        (``graphcep stream --snapshot-interval``; default 30, 0: every micro-batch).

    Returns
    -------
    MatchStream
        The running (or, ``once``, finished) stream.

    Raises
    ------
    TypeError
        ``data`` is no streaming DataFrame, or a column's type cannot hold what it is
        mapped to.
    ValueError
        A column named is missing, a unit or an option is wrong, the query needs a field
        the frame lacks, or a directory cannot be written.
    """
    from graphcep.frame_edges import ColumnMapping, checked_unit
    from graphcep.runtime.streaming.driver import (
        SNAPSHOT_INTERVAL_S,
        PartWriter,
        StreamOperator,
    )

    _check_streaming(data)
    widening = query._widening(pww, pww_base, pww_max_duration)
    job = widened_job(query.job(pww=widening is not None), widening)
    mapping = ColumnMapping(src=src, dst=dst, time=time, dur=dur)
    source = _checked_source(data, mapping, checked_unit(time_unit), columns, job)
    lateness_us = _seconds_argument("lateness", lateness, allow_zero=True)
    trigger_s = None if trigger is None else _seconds_argument("trigger", trigger) / 1e6
    snapshot_s = (SNAPSHOT_INTERVAL_S if snapshot_interval is None else
                  _seconds_argument("snapshot_interval", snapshot_interval, True) / 1e6)
    folder = Path(checkpoint)
    sink = _match_sink(job, output, on_matches, folder)
    _claim(folder, source, query, job, widening)
    operator = StreamOperator(job, lateness_us=lateness_us,
                              checkpoint=folder, sink=sink,
                              late_sink=PartWriter(late or folder / "late"),
                              reject_sink=PartWriter(rejects or folder / "rejects"),
                              on_matches=on_matches, threads=_driver_threads(data),
                              snapshot_interval=snapshot_s)
    try:
        running = start_matching(data.sparkSession, operator, source, checkpoint=folder,
                                 once=once, trigger_seconds=trigger_s, on_report=on_report,
                                 plain_errors=True)
    except BaseException:
        if sink is not None:
            sink.close()
        raise
    running.sink = sink
    if once and sink is not None:
        sink.close()
    return running


def _driver_threads(data: Any) -> int:
    """The engine's search threads: it runs in the driver, as many as the master has
    cores (as ``graphcep stream`` runs it)."""
    from graphcep.cores import usable_cores

    return max(1, min(data.sparkSession.sparkContext.defaultParallelism, usable_cores()))


def _check_streaming(data: Any) -> None:
    if type(data).__module__.split(".")[0] != "pyspark" or not hasattr(data, "isStreaming"):
        raise TypeError(f"Query.stream takes a streaming Spark DataFrame "
                        f"(spark.readStream...), not a {type(data).__module__}."
                        f"{type(data).__name__}: match a frame with Query.match")
    if not data.isStreaming:
        raise TypeError("Query.stream takes a streaming DataFrame (spark.readStream...); "
                        "this one is a batch DataFrame: match it with Query.match")


def _checked_source(frame: Any, mapping: ColumnMapping, time_unit: str | None,
                    keep: Sequence[str] | None, job: Any) -> DataFrameSource:
    """The frame's source, its schema checked before Spark starts: by the batch API's
    conversion of no rows of that schema (its checks name the column and the fix), then
    against the fields the query reads."""
    from graphcep.frame_edges import edge_rows

    empty = _arrow_schema(frame.schema).empty_table()
    edges, _ = edge_rows(empty, mapping, time_unit, keep)
    job.check_columns(edges.column_names)
    core = set(mapping.core().values())
    if mapping.dur is None and "dur" in empty.column_names:
        core.add("dur")
    wanted = core | set(empty.column_names if keep is None else keep)
    if "seq" in empty.column_names:
        wanted.add("seq")  # kept as the rows' numbers, as q.match keeps it
    selected = tuple(name for name in empty.column_names if name in wanted)
    return DataFrameSource(frame, mapping, time_unit, keep, selected)


def _arrow_schema(schema: Any) -> pa.Schema:
    """A Spark schema as the Arrow schema of its ``toArrow()`` batches; a column of a type
    Arrow cannot hold is typed ``null`` (refused by the checks if the edges read it)."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for column in schema.fields:
        try:
            kind = to_arrow_type(column.dataType, timezone="UTC")
        except Exception:  # a type pyspark does not convert (variant, nested maps...)
            kind = pa.null()
        fields.append(pa.field(column.name, kind))
    return pa.schema(fields)


def _seconds_argument(name: str, value: Any, allow_zero: bool = False) -> int:
    """``value`` seconds as µs (exact through their decimal text), or a
    :class:`ValueError` naming the argument."""
    from graphcep.events import seconds_to_us

    least = "0 or more" if allow_zero else "more than 0"
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError(f"{name}={value!r}: seconds, a number {least}")
    try:
        micros = seconds_to_us(value)
    except (ValueError, TypeError):
        raise ValueError(f"{name}={value!r}: seconds, a number {least}") from None
    if micros < 0 or (micros == 0 and not allow_zero):
        raise ValueError(f"{name}={value!r}: seconds, a number {least}")
    return micros


def _match_sink(job: Any, output: str | os.PathLike[str] | None,
                on_matches: Callable[..., Any] | None, checkpoint: Path) -> Any:
    """The directory of match parts ``output`` names (checked before the stream starts),
    or None when ``on_matches`` takes them."""
    from graphcep.io.sinks import SinkError, check_target, make_sink, sink_format

    if output is None:
        if on_matches is None:
            raise ValueError("give output= (a directory of match parts: OUT/, OUT.parquet/) "
                             "or on_matches= (a function called with each micro-batch's "
                             "matches)")
        return None
    if Path(output).resolve() == checkpoint.resolve():
        raise ValueError(f"output={os.fspath(output)!r} is the checkpoint directory, which "
                         "holds the stream's state: name a directory of its own")
    fmt = sink_format(output) or "jsonl"
    try:
        check_target(output, fmt, directory=True)
        return make_sink(output, fmt, directory=True, matches=job.output)
    except SinkError as err:
        raise ValueError(f"output={os.fspath(output)!r}: {err}") from None


def _claim(checkpoint: Path, source: DataFrameSource, query: Any, job: Any,
           widening: tuple[int, int, int | None] | None) -> None:
    """Record the stream ``checkpoint`` belongs to, and refuse it to another
    (:func:`~graphcep.runtime.streaming.query.claim_checkpoint`)."""
    from graphcep.patterns.subgraph import QueryError
    from graphcep.runtime.streaming.query import claim_checkpoint

    digest = hashlib.sha256(_query_text(query).encode())
    digest.update(json.dumps({"kind": query.kind, "options": query.options,
                              "mapping": _described(source.mapping),
                              "time_unit": source.time_unit,
                              "columns": None if source.keep is None else list(source.keep),
                              "pww": widening},
                             sort_keys=True, default=str).encode())
    try:
        claim_checkpoint(checkpoint, source.describe(), f"{query.path or '<query text>'} "
                         f"({job.name})", digest.hexdigest())
    except QueryError as err:
        raise ValueError(str(err).replace("--checkpoint", "checkpoint=")) from None


def _described(mapping: ColumnMapping) -> str:
    """``src=sender, dst=receiver, time=ts``: the columns the edges are read from."""
    return ", ".join(f"{mapping.parameter(core)}={column}"
                     for core, column in mapping.core().items())


def _query_text(query: Any) -> str:
    """The query's text (of its file, or of each ``.subs`` file of its directory)."""
    if query.text is not None:
        return query.text
    path = Path(query.path or "")
    files = sorted(path.glob("*.subs")) if path.is_dir() else [path]
    return "\n".join(f"{file.name}\n{file.read_text(encoding='utf-8', errors='replace')}"
                     for file in files)


def widened_job(job: Any, widening: tuple[int, int, int | None] | None) -> Any:
    """``job`` in progressive window widening's windows (``widening``: ``(L, T0, D)`` as
    :func:`~graphcep.jobs.options.pww_options` gives them), else itself: the job of
    ``graphcep stream --pww L`` and of ``q.stream(..., pww=L)``."""
    from graphcep.runtime.widening import WidenedJob, refuse_short_keep

    if widening is None:
        return job
    keep, base_us, max_duration_us = widening
    refuse_short_keep(job, keep)
    return WidenedJob(job, keep, base_us, max_duration_us)


def cells_output(spark: Any, job: Any, source: Any, *, cells: int, lateness_us: int,
                 attrs: pa.Schema) -> Any:
    """The streaming DataFrame of the executor mode's cells
    (:func:`~graphcep.runtime.streaming.cells.cell_matches`, rows of
    :data:`~graphcep.runtime.streaming.cells.OUTPUT_DDL`) over ``source``'s streaming
    DataFrame, its tasks' rows read by ``source.read_part``, the cells' states in Spark's
    state store: a streaming DataFrame for :func:`match_stream` (a user's frame) to write
    to any sink."""
    from graphcep.runtime.streaming.cells import cell_grid, cell_matches

    return cell_matches(source.stream_df(spark), source.read_part, job,
                        cell_grid(job, cells), lateness_us, attrs)


def start_cells(spark: Any, run: Any, source: Any, *, once: bool = False,
                trigger_seconds: float | None = None) -> Any:
    """Start matching ``source`` in the executors: the executor mode's counterpart of
    :func:`start_matching`, the start of ``graphcep stream --matching executors``. ``run``
    (a :class:`~graphcep.runtime.streaming.cells_run.CellsRun`) steps the cells in
    ``foreachBatch`` (:func:`~graphcep.runtime.streaming.cells.write_cells_stream`), writes
    their output to its sinks, part per micro-batch, and keeps the totals;
    ``once``: what the source holds now (Spark's ``availableNow``); ``trigger_seconds``:
    between micro-batches (a generator's own pace instead, as :func:`start_matching`)."""
    from graphcep.runtime.streaming.sources import paced

    return run.start(spark, source, available_now=once,
                     trigger_seconds=paced(source, trigger_seconds))


#: the name of a streaming DataFrame of matches' observed metrics (:func:`match_stream`)
METRICS = "graphcep"


def match_stream(query: Any, data: Any, mapping: ColumnMapping, time_unit: str | None,
                 keep: Sequence[str] | None, lateness: float | None,
                 cells: int | None) -> Any:
    """``Query.match`` on a streaming DataFrame: a streaming DataFrame of matches, with
    the columns of ``Query.match`` on a batch frame
    (:func:`~graphcep.frame_matches.match_table`), computed in the executors by the cells
    of ``graphcep stream --matching executors`` (:func:`cells_output`).

    ``lateness`` seconds: the reorder buffer, as :func:`stream` takes it; ``cells``: the
    HyperCube cells (default: the session's default parallelism). A match is a row once
    the watermark (the newest time less ``lateness``) has passed its edges; a streaming
    DataFrame has no end, so the edges within ``lateness`` of the newest stay buffered
    until later edges arrive. Late edges and rows that cannot be edges are not matched:
    each micro-batch counts them, with the edges and the matches, in the query's observed
    metrics :data:`METRICS` (``query.lastProgress["observedMetrics"]["graphcep"]``:
    ``edges``, ``matches``, ``late``, ``rejected``); :func:`stream` writes them.

    Raises
    ------
    ValueError
        The query is of a kind the executors do not run (``Query.stream`` runs it), or
        an argument or column is wrong.
    TypeError
        As :meth:`~graphcep.api.Query.match` raises it.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    from graphcep.frame_edges import edge_rows
    from graphcep.frame_matches import match_schema, match_table
    from graphcep.patterns.subgraph import QueryError
    from graphcep.runtime.streaming.cells import cell_attributes

    job = query.job()
    try:
        job.cell_query()
    except QueryError as err:
        raise ValueError(f"Query.match runs a streaming DataFrame in Spark's executors, "
                         f"which match SAL queries split by their vertex variables, and "
                         f"this {query.kind} query is not one ({' '.join(str(err).split())}): "
                         "match the stream with Query.stream, which runs every kind in "
                         "the driver") from None
    lateness_us = _seconds_argument("lateness", 0 if lateness is None else lateness,
                                    allow_zero=True)
    spark = data.sparkSession
    count = spark.sparkContext.defaultParallelism if cells is None else _cell_count(cells)
    source = _checked_source(data, mapping, time_unit, keep, job)
    selected = _arrow_schema(data.schema).empty_table().select(list(source.selected))
    edges, _ = edge_rows(selected, mapping, time_unit, keep)
    output = cells_output(spark, job, source, cells=count, lateness_us=lateness_us,
                          attrs=cell_attributes(job, edges.schema))
    counted = [F.sum(F.when(F.col("kind") == kind, F.col("count")).otherwise(0)).alias(name)
               for name, kind in (("edges", "stats"), ("matches", "match"), ("late", "late"),
                                  ("rejected", "reject"))]
    form = job.output

    def shaped(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        import pyarrow as pa

        for batch in batches:
            for kind, payload in zip(batch.column("kind").to_pylist(),
                                     batch.column("rows").to_pylist(), strict=True):
                if kind == "match":
                    found = pa.ipc.open_stream(payload).read_all()
                    yield from match_table(form, found).to_batches()

    return output.observe(METRICS, *counted).mapInArrow(
        shaped, from_arrow_schema(match_schema(form)))


def _cell_count(cells: Any) -> int:
    if isinstance(cells, bool) or not isinstance(cells, int) or cells < 1:
        raise ValueError(f"cells={cells!r}: the number of HyperCube cells, an integer "
                         "of 1 or more")
    return cells
