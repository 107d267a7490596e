"""The pictures of a ``graphcep run`` or ``graphcep stream``: its ``--timeline`` PNG and
its ``--report`` HTML page, from what the command already holds (its edges, matches,
summary, rejects and progress reports)."""

from __future__ import annotations

from collections.abc import Iterable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.io.sinks import Sink
from graphcep.io.time_text import SECONDS, Clock
from graphcep.pictures.records import timed_rows
from graphcep.pictures.report import REPORT_MATCHES, Report, match_pictures, png, write_report
from graphcep.pictures.timelines import (
    StreamProgress,
    edge_times,
    match_times,
    plot_run,
    plot_stream,
    run_timeline,
)


def query_text(query: str) -> str:
    """The query file's text (a directory of subscriptions files: each file, named)."""
    path = Path(query)
    if path.is_dir():
        return "\n".join(f"# {f.name}\n{f.read_text(encoding='utf-8')}"
                         for f in sorted(path.iterdir()) if f.is_file())
    return path.read_text(encoding="utf-8")


def run_timeline_png(edges: Any, matches: pa.Table | np.ndarray, target: Any, *,
                     clock: Clock = SECONDS) -> None:
    """Edges and matches per minute (or per the bin the stream's span calls for);
    ``matches``: the match table, or when each match was complete (µs)."""
    times = matches if isinstance(matches, np.ndarray) else match_times(matches)
    plot_run(run_timeline(edge_times(edges), times), target, clock)


def run_report(path: str | Path, *, query: str, plan: list[str], summary: dict[str, Any],
               edges: Any, matches: pa.Table, rejects: pa.Table, draw: int | None,
               command: str = "run", clock: Clock = SECONDS,
               match_times: np.ndarray | None = None) -> None:
    """``graphcep run --report`` (or ``subscribe``, the ``command``): the run's page,
    times as ``clock`` writes them. ``match_times``: when each match was complete, when
    ``matches`` holds only the first ones (a run does not keep every match)."""
    count = draw or REPORT_MATCHES
    timeline = matches if match_times is None else match_times
    report = Report(
        title=f"graphcep {command}: {summary.get('query', '')}",
        query_text=query_text(query), plan=plan, summary=summary,
        timelines=[("edges and matches over the stream's time",
                    png(partial(run_timeline_png, clock=clock), edges, timeline))],
        matches=match_pictures(timed_rows(matches.slice(0, count).to_pylist(), clock)),
        rejects=rejects.to_pylist(), rejects_total=rejects.num_rows)
    write_report(report, path)


class KeepFirst(Sink):
    """A sink that passes every batch of matches on to ``inner`` and keeps the first
    ``count`` rows for the report; a batch written again (Spark re-running it) replaces
    what it gave before, as the output parts are replaced."""

    def __init__(self, inner: Sink, count: int) -> None:
        self.inner, self.count = inner, count
        self.kept: dict[int | str | None, pa.Table] = {}

    def write(self, table: pa.Table, batch_id: int | str | None = None) -> None:
        self.inner.write(table, batch_id)
        held = sum(t.num_rows for b, t in self.kept.items() if b != batch_id)
        if batch_id in self.kept or (held < self.count and table.num_rows):
            self.kept[batch_id] = table.slice(0, max(self.count - held, 0))

    def write_chunks(self, tables: Iterable[pa.Table],
                     batch_id: int | str | None = None) -> int:
        """Pass a batch written in chunks on chunk by chunk (the sink holds one at a
        time), keeping its first rows the report still has room for."""
        if getattr(self.inner, "write_chunks", None) is None:  # a plain writer: joined
            return super().write_chunks(tables, batch_id)
        self.kept.pop(batch_id, None)  # written again: what it gave before is replaced
        room = self.count - sum(t.num_rows for t in self.kept.values())
        first: list[pa.Table] = []

        def passed_on() -> Iterator[pa.Table]:
            nonlocal room
            for table in tables:
                if room > 0 and table.num_rows:
                    first.append(table.slice(0, room))
                    room -= first[-1].num_rows
                yield table

        written = self.inner.write_chunks(passed_on(), batch_id)
        if first:
            self.kept[batch_id] = pa.concat_tables(first, promote_options="permissive")
        return written

    def close(self) -> None:
        self.inner.close()

    def rows(self) -> list[dict[str, Any]]:
        """The kept matches, in the order their batches came."""
        return [row for part in self.kept.values() for row in part.to_pylist()][:self.count]


def stream_report(path: str | Path, *, query: str, plan: list[str], summary: dict[str, Any],
                  progress: StreamProgress, first: list[dict[str, Any]],
                  rejects_dir: str | Path, clock: Clock = SECONDS) -> None:
    """``graphcep stream --report``: the stream's page (the rejects are those in
    ``rejects_dir``, this start's and earlier ones'), times as ``clock`` writes them."""
    rejects = read_part_rows(rejects_dir)
    report = Report(
        title=f"graphcep stream: {summary.get('query', '')}",
        query_text=query_text(query), plan=plan, summary=summary,
        timelines=[("the stream's micro-batches", png(plot_stream, progress))],
        matches=match_pictures(timed_rows(first, clock)), rejects=rejects, rejects_total=len(rejects))
    write_report(report, path)


def read_part_rows(directory: str | Path) -> list[dict[str, Any]]:
    """The JSON rows of every ``*.jsonl`` part in ``directory`` (none when absent)."""
    import json

    folder = Path(directory)
    if not folder.is_dir():
        return []
    return [json.loads(line) for part in sorted(folder.glob("*.jsonl"))
            for line in part.read_text(encoding="utf-8").splitlines() if line.strip()]
