"""Spark runtime: read edge files with Spark, replay time shards of them in parallel tasks.

**Exact time-sharded replay.** Event time is cut into shards of length
``L >= extent`` (the query's largest start-time gap). Each edge belongs to the shard
holding its start time and is *also* copied into the next shard when it lies within one
extent of that shard's start, because a match completed there may still use it. A Spark
task replays its shard in stream order with the in-process runtime
(:func:`graphcep.runtime.local.replay`): copied edges only warm the engine up, and since a
push reports exactly the matches whose last edge it delivers, a match is reported by the
shard that holds its last edge -- exactly once, with no deduplication step.

Shards are placed on partitions explicitly (:func:`partition_keys`): with a handful of
shards, Spark's hash partitioning of the shard number would often put two shards in one
task and leave a core idle.

**Cells.** A SAL query can be cut by vertices instead of time: HyperCube cells
(:mod:`graphcep.runtime.hypercube`), routed in the JVM and placed one per partition the
same way; see ``"cells"`` in :func:`run_spark`.

**Jobs.** What is replayed is a :class:`~graphcep.runtime.job.ReplayJob`: a SAL query
(:class:`~graphcep.runtime.job.Job`, extent = the largest start-time gap of a match) or a
DDST event pattern (:class:`~graphcep.runtime.job.DDSTJob`, extent = its time window
``W``: window ``k`` holds the edges with ``t >= t_k - W``, so a shard starting at ``s``
warms up on ``[s - W, s)``). Every strategy below runs either kind unchanged.

**Count windows** (DDST ``WITHIN N EDGES``) reach back ``N - 1`` *edges*, a span of time
nobody knows in advance, so they are cut by *edge rank* instead of time: the edges are
numbered in stream order (each partition sorted locally and offset by the counts of the
partitions before it; with no usable order, the stream is first range-partitioned on
``(t, seq)``, one shuffle), each partition is a shard in place, and its warm-up is the
``N - 1`` edges ranked just before its first -- the time-ordered-partitions code with the
rank in place of ``t``. Sorting costs one shuffle, but DDST engines spend far more per
edge than a sort does, so the parallel replay pays for it.

**Reading.** What Spark reads is what the local reader reads, row for row (see
:func:`read_edges_spark`). Plain files go through ``spark.read.text`` with lines cut at
``\n`` only; line numbers (which become ``seq`` and the reject line numbers) are
recovered exactly by counting lines per file block in the JVM and numbering them in a
``mapInArrow`` pass, which hands the lines' bytes to the local reader's parser. Compressed
files cannot be split into blocks anyway (Spark's own gzip reading gives one task per file
too, and fails the job on a damaged one): each is read whole by one Python task with the
local reader's own file reading, which keeps the lines before a damaged gzip stream's
damage and reports it. Parquet inputs are read by the local reader (their row numbers
become ``seq``) and handed to Spark as Arrow.
"""

from __future__ import annotations

import os
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import normalize_edges, sort_stream
from graphcep.io.formats import InputError, ReaderOptions, edge_schema, parse_lines, prepare_options
from graphcep.io.readers import (  # the local reader's own pieces: one reading, two engines
    FILE_INDEX_SHIFT,
    HEAD_LINES,
    expand_paths,
    guess_format,
    iter_line_blocks,
    nothing_read_message,
    offset_seq,
    open_binary,
    read_text_file,
)
from graphcep.io.rejects import add_format_hint
from graphcep.patterns.ddst import DDSTQuery
from graphcep.patterns.program import Program
from graphcep.patterns.subgraph import EdgePredicate, QueryError, SubgraphQuery
from graphcep.runtime.hypercube import Shares, choose_shares, free_offsets, home_filter
from graphcep.runtime.job import DDSTJob, Extent, Job, ReplayJob
from graphcep.runtime.local import RunStats, replay_job

MATCH_DDL = (
    "query string, match_id string, first_t long, last_t long, "
    "bindings map<string,string>, "
    "edges array<struct<var:string,t:long,src:string,dst:string,dur:long,seq:long>>"
)
#: the column holding an edge's 0-based place in stream order (count windows)
RANK = "_rank"
# the "single" strategy replays streams up to this many edges in the driver
DRIVER_REPLAY_ROWS = 20_000_000
#: "auto" runs a keyed query as cells only when its busiest cell holds at most this many
#: times the mean cell's edges (a hub vertex loads its key's cell; time shards do not skew)
CELL_SKEW = 1.25


class JavaMissingError(RuntimeError):
    pass


def check_java() -> None:
    """Fail with one clear line when no Java runtime is available for Spark."""
    java_home = os.environ.get("JAVA_HOME")
    if java_home and Path(java_home, "bin", "java").exists():
        return
    if shutil.which("java"):
        return
    raise JavaMissingError(
        "Spark needs Java 17 or newer and none was found: install it (e.g. "
        "'apt-get install openjdk-17-jre-headless') or set JAVA_HOME; "
        "'--engine local' runs without Spark."
    )


def spark_session(master: str = "local[*]", app_name: str = "graphcep", shuffle_partitions: int | None = None):
    """The shared SparkSession: UI off, Arrow on, few shuffle partitions by default."""
    check_java()
    import sys

    from pyspark.sql import SparkSession

    # Python workers must run the interpreter graphcep is installed in, not "python3"
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    os.environ.setdefault("PYSPARK_DRIVER_PYTHON", sys.executable)

    cores = os.cpu_count() or 2
    builder = (
        SparkSession.builder.master(master)
        .appName(app_name)
        .config("spark.ui.enabled", "false")
        .config("spark.ui.showConsoleProgress", "false")
        .config("spark.sql.shuffle.partitions", str(shuffle_partitions or max(2, cores)))
        .config("spark.sql.execution.arrow.pyspark.enabled", "true")
        .config("spark.sql.execution.arrow.maxRecordsPerBatch", "200000")
        .config("spark.driver.memory", os.environ.get("GRAPHCEP_DRIVER_MEMORY", "4g"))
        .config("spark.sql.session.timeZone", "UTC")
        # column names are exact, as in Arrow, Parquet and graphcep's local runs: a netflow
        # table may hold an export's numeric `Label` next to the string edge `label`
        .config("spark.sql.caseSensitive", "true")
    )
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("ERROR")
    return session


def check_column_names(spark, columns: list[str]) -> None:
    """Refuse, with the names and the fix, columns that differ only in case when the session
    compares names ignoring case (Spark's default): every reference to either would be
    ambiguous. :func:`spark_session` makes names exact."""
    if spark.conf.get("spark.sql.caseSensitive", "false").lower() == "true":
        return
    seen: dict[str, str] = {}
    for name in columns:
        other = seen.setdefault(name.lower(), name)
        if other != name:
            raise ValueError(
                f"columns {other!r} and {name!r} differ only in case, and this Spark session "
                f"compares column names ignoring case; set spark.sql.caseSensitive=true "
                f"(graphcep's spark_session does) or rename one of them"
            )


