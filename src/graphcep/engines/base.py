"""The engine protocol every matching semantics implements, and the bookkeeping they share.

::

    engine = SomeEngine(pattern, **options)
    engine.push(batch)        -> matches completed by this time-ordered batch of edges
    engine.push_chunks(batch, rows) -> the same, handed out at most ``rows`` at a time
                                 (optional: :class:`ChunkedPushes` gives any engine's)
    engine.advance(watermark) -> matches/timeouts due once event time reaches the watermark;
                                 drops state that can no longer take part in a match
    engine.warm(batch)        -> fill state from edges before a shard (reports nothing)
    engine.state_size()       -> numbers for monitoring (edges held, partial matches, ...)
    engine.describe()         -> what it does per arriving edge, in words (explain)
    engine.snapshot() / SomeEngine.restore(blob)   -> for checkpoints, versioned

Batches are Arrow tables in the edge schema of :mod:`graphcep.events`, in stream order
``(t, seq)``; matches come back as Arrow tables (each semantics has its match schema).

:class:`EngineBase` holds what every engine does the same way: the stream-order check, the
``edges_seen`` / ``matches_found`` counters, and the snapshot envelope -- a header naming
the engine class and its state version, so that a checkpoint written by an incompatible
version is refused with a clear message (:class:`SnapshotError`) instead of unpickling into
a broken engine. An engine subclass adds only its own state (:meth:`EngineBase.state`,
:meth:`EngineBase.from_state`).
"""

from __future__ import annotations

import pickle
import queue
import re
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, ClassVar, Protocol, TypeVar

import numpy as np
import pyarrow as pa

import graphcep
from graphcep.events import normalize_edges

T = TypeVar("T")


class OutOfOrderError(ValueError):
    """A batch arrived with edges earlier than what the engine has already seen."""


def check_stream_order(t: np.ndarray, seq: np.ndarray, last: tuple[int, int] | None,
                       watermark: int | None = None, *, ties_by_seq: bool = True) -> None:
    """Raise :class:`OutOfOrderError` naming the first row of a batch out of stream order.

    Parameters
    ----------
    t, seq
        The batch's start times (µs) and arrival numbers, one entry per row.
    last
        ``(t, seq)`` of the last edge pushed before (None: nothing yet).
    watermark
        Rows must start at or after it (None: no watermark yet).
    ties_by_seq
        Whether rows of equal ``t`` inside the batch must also have increasing ``seq``.

    Examples
    --------
    >>> check_stream_order(np.array([5, 3]), np.array([1, 2]), None)
    Traceback (most recent call last):
    ...
    graphcep.engines.base.OutOfOrderError: edges must be pushed in stream order (t, seq): row 1 of the batch (t=3 µs, seq=2) comes after row 0 (t=5 µs, seq=1). Sort the batch (events.sort_stream) or let the runtime buffer late edges.
    """
    if len(t) == 0:
        return
    problem = _first_out_of_order(t, seq, last, watermark, ties_by_seq)
    if problem:
        raise OutOfOrderError(
            f"edges must be pushed in stream order (t, seq): {problem}. Sort the batch "
            "(events.sort_stream) or let the runtime buffer late edges."
        )


def _first_out_of_order(t: np.ndarray, seq: np.ndarray, last: tuple[int, int] | None,
                        watermark: int | None, ties_by_seq: bool) -> str:
    """What the first offending row does wrong, in words ('' when the batch is in order)."""
    first = f"row 0 of the batch (t={int(t[0])} µs, seq={int(seq[0])})"
    if last is not None and (int(t[0]), int(seq[0])) <= last:
        return (f"{first} is not after the last edge pushed before it "
                f"(t={last[0]} µs, seq={last[1]})")
    if watermark is not None and t[0] < watermark:
        return f"{first} starts before the watermark ({watermark} µs)"
    dt, ds = np.diff(t), np.diff(seq)
    bad = (dt < 0) | ((dt == 0) & (ds <= 0)) if ties_by_seq else dt < 0
    rows = np.flatnonzero(bad)
    if len(rows) == 0:
        return ""
    i = int(rows[0]) + 1
    return (f"row {i} of the batch (t={int(t[i])} µs, seq={int(seq[i])}) comes after row "
            f"{i - 1} (t={int(t[i - 1])} µs, seq={int(seq[i - 1])})")


