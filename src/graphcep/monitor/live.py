"""The live numbers of a stream: what its micro-batches did, snapshotted after each one.

The stream's command hands each micro-batch's report to :meth:`LiveNumbers.observe` (the
driver mode's :class:`~graphcep.runtime.streaming.driver.StreamOperator` and the executor
mode's :class:`~graphcep.runtime.streaming.cells_run.CellsRun` report alike) and the
numbers are read from the running operator as the summary reads them: the totals (kept
in the checkpoint, so they count earlier starts too), the state, the pace and lag, each
rule's matches. The snapshot is one immutable dictionary swapped under a lock, so the
server's thread reads a whole micro-batch's numbers, never half of one.

The newest matches and the rejects by reason are taken from the stream's sinks
(:class:`NewestMatches`, :class:`RejectReasons`): a micro-batch written again (Spark
re-running it after a failure) replaces what it gave before, as its output parts are
replaced. Memory is bounded: the newest :data:`NEWEST_MATCHES` matches, the last
:data:`SERIES_POINTS` points of the rates and lag.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import pyarrow as pa

from graphcep.io.rejects import reason_kind
from graphcep.io.sinks import Sink

#: Matches the page draws (the newest).
NEWEST_MATCHES = 12
#: Points of the rates and lag kept for the page's curves (one per micro-batch).
SERIES_POINTS = 300
#: Upper bounds (seconds) of the micro-batch duration histogram's buckets.
BATCH_SECONDS_BUCKETS = (0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 5.0, 10.0, 30.0, 60.0)


class LiveNumbers:
    """What the stream has done, as of its last micro-batch.

    Parameters
    ----------
    query : str
        The query's name (the summary's ``query``).
    newest : int
        Matches kept for the page.
    points : int
        Points of the rates and lag kept.

    Examples
    --------
    >>> from types import SimpleNamespace as NS
    >>> class Totals:
    ...     def as_dict(self): return {"edges": 10, "late": 1, "rejected": 0, "matches": 2}
    >>> operator = NS(totals=Totals(), state_size=lambda: {"edges": 4, "buffered": 1},
    ...               pace=None, engine=None)
    >>> live = LiveNumbers("triangle")
    >>> live.follow(operator)
    >>> live.observe(NS(batch_id=0, edges_in=10, matches=2, seconds=0.5, frontier_us=3_000_000,
    ...                 final=False))
    >>> snapshot = live.snapshot()
    >>> snapshot["totals"]["edges"], snapshot["state"], snapshot["batch_seconds"]["count"]
    (10, {'edges': 4, 'buffered': 1}, 1)
    """

    def __init__(self, query: str, newest: int = NEWEST_MATCHES,
                 points: int = SERIES_POINTS) -> None:
        self.query = query
        self.matches = NewestMatches(newest)
        self.rejects = RejectReasons()
        self._operator: Any = None
        self._series: deque[dict[str, Any]] = deque(maxlen=points)
        self._histogram = [0] * (len(BATCH_SECONDS_BUCKETS) + 1)  # the last: +Inf
        self._seconds_sum = 0.0
        self._started = time.time()
        self._lock = threading.Lock()
        self._snapshot: dict[str, Any] = self._numbers(None)

    def follow(self, operator: Any, query: str | None = None) -> None:
        """Read the numbers from ``operator`` (a StreamOperator or a CellsRun) from now on;
        ``query``: the query's name, as the summary names it."""
        self._operator = operator
        self.query = query or self.query
        with self._lock:
            self._snapshot = self._numbers(None)

    def observe(self, report: Any) -> None:
        """Note one micro-batch's report (a :class:`BatchReport`); called on the stream's
        thread after the batch is written."""
        self._histogram[_bucket(report.seconds)] += 1
        self._seconds_sum += report.seconds
        numbers = self._numbers(report)
        self._series.append(_point(report, numbers))
        numbers["series"] = list(self._series)
        with self._lock:
            self._snapshot = numbers

    def snapshot(self) -> dict[str, Any]:
        """The numbers as of the last micro-batch (a dictionary not changed afterwards),
        the newest matches and rejects as of now."""
        with self._lock:
            numbers = dict(self._snapshot)
        numbers["rejects_by_reason"] = self.rejects.counts()
        numbers["newest_matches"] = self.matches.captions()
        return numbers

    def _numbers(self, report: Any) -> dict[str, Any]:
        operator = self._operator
        numbers: dict[str, Any] = {
            "query": self.query, "started": self._started, "updated": time.time(),
            "totals": {}, "state": {}, "pace": {}, "rules": {}, "partition_lag": {},
            "batch": None, "series": list(self._series),
            "batch_seconds": {"buckets": list(BATCH_SECONDS_BUCKETS),
                              "counts": list(self._histogram), "sum": self._seconds_sum,
                              "count": sum(self._histogram)}}
        if operator is None:
            return numbers
        numbers["totals"] = operator.totals.as_dict()
        numbers["state"] = operator.state_size()
        pace = getattr(operator, "pace", None)
        numbers["pace"] = pace.as_dict() if pace is not None else {}
        numbers["partition_lag"] = dict(getattr(operator, "partition_lag", None) or {})
        numbers["rules"] = rule_numbers(getattr(operator, "engine", None))
        if report is not None:
            numbers["batch"] = {"id": report.batch_id, "final": report.final,
                                "watermark_us": report.frontier_us,
                                "seconds": report.seconds}
        return numbers


def rule_numbers(engine: Any) -> dict[str, dict[str, Any]]:
    """Each rule's kind, version, matches (the summary's ``rules``) and the state its
    engine holds; empty for a stream of one query."""
    summary = getattr(engine, "rule_summary", None)
    if summary is None:
        return {}
    rules = {name: dict(facts) for name, facts in summary().items()}
    for name, facts in rules.items():
        facts["state"] = engine.rule_state_size(name)
    return rules