# -- reading ----------------------------------------------------------------------------

#: Name suffixes of Hadoop's codecs: Spark's text source would decompress such a file,
#: where the local reader reads its bytes as they are (it looks through gzip alone, by
#: its magic bytes, whatever the name).
CODEC_SUFFIXES = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst")
#: Characters Hadoop reads as a path pattern (or a URI scheme) in a file name.
HADOOP_PATTERN_CHARS = frozenset("*?[]{}\\:")
#: Spark's file sources skip files whose names start with these, even when named.
SPARK_HIDDEN_PREFIXES = ("_", ".")
_GZIP_MAGIC = b"\x1f\x8b"
_UTF8_BOM = b"\xef\xbb\xbf"
#: The lines of a file's start that fix its layout (:func:`prepare_options`), read in
#: pieces of this many bytes.
HEAD_BYTES = 64 << 10
#: Columns of a whole-file task's last row: how many lines it read, and 1 when the file
#: broke off (a damaged gzip, a read error).
LINES = "_lines"
DAMAGED = "_damaged"
#: Whether a row comes from a file read whole (which has its own format hint).
WHOLE = "_whole"
#: The column holding attributes beyond those of the read's schema (a JSON key that only
#: later lines have), as ``{"name\0arrow type": text}``: a task learns them as it meets them.
EXTRA = "_extra"
EXTRA_TYPE = pa.map_(pa.string(), pa.string())


def _row_fields() -> list[pa.Field]:
    """The columns that follow the edge columns in a read's rows."""
    return [
        pa.field(EXTRA, EXTRA_TYPE),
        pa.field("_reject_line", pa.int64()),
        pa.field("_reject_reason", pa.string()),
        pa.field("_reject_text", pa.string()),
        pa.field("_reject_file", pa.string()),
        pa.field(LINES, pa.int64()),
        pa.field(DAMAGED, pa.int64()),
    ]


def read_edges_spark(spark, paths, fmt: str | None = None, options: ReaderOptions | None = None):
    """Read edge files with Spark: ``(edges_df, rejects_df, lines_read)``.

    ``edges_df`` has the edge schema; ``rejects_df`` has ``file, line, reason, text``.
    Both hold what :func:`graphcep.io.readers.read_edges` reads from the same files, row
    for row: lines end at ``\\n`` only (a ``\\r`` before it is dropped, any other ``\\r``
    is part of the line), lines that are not UTF-8 are rejected with the same reason, a
    file is named as given, each file's layout (header, columns) is fixed by its own
    first lines, a file without a single edge gets the format hint, and an attribute that
    only later lines have (a JSON key) is a column all the same (tasks carry such values
    in :data:`EXTRA`; one small job over the parsed rows names them). Raises the local
    reader's :class:`~graphcep.io.formats.InputError` when nothing could be read.

    Plain files are read by Spark's text source, split into blocks (see the module
    docstring). Compressed files cannot be split, so each is read whole by one Python
    task with the local reader's own file reading (its edges are held in that task): a
    truncated or corrupt gzip file keeps every line before the damage plus one
    ``"damaged gzip: ..."`` reject, and a file that cannot be opened is one reject. Files
    whose names Hadoop would read as a pattern or Spark would skip (``_x``, ``.x``), and
    files given twice, are read whole too.
    """
    from pyspark.sql import functions as F

    files = expand_paths(paths)
    fmt = fmt or guess_format(files[0])
    options = options or ReaderOptions()
    if fmt == "parquet":
        return _read_parquet_spark(spark, files, options)
    split, whole = _split_or_whole(files)
    heads = [_head_lines(f, options) for f in files]
    layouts = [prepare_options(fmt, head, options) for head in heads]
    schema = _read_schema(fmt, heads, layouts)
    plan = TextRead(fmt, options, [str(f) for f in files], [str(f.absolute()) for f in files],
                    layouts, pa.schema([*schema, *_row_fields()]))
    parts = []
    lines_read = 0
    if split:
        df, lines_read = _read_split(spark, plan, split)
        parts.append(df.withColumn(WHOLE, F.lit(False)))
    if whole:
        parts.append(_read_whole(spark, plan, whole).withColumn(WHOLE, F.lit(True)))
    parsed = parts[0] if len(parts) == 1 else parts[0].unionByName(parts[1])
    parsed = parsed.cache()
    totals = _totals(parsed, fmt, schema)
    lines_read += totals["lines"]
    rejects_df = _rejects(parsed, fmt, [plan.names[i] for i in split
                                        if i not in totals["with_edges"]])
    if totals["damaged"] and totals["damaged"] == lines_read:
        parsed.unpersist()
        raise InputError(nothing_read_message([pa.table({k: [v] for k, v in row.asDict().items()})
                                        for row in rejects_df.collect()]))
    columns = [c for c in schema.names if c not in totals["drop"]]
    extra = _extra_columns(parsed) if fmt == "jsonl" or whole else []
    is_edge = F.col("_reject_line").isNull() & F.col(LINES).isNull()
    edges_df = parsed.where(is_edge).select(*columns, *extra)
    return edges_df, rejects_df, lines_read


def _totals(parsed, fmt: str, schema: pa.Schema) -> dict:
    """What only the whole read tells, in one pass over the parsed rows: the lines and
    damaged files of the files read whole, the files that gave an edge (by index, from
    ``seq``), and the columns to drop (a VAST ``Label`` no line had, as locally)."""
    from pyspark.sql import functions as F

    is_edge = F.col("_reject_line").isNull() & F.col(LINES).isNull()
    found = parsed.agg(
        F.sum(LINES).alias("lines"), F.sum(DAMAGED).alias("damaged"),
        F.collect_set(F.when(is_edge, F.shiftright("seq", FILE_INDEX_SHIFT))).alias("files"),
        (F.count("Label") if fmt == "vast" and "Label" in schema.names
         else F.lit(None)).alias("labels"),
    ).first()
    return {"lines": int(found["lines"] or 0), "damaged": int(found["damaged"] or 0),
            "with_edges": set(found["files"]), "drop": {"Label"} if found["labels"] == 0 else set()}


def _rejects(parsed, fmt: str, without_edges: list[str]):
    """The rejects of a read; those of split files that gave no edge get the format hint
    (files read whole have it from the local reader)."""
    from pyspark.sql import functions as F

    reason = F.col("_reject_reason")
    if without_edges:
        hint = add_format_hint(pa.table({"reason": [""]}), fmt).column("reason")[0].as_py()
        needs_hint = ~F.col(WHOLE) & F.col("_reject_file").isin(without_edges)
        reason = F.when(needs_hint, F.concat(reason, F.lit(hint))).otherwise(reason)
    return parsed.where(F.col("_reject_line").isNotNull()).select(
        F.col("_reject_file").alias("file"),
        F.col("_reject_line").alias("line"),
        reason.alias("reason"),
        F.col("_reject_text").alias("text"),
    )


