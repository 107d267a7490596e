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
    (:func:`socket_lines_lost`). graphcep holds the connection itself and hands the lines
    on to Spark (:class:`SocketRelay`): a server that goes away is reconnected to with
    backoff, and a micro-batch takes at most ``--max-records-per-batch`` lines.
:class:`GeneratorSource`
    The netflow generator as a stream (Spark's ``rate-micro-batch`` source: at most
    ``--max-records-per-batch`` rows a micro-batch, see :meth:`GeneratorSource.stream_df`,
    its offsets the rows and their due time): edge ``i`` arrives at
    ``i / rate`` seconds of event time, its endpoints drawn as :func:`generate_netflow`
    draws them (uniform source, uniform different destination) but from a counter-based
    hash of ``(seed, i)``, so any micro-batch can be generated on its own and a re-run
    batch regenerates the same edges. ``arrived_us`` holds the wall-clock time the row was
    due, for latency measurements; how long the newest row taken had been due is the
    stream's lag. Replayable, so exactly-once.
"""

from __future__ import annotations

import contextlib
import errno
import json
import os
import re
import select
import shutil
import socket
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NoReturn

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
from graphcep.io.sinks import replace_atomically
from graphcep.jobs.base import ReplayJob, format_refusal
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.streaming import BatchReport, Pace, StreamOperator, print_report

#: ``--max-records-per-batch`` when not given: about two seconds of matching at the driver
#: engine's quarter of a million edges a second, so that a stream offered more than it can
#: match falls behind in batches of bounded size instead of ever larger ones
DEFAULT_MAX_RECORDS = 500_000


@dataclass
class SourceBatch:
    """One micro-batch as the operator takes it."""

    edges: pa.Table | None
    rejects: pa.Table | None = None
    files: int = 0
    lines: int = 0
    #: file ordinal (``seq >> 40``) -> name, for late-edge records and warnings
    names: dict[int, str] | None = None
    #: where each line came from, for a source of records (Kafka):
    #: :func:`~graphcep.runtime.streaming.record_places`
    places: pa.Table | None = None
    #: ``TOPIC/PARTITION`` -> records not read yet, for a source of records (Kafka)
    partition_lag: dict[str, int] | None = None
    #: ``TOPIC/PARTITION`` -> offsets ``A-B`` of records deleted before they were read,
    #: the stream going on (Kafka's ``--on-data-loss report``)
    lost: dict[str, str] = field(default_factory=dict)
    #: how long the newest record taken had been due when the batch was read (µs; None:
    #: the source cannot tell), see :class:`~graphcep.runtime.streaming.Pace`
    lag_us: int | None = None


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
    """Lines from ``host:port`` (see module docstring), through a :class:`SocketRelay`."""

    host: str
    port: int
    fmt: str = "vast"
    options: ReaderOptions = field(default_factory=ReaderOptions)
    #: the most lines one micro-batch takes (``--max-records-per-batch``)
    max_records: int = DEFAULT_MAX_RECORDS
    relay: SocketRelay | None = field(default=None, repr=False, compare=False)

    def stream_df(self, spark: Any) -> Any:
        if self.relay is None:
            try:
                self.relay = SocketRelay(self.host, self.port, self.max_records,
                                         self.describe())
            except OSError as err:
                reason = ("connection refused (no server listening there; start it first)"
                          if isinstance(err, ConnectionRefusedError) else
                          f"cannot connect ({err.strerror or err})")
                raise StreamFailure(f"--source {self.describe()}: {reason}") from None
        # one partition: with more, Spark deals the lines out round-robin and their order
        # (which numbers them) would be lost
        return (spark.readStream.format("socket").option("host", "127.0.0.1")
                .option("port", str(self.relay.port)).option("numPartitions", "1").load())

    def describe(self) -> str:
        return f"tcp://{self.host}:{self.port}"

    def close(self) -> None:
        """End the connection to the server (the stream has stopped)."""
        if self.relay is not None:
            self.relay.close()
            self.relay = None

    def read_batch(self, batch_df: Any, operator: StreamOperator) -> SourceBatch:
        lines = batch_df.toArrow().column("value").combine_chunks()
        if self.relay is not None:
            self.relay.taken(len(lines))
            operator.totals.lost += self.relay.lost_since()  # checkpointed with this batch
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


def _closed_by_peer(connection: socket.socket) -> bool:
    """Whether the other end closed ``connection`` (it is readable, and reads nothing)."""
    try:
        readable, _, _ = select.select([connection], [], [], 0)
        return bool(readable) and connection.recv(1, socket.MSG_PEEK) == b""
    except OSError:
        return True


#: Seconds between attempts to reach a socket server that went away: doubling up to this
RECONNECT_MAX_S = 30.0


class SocketRelay:
    """Graphcep's connection to a socket server, handed on to Spark's socket source
    through a port of its own on 127.0.0.1.

    Spark's socket source reads a connection until the server closes it and then says
    nothing: the stream sat idle, and a restarted server was never contacted. The relay
    says once that the server went away (one warning line), tries it again after 1, 2, 4
    ... seconds (at most :data:`RECONNECT_MAX_S`) and goes on with what the new
    connection sends; a line the server was half-way through when it went is counted
    lost. It also caps the micro-batches: at most ``cap`` lines are handed to Spark
    that a finished micro-batch has not taken (:meth:`taken`), so a micro-batch holds at
    most ``cap`` lines and what the server sends beyond waits in the network's buffers
    and the server (whose writes then block), not in memory.
    """

    def __init__(self, host: str, port: int, cap: int, name: str,
                 connect_timeout: float = 10.0) -> None:
        self.host, self.port_upstream, self.cap, self.name = host, port, cap, name
        self.timeout = connect_timeout
        self.upstream = socket.create_connection((host, port), timeout=connect_timeout)
        self.upstream.settimeout(None)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.lines_relayed = 0
        self._lost = 0
        self._in_flight = 0
        self._credit = threading.Condition()
        self._closed = threading.Event()
        threading.Thread(target=self._run, name="socket-relay", daemon=True).start()

    def close(self) -> None:
        """Stop relaying (the stream has ended): no warning, no attempt to reconnect."""
        self._closed.set()
        for end in (self.upstream, self.listener):
            with contextlib.suppress(OSError):
                end.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                end.close()
        with self._credit:
            self._credit.notify_all()

    def taken(self, lines: int) -> None:
        """A micro-batch took ``lines`` lines: as many more may go to Spark."""
        with self._credit:
            self._in_flight = max(0, self._in_flight - lines)
            self._credit.notify_all()

    def lost_since(self) -> int:
        """Lines lost to a server going away since the last call."""
        with self._credit:
            lost, self._lost = self._lost, 0
        return lost

    def _run(self) -> None:
        try:
            spark, _ = self.listener.accept()
        except OSError:  # closed before Spark connected
            return
        with spark:
            while not self._closed.is_set():
                try:
                    self._relay_connection(spark)
                except OSError:  # Spark's end closed: the query stopped
                    return
                if not self._closed.is_set() and not _closed_by_peer(spark):
                    self._reconnect(spark)

    def _relay_connection(self, spark: socket.socket) -> None:
        """Hand on the current connection's lines until the server closes it."""
        rest = b""
        while True:
            try:
                data = self.upstream.recv(1 << 16)
            except OSError:
                data = b""
            if not data:
                if rest and not self._closed.is_set():  # the line the server was writing
                    with self._credit:
                        self._lost += 1
                self.upstream.close()
                return
            *lines, rest = (rest + data).split(b"\n")
            self._hand_on(spark, lines)

    def _hand_on(self, spark: socket.socket, lines: list[bytes]) -> None:
        done = 0
        while done < len(lines):
            with self._credit:
                while self._in_flight >= self.cap and not self._closed.is_set():
                    self._credit.wait()
                if self._closed.is_set():
                    return
                count = min(self.cap - self._in_flight, len(lines) - done)
                self._in_flight += count
            spark.sendall(b"\n".join(lines[done:done + count]) + b"\n")
            done += count
            self.lines_relayed += count

    def _reconnect(self, spark: socket.socket) -> None:
        print(f"graphcep: warning: {self.name} went away after {self.lines_relayed:,} lines; "
              f"trying it again every 1 s, doubling to {RECONNECT_MAX_S:.0f} s (what it "
              "sends meanwhile goes to no one)", file=sys.stderr, flush=True)
        delay = 1.0
        while not self._closed.wait(delay):
            if _closed_by_peer(spark):  # the query stopped: no one to read it for
                self.close()
                return
            try:
                self.upstream = socket.create_connection((self.host, self.port_upstream),
                                                         timeout=self.timeout)
            except OSError:
                delay = min(RECONNECT_MAX_S, delay * 2)
                continue
            self.upstream.settimeout(None)
            print(f"graphcep: {self.name} is back: reading it again", file=sys.stderr,
                  flush=True)
            return


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
    #: the most rows one micro-batch takes (``--max-records-per-batch``)
    max_records: int = DEFAULT_MAX_RECORDS
    #: seconds between micro-batches (``--trigger``; default: :meth:`interval`)
    trigger_seconds: float | None = None

    def describe(self) -> str:
        return (f"generator (vertices {self.vertices}, rate {self.rate}, seed {self.seed}, "
                f"event rate {self.event_rate or self.rate})")

    def interval(self) -> float:
        """Seconds between micro-batches when the stream keeps up: ``--trigger``, else
        one second -- shortened where its rows would pass :attr:`max_records`, so that the
        rows stay due at ``rate`` a second.

        >>> GeneratorSource(100, rate=2_000_000, max_records=500_000).interval()
        0.25
        >>> GeneratorSource(100, rate=1_000, max_records=500, trigger_seconds=2).interval()
        0.5
        """
        return min(self.trigger_seconds or 1.0, self.max_records / self.rate)

    def rows_per_batch(self) -> int:
        """The rows of one micro-batch: the rate over :meth:`interval`, at most
        :attr:`max_records`.

        >>> GeneratorSource(100, rate=2_000_000, max_records=500_000).rows_per_batch()
        500000
        """
        return max(1, min(self.max_records, round(self.rate * self.interval())))

    def stream_df(self, spark: Any) -> Any:
        """Spark's ``rate-micro-batch`` source: :meth:`rows_per_batch` rows a micro-batch,
        their timestamps :meth:`interval` apart from the stream's first start (when they
        were due; a restart goes on from the row and time in Spark's offsets), the
        micro-batches that far apart (:func:`start_stream`) or back to back when slower.
        Spark's ``rate`` source, whose micro-batch takes every row due since the one
        before, followed a slow batch by a larger one: they grew geometrically."""
        interval = self.interval()
        reader = (spark.readStream.format("rate-micro-batch")
                  .option("rowsPerBatch", str(self.rows_per_batch()))
                  .option("advanceMillisPerBatch", str(max(1, round(interval * 1000))))
                  .option("startTimestamp", str(int(time.time() * 1000))))
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
        # the rows' timestamps are when each was due: the newest one's age is the lag
        lag_us = max(0, int(time.time() * US_PER_SECOND) - int(pc.max(arrived).as_py()))
        return SourceBatch(edges, None, 0, rows.num_rows, lag_us=lag_us)

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
    pace: Pace | None = None,
) -> Any:
    """Start the streaming query: ``source`` -> ``operator`` per micro-batch.

    Spark's own progress (offsets, commits) is kept in ``<checkpoint>/spark``; the
    operator's state in ``<checkpoint>/state``. ``available_now`` processes what the source
    holds now and stops (then call ``operator.flush``, see :func:`run_available_now`).
    The operator numbers Spark's batch ``b`` as ``batch_offset + b`` (a socket source
    starts Spark's numbering afresh at every start, :func:`restart_socket_checkpoint`).
    ``pace``, when given, notes each batch's records and the source's lag, and adds its
    figures to the batch's report (and its warning, when the stream falls behind).

    A micro-batch that raises fails the query before Spark commits it, so a restart runs
    it again from the state before it; :func:`await_query` raises the error as a
    :class:`BatchFailure`.
    """

    operator.failure = None  # a new query: an earlier one's failure is not its own
    gate = operator.gate = BatchGate()

    def on_batch(batch_df: Any, spark_batch_id: int) -> None:
        batch_id = batch_offset + spark_batch_id
        with gate.batch():
            take(batch_df, batch_id)

    def take(batch_df: Any, batch_id: int) -> None:
        try:
            began = time.perf_counter()
            operator.recover(batch_id)  # the source numbers files and lines from the state
            got = source.read_batch(batch_df, operator)
            report: BatchReport = operator.process(batch_id, got.edges, got.rejects,
                                                   files=got.files, lines=got.lines,
                                                   names=got.names, places=got.places)
            if got.partition_lag is not None:
                report.partition_lag = operator.partition_lag = got.partition_lag
            for place, offsets in got.lost.items():  # said, counted, and gone on past
                operator.records_lost.setdefault(place, []).append(offsets)
                report.warnings.append(f"--source {source.describe()}: records deleted "
                                       f"before they were read (retention): {place} offsets "
                                       f"{offsets}; the stream goes on")
            if pace is not None:
                now = time.perf_counter()
                report.warnings += pace.observe(got.lines, now - began, got.lag_us, now)
                report.pace = pace.line()
            if on_report is not None:
                on_report(report)
        except Exception as err:
            # kept: Spark hands the error back as a py4j text with both stack traces
            if operator.failure is None:
                operator.failure = BatchFailure(batch_id, err)
            raise

    if isinstance(source, GeneratorSource):  # its rows are due at this pace
        trigger_seconds = source.interval()
    discard_unfinished_writes(Path(checkpoint) / "spark")
    writer = (source.stream_df(spark).writeStream.foreachBatch(on_batch)
              .option("checkpointLocation", str(Path(checkpoint) / "spark")))
    if available_now:
        writer = writer.trigger(availableNow=True)
    elif trigger_seconds:
        writer = writer.trigger(processingTime=f"{trigger_seconds} seconds")
    try:
        return writer.start()  # writes the query's metadata into the checkpoint
    except Exception as err:
        full = disk_failure(err, Path(checkpoint) / "spark")
        if full is None:
            raise
        raise full from None


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


