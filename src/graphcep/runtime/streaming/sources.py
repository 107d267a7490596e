"""Structured Streaming sources for ``graphcep stream``, and the query that drives the operator.

Every source turns one micro-batch of Spark rows into edges and rejects exactly as the batch
readers do; :func:`start_stream` hands them to a
:class:`~graphcep.runtime.streaming.driver.StreamOperator` from ``foreachBatch`` (its module
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
import select
import socket
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

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
from graphcep.runtime.streaming.driver import DAMAGED_FILE, SKIPPED_FILE, StreamOperator

#: ``--max-records-per-batch`` when not given: about two seconds of matching at the driver
#: engine's quarter of a million edges a second, so that a stream offered more than it can
#: match falls behind in batches of bounded size instead of ever larger ones
DEFAULT_MAX_RECORDS = 500_000


class StreamFailure(Exception):
    """The streaming query stopped outside the micro-batches (a source that cannot be
    reached, a checkpoint Spark refuses): Spark's reason, in one line."""


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
    #: :func:`~graphcep.runtime.streaming.driver.record_places`
    places: pa.Table | None = None
    #: ``TOPIC/PARTITION`` -> records not read yet, for a source of records (Kafka)
    partition_lag: dict[str, int] | None = None
    #: ``TOPIC/PARTITION`` -> offsets ``A-B`` of records deleted before they were read,
    #: the stream going on (Kafka's ``--on-data-loss report``)
    lost: dict[str, str] = field(default_factory=dict)
    #: how long the newest record taken had been due when the batch was read (µs; None:
    #: the source cannot tell), see :class:`~graphcep.runtime.streaming.driver.Pace`
    lag_us: int | None = None


@dataclass
class SourcePart:
    """What one executor task read of a micro-batch (executor mode,
    :mod:`graphcep.runtime.streaming.cells`): edges numbered within their file (``seq``
    without the file's ordinal, which only the whole micro-batch decides), ``_file`` the
    :func:`file_key` of each edge's file, the files read (URIs) and their lines and
    rejects."""

    edges: pa.Table
    files: list[str] = field(default_factory=list)
    lines: int = 0
    rejects: pa.Table | None = None
    #: for a source numbered by lines in stream order (Kafka records, a streaming
    #: DataFrame's rows), which the whole micro-batch decides, not a task: the part's
    #: chunks as ``(order, key, lines)`` -- the edges of a chunk carry its ``key`` as
    #: ``_file`` and ``seq`` 1, 2, ... within it; the cells number the batch's chunks in
    #: ``order`` after the lines of the batches before (the driver mode's numbering)
    chunks: list[tuple[tuple[Any, ...], int, int]] = field(default_factory=list)
    #: how long the part's newest record had been due when the task read it (µs; None:
    #: the source cannot tell), as :attr:`SourceBatch.lag_us`
    lag_us: int | None = None


#: where a task's rows lie in its micro-batch: the task's partition and the number of the
#: Arrow batch in it (``read_part``'s ``place``, for a source numbered in Spark's order)
Place = tuple[int, int]


def file_key(name: str) -> int:
    """A file's name as a 64-bit key (the ``_file`` column of a :class:`SourcePart`)."""
    import hashlib

    return int.from_bytes(hashlib.blake2b(name.encode(), digest_size=8).digest(), "little",
                          signed=True)


@dataclass
class FileSource:
    """Files arriving in ``path`` (see module docstring)."""

    #: a micro-batch's rows are file names: any task can read the whole batch from them
    #: (:func:`~graphcep.runtime.streaming.cells.rereads`)
    rows_name_data: ClassVar[bool] = True
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

    def read_part(self, rows: pa.Table, place: Place = (0, 0)) -> SourcePart:
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
            read = read_edges_bytes(name, _read_file(uri), self.fmt, self.options,
                                    file_index=file_index, symbols=symbols, after=after)
            return _marked_damage(read) if read.damaged else read
        except Exception as err:  # whatever the damage: the file's, not the stream's
            reason = f"{SKIPPED_FILE}{type(err).__name__}: {err}"
            reject = pa.table({"file": [name], "line": [0], "reason": [reason], "text": [""]},
                              schema=READ_REJECT_SCHEMA)
            return ReadResult(empty_edges(), reject, 0, 0, self.fmt or "")


def _marked_damage(read: ReadResult) -> ReadResult:
    """A damaged file's last reject (where it broke off) marked as the stream's warnings
    know it (:func:`~graphcep.runtime.streaming.driver.skipped_file_warnings`): skipped,
    if not one of its edges was read, else read up to the damage."""
    prefix = DAMAGED_FILE if read.edges.num_rows else SKIPPED_FILE
    reasons = read.rejects.column("reason").to_pylist()
    reasons[-1] = prefix + reasons[-1]
    read.rejects = read.rejects.set_column(
        read.rejects.schema.get_field_index("reason"), "reason", pa.array(reasons, pa.string()))
    return read


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

    #: a micro-batch's rows are row numbers: any task can generate the whole batch
    #: (:func:`~graphcep.runtime.streaming.cells.rereads`)
    rows_name_data: ClassVar[bool] = True
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
        arrived = _arrivals(rows)
        edges = generated_edges(index, self.vertices, self.event_rate or self.rate, self.seed)
        edges = edges.append_column("arrived_us", arrived)
        return SourceBatch(edges, None, 0, rows.num_rows, lag_us=_lag_us(arrived))

    def read_part(self, rows: pa.Table, place: Place = (0, 0)) -> SourcePart:
        """One executor task's rows as edges (see :class:`SourcePart`)."""
        index = rows.column("value").to_numpy().astype(np.int64)
        edges = generated_edges(index, self.vertices, self.event_rate or self.rate, self.seed)
        lag_us = _lag_us(_arrivals(rows)) if rows.num_rows else None
        return SourcePart(edges, [], rows.num_rows, lag_us=lag_us)


def _arrivals(rows: pa.Table) -> pa.Array:
    """When each generated row was due (µs since the epoch): its ``timestamp``."""
    return pc.cast(rows.column("timestamp"), pa.timestamp("us")).cast(pa.int64())


def _lag_us(arrived: pa.Array) -> int:
    """The rows' timestamps are when each was due: the newest one's age is the lag."""
    return max(0, int(time.time() * US_PER_SECOND) - int(pc.max(arrived).as_py()))


def paced(source: Any, trigger_seconds: float | None) -> float | None:
    """Seconds between micro-batches: a generator's pace (:meth:`GeneratorSource.interval`:
    its rows are due then, and back-to-back batches would offer more than its rate), else
    ``trigger_seconds`` (None: each batch as soon as the one before ends)."""
    return source.interval() if isinstance(source, GeneratorSource) else trigger_seconds


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
