"""Structured Streaming sources for ``graphcep stream``, and the query that drives the operator.

Every source turns one micro-batch of Spark rows into edges and rejects exactly as the batch
readers do; :func:`start_stream` hands them to a
:class:`~graphcep.runtime.streaming.StreamOperator` from ``foreachBatch`` (its module
docstring says why the operator lives in the driver).

Sources
-------
:class:`FileSource`
    A directory that files arrive in (csv, tsv, snap, vast, netflow5, jsonl, parquet,
    tes, seq, syscall, gzip): a plain sequence's positions and a trace's times run on
    from the edges read before (the stream's count of edges and its newest time); a file
    of a format the query does not read is quarantined. Spark's ``binaryFile`` source lists the new files of each micro-batch (its
    offsets make the batch replayable); the driver reads them and parses them with the
    local reader, so line numbers and rejects are exactly those of ``graphcep run``. Write each
    file elsewhere and move it in (a rename), or give it a name starting with ``.`` or
    ``_`` until it is complete: Spark lists files, it does not wait for writers. Files are
    taken in name order within a micro-batch; ``seq`` is the line number plus the file's
    arrival ordinal ``<< 40``. Replayable, so exactly-once. A file that cannot be read
    (truncated or corrupt gzip, not Parquet, vanished) is quarantined: what the reader
    could take from it is matched, the damage is a reject (file, line, reason) and the
    stream goes on -- a restart never meets it again, as its micro-batch completed.
:class:`SocketSource`
    Lines from a TCP socket (what SAL's ``VastStream("host", port)`` means), VAST by
    default; ``seq`` counts lines from the start of the stream. Spark's socket source keeps
    no offsets that outlive a connection, so each start begins a new Spark checkpoint
    (``<checkpoint>/spark``) and continues the operator's batch ids, line numbers and
    state: a restart matches whatever the socket sends next. At-most-once for the lines
    in flight, which Spark documents for this source; the lines of a micro-batch that a
    crash or interrupt left unfinished are counted and reported at the next start
    (:func:`socket_lines_lost`).
:class:`GeneratorSource`
    The netflow generator as a stream (Spark's ``rate`` source): edge ``i`` arrives at
    ``i / rate`` seconds of event time, its endpoints drawn as :func:`generate_netflow`
    draws them (uniform source, uniform different destination) but from a counter-based
    hash of ``(seed, i)``, so any micro-batch can be generated on its own and a re-run
    batch regenerates the same edges. ``arrived_us`` holds the wall-clock time Spark
    stamped on the row, for latency measurements. Replayable, so exactly-once.
"""

from __future__ import annotations

import os
import re
import shutil
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import StateBoundError
from graphcep.events import US_PER_SECOND, concat_edges, empty_edges
from graphcep.hashing import GOLDEN_GAMMA, splitmix64
from graphcep.io.formats import ReaderOptions, parse_lines, prepare_options
from graphcep.io.readers import (
    READ_REJECT_SCHEMA,
    ReadResult,
    guess_format_of_name,
    last_second,
    read_edges_bytes,
)
from graphcep.jobs.base import ReplayJob, format_refusal
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming import BatchReport, StreamOperator, print_report


@dataclass
class SourceBatch:
    """One micro-batch as the operator takes it."""

    edges: pa.Table | None
    rejects: pa.Table | None = None
    files: int = 0
    lines: int = 0
    #: file ordinal (``seq >> 40``) -> name, for late-edge records and warnings
    names: dict[int, str] | None = None


@dataclass
class SourcePart:
    """What one executor task read of a micro-batch (executor mode,
    :mod:`graphcep.runtime.spark_cells`): edges numbered within their file (``seq``
    without the file's ordinal, which only the whole micro-batch decides), ``_file`` the
    :func:`file_key` of each edge's file, the files read (URIs) and their lines and
    rejects."""

    edges: pa.Table
    files: list[str] = field(default_factory=list)
    lines: int = 0
    rejects: pa.Table | None = None