class StopRequested(Exception):
    """Raised at the start of a micro-batch once the stream is to stop (:class:`BatchGate`):
    Spark commits nothing of that batch, which the next start runs."""


class BatchGate:
    """Lets a stream stop between micro-batches, never inside one.

    ``StreamingQuery.stop()`` interrupts the micro-batch under way: its Python code is cut
    short inside a call into the JVM, and Spark then reads the error's text with a
    regular expression that overflows the JVM's stack on a long traceback (a
    ``StackOverflowError`` trace of a thousand lines, the query never told). Closed, the
    gate waits for the batch under way to finish, and a batch that starts after raises
    :class:`StopRequested` before it reads anything; the query can then be stopped.
    """

    def __init__(self) -> None:
        self._closing = threading.Event()
        self._running = threading.Lock()

    @contextlib.contextmanager
    def batch(self) -> Iterator[None]:
        """Around one micro-batch (raises :class:`StopRequested` once closed)."""
        with self._running:
            if self._closing.is_set():
                raise StopRequested("the stream is stopping")
            yield

    def close(self, timeout: float | None = None) -> bool:
        """No micro-batch starts from now; wait (at most ``timeout`` seconds) for the one
        under way. Whether it finished."""
        self._closing.set()
        if not self._running.acquire(timeout=-1 if timeout is None else timeout):
            return False
        self._running.release()
        return True


