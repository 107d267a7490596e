"""Collect rejected input lines, write them out, and summarise them in one sentence.

A run never stops on a bad line: readers return the line with its number and reason, and
a :class:`RejectLog` gathers them across files and chunks. The rejects file is JSON
lines, one object per rejected line::

    {"file": "flows.csv", "line": 17, "reason": "field 1 (TimeSeconds): not a number: 'x'",
     "text": "x,2011-08-10 ..."}

The summary groups reasons by their *kind*, the reason with its field prefix and details
removed (``"field 3 (t): not a number: 'abc'"`` -> ``"not a number"``).

When no line of a file gives an edge, the reader ends each of its reasons with a hint,
``" [no line of this file reads as snap: is --format right?]"`` (a ``.vast`` file read
as SNAP rejects every line); the summary repeats the hint once per file. A file whose
first lines have the shape of another format names that one first
(``" [no line of this file reads as csv: it has the shape of vast: pass --format
vast]"``). A line that
failed on a time that reads as the other time format (an ISO-8601 date-time where a
number was expected, or a number where a date-time was) names ``--time-format`` instead
(``" [no line of this file reads as csv: its time reads as an ISO-8601 date-time: pass
--time-format iso]"``), and so does the summary when every rejected line of the file
did: the format was right, the times were not.
"""

from __future__ import annotations

import json
import os
import re
import sys
import warnings
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc

from graphcep.io.formats import REJECT_SCHEMA
from graphcep.io.formats.options import COLUMN_FORMATS
from graphcep.io.formats.schema import InputNote

_FILE_FIELD = pa.field("file", pa.string(), nullable=False)
#: Schema of :meth:`RejectLog.table`.
REJECT_LOG_SCHEMA = pa.schema([_FILE_FIELD, *REJECT_SCHEMA])
_FIELD_PREFIX = re.compile(r"^field [^:]*?(?:\([^)]*\))?: ")
_DETAIL = re.compile(r"(?:: | \().*$", re.DOTALL)  # not a quoted ':' ("':' in ...")
_FORMAT_HINT = " [no line of this file reads as {fmt}: is --format right?]"
_SHAPE_HINT = " [no line of this file reads as {fmt}: it has the shape of {shape}: pass " \
    "--format {shape}]"
_TIME_HINT = " [no line of this file reads as {fmt}: its time reads as {word}: pass " \
    "--time-format {other}]"
_HINT_RE = re.compile(r" \[no line of this file reads as (\S+): (?:is --format right\?|its "
                      r"time reads as [^:\]]*: pass --time-format \w+|it has the shape of "
                      r"(\S+): pass --format \S+)\]$")
_TIME_WORD = {"iso": "an ISO-8601 date-time", "number": "a number"}
#: a time that failed as one format and reads as the other -> the --time-format to pass
_OTHER_TIME = (
    (re.compile(r"not a number: '[-+]?\d{4}-\d\d-\d\d(?:[T ]\d[^']*)?'"), "iso"),
    (re.compile(r"not an ISO-8601 date-time: '[-+]?\d+(?:\.\d*)?(?:[eE][-+]?\d+)?'"),
     "number"),
)


def other_time_format(reason: str) -> str | None:
    """The ``--time-format`` a reject's time would read as, when that is its failure.

    >>> other_time_format("field 1 (t): not a number: '2024-01-01T00:00:01'")
    'iso'
    >>> other_time_format("field 1 (t): not an ISO-8601 date-time: '1700000000.5'")
    'number'
    >>> other_time_format("field 1 (t): not a number: 'abc'") is None
    True
    """
    return next((fmt for pattern, fmt in _OTHER_TIME if pattern.search(reason)), None)


