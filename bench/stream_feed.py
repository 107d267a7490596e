"""A wall-clock feed for streaming benchmarks: a stream's edges arrive as Parquet files.

:class:`Feed` writes the S2 stream (or any edge table) into a directory at a sustained
rate, one file every ``interval`` seconds, each renamed into place when complete (as
``graphcep stream`` and Spark's file source expect), and remembers when each file
arrived. :meth:`Feed.latencies` then turns matches seen at known wall-clock times into
edge-to-match latencies: from the arrival of the file holding a match's *last* edge to
the moment the match reached the sink.
"""

from __future__ import annotations

import os
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import pyarrow as pa

from graphcep.io.generator import write_parquet


@dataclass
class Feed:
    """Write ``edges`` (in stream order) into ``directory`` at ``rate`` edges/s."""

    edges: pa.Table
    directory: Path
    rate: float
    interval: float = 0.1
    started: float = 0.0
    #: per file: first seq, last seq, arrival (time.time())
    files: list[tuple[int, int, float]] = field(default_factory=list)
    _thread: threading.Thread | None = None
    _stop: threading.Event = field(default_factory=threading.Event)

    def start(self, seconds: float) -> None:
        """Feed for ``seconds`` (or until the edges run out) in a background thread."""
        self.directory.mkdir(parents=True, exist_ok=True)
        self._thread = threading.Thread(target=self._run, args=(seconds,), daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop feeding now."""
        self._stop.set()
        self.join()

    def join(self) -> None:
        """Wait until the feed has written everything it was started for."""
        if self._thread is not None:
            self._thread.join()

    @property
    def fed(self) -> int:
        """Edges written so far."""
        return sum(last - first + 1 for first, last, _ in self.files)

    def _run(self, seconds: float) -> None:
        per_file = max(1, int(round(self.rate * self.interval)))
        self.started = time.time()
        offset, index = 0, 0
        staging = self.directory.parent / f".{self.directory.name}-staging"
        staging.mkdir(parents=True, exist_ok=True)
        while not self._stop.is_set() and offset < self.edges.num_rows:
            due = self.started + index * self.interval
            if time.time() - self.started > seconds:
                break
            pause = due - time.time()
            if pause > 0:
                time.sleep(pause)
            chunk = self.edges.slice(offset, per_file)
            tmp = staging / f"edges-{index:07d}.parquet"
            write_parquet(chunk, tmp)
            os.replace(tmp, self.directory / tmp.name)
            seqs = chunk.column("seq")
            self.files.append((int(seqs[0].as_py()), int(seqs[-1].as_py()), time.time()))
            offset += per_file
            index += 1

    def arrival_of(self, seqs: np.ndarray) -> np.ndarray:
        """Arrival time (``time.time()``) of the files holding edges ``seqs`` (readers add
        the file's ordinal above bit 40 of ``seq``; it is ignored here)."""
        seqs = np.asarray(seqs, dtype=np.int64) & ((1 << 40) - 1)
        lasts = np.array([b for _, b, _ in self.files], dtype=np.int64)
        arrived = np.array([t for _, _, t in self.files])
        return arrived[np.searchsorted(lasts, seqs, side="left")]

    def latencies(self, seen: list[tuple[float, np.ndarray]]) -> np.ndarray:
        """Seconds from arrival to sink for matches seen as ``(time, last-edge seqs)``."""
        if not seen:
            return np.array([])
        return np.concatenate([at - self.arrival_of(seqs) for at, seqs in seen])