def stop_between_batches(query: Any, operator: Any) -> None:
    """Stop a query after its micro-batch under way, if any (:class:`BatchGate`; a query
    started without one is stopped at once)."""
    gate = getattr(operator, "gate", None)
    if gate is not None:
        gate.close()
    query.stop()
    if isinstance(getattr(operator.failure, "cause", None), StopRequested):
        operator.failure = None  # the batch it kept from starting is the next start's


class BatchFailure(Exception):
    """Micro-batch ``batch_id`` raised ``cause``; Spark committed nothing of it, so the
    checkpoint holds the batches before it and a restart runs it again."""

    def __init__(self, batch_id: int, cause: BaseException) -> None:
        super().__init__(f"micro-batch {batch_id} failed: {one_line(cause)}")
        self.batch_id = batch_id
        self.cause = cause


#: What the JVM says when the system fails a write, as the errno Python would give.
_DISK_ERRORS = {"No space left on device": errno.ENOSPC, "Disk quota exceeded": errno.EDQUOT,
                "Read-only file system": errno.EROFS, "Input/output error": errno.EIO}


def disk_failure(err: BaseException, where: Path) -> OSError | None:
    """The system's failure to write Spark's checkpoint (a full disk...), which Spark
    raises as a Java exception, as the ``OSError`` Python would raise for ``where`` (the
    command line then says it in one line naming the path, exit 1); None for another
    error."""
    text = str(getattr(err, "desc", None) or err)
    for reason, number in _DISK_ERRORS.items():
        if reason in text:
            return OSError(number, reason, str(where))
    return None


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
    """What :func:`await_query` raises for ``err`` (see there; the system failing a
    write of Spark's checkpoint: an ``OSError``, :func:`disk_failure`)."""
    if operator.refusal is not None:
        return operator.refusal
    if operator.failure is not None:
        return operator.failure
    full = disk_failure(err, _checkpoint_of(operator) / "spark")
    if full is not None:
        return full
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


