"""Micro-batches' released edges on disk: the state a restart rebuilds instead of reading a
snapshot written every batch.

An engine's state after micro-batch ``b`` is a function of the edges released to it and
the frontiers it was advanced to, batch by batch. So a checkpoint need not hold the engine
itself: it can hold the list of those batches (:class:`LogEntry`), each batch's edges in a
file of their own (written once, by the batch that released them), and a restart replays
them. Two uses:

* an engine whose whole state is its window (SAL, DDST, windowed ν) is *warmed* from the entries
  that still hold window edges (:func:`window_entries`): the log is trimmed as the
  watermark moves, and no snapshot is ever written;
* any other engine (several rules, subscriptions, vertex features, anchored or unbounded
  ν-expressions, a widening) is snapshotted now and then, and a restart replays the entries since the snapshot
  through it, pushes and advances as they happened.

Either way a micro-batch writes what it added, not the whole state: with twenty rules
that is a few hundred kilobytes of edges against a 63 MB snapshot.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.io.sinks import replace_atomically
from graphcep.jobs.base import Extent, ReplayJob

_NEVER = int(np.iinfo(np.int64).min)
#: IPC buffers compressed: a batch's edges are mostly small integers and repeated names
_IPC_OPTIONS = pa.ipc.IpcWriteOptions(compression="zstd")


@dataclass(frozen=True)
class LogEntry:
    """One micro-batch as its engine took it: ``rows`` edges released (in the file of
    batch ``batch_id`` when there are any; ``t_max`` the newest), then, unless None, the
    engine advanced to ``frontier``."""

    batch_id: int
    rows: int
    t_max: int
    frontier: int | None = None  # a default: entries pickled before the field lack it


def entry_of(batch_id: int, released: pa.Table | None,
             frontier: int | None = None) -> LogEntry:
    """The log entry of batch ``batch_id`` that released ``released`` (None: nothing;
    in stream order, so its last edge is the newest) and advanced to ``frontier``."""
    if released is None or not released.num_rows:
        return LogEntry(batch_id, 0, _NEVER, frontier)
    return LogEntry(batch_id, released.num_rows, int(released.column("t")[-1].as_py()),
                    frontier)


def windowed(job: ReplayJob, engine: Any) -> bool:
    """Whether ``engine``'s whole state is its window, so that the batches within the
    job's extent rebuild it (:func:`warmed`) and no snapshot is needed."""
    return hasattr(engine, "warm") and not job.whole_stream


def warmed(engine: Any, batches: Iterable[pa.Table], frontier: int | None) -> Any:
    """``engine`` warmed up from the logged ``batches`` of its window, then advanced to
    ``frontier`` (what that reports was reported when the batches ran)."""
    for edges in batches:
        engine.warm(edges)
    if frontier is not None:
        engine.advance(frontier)
    return engine


def edges_name(batch_id: int) -> str:
    """The file name of micro-batch ``batch_id``'s released edges."""
    return f"released-{batch_id:012d}.arrow"


def write_edges(path: str | os.PathLike, table: pa.Table) -> None:
    """``table`` as a compressed Arrow IPC stream at ``path``, renamed into place whole."""
    def write(temporary: str) -> None:
        with pa.OSFile(str(temporary), "wb") as sink, \
                pa.ipc.new_stream(sink, table.schema, options=_IPC_OPTIONS) as writer:
            writer.write_table(table)

    replace_atomically(Path(path), write)


def read_edges(path: str | os.PathLike) -> pa.Table:
    """The table :func:`write_edges` wrote (or an uncompressed stream an earlier
    graphcep wrote)."""
    with pa.memory_map(str(path)) as source:
        return pa.ipc.open_stream(source).read_all()


def window_entries(log: list[LogEntry], extent: Extent, frontier: int) -> list[LogEntry]:
    """The newest entries that together hold every edge a window of ``extent`` can still
    need once the engine is at ``frontier``."""
    if extent.unit == "edges":
        kept, rows = [], 0
        for entry in reversed(log):
            if rows >= extent.size:
                break
            kept.append(entry)
            rows += entry.rows
        return kept[::-1]
    oldest_needed = frontier - extent.size
    return [e for e in log if e.t_max >= oldest_needed]


__all__ = ["LogEntry", "edges_name", "entry_of", "read_edges", "warmed", "window_entries",
           "windowed", "write_edges"]
