"""Read edge files into the edge schema, in chunks, with every bad line accounted for.

:func:`read_edges` reads one file, a list of files, or a directory (its files in name
order; notes such as ``SOURCE.md`` and files named for another format are left out,
:func:`list_inputs`). Text files are read as bytes in chunks of ``options.chunk_bytes`` (8 MiB) cut at
newlines and parsed by :func:`graphcep.io.formats.parse_lines`, so memory stays bounded by
the chunk size and the edges themselves; gzip is detected by its magic bytes, whatever
the file name. A line longer than ``options.max_line_bytes`` that does not fit in a chunk
is cut while reading (its tail is never held in memory) and rejected with its true length.
Lines are as :mod:`graphcep.io.formats` defines them (``\\n`` or ``\\r\\n`` ends one).
A UTF-8 byte order mark at the start of a file is dropped (elsewhere it is text).

Decisions
---------
* ``seq`` is the 1-based physical line number (header and blank lines count), plus
  ``file_index << 40`` for the ``file_index``-th path of the read (0 for the first).
  Edges stay in file order; sort with :func:`graphcep.events.sort_stream`.
* ``ReadResult.skipped`` counts lines that are neither edges nor rejects: blank lines,
  comments and header lines.
* The ``vast`` ``Label`` column is dropped when no line of the whole read had one.
* Format guessing (``fmt=None``): ``.parquet`` -> parquet, ``.jsonl``/``.ndjson`` -> jsonl,
  ``.tsv`` -> tsv, ``.vast`` -> vast, ``.tes`` -> tes, ``.seq`` -> seq, ``.syscall`` ->
  syscall, ``.csv`` -> csv unless its first data line has 19 or
  20 comma-separated fields or is a VAST header (then vast), anything else -> snap. A
  ``.gz`` suffix is looked through (``x.csv.gz`` is csv). When no line of a text file
  gives an edge, its reject reasons end with a hint to check ``--format``
  (:func:`graphcep.io.rejects.add_format_hint`).
* A damaged file (a truncated or corrupt gzip, a read error, a damaged Parquet page)
  keeps the edges and rejects of everything read before the damage; the damage is one
  more reject (``line`` = the last whole line + 1, reason ``"damaged gzip: unexpected
  end of data after line N"``, text = the start of the unfinished line, which is never
  parsed: it may have lost digits) and counts as one line read. The run goes on with the
  next file. A file that cannot be opened (permissions) is reported the same way, after
  line 0; a missing file raises :class:`FileNotFoundError`.
* :func:`read_edges` raises :class:`InputError` (a :class:`ValueError`) when nothing at
  all could be read -- every line counted was a damage record -- and for a file that is
  not Parquet; :class:`SchemaError` (an :class:`InputError`) for a Parquet file whose
  columns cannot hold edges. Their messages name the file; the command line prints them
  in one line and exits with status 2. :func:`read_edges_bytes` never raises for damage:
  a stream quarantines such a file through its rejects.
"""

from __future__ import annotations

import gzip
import io
import os
import warnings
import zlib
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import BinaryIO

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from graphcep.cores import usable_cores
from graphcep.events import EDGE_SCHEMA, US_PER_SECOND, concat_edges, counted_noun
from graphcep.io.formats import (
    RECORD_FORMATS,
    REJECT_TEXT_CHARS,
    InputError,
    ReaderOptions,
    SchemaError,
    check_columns_format,
    check_core_columns,
    core_columns,
    edge_schema,
    parse_lines,
    parse_table,
    prepare_options,
    too_long_reason,
)
from graphcep.io.formats.schema import InputNote
from graphcep.io.formats.sniff import is_flow_messages, is_vast_line, refuse_packed, shape_of
from graphcep.io.formats.times import EPOCH_SPAN, SECONDS_PER_TICK, implausible_time_unit
from graphcep.io.rejects import add_format_hint
from graphcep.io.seq import parse_seq
from graphcep.io.syscall import parse_syscall
from graphcep.io.tes import parse_tes
from graphcep.io.token_text import FILE_REJECT_SCHEMA
from graphcep.text_encoding import UTF8_BOM, wide_encoding

#: Bits of ``seq`` left for the line number; higher bits hold the file index.
FILE_INDEX_SHIFT = 40
_GZIP_MAGIC = b"\x1f\x8b"
#: Lines read from a file's start to decide its layout (header, field count, format).
HEAD_LINES = 64

#: Schema of :attr:`ReadResult.rejects`: the parser's rejects plus the file they came from.
READ_REJECT_SCHEMA = FILE_REJECT_SCHEMA
#: What reading a damaged byte stream raises: a truncated gzip (``EOFError``), a corrupt
#: one (``zlib.error``, ``gzip.BadGzipFile``), a failing disk (``OSError``).
_DAMAGE_ERRORS = (EOFError, OSError, zlib.error)


class DamagedInputError(InputError):
    """A byte stream broke off after ``after_line`` whole lines.

    Attributes
    ----------
    after_line
        Whole lines read before the damage (their edges and rejects stand).
    partial
        The start of the unfinished line that was being read (lossy text), or ``""``.
    """

    def __init__(self, reason: str, after_line: int, partial: str = "") -> None:
        super().__init__(reason)
        self.after_line = after_line
        self.partial = partial


