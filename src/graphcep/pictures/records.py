"""Match records read back from a JSONL match file, as the rows the sinks write from.

``graphcep run -o m.jsonl`` writes times as exact decimal seconds; the rows here hold
them in integer µs again, as the engines produce them, so that one drawing function per
kind of record (:class:`~graphcep.io.sinks.MatchFormat`'s ``graph``) serves both a run
in progress and a file. The kind is told by the record's keys: ``vertices`` (a DDST
match component), ``subscription`` (a notification), else a SAL or ν-expression match
(``bindings`` and ``edges`` with ``var``). Progressive window widening adds
``pww_level``, ``pww_report_t`` and ``pww_delay`` to any of them.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from decimal import Decimal
from pathlib import Path
from typing import Any

import pyarrow as pa

from graphcep.events import TimeFormatError, format_seconds, seconds_to_us
from graphcep.io.flat_columns import RECORD_COLUMN, integer_times
from graphcep.io.formats.schema import InputError
from graphcep.io.formats.times import scalar_iso_us
from graphcep.io.sinks import MatchDrawing, ddst_match_drawing, sal_match_drawing
from graphcep.io.time_text import ISO, SECONDS, Clock

#: Keys holding times in seconds (a record's and its edges').
TIME_KEYS = frozenset({"t", "dur", "first_t", "last_t", "window_start", "window_end",
                       "start_t", "end_t", "pww_report_t", "pww_delay"})


class MatchFileError(InputError):
    """A match file that cannot be read (names the file and the line; the command line
    reports it in one line, exit status 2)."""


def record_kind(record: dict[str, Any]) -> str:
    """``"ddst"``, ``"subs"`` or ``"sal"`` (SAL and ν-expressions share one record)."""
    if "vertices" in record:
        return "ddst"
    if "subscription" in record:
        return "subs"
    return "sal"


def unwrapped(record: dict[str, Any]) -> dict[str, Any]:
    """A rule's match (``--rules``: the rule, its version and kind around the kind's own
    record -- under ``match`` in JSONL, in its record kind's column in Arrow) as the kind's
    own record, with ``rule`` naming the rule and version; any other record as it is."""
    if not is_rule_match(record):
        return record
    inner = record.get("match")
    if inner is None:
        from graphcep.jobs.rules import RECORD_OF

        inner = record[RECORD_OF[record["kind"]]]
    return {**inner, "rule": f"{record['rule']} {record['version']}"}


def is_rule_match(record: dict[str, Any]) -> bool:
    """Whether a record is a rule's match in its envelope (``run --rules``)."""
    return "rule" in record and "kind" in record


def drawing_of(row: dict[str, Any]) -> MatchDrawing:
    """The graph of one match row (in µs), whatever its kind, with the widening's level
    and delay in the title when the record has them, and the rule (``--rules``)."""
    row = unwrapped(row)
    kind = record_kind(row)
    clock = row.get(CLOCK_KEY, SECONDS)
    drawing = _GRAPHS[kind]()(row, clock=clock)
    if "rule" in row:
        drawing = MatchDrawing(f"{row['rule']}: {drawing.title}", drawing.nodes,
                               drawing.edges)
    if row.get("pww_level") is None:
        return drawing
    delay = row.get("pww_delay_us", row.get("pww_delay"))
    return MatchDrawing(f"{drawing.title}\npww level {row['pww_level']}, delay "
                        f"{format_seconds(delay)}s", drawing.nodes, drawing.edges)


#: The key of a row read from a file written with ISO times: its drawing writes them so.
CLOCK_KEY = "__clock"

#: The field holding when a match was complete: its last edge (SAL, ν, subscriptions)
#: or the edge that triggered it (DDST).
MATCH_TIME = {"ddst": "window_end", "subs": "end_t", "sal": "last_t"}


def timed_rows(rows: list[dict[str, Any]], clock: Clock) -> list[dict[str, Any]]:
    """Match rows whose drawings write times as ``clock`` does."""
    if clock == SECONDS:
        return rows
    return [{**row, CLOCK_KEY: clock} for row in rows]


def match_time_column(names: list[str]) -> str:
    """The field of :data:`MATCH_TIME` for a record (or table) with these field names."""
    return MATCH_TIME[record_kind(dict.fromkeys(names))]


def read_matches(path: str | Path) -> Iterator[dict[str, Any]]:
    """The records of a JSONL match file (or a Parquet one, ``-o m.parquet``, whose rows
    are in µs already) as rows in µs, in file order; of a directory of parts (a stream's
    ``-o DIR/``), its ``part-*`` files in name order, which is micro-batch order.

    Raises
    ------
    MatchFileError
        A line that is not a match record, naming the file and the line; a Parquet file
        that cannot be read; a directory without parts.
    FileNotFoundError
        No such file.
    """
    if Path(path).is_dir():
        parts = sorted(p for p in Path(path).glob("part-*")
                       if p.suffix.lower() in (".jsonl", ".parquet"))
        if not parts:
            raise MatchFileError(f"{path}: a directory without match parts (part-*.jsonl "
                                 "or part-*.parquet, as a stream writes them)")
        for part in parts:
            yield from read_matches(part)
        return
    suffix = Path(path).suffix.lower()
    if suffix == ".parquet":
        yield from _parquet_rows(path)
        return
    if suffix in (".dot", ".gv") and Path(path).is_file():
        raise MatchFileError(f"{path}: a Graphviz file (-o m.dot), not a match file: draw reads "
                             f"the JSONL or Parquet ones; dot -Tpng {path} -o m.png renders it")
    with open(path, encoding="utf-8") as lines:
        for number, line in enumerate(lines, start=1):
            if line.strip():
                yield _row(line, f"{path}:{number}")


