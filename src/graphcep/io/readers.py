"""Read edge files into the edge schema, in chunks, with every bad line accounted for.

:func:`read_edges` reads one file, a list of files, or a directory (its files in name
order). Text files are read as bytes in chunks of ``options.chunk_bytes`` (8 MiB) cut at
newlines and parsed by :func:`graphcep.io.formats.parse_lines`, so memory stays bounded by
the chunk size and the edges themselves; gzip is detected by its magic bytes, whatever
the file name. A line longer than ``options.max_line_bytes`` that does not fit in a chunk
is cut while reading (its tail is never held in memory) and rejected.

Decisions
---------
* ``seq`` is the 1-based physical line number (header and blank lines count), plus
  ``file_index << 40`` for the ``file_index``-th path of the read (0 for the first).
  Edges stay in file order; sort with :func:`graphcep.events.sort_stream`.
* ``ReadResult.skipped`` counts lines that are neither edges nor rejects: blank lines,
  comments and header lines.
* The ``vast`` ``Label`` column is dropped when no line of the whole read had one.
* Format guessing (``fmt=None``): ``.parquet`` -> parquet, ``.jsonl``/``.ndjson`` -> jsonl,
  ``.tsv`` -> tsv, ``.csv`` -> csv unless its first data line has 19 or 20
  comma-separated fields or is a VAST header (then vast), anything else -> snap. A
  ``.gz`` suffix is looked through (``x.csv.gz`` is csv).
"""

from __future__ import annotations

import gzip
import io
import os
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from graphcep.events import EDGE_SCHEMA
from graphcep.io.formats import (
    REJECT_SCHEMA,
    ReaderOptions,
    edge_schema,
    parse_lines,
    parse_table,
    prepare_options,
)

#: Bits of ``seq`` left for the line number; higher bits hold the file index.
FILE_INDEX_SHIFT = 40
_GZIP_MAGIC = b"\x1f\x8b"
_HEAD_LINES = 64

#: Schema of :attr:`ReadResult.rejects`: the parser's rejects plus the file they came from.
READ_REJECT_SCHEMA = pa.schema([pa.field("file", pa.string(), nullable=False), *REJECT_SCHEMA])


@dataclass
class ReadResult:
    """What a read produced.

    Attributes
    ----------
    edges
        Edge table (file order, with ``seq``).
    rejects
        One row per rejected line: ``file``, ``line``, ``reason``, ``text``.
    lines_read
        Physical lines (or Parquet rows) read.
    skipped
        Blank, comment and header lines.
    fmt
        The format used (guessed when not given).
    """

    edges: pa.Table
    rejects: pa.Table
    lines_read: int
    skipped: int
    fmt: str = ""


def expand_paths(paths: str | os.PathLike | list[str | os.PathLike]) -> list[Path]:
    """Paths as a list; a directory stands for its non-hidden files in name order."""
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    out: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            out.extend(
                sorted(
                    p for p in path.iterdir() if p.is_file() and not p.name.startswith((".", "_"))
                )
            )
        else:
            out.append(path)
    if not out:
        raise FileNotFoundError(f"no input files in {paths!r}")
    return out


def _open_binary(path: Path) -> BinaryIO:
    """Open a file for reading bytes, through gzip when it starts with the gzip magic."""
    raw = open(path, "rb")  # noqa: SIM115 -- returned to the caller, who closes it
    magic = raw.read(2)
    raw.seek(0)
    if magic == _GZIP_MAGIC:
        return gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[return-value]
    return raw


def guess_format(path: str | os.PathLike) -> str:
    """Guess a file's format from its name (and, for ``.csv``, its first data line)."""
    path = Path(path)
    fmt = _format_from_name(path)
    if fmt == "csv" and _looks_like_vast(path):
        return "vast"
    return fmt


