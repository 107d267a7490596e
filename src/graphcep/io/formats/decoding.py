"""Decoding and line classification: line lengths and UTF-8 checked, ``\\r\\n`` line ends,
blank and comment lines."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.schema import REJECT_TEXT_CHARS, ReaderOptions
from graphcep.io.formats.times import bool_np, strings


def decode(lines: pa.Array, max_line_bytes: int, rejects: Rejects) -> pa.Array:
    """Validate lengths and UTF-8; return a ``string`` array with bad lines emptied."""
    if isinstance(lines, pa.ChunkedArray):
        lines = lines.combine_chunks()
    if pa.types.is_string(lines.type) or pa.types.is_large_string(lines.type):
        view = lines  # Arrow strings are valid UTF-8 already
        binary = False
    elif pa.types.is_binary(lines.type) or pa.types.is_large_binary(lines.type):
        binary = True
        target = pa.large_string() if pa.types.is_large_binary(lines.type) else pa.string()
        view = lines.view(target)
    else:
        raise TypeError(f"lines must be a string or binary array, not {lines.type}")
    view = pc.fill_null(view, "")
    bad = np.zeros(len(view), dtype=bool)
    lengths = pc.binary_length(view).to_numpy(zero_copy_only=False)
    too_long = np.flatnonzero(lengths > max_line_bytes)
    for row in too_long:
        rejects.add(np.array([row]), too_long_reason(int(lengths[row]), max_line_bytes))
        rejects.texts[int(row)] = _lossy(view, int(row))
    bad[too_long] = True
    if binary:
        for row in _invalid_utf8_rows(view, bad):
            raw = _raw_bytes(view, row)
            try:
                raw.decode("utf-8")
            except UnicodeDecodeError as exc:
                where = exc.start
            rejects.add(np.array([row]), f"invalid UTF-8 (at byte {where + 1})")
            rejects.texts[row] = raw[: REJECT_TEXT_CHARS * 4].decode("utf-8", "backslashreplace")
            bad[row] = True
    if bad.any():
        view = pc.if_else(pa.array(bad), "", view)
    return strings(view)


def too_long_reason(length: int | None, max_line_bytes: int) -> str:
    """Reject reason of a line over ``max_line_bytes``; ``length=None`` when unknown."""
    size = f"{length} > {max_line_bytes}" if length is not None else f"over {max_line_bytes}"
    return f"line longer than max_line_bytes ({size} bytes)"


def _raw_bytes(view: pa.Array, row: int) -> bytes:
    return (
        view.slice(row, 1)
        .view(pa.large_binary() if pa.types.is_large_string(view.type) else pa.binary())[0]
        .as_py()
    )


def _lossy(view: pa.Array, row: int) -> str:
    """The start of a line as text, whatever its bytes."""
    raw = _raw_bytes(view, row)[: REJECT_TEXT_CHARS * 4]
    return raw.decode("utf-8", "backslashreplace")


def _invalid_utf8_rows(view: pa.Array, skip: np.ndarray) -> list[int]:
    """Rows whose bytes are not UTF-8, found by bisecting full validation (no per-line loop)."""
    found: list[int] = []

    def search(lo: int, hi: int) -> None:
        try:
            view.slice(lo, hi - lo).validate(full=True)
            return
        except pa.ArrowInvalid:
            pass
        if hi - lo == 1:
            if not skip[lo]:
                found.append(lo)
            return
        mid = (lo + hi) // 2
        search(lo, mid)
        search(mid, hi)

    if len(view):
        try:
            view.validate(full=True)
        except pa.ArrowInvalid:
            search(0, len(view))
    return found


def drop_carriage_return(text: pa.Array) -> pa.Array:
    """Drop the one ``\\r`` of a ``\\r\\n`` line end; other ``\\r`` are text (see the package doc)."""
    ends_cr = pc.ends_with(text, "\r")
    return pc.if_else(ends_cr, pc.utf8_slice_codeunits(text, 0, -1), text)


def comment_prefixes(fmt: str, options: ReaderOptions) -> tuple[str, ...]:
    if options.comment_prefixes is not None:
        return options.comment_prefixes
    return ("#", "%") if fmt == "snap" else ()


def skippable(text: pa.Array, fmt: str, options: ReaderOptions, rejects: Rejects) -> np.ndarray:
    """Blank and comment lines (blank ones become rejects under ``strict_empty``)."""
    trimmed = pc.ascii_trim_whitespace(text)
    blank = bool_np(pc.equal(trimmed, ""))
    blank &= ~rejects.mask()
    if options.strict_empty:
        rejects.add(np.flatnonzero(blank), "empty line")
        skip = np.zeros(len(text), dtype=bool)
    else:
        skip = blank
    for prefix in comment_prefixes(fmt, options):
        skip |= bool_np(pc.starts_with(trimmed, prefix))
    return skip