def _checkpoint_of(operator: Any) -> Path:
    """The stream's checkpoint directory (a StreamOperator keeps its state under
    ``state``, the executor mode's run the checkpoint itself)."""
    state = getattr(operator, "state_dir", None)
    return state.parent if state is not None else Path(getattr(operator, "checkpoint", "."))


def quiet_query_errors(spark: Any) -> None:
    """Keep Spark from logging a failed streaming query's error (both stack traces, a
    hundred lines or more): :func:`await_query` raises it, and the command line reports
    it in one line."""
    jvm = spark.sparkContext._jvm
    jvm.org.apache.logging.log4j.core.config.Configurator.setLevel(
        "org.apache.spark.sql.execution.streaming", jvm.org.apache.logging.log4j.Level.OFF)


def restart_socket_checkpoint(operator: StreamOperator,
                              checkpoint: str | os.PathLike) -> tuple[int, int]:
    """Begin a socket source's Spark checkpoint afresh; return the operator's batch id for
    Spark's batch 0 (:func:`start_stream`'s ``batch_offset``) and the lines newly counted
    lost.

    Spark's socket offsets count the lines of one connection: restored at a restart they
    make Spark drop the new connection's first lines as done, or fail ("Offsets committed
    out of order"). The lines of a micro-batch the last run left unfinished are counted
    into the operator's ``lost`` total first (:func:`socket_lines_lost`), and the total is
    written to ``CHECKPOINT/socket-lost.json`` before Spark's offsets go: a start that
    fails before its first micro-batch (no server listening yet) would otherwise take the
    count with it, the operator's state not being written until a batch finishes.
    """
    spark_dir = Path(checkpoint) / "spark"
    offset = operator.resume() + 1  # loads the state first: the count goes into it
    record = Path(checkpoint) / _LOST_FILE
    kept = json.loads(record.read_text()) if record.exists() else {}
    newly = 0
    unfinished = _unfinished_batch(spark_dir)
    if unfinished is not None and unfinished != kept.get("counted"):  # not counted yet
        newly = socket_lines_lost(spark_dir, operator)
    lost = max(operator.totals.lost, int(kept.get("lost", 0))) + newly
    if unfinished is not None:
        text = json.dumps({"lost": lost, "counted": unfinished}) + "\n"
        replace_atomically(record, lambda path: Path(path).write_text(text))
    operator.totals.lost = lost
    shutil.rmtree(spark_dir, ignore_errors=True)
    spark_dir.mkdir(parents=True)
    (spark_dir / _BATCH_OFFSET_FILE).write_text(f"{offset}\n")
    return offset, newly


