"""``Query.match`` on a Spark DataFrame: a lazy Spark DataFrame of matches, computed in the
executors.

::

    matches = q.match(spark_df, src="sender", dst="receiver", time="ts")
    matches.join(users, matches.x1 == users.id).write.parquet("triangles/")

Decisions
---------
* **Nothing on the driver.** :func:`match_spark` checks the columns on the frame's
  schema (no job), then runs one small aggregate: per partition, its rows, the least
  and greatest time and the rows missing a core field (the unit's plausibility, the
  rows' numbering, missing values refused before any match is made), and the
  statistics the replay plans with (:func:`~graphcep.runtime.spark.replay.plan_spark`
  runs its own pass only for a keyed grid's cell counts). Everything else
  -- converting the rows to edges, replaying, making the records -- is a plan that runs
  when the caller acts on the DataFrame (a ``write``, a ``join`` then ``count``...),
  in the executors, once per action as Spark plans are (``cache()`` it to act twice).
* **Same conversion, same identity.** Each partition's rows become edges in its task by
  the function the pandas path uses (:func:`graphcep.frame_edges.edge_table`, the Parquet
  reader's conversion), numbered ``seq`` = 1, 2, ... in the frame's order (partition by
  partition, each after the rows of those before it, counted by the aggregate above):
  the same rows give the same ``match_id`` as an Arrow table of them does. The frame's
  order must therefore be the same in every job, as Spark's order of a file read is.
* **Same plans as** ``graphcep run``: :func:`~graphcep.runtime.spark.replay.plan_spark`
  with ``lazy``: time shards, cells and key partitions as the command line's "auto"
  picks them; where the command line would collect something in the driver (a short
  stream replayed there, time-ordered partitions' warm-ups, count windows' ranks), the
  lazy plan replays in a task instead. ``pww=`` runs widening in one task (the windows
  of the in-process run, :func:`graphcep.runtime.widening.run_widening`).
* **Columns out:** those of every frame of the API (:func:`graphcep.frame_matches.match_table`),
  made in the task from each chunk of matches, so the DataFrame's rows are converted
  from Arrow once.
"""

from __future__ import annotations

import json
from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING, Any

from graphcep.frame_edges import (
    ColumnMapping,
    check_names,
    check_types,
    checked_seconds,
    edge_table,
    plain_types,
)
from graphcep.frame_matches import match_schema, match_table, run_edges, warn_absent_labels

if TYPE_CHECKING:
    import pyarrow as pa

    from graphcep.jobs.base import ReplayJob

__all__ = ["match_spark"]



