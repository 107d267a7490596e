"""JSON lines: one object per line, parsed with :func:`json.loads` (floats as
:class:`~decimal.Decimal`, so times stay exact)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from decimal import Decimal

import numpy as np
import pyarrow as pa

from graphcep.io.formats.fields import FieldSpec, attribute_type, convert_number, convert_one
from graphcep.io.formats.line_parsers import Parsed
from graphcep.io.formats.reject_table import Rejects
from graphcep.io.formats.schema import ReaderOptions


def _json_text(value: object) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, Decimal):
        return str(value)
    return json.dumps(value, default=str)


def parse_jsonl(
    text: pa.Array, rows: np.ndarray, options: ReaderOptions, rejects: Rejects
) -> Parsed:
    """Per-line :func:`json.loads` (floats as Decimal for exact times)."""
    records: list[dict] = []
    kept: list[int] = []
    for row, line in zip(rows, text.take(pa.array(rows)).to_pylist(), strict=True):
        try:
            obj = json.loads(line, parse_float=Decimal)
        except ValueError as exc:
            rejects.add(np.array([row]), f"invalid JSON: {exc}")
            continue
        except RecursionError:
            rejects.add(np.array([row]), "invalid JSON: nested too deeply")
            continue
        if options.columns and isinstance(obj, dict):
            obj = _placed(obj, options.columns)
        why = _json_problem(obj) or _lone_surrogate(obj, line)
        if why:
            rejects.add(np.array([row]), why)
            continue
        records.append(obj)
        kept.append(int(row))
    rows = np.array(kept, dtype=np.int64)
    columns: dict[str, pa.Array] = {}
    for name in ("t", "dur"):
        texts = pa.array([_json_text(r.get(name, 0)) for r in records], pa.string())
        spec = FieldSpec(0, name, name, name)
        values, bad, reasons = convert_one(texts, np.ones(len(records), bool), spec, options)
        rejects.add(rows[bad], [f"field {name}: {why}" for why in reasons])
        columns[name] = values
    for name in ("src", "dst"):
        columns[name] = pa.array([_json_text(r[name]) for r in records], pa.string())
    for name in options.attributes or _keys_in_order(records):
        columns[name] = _json_attribute(name, records, rows, options, rejects)
    return columns, rows


def _placed(obj: dict, columns: Mapping[str, str | int]) -> dict:
    """``obj`` with each key ``columns`` names under its edge field's name; a key that
    already had that name is kept as an attribute, with ``_`` appended (as a CSV
    column would be)."""
    out = dict(obj)
    for core, key in columns.items():
        if key == core or key not in obj:
            continue
        if core in out:
            taken = core + "_"
            while taken in out:
                taken += "_"
            out[taken] = out.pop(core)
        out[core] = out.pop(key)
    return out


def _json_problem(obj: object) -> str | None:
    if not isinstance(obj, dict):
        return f"not a JSON object: {type(obj).__name__}"
    for name in ("t", "src", "dst"):
        if name not in obj or obj[name] is None:
            return f"missing field {name}"
    for name in ("src", "dst"):
        value = obj[name]
        if isinstance(value, bool) or not isinstance(value, str | int):
            return f"field {name}: vertex id must be a string or integer"
        if value == "":
            return f"field {name}: empty vertex id"
    return None


def _lone_surrogate(obj: object, line: str) -> str | None:
    """A ``\\ud800``-style escape decodes to a lone surrogate, which is no character and
    cannot be written as UTF-8: such a line is rejected (a surrogate *pair* is fine)."""
    if "\\ud" not in line.lower():
        return None  # no escape that could produce one (literal surrogates are not UTF-8)
    stack = [obj]
    while stack:
        item = stack.pop()
        texts: list[str] = []
        if isinstance(item, dict):
            texts = [k for k in item if isinstance(k, str)]
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            texts = [item]
        for text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as exc:
                return f"invalid JSON string: lone surrogate \\u{ord(text[exc.start]):04x}"
    return None


def _keys_in_order(records: list[dict]) -> list[str]:
    seen: dict[str, None] = {}
    for r in records:
        for key in r:
            if key not in ("t", "src", "dst", "dur", "seq"):
                seen.setdefault(key, None)
    return list(seen)


def _json_attribute(
    name: str, records: list[dict], rows: np.ndarray, options: ReaderOptions, rejects: Rejects
) -> pa.Array:
    kind = attribute_type(name, options)
    raw = [r.get(name) for r in records]
    if kind == "string":
        return pa.array([None if v is None else _json_text(v) for v in raw], pa.string())
    texts = pa.array(
        [None if v is None or isinstance(v, bool) else _json_text(v) for v in raw], pa.string()
    )
    values, bad, reasons = convert_number(texts, kind)
    rejects.add(rows[bad], [f"field {name}: {why}" for why in reasons])
    return values