def format_hints(fmt: str, shape: str | None = None) -> tuple[list[tuple[str, str]], str]:
    """The hints :func:`add_format_hint` ends reasons with, for files read as ``fmt``:
    ``(regular expression, hint)`` for a time that reads as the other ``--time-format``
    (the first whose expression a reason holds applies), then the hint for any other
    reason. The expressions read alike in Python, Arrow (RE2) and Spark (Java).

    A file whose first lines have the shape of another format (``shape``, from
    :func:`~graphcep.io.formats.sniff.shape_of`) gets that format's name alone: the format
    comes before the time format (a VAST file read as ``csv`` fails on an ISO-8601 date
    where ``csv`` reads the time, and ``--time-format iso`` would read nonsense)."""
    if shape is not None and shape != fmt:
        return [], _SHAPE_HINT.format(fmt=fmt, shape=shape)
    cases = [(pattern.pattern, _TIME_HINT.format(fmt=fmt, word=_TIME_WORD[other], other=other))
             for pattern, other in _OTHER_TIME]
    return cases, _FORMAT_HINT.format(fmt=fmt)


def add_format_hint(rejects: pa.Table, fmt: str, shape: str | None = None) -> pa.Table:
    """``rejects`` with the format hint at the end of every reason (see module doc and
    :func:`format_hints`)."""
    if rejects.num_rows == 0:
        return rejects
    cases, plain = format_hints(fmt, shape)
    reasons = rejects.column("reason")
    hints = pa.scalar(plain)
    for pattern, hint in reversed(cases):
        hints = pc.if_else(pc.match_substring_regex(reasons, pattern), hint, hints)
    joined = pc.binary_join_element_wise(reasons, hints, "")
    return rejects.set_column(rejects.schema.get_field_index("reason"), "reason", joined)


def reason_kind(reason: str) -> str:
    """The kind of a reject reason: no field prefix, no details.

    >>> reason_kind("field 3 (t): not a number: 'abc'")
    'not a number'
    >>> reason_kind("missing fields: expected 3 fields, got 2")
    'missing fields'
    """
    kind = _DETAIL.sub("", _FIELD_PREFIX.sub("", _HINT_RE.sub("", reason))).strip()
    return kind or reason


_TIME_WORDS = {"iso": "ISO-8601 date-times", "number": "numbers"}