class _Broken(Exception):
    """Internal: a read failed; ``tail`` holds the bytes read before the failure."""

    def __init__(self, tail: bytes, error: BaseException) -> None:
        super().__init__(str(error))
        self.tail = tail
        self.error = error


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
    damaged
        The file broke off (a truncated gzip, a damaged Parquet file, a read error): its
        last reject says where and why, the edges before the damage stand.
    """

    edges: pa.Table
    rejects: pa.Table
    lines_read: int
    skipped: int
    fmt: str = ""
    damaged: bool = False


#: Name suffixes (``.gz`` looked through) of files a directory holds beside its data:
#: notes, licences, pictures, code, checksums, queries. They are never read as edges.
#: (Archives and other compressions are not among them: they may hold data, and reading
#: one says what is wrong with it.)
NOTE_SUFFIXES = frozenset({
    ".md", ".markdown", ".rst", ".html", ".htm", ".pdf", ".doc", ".docx", ".json", ".yaml",
    ".yml", ".toml", ".ini", ".cfg", ".py", ".ipynb", ".sh", ".png", ".jpg", ".jpeg",
    ".gif", ".svg", ".crc", ".log", ".sal", ".nu", ".ddst", ".subs", ".sql", ".xml",
    ".md5", ".sha1", ".sha256", ".sha512", ".asc", ".sig",
})
#: Suffixes among :data:`NOTE_SUFFIXES` that a format's data often has (JSON lines named
#: ``.json``, system-call traces ``.log``).
_DATA_SUFFIXES = {"jsonl": (".json",), "syscall": (".log",)}
#: File names (before any suffix, any case) of notes: ``README``, ``LICENSE.txt``.
NOTE_NAMES = ("readme", "source", "license", "licence", "notice", "copying", "authors", "notes",
              "changelog", "changes", "citation", "manifest", "md5sums", "sha256sums")
#: Formats a ``.csv`` name may hold (VAST and NetFlow v5 files are comma-separated).
_CSV_FAMILY = ("csv", "vast", "netflow5")


def holds_data(path: Path, fmt: str | None = None) -> bool:
    """Whether a file found in a directory is read as input: not a note (its suffix in
    :data:`NOTE_SUFFIXES`; or no suffix but ``.txt`` and a name of :data:`NOTE_NAMES`), and, with
    ``fmt`` given, not named as a file of another format (a ``.parquet`` among CSV files).
    Names without a format of their own (``.txt``, ``.dat``, none) hold data of any text
    format, as SNAP's do."""
    suffixes = [x.lower() for x in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    note = last in NOTE_SUFFIXES and last not in _DATA_SUFFIXES.get(fmt or "", ())
    named_note = last in ("", ".txt") and path.name.lower().split(".")[0] in NOTE_NAMES
    if note or named_note:
        return False
    named = _format_from_name(path) if suffixes else "snap"
    if fmt is None or named in (fmt, "snap"):  # "snap": a name that says no format
        return fmt != "parquet" or named == "parquet"
    return named == "csv" and fmt in _CSV_FAMILY


def list_inputs(paths: str | os.PathLike | list[str | os.PathLike],
                fmt: str | None = None) -> tuple[list[Path], list[Path]]:
    """The files to read and the entries of the directories among ``paths`` left out:
    files that hold no data (:func:`holds_data`) and subdirectories, which are not read
    (hidden ones, ``.x`` and ``_x``, are not listed at all). A file named itself is
    always read."""
    items = [paths] if isinstance(paths, str | os.PathLike) else list(paths)
    out: list[Path] = []
    skipped: list[Path] = []
    for item in items:
        path = Path(item)
        if path.is_dir():
            for found in sorted(p for p in path.iterdir()
                                if not p.name.startswith((".", "_"))):
                if found.is_dir():
                    skipped.append(found)
                elif found.is_file():
                    (out if holds_data(found, fmt) else skipped).append(found)
        else:
            out.append(path)
    return out, skipped


def note_skipped_files(paths: str | os.PathLike | list[str | os.PathLike], fmt: str) -> None:
    """One :class:`~graphcep.io.formats.schema.InputNote` naming the files of the input
    directories left out as no data for ``fmt`` (:func:`list_inputs`), if any."""
    _, skipped = list_inputs(paths, fmt)
    files = [p for p in skipped if not p.is_dir()]
    if files:
        names = ", ".join(str(p) for p in files[:5])
        more = f" and {len(files) - 5} more" if len(files) > 5 else ""
        warnings.warn(InputNote(f"skipped {counted_noun(len(files), 'file')} of the input "
                                f"directories, which hold no {fmt} data: {names}{more}"),
                      stacklevel=2)
    if folders := [p for p in skipped if p.is_dir()]:
        names = ", ".join(f"{p}/" for p in folders[:5])
        more = f" and {len(folders) - 5} more" if len(folders) > 5 else ""
        warnings.warn(InputNote(f"skipped {counted_noun(len(folders), 'subdirectory', 'subdirectories')} of "
                                f"the input directories (subdirectories are not read; pass "
                                f"them as inputs): {names}{more}"), stacklevel=2)


def expand_paths(paths: str | os.PathLike | list[str | os.PathLike], *,
                 once: bool = True, fmt: str | None = None) -> list[Path]:
    """Paths as a list; a directory stands for its files that hold data (for ``fmt``, if
    given; see :func:`list_inputs`) in name order.

    Raises
    ------
    InputError
        With ``once``, a file given twice (itself twice, or itself and its directory):
        its edges would be read twice, each match of them found twice.
    """
    out, skipped = list_inputs(paths, fmt)
    if not out:
        listed = ", ".join(p.name + ("/" if p.is_dir() else "") for p in skipped)
        extra = (f" (only {listed}: notes, files of another format and subdirectories are "
                 "not read)" if skipped else "")
        raise FileNotFoundError(f"no input files in {paths!r}{extra}")
    seen: dict[Path, Path] = {}
    for path in out if once else ():
        if (first := seen.setdefault(path.resolve(), path)) is not path:
            twice = f"'{path}'" if str(first) == str(path) else f"'{first}' and '{path}'"
            raise InputError(f"{twice}: the same file given twice among the inputs (its "
                             "edges would be read twice)")
    return out


def open_binary(path: Path) -> BinaryIO:
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


def guess_format_of_name(name: str) -> str:
    """The format a file's name gives (``csv`` for a name that gives none: VAST is told
    from the content, :func:`read_edges_bytes`)."""
    return _format_from_name(Path(name))


def _format_from_name(path: Path) -> str:
    suffixes = [s.lower() for s in path.suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    if last == ".parquet" or (path.is_dir() and path.name.lower().endswith(".parquet")):
        return "parquet"
    if last in (".jsonl", ".ndjson"):
        return "jsonl"
    if last == ".vast":
        return "vast"
    if last == ".tsv":
        return "tsv"
    if last == ".tes":
        return "tes"
    if last == ".seq":
        return "seq"
    if last == ".syscall":
        return "syscall"
    if last == ".csv":
        return "csv"
    return "snap"


def _looks_like_vast(path: Path) -> bool:
    try:
        with open_binary(path) as fh:
            return _first_line_is_vast(_head_text(fh))
    except OSError:
        return False


def _head_text(stream: BinaryIO, size: int = 64 * 1024) -> list[str]:
    """The first lines of a stream, as far as it can be read (a damaged one is read by
    :func:`read_edges`, which reports the damage)."""
    try:
        data = next(_byte_blocks(stream, size), b"")
    except _Broken as broken:
        data = broken.tail
    return data.removeprefix(UTF8_BOM).decode("utf-8", "replace").split("\n")


def _first_line_is_vast(head: list[str]) -> bool:
    data = [ln for ln in head if ln.strip()]
    return bool(data) and is_vast_line(data[0])


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


def _byte_blocks(stream: BinaryIO, size: int) -> Iterator[bytes]:
    """Blocks of up to ``size`` bytes; a failing read raises :class:`_Broken` carrying what
    was read before it (``read1`` makes one underlying read at a time, so a truncated gzip
    gives up everything it could decompress)."""
    read = getattr(stream, "read1", stream.read)
    while True:
        parts: list[bytes] = []
        held = 0
        try:
            while held < size and (piece := read(size - held)):
                parts.append(piece)
                held += len(piece)
        except _DAMAGE_ERRORS as exc:
            raise _Broken(b"".join(parts), exc) from exc
        if parts:
            yield b"".join(parts)
        if held < size:
            return


@dataclass
class _LineCutter:
    """Cuts byte blocks into whole lines, numbering them; keeps the unfinished last line
    (``carry``) for the next block and cuts one over ``max_line_bytes`` while reading,
    remembering its true length."""

    max_line_bytes: int
    next_line: int = 1
    carry: bytes = b""
    skipping: bool = False
    cut_length: int | None = None  #: true length of the carried line once it was cut
    lengths: dict[int, int] = field(default_factory=dict)  #: cut line -> true length
    started: bool = False

    def feed(self, block: bytes) -> tuple[pa.Array, np.ndarray] | None:
        if not self.started and block:
            # A UTF-8 byte order mark opening the file is no part of line 1.
            self.started, block = True, block.removeprefix(UTF8_BOM)
        if self.skipping:
            cut = block.find(b"\n")
            if cut < 0:
                self.cut_length = (self.cut_length or 0) + len(block)
                return None
            self.cut_length = (self.cut_length or 0) + cut
            block, self.skipping = block[cut:], False
        buf = self.carry + block if self.carry else block
        end = buf.rfind(b"\n")
        body, self.carry = (b"", buf) if end < 0 else (buf[: end + 1], buf[end + 1 :])
        out = self._emit(body) if body else None
        if len(self.carry) > self.max_line_bytes + 1:
            self.cut_length = len(self.carry)
            self.carry, self.skipping = self.carry[: self.max_line_bytes + 1], True
        return out

    def finish(self) -> tuple[pa.Array, np.ndarray] | None:
        carry, self.carry = self.carry, b""
        return self._emit(carry) if carry else None

    def _emit(self, body: bytes) -> tuple[pa.Array, np.ndarray]:
        if self.cut_length is not None:  # the cut line is the first one of this body
            self.lengths[self.next_line] = self.cut_length
            self.cut_length = None
        lines, numbers = _split_block(body, self.next_line)
        self.next_line += len(numbers)
        return lines, numbers


def _line_blocks(
    stream: BinaryIO, chunk_bytes: int, cutter: _LineCutter
) -> Iterator[tuple[pa.Array, np.ndarray]]:
    """:func:`iter_line_blocks` with its state in ``cutter`` (cut lines' true lengths)."""
    try:
        for block in _byte_blocks(stream, chunk_bytes):
            if (out := cutter.feed(block)) is not None:
                yield out
    except _Broken as broken:
        if (out := cutter.feed(broken.tail)) is not None:
            yield out
        after = cutter.next_line - 1
        partial = cutter.carry[: REJECT_TEXT_CHARS * 4].decode("utf-8", "backslashreplace")
        reason = _damage_reason(stream, broken.error, after)
        raise DamagedInputError(reason, after, partial[:REJECT_TEXT_CHARS]) from broken.error
    if (out := cutter.finish()) is not None:
        yield out


def _damage_reason(stream: BinaryIO, error: BaseException, after_line: int) -> str:
    what = "damaged gzip" if isinstance(stream, gzip.GzipFile) else "read error"
    if isinstance(error, EOFError):
        detail = "unexpected end of data"
    elif isinstance(error, zlib.error):
        detail = f"corrupt compressed data ({error})"
    else:
        detail = str(error) or type(error).__name__
    return f"{what}: {detail} after line {after_line}"


def iter_line_blocks(
    stream: BinaryIO, chunk_bytes: int = 8 << 20, max_line_bytes: int = 1 << 20
) -> Iterator[tuple[pa.Array, np.ndarray]]:
    """Yield ``(lines, line_numbers)`` blocks of about ``chunk_bytes`` from a byte stream.

    Lines are cut at ``\\n`` (a ``\\r`` before it stays, the parser drops it). A line that
    grows past ``max_line_bytes`` without a newline is kept as its first
    ``max_line_bytes + 1`` bytes (enough for the parser to reject it as too long) and the
    rest is skipped unread into memory.

    Raises
    ------
    DamagedInputError
        When a read fails (truncated or corrupt gzip, I/O error), after yielding every
        whole line read before; the unfinished line is not yielded.
    """
    cutter = _LineCutter(max_line_bytes)
    yield from _line_blocks(stream, chunk_bytes, cutter)


def offset_seq(table: pa.Table, file_index: int) -> pa.Table:
    """Add ``file_index << 40`` to ``seq`` so several files have distinct, ordered seqs."""
    if file_index == 0 or table.num_rows == 0:
        return table
    seq = table.column("seq").to_numpy() + (file_index << FILE_INDEX_SHIFT)
    return table.set_column(table.schema.get_field_index("seq"), "seq", pa.array(seq, pa.int64()))


def _with_file(rejects: pa.Table, name: str) -> pa.Table:
    files = pa.array([name] * rejects.num_rows, pa.string())
    return pa.Table.from_arrays([files, *rejects.columns], schema=READ_REJECT_SCHEMA)


@dataclass
class FileRead:
    """What reading one file gave: edge and reject tables, lines read (a damaged file's
    break counts as one, with its reject row last), whether it broke off, and its blank
    and comment lines where a line may hold many edges (None: lines that are neither
    edges nor rejects)."""

    edges: list[pa.Table]
    rejects: list[pa.Table]
    lines: int
    damaged: bool = False
    skipped: int | None = None


def _damage_rejects(name: str, damage: DamagedInputError) -> pa.Table:
    """The one reject row recording where a file broke off."""
    row = {
        "file": [name],
        "line": [damage.after_line + 1],
        "reason": [str(damage)],
        "text": [damage.partial],
    }
    return pa.table(row, schema=READ_REJECT_SCHEMA)


def read_text_file(path: Path, fmt: str, options: ReaderOptions) -> FileRead:
    """Parse one text file (see :func:`_read_text_stream`); a file that cannot be opened
    is one reject, as a damaged one."""
    fh = _opened(path)
    if isinstance(fh, FileRead):
        return fh
    with fh:
        return _read_text_stream(fh, str(path), fmt, options)


def _read_text_stream(fh: BinaryIO, name: str, fmt: str, options: ReaderOptions) -> FileRead:
    """Parse a byte stream. A damaged stream keeps what was read before the damage and
    adds one reject for it, counted as one line read. When no line of the stream gives
    an edge, its rejects get a hint to check the format."""
    edges: list[pa.Table] = []
    rejects: list[pa.Table] = []
    lines_read = 0
    prepared: ReaderOptions | None = None
    head: list[bytes] = []
    head_text: list[str] = []
    cutter = _LineCutter(options.max_line_bytes)
    blocks = _line_blocks(fh, options.chunk_bytes, cutter)
    damage: DamagedInputError | None = None
    try:
        for lines, numbers in blocks:
            if prepared is None:
                head = lines.slice(0, HEAD_LINES).to_pylist()
                head_text = [b[: options.max_line_bytes].decode("utf-8", "replace")
                             for b in head]
                refuse_packed(head_text, name)
                prepared = prepare_options(fmt, head_text, options, name)
            good, bad = parse_lines(lines, numbers, fmt, prepared)
            edges.append(good)
            rejects.append(_with_file(_true_lengths(bad, cutter, options), name))
            lines_read += len(numbers)
    except DamagedInputError as exc:
        damage = exc
    if not any(t.num_rows for t in edges):
        shape = shape_of(head_text)
        if shape is None and head and is_flow_messages(b"\n".join(head)):
            shape = "goflow2-pb"
        rejects = [add_format_hint(t, fmt, shape) for t in rejects]
    if damage is not None:
        rejects.append(_damage_rejects(name, damage))
        lines_read += 1
    return FileRead(edges, rejects, lines_read, damaged=damage is not None)


def read_record_file(path: Path, options: ReaderOptions) -> FileRead:
    """One file of goflow2 protobuf messages (:func:`_read_record_stream`); a file that
    cannot be opened is one reject, as a damaged one."""
    fh = _opened(path)
    if isinstance(fh, FileRead):
        return fh
    with fh:
        return _read_record_stream(fh, str(path), options)


def _opened(path: Path) -> BinaryIO | FileRead:
    """``path`` opened (through gzip when it is gzip), or, when it cannot be read
    (permissions ...), a :class:`FileRead` of one reject saying why, as for a damaged
    file; a missing file or a directory raises."""
    try:
        return open_binary(path)
    except (FileNotFoundError, IsADirectoryError):
        raise
    except OSError as exc:
        damage = DamagedInputError(f"cannot read the file: {exc.strerror or exc}", 0)
        return FileRead([], [_damage_rejects(str(path), damage)], 1, damaged=True)


def _read_record_stream(fh: BinaryIO, name: str, options: ReaderOptions) -> FileRead:
    """goflow2's length-prefixed protobuf messages (``-format bin``), in blocks of
    ``options.chunk_bytes``; a message is a "line" (its number is its ``seq`` and its
    reject's line). A damaged stream keeps the messages read before the damage."""
    from graphcep.io.formats.flow_pb import FrameReader  # numba: loaded when read

    frames = FrameReader()
    edges: list[pa.Table] = []
    rejects: list[pa.Table] = []
    damaged = False
    head = b""
    try:
        for block in _byte_blocks(fh, options.chunk_bytes):
            head = head or block[: 64 * 1024]
            if (out := frames.feed(block)) is not None:
                edges.append(out[0])
                rejects.append(_with_file(out[1], name))
    except _Broken as broken:
        if (out := frames.feed(broken.tail)) is not None:
            edges.append(out[0])
            rejects.append(_with_file(out[1], name))
        reason = _damage_reason(fh, broken.error, frames.number - 1).replace("line", "message")
        rejects.append(_damage_rejects(name, DamagedInputError(reason, frames.number - 1)))
        damaged = True
    if not damaged and (out := frames.finish()) is not None:
        edges.append(out[0])
        rejects.append(_with_file(out[1], name))
    # bytes that are no message, or the damage, count as one more "line"
    lines = frames.number - 1 + frames.leftover + int(damaged)
    if not any(t.num_rows for t in edges):
        text = head.removeprefix(UTF8_BOM).decode("utf-8", "replace").split("\n")
        shape = shape_of(text[:HEAD_LINES])
        rejects = [add_format_hint(t, "goflow2-pb", shape) for t in rejects]
    return FileRead(edges, rejects, lines, damaged=damaged)


def _true_lengths(bad: pa.Table, cutter: _LineCutter, options: ReaderOptions) -> pa.Table:
    """Reasons of lines cut while reading give their true length, not the cut one."""
    if not cutter.lengths or bad.num_rows == 0:
        return bad
    lines = bad.column("line").to_pylist()
    reasons = bad.column("reason").to_pylist()
    fixed = [
        too_long_reason(cutter.lengths[line], options.max_line_bytes)
        if line in cutter.lengths
        else reason
        for line, reason in zip(lines, reasons, strict=True)
    ]
    return bad.set_column(bad.schema.get_field_index("reason"), "reason", pa.array(fixed))


def decode_whole(data: bytes, name: str) -> str:
    """A whole file's bytes as text, invalid UTF-8 as U+FFFD; a UTF-16 or UTF-32 byte
    order mark opening it is an :class:`InputError` naming the file (every character
    of such a text would hold a NUL)."""
    wide = wide_encoding(data)
    if wide is not None:
        encoding, bom = wide
        raise InputError(f"{name}: {encoding} text (it opens with the byte order mark "
                         f"{bom.hex(' ').upper()}): graphcep reads UTF-8; save it as UTF-8")
    return data.decode("utf-8", errors="replace")


def read_whole_file(path: Path, fmt: str, symbols: int = 0, after: int = 0) -> FileRead:
    """One file of a format read whole (:func:`parse_whole`), through gzip when it is
    gzip. A damaged one (a truncated gzip) keeps its lines before the damage, plus one
    reject for it, as a line format does; a file that cannot be opened is one reject."""
    fh = _opened(path)
    if isinstance(fh, FileRead):
        return fh
    with fh:
        return _parse_whole_stream(fh, str(path), fmt, symbols, after)


def _parse_whole_stream(stream: BinaryIO, name: str, fmt: str, symbols: int,
                        after: int) -> FileRead:
    """:func:`parse_whole` over a byte stream's whole lines up to any damage, which is one
    more reject (the unfinished line after it is never parsed: it may have lost symbols)."""
    try:
        data, error = b"".join(_byte_blocks(stream, 8 << 20)), None
    except _Broken as broken:
        data, error = broken.tail, broken.error
    damage = None
    if error is not None:
        end = data.rfind(b"\n") + 1
        data, partial = data[:end], data[end:]
        after_line = data.count(b"\n")
        damage = DamagedInputError(
            _damage_reason(stream, error, after_line), after_line,
            partial[: REJECT_TEXT_CHARS * 4].decode("utf-8", "backslashreplace")[:REJECT_TEXT_CHARS])
    read = parse_whole(decode_whole(data, name), name, fmt, symbols, after)
    if damage is None:
        return read
    return FileRead(read.edges, [*read.rejects, _damage_rejects(name, damage)], read.lines + 1,
                    skipped=read.skipped, damaged=True)


#: Formats read whole, a file at a time (:func:`parse_whole`).
WHOLE_FILE_FORMATS = ("tes", "seq", "syscall")


def parse_whole(text: str, name: str, fmt: str, symbols: int = 0, after: int = 0) -> FileRead:
    """One file of a format read whole: a time-event sequence (:mod:`graphcep.io.tes`), a
    plain sequence (:mod:`graphcep.io.seq`) or a system-call trace
    (:mod:`graphcep.io.syscall`). A sequence's positions and a trace's times run on from
    the files before it: its first symbol is the ``symbols``-th of the read, its calls
    come after second ``after`` (the last call before it)."""
    if fmt == "tes":
        edges, rejects, lines = parse_tes(text, name)
        return FileRead([edges], [rejects], lines)
    read = parse_seq(text, name, symbols) if fmt == "seq" else parse_syscall(text, name, after)
    return FileRead([read.edges], [read.rejects], read.lines, skipped=read.skipped)


def last_second(parts: list[pa.Table]) -> int:
    """The second of the last call of the traces read (0: none), where the next file's
    calls start (:func:`parse_whole`)."""
    return max((t.column("t")[-1].as_py() // US_PER_SECOND for t in parts if t.num_rows),
               default=0)


def _read_parquet_file(
    path: Path | BinaryIO, options: ReaderOptions, name: str | None = None
) -> FileRead:
    """Parse one Parquet file batch by batch. A file that is not Parquet (no footer: also a
    truncated one) is one reject naming why, as a damaged text file is: among other files
    the rest is read, alone it is "nothing could be read" (:func:`read_edges`).

    Raises
    ------
    SchemaError
        A core column missing or of the wrong type; the message names the file.
    """
    name = name or str(path)
    try:
        file = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as exc:
        damage = DamagedInputError(f"not a Parquet file, or a damaged one ({exc})", 0)
        return FileRead([], [_damage_rejects(name, damage)], 1, damaged=True)
    metadata = file.schema_arrow.metadata or {}
    unit = metadata.get(b"graphcep.time_unit")
    if options.time_unit is None and unit is not None:
        options = replace(options, time_unit=unit.decode())
    try:
        check_core_columns(file.schema_arrow, options)  # naming every column of the file
        columns, options = parquet_projection(file.schema_arrow, options)
    except SchemaError as exc:
        raise SchemaError(f"{name}: {exc}") from None
    batches = file.iter_batches(batch_size=PARQUET_BATCH_ROWS, columns=columns)
    parsed: list[tuple[Future, int]] = []  # each batch's parse and its first row
    offset, damage = 0, None
    times = _IntegerTimes.of(file.schema_arrow, options)
    # batches are decoded in order (Arrow's own threads) and parsed in threads of ours as
    # they come: the parsing is Arrow compute, which releases the GIL
    with ThreadPoolExecutor(usable_cores()) as pool:
        while True:
            try:
                batch = next(batches, None)
            except (pa.ArrowException, OSError) as exc:  # a damaged page: keep what was read
                damage = DamagedInputError(f"damaged Parquet: {exc} after row {offset}", offset)
                break
            if batch is None:
                break
            parsed.append((pool.submit(parse_table, batch, options, row_offset=offset), offset))
            offset += batch.num_rows
            if times is not None:
                times.add(batch)
    if times is not None and (message := times.implausible()) is not None:
        raise InputError(f"{name}: {message}")
    if times is not None and b"pandas" in metadata and (note := times.unlabelled()):
        warnings.warn(InputNote(f"{name}: {note}"), stacklevel=2)
    edges: list[pa.Table] = []
    rejects: list[pa.Table] = []
    for index, (parsing, first_row) in enumerate(parsed):
        try:
            good, bad = parsing.result()
            if columns is not None and bad.num_rows:  # a reject shows its whole row
                _, bad = parse_table(_whole_batch(path, index), options, first_row)
        except SchemaError as exc:
            raise SchemaError(f"{name}: {exc}") from None
        edges.append(good)
        rejects.append(_with_file(bad, name))
    if damage is not None:
        rejects.append(_damage_rejects(name, damage))
        return FileRead(edges, rejects, offset + 1, damaged=True)
    return FileRead(edges, rejects, offset)


@dataclass
class _IntegerTimes:
    """The range of a Parquet file's integer time column read in an assumed unit (no
    ``--time-unit``, no ``graphcep.time_unit`` metadata), checked once the file is read
    (:func:`~graphcep.io.formats.times.implausible_time_unit`): a pandas frame's integer
    seconds in a column ``t`` would otherwise be read as microseconds."""

    column: str
    unit: str
    low: int | None = None
    high: int | None = None

    @classmethod
    def of(cls, schema: pa.Schema, options: ReaderOptions) -> _IntegerTimes | None:
        if options.time_unit is not None:
            return None
        column = core_columns(schema, options).get("t")
        if column is None or not pa.types.is_integer(schema.field(column).type):
            return None
        return cls(column, "us" if column == "t" else "s")  # as parse_table reads it

    def add(self, batch: pa.RecordBatch) -> None:
        bounds = pc.min_max(batch.column(self.column))
        low, high = bounds["min"].as_py(), bounds["max"].as_py()
        if low is not None:  # not all null
            self.low = low if self.low is None else min(self.low, low)
            self.high = high if self.high is None else max(self.high, high)

    def implausible(self) -> str | None:
        if self.low is None or self.high is None:
            return None
        return implausible_time_unit(np.array([self.low, self.high], np.int64), self.unit)

    def unlabelled(self) -> str | None:
        """What to say of times read in a unit nothing names, when they are no epoch
        times in it (relative times: pandas' integer seconds from 0 read as microseconds
        would match as if the stream lasted seconds, and nothing in the numbers tells).
        Said of files pandas wrote (their ``pandas`` metadata): a frame's integer column
        is far more often seconds than microseconds."""
        if self.low is None or self.high is None or self.unit != "us":
            return None
        per = SECONDS_PER_TICK[self.unit]
        if EPOCH_SPAN[0] <= self.low * per and self.high * per < EPOCH_SPAN[1]:
            return None
        return (f"the integer times of column {self.column!r} carry no unit and are read as "
                "microseconds (graphcep's own Parquet unit): pass --time-unit s or ms if "
                "they count seconds or milliseconds")


#: Rows per batch of a Parquet read.
PARQUET_BATCH_ROWS = 1 << 20


def parquet_projection(
    schema: pa.Schema, options: ReaderOptions
) -> tuple[list[str] | None, ReaderOptions]:
    """The columns of a Parquet file to read, or None for all: with ``options.attributes``
    given, the core columns, ``seq`` and those attributes only (the file's other columns
    are never decoded). Core columns named by index are named by name in the options
    returned, as the projection renumbers them."""
    if options.attributes is None:
        return None, options
    core = core_columns(schema, options)
    wanted = {*core.values(), "seq", *options.attributes}
    return [n for n in schema.names if n in wanted], replace(options, columns=core or None)


def _whole_batch(path: Path | BinaryIO, index: int) -> pa.Table:
    """The ``index``-th batch of a Parquet file with every column (rejected rows are shown
    whole, whatever the read projected)."""
    if not isinstance(path, Path | str):
        path.seek(0)
    for i, batch in enumerate(pq.ParquetFile(path).iter_batches(batch_size=PARQUET_BATCH_ROWS)):
        if i == index:
            return pa.Table.from_batches([batch])
    raise InputError(f"{path}: batch {index} vanished while it was read")


def read_edges_bytes(
    name: str,
    data: bytes,
    fmt: str | None = None,
    options: ReaderOptions | None = None,
    file_index: int = 0,
    symbols: int = 0,
    after: int = 0,
) -> ReadResult:
    """Read one file's content held in memory, exactly as :func:`read_edges` reads a file.

    ``name`` is the file's name (for format guessing and the rejects' ``file``);
    ``file_index`` goes into ``seq`` as in :func:`read_edges`; a plain sequence's first
    symbol is the ``symbols``-th of the read, a trace's calls come after second ``after``
    (:func:`parse_whole`). Gzip is detected by its magic bytes. Used by the streaming
    runtime, which receives arriving files as bytes.
    """
    options = options or ReaderOptions()
    fmt = fmt or _guess_format_of_bytes(name, data)
    if fmt == "parquet":
        read = _read_parquet_file(io.BytesIO(data), options, name)
    elif fmt in WHOLE_FILE_FORMATS:
        stream: BinaryIO = io.BytesIO(data)
        if data[:2] == _GZIP_MAGIC:
            stream = gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[assignment]
        read = _parse_whole_stream(stream, name, fmt, symbols, after)
    elif fmt in RECORD_FORMATS:
        record_stream: BinaryIO = io.BytesIO(data)
        if data[:2] == _GZIP_MAGIC:
            record_stream = gzip.GzipFile(fileobj=record_stream, mode="rb")  # type: ignore[assignment]
        read = _read_record_stream(record_stream, name, options)
    else:
        raw: BinaryIO = io.BytesIO(data)
        if data[:2] == _GZIP_MAGIC:
            raw = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
        read = _read_text_stream(raw, name, fmt, options)
    edges = _concat_edges([offset_seq(t, file_index) for t in read.edges], fmt)
    rejects = pa.concat_tables([r.cast(READ_REJECT_SCHEMA) for r in read.rejects]
                               or [READ_REJECT_SCHEMA.empty_table()])
    skipped = read.lines - edges.num_rows - rejects.num_rows
    return ReadResult(edges, rejects, read.lines, skipped, fmt, read.damaged)


def _guess_format_of_bytes(name: str, data: bytes) -> str:
    """:func:`guess_format` for content in memory (VAST is told from its first line)."""
    fmt = _format_from_name(Path(name))
    if fmt != "csv":
        return fmt
    raw: BinaryIO = io.BytesIO(data)
    if data[:2] == _GZIP_MAGIC:
        raw = gzip.GzipFile(fileobj=raw, mode="rb")  # type: ignore[assignment]
    return "vast" if _first_line_is_vast(_head_text(raw)) else "csv"


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
        ``snap``, ``csv``, ``tsv``, ``vast``, ``netflow5``, ``jsonl``, ``parquet``,
        ``tes``, ``seq`` or ``syscall``; ``None`` guesses from the first file's name (see module
        docstring).
    options
        Reader options (time unit, columns, limits ...).

    Returns
    -------
    ReadResult
        Edges in file order with ``seq`` = line number (+ ``file_index << 40``), rejects,
        and line counts.
    """
    options = options or ReaderOptions()
    fmt = fmt or guess_format(expand_paths(paths)[0])
    files = expand_paths(paths, fmt=fmt)
    note_skipped_files(paths, fmt)
    check_columns_format(fmt, options)
    edge_parts: list[pa.Table] = []
    reject_parts: list[pa.Table] = []
    lines_read = 0
    damaged: list[pa.Table] = []
    own_skips: list[int | None] = []
    for index, path in enumerate(files):
        if fmt == "parquet":
            read = _read_parquet_file(path, options)
        elif fmt in WHOLE_FILE_FORMATS:  # positions and times run on across files
            read = read_whole_file(path, fmt, sum(t.num_rows for t in edge_parts),
                                   last_second(edge_parts))
        elif fmt in RECORD_FORMATS:
            read = read_record_file(path, options)
        else:
            read = read_text_file(path, fmt, options)
        edge_parts.extend(offset_seq(t, index) for t in read.edges)
        reject_parts.extend(read.rejects)
        lines_read += read.lines
        own_skips.append(read.skipped)
        if read.damaged:
            damaged.append(read.rejects[-1])
    if damaged and lines_read == len(damaged):
        raise InputError(nothing_read_message(damaged))
    edges = _concat_edges(edge_parts, fmt)
    # one nullability for all: a file's own rejects and those given the format hint differ
    rejects = pa.concat_tables([r.cast(READ_REJECT_SCHEMA) for r in reject_parts]
                               or [READ_REJECT_SCHEMA.empty_table()])
    skipped = (sum(s for s in own_skips if s is not None) if own_skips and None not in own_skips
               else lines_read - edges.num_rows - rejects.num_rows)
    return ReadResult(edges, rejects, lines_read, skipped, fmt)


def nothing_read_message(damaged: list[pa.Table]) -> str:
    """Message of the :class:`InputError` for a read where every file broke off at once."""
    row = damaged[0].to_pylist()[0]
    more = (f" (and {counted_noun(len(damaged) - 1, 'more damaged file')})"
            if len(damaged) > 1 else "")
    return f"nothing could be read: {row['file']}: {row['reason']}{more}"


def _concat_edges(parts: list[pa.Table], fmt: str) -> pa.Table:
    """Join chunk tables (:func:`graphcep.events.concat_edges`): an attribute a chunk lacks
    (jsonl, files with other headers) is null there; one whose types clash across files (a
    Parquet file's integer ``port``, another's string one) becomes text in all."""
    if not parts:
        return (edge_schema(fmt) or EDGE_SCHEMA).empty_table()
    table = concat_edges(parts)
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
    "DamagedInputError",
    "InputError",
    "SchemaError",
    "ReadResult",
    "expand_paths",
    "guess_format",
    "iter_line_blocks",
    "offset_seq",
    "read_edges",
]