_BATCH_OFFSET_FILE = "graphcep-batch-offset"

#: The socket lines lost so far, and which Spark run's micro-batch was counted last
_LOST_FILE = "socket-lost.json"


def _unfinished_batch(spark_dir: Path) -> str | None:
    """Which Spark run (its first operator batch id) and micro-batch the offsets log
    names last, when Spark did not commit it; None when there is none."""
    offsets = _batch_files(spark_dir / "offsets")
    if not offsets or max(offsets) in _batch_files(spark_dir / "commits"):
        return None
    marker = spark_dir / _BATCH_OFFSET_FILE
    start = marker.read_text().strip() if marker.exists() else "0"
    return f"{start}+{max(offsets)}"


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
                      batch_offset: int = 0) -> Any:
    """Process everything the source holds now, then flush the reorder buffer; the
    finished streaming query."""
    query = start_stream(spark, operator, source, checkpoint=checkpoint, available_now=True,
                         on_report=on_report, batch_offset=batch_offset)
    await_query(query, operator, source=source)
    report = operator.flush()
    if on_report is not None:
        on_report(report)
    return query


#: What makes a failed read or write the system's, not the input's or an option's (exit 1)
SYSTEM_ERRNOS = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS, errno.EFBIG})


def system_failed(err: BaseException) -> bool:
    """Whether ``err`` is the system failing a read or a write (a full disk...): exit 1,
    where a path that cannot be written as asked (a directory in a part's place) is 2."""
    return isinstance(err, OSError) and err.errno in SYSTEM_ERRNOS