class StateBoundError(RuntimeError):
    """The engine would hold more state than its configured bound."""

    @staticmethod
    def found_in(text: str) -> str | None:
        """The message of a state bound named in ``text`` (a Spark task's traceback, which
        Spark re-raises on the driver as text in an exception of its own), else None."""
        match = re.search(r"StateBoundError: ([^\n]+)", text)
        return match.group(1).strip() if match else None


class SnapshotError(ValueError):
    """A snapshot this version of graphcep cannot read (another engine, another state
    version, or bytes that are no engine snapshot)."""


#: The most match rows a push hands out at a time (``push_chunks``, :class:`ChunkedPushes`):
#: a push whose edges complete billions of matches holds about this many at once.
MATCH_CHUNK_ROWS = 65_536

#: The envelope's own layout; the engines' state versions are their ``state_version``.
SNAPSHOT_FORMAT = 1
_SNAPSHOT_MAGIC = "graphcep-engine-snapshot"
_NEVER = (-(2**63), -(2**63))


class Engine(Protocol):
    """A small incremental matcher (see the module docstring)."""

    def push(self, batch: pa.Table) -> pa.Table: ...

    def advance(self, watermark_us: int) -> pa.Table: ...

    def warm(self, batch: pa.Table) -> None: ...

    def state_size(self) -> dict[str, int]: ...

    def describe(self) -> str: ...

    def snapshot(self) -> bytes: ...

    @classmethod
    def restore(cls, blob: bytes, **context: Any) -> Engine: ...