def file_key(name: str) -> int:
    """A file's name as a 64-bit key (the ``_file`` column of a :class:`SourcePart`)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little",
                          signed=True)


@dataclass
class FileSource:
    """Files arriving in ``path`` (see module docstring)."""

    path: str
    fmt: str | None = None
    options: ReaderOptions = field(default_factory=ReaderOptions)
    max_files_per_trigger: int | None = None

    def stream_df(self, spark: Any) -> Any:
        reader = spark.readStream.format("binaryFile").schema(
            "path string, modificationTime timestamp, length long, content binary")
        if self.max_files_per_trigger:
            reader = reader.option("maxFilesPerTrigger", str(self.max_files_per_trigger))
        # only the names: the driver reads the files itself, which is much faster than
        # moving their bytes through the JVM (the content column is never read)
        return reader.load(str(self.path)).select("path")

    def describe(self) -> str:
        return self.path

    def read_batch(self, batch_df: Any, operator: StreamOperator) -> SourceBatch:
        paths = sorted(batch_df.toArrow().column("path").to_pylist())
        if not paths:
            return SourceBatch(None)
        edges, rejects, lines, names = [], [], 0, {}
        first = operator.next_file_index
        symbols, after = operator.totals.edges, operator.newest_t // US_PER_SECOND
        for offset, path in enumerate(paths):
            names[first + offset] = name = local_name(path)
            read = self._read(path, name, first + offset, operator.job, symbols,
                              max(after, last_second(edges)))
            if read.edges.num_rows:
                edges.append(read.edges)
            rejects.append(read.rejects)
            lines += read.lines_read
            symbols += read.edges.num_rows
        table = concat_edges(edges) if edges else None
        rejects = [r.cast(READ_REJECT_SCHEMA) for r in rejects]  # one nullability for all
        return SourceBatch(table, pa.concat_tables(rejects), len(paths), lines, names)

    def read_part(self, rows: pa.Table) -> SourcePart:
        """The files of one executor task (see :class:`SourcePart`), read as
        :meth:`read_batch` reads them."""
        uris = sorted(rows.column("path").to_pylist())
        edges, rejects, lines = [], [], 0
        for uri in uris:
            name = local_name(uri)
            read = self._read(uri, name, 0)
            if read.edges.num_rows:
                key = np.full(read.edges.num_rows, file_key(name), np.int64)
                edges.append(read.edges.append_column("_file", pa.array(key)))
            rejects.append(read.rejects.cast(READ_REJECT_SCHEMA))
            lines += read.lines_read
        table = concat_edges(edges) if edges else empty_edges()
        return SourcePart(table, uris, lines,
                          pa.concat_tables(rejects) if rejects else None)

    def _read(self, uri: str, name: str, file_index: int, job: ReplayJob | None = None,
              symbols: int = 0, after: int = 0) -> ReadResult:
        """One arrived file as the batch reader reads it (a plain sequence's positions and
        a trace's times running on from the stream's ``symbols`` edges and second
        ``after``); a file it cannot read at all, or of a format the query does not read
        (``job``: the driver checks; executor mode runs SAL queries only, on edge files),
        is quarantined (one reject naming the file and why) instead of failing the stream,
        which would meet the same file again at every restart."""
        fmt = self.fmt or guess_format_of_name(name)
        refusal = None if job is None else format_refusal(job, fmt)
        try:
            if refusal is not None:
                raise QueryError(refusal)
            return read_edges_bytes(name, _read_file(uri), self.fmt, self.options,
                                    file_index=file_index, symbols=symbols, after=after)
        except Exception as err:  # whatever the damage: the file's, not the stream's
            reason = f"unreadable file, skipped: {type(err).__name__}: {err}"
            reject = pa.table({"file": [name], "line": [0], "reason": [reason], "text": [""]},
                              schema=READ_REJECT_SCHEMA)
            return ReadResult(empty_edges(), reject, 0, 0, self.fmt or "")


@dataclass
class SocketSource:
    """Lines from ``host:port`` (see module docstring)."""

    host: str
    port: int
    fmt: str = "vast"
    options: ReaderOptions = field(default_factory=ReaderOptions)

    def stream_df(self, spark: Any) -> Any:
        # one partition: with more, Spark deals the lines out round-robin and their order
        # (which numbers them) would be lost
        return (spark.readStream.format("socket").option("host", self.host)
                .option("port", str(self.port)).option("numPartitions", "1").load())

    def describe(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    def read_batch(self, batch_df: Any, operator: StreamOperator) -> SourceBatch:
        lines = batch_df.toArrow().column("value").combine_chunks()
        if len(lines) == 0:
            return SourceBatch(None)
        first = operator.totals.lines + 1
        numbers = np.arange(first, first + len(lines), dtype=np.int64)
        head = lines.slice(0, 64).to_pylist() if first == 1 else []
        options = prepare_options(self.fmt, head, self.options) if head else self.options
        edges, rejects = parse_lines(lines, numbers, self.fmt, options)
        name = pa.array([f"{self.host}:{self.port}"] * rejects.num_rows, pa.string())
        rejects = pa.Table.from_arrays([name, *rejects.columns], schema=READ_REJECT_SCHEMA)
        return SourceBatch(edges, rejects, 0, len(lines), {0: f"{self.host}:{self.port}"})


@dataclass
class GeneratorSource:
    """Generated netflow at ``rate`` edges per second (see module docstring)."""

    vertices: int
    rate: int
    seed: int = 1
    partitions: int | None = None
    #: edges per second of *event* time (default ``rate``): replaying a stream faster or
    #: slower than it happened, e.g. 60k/s of netflow at 250k rows/s
    event_rate: int | None = None

    def describe(self) -> str:
        return (f"generator (vertices {self.vertices}, rate {self.rate}, seed {self.seed}, "
                f"event rate {self.event_rate or self.rate})")

    def stream_df(self, spark: Any) -> Any:
        reader = spark.readStream.format("rate").option("rowsPerSecond", str(self.rate))
        if self.partitions:
            reader = reader.option("numPartitions", str(self.partitions))
        return reader.load()

    def read_batch(self, batch_df: Any, operator: StreamOperator) -> SourceBatch:
        rows = batch_df.toArrow()
        if rows.num_rows == 0:
            return SourceBatch(None)
        index = rows.column("value").to_numpy().astype(np.int64)
        arrived = pc.cast(rows.column("timestamp"), pa.timestamp("us")).cast(pa.int64())
        edges = generated_edges(index, self.vertices, self.event_rate or self.rate, self.seed)
        edges = edges.append_column("arrived_us", arrived)
        return SourceBatch(edges, None, 0, rows.num_rows)

    def read_part(self, rows: pa.Table) -> SourcePart:
        """One executor task's rows as edges (see :class:`SourcePart`)."""
        index = rows.column("value").to_numpy().astype(np.int64)
        edges = generated_edges(index, self.vertices, self.event_rate or self.rate, self.seed)
        return SourcePart(edges, [], rows.num_rows)


