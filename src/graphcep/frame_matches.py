"""Matches as the Python API's frames give them, and how it finds them in a frame's edges.

:func:`run_edges` finds a job's matches in an edge table as ``graphcep run --engine local``
does; :func:`match_table` lays them out as every frame of :mod:`graphcep.api` gives them
(the same for pandas, Polars, Arrow and Spark, :mod:`graphcep.api_spark`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import pyarrow as pa

    from graphcep.io.sinks import MatchFormat
    from graphcep.jobs.base import ReplayJob


def run_edges(job: ReplayJob, edges: pa.Table, widening: tuple[int, int, int | None] | None):
    """The matches of ``job`` in ``edges`` and their format, as ``graphcep run --engine
    local`` finds them (with ``--pww`` under ``widening``)."""
    if widening is None:
        from graphcep.runtime.local import run_job

        return run_job(job, edges)[0], job.output
    from graphcep.runtime.widening import refuse_short_keep, run_widening
    from graphcep.runtime.widening.report import widened_format

    keep, base_us, max_duration_us = widening
    refuse_short_keep(job, keep)
    matches, _ = run_widening(job, edges, keep=keep, base_us=base_us,
                              max_duration_us=max_duration_us)
    return matches, widened_format(job.output)


#: The columns every frame of matches starts with (:func:`match_table`).
FIXED_COLUMNS = ("match_id", "query", "first_time", "last_time")


#: Fields of a record shown beside the fixed columns too: what window widening adds.
PROMOTED = ("pww_level", "pww_report_t", "pww_delay_us")


def match_schema(output: MatchFormat) -> pa.Schema:
    """The schema of :func:`match_table`'s tables for records of ``output``."""
    import pyarrow as pa

    from graphcep.io.flat_columns import RECORD_COLUMN, TIMESTAMP

    record = output.file_schema()
    own = len(output.schema)
    fixed = [pa.field("match_id", pa.string()), pa.field("query", pa.string()),
             pa.field("first_time", TIMESTAMP), pa.field("last_time", TIMESTAMP)]
    fixed += [record.field(name) for name in PROMOTED if name in output.schema.names]
    return pa.schema([*fixed, *list(record)[own:],
                      pa.field(RECORD_COLUMN, pa.struct(list(record)[:own]))])


def match_table(output: MatchFormat, matches: pa.Table) -> pa.Table:
    """Matches (a table of ``output.schema``, times in µs) as every frame of the API
    gives them: :data:`FIXED_COLUMNS` (and, under window widening, :data:`PROMOTED`), the
    flat columns, and the record as Parquet holds it in the struct column
    :data:`~graphcep.io.flat_columns.RECORD_COLUMN`.

    ``first_time`` is the record's ``first_t`` (``start_t`` for subscriptions),
    ``last_time`` the time of the edge that completed the match (``last_t``, a DDST
    match's ``window_end``, a subscription's ``end_t``:
    :func:`~graphcep.pictures.records.match_time_column`)."""
    import pyarrow as pa

    from graphcep.pictures.records import match_time_column

    record = output.file_table(matches)
    own = output.schema.names
    first = "start_t" if "start_t" in own else "first_t"
    query = "query" if "query" in own else "subscription"
    whole = pa.StructArray.from_arrays(
        [record.column(name).combine_chunks() for name in own],
        fields=list(record.schema)[:len(own)])
    columns = [record.column(name) for name in
               ("match_id", query, first, match_time_column(own),
                *(name for name in PROMOTED if name in own))]
    columns += record.columns[len(own):] + [whole]
    return pa.Table.from_arrays(columns, schema=match_schema(output))


def warn_absent_labels(job: ReplayJob, present: dict[str, set[str]], stacklevel: int) -> None:
    """A warning when a label the query wants is on no edge (``present``: the labels found,
    by column, as :meth:`~graphcep.jobs.base.ReplayJob.labels_present` gives them): its 0
    matches then say nothing about the pattern, as the command line warns."""
    absent = job.absent_labels(present)
    if absent:
        import warnings

        warnings.warn(f"query {job.name!r}: no edge carries {', '.join(absent)}, so the "
                      "query edges wanting them cannot match", stacklevel=stacklevel + 1)