def _format_from_name(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    if last == ".parquet" or (path.is_dir() and path.name.lower().endswith(".parquet")):
        return "parquet"
    if last in (".jsonl", ".ndjson"):
        return "jsonl"
    if last == ".tsv":
        return "tsv"
    if last == ".csv":
        return "csv"
    return "snap"


def _looks_like_vast(path: Path) -> bool:
    try:
        with _open_binary(path) as fh:
            head = fh.read(64 * 1024).decode("utf-8", "replace").splitlines()
    except OSError:
        return False
    return _first_line_is_vast(head)


def _first_line_is_vast(head: list[str]) -> bool:
    data = [ln for ln in head if ln.strip()]
    if not data:
        return False
    fields = data[0].split(",")
    named = any(f.strip().lower() == "timeseconds" for f in fields[:2])
    return named or len(fields) in (19, 20)


def _split_block(body: bytes, first_line: int) -> tuple[pa.Array, np.ndarray]:
    """Bytes holding whole lines -> (lines without newlines as large_binary, line numbers)."""
    data = np.frombuffer(body, dtype=np.uint8)
    newlines = np.flatnonzero(data == 10)
    ends = newlines if body.endswith(b"\n") else np.append(newlines, len(data))
    n = len(ends)
    starts = np.empty(n, dtype=np.int64)
    if n:
        starts[0] = 0
        starts[1:] = ends[:-1] + 1
    offsets = np.zeros(n + 1, dtype=np.int64)
    np.cumsum(ends - starts, out=offsets[1:])
    # Drop the newline bytes so each line is one contiguous slice of a new buffer.
    content = data[data != 10]
    lines = pa.LargeBinaryArray.from_buffers(
        pa.large_binary(), n, [None, pa.py_buffer(offsets), pa.py_buffer(content)]
    )
    return lines, np.arange(first_line, first_line + n, dtype=np.int64)


def iter_line_blocks(
    stream: BinaryIO, chunk_bytes: int = 8 << 20, max_line_bytes: int = 1 << 20
) -> Iterator[tuple[pa.Array, np.ndarray]]:
    """Yield ``(lines, line_numbers)`` blocks of about ``chunk_bytes`` from a byte stream.

    Lines are cut at ``\\n`` (a ``\\r`` before it stays, the parser drops it). A line that
    grows past ``max_line_bytes`` without a newline is kept as its first
    ``max_line_bytes + 1`` bytes (enough for the parser to reject it as too long) and the
    rest is skipped unread into memory.
    """
    keep = max_line_bytes + 1
    next_line = 1
    carry = b""
    skipping = False
    while block := stream.read(chunk_bytes):
        if skipping:
            cut = block.find(b"\n")
            if cut < 0:
                continue
            block, skipping = block[cut:], False
        buf = carry + block if carry else block
        end = buf.rfind(b"\n")
        body, carry = (b"", buf) if end < 0 else (buf[: end + 1], buf[end + 1 :])
        if len(carry) > keep:
            carry, skipping = carry[:keep], True
        if body:
            lines, numbers = _split_block(body, next_line)
            next_line += len(numbers)
            yield lines, numbers
    if carry:
        yield _split_block(carry, next_line)


def offset_seq(table: pa.Table, file_index: int) -> pa.Table:
    """Add ``file_index << 40`` to ``seq`` so several files have distinct, ordered seqs."""
    if file_index == 0 or table.num_rows == 0:
        return table
    seq = table.column("seq").to_numpy() + (file_index << FILE_INDEX_SHIFT)
    return table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq, pa.int64()))


def _with_file(rejects: pa.Table, name: str) -> pa.Table:
    files = pa.array([name] * rejects.num_rows, pa.string())
    return pa.Table.from_arrays([files, *rejects.columns], schema=READ_REJECT_SCHEMA)


def _read_text_file(path: Path, fmt: str, options: ReaderOptions) -> tuple[list, list, int]:
    """Parse one text file; returns (edge tables, reject tables, lines read)."""
    with _open_binary(path) as fh:
        return _read_text_stream(fh, str(path), fmt, options)


def _read_text_stream(
    fh: BinaryIO, name: str, fmt: str, options: ReaderOptions
) -> tuple[list, list, int]:
    edges: list[pa.Table] = []
    rejects: list[pa.Table] = []
    lines_read = 0
    prepared: ReaderOptions | None = None
    for lines, numbers in iter_line_blocks(fh, options.chunk_bytes, options.max_line_bytes):
        if prepared is None:
            head = lines.slice(0, _HEAD_LINES).to_pylist()
            text = [b[: options.max_line_bytes].decode("utf-8", "replace") for b in head]
            prepared = prepare_options(fmt, text, options)
        good, bad = parse_lines(lines, numbers, fmt, prepared)
        edges.append(good)
        rejects.append(_with_file(bad, name))
        lines_read += len(numbers)
    return edges, rejects, lines_read