class EngineBase:
    """Stream order, counters and versioned snapshots, for every engine.

    A subclass calls ``super().__init__()``, checks each batch with :meth:`_check_order`
    (which records the batch's last ``(t, seq)``), counts with ``edges_seen`` and
    ``matches_found``, and gives its own state through :meth:`state` and
    :meth:`from_state`. Raising ``state_version`` when that state's layout changes makes
    older checkpoints fail with a :class:`SnapshotError` naming both versions.

    Examples
    --------
    >>> class Counter(EngineBase):
    ...     def __init__(self, step=1):
    ...         super().__init__()
    ...         self.step = step
    ...     def state(self):
    ...         return {"step": self.step}
    ...     @classmethod
    ...     def from_state(cls, state, **context):
    ...         return cls(state["step"])
    >>> engine = Counter(3)
    >>> engine.edges_seen = 7
    >>> copy = Counter.restore(engine.snapshot())
    >>> copy.step, copy.edges_seen
    (3, 7)
    >>> Counter.restore(b"not a snapshot")
    Traceback (most recent call last):
    ...
    graphcep.engines.base.SnapshotError: not a graphcep engine snapshot (unreadable bytes): start from a new checkpoint
    """

    #: the version of :meth:`state`'s layout; raise it when the layout changes
    state_version: ClassVar[int] = 1
    #: whether rows of equal ``t`` inside a batch must have increasing ``seq``
    ties_by_seq: ClassVar[bool] = True

    def __init__(self) -> None:
        self.edges_seen = 0
        self.matches_found = 0
        self._last: tuple[int, int] = _NEVER  # (t, seq) of the newest edge pushed
        self._next_seq = 0  # the arrival number of the next edge pushed without one
        self._watermark: int | None = None  # set by engines whose advance bounds pushes

    # -- protocol defaults ----------------------------------------------------------------

    def warm(self, batch: pa.Table) -> None:
        """Fill state from edges before a shard. By default the edges are pushed and the
        reports dropped: an engine that reports on arrival reports warm-up edges' matches
        in the previous shard, where they belong."""
        self.push(batch)  # type: ignore[attr-defined]

    def describe(self) -> str:
        """What the engine does per arriving edge, in words (``graphcep explain``)."""
        doc = (type(self).__doc__ or type(self).__name__).strip()
        return doc.splitlines()[0]

    def snapshot(self) -> bytes:
        """The engine's state as bytes, in a versioned envelope (:meth:`restore`)."""
        envelope = {
            "magic": _SNAPSHOT_MAGIC,
            "format": SNAPSHOT_FORMAT,
            "engine": _qualified(type(self)),
            "state_version": self.state_version,
            "graphcep": graphcep.__version__,
            "marks": (self._last, self._next_seq, self._watermark),
            "counters": (self.edges_seen, self.matches_found),
            "state": self.state(),
        }
        return pickle.dumps(envelope, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, blob: bytes, **context: Any) -> EngineBase:
        """An engine continuing from :meth:`snapshot`'s bytes; ``context`` is what the
        snapshot does not hold (a SAL engine's vertex features)."""
        envelope = _open_envelope(cls, blob)
        engine = cls.from_state(envelope["state"], **context)
        engine._last, engine._next_seq, engine._watermark = envelope["marks"]
        engine.edges_seen, engine.matches_found = envelope["counters"]
        return engine

    # -- what a subclass gives ------------------------------------------------------------

    def state(self) -> dict[str, Any]:
        """The engine's own state (picklable), without order marks and counters."""
        raise NotImplementedError

    @classmethod
    def from_state(cls, state: dict[str, Any], **context: Any) -> EngineBase:
        """A new engine holding ``state`` (as :meth:`state` gave it)."""
        raise NotImplementedError

    # -- shared bookkeeping ---------------------------------------------------------------

    def _check_order(self, t: np.ndarray, seq: np.ndarray, *, record: bool = True) -> None:
        """Refuse a batch out of stream order (:func:`check_stream_order`); remember its
        last edge unless ``record`` is false (then :meth:`_record_last` does, once the
        engine has accepted the batch)."""
        last = None if self._last == _NEVER else self._last
        check_stream_order(t, seq, last, self._watermark, ties_by_seq=self.ties_by_seq)
        if record:
            self._record_last(t, seq)

    def _record_last(self, t: np.ndarray, seq: np.ndarray) -> None:
        if len(t):
            self._last = (int(t[-1]), int(seq[-1]))
            self._next_seq = int(seq[-1]) + 1

    def _numbered(self, batch: pa.Table | pa.RecordBatch) -> pa.Table | None:
        """:func:`numbered_batch` from the engine's next arrival number."""
        return numbered_batch(batch, self._next_seq)

    def _accepted(self, batch: pa.Table | pa.RecordBatch
                  ) -> tuple[pa.Table, np.ndarray, np.ndarray] | None:
        """:meth:`_numbered`, checked for stream order and recorded: the table and its
        ``t`` and ``seq`` as arrays (None for an empty batch)."""
        table = self._numbered(batch)
        if table is None:
            return None
        t = table.column("t").to_numpy().astype(np.int64)
        seq = table.column("seq").to_numpy().astype(np.int64)
        self._check_order(t, seq)
        return table, t, seq


