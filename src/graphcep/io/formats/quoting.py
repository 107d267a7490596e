"""CSV quoting (RFC 4180 fields on one physical line): the check of one line, the splitter,
and their vectorized use on a chunk."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.times import bool_np


def split_csv(text: pa.Array, delimiter: str, quoting: bool) -> pa.Array:
    """Split by ``delimiter``; lines with quotes (rare, checked by
    :func:`reject_bad_quoting` before) go through :func:`split_quoted`."""
    lists = pc.split_pattern(text, delimiter)
    if not quoting:
        return lists
    quoted = np.flatnonzero(bool_np(pc.match_substring(text, '"')))
    if len(quoted) == 0:
        return lists
    parsed = [split_quoted(text[int(r)].as_py(), delimiter) for r in quoted]
    extra = pa.array(parsed, lists.type)
    index = np.arange(len(text), dtype=np.int64)
    index[quoted] = len(text) + np.arange(len(quoted))
    return pa.concat_arrays([lists, extra]).take(pa.array(index))


def _quoting_pattern(delimiter: str) -> str:
    """RE2 pattern of a CSV line with well-formed quoting (RFC 4180 fields, one line)."""
    d = f"\\x{{{ord(delimiter):x}}}"
    field = f'(?:"(?:[^"]|"")*"|[^"{d}]*)'
    return f"^{field}(?:{d}{field})*$"


def quoting_problem(line: str, delimiter: str = ",") -> str | None:
    """What is wrong with the quoting of one CSV line, or ``None`` when it is well formed.

    A field is either quoted -- it starts with ``"``, ends with ``"`` right before the
    delimiter or the line end, and doubles its inner quotes -- or holds no ``"`` at all.
    A record is one physical line: a quoted field cannot span lines, so both halves of a
    field holding a newline are rejected (the first as unterminated, the second for its
    stray quote).

    >>> quoting_problem('1,2,"3')
    'field 3: unterminated quoted field'
    >>> quoting_problem('b",2,3')
    'field 1: stray quote in an unquoted field'
    """
    start, number = 0, 1
    while True:
        if line.startswith('"', start):
            end = _closing_quote(line, start + 1)
            if end < 0:
                return f"field {number}: unterminated quoted field"
            start = end + 1
            if start < len(line) and line[start] != delimiter:
                return f"field {number}: text after the closing quote"
        else:
            cut = line.find(delimiter, start)
            end = len(line) if cut < 0 else cut
            if '"' in line[start:end]:
                return f"field {number}: stray quote in an unquoted field"
            start = end
        if start >= len(line):
            return None
        start, number = start + 1, number + 1


def split_quoted(line: str, delimiter: str = ",") -> list[str]:
    """The fields of a CSV line whose quoting is well formed (:func:`quoting_problem` is
    ``None``): quotes removed, doubled quotes made single. Unlike :mod:`csv`, a ``\\r``
    is text wherever it stands.

    >>> split_quoted('a,"b, ""c"" d",,e,')
    ['a', 'b, "c" d', '', 'e', '']
    """
    fields: list[str] = []
    start = 0
    while True:
        if line.startswith('"', start):
            close = _closing_quote(line, start + 1)
            fields.append(line[start + 1 : close].replace('""', '"'))
            after = close + 1
        else:
            cut = line.find(delimiter, start)
            after = len(line) if cut < 0 else cut
            fields.append(line[start:after])
        if after >= len(line):
            return fields
        start = after + 1


def _closing_quote(line: str, start: int) -> int:
    """Index of the quote closing a field whose text starts at ``start`` (-1: none)."""
    while True:
        at = line.find('"', start)
        if at < 0 or not line.startswith('"', at + 1):
            return at
        start = at + 2


def reject_bad_quoting(
    sub: pa.Array, rows: np.ndarray, delimiter: str, rejects: Rejects
) -> tuple[np.ndarray, pa.Array]:
    """Reject CSV lines with malformed quoting (vectorized check, reasons per bad line)."""
    quoted = bool_np(pc.match_substring(sub, '"'))
    if not quoted.any():
        return rows, sub
    ok = bool_np(pc.match_substring_regex(sub, _quoting_pattern(delimiter)))
    bad = np.flatnonzero(quoted & ~ok)
    if len(bad) == 0:
        return rows, sub
    reasons = [quoting_problem(sub[int(i)].as_py(), delimiter) or "malformed quoting" for i in bad]
    rejects.add(rows[bad], reasons)
    keep = np.ones(len(rows), dtype=bool)
    keep[bad] = False
    return rows[keep], sub.filter(pa.array(keep))