def generated_edges(index: np.ndarray, vertices: int, rate: int, seed: int = 1) -> pa.Table:
    """Edges number ``index`` of the generated stream (any subset, in any order).

    >>> generated_edges(np.arange(3), vertices=10, rate=2).column("t").to_pylist()
    [0, 500000, 1000000]
    """
    if vertices < 2:
        raise ValueError("the generator needs at least two vertices")
    index = np.asarray(index, dtype=np.int64)
    with np.errstate(over="ignore"):
        start = np.uint64(seed) * GOLDEN_GAMMA  # wraps around, as intended
    draws = splitmix64(index.astype(np.uint64) * np.uint64(2) + start)
    src = (draws % np.uint64(vertices)).astype(np.int64)
    other = (splitmix64(draws) % np.uint64(vertices - 1)).astype(np.int64)
    dst = other + (other >= src)
    t = (index * 1_000_000 + rate // 2) // rate  # i / rate seconds, rounded to whole µs
    return pa.table({
        "t": pa.array(t, pa.int64()),
        "src": _node_names(src),
        "dst": _node_names(dst),
        "dur": pa.array(np.full(len(index), 1_000_000, dtype=np.int64)),
        "seq": pa.array(index + 1, pa.int64()),
    })



def _node_names(ids: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise("node", pc.cast(pa.array(ids), pa.string()), "")


def _read_file(uri: str) -> bytes:
    """A file's bytes, from the local disk or any file system pyarrow reaches (hdfs, s3)."""
    if uri.startswith("file:"):
        return Path(local_name(uri)).read_bytes()
    from pyarrow import fs

    filesystem, path = fs.FileSystem.from_uri(uri)
    with filesystem.open_input_stream(path) as stream:
        return stream.read()


def local_name(uri: str) -> str:
    """``file:/a/b%20c.csv`` -> ``/a/b c.csv`` (other schemes stay as they are)."""
    if not uri.startswith("file:"):
        return uri
    from urllib.parse import unquote, urlparse

    return unquote(urlparse(uri).path)


def start_stream(
    spark: Any,
    operator: StreamOperator,
    source: FileSource | SocketSource | GeneratorSource,
    *,
    checkpoint: str | os.PathLike,
    trigger_seconds: float | None = None,
    available_now: bool = False,
    on_report: Any = print_report,
    batch_offset: int = 0,
) -> Any:
    """Start the streaming query: ``source`` -> ``operator`` per micro-batch.

    Spark's own progress (offsets, commits) is kept in ``<checkpoint>/spark``; the
    operator's state in ``<checkpoint>/state``. ``available_now`` processes what the source
    holds now and stops (then call ``operator.flush``, see :func:`run_available_now`).
    The operator numbers Spark's batch ``b`` as ``batch_offset + b`` (a socket source
    starts Spark's numbering afresh at every start, :func:`restart_socket_checkpoint`).

    A micro-batch that raises fails the query before Spark commits it, so a restart runs
    it again from the state before it; :func:`await_query` raises the error as a
    :class:`BatchFailure`.
    """

    operator.failure = None  # a new query: an earlier one's failure is not its own

    def on_batch(batch_df: Any, spark_batch_id: int) -> None:
        batch_id = batch_offset + spark_batch_id
        try:
            operator.recover(batch_id)  # the source numbers files and lines from the state
            got = source.read_batch(batch_df, operator)
            report: BatchReport = operator.process(batch_id, got.edges, got.rejects,
                                                   files=got.files, lines=got.lines,
                                                   names=got.names)
            if on_report is not None:
                on_report(report)
        except Exception as err:
            # kept: Spark hands the error back as a py4j text with both stack traces
            if operator.failure is None:
                operator.failure = BatchFailure(batch_id, err)
            raise

    discard_unfinished_writes(Path(checkpoint) / "spark")
    writer = (source.stream_df(spark).writeStream.foreachBatch(on_batch)
              .option("checkpointLocation", str(Path(checkpoint) / "spark")))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_seconds:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer.start()


def discard_unfinished_writes(spark_dir: Path) -> list[Path]:
    """Remove what a killed run left half-written in Spark's checkpoint logs: Spark writes
    each log file to a hidden ``.NAME.UUID.tmp`` (and its ``.crc``) and renames it when
    done, so such a file is never part of the checkpoint. Left by a kill during batch 0's
    offsets, it makes Spark refuse the restart ("should be empty on batch 0"). The files
    removed are returned. Call only while no query runs on ``spark_dir``."""
    removed = []
    for log in ("offsets", "commits"):
        folder = spark_dir / log
        if not folder.is_dir():
            continue
        for path in folder.iterdir():
            if path.name.startswith(".") and path.name.endswith((".tmp", ".tmp.crc")):
                path.unlink(missing_ok=True)
                removed.append(path)
    return removed


class BatchFailure(Exception):
    """Micro-batch ``batch_id`` raised ``cause``; Spark committed nothing of it, so the
    checkpoint holds the batches before it and a restart runs it again."""

    def __init__(self, batch_id: int, cause: BaseException) -> None:
        super().__init__(f"micro-batch {batch_id} failed: {one_line(cause)}")
        self.batch_id = batch_id
        self.cause = cause


class StreamFailure(Exception):
    """The streaming query stopped outside the micro-batches (a source that cannot be
    reached, a checkpoint Spark refuses): Spark's reason, in one line."""


def one_line(err: BaseException) -> str:
    """``Type: first line of the message`` (a Spark message goes on with stack traces)."""
    text = str(err).strip().splitlines()
    return f"{type(err).__name__}: {text[0] if text else ''}".rstrip(": ")


def await_query(query: Any, operator: StreamOperator, timeout: float | None = None,
                source: Any = None) -> None:
    """Wait for a streaming query (at most ``timeout`` seconds); raise what stopped it, if
    anything: the operator's refusal of the stream as itself (a :class:`QueryError`, which
    the command line reports in one line), a micro-batch's error as :class:`BatchFailure`,
    anything else as :class:`StreamFailure`."""
    try:
        query.awaitTermination(timeout)
    except Exception as err:
        raise _failure(err, operator, source) from None
    if query.exception() is not None:
        raise _failure(query.exception(), operator, source)


def _failure(err: Any, operator: StreamOperator, source: Any) -> Exception:
    if operator.refusal is not None:
        return operator.refusal
    if operator.failure is not None:
        return operator.failure
    text = str(getattr(err, "desc", None) or err)
    bound = StateBoundError.found_in(text)  # hit in a cell on an executor
    if bound is not None:
        return StateBoundError(f"{bound} (in a cell on an executor; the checkpoint holds "
                               "the micro-batches before it, and a restart runs it again)")
    where = source.describe() if source is not None else "the source"
    if "Connection refused" in text or "ConnectException" in text:
        return StreamFailure(f"--source {where}: connection refused (no server listening "
                             "there; start it first)")
    # Spark's message: "[STREAM_FAILED] Query [id = ..., runId = ...] terminated with
    # exception: <reason> SQLSTATE: ..." and then stack traces
    first = text.strip().splitlines()[0] if text.strip() else type(err).__name__
    reason = re.sub(r"^.*terminated with exception: ", "", first)
    reason = re.sub(r"\s*SQLSTATE: \w+\s*$", "", reason)
    return StreamFailure(f"the streaming query over {where} stopped: {reason}")


def quiet_query_errors(spark: Any) -> None:
    """Keep Spark from logging a failed streaming query's error (both stack traces, a
    hundred lines or more): :func:`await_query` raises it, and the command line reports
    it in one line."""
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming", jvm.org.apache.logging.log4j.Level.OFF)


def restart_socket_checkpoint(operator: StreamOperator, checkpoint: str | os.PathLike) -> int:
    """Begin a socket source's Spark checkpoint afresh; return the operator's batch id for
    Spark's batch 0 (:func:`start_stream`'s ``batch_offset``).

    Spark's socket offsets count the lines of one connection: restored at a restart they
    make Spark drop the new connection's first lines as done, or fail ("Offsets committed
    out of order"). The lines of a micro-batch the last run left unfinished are counted
    into the operator's ``lost`` total first (:func:`socket_lines_lost`).
    """
    spark_dir = Path(checkpoint) / "spark"
    offset = operator.resume() + 1  # loads the state first: the count goes into it
    operator.totals.lost += socket_lines_lost(spark_dir, operator)
    shutil.rmtree(spark_dir, ignore_errors=True)
    spark_dir.mkdir(parents=True)
    (spark_dir / _BATCH_OFFSET_FILE).write_text(f"{offset}\n")
    return offset


_BATCH_OFFSET_FILE = "graphcep-batch-offset"


def socket_lines_lost(spark_dir: Path, operator: StreamOperator) -> int:
    """Lines of the socket micro-batch Spark planned (its offsets written) but neither
    Spark nor the operator finished: a crash or interrupt lost them, as the socket
    cannot send them again."""
    offsets = _batch_files(spark_dir / "offsets")
    if not offsets:
        return 0
    last = max(offsets)
    if last in _batch_files(spark_dir / "commits"):
        return 0
    marker = spark_dir / _BATCH_OFFSET_FILE
    offset = int(marker.read_text()) if marker.exists() else 0
    if operator.resume() >= offset + last:
        return 0  # the operator finished it; only Spark's commit was missing
    end = _socket_offset(offsets[last])
    start = _socket_offset(offsets[last - 1]) if last - 1 in offsets else -1
    return max(0, end - start)


def _batch_files(directory: Path) -> dict[int, Path]:
    if not directory.is_dir():
        return {}
    return {int(p.name): p for p in directory.iterdir() if p.name.isdigit()}


def _socket_offset(path: Path) -> int:
    """The line offset in an offsets-log entry: a version line, the batch's metadata (a
    JSON object), then one offset per source -- the socket's a plain number."""
    lines = path.read_text().splitlines()
    try:
        return int(lines[2])
    except (IndexError, ValueError):  # not a socket's offset: nothing to count
        return -1


def run_available_now(spark: Any, operator: StreamOperator, source: Any, *,
                      checkpoint: str | os.PathLike, on_report: Any = print_report,
                      batch_offset: int = 0) -> None:
    """Process everything the source holds now, then flush the reorder buffer."""
    query = start_stream(spark, operator, source, checkpoint=checkpoint, available_now=True,
                         on_report=on_report, batch_offset=batch_offset)
    await_query(query, operator, source=source)
    report = operator.flush()
    if on_report is not None:
        on_report(report)
