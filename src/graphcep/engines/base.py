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

import pyarrow as pa


class OutOfOrderError(ValueError):
    """A batch arrived with edges earlier than what the engine has already seen."""


class StateBoundError(RuntimeError):
    """The engine would hold more state than its configured bound."""


class Engine(Protocol):
    """A small incremental matcher."""

    def push(self, batch: pa.Table) -> pa.Table: ...

    def advance(self, watermark_us: int) -> pa.Table: ...

    def state_size(self) -> dict[str, int]: ...

    def snapshot(self) -> bytes: ...