class ChunkedPushes:
    """An engine's pushes, each push's matches handed out in chunks of about
    ``chunk_rows`` as they are found: what a caller holds of one push's matches, however
    many its edges complete.

    An engine with ``push_chunks`` (the SAL search, a composite of engines) hands its
    chunks out itself. Any other engine's push returns its matches at once, so after a
    push that returned more than ``chunk_rows`` the next batches are pushed in slices,
    smaller in proportion (down to one edge), which grow back while their output stays
    small: one push then holds near ``chunk_rows`` matches unless one edge completes
    more. The slice size carries over from batch to batch, so keep one instance per
    engine. As with ``push_chunks``, take every chunk of a batch before the next.

    Examples
    --------
    >>> import pyarrow as pa
    >>> class Pairs:  # each edge completes one match per edge before it
    ...     seen = 0
    ...     def push(self, batch):
    ...         rows = sum(range(self.seen, self.seen + batch.num_rows))
    ...         self.seen += batch.num_rows
    ...         return pa.table({"n": list(range(rows))})
    >>> pushes = ChunkedPushes(Pairs(), chunk_rows=10)
    >>> [t.num_rows for t in pushes(pa.table({"t": list(range(8))}))]
    [28]
    >>> [t.num_rows for t in pushes(pa.table({"t": list(range(8))}))]
    [17, 10, 23, 13, 14, 15]
    >>> pushes.count(pa.table({"t": list(range(2))}))
    33
    """

    def __init__(self, engine: Any, chunk_rows: int | None = None) -> None:
        self.engine = engine
        self.chunk_rows = chunk_rows or MATCH_CHUNK_ROWS
        self._slice: int | None = None  # edges per push; None: the whole batch

    def __call__(self, batch: pa.Table) -> Iterator[pa.Table]:
        """The matches ``batch`` completes, in chunks, the engine pushed as they are taken
        (an engine's own ``push_chunks`` takes the batch at once)."""
        chunked = getattr(self.engine, "push_chunks", None)
        if chunked is not None:
            return iter(chunked(batch, self.chunk_rows))
        return self._sliced(batch)

    def count(self, batch: pa.Table) -> int:
        """How many matches ``batch`` completes: the engine's own ``count`` when it has
        one (none made), else its chunks counted and dropped one by one."""
        counting = getattr(self.engine, "count", None)
        if counting is not None:
            return int(counting(batch))
        return sum(table.num_rows for table in self(batch))

    def _sliced(self, batch: pa.Table) -> Iterator[pa.Table]:
        start = 0
        while start < batch.num_rows:
            part = batch.slice(start, self._slice or batch.num_rows)
            start += part.num_rows
            matches = self.engine.push(part)
            if matches.num_rows > self.chunk_rows:
                self._slice = max(1, part.num_rows * self.chunk_rows // matches.num_rows)
            elif self._slice is not None:
                self._slice = 2 * self._slice
            yield matches


def joined_chunks(chunks: Iterable[pa.Table], empty: Callable[[], pa.Table]) -> pa.Table:
    """The chunks an engine's ``push_chunks`` hands out as one table, for its ``push``
    (one chunk as it is, none as ``empty()``)."""
    found = list(chunks)
    if len(found) == 1:
        return found[0]
    return pa.concat_tables(found) if found else empty()


def in_order(producers: Sequence[Iterator[T]], ahead: int = 2,
             width: int | None = None) -> Iterator[T]:
    """The items of every producer, producer by producer, the producers run by ``width``
    worker threads (one per producer when None), each at most ``ahead`` items ahead of
    what was taken: producers whose work releases the GIL (the compiled kernels) run in
    parallel, and the items come out in the order one thread would give them. A worker
    that finishes a producer takes the next one not started, up to ``4 * width``
    producers past the one being taken (so that a long producer does not idle the other
    workers, and what waits to be taken stays bounded). Leaving the loop early stops
    them; a producer's exception is raised in the consumer.

    Examples
    --------
    >>> def squares(n):
    ...     yield from (k * k for k in range(n))
    >>> list(in_order([squares(3), squares(2), squares(0), squares(1)], width=2))
    [0, 1, 4, 0, 1, 0]
    """
    done = object()
    stop = threading.Event()
    queues: list[queue.Queue] = [queue.Queue(maxsize=ahead) for _ in producers]
    workers = min(width or len(producers), len(producers))
    window = 4 * workers
    turn = threading.Condition()
    state = {"taken": 0, "next": 0}

    def put(into: queue.Queue, item: object) -> bool:
        while not stop.is_set():
            try:
                into.put(item, timeout=0.05)
                return True
            except queue.Full:
                continue
        return False

    def run(items: Iterator[T], into: queue.Queue) -> None:
        try:
            for item in items:
                if not put(into, item):
                    return
            put(into, done)
        except BaseException as err:  # handed to the consumer, raised there
            put(into, err)

    def work() -> None:
        while not stop.is_set():
            with turn:
                at = state["next"]
                if at >= len(producers):
                    return
                state["next"] = at + 1
                while at >= state["taken"] + window and not stop.is_set():
                    turn.wait(0.05)
            run(producers[at], queues[at])

    threads = [threading.Thread(target=work, daemon=True) for _ in range(workers)]
    for thread in threads:
        thread.start()
    try:
        for at, into in enumerate(queues):
            with turn:
                state["taken"] = at
                turn.notify_all()
            while (item := into.get()) is not done:
                if isinstance(item, BaseException):
                    raise item
                yield item
    finally:
        stop.set()
        for thread in threads:
            thread.join()


def coalesced(tables: Iterable[pa.Table], rows: int | None = None) -> Iterator[pa.Table]:
    """The non-empty ``tables`` joined into chunks of at most ``rows`` rows (default
    :data:`MATCH_CHUNK_ROWS`) where they fit, in order: a batch whose matches come in
    small pieces (a push's, then an advance's) is one chunk; a table larger than
    ``rows`` stays whole.

    Examples
    --------
    >>> parts = [pa.table({"n": list(range(k))}) for k in (2, 0, 3, 4, 9, 1)]
    >>> [t.num_rows for t in coalesced(parts, 5)]
    [5, 4, 9, 1]
    """
    rows = rows or MATCH_CHUNK_ROWS
    held: list[pa.Table] = []
    size = 0
    for table in tables:
        if not table.num_rows:
            continue
        if held and size + table.num_rows > rows:
            yield held[0] if len(held) == 1 else pa.concat_tables(held)
            held, size = [], 0
        held.append(table)
        size += table.num_rows
    if held:
        yield held[0] if len(held) == 1 else pa.concat_tables(held)


def numbered_batch(batch: pa.Table | pa.RecordBatch, next_seq: int) -> pa.Table | None:
    """A pushed batch as a table in the edge schema, its edges numbered on from
    ``next_seq`` when it has no ``seq`` column (None when it is empty)."""
    if isinstance(batch, pa.RecordBatch):
        batch = pa.Table.from_batches([batch])
    if batch.num_rows == 0:
        return None
    if "seq" not in batch.column_names:
        numbers = np.arange(next_seq, next_seq + batch.num_rows, dtype=np.int64)
        batch = batch.append_column("seq", pa.array(numbers))
    return normalize_edges(batch)


def _qualified(cls: type) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _open_envelope(cls: type, blob: bytes) -> dict[str, Any]:
    """The snapshot's envelope, checked against ``cls`` (a :class:`SnapshotError` else)."""
    advice = "start from a new checkpoint"
    try:
        envelope = pickle.loads(blob)
    except Exception:  # any bytes may come here: a truncated file, another program's
        raise SnapshotError(f"not a graphcep engine snapshot (unreadable bytes): {advice}") from None
    if not isinstance(envelope, dict) or envelope.get("magic") != _SNAPSHOT_MAGIC:
        raise SnapshotError("not a versioned graphcep engine snapshot (written before "
                            f"snapshots were versioned, or by another program): {advice}")
    written = (f"written by graphcep {envelope.get('graphcep')} for "
               f"{envelope.get('engine')} state version {envelope.get('state_version')}")
    if envelope.get("format") != SNAPSHOT_FORMAT:
        raise SnapshotError(f"engine snapshot format {envelope.get('format')} ({written}); "
                            f"this graphcep reads format {SNAPSHOT_FORMAT}: {advice}")
    if envelope["engine"] != _qualified(cls) or envelope["state_version"] != cls.state_version:
        raise SnapshotError(f"engine snapshot {written}; this graphcep restores "
                            f"{_qualified(cls)} state version {cls.state_version}: {advice}")
    return envelope