def _extra_columns(parsed) -> list:
    """Spark columns for the attributes that only later lines had (:data:`EXTRA`), in
    the order the local reader adds them: by the line that first has one."""
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_type

    found = (parsed.where(F.col(EXTRA).isNotNull())
             .select(F.explode(F.map_keys(EXTRA)).alias("key"), "seq")
             .groupBy("key").agg(F.min("seq").alias("first")).collect())
    columns = []
    for row in sorted(found, key=lambda r: r["first"]):
        name, kind = row["key"].rsplit("\0", 1)
        spark_type = from_arrow_type(pa.type_for_alias(kind))
        columns.append(F.col(EXTRA)[row["key"]].cast(spark_type).alias(name))
    return columns


def _read_schema(fmt: str, heads: list[list[str]], layouts: list[ReaderOptions]) -> pa.Schema:
    """The edge schema of a read: every file's, merged (a column some file lacks is null
    there, as in the local reader's concatenation)."""
    schemas = []
    for head, layout in zip(heads, layouts, strict=True):
        schema = edge_schema(fmt, layout)
        if schema is None:  # jsonl: attribute columns depend on the data; learn them
            sample, _ = parse_lines(pa.array(head, pa.string()),
                                    np.arange(1, len(head) + 1), fmt, layout)
            schema = sample.schema
        schemas.append(schema)
    return pa.unify_schemas(schemas)


def _split_or_whole(files: list[Path]) -> tuple[list[int], list[int]]:
    """Indices of the files Spark's text source may read in blocks, and of those a task
    must read whole: compressed files (by name or gzip magic), names Hadoop would read
    as a pattern, names Spark would skip as hidden, files that cannot be opened (the
    local reader's reject says why), and every later mention of a file given more than
    once (Spark would read it once, under one name)."""
    split, whole = [], []
    seen: set[tuple[int, int]] = set()
    for index, path in enumerate(files):
        stat = path.stat()
        identity = (stat.st_dev, stat.st_ino)
        if (identity in seen or path.name.lower().endswith(CODEC_SUFFIXES)
                or path.name.startswith(SPARK_HIDDEN_PREFIXES)
                or HADOOP_PATTERN_CHARS & set(str(path)) or _magic(path) != b"plain"):
            whole.append(index)
        else:
            split.append(index)
        seen.add(identity)
    return split, whole


def _magic(path: Path) -> bytes:
    """``b"gzip"``, ``b"plain"``, or ``b""`` for a file that cannot be opened."""
    try:
        with open(path, "rb") as fh:
            return b"gzip" if fh.read(2) == _GZIP_MAGIC else b"plain"
    except OSError:
        return b""


def _head_lines(path: Path, options: ReaderOptions) -> list[str]:
    """The first lines of a file as the local reader gives them to
    :func:`prepare_options`: cut at ``\\n``, at most ``max_line_bytes`` each, decoded
    with replacement characters. A damaged file gives the lines before the damage, one
    that cannot be opened none."""
    head: list[bytes] = []
    try:
        with open_binary(path) as stream:
            for lines, _ in iter_line_blocks(stream, HEAD_BYTES, options.max_line_bytes):
                head.extend(lines.slice(0, HEAD_LINES - len(head)).to_pylist())
                if len(head) >= HEAD_LINES:
                    break
    except (InputError, OSError):  # the file's own read reports it
        pass
    return [raw[: options.max_line_bytes].decode("utf-8", "replace") for raw in head]


@dataclass(frozen=True)
class TextRead:
    """What the tasks of one read need: the format and options, each file's name (as
    given, for rejects), path (absolute, for tasks) and layout, and the schema of the
    rows they produce (edge columns, then :func:`_row_fields`)."""

    fmt: str
    options: ReaderOptions
    names: list[str]
    paths: list[str]
    layouts: list[ReaderOptions]
    out_schema: pa.Schema

    def parse(self, lines: pa.Array, numbers: np.ndarray, index: int) -> Iterator[pa.RecordBatch]:
        """Rows of the ``index``-th file's ``lines`` (raw bytes), numbered ``numbers``."""
        if numbers[0] == 1:  # as locally, a UTF-8 byte order mark opening a file is dropped
            first = lines[0].as_py()
            if first.startswith(_UTF8_BOM):
                lines = pa.concat_arrays([pa.array([first[len(_UTF8_BOM):]], lines.type),
                                          lines.slice(1)])
        edges, rejects = parse_lines(lines, numbers, self.fmt, self.layouts[index])
        yield from self._edge_rows(offset_seq(edges, index))
        yield from self._reject_rows(rejects, self.names[index])

    def read_whole_file(self, index: int) -> Iterator[pa.RecordBatch]:
        """Rows of the ``index``-th file read by the local reader, then its line count."""
        read = read_text_file(Path(self.paths[index]), self.fmt, self.options)
        for edges in read.edges:
            yield from self._edge_rows(offset_seq(edges, index))
        for rejects in read.rejects:
            yield from self._reject_rows(rejects, self.names[index])
        yield from self._rows(1, {LINES: pa.array([read.lines]),
                                  DAMAGED: pa.array([int(read.damaged)])})

    def _edge_rows(self, edges: pa.Table) -> Iterator[pa.RecordBatch]:
        names = set(self.out_schema.names)
        given = {c: edges.column(c) for c in edges.column_names if c in names}
        given[EXTRA] = _extra_values(
            edges.select([c for c in edges.column_names if c not in names]))
        yield from self._rows(edges.num_rows, given)

    def _reject_rows(self, rejects: pa.Table, name: str) -> Iterator[pa.RecordBatch]:
        n = rejects.num_rows
        yield from self._rows(n, {"_reject_line": rejects.column("line"),
                                  "_reject_reason": rejects.column("reason"),
                                  "_reject_text": rejects.column("text"),
                                  "_reject_file": pa.array([name] * n, pa.string())})

    def _rows(self, n: int, given: dict) -> Iterator[pa.RecordBatch]:
        """``n`` rows holding ``given``'s columns, nulls elsewhere."""
        if not n:
            return
        columns = [given[f.name].cast(f.type) if f.name in given else pa.nulls(n, f.type)
                   for f in self.out_schema]
        yield from pa.table(columns, schema=self.out_schema).to_batches()


def _extra_values(extra: pa.Table) -> pa.Array:
    """:data:`EXTRA` for each row: its non-null values of ``extra``'s columns as text,
    keyed by name and Arrow type (null where there are none)."""
    if not extra.num_columns:
        return pa.nulls(extra.num_rows, EXTRA_TYPE)
    keyed = [(f"{f.name}\0{f.type}", extra.column(f.name).cast(pa.string()).to_pylist())
             for f in extra.schema]
    rows = [[(key, values[i]) for key, values in keyed if values[i] is not None] or None
            for i in range(extra.num_rows)]
    return pa.array(rows, EXTRA_TYPE)


