"""What the formats read whole, as whitespace-separated tokens, share: their lines and
their rejects (:mod:`graphcep.io.tes`, :mod:`graphcep.io.seq`).

Example
-------
>>> lines, count = text_lines("\\ufeffa b\\nc\\n")
>>> lines, count
(['a b', 'c', ''], 2)
>>> rejects = FileRejects("x.seq")
>>> rejects.add(2, "invalid UTF-8", "c")
>>> rejects.table().to_pylist()
[{'file': 'x.seq', 'line': 2, 'reason': 'invalid UTF-8', 'text': 'c'}]
"""

from __future__ import annotations

import pyarrow as pa

from graphcep.io.formats import REJECT_SCHEMA, REJECT_TEXT_CHARS

__all__ = ["FILE_REJECT_SCHEMA", "FileRejects", "text_lines", "unreadable_text"]

#: The readers' reject rows with the file they came from (file, line, reason, text).
FILE_REJECT_SCHEMA = pa.schema([pa.field("file", pa.string(), nullable=False), *REJECT_SCHEMA])


def text_lines(text: str) -> tuple[list[str], int]:
    """The lines of a text (a byte order mark opening it dropped) and how many there are
    (a final line end opens no line).

    Returns
    -------
    lines, count
        ``text.split("\\n")`` and the number of lines counted as read.
    """
    text = text.removeprefix("\ufeff")
    lines = text.split("\n")
    return lines, max(len(lines) - (1 if text.endswith("\n") else 0), 0)


def unreadable_text(text: str) -> str | None:
    """Why a line or token is no UTF-8 text, or None: bytes that are not UTF-8 (decoded
    as U+FFFD), or a NUL, which UTF-8 text never holds but UTF-16 text does in every
    other byte.

    >>> unreadable_text("a\\x00") is not None, unreadable_text("a b")
    (True, None)
    """
    if "\ufffd" in text:
        return "invalid UTF-8"
    if "\x00" in text:
        return "NUL byte: not UTF-8 text (UTF-16? save the file as UTF-8)"
    return None


class FileRejects:
    """The rejects of one file parsed whole: line number, reason and text (cut to
    :data:`~graphcep.io.formats.REJECT_TEXT_CHARS` characters) per row."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.rows: dict[str, list] = {"file": [], "line": [], "reason": [], "text": []}

    def add(self, line: int, reason: str, text: str) -> None:
        """Keep one reject aside."""
        self.rows["file"].append(self.name)
        self.rows["line"].append(line)
        self.rows["reason"].append(reason)
        self.rows["text"].append(text[:REJECT_TEXT_CHARS])

    def table(self) -> pa.Table:
        """The rejects as a table of :data:`FILE_REJECT_SCHEMA`."""
        return pa.table(self.rows, schema=FILE_REJECT_SCHEMA)