def _parquet_rows(path: str | Path) -> Iterator[dict[str, Any]]:
    import pyarrow.parquet as pq

    if not Path(path).exists():
        raise FileNotFoundError(2, "No such file or directory", str(path))
    try:
        parquet = pq.ParquetFile(path)
    except (pa.ArrowException, OSError) as err:
        raise MatchFileError(f"{path}: not a Parquet match file ({err})") from None
    schema = parquet.schema_arrow
    if "edges" in schema.names or _is_rules_envelope(schema):
        columns = None
    elif _is_api_frame(schema):
        columns = [RECORD_COLUMN]  # the Python API's frames: the record in one struct column
    else:
        raise MatchFileError(f"{path}: not a match file (no column of edges)")
    for batch in parquet.iter_batches(columns=columns):  # times: timestamps, or µs (older)
        table = pa.Table.from_batches([batch])
        if columns is not None:
            table = pa.Table.from_struct_array(table.column(RECORD_COLUMN).combine_chunks())
        yield from integer_times(table).to_pylist()


def _is_rules_envelope(schema: pa.Schema) -> bool:
    """Whether a Parquet file holds rules' matches (``run --rules -o m.parquet``): the
    rule, its kind and the kinds' record columns, each a struct with edges."""
    from graphcep.jobs.rules import RECORD_OF

    records = set(RECORD_OF.values())
    return ({"rule", "kind", "match_id"} <= set(schema.names)
            and any(name in schema.names and pa.types.is_struct(schema.field(name).type)
                    and schema.field(name).type.get_field_index("edges") >= 0
                    for name in records))


def _is_api_frame(schema: pa.Schema) -> bool:
    """Whether a Parquet file is a frame of the Python API's matches written as it is."""
    if RECORD_COLUMN not in schema.names:
        return False
    kind = schema.field(RECORD_COLUMN).type
    return pa.types.is_struct(kind) and kind.get_field_index("edges") >= 0


def _row(line: str, where: str) -> dict[str, Any]:
    try:
        record = json.loads(line, parse_float=Decimal)
        # a rule's match keeps its envelope (its rule-qualified id names its picture)
        inner = (record.get("match") if isinstance(record, dict) and is_rule_match(record)
                 else record)
        if not isinstance(inner, dict) or not isinstance(inner.get("edges"), list):
            raise MatchFileError(f"{where}: not a match record (no list of edges)")
        return _in_us(inner) if inner is record else {**record, "match": _in_us(inner)}
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise MatchFileError(f"{where}: not JSON ({err})") from None
    except (TimeFormatError, KeyError, TypeError, AttributeError) as err:
        raise MatchFileError(f"{where}: not a match record ({err})") from None


def _in_us(record: dict[str, Any]) -> dict[str, Any]:
    row = {k: _us(k, v) for k, v in record.items()}
    row["edges"] = [{k: _us(k, v) for k, v in e.items()} for e in record["edges"]]
    if record_kind(row) == "subs":  # JSONL writes bindings as an object, Arrow as pairs
        row["bindings"] = [{"var": k, "value": v} for k, v in record["bindings"].items()]
    if "pww_delay" in row:
        row["pww_delay_us"] = row["pww_delay"]
    if any(isinstance(record.get(key), str) for key in MATCH_TIME.values()):
        row[CLOCK_KEY] = ISO  # written with --time-format iso: drawn so too
    return row


def _us(key: str, value: Any) -> Any:
    """A time or duration as µs: seconds, or an ISO date-time (``--time-format iso``)."""
    if key not in TIME_KEYS or value is None:
        return value
    return iso_us(value) if isinstance(value, str) else seconds_to_us(value)


def iso_us(text: str) -> int:
    """An ISO-8601 date-time as µs since the epoch (a :class:`TimeFormatError` else): the
    readers' own rule for one value (their column-at-once one costs milliseconds a call)."""
    return scalar_iso_us(text)


def _subs_graph() -> Callable[[dict[str, Any]], MatchDrawing]:
    from graphcep.jobs.sequences import notification_drawing

    return notification_drawing


_GRAPHS: dict[str, Callable[[], Callable[[dict[str, Any]], MatchDrawing]]] = {
    "ddst": lambda: ddst_match_drawing,
    "subs": _subs_graph,
    "sal": lambda: sal_match_drawing,
}