def _read_split(spark, plan: TextRead, indices: list[int]):
    """Plain files through Spark's text source, in blocks: ``(rows_df, lines_read)``.

    Lines are cut at ``\\n`` only (``lineSep``; Spark's default also cuts at a bare
    ``\\r``) and reach Python as the file's bytes (Spark does not check UTF-8), so
    :func:`parse_lines` sees exactly what the local reader gives it. Line numbers come
    from per-block line counts, counted in the JVM first.
    """
    from pyspark.sql import functions as F
    from pyspark.sql.pandas.types import from_arrow_schema

    lines = spark.read.option("lineSep", "\n").text([plan.paths[i] for i in indices]).select(
        "value",
        F.col("_metadata.file_path").alias("file"),
        F.col("_metadata.file_block_start").alias("block"),
    )
    blocks = lines.groupBy("file", "block").count().collect()
    first_line = _first_lines(blocks)
    index_of = _file_indices({r["file"] for r in blocks}, plan.paths, indices)

    def parse(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        counters: dict[tuple[str, int], int] = {}
        for rb in batches:
            for (file, block), part in _split_by_block(pa.Table.from_batches([rb])):
                start = counters.get((file, block), first_line[(file, block)])
                counters[(file, block)] = start + part.num_rows
                numbers = np.arange(start, start + part.num_rows, dtype=np.int64)
                raw = part.column("value").combine_chunks().view(pa.binary())
                yield from plan.parse(raw, numbers, index_of[file])

    rows = lines.mapInArrow(parse, from_arrow_schema(plan.out_schema))
    return rows, sum(r["count"] for r in blocks)


def _file_indices(uris: set[str], paths: list[str], indices: list[int]) -> dict[str, int]:
    """Which file of the read each of Spark's file URIs is: found by the file itself
    (device and inode), since Spark names it by an absolute, normalised, percent-encoded
    URI whatever the name given."""
    by_identity = {}
    for index in indices:
        stat = os.stat(paths[index])
        by_identity[(stat.st_dev, stat.st_ino)] = index
    found = {}
    for uri in uris:
        stat = os.stat(url2pathname(urlparse(uri).path))
        found[uri] = by_identity[(stat.st_dev, stat.st_ino)]
    return found


def _read_whole(spark, plan: TextRead, indices: list[int]):
    """Files read whole, one task each (:meth:`TextRead.read_whole_file`)."""
    from pyspark.sql.pandas.types import from_arrow_schema

    tasks = spark.createDataFrame(
        spark.sparkContext.parallelize([(i,) for i in indices], len(indices)), "file long")

    def read(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        for rb in batches:
            for index in rb.column(0).to_pylist():
                yield from plan.read_whole_file(index)

    return tasks.mapInArrow(read, from_arrow_schema(plan.out_schema))


def _first_lines(blocks) -> dict[tuple[str, int], int]:
    """1-based number of the first line of every (file, block), from per-block counts."""
    by_file: dict[str, list[tuple[int, int]]] = {}
    for r in blocks:
        by_file.setdefault(r["file"], []).append((r["block"], r["count"]))
    first: dict[tuple[str, int], int] = {}
    for file, parts in by_file.items():
        line = 1
        for block, count in sorted(parts):
            first[(file, block)] = line
            line += count
    return first


def _split_by_block(table: pa.Table):
    """Consecutive runs of rows from the same (file, block), in row order."""
    files = table.column("file").to_pylist()
    blocks = table.column("block").to_numpy()
    start = 0
    n = table.num_rows
    for i in range(1, n + 1):
        if i == n or files[i] != files[start] or blocks[i] != blocks[start]:
            yield (files[start], int(blocks[start])), table.slice(start, i - start)
            start = i


def _read_parquet_spark(spark, files, options: ReaderOptions):
    """Parquet is read by the local reader (row numbers must be global to become ``seq``)
    and handed to Spark as an Arrow table."""
    from graphcep.io.readers import read_edges

    result = read_edges(files, "parquet", options)
    edges_df = spark.createDataFrame(result.edges)
    rejects_df = spark.createDataFrame(result.rejects) if result.rejects.num_rows else (
        spark.createDataFrame([], "file string, line long, reason string, text string"))
    return edges_df, rejects_df, result.lines_read


# -- sharded replay ----------------------------------------------------------------------


def plan_shards(t_min: int, t_max: int, extent_us: int, shards: int) -> int:
    """Shard length: at least the extent (so copies go to one next shard only)."""
    span = max(t_max - t_min + 1, 1)
    return max(extent_us, -(-span // max(shards, 1)), 1)


def run_spark(
    spark,
    job: ReplayJob | SubgraphQuery | DDSTQuery,
    edges_df,
    *,
    shards: int | None = None,
    shard_length_us: int | None = None,
    strategy: str = "auto",
) -> tuple[pa.Table, RunStats]:
    """All matches of the job's query over ``edges_df``, replayed in parallel Spark tasks.

    Exact strategies (``strategy="auto"`` picks with :func:`choose_strategy`):

    ``"single"``
        One engine replays the whole stream, using every core: for streams shorter than
        two extents, where time shards would mostly re-read each other's edges, and for
        queries with features. Up to ``DRIVER_REPLAY_ROWS`` edges it runs in the driver
        (see :func:`_replay_single`), beyond that in one task.
    ``"partitions"``
        When the DataFrame's partitions hold disjoint, increasing time ranges (a
        time-ordered file split into blocks, an ordered table), every partition is a
        shard as it stands: nothing is shuffled. The edges within one extent before each
        partition's start -- its warm-up -- are collected once and broadcast.
    ``"shuffle"``
        Otherwise edges are cut into time shards at least one extent long; each edge also
        goes to the next shard when within one extent of its start; shards are shuffled
        onto partitions of their own.
    ``"cells"``
        HyperCube partitioning by vertices, not time (:mod:`graphcep.runtime.hypercube`):
        a grid of at most ``shards`` cells (default: one per core) from
        :func:`~graphcep.runtime.hypercube.choose_shares`; Spark SQL sends each edge to
        every cell it must reach (:func:`route_spark`, ``pmod(xxhash64(v), s)`` in the
        JVM: exactly one cell for a star keyed on its centre), each cell is shuffled onto
        a partition of its own, and each task replays its cell in stream order and keeps
        the matches whose home cell it is. No warm-up, and each engine's window holds
        only its cell's edges, so keyed queries beat time shards; queries whose edges
        go to several cells (the triangle: 5 copies on 2 x 2 x 2) do not. Cells are not
        also cut in time: on 2 cores, time shards inside cells would only add warm-up.
        SAL jobs without vertex features only (a ValueError otherwise); a grid of one
        cell runs as ``"single"``.

    Queries with vertex features run as one shard: a feature such as ``topk`` counts
    items over the whole stream, which time shards do not see. DDST count windows use
    ``"partitions"`` and ``"shuffle"`` by edge rank (see the module docstring).

    **Measured** (seconds, best of 3 in one warm session; ``local[2]`` on a 2-core machine
    shared with other work; a cached DataFrame of the benchmark's S2 stream: 1M edges,
    25k vertices, 60k edges/s, so 16.7 s; "keyed" is ``{ t e1 b; t e2 c;
    starttime(e1) < starttime(e2); ... }`` with the gap in 9..10 s or <= 1 s, "pair" the
    same with ``t e2 b``; cells: 2 for keyed queries, 2 x 2 x 2 for triangles, whose
    grid on 2 cells is one cell)::

        input      query (span in extents)    matches  auto picks  auto single  time cells
        unordered  triangle <= 10 s (1.7)       6,931  single      1.31   1.25  3.75  5.97
                   keyed 9..10 s (1.7)      1,032,282  single      2.53   2.19  7.40  3.88
                   keyed <= 1 s (16.7)      2,327,139  cells       7.70   4.15  8.43  6.97
                   pair <= 1 s (16.7)             103  cells       1.59   1.02  3.25  1.60
                   triangle <= 1 s (16.7)         116  shuffle     3.23   1.11  3.50  6.03
        ordered    triangle <= 10 s             6,931  single      2.05   1.99  4.79  6.91
                   keyed 9..10 s            1,032,282  single      3.11   3.01  7.65  4.29
                   keyed <= 1 s             2,327,139  partitions  9.18   5.47  9.61  7.52
                   pair <= 1 s                    103  partitions  4.45   1.79  3.67  2.15
                   triangle <= 1 s                116  partitions  3.93   1.68  3.52  5.84

    ("time" is ``"shuffle"`` on unordered input -- two round-robin partitions -- and
    ``"partitions"`` on the two time-ordered ones.) Cells beat time shards by 1.2--2x on
    every keyed query and lose on triangles; none beats one engine in the driver at 1M
    edges on 2 cores, where the shipping of edges and matches through Spark dominates.
    So "auto" keeps ``"single"`` for short streams (the benchmark's S2 triangle spans 1.7
    extents) and uses ``"cells"`` only where it would shuffle time shards: keyed queries
    that send each edge to one cell (:func:`keyed_grid`), when the busiest cell holds at
    most ``CELL_SKEW`` times the mean (counted in the statistics pass, at no extra job).
    Time-ordered input keeps ``"partitions"``, which moves no edges. (The keyed query
    with a gap <= 10 s has 16.8M matches, 3.6 GB of records: not measured here; a
    3.5M-match variant, gap 7..10 s, ran the driver JVM's 4 GB heap out while collecting
    task results.)
    """

    job = _as_job(job)
    check_column_names(spark, edges_df.columns)
    job.check_columns(edges_df.columns)
    if strategy == "cells":
        _check_cells(job, shard_length_us)
    started = time.perf_counter()
    # keyed queries may run as cells: count each cell's edges in the same pass
    auto = strategy == "auto" and shards is None and shard_length_us is None
    keyed = keyed_grid(spark, job) if auto else None
    parts, cell_edges = _partition_stats(edges_df, job, keyed)
    n = sum(int(r["n"]) for r in parts)
    schema = job.output.schema
    if n == 0:
        return schema.empty_table(), RunStats(seconds=time.perf_counter() - started)
    job = job.bind(max(int(r["d_max"] or 0) for r in parts))
    extent = job.extent()
    # ship only what the engine reads: wide netflow rows would cost transfer time for nothing
    edges_df = edges_df.select(*job.needed_columns(edges_df.columns))
    if strategy == "auto":
        strategy = choose_strategy(parts, extent, job, shards, shard_length_us, cell_edges)
    if strategy == "single":
        matches, extra = _replay_single(spark, job, edges_df, n)
    elif strategy == "partitions":
        with _pinned(edges_df, parts) as (pinned, pinned_parts):
            if not _time_ordered(pinned_parts):
                raise ValueError("strategy 'partitions' needs partitions in increasing time order")
            matches, extra = _replay_in_place(spark, job, pinned, pinned_parts, extent)
    elif strategy == "shuffle" and extent.unit == "edges":
        matches, extra = _replay_rank_shards(spark, job, edges_df, extent, shards,
                                             shard_length_us)
    elif strategy == "shuffle":
        matches, extra = _replay_shuffled(spark, job, edges_df, parts, extent.size, shards,
                                          shard_length_us)
    elif strategy == "cells":
        grid = keyed or choose_shares(job.query, cell_budget(spark, shards))
        matches, extra = _replay_cells(spark, job, edges_df, n, grid)
    else:
        raise ValueError(
            f"unknown strategy {strategy!r}: auto, single, partitions, shuffle or cells")
    matches = matches.cast(schema) if matches.num_rows else schema.empty_table()
    stats = RunStats(edges=n, matches=matches.num_rows, seconds=time.perf_counter() - started)
    stats.extra.update({f"extent_{extent.unit}": extent.size, **extra})
    return matches, stats


def _as_job(job: ReplayJob | SubgraphQuery | DDSTQuery) -> ReplayJob:
    """A bare query runs as a job with default options."""
    if isinstance(job, SubgraphQuery):
        return Job.create(Program(queries=[job]))
    if isinstance(job, DDSTQuery):
        return DDSTJob(job)
    return job


def _spark_schema(job: ReplayJob):
    """The Spark type of the job's match rows, for ``mapInArrow``."""
    from pyspark.sql.pandas.types import from_arrow_schema

    return from_arrow_schema(job.output.schema)


@contextmanager
def _pinned(edges_df, parts):
    """``edges_df`` with partitions that stay the same in every job, and their stats.

    Warm-ups are cut at each partition's start, so every job must see the same
    partitions: an uncached range partitioning would be re-sampled each time.
    """
    if edges_df.storageLevel.useMemory or edges_df.storageLevel.useDisk:
        yield edges_df, parts
        return
    pinned = edges_df.persist()
    try:
        yield pinned, _partition_stats(pinned)[0]
    finally:
        pinned.unpersist()


def _partition_stats(edges_df, job: ReplayJob | None = None,
                     grid: Shares | None = None) -> tuple[list, list[int] | None]:
    """Per input partition: first and last start time, longest duration, edge count; and,
    given a keyed ``grid`` (one cell per edge), the edges of each cell, from the same pass.
    """
    from pyspark.sql import functions as F

    longest = F.max("dur") if "dur" in edges_df.columns else F.lit(0)
    keys = [F.spark_partition_id().alias("p")]
    if grid is not None:
        (_, (cell,)), = cell_routes(job, grid, edges_df)  # eligibility aside: a load figure
        keys.append(cell.alias("cell"))
    rows = (
        edges_df.groupBy(*keys)
        .agg(F.min("t").alias("t_min"), F.max("t").alias("t_max"),
             longest.alias("d_max"), F.count(F.lit(1)).alias("n"))
        .collect()
    )
    if grid is None:
        return sorted(rows, key=lambda r: r["p"]), None  # sorted here: orderBy costs a job
    cells = [0] * grid.cells
    by_part: dict[int, list] = {}
    for r in rows:
        cells[int(r["cell"])] += int(r["n"])
        by_part.setdefault(int(r["p"]), []).append(r)
    merged = [
        {"p": p, "t_min": min(r["t_min"] for r in rs), "t_max": max(r["t_max"] for r in rs),
         "d_max": max((r["d_max"] for r in rs if r["d_max"] is not None), default=None),
         "n": sum(int(r["n"]) for r in rs)}
        for p, rs in sorted(by_part.items())
    ]
    return merged, cells


def _time_ordered(parts) -> bool:
    return all(a["t_max"] < b["t_min"] for a, b in zip(parts, parts[1:], strict=False))


def choose_strategy(parts, extent: Extent, job: ReplayJob, shards, shard_length_us,
                    cell_edges: list[int] | None = None) -> str:
    """How to cut the work, from per-partition time ranges (see :func:`run_spark`).

    Time shards pay for parallelism with warm-up: a shard re-reads one extent of edges
    before its start. A stream shorter than two extents therefore runs as one task
    (whose engine then uses every core); features need the whole stream in one task too.
    Time-ordered partitions are used in place when they are, on average, at least one
    extent long. Otherwise the stream must be shuffled: a keyed query that sends every
    edge to one cell (``cell_edges``, the edges per cell of :func:`keyed_grid`) is shuffled
    into cells when its busiest cell holds at most ``CELL_SKEW`` times the mean, else
    edges are shuffled into time shards. A count window's extent is in edges, and so is
    the stream's length it is compared with.
    """
    if shards is not None or shard_length_us is not None:
        return "shuffle"
    if extent.unit == "edges":
        span = sum(int(r["n"]) for r in parts)
    else:
        span = max(int(r["t_max"]) for r in parts) - min(int(r["t_min"]) for r in parts)
    if job.whole_stream or span < 2 * extent.size:
        return "single"
    if len(parts) > 1 and _time_ordered(parts) and span / len(parts) >= extent.size:
        return "partitions"
    if cell_edges and max(cell_edges) <= CELL_SKEW * sum(cell_edges) / len(cell_edges):
        return "cells"
    return "shuffle"


def _received(batches: Iterator[pa.RecordBatch]) -> pa.Table | None:
    """The rows a ``mapInArrow`` task received, or None when there are none: an empty
    partition sends no batch at all, and ``pa.Table.from_batches`` needs at least one (or
    a schema). Every function that replays a partition starts with this."""
    received = list(batches)
    if not received:
        return None
    table = pa.Table.from_batches(received)
    return table if table.num_rows else None


def _replay_single(spark, job: ReplayJob, edges_df, n: int):
    """One engine replays everything.

    Up to ``DRIVER_REPLAY_ROWS`` edges the engine runs in the driver: Spark collects the
    partitions as Arrow in parallel and the driver's engine uses its cores. A single task
    would instead receive every row through one JVM-to-Python pipe (on the benchmark's 1M
    edges that pipe alone cost more than collecting and matching together). Larger
    streams run in one task, so the driver never has to hold them.
    """
    threads = max(1, min(spark.sparkContext.defaultParallelism, len(os.sched_getaffinity(0))))
    if n <= DRIVER_REPLAY_ROWS:
        table = edges_df.toArrow()
        matches = (_replay_edges(job, table, None, threads=threads) if table.num_rows
                   else job.output.schema.empty_table())
        return matches, {"strategy": "single", "shards": 1, "where": "driver"}

    def run_all(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _received(batches)
        if table is not None:
            yield from _replay_edges(job, table, None, threads=threads).to_batches()

    matches = edges_df.coalesce(1).mapInArrow(run_all, _spark_schema(job)).toArrow()
    return matches, {"strategy": "single", "shards": 1, "where": "task"}


def _replay_in_place(spark, job: ReplayJob, edges_df, parts, extent: Extent):
    """Every partition of ``edges_df`` (in increasing stream order) is a shard as it stands.

    Its warm-up is the preceding extent: in time, or, for count windows, in edge rank
    (:func:`_ranked` numbers the edges first).
    """
    if extent.unit == "edges":
        ranked, starts = _ranked(edges_df, parts)
        return _replay_partitions(spark, job, ranked, starts, extent.size, RANK)
    starts = {int(r["p"]): int(r["t_min"]) for r in parts}
    return _replay_partitions(spark, job, edges_df, starts, extent.size, "t")


def _ranked(edges_df, parts):
    """``edges_df`` with each edge's 0-based place in stream order in column :data:`RANK`,
    and the rank of each partition's first edge. The partitions must hold increasing
    stretches of the stream: a partition, sorted, follows the counts of those before it."""
    from pyspark import TaskContext
    from pyspark.sql.types import LongType, StructField, StructType

    starts: dict[int, int] = {}
    total = 0
    for r in sorted(parts, key=lambda r: r["p"]):
        starts[int(r["p"])] = total
        total += int(r["n"])
    schema = StructType([*edges_df.schema.fields, StructField(RANK, LongType())])

    def number(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        own = _received(batches)
        if own is None:
            return
        own = sort_stream(own)
        first = starts[TaskContext.get().partitionId()]
        rank = pa.array(np.arange(first, first + own.num_rows, dtype=np.int64))
        yield from own.append_column(RANK, rank).to_batches()

    return edges_df.mapInArrow(number, schema), starts


def _replay_rank_shards(spark, job: ReplayJob, edges_df, extent: Extent, shards,
                        shard_length_us):
    """Count windows with no usable order: range-partition the stream on ``(t, seq)`` (one
    shuffle) into ``shards`` stretches of about equal edge counts, then replay in place."""
    if shard_length_us is not None:
        raise ValueError("a count window is cut by edge rank: give shards, not shard_length_us")
    count = shards or max(2, 4 * spark.sparkContext.defaultParallelism)
    ordered = edges_df.repartitionByRange(count, "t", "seq")
    with _pinned(ordered, None) as (pinned, parts):
        matches, extra = _replay_in_place(spark, job, pinned, parts, extent)
    return matches, {**extra, "strategy": "shuffle"}


def _replay_partitions(spark, job: ReplayJob, edges_df, starts: dict[int, int], extent: int,
                       pos: str = "t"):
    """Each partition replays its own edges after a broadcast warm-up: the edges within
    one extent before its first edge, measured on column ``pos`` (``starts``: each
    partition's first value of it)."""
    from pyspark import TaskContext
    from pyspark.sql import functions as F

    first = min(starts, key=starts.__getitem__)
    windows = [(start - extent, start) for p, start in starts.items() if p != first]
    near_start = F.lit(False)
    for lo, hi in windows:
        near_start = near_start | ((F.col(pos) >= lo) & (F.col(pos) < hi))
    tails = edges_df.where(near_start).toArrow()
    tails = sort_stream(normalize_edges(tails)) if tails.num_rows else None
    shared = spark.sparkContext.broadcast(_ipc_bytes(tails) if tails is not None else b"")

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        own = _received(batches)
        if own is None:
            return
        start = starts[TaskContext.get().partitionId()]
        warm = None
        if shared.value:
            everything = pa.ipc.open_stream(shared.value).read_all()
            in_range = pc.and_(pc.greater_equal(everything.column(pos), start - extent),
                               pc.less(everything.column(pos), start))
            warm = everything.filter(in_range)
        yield from _replay_edges(job, own, warm).to_batches()

    matches = edges_df.mapInArrow(run_partition, _spark_schema(job)).toArrow()
    return matches, {"strategy": "partitions", "shards": len(starts),
                     "warmup_edges": 0 if tails is None else tails.num_rows}


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _replay_shuffled(spark, job: ReplayJob, edges_df, parts, extent: int, shards,
                     shard_length_us):
    from pyspark.sql import functions as F

    t_min = min(int(r["t_min"]) for r in parts)
    t_max = max(int(r["t_max"]) for r in parts)
    if job.whole_stream:
        length = t_max - t_min + 1
    else:
        shards = shards or max(2, 4 * spark.sparkContext.defaultParallelism)
        length = shard_length_us or plan_shards(t_min, t_max, extent, shards)
    length = max(length, extent, 1)
    count = -(-(t_max - t_min + 1) // length)

    shard = F.floor((F.col("t") - F.lit(t_min)) / F.lit(length)).cast("long")
    owned = edges_df.withColumn("_shard", shard).withColumn("_owned", F.lit(True))
    next_start = F.lit(t_min) + (F.col("_shard") + 1) * F.lit(length)
    copies = (
        owned.where((F.col("t") >= next_start - F.lit(extent)) & (F.col("_shard") + 1 < count))
        .withColumn("_shard", F.col("_shard") + 1)
        .withColumn("_owned", F.lit(False))
    )
    sharded = owned.unionByName(copies)
    nparts = max(1, min(count, spark.sparkContext.defaultParallelism * 2))
    keys = F.array(*[F.lit(k).cast("long") for k in partition_keys(nparts)])
    key_of_shard = F.element_at(keys, ((F.col("_shard") % nparts) + 1).cast("int"))
    placed = sharded.withColumn("_key", key_of_shard).repartition(nparts, "_key")

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _received(batches)
        if table is None:
            return
        table = table.drop_columns(["_key"])
        for shard_id in sorted(pc.unique(table.column("_shard")).to_pylist()):
            rows = table.filter(pc.equal(table.column("_shard"), shard_id))
            yield from replay_shard(job, rows).to_batches()

    matches = placed.mapInArrow(run_partition, _spark_schema(job)).toArrow()
    return matches, {"strategy": "shuffle", "shards": count, "shard_length_us": length}


# -- HyperCube cells ---------------------------------------------------------------------


def _check_cells(job: ReplayJob, shard_length_us: int | None) -> None:
    """Only SAL jobs without vertex features can be split into cells."""
    if not isinstance(job, Job):
        raise ValueError(
            f"strategy 'cells' splits a SAL query by its vertex variables; {job.name!r} is "
            "a DDST job: use auto, single, partitions or shuffle")
    if job.whole_stream:
        names = sorted({c.feature for c in job.query.vertex_constraints})
        raise ValueError(
            f"strategy 'cells' cannot run query {job.name!r}: it uses vertex features "
            f"{names}, which count the whole stream (no cell sees it); use 'single'")
    if shard_length_us is not None:
        raise ValueError("strategy 'cells' does not cut time: give shards (the cell budget), "
                         "not shard_length_us")


def keyed_grid(spark, job: ReplayJob) -> Shares | None:
    """The grid "auto" may run ``job`` on: the SAL query's best grid of one cell per core
    (:func:`~graphcep.runtime.hypercube.choose_shares`) when it sends every edge to exactly
    one cell (:func:`one_cell_per_edge`, keyed partitioning of a star); else None."""
    if not isinstance(job, Job) or job.whole_stream:
        return None
    grid = choose_shares(job.query, cell_budget(spark, None))
    return grid if grid.cells > 1 and one_cell_per_edge(job, grid) else None


def cell_budget(spark, shards: int | None) -> int:
    """How many cells :func:`~graphcep.runtime.hypercube.choose_shares` may use: ``shards``
    when given, else one per core."""
    return max(1, shards or spark.sparkContext.defaultParallelism)


def _replay_cells(spark, job: Job, edges_df, n: int, shares: Shares):
    """HyperCube: route every edge to the cells it must reach (in the JVM, see
    :func:`route_spark`), shuffle each cell onto a partition of its own, replay each cell's
    edges in stream order and keep its home matches
    (:func:`~graphcep.runtime.hypercube.home_filter`)."""
    from pyspark.sql import functions as F

    if shares.cells == 1:  # no split pays (e.g. the triangle on 2 or 4 cells): one engine
        matches, extra = _replay_single(spark, job, edges_df, n)
        return matches, {**extra, "strategy": "cells", "cells": 1}
    keyed = one_cell_per_edge(job, shares)
    routed = route_spark(job, shares, edges_df)
    keys = F.array(*[F.lit(k).cast("long") for k in partition_keys(shares.cells)])
    placed = (routed.withColumn("_key", F.element_at(keys, (F.col("_cell") + 1).cast("int")))
              .repartition(shares.cells, "_key"))

    def run_partition(batches: Iterator[pa.RecordBatch]) -> Iterator[pa.RecordBatch]:
        table = _received(batches)
        if table is None:
            return
        cell_of = table.column("_cell")
        table = table.drop_columns(["_cell", "_key"])
        for cell in sorted(pc.unique(cell_of).to_pylist()):
            found = _replay_edges(job, table.filter(pc.equal(cell_of, cell)), None)
            if not keyed:  # with one cell per edge, a match found in a cell has it as home
                found = home_filter(found, shares, cell)
            yield from found.to_batches()

    matches = placed.mapInArrow(run_partition, _spark_schema(job)).toArrow()
    extra = {"strategy": "cells", "cells": shares.cells,
             "grid": "x".join(str(s) for s in shares.shares), "one_cell_per_edge": keyed}
    return matches, extra


def route_spark(job: Job, shares: Shares, edges_df):
    """``edges_df`` with one row per (edge, cell it must reach), the cell id in column
    ``_cell``: :func:`~graphcep.runtime.hypercube.route` computed by Spark SQL in the JVM
    (``pmod(xxhash64(v), s)`` is the module's vertex coordinate).

    Edges that can play no query edge are dropped. When every edge has one cell (keyed
    partitioning with the key at the same end of every query edge), the cell is a plain
    column: a projection and a filter, no arrays.
    """
    from pyspark.sql import functions as F

    routes = cell_routes(job, shares, edges_df)
    if len(routes) == 1 and len(routes[0][1]) == 1:
        eligible, (cell,) = routes[0]
        return edges_df.where(eligible).withColumn("_cell", cell)
    empty = F.array().cast("array<bigint>")
    arrays = [F.when(eligible, F.array(*cells)).otherwise(empty) for eligible, cells in routes]
    cells = arrays[0] if len(arrays) == 1 else F.array_distinct(F.concat(*arrays))
    return edges_df.withColumn("_cell", F.explode(cells))


def cell_routes(job: Job, shares: Shares, edges_df) -> list:
    """``[(eligible, [cell, ...]), ...]``: Spark columns, one entry per distinct cell set
    among the query edges (query edges whose split variables sit at the same ends share
    one, their eligibility OR-ed), as :func:`~graphcep.runtime.hypercube.route` does:
    loops only for ``x -> x``, no loops between distinct variables under isomorphism, the
    edge predicates with the engine's rules (a string field compares with the value's
    text, a null never holds)."""
    from pyspark.sql import functions as F

    same = F.coalesce(F.col("src") == F.col("dst"), F.lit(False))
    sets: dict[tuple[tuple[int, str], ...], object] = {}
    for edge in job.query.edges:
        if edge.src == edge.dst:
            ok = same
        elif job.homomorphic:
            ok = F.lit(True)
        else:
            ok = ~same
        for pred in job.query.edge_predicates:
            if pred.edge == edge.name:
                ok = ok & _predicate_column(edges_df, pred, job.field_aliases)
        fixed = _split_ends(job, shares, edge)
        sets[fixed] = (sets[fixed] | ok) if fixed in sets else ok
    routes = []
    for fixed, ok in sets.items():
        base = F.lit(0).cast("long")
        for i, column in fixed:
            coordinate = F.pmod(_spark_vertex_hash(column), F.lit(shares.shares[i]).cast("long"))
            base = base + coordinate * F.lit(int(shares.strides[i])).cast("long")
        free = free_offsets(shares, {i for i, _ in fixed})
        routes.append((F.coalesce(ok, F.lit(False)),
                       [base + F.lit(int(o)).cast("long") for o in free]))
    return routes


def _split_ends(job: Job, shares: Shares, edge) -> tuple[tuple[int, str], ...]:
    """``(variable index, stream column)`` for the ends of a query edge whose variable is
    split (share > 1): what fixes the edge's cells."""
    src, dst = ("dst", "src") if job.swap_endpoints else ("src", "dst")
    ends = {edge.src: src} if edge.src == edge.dst else {edge.src: src, edge.dst: dst}
    index = {v: i for i, v in enumerate(shares.variables)}
    return tuple(sorted((index[v], c) for v, c in ends.items() if shares.share(v) > 1))


def one_cell_per_edge(job: Job, shares: Shares) -> bool:
    """Whether every edge reaches at most one cell: every query edge has the grid's split
    variables at the same ends (keyed partitioning on a star's centre). Then a match found
    in a cell has all its edges there only, so that cell is its home."""
    fixed = {_split_ends(job, shares, edge) for edge in job.query.edges}
    split = {i for i, s in enumerate(shares.shares) if s > 1}
    return len(fixed) == 1 and {i for i, _ in next(iter(fixed))} == split


def _spark_vertex_hash(column: str):
    """Spark SQL's :func:`~graphcep.runtime.hypercube.vertex_hash`: XXH64 (seed 42) of the
    endpoint as a string, a null as the empty string."""
    from pyspark.sql import functions as F

    return F.xxhash64(F.coalesce(F.col(column).cast("string"), F.lit("")))


def _predicate_column(edges_df, pred: EdgePredicate, aliases: dict[str, str]):
    """``edge.field op value`` as a Spark column, by the engine's rule (null: no match)."""
    import operator

    from pyspark.sql import functions as F
    from pyspark.sql.types import StringType

    name = aliases.get(pred.field, pred.field)
    if name not in edges_df.columns:
        raise QueryError(
            f"predicate '{pred}': the stream has no field {pred.field!r}; "
            f"fields are {edges_df.columns}"
        )
    value = pred.value
    if isinstance(edges_df.schema[name].dataType, StringType):
        value = str(value)
    elif isinstance(value, str):
        raise QueryError(f"predicate '{pred}': field {pred.field!r} is numeric, got a string")
    op = {"==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
          ">": operator.gt, ">=": operator.ge}[pred.op]
    return op(F.col(name), F.lit(value))


def spark_hash_long(value: int, seed: int = 42) -> int:
    """Spark SQL's ``hash()`` of a LONG value (Murmur3 x86 32-bit, as Spark computes it)."""

    def mix_k1(k: int) -> int:
        k = (k * 0xCC9E2D51) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        return (k * 0x1B873593) & 0xFFFFFFFF

    def mix_h1(h: int, k: int) -> int:
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        return (h * 5 + 0xE6546B64) & 0xFFFFFFFF

    value &= 0xFFFFFFFFFFFFFFFF
    h = mix_h1(seed & 0xFFFFFFFF, mix_k1(value & 0xFFFFFFFF))
    h = mix_h1(h, mix_k1(value >> 32))
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h


def partition_keys(parts: int) -> list[int]:
    """One integer per partition that Spark's hash partitioning sends to that partition.

    Shard ``i`` is tagged with key ``i % parts`` of this list, so repartitioning by the tag
    spreads shards evenly instead of letting hash collisions stack them in one task.
    """
    found: dict[int, int] = {}
    candidate = 0
    while len(found) < parts:
        found.setdefault(spark_hash_long(candidate) % parts, candidate)
        candidate += 1
    return [found[p] for p in range(parts)]


def replay_shard(job: ReplayJob, table: pa.Table) -> pa.Table:
    """What one shuffled Spark task runs: warm up on the copied edges, report the shard's own
    matches."""
    owned_mask = table.column("_owned")
    edges = table.drop_columns(["_shard", "_owned"])
    return _replay_edges(job, edges.filter(owned_mask), edges.filter(pc.invert(owned_mask)))


def _replay_edges(job: ReplayJob, own: pa.Table, warm: pa.Table | None,
                  threads: int = 1) -> pa.Table:
    """Replay one shard; Spark runs one task per core, so one thread unless told otherwise."""
    return replay_job(job, own, warmup=warm, threads=threads)
