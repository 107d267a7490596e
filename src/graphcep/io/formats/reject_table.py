"""Reject bookkeeping: the first reason found for each rejected row of a chunk, and the
rejects table built from them."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from graphcep.io.formats.schema import REJECT_SCHEMA, REJECT_TEXT_CHARS


class Rejects:
    """Reasons for rejected rows of one chunk; the first reason found for a row wins."""

    def __init__(self, n: int) -> None:
        self.reasons: dict[int, str] = {}
        self.texts: dict[int, str] = {}
        self.n = n

    def add(self, rows: np.ndarray, reason: str | Sequence[str]) -> None:
        if isinstance(reason, str):
            for row in rows:
                self.reasons.setdefault(int(row), reason)
        else:
            for row, why in zip(rows, reason, strict=True):
                self.reasons.setdefault(int(row), why)

    def mask(self) -> np.ndarray:
        out = np.zeros(self.n, dtype=bool)
        if self.reasons:
            out[np.fromiter(self.reasons, dtype=np.int64)] = True
        return out

    def table(self, text: pa.Array, line_numbers: np.ndarray) -> pa.Table:
        rows = np.array(sorted(self.reasons), dtype=np.int64)
        texts = []
        for row in rows:
            value = self.texts.get(int(row))
            if value is None:
                value = text[int(row)].as_py() or ""
            texts.append(value[:REJECT_TEXT_CHARS])
        return pa.table(
            {
                "line": pa.array(line_numbers[rows], pa.int64()),
                "reason": pa.array([self.reasons[int(r)] for r in rows], pa.string()),
                "text": pa.array(texts, pa.string()),
            },
            schema=REJECT_SCHEMA,
        )


def empty_rejects() -> pa.Table:
    """An empty rejects table."""
    return REJECT_SCHEMA.empty_table()
