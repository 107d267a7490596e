"""The engine protocol every matching semantics implements.

::

    engine = SomeEngine(pattern, **options)
    engine.push(batch)        -> matches completed by this time-ordered batch of edges
    engine.advance(watermark) -> matches/timeouts due once event time reaches the watermark;
                                 drops state that can no longer take part in a match
    engine.state_size()       -> numbers for monitoring (edges held, partial matches, ...)
    engine.snapshot() / SomeEngine.restore(blob)   -> for checkpoints

Batches are Arrow tables in the edge schema of :mod:`graphcep.events`, in stream order
``(t, seq)``; matches come back as Arrow tables in :data:`graphcep.events.MATCH_SCHEMA`.
"""

from __future__ import annotations

from typing import Protocol

import numpy as np
import pyarrow as pa


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


class Engine(Protocol):
    """A small incremental matcher."""

    def push(self, batch: pa.Table) -> pa.Table: ...

    def advance(self, watermark_us: int) -> pa.Table: ...

    def state_size(self) -> dict[str, int]: ...

    def snapshot(self) -> bytes: ...