def _read_parquet_file(
    path: Path | BinaryIO, options: ReaderOptions, name: str | None = None
) -> tuple[list, list, int]:
    """Parse one Parquet file (or dataset directory) batch by batch."""
    file = pq.ParquetFile(path)
    metadata = file.schema_arrow.metadata or {}
    unit = metadata.get(b"graphcep.time_unit")
    if options.time_unit is None and unit is not None:
        options = replace(options, time_unit=unit.decode())
    edges: list[pa.Table] = []
    rejects: list[pa.Table] = []
    offset = 0
    for batch in file.iter_batches(batch_size=1 << 20):
        good, bad = parse_table(batch, options, row_offset=offset)
        edges.append(good)
        rejects.append(_with_file(bad, name or str(path)))
        offset += batch.num_rows
    return edges, rejects, offset


def read_edges_bytes(
    name: str, data: bytes, fmt: str | None = None, options: ReaderOptions | None = None,
    file_index: int = 0,
) -> ReadResult:
    """Read one file's content held in memory, exactly as :func:`read_edges` reads a file.

    ``name`` is the file's name (for format guessing and the rejects' ``file``);
    ``file_index`` goes into ``seq`` as in :func:`read_edges`. Gzip is detected by its
    magic bytes. Used by the streaming runtime, which receives arriving files as bytes.
    """
    options = options or ReaderOptions()
    fmt = fmt or _guess_format_of_bytes(name, data)
    if fmt == "parquet":
        good, bad, count = _read_parquet_file(io.BytesIO(data), options, name)
    else:
        raw: BinaryIO = io.BytesIO(data)
        if data[:2] == _GZIP_MAGIC:
            raw = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        good, bad, count = _read_text_stream(raw, name, fmt, options)
    edges = _concat_edges([offset_seq(t, file_index) for t in good], fmt)
    rejects = pa.concat_tables(bad) if bad else READ_REJECT_SCHEMA.empty_table()
    return ReadResult(edges, rejects, count, count - edges.num_rows - rejects.num_rows, fmt)


def _guess_format_of_bytes(name: str, data: bytes) -> str:
    """:func:`guess_format` for content in memory (VAST is told from its first line)."""
    fmt = _format_from_name(Path(name))
    if fmt != "csv":
        return fmt
    raw: BinaryIO = io.BytesIO(data)
    if data[:2] == _GZIP_MAGIC:
        raw = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    head = raw.read(64 * 1024)
    return "vast" if _first_line_is_vast(head.decode("utf-8", "replace").splitlines()) else "csv"


def read_edges(
    paths: str | os.PathLike | list[str | os.PathLike],
    fmt: str | None = None,
    options: ReaderOptions | None = None,
) -> ReadResult:
    """Read edge files into one edge table.

    Parameters
    ----------
    paths
        A file, a directory (its files, by name), or a list of them.
    fmt
        ``snap``, ``csv``, ``tsv``, ``vast``, ``netflow5``, ``jsonl`` or ``parquet``;
        ``None`` guesses from the first file's name (see module docstring).
    options
        Reader options (time unit, columns, limits ...).

    Returns
    -------
    ReadResult
        Edges in file order with ``seq`` = line number (+ ``file_index << 40``), rejects,
        and line counts.
    """
    options = options or ReaderOptions()
    files = expand_paths(paths)
    fmt = fmt or guess_format(files[0])
    edge_parts: list[pa.Table] = []
    reject_parts: list[pa.Table] = []
    lines_read = 0
    for index, path in enumerate(files):
        if fmt == "parquet":
            good, bad, count = _read_parquet_file(path, options)
        else:
            good, bad, count = _read_text_file(path, fmt, options)
        edge_parts.extend(offset_seq(t, index) for t in good)
        reject_parts.extend(bad)
        lines_read += count
    edges = _concat_edges(edge_parts, fmt)
    rejects = pa.concat_tables(reject_parts) if reject_parts else READ_REJECT_SCHEMA.empty_table()
    skipped = lines_read - edges.num_rows - rejects.num_rows
    return ReadResult(edges, rejects, lines_read, skipped, fmt)


def _concat_edges(parts: list[pa.Table], fmt: str) -> pa.Table:
    """Join chunk tables; chunks whose attribute sets differ (jsonl) get null-filled."""
    if not parts:
        return (edge_schema(fmt) or EDGE_SCHEMA).empty_table()
    table = pa.concat_tables(parts, promote_options="permissive")
    if (
        fmt == "vast"
        and "Label" in table.column_names
        and table.column("Label").null_count == table.num_rows
    ):
        table = table.drop_columns(["Label"])
    return table.combine_chunks()


__all__ = [
    "FILE_INDEX_SHIFT",
    "READ_REJECT_SCHEMA",
    "ReadResult",
    "expand_paths",
    "guess_format",
    "iter_line_blocks",
    "offset_seq",
    "read_edges",
]
