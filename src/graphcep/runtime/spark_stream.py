"""Structured Streaming sources for ``graphcep stream``, and the query that drives the operator.

Every source turns one micro-batch of Spark rows into edges and rejects exactly as the batch
readers do; :func:`start_stream` hands them to a
:class:`~graphcep.runtime.streaming.StreamOperator` from ``foreachBatch`` (its module
docstring says why the operator lives in the driver).

Sources
-------
:class:`FileSource`
    A directory that files arrive in (csv, tsv, snap, vast, netflow5, jsonl, parquet,
    gzip). Spark's ``binaryFile`` source lists the new files of each micro-batch (its
    offsets make the batch replayable); the driver reads them and parses them with the
    local reader, so line numbers and rejects are exactly those of ``graphcep run``. Write each
    file elsewhere and move it in (a rename), or give it a name starting with ``.`` or
    ``_`` until it is complete: Spark lists files, it does not wait for writers. Files are
    taken in name order within a micro-batch; ``seq`` is the line number plus the file's
    arrival ordinal ``<< 40``. Replayable, so exactly-once.
:class:`SocketSource`
    Lines from a TCP socket (what SAL's ``VastStream("host", port)`` means), VAST by
    default; ``seq`` counts lines from the start of the stream. Spark's socket source keeps
    no offsets, so a restart continues with whatever the socket sends next: at-most-once
    for the lines in flight, which Spark documents for this source.
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
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats import ReaderOptions, parse_lines, prepare_options
from graphcep.io.readers import READ_REJECT_SCHEMA, read_edges_bytes
from graphcep.runtime.streaming import BatchReport, StreamOperator, print_report

_SPLITMIX_GAMMA = np.uint64(0x9E3779B97F4A7C15)


@dataclass
class SourceBatch:
    """One micro-batch as the operator takes it."""

    edges: pa.Table | None
    rejects: pa.Table | None = None
    files: int = 0
    lines: int = 0


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

    def read_batch(self, batch_df: Any, operator: StreamOperator) -> SourceBatch:
        paths = sorted(batch_df.toArrow().column("path").to_pylist())
        edges, rejects, lines = [], [], 0
        first = operator.next_file_index
        for offset, path in enumerate(paths):
            read = read_edges_bytes(_local_name(path), _read_file(path), self.fmt, self.options,
                                    file_index=first + offset)
            edges.append(read.edges)
            rejects.append(read.rejects)
            lines += read.lines_read
        if not edges:
            return SourceBatch(None)
        return SourceBatch(pa.concat_tables(edges, promote_options="permissive"),
                           pa.concat_tables(rejects), len(paths), lines)


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
        return SourceBatch(edges, rejects, 0, len(lines))


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


def generated_edges(index: np.ndarray, vertices: int, rate: int, seed: int = 1) -> pa.Table:
    """Edges number ``index`` of the generated stream (any subset, in any order).

    >>> generated_edges(np.arange(3), vertices=10, rate=2).column("t").to_pylist()
    [0, 500000, 1000000]
    """
    if vertices < 2:
        raise ValueError("the generator needs at least two vertices")
    index = np.asarray(index, dtype=np.int64)
    with np.errstate(over="ignore"):
        start = np.uint64(seed) * _SPLITMIX_GAMMA  # wraps around, as intended
    draws = _splitmix64(index.astype(np.uint64) * np.uint64(2) + start)
    src = (draws % np.uint64(vertices)).astype(np.int64)
    other = (_splitmix64(draws) % np.uint64(vertices - 1)).astype(np.int64)
    dst = other + (other >= src)
    t = (index * 1_000_000 + rate // 2) // rate  # i / rate seconds, rounded to whole µs
    return pa.table({
        "t": pa.array(t, pa.int64()),
        "src": _node_names(src),
        "dst": _node_names(dst),
        "dur": pa.array(np.full(len(index), 1_000_000, dtype=np.int64)),
        "seq": pa.array(index + 1, pa.int64()),
    })


def _splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser: a fast, well-mixed, counter-based 64-bit hash."""
    with np.errstate(over="ignore"):
        z = x + _SPLITMIX_GAMMA
        z = (z ^ (z >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        z = (z ^ (z >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return z ^ (z >> np.uint64(31))


def _node_names(ids: np.ndarray) -> pa.Array:
    return pc.binary_join_element_wise("node", pc.cast(pa.array(ids), pa.string()), "")


def _read_file(uri: str) -> bytes:
    """A file's bytes, from the local disk or any file system pyarrow reaches (hdfs, s3)."""
    if uri.startswith("file:"):
        return Path(_local_name(uri)).read_bytes()
    from pyarrow import fs

    filesystem, path = fs.FileSystem.from_uri(uri)
    with filesystem.open_input_stream(path) as stream:
        return stream.read()


def _local_name(uri: str) -> str:
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
) -> Any:
    """Start the streaming query: ``source`` -> ``operator`` per micro-batch.

    Spark's own progress (offsets, commits) is kept in ``<checkpoint>/spark``; the
    operator's state in ``<checkpoint>/state``. ``available_now`` processes what the source
    holds now and stops (then call ``operator.flush``, see :func:`run_available_now`).
    """

    def on_batch(batch_df: Any, batch_id: int) -> None:
        operator.recover(batch_id)  # the source numbers files and lines from the state
        got = source.read_batch(batch_df, operator)
        report: BatchReport = operator.process(batch_id, got.edges, got.rejects,
                                               files=got.files, lines=got.lines)
        if on_report is not None:
            on_report(report)

    writer = (source.stream_df(spark).writeStream.foreachBatch(on_batch)
              .option("checkpointLocation", str(Path(checkpoint) / "spark")))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_seconds:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    return writer.start()


def await_query(query: Any, operator: StreamOperator, timeout: float | None = None) -> None:
    """Wait for a streaming query (at most ``timeout`` seconds); raise what stopped it, if
    anything: the operator's refusal of the stream as itself (a :class:`QueryError`, which
    the command line reports in one line), any other failure as Spark raised it."""
    try:
        query.awaitTermination(timeout)
    except Exception:
        if operator.refusal is not None:
            raise operator.refusal from None
        raise
    if query.exception() is not None:
        if operator.refusal is not None:
            raise operator.refusal
        raise RuntimeError(f"streaming query failed: {query.exception()}")


def run_available_now(spark: Any, operator: StreamOperator, source: Any, *,
                      checkpoint: str | os.PathLike, on_report: Any = print_report) -> None:
    """Process everything the source holds now, then flush the reorder buffer."""
    query = start_stream(spark, operator, source, checkpoint=checkpoint, available_now=True,
                         on_report=on_report)
    await_query(query, operator)
    report = operator.flush()
    if on_report is not None:
        on_report(report)
