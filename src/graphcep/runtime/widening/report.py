"""What the command line says about a widened run: the match records with their level
and delay, ``explain``'s level table, and the summary's lines per level.

Example
-------
>>> from graphcep.jobs import as_job
>>> from graphcep.lang.nu import parse_nu
>>> print("\\n".join(describe_widening(as_job(parse_nu("a ~> b", "ab")), 4, 1_000_000,
...                                     3_000_000)))
progressive window widening: L = 4 records, T0 = 1 s, D = 3 s (3 levels)
  level 0: batches of 1 s, windows of 2 s, batches as the stream gives them
  level 1: batches of 2 s, windows of 4 s, at most 8 records a batch
  level 2: batches of 4 s, windows of 8 s, at most 8 records a batch
exact: a match is decided by its own records, so every instance of at most 4 records (and at most 3 s) is reported, once
"""

from __future__ import annotations

from typing import Any

from graphcep.events import counted_noun, format_seconds
from graphcep.io.sinks import MatchFormat
from graphcep.jobs.base import ReplayJob
from graphcep.runtime.widening.detection import widened_schema
from graphcep.runtime.widening.levels import LevelStats, level_plan
from graphcep.runtime.widening.planner import window_span_us


def widened_format(base: MatchFormat) -> MatchFormat:
    """A job's match format with each record's level, report time and delay added (a
    line on the console, three fields in JSONL; the drawing is the job's)."""

    def text(row: dict[str, Any], number: int) -> str:
        return base.text(row, number) + (
            f"  pww: level {row['pww_level']}, reported at "
            f"{base.clock.text(row['pww_report_t'])}, delay "
            f"{format_seconds(row['pww_delay_us'])}s\n")

    def as_json(row: dict[str, Any]) -> str:
        extra = (f',"pww_level":{row["pww_level"]},"pww_report_t":'
                 f'{base.clock.json(row["pww_report_t"])},"pww_delay":'
                 f'{format_seconds(row["pww_delay_us"])}')
        return base.json(row)[:-1] + extra + "}"

    return MatchFormat(widened_schema(base.schema), text, as_json, base.graph,
                       flat=base.flat, clock=base.clock)


def describe_widening(job: ReplayJob, keep: int, base_us: int,
                      max_duration_us: int | None) -> list[str]:
    """The levels, their batch and window durations and record bounds, and whether the
    job's matches make widening exact (``graphcep explain --pww``)."""
    plan = level_plan(keep, base_us, max_duration_us)
    bound = "no D: a level is added whenever the top one combines two batches (first 8 " \
        "shown)" if max_duration_us is None else \
        f"D = {format_seconds(max_duration_us)} s ({counted_noun(len(plan), 'level')})"
    lines = [f"progressive window widening: L = {counted_noun(keep, 'record')}, T0 = "
             f"{format_seconds(base_us)} s, {bound}"]
    for p in plan:
        held = "batches as the stream gives them" if p.record_bound is None else \
            f"at most {counted_noun(p.record_bound, 'record')} a batch"
        lines.append(f"  level {p.level}: batches of {format_seconds(p.batch_us)} s, "
                     f"windows of {format_seconds(p.window_us)} s, {held}")
    within = "" if max_duration_us is None else f" (and at most {format_seconds(max_duration_us)} s)"
    if job.local_matches:
        numbered = "" if job.stream_numbering() is None else \
            " and their places in the stream (numbered over all of it before windows are cut)"
        lines.append(f"exact: a match is decided by its own records{numbered}, so every "
                     f"instance of at most {counted_noun(keep, 'record')}{within} is reported, "
                     "once")
    else:
        lines.append(f"not exact: the matches of {job.name!r} depend on records besides "
                     "their own, so each window reports what its records alone match (the "
                     "paper's black box), each instance once")
    return lines


def level_lines(levels: list[LevelStats]) -> list[str]:
    """The summary's lines, one per level."""
    return [f"  level {k}: {counted_noun(s.windows, 'window')}, at most "
            f"{counted_noun(s.records_held, 'record')} held, detector "
            f"{s.detector_seconds:.3f} s, {counted_noun(s.instances, 'instance')}"
            for k, s in enumerate(levels)]


#: how a job's explanation starts its line on Spark's plan
_SPARK_PLAN = "Spark:"


def explain_lines(job: ReplayJob, widening: tuple[int, int, int | None] | None) -> list[str]:
    """What ``graphcep explain`` prints of a job: under ``--pww`` (``widening``: ``(L, T0,
    D)``), as level 0's windows run it, then the level table."""
    if widening is None:
        return job.describe()
    keep, base_us, max_duration_us = widening
    span = window_span_us(base_us, 0)
    # the job's own Spark plan (partitions, shards) is not what runs: the windows are
    return [f"as level 0's windows run it (a level-k window bounds it by its own span, "
            f"2^k x {format_seconds(span)} s):",
            *(line for line in job.bounded_by(span).describe()
              if not line.startswith(_SPARK_PLAN)), "",
            *describe_widening(job, keep, base_us, max_duration_us), _SPARK_PLAN +
            " graphcep run cuts every window in the driver and runs groups of windows of "
            "about equal records in parallel tasks, each window in a fresh engine; graphcep "
            "stream runs each window in the driver as it closes"]