def match_spark(job: ReplayJob, frame: Any, mapping: ColumnMapping, time_unit: str | None,
                keep: Sequence[str] | None,
                widening: tuple[int, int, int | None] | None) -> Any:
    """The matches of ``job`` in the Spark DataFrame ``frame`` as a lazy Spark
    DataFrame (module docstring); the arguments as :meth:`graphcep.api.Query.match`
    checked them.

    Raises
    ------
    TypeError
        A column's type cannot hold what it is mapped to (or has no Arrow form).
    ValueError
        A column named is missing, a unit is implausible, rows miss a core field.
    """
    from pyspark.sql.pandas.types import from_arrow_schema

    schema = _arrow_schema(frame)
    core = mapping.core()
    if mapping.dur is None and "dur" in schema.names:
        core["dur"] = "dur"
    empty = plain_types(schema.empty_table())
    check_names(empty, mapping, core, keep)
    check_types(empty, mapping, core, time_unit)
    wanted = {*core.values(), *(schema.names if keep is None else keep)}
    frame = frame.select(*[frame[name] for name in schema.names if name in wanted])
    # numbers count time_unit, else seconds once checked; timestamps carry their own
    unit = (time_unit or "s") if _is_number(schema.field(core["t"]).type) else None
    edge_schema = edge_table(empty.select(frame.columns), mapping, unit, keep).schema
    job.check_columns(edge_schema.names)

    def convert(batch: pa.RecordBatch, offset: int = 0) -> pa.Table:
        return edge_table(plain_types(_table(batch)), mapping, unit, keep, offset)

    parts = _partition_checks(frame, core, convert, job)
    if time_unit is None:  # the checks' unit, seconds, checked on the bounds
        checked_seconds(_time_bounds(parts, schema, core["t"]), core["t"])
    failed = sorted(r["error"] for r in parts if r["error"] is not None)
    if failed:  # rows no edge can be made of (the first partition's message)
        raise ValueError(failed[0])
    warn_absent_labels(job, _labels_found(parts), stacklevel=4)
    offsets = _row_offsets(parts)

    def to_edges(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        offset = offsets.get(_task_partition(), 0)  # after the rows of those before it
        for batch in batches:
            edges = convert(batch, offset)
            offset += batch.num_rows
            yield from edges.cast(edge_schema).to_batches()

    edges_df = frame.mapInArrow(to_edges, from_arrow_schema(edge_schema))
    if widening is not None:
        return _widened(job, edges_df, widening)
    return _replayed(frame.sparkSession, job, edges_df, parts)


def _replayed(spark: Any, job: Any, edges_df: Any, parts: list[Any]) -> Any:
    """The matches of ``job`` over ``edges_df`` by the lazy plan of ``graphcep run``, its
    statistics those of the checks (``parts``, per partition of ``edges_df``)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from graphcep.runtime.spark.replay import plan_spark

    output = job.output
    schema = match_schema(output)
    run = plan_spark(spark, job, edges_df, lazy=True, parts=parts)

    def shaped(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for batch in batches:
            yield from match_table(output, _table(batch)).to_batches()

    matches = run.frame(shaped, from_arrow_schema(schema))
    return matches if matches is not None else _no_rows(spark, schema)


def _widened(job: Any, edges_df: Any, widening: tuple[int, int, int | None]) -> Any:
    """``pww=``: the in-process widening of every edge in one task (its windows need the
    whole stream in order), the matches made there."""
    from pyspark.sql.pandas.types import from_arrow_schema

    from graphcep.runtime.spark.tasks import received
    from graphcep.runtime.widening import refuse_short_keep
    from graphcep.runtime.widening.report import widened_format

    refuse_short_keep(job, widening[0])
    output = widened_format(job.output)

    def widen(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        edges = received(batches)
        if edges is not None:
            matches, found = run_edges(job, edges, widening)
            yield from match_table(found, matches).to_batches()

    # repartition, not coalesce: the edges' numbering reads each task's input partition
    return edges_df.repartition(1).mapInArrow(widen, from_arrow_schema(match_schema(output)))


def _arrow_schema(frame: Any) -> pa.Schema:
    """The frame's schema as Arrow types (what its tasks' batches hold); a
    :class:`TypeError` naming a column whose type has none."""
    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_type

    fields = []
    for spark_field in frame.schema.fields:
        try:
            kind = to_arrow_type(spark_field.dataType, timezone="UTC")
        except Exception as err:  # pyspark's own errors for types Arrow cannot hold
            raise TypeError(f"column {spark_field.name!r} has Spark type "
                            f"{spark_field.dataType.simpleString()}, which graphcep cannot "
                            f"read ({err}); drop it or pass columns=[...] without it"
                            ) from None
        fields.append(pa.field(spark_field.name, kind))
    return pa.schema(fields)


def _partition_checks(frame: Any, core: dict[str, str], convert: Any,
                      job: ReplayJob) -> list[Any]:
    """Per partition, in one small aggregate: its id, rows, least and greatest numeric
    time as given, rows missing a core field, the statistics the replay plans with
    (least and greatest edge time in µs, longest duration) from its rows converted by
    ``convert`` (the unit the checks assume), and the query's labels its edges carry
    (:func:`_labels_found`); a :class:`ValueError` when any row misses a core field.

    The partition's id is the task's (:func:`_task_partition`), as the numbering of
    :func:`match_spark` reads it: ``spark_partition_id()`` may be folded by the optimizer
    into the driver's evaluation of a local relation (0 for every row)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    from pyspark.sql import functions as F

    columns = {name: core[name] for name in ("t", "src", "dst")}
    checks = _checks_schema()

    def measure(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        part = _task_partition()
        before = 0  # the partition's rows before the batch
        for batch in batches:
            times = batch.column(columns["t"])
            bounds = pc.min_max(times.cast(pa.float64())) if _is_number(times.type) else None
            row = {"p": part, "n": batch.num_rows,
                   "raw_min": bounds["min"].as_py() if bounds else None,
                   "raw_max": bounds["max"].as_py() if bounds else None,
                   **{name: batch.column(column).null_count
                      for name, column in columns.items()}}
            if not any(row[name] for name in columns):  # else refused in the driver
                try:
                    edges = convert(batch, before)
                except (ValueError, TypeError) as err:  # said in the driver, once checked
                    row["error"] = f"partition {part} of the DataFrame (positions counted " \
                        f"from its first row): {err}"
                    before += batch.num_rows
                    yield pa.RecordBatch.from_pylist([row], schema=checks)
                    continue
                row.update(labels=json.dumps({column: sorted(found) for column, found
                                              in job.labels_present(edges).items()}),
                           t_min=pc.min(edges.column("t")).as_py(),
                           t_max=pc.max(edges.column("t")).as_py(),
                           d_max=pc.max(edges.column("dur")).as_py()
                           if "dur" in edges.column_names else 0)
            before += batch.num_rows
            yield pa.RecordBatch.from_pylist([row], schema=checks)

    rows = (frame.mapInArrow(measure, _spark_type(checks))
            .groupBy("p").agg(F.sum("n").alias("n"), F.min("raw_min").alias("raw_min"),
                              F.max("raw_max").alias("raw_max"),
                              F.min("t_min").alias("t_min"), F.max("t_max").alias("t_max"),
                              F.max("d_max").alias("d_max"), F.min("error").alias("error"),
                              F.collect_set("labels").alias("labels"),
                              *[F.sum(name).alias(name) for name in columns])
            .collect())
    for name in ("t", "src", "dst"):
        absent = sum(int(r[name]) for r in rows)
        if absent:
            role = {"t": "time", "src": "src", "dst": "dst"}[name]
            raise ValueError(f"{absent:,} row(s) have no value in column {core[name]!r} "
                             f"({role}=): an edge needs one (drop or fill them first, e.g. "
                             f"df.dropna(subset=[{core[name]!r}]))")
    return rows


def _checks_schema() -> pa.Schema:
    import pyarrow as pa

    return pa.schema([("p", pa.int64()), ("n", pa.int64()), ("raw_min", pa.float64()),
                      ("raw_max", pa.float64()), ("t", pa.int64()), ("src", pa.int64()),
                      ("dst", pa.int64()), ("t_min", pa.int64()), ("t_max", pa.int64()),
                      ("d_max", pa.int64()), ("error", pa.string()), ("labels", pa.string())])


def _labels_found(parts: list[Any]) -> dict[str, set[str]]:
    """The query's labels the frame's edges carry, by label column: the union of what
    each batch of :func:`_partition_checks` found (a JSON object per batch)."""
    found: dict[str, set[str]] = {}
    for part in parts:
        for text in part["labels"]:
            for column, labels in json.loads(text).items():
                found.setdefault(column, set()).update(labels)
    return found


def _spark_type(schema: pa.Schema) -> Any:
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(schema)


def _task_partition() -> int:
    """The partition a ``mapInArrow`` task reads: every use of it here is followed by a
    shuffle (a lazy plan never coalesces partitions in the task that reads them), so the
    task's id is its input partition's."""
    from pyspark import TaskContext

    return TaskContext.get().partitionId()


def _time_bounds(parts: list[Any], schema: pa.Schema, name: str) -> pa.Array:
    """The least and greatest numeric time over the partitions, as an array of the time
    column's kind (float64): what :func:`graphcep.frame_edges.checked_seconds` looks at."""
    import pyarrow as pa

    if not _is_number(schema.field(name).type):
        return pa.array([], pa.string())  # timestamps carry their unit: nothing to check
    lows = [r["raw_min"] for r in parts if r["raw_min"] is not None]
    highs = [r["raw_max"] for r in parts if r["raw_max"] is not None]
    return pa.array([min(lows), max(highs)] if lows else [], pa.float64())


def _is_number(kind: pa.DataType) -> bool:
    import pyarrow as pa

    return pa.types.is_integer(kind) or pa.types.is_floating(kind) or pa.types.is_decimal(kind)


def _row_offsets(parts: list[Any]) -> dict[int, int]:
    """Each partition's rows before its own (the rows' numbering: ``seq`` - 1)."""
    offsets, total = {}, 0
    for r in sorted(parts, key=lambda r: r["p"]):
        offsets[int(r["p"])] = total
        total += int(r["n"])
    return offsets


def _table(batch: pa.RecordBatch) -> pa.Table:
    import pyarrow as pa

    return pa.Table.from_batches([batch])


def _no_rows(spark: Any, schema: pa.Schema) -> Any:
    """An empty DataFrame of ``schema`` (no edge: no task to run)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return spark.createDataFrame([], from_arrow_schema(schema))