#: What a checkpoint records of its stream on first start (``CHECKPOINT/graphcep.json``)
CHECKPOINT_IDENTITY = "graphcep.json"


def claim_checkpoint(checkpoint: Path, source: str, query: str, digest: str) -> None:
    """Record the stream a checkpoint belongs to on first start; refuse it to another.

    A checkpoint's state and totals are those of one query over one source: resumed for
    another source, Spark fails on the old directory's offsets; for another query (or the
    same file edited, or options that change the matches) the state would be the wrong
    one and the totals mixed. A checkpoint written before this record existed is adopted.
    """
    record = checkpoint / CHECKPOINT_IDENTITY
    try:
        _check_claim(checkpoint, record, source, query, digest)
    except QueryError:
        raise
    except OSError as err:
        if system_failed(err):  # a full disk: exit 1, the file named
            raise
        raise QueryError(f"--checkpoint {checkpoint}: cannot be used ({err})") from None
    except ValueError as err:  # not our record
        raise QueryError(f"--checkpoint {checkpoint}: cannot be used ({err})") from None


def _check_claim(checkpoint: Path, record: Path, source: str, query: str, digest: str) -> None:
    """:func:`claim_checkpoint`'s comparison (or first record)."""
    if record.exists():
        stored = json.loads(record.read_text(encoding="utf-8"))
        if not isinstance(stored, dict):
            raise ValueError(f"{record} is not graphcep's record of the stream")
        if _same_stream(stored, source, query, digest):
            return
        if has_finished_batches(checkpoint):
            _refuse_claim(checkpoint, stored, source, query)
        # no micro-batch ever finished here: the failed start's offsets go with its claim
        shutil.rmtree(checkpoint / "spark", ignore_errors=True)
        shutil.rmtree(checkpoint / "cells", ignore_errors=True)
    checkpoint.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"source": source, "query": query, "digest": digest}, indent=1)
    replace_atomically(record, lambda path: Path(path).write_text(text + "\n",
                                                                    encoding="utf-8"))


def _same_stream(stored: dict, source: str, query: str, digest: str) -> bool:
    return (stored.get("source"), stored.get("query"), stored.get("digest")) == (
        source, query, digest)


def _refuse_claim(checkpoint: Path, stored: dict, source: str, query: str) -> NoReturn:
    if (stored.get("source"), stored.get("query")) != (source, query):
        raise QueryError(
            f"checkpoint {checkpoint} belongs to query {stored.get('query')} over "
            f"{stored.get('source')}, not to query {query} over {source}: give another "
            "--checkpoint")
    raise QueryError(
        f"checkpoint {checkpoint} belongs to query {query} over {source} as it was "
        "first started: the query file or an option that changes its matches "
        "(--query-name, --window, --max-duration, --homomorphic, --format, "
        "--time-unit, --time-format, --header, --columns, the DDST engine, --pww and its "
        "options) or "
        "where its state lives (--matching executors against driver) differs since: give "
        "another --checkpoint")


def has_finished_batches(checkpoint: Path) -> bool:
    """Whether a micro-batch finished on this checkpoint (the operator, or the executor
    mode's totals, saved state): a start that failed before any (no server listening, a
    typo in --source) leaves it free for the corrected command."""
    state = checkpoint / "state"
    return (state.is_dir() and any(state.iterdir())) or any(
        (checkpoint / "cells").glob("totals-*"))