def _bucket(seconds: float) -> int:
    for index, bound in enumerate(BATCH_SECONDS_BUCKETS):
        if seconds <= bound:
            return index
    return len(BATCH_SECONDS_BUCKETS)


def _point(report: Any, numbers: dict[str, Any]) -> dict[str, Any]:
    """One point of the page's curves: when, the batch's edges and matches a second of
    its own time, and the source's lag (None: unknown)."""
    seconds = max(report.seconds, 1e-6)
    return {"at": numbers["updated"], "batch": report.batch_id,
            "edges_per_s": report.edges_in / seconds,
            "matches_per_s": report.matches / seconds,
            "lag_s": numbers["pace"].get("lag_s")}


class NewestMatches(Sink):
    """Keeps the newest ``count`` match rows written through :meth:`wrap`'s sink, each
    with a number of its own (the page's picture of it is ``/match/<number>.png``)."""

    def __init__(self, count: int) -> None:
        self.count = count
        self._rows: deque[tuple[int, int | str | None, dict[str, Any]]] = deque(maxlen=count)
        self._next = 0
        self._lock = threading.Lock()
        self.clock: Any = None  # how the pictures write times (None: seconds)

    def wrap(self, inner: Any) -> Sink:
        """``inner``, which now also hands each batch of matches here (of a batch written
        in chunks, its newest rows: the sink still holds one chunk at a time)."""
        return _Tee(inner, self.keep, tail=self.count)

    def keep(self, table: pa.Table, batch_id: int | str | None) -> None:
        rows = table.slice(max(table.num_rows - self.count, 0)).to_pylist()
        with self._lock:
            kept = [entry for entry in self._rows if entry[1] != batch_id or batch_id is None]
            self._rows = deque(kept, maxlen=self.count)
            for row in rows:
                self._rows.append((self._next, batch_id, row))
                self._next += 1

    def captions(self) -> list[dict[str, Any]]:
        """The kept matches, newest first: number, id, rule (if any), batch."""
        with self._lock:
            rows = list(self._rows)
        return [{"number": number, "match_id": str(row.get("match_id", "")),
                 "rule": row.get("rule"), "batch": batch}
                for number, batch, row in reversed(rows)]

    def row(self, number: int) -> dict[str, Any] | None:
        """The kept match of this number (None: never kept, or no longer)."""
        with self._lock:
            return next((row for n, _, row in self._rows if n == number), None)


class RejectReasons:
    """Rejected lines counted by the kind of their reason
    (:func:`~graphcep.io.rejects.reason_kind`) since this start."""

    def __init__(self) -> None:
        self._done: dict[str, int] = {}
        self._batch: tuple[int | str | None, dict[str, int]] = (None, {})
        self._lock = threading.Lock()

    def wrap(self, inner: Any) -> Any:
        """``inner`` (a part writer), which now also hands each batch's rejects here."""
        return _Tee(inner, self.count_batch) if inner is not None else None

    def count_batch(self, table: pa.Table, batch_id: int | str | None) -> None:
        counts: dict[str, int] = {}
        if "reason" in table.column_names:
            for reason in table.column("reason").to_pylist():
                kind = reason_kind(str(reason))
                counts[kind] = counts.get(kind, 0) + 1
        with self._lock:
            last_id, last = self._batch
            if last_id != batch_id:  # a new batch: the one before is final
                for kind, count in last.items():
                    self._done[kind] = self._done.get(kind, 0) + count
            self._batch = (batch_id, counts)

    def counts(self) -> dict[str, int]:
        """Reason kind -> rejected lines, the most first."""
        with self._lock:
            merged = dict(self._done)
            for kind, count in self._batch[1].items():
                merged[kind] = merged.get(kind, 0) + count
        return dict(sorted(merged.items(), key=lambda item: (-item[1], item[0])))


class _Tee(Sink):
    """A sink (or part writer) that also hands every written table to ``also``; of a
    batch written in chunks, one table of its newest chunks holding at least ``tail``
    rows (None: every chunk), so the tee holds no more of a batch than that."""

    def __init__(self, inner: Any, also: Callable[[pa.Table, Any], None],
                 tail: int | None = None) -> None:
        self.inner, self.also, self.tail = inner, also, tail

    def write(self, table: pa.Table, batch_id: int | str | None = None) -> Any:
        written = self.inner.write(table, batch_id)
        self.also(table, batch_id)
        return written

    def write_chunks(self, tables: Iterable[pa.Table],
                     batch_id: int | str | None = None) -> int:
        if getattr(self.inner, "write_chunks", None) is None:  # a plain writer: joined
            return super().write_chunks(tables, batch_id)
        newest: list[pa.Table] = []

        def passed_on() -> Iterator[pa.Table]:
            for table in tables:
                newest.append(table)
                while (self.tail is not None and len(newest) > 1
                       and sum(t.num_rows for t in newest[1:]) >= self.tail):
                    newest.pop(0)
                yield table

        written = self.inner.write_chunks(passed_on(), batch_id)
        if newest:
            self.also(pa.concat_tables(newest, promote_options="permissive"), batch_id)
        return written

    def close(self) -> None:
        close = getattr(self.inner, "close", None)  # a part writer has nothing to close
        if close is not None:
            close()

    def encoder(self) -> None:
        """None: the tee sees the tables it hands on, so no one may write the inner
        sink's bytes past it (:meth:`~graphcep.io.sinks.JsonlSink.encoder`)."""
        return None

    def __getattr__(self, name: str) -> Any:  # rows(), directory, ... of the sink wrapped
        return getattr(self.inner, name)
