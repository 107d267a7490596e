"""Reading edge files with Spark: what the local reader reads, row for row.

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
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse
from urllib.request import url2pathname

import numpy as np
import pyarrow as pa

from graphcep.io.formats import (
    InputError,
    ReaderOptions,
    check_columns_format,
    edge_schema,
    parse_lines,
    prepare_options,
)
from graphcep.io.formats.sniff import refuse_packed, shape_of
from graphcep.io.readers import (  # the local reader's own pieces: one reading, two engines
    FILE_INDEX_SHIFT,
    HEAD_LINES,
    expand_paths,
    guess_format,
    iter_line_blocks,
    note_skipped_files,
    nothing_read_message,
    offset_seq,
    open_binary,
    read_text_file,
)
from graphcep.io.rejects import format_hints

#: Name suffixes of Hadoop's codecs: Spark's text source would decompress such a file,
#: where the local reader reads its bytes as they are (it looks through gzip alone, by
#: its magic bytes, whatever the name).
CODEC_SUFFIXES = (".gz", ".bz2", ".deflate", ".lz4", ".snappy", ".zst")


#: Characters Hadoop reads as a path pattern (or a URI scheme) in a file name.
HADOOP_PATTERN_CHARS = frozenset("*?[]{}\\:")


#: Spark's file sources skip files whose names start with these, even when named.
SPARK_HIDDEN_PREFIXES = ("_", ".")


#: Formats the driver reads with the local reader (see :func:`_read_locally`).
DRIVER_READ_FORMATS = ("parquet", "tes", "seq", "syscall", "goflow2-pb")


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

    fmt = fmt or guess_format(expand_paths(paths)[0])
    files = expand_paths(paths, fmt=fmt)
    note_skipped_files(paths, fmt)
    options = options or ReaderOptions()
    check_columns_format(fmt, options)
    if fmt in DRIVER_READ_FORMATS:
        return _read_locally(spark, files, fmt, options)
    split, whole = _split_or_whole(files)
    heads = [_head_lines(f, options) for f in files]
    for path, head in zip(files, heads, strict=True):
        refuse_packed(head, str(path))
    layouts = [prepare_options(fmt, head, options, str(f))
               for f, head in zip(files, heads, strict=True)]
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
    rejects_df = _rejects(parsed, fmt, {plan.names[i]: shape_of(heads[i]) for i in split
                                        if i not in totals["with_edges"]})
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


def _rejects(parsed, fmt: str, without_edges: dict[str, str | None]):
    """The rejects of a read; those of split files that gave no edge get the format hint,
    by the shape of their first lines (``without_edges``: file -> shape; files read whole
    have it from the local reader)."""
    from pyspark.sql import functions as F

    reason = F.col("_reject_reason")
    by_shape: dict[str | None, list[str]] = {}
    for name, shape in without_edges.items():
        by_shape.setdefault(shape, []).append(name)
    for shape, names in by_shape.items():
        cases, plain = format_hints(fmt, shape)
        hint = F.lit(plain)
        for pattern, text in reversed(cases):
            hint = F.when(reason.rlike(pattern), F.lit(text)).otherwise(hint)
        needs_hint = ~F.col(WHOLE) & F.col("_reject_file").isin(names)
        reason = F.when(needs_hint, F.concat(reason, hint)).otherwise(reason)
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
    """Consecutive runs of rows from the same (file, block), in row order (found column by
    column: a batch holds hundreds of thousands of lines, and a run thousands)."""
    if not table.num_rows:
        return
    files = table.column("file").combine_chunks().dictionary_encode()
    file_ids = files.indices.to_numpy(zero_copy_only=False)
    blocks = table.column("block").to_numpy()
    change = (file_ids[1:] != file_ids[:-1]) | (blocks[1:] != blocks[:-1])
    starts = np.concatenate([[0], np.flatnonzero(change) + 1, [table.num_rows]])
    names = files.dictionary.to_pylist()
    for start, stop in zip(starts[:-1], starts[1:], strict=True):
        key = (names[file_ids[start]], int(blocks[start]))
        yield key, table.slice(int(start), int(stop - start))


def _read_locally(spark, files, fmt: str, options: ReaderOptions):
    """Parquet, time-event sequences, plain sequences and system-call traces are read by
    the local reader (row numbers, times and positions that run on from a sequence's start must be global)
    and handed to Spark as an Arrow table."""
    from graphcep.io.readers import read_edges

    result = read_edges(files, fmt, options)
    edges_df = spark.createDataFrame(result.edges)
    rejects_df = spark.createDataFrame(result.rejects) if result.rejects.num_rows else (
        spark.createDataFrame([], "file string, line long, reason string, text string"))
    return edges_df, rejects_df, result.lines_read