class RejectLog:
    """Accumulates reject tables from any number of reads.

    Parameters
    ----------
    path
        Default rejects file for :meth:`write` and :meth:`summary`.
    """

    def __init__(self, path: str | os.PathLike | None = None) -> None:
        self.path = Path(path) if path is not None else None
        self._tables: list[pa.Table] = []
        self._kinds: Counter[str] = Counter()
        self._hints: dict[str, str] = {}  # file -> format none of its lines read as
        self._shapes: dict[str, str] = {}  # file -> the format its lines look like
        # file -> the --time-format every one of its rejects' times reads as ("" if not all)
        self._times: dict[str, str] = {}

    def add(self, rejects: pa.Table, file: str | os.PathLike | None = None) -> None:
        """Add a rejects table (with or without a ``file`` column; ``file`` fills it in)."""
        if rejects.num_rows == 0:
            return
        if "file" not in rejects.column_names:
            name = "" if file is None else str(file)
            files = pa.array([name] * rejects.num_rows, pa.string())
            rejects = rejects.add_column(0, "file", files)
        rejects = rejects.select(REJECT_LOG_SCHEMA.names).cast(REJECT_LOG_SCHEMA)
        self._tables.append(rejects)
        reasons = rejects.column("reason").to_pylist()
        self._kinds.update(reason_kind(r) for r in reasons)
        for name, reason in zip(rejects.column("file").to_pylist(), reasons, strict=True):
            if name not in self._hints and (hint := _HINT_RE.search(reason)):
                self._hints[name] = hint.group(1)
                if hint.group(2):
                    self._shapes[name] = hint.group(2)
            other = other_time_format(reason) or ""
            if self._times.setdefault(name, other) != other:
                self._times[name] = ""

    @property
    def count(self) -> int:
        """Number of rejected lines so far."""
        return sum(t.num_rows for t in self._tables)

    def __len__(self) -> int:
        return self.count

    def kinds(self) -> Counter[str]:
        """Rejected lines per reason kind."""
        return Counter(self._kinds)

    def table(self) -> pa.Table:
        """All rejects as one table (``file``, ``line``, ``reason``, ``text``)."""
        if not self._tables:
            return REJECT_LOG_SCHEMA.empty_table()
        return pa.concat_tables(self._tables)

    def write(self, path: str | os.PathLike | None = None) -> Path:
        """Write the rejects as JSON lines (an empty file when there are none)."""
        target = Path(path) if path is not None else self.path
        if target is None:
            raise ValueError("no rejects path given")
        target.parent.mkdir(parents=True, exist_ok=True)
        with open(target, "w", encoding="utf-8") as out:
            for table in self._tables:
                for row in table.to_pylist():
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
        return target

    def write_if_any(self) -> Path | None:
        """Write the rejects to the log's path when there are some; when there are none,
        create no file but empty one an earlier run left there, which would show that
        run's rejects as this one's. Returns the path written, if any."""
        if self.path is None:
            raise ValueError("no rejects path given")
        if self.count or self.path.is_file():
            return self.write()
        return None

    def _what_rejected(self, total: int) -> str:
        """``"3 lines rejected"``, or ``"3 rejected on 1 line"`` where a format rejects
        several parts of one line (the tokens of a time-event sequence)."""
        lines = self.table().group_by(["file", "line"]).aggregate([]).num_rows
        if lines == total:
            return f"{total} {'line' if total == 1 else 'lines'} rejected"
        return f"{total} rejected on {lines} {'line' if lines == 1 else 'lines'}"

    def summary(self, path: str | os.PathLike | None = None) -> str:
        """One sentence: ``"3 lines rejected: 2 × not a number, 1 × missing fields; see x"``.

        Where some line gave several rejects (a time-event sequence rejects tokens), the
        count names both: ``"3 rejected on 1 line: 3 × negative pause"``.

        Kinds are listed most frequent first (ties by name); ``path`` (or the log's own
        path) is mentioned when given.
        """
        total = self.count
        if total == 0:
            return "no lines rejected"
        ranked = sorted(self._kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = ", ".join(f"{n} × {kind}" for kind, n in ranked)
        text = f"{self._what_rejected(total)}: {parts}"
        where = path if path is not None else self.path
        if where is not None:
            text += f"; see {where}"
        for name, fmt in self._hints.items():
            text += f"; no line of {name} reads as {fmt}: "
            other = self._times.get(name)
            if name in self._shapes:
                shape = self._shapes[name]
                text += f"it has the shape of {shape}: pass --format {shape}"
                continue
            text += (f"its times read as {_TIME_WORDS[other]}: pass --time-format {other}"
                     if other else "pass --format if it is another format"
                     + (", or --columns to say which columns hold t, src and dst"
                        if fmt in COLUMN_FORMATS else ""))
        return text


def show_input_notes() -> None:
    """Print each :class:`~graphcep.io.formats.schema.InputNote` the readers issue as one
    line on stderr, ``graphcep: note: ...``, every time (not once per place, Python's
    default); other warnings are shown as before. Calling it again changes nothing."""
    shown = warnings.showwarning
    if getattr(shown, "input_notes", False):
        return

    def show(message, category, filename, lineno, file=None, line=None):  # noqa: ANN001
        if issubclass(category, InputNote):
            print(f"graphcep: note: {message}", file=sys.stderr, flush=True)
        else:
            shown(message, category, filename, lineno, file, line)

    show.input_notes = True  # type: ignore[attr-defined]
    warnings.showwarning = show
    warnings.simplefilter("always", InputNote)


__all__ = ["REJECT_LOG_SCHEMA", "RejectLog", "add_format_hint", "format_hints", "other_time_format",
           "reason_kind", "show_input_notes"]
