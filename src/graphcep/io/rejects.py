"""Collect rejected input lines, write them out, and summarise them in one sentence.

A run never stops on a bad line: readers return the line with its number and reason, and
a :class:`RejectLog` gathers them across files and chunks. The rejects file is JSON
lines, one object per rejected line::

    {"file": "flows.csv", "line": 17, "reason": "field 1 (TimeSeconds): not a number: 'x'",
     "text": "x,2011-08-10 ..."}

The summary groups reasons by their *kind*, the reason with its field prefix and details
removed (``"field 3 (t): not a number: 'abc'"`` -> ``"not a number"``).
"""

from __future__ import annotations

import json
import os
import re
from collections import Counter
from pathlib import Path

import pyarrow as pa

from graphcep.io.formats import REJECT_SCHEMA

_FILE_FIELD = pa.field("file", pa.string(), nullable=False)
#: Schema of :meth:`RejectLog.table`.
REJECT_LOG_SCHEMA = pa.schema([_FILE_FIELD, *REJECT_SCHEMA])
_FIELD_PREFIX = re.compile(r"^field [^:]*?(?:\([^)]*\))?: ")
_DETAIL = re.compile(r"[:(].*$", re.DOTALL)


def reason_kind(reason: str) -> str:
    """The kind of a reject reason: no field prefix, no details.

    >>> reason_kind("field 3 (t): not a number: 'abc'")
    'not a number'
    >>> reason_kind("missing fields: expected 3 fields, got 2")
    'missing fields'
    """
    kind = _DETAIL.sub("", _FIELD_PREFIX.sub("", reason)).strip()
    return kind or reason


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
        self._kinds.update(reason_kind(r) for r in rejects.column("reason").to_pylist())

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

    def summary(self, path: str | os.PathLike | None = None) -> str:
        """One sentence: ``"3 lines rejected: 2 × not a number, 1 × missing fields; see x"``.

        Kinds are listed most frequent first (ties by name); ``path`` (or the log's own
        path) is mentioned when given.
        """
        total = self.count
        if total == 0:
            return "no lines rejected"
        noun = "line" if total == 1 else "lines"
        ranked = sorted(self._kinds.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = ", ".join(f"{n} × {kind}" for kind, n in ranked)
        text = f"{total} {noun} rejected: {parts}"
        where = path if path is not None else self.path
        if where is not None:
            text += f"; see {where}"
        return text


__all__ = ["REJECT_LOG_SCHEMA", "RejectLog", "reason_kind"]
