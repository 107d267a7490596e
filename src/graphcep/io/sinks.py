"""Write match tables (:data:`graphcep.events.MATCH_SCHEMA`) to the console, JSONL, Parquet
or Graphviz DOT.

A sink writes one kind of match record, described by a :class:`MatchFormat` (its Arrow
schema, its console block, its JSON line): :data:`SAL_MATCHES` by default; DDST match
components use the format the DDST job carries (their writers, :func:`format_ddst_match`
and :func:`ddst_match_to_json`, are here with the others).

Every sink has ``write(table, batch_id=None)``, ``close()`` and works as a context
manager. :func:`make_sink` picks one from a target string.

Decisions
---------
* **Console**: one block per match, times in seconds (exact, via
  :func:`graphcep.events.format_seconds`)::

      match 1  query=triangle  id=5c1f...  12.5s .. 14s
        bindings: x1=node3 x2=node9 x3=node4
        e1: node3 -> node9 @ 12.5s
        ...

  ``limit`` caps how many are printed; :meth:`ConsoleSink.close` reports the rest.
* **JSONL**: one object per match with the keys of
  :meth:`graphcep.events.Match.to_dict`. Times (``first_t``, ``last_t``, edge ``t`` and
  ``dur``) are JSON *numbers of seconds* written with exactly the microsecond digits
  (``1312964022.93089``), not strings and not float-printed: ``json.loads(...,
  parse_float=decimal.Decimal)`` gets them back exactly; plain ``float`` readers lose at
  most the sub-microsecond rounding of float64.
* **Parquet**: the Arrow table as is: nested ``bindings`` map and ``edges`` list of
  structs, times int64 microseconds. The file carries ``graphcep.time_unit = us`` in its
  schema metadata.
* **Graphviz DOT** (``.dot``, ``.gv``): the matches as graphs to look at -- one
  ``digraph`` with a cluster per match (labelled with its number and ``match_id``; node
  names carry the number, so clusters never share a node), stream vertices as
  nodes labelled with their id (and label) and the query vertices they match, stream
  edges as arrows labelled with the query edges they match and their time; an edge that
  matches several query edges is drawn once. ``dot -Tsvg matches.dot -o matches.svg``
  renders it. Directory parts are whole graphs each.
* **Directories and exactly-once**: a JSONL, Parquet or DOT target that is a directory (an
  existing one, or a path ending in ``/``) gets one ``part-<batch_id>.jsonl|parquet|dot`` file
  per ``write``, written to a temporary name and renamed into place, so rewriting the
  same ``batch_id`` (a retried micro-batch) replaces the file instead of duplicating
  matches. ``batch_id=None`` takes the next number after the parts already there. A
  single-file sink appends; there a repeated ``batch_id`` is ignored (idempotent within
  one sink object).
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import shutil
import sys
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any, BinaryIO, TextIO

import pyarrow as pa
import pyarrow.parquet as pq

from graphcep.events import MATCH_SCHEMA, counted_noun, format_seconds
from graphcep.io.flat_columns import FlatColumns, timestamp_schema
from graphcep.io.json_lines import sal_json_lines
from graphcep.io.time_text import SECONDS, Clock

_PART = re.compile(r"^part-(\d+)\.")
_SAFE_ID = re.compile(r"^[A-Za-z0-9_.-]+$")
_PARQUET_METADATA = {b"graphcep.time_unit": b"us"}


def _rows(table: pa.Table, schema: pa.Schema = MATCH_SCHEMA) -> list[dict[str, Any]]:
    if table.schema != schema:
        table = table.select(schema.names).cast(schema)
    return table.to_pylist()


def _bindings(value: Any) -> list[tuple[str, str]]:
    """Arrow maps come back as lists of pairs; accept dicts too."""
    if isinstance(value, dict):
        return sorted(value.items())
    return sorted((k, v) for k, v in value or [])


class Sink:
    """Base class: context management and the ``write``/``close`` protocol."""

    def write(self, table: pa.Table, batch_id: int | str | None = None) -> None:
        raise NotImplementedError

    def write_chunks(self, tables: Iterable[pa.Table],
                     batch_id: int | str | None = None) -> int:
        """Write one batch's matches, handed out in chunks, as :meth:`write` writes one
        table; how many rows. This default joins the chunks and writes them once (a sink
        whose batch is one unit, a Kafka transaction); the console and file sinks write
        each chunk as it comes."""
        found = [table for table in tables if table.num_rows]
        if found:
            self.write(pa.concat_tables(found), batch_id)
        return sum(table.num_rows for table in found)

    def close(self) -> None:
        """Flush and release resources (idempotent)."""

    def __enter__(self) -> Sink:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class ConsoleSink(Sink):
    """Human-readable matches on a text stream.

    Parameters
    ----------
    stream
        Where to print (standard output by default).
    limit
        Print at most this many matches; the others are counted and reported on close.
    """

    def __init__(self, stream: TextIO | None = None, limit: int | None = None,
                 matches: MatchFormat | None = None) -> None:
        self.stream = stream if stream is not None else sys.stdout
        self.limit = limit
        self.matches = matches or SAL_MATCHES
        self.printed = 0
        self.total = 0
        self._closed = False

    def write(self, table: pa.Table, batch_id: int | str | None = None) -> None:
        """Print the matches of ``table`` (``batch_id`` is ignored); only the rows to be
        printed become Python objects, the rest are counted."""
        self.total += table.num_rows
        if self.limit is not None:
            table = table.slice(0, max(self.limit - self.printed, 0))
        for row in _rows(table, self.matches.schema):
            self.printed += 1
            self.stream.write(self.matches.text(row, self.printed))
        self.stream.flush()

    def write_chunks(self, tables: Iterable[pa.Table],
                     batch_id: int | str | None = None) -> int:
        """Print each chunk as it comes; how many rows."""
        rows = 0
        for table in tables:
            self.write(table, batch_id)
            rows += table.num_rows
        return rows

    def close(self) -> None:
        """Report matches not printed because of ``limit``."""
        if self._closed:
            return
        self._closed = True
        hidden = self.total - self.printed
        if hidden:
            self.stream.write(f"... and {counted_noun(hidden, 'more match', 'more matches')} "
                              f"not shown ({self.total:,} in all)\n")
            self.stream.flush()


def format_match(row: dict[str, Any], number: int, clock: Clock = SECONDS) -> str:
    """One match row (a :data:`MATCH_SCHEMA` dict) as a text block, times as ``clock``
    writes them."""
    first, last = clock.text(row["first_t"]), clock.text(row["last_t"])
    lines = [f"match {number}  query={row['query']}  id={row['match_id']}  {first} .. {last}"]
    pairs = " ".join(f"{k}={v}" for k, v in _bindings(row["bindings"]))
    lines.append(f"  bindings: {pairs or '(none)'}")  # a ν-expression without variables
    for edge in row["edges"] or []:
        ends = f"{edge['src']} -> {edge['dst']}" if edge["dst"] else edge["src"]  # an event
        lines.append(f"  {edge['var']}: {ends} @ {clock.text(edge['t'])}")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class MatchDrawing:
    """A match as a small graph to draw: ``nodes`` maps a stream vertex key to its text
    and the query vertices it matches; ``edges`` are ``(src key, dst key, text, time in
    µs)``, one per stream edge, the text naming the query edges it matches."""

    title: str
    nodes: dict[tuple[str, str | None], tuple[str, list[str]]]
    edges: list[tuple[tuple[str, str | None], tuple[str, str | None], str, int]]
    #: how the edges' times are written
    clock: Clock = SECONDS


def sal_match_drawing(row: dict[str, Any], clock: Clock = SECONDS) -> MatchDrawing:
    """A SAL match row as a :class:`MatchDrawing` (vertices have no labels here). An
    event (a time-event sequence's row: its ``dst`` empty) is a loop on its one node."""
    nodes: dict[tuple[str, str | None], tuple[str, list[str]]] = {}
    for var, vertex in _bindings(row["bindings"]):
        nodes.setdefault((vertex, None), (vertex, []))[1].append(var)
    edges = []
    for e in row["edges"] or []:
        src, dst = e["src"], e["dst"] or e["src"]
        for end in (src, dst):
            nodes.setdefault((end, None), (end, []))
        edges.append(((src, None), (dst, None), e["var"], e["t"]))
    title = (f"{row['query']}  id={row['match_id']}  {clock.text(row['first_t'])} .. "
             f"{clock.text(row['last_t'])}")
    return MatchDrawing(title, nodes, edges, clock)


def match_to_json(row: dict[str, Any], clock: Clock = SECONDS) -> str:
    """One match row as a JSON object with exact decimal seconds as numbers (or ISO
    date-times as ``clock`` writes them; durations stay seconds)."""
    edges = ",".join(
        "{"
        f'"var":{json.dumps(e["var"])},"t":{clock.json(e["t"])},'
        f'"src":{json.dumps(e["src"])},"dst":{json.dumps(e["dst"])},'
        f'"dur":{format_seconds(e["dur"])},"seq":{int(e["seq"])}'
        "}"
        for e in row["edges"] or []
    )
    bindings = json.dumps(dict(_bindings(row["bindings"])))
    return (
        f'{{"query":{json.dumps(row["query"])},"match_id":{json.dumps(row["match_id"])},'
        f'"first_t":{clock.json(row["first_t"])},"last_t":{clock.json(row["last_t"])},'
        f'"bindings":{bindings},"edges":[{edges}]}}'
    )


def _time_or_null(us: int | None, clock: Clock) -> str:
    """A time as the console writes it (``null``: a window open at the stream's start)."""
    return "null" if us is None else clock.text(us)


#: The console shows at most this many edge pairs of a DDST match, and this many stream
#: vertices per query vertex: a component on a dense stream holds thousands (the files
#: written with ``-o`` hold them all).
CONSOLE_EDGE_PAIRS = 25
CONSOLE_VERTICES = 12


def format_ddst_match(row: dict[str, Any], number: int, clock: Clock = SECONDS) -> str:
    """One DDST match component (a ``DDST_MATCH_SCHEMA`` dict) as a text block: the
    window, each query vertex with the stream vertices it matches, then the matched edges
    in stream order -- the first :data:`CONSOLE_EDGE_PAIRS` of them, and at most
    :data:`CONSOLE_VERTICES` stream vertices per query vertex, each cut saying how many
    more there are."""
    start, end = _time_or_null(row["window_start"], clock), clock.text(row["window_end"])
    vertices, edges = row["vertices"] or [], row["edges"] or []
    lines = [f"match {number}  query={row['query']}  id={row['match_id']}  "
             f"window {start} .. {end}  trigger seq={row['trigger_seq']}  "
             f"({len(vertices)} vertex pairs, {len(edges)} edge pairs)"]
    hosts: dict[str, list[str]] = {}
    for v in vertices:
        hosts.setdefault(v["qvar"], []).append(_vertex_text(v["vertex"], v["label"]))
    for qvar, found in hosts.items():
        more = len(found) - CONSOLE_VERTICES
        tail = f", ... ({more:,} more)" if more > 0 else ""
        lines.append(f"  {qvar} -> {', '.join(found[:CONSOLE_VERTICES])}{tail}")
    for e in edges[:CONSOLE_EDGE_PAIRS]:
        lines.append(f"  {e['qedge']}: {e['src']} -> {e['dst']}{_edge_label(e['label'])} "
                     f"@ {clock.text(e['t'])}  seq={e['seq']}")
    if len(edges) > CONSOLE_EDGE_PAIRS:
        more = counted_noun(len(edges) - CONSOLE_EDGE_PAIRS, "more edge pair")
        lines.append(f"  ... and {more} (all of them in -o FILE.jsonl|.parquet|.dot)")
    return "\n".join(lines) + "\n"


def _vertex_text(vertex: str, label: str | None) -> str:
    """A stream vertex with its label, ``v:M``; a vertex without one (null, or the empty
    text of an empty CSV field) is its id alone."""
    return f"{vertex}:{label}" if label else vertex


def _edge_label(label: str | None) -> str:
    """An edge's label as shown after it, `` [x]``; nothing for none (null or empty)."""
    return f" [{label}]" if label else ""


def ddst_match_to_json(row: dict[str, Any], clock: Clock = SECONDS) -> str:
    """One DDST match component as a JSON object with the ``DDST_MATCH_SCHEMA`` keys;
    times are exact decimal seconds, as in :func:`match_to_json`."""
    edges = ",".join(
        "{"
        f'"qedge":{json.dumps(e["qedge"])},"seq":{int(e["seq"])},"t":{clock.json(e["t"])},'
        f'"src":{json.dumps(e["src"])},"dst":{json.dumps(e["dst"])},'
        f'"label":{json.dumps(e["label"])},"src_label":{json.dumps(e["src_label"])},'
        f'"dst_label":{json.dumps(e["dst_label"])}'
        "}"
        for e in row["edges"] or []
    )
    vertices = json.dumps(row["vertices"] or [], separators=(",", ":"))
    return (
        f'{{"query":{json.dumps(row["query"])},"match_id":{json.dumps(row["match_id"])},'
        f'"window_start":{clock.json(row["window_start"])},'
        f'"window_end":{clock.json(row["window_end"])},"trigger_seq":{int(row["trigger_seq"])},'
        f'"first_t":{clock.json(row["first_t"])},"vertices":{vertices},"edges":[{edges}]}}'
    )


def ddst_match_drawing(row: dict[str, Any], clock: Clock = SECONDS) -> MatchDrawing:
    """A DDST match component as a :class:`MatchDrawing`: stream vertices are ``(id,
    label)`` pairs, as the engines match them; a stream edge matching several query edges
    is one edge listing them all, then its label."""
    nodes: dict[tuple[str, str | None], tuple[str, list[str]]] = {}
    for v in row["vertices"] or []:
        key = (v["vertex"], v["label"])
        nodes.setdefault(key, (_vertex_text(*key), []))[1].append(v["qvar"])
    by_seq: dict[int, tuple[dict[str, Any], list[str]]] = {}
    for e in row["edges"] or []:
        for end, label in ((e["src"], e["src_label"]), (e["dst"], e["dst_label"])):
            nodes.setdefault((end, label), (_vertex_text(end, label), []))
        by_seq.setdefault(e["seq"], (e, []))[1].append(e["qedge"])
    edges = [((e["src"], e["src_label"]), (e["dst"], e["dst_label"]),
              ", ".join(qedges) + _edge_label(e["label"]), e["t"])
             for e, qedges in by_seq.values()]
    title = (f"{row['query']}  id={row['match_id']}  window "
             f"{_time_or_null(row['window_start'], clock)} .. {clock.text(row['window_end'])}"
             f"  trigger seq={row['trigger_seq']}")
    return MatchDrawing(title, nodes, edges, clock)


def _dot_text(text: str) -> str:
    """A DOT quoted string: backslashes and quotes escaped, line breaks as DOT's ``\\n``."""
    text = text.replace("\\", "\\\\").replace('"', '\\"')
    return '"' + text.replace("\r\n", "\\n").replace("\n", "\\n").replace("\r", "\\n") + '"'


def dot_cluster(graph: MatchDrawing, number: int) -> str:
    """One match as a DOT cluster (a ``subgraph``) whose node names carry ``number``, so
    that the clusters of one file never share a node."""
    ids = {key: _dot_text(f"m{number}/{i}") for i, key in enumerate(graph.nodes)}
    lines = [f"  subgraph {_dot_text(f'cluster_{number}')} {{",
             f"    label={_dot_text(f'match {number}  {graph.title}')};"]
    for key, (text, roles) in graph.nodes.items():
        label = text + "\n" + ", ".join(roles)
        lines.append(f"    {ids[key]} [label={_dot_text(label)}];")
    for src, dst, text, t in graph.edges:
        label = text + "\n" + graph.clock.text(t)
        lines.append(f"    {ids[src]} -> {ids[dst]} [label={_dot_text(label)}];")
    lines.append("  }")
    return "\n".join(lines) + "\n"


@dataclass(frozen=True)
class MatchFormat:
    """One kind of match record: its Arrow schema, how the console prints a row (given
    its 1-based number), how JSONL writes it, and the graph DOT draws; the flat columns
    the JSONL and Parquet files add (:mod:`graphcep.io.flat_columns`), and how times are
    written (:mod:`graphcep.io.time_text`)."""

    schema: pa.Schema
    text: Callable[[dict[str, Any], int], str]
    json: Callable[[dict[str, Any]], str]
    graph: Callable[[dict[str, Any]], MatchDrawing]
    #: the JSON lines of a whole table at once, the same text as ``json`` row by row
    #: (None from it: write this table row by row)
    json_lines: Callable[[pa.Table], list[str] | None] | None = None
    #: the query vertices' and edges' columns (None: none)
    flat: FlatColumns | None = None
    clock: Clock = SECONDS

    def with_flat(self, flat: FlatColumns | None) -> MatchFormat:
        """The format with the flat columns ``flat``."""
        return replace(self, flat=flat)

    def with_clock(self, clock: Clock) -> MatchFormat:
        """The format writing times as ``clock`` does (console, JSONL, DOT): each writer
        given ``clock``; the column-at-once JSON lines write seconds only, so an ISO clock
        writes row by row."""
        if clock == self.clock:
            return self
        return replace(self, text=partial(self.text, clock=clock),
                       json=partial(self.json, clock=clock),
                       graph=partial(self.graph, clock=clock),
                       json_lines=self.json_lines if clock == SECONDS else None, clock=clock)

    def lines(self, table: pa.Table) -> Iterator[str]:
        """The JSON line of every row of ``table`` (a table of :attr:`schema`), with the
        flat columns after the record's own keys."""
        lines = self.json_lines(table) if self.json_lines is not None else None
        if lines is None:
            lines = [self.json(row) for row in _rows(table, self.schema)]
        if self.flat is None or not self.flat.names(self.schema.names):
            return iter(lines)
        members = self.flat.json_members(table, self.schema.names, self.clock).to_pylist()
        return (line[:-1] + "," + more + "}" for line, more in zip(lines, members, strict=True))

    def file_schema(self) -> pa.Schema:
        """What a Parquet file holds: the record with its times as ``timestamp[us,
        UTC]``, then the flat columns."""
        schema = timestamp_schema(self.schema)
        if self.flat is None:
            return schema
        return pa.schema([*schema, *self.flat.fields(self.schema.names, timestamps=True)])

    def file_table(self, table: pa.Table) -> pa.Table:
        """A table of :attr:`schema` as :meth:`file_schema` holds it."""
        columns = list(table.columns)
        if self.flat is not None:
            columns += self.flat.columns(table)
        schema = self.file_schema()
        return pa.Table.from_arrays(columns, names=schema.names).cast(schema)


#: SAL matches (:data:`MATCH_SCHEMA`), the sinks' default.
SAL_MATCHES = MatchFormat(MATCH_SCHEMA, format_match, match_to_json, sal_match_drawing,
                          sal_json_lines)


def is_directory_target(path: str | os.PathLike, directory: bool | None = None) -> bool:
    """Whether a sink writes ``path`` as a directory of parts: ``directory`` when given,
    else when the path is a directory or ends with ``/``."""
    if directory is not None:
        return directory
    # Path() drops a trailing slash, so look at the text as given.
    return Path(path).is_dir() or os.fspath(path).endswith(("/", os.sep))


def _part_name(batch_id: int | str, suffix: str) -> str:
    if isinstance(batch_id, int):
        return f"part-{batch_id:08d}{suffix}"
    if not _SAFE_ID.match(str(batch_id)):
        raise ValueError(f"batch_id {batch_id!r} is not a safe file name part")
    return f"part-{batch_id}{suffix}"


def _next_part(directory: Path) -> int:
    numbers = [int(m.group(1)) for p in directory.iterdir() if (m := _PART.match(p.name))]
    return max(numbers) + 1 if numbers else 0


def temporary_beside(target: Path) -> Path:
    """A new empty file in ``target``'s directory, hidden, to write and rename over it;
    its mode is what ``open`` would give under the umask (``mkstemp`` makes it 0600,
    which the renamed file would keep)."""
    fd, tmp = tempfile.mkstemp(prefix=".tmp-", dir=target.parent)
    try:
        os.fchmod(fd, 0o666 & ~current_umask())
    finally:
        os.close(fd)
    return Path(tmp)


def current_umask() -> int:
    """The process's umask, read without changing it where Linux shows it (changing it
    for a moment, as the portable way does, would race with other threads' files)."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def replace_atomically(target: Path, write) -> None:
    """Write through a temporary file in the same directory, then rename over ``target``.
    A failed write names ``target`` (not the hidden temporary file, nor nothing: a write
    on an open file says no name)."""
    tmp = str(temporary_beside(target))
    try:
        write(tmp)
        os.replace(tmp, target)
    except OSError as err:
        number = err.errno or _arrow_errno(err)  # pyarrow says it in its text only
        if err.filename not in (None, tmp) or number is None:
            raise
        raise OSError(number, err.strerror or os.strerror(number), str(target)) from err
    finally:
        if os.path.exists(tmp):
            os.unlink(tmp)


def _arrow_errno(err: OSError) -> int | None:
    """The errno in a pyarrow ``OSError``'s text (``... Detail: [errno 28] No space
    left on device``), which it does not set."""
    found = re.search(r"\[errno (\d+)\]", str(err))
    return int(found.group(1)) if found else None


class _FileSink(Sink):
    """Shared logic of the JSONL, Parquet and DOT sinks: single file or part directory.

    ``whole=True`` (a run's one output) writes a single file under a temporary name
    beside it and renames it into place when closed: a run that fails or is interrupted
    before leaves no partial file, and an earlier output stays as it was. A target that
    exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a pipe) is written
    in place."""

    suffix = ""

    def __init__(self, path: str | os.PathLike, directory: bool | None = None,
                 matches: MatchFormat | None = None, whole: bool = False) -> None:
        self.path = Path(path)
        self.directory = is_directory_target(path, directory)
        self.matches = matches or SAL_MATCHES
        self.rows_written = 0
        self._seen: set[int | str] = set()
        self._closed = False
        self._target = self.path  # where the file ends up (self.path until then)
        if self.directory:
            self.path.mkdir(parents=True, exist_ok=True)
            return
        self.path.parent.mkdir(parents=True, exist_ok=True)
        if whole and (self.path.is_file() or not self.path.exists()):
            self._target = self.path.resolve()  # a symbolic link's file, the link kept
            self.path = temporary_beside(self._target)

    def close(self) -> None:
        """Finish the file (or the directory's last part) and, for ``whole``, rename it
        into place; idempotent."""
        if self._closed:
            return
        self._closed = True
        try:
            self._finish()
        except BaseException:
            self._discard()
            raise
        if self.path != self._target:
            os.replace(self.path, self._target)

    def __exit__(self, kind: object, *exc: object) -> None:
        if kind is None or self.path == self._target or self._closed:
            self.close()
            return
        self._closed = True  # failed or interrupted: the partial file goes
        with contextlib.suppress(Exception):
            self._finish()
        self._discard()

    def _discard(self) -> None:
        if self.path != self._target:
            self.path.unlink(missing_ok=True)

    def _finish(self) -> None:
        """Write what the format holds back until the end (the footer, the whole graph);
        each file sink's own (JSON lines, Parquet, DOT)."""
        raise NotImplementedError

    def write(self, table: pa.Table, batch_id: int | str | None = None) -> None:
        """Write a match table (see module docstring for ``batch_id``)."""
        self.write_chunks((table,), batch_id)

    def write_chunks(self, tables: Iterable[pa.Table],
                     batch_id: int | str | None = None) -> int:
        """Write one batch's matches chunk by chunk as they come, holding one chunk at a
        time: a directory's part is written to a temporary file and renamed into place
        once the last chunk is in (a re-run batch replaces it whole); a single file
        appends them (a repeated ``batch_id`` is ignored). How many rows are written."""
        if self._closed:
            raise ValueError("sink is closed")
        chunks = self._conformed(tables)
        written = 0
        if self.directory:
            part_id = _next_part(self.path) if batch_id is None else batch_id
            target = self.path / _part_name(part_id, self.suffix)

            def write_part(tmp: str) -> None:
                nonlocal written
                written = self._write_part(chunks, tmp)

            replace_atomically(target, write_part)
        elif batch_id is None or batch_id not in self._seen:
            for table in chunks:
                self._append(table)
                written += table.num_rows
        else:
            return 0
        if batch_id is not None:
            self._seen.add(batch_id)
        self.rows_written += written
        return written

    def _conformed(self, tables: Iterable[pa.Table]) -> Iterator[pa.Table]:
        schema = self.matches.schema
        for table in tables:
            yield table.select(schema.names).cast(schema)

    def _write_part(self, tables: Iterator[pa.Table], path: str) -> int:
        """Write the chunks as one part at ``path``; how many rows."""
        raise NotImplementedError

    def _append(self, table: pa.Table) -> None:
        raise NotImplementedError


class JsonlSink(_FileSink):
    """Matches as JSON lines (one object per match); see module docstring."""

    suffix = ".jsonl"

    def __init__(self, path: str | os.PathLike, directory: bool | None = None,
                 matches: MatchFormat | None = None, whole: bool = False) -> None:
        super().__init__(path, directory, matches, whole)
        self._out: TextIO | None = None

    def _write_part(self, tables: Iterator[pa.Table], path: str) -> int:
        rows = 0
        with open(path, "w", encoding="utf-8") as out:
            for table in tables:
                out.writelines(line + "\n" for line in self.matches.lines(table))
                rows += table.num_rows
        return rows

    def encoder(self) -> JsonLines | None:
        """What turns a table of matches into this sink's bytes elsewhere (a cell in an
        executor: :meth:`write_encoded` then joins the pieces into a part, the driver
        formatting nothing); None for a single file."""
        return JsonLines(self.matches) if self.directory else None

    def write_encoded(self, pieces: list[tuple[str, int]], batch_id: int | str) -> int:
        """Write one batch's part from ``pieces`` (a file of :meth:`encoder`'s bytes and
        its rows, each), in order, renamed into place once whole as :meth:`write_chunks`
        writes it; how many rows."""
        if self._closed:
            raise ValueError("sink is closed")

        def join(tmp: str) -> None:
            if len(pieces) == 1 and _linked(pieces[0][0], tmp):
                return
            with open(tmp, "wb") as out:
                for path, _ in pieces:
                    with open(path, "rb") as piece:
                        _copy_file(piece, out)

        replace_atomically(self.path / _part_name(batch_id, self.suffix), join)
        written = sum(rows for _, rows in pieces)
        self._seen.add(batch_id)
        self.rows_written += written
        return written

    def _append(self, table: pa.Table) -> None:
        if self._out is None:
            self._out = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 -- held open
        self._out.writelines(line + "\n" for line in self.matches.lines(table))
        self._out.flush()

    def _finish(self) -> None:
        """Close the file (an empty file is created when nothing was written)."""
        if not self.directory and self._out is None:
            self.path.touch()
        if self._out is not None:
            self._out.close()


def _linked(source: str, tmp: str) -> bool:
    """Make ``tmp`` (an empty file of :func:`temporary_beside`) a hard link to ``source``:
    a part that is one cell's piece costs no copy. False where the two lie on different
    file systems, or the file system has no hard links."""
    os.unlink(tmp)
    try:
        os.link(source, tmp)
    except OSError:
        open(tmp, "wb").close()  # back as it was: the caller copies into it
        return False
    return True


def _copy_file(source: BinaryIO, out: BinaryIO) -> None:
    """Append ``source`` to ``out`` in the kernel (``sendfile``) where it can; otherwise
    through a buffer, from where ``out`` stood."""
    out.flush()
    start = out.tell()
    try:
        size, offset = os.fstat(source.fileno()).st_size, 0
        while offset < size:
            sent = os.sendfile(out.fileno(), source.fileno(), offset, size - offset)
            if sent == 0:
                raise OSError("sendfile wrote nothing")
            offset += sent
        out.seek(start + size)
        return
    except (AttributeError, OSError):
        out.seek(start)
        out.truncate()
        source.seek(0)
    shutil.copyfileobj(source, out, 1 << 20)


@dataclass(frozen=True)
class JsonLines:
    """A table of matches as the JSON lines :class:`JsonlSink` writes of it, UTF-8 bytes
    (:meth:`JsonlSink.encoder`)."""

    matches: MatchFormat

    def __call__(self, table: pa.Table) -> bytes:
        schema = self.matches.schema
        lines = self.matches.lines(table.select(schema.names).cast(schema))
        return "".join(line + "\n" for line in lines).encode()


class ParquetSink(_FileSink):
    """Matches as Parquet with their nested schema (:data:`MATCH_SCHEMA` by default),
    times as ``timestamp[us, UTC]``, then the flat columns (see module docstring)."""

    suffix = ".parquet"

    def __init__(self, path: str | os.PathLike, directory: bool | None = None,
                 matches: MatchFormat | None = None, whole: bool = False) -> None:
        super().__init__(path, directory, matches, whole)
        self._writer: pq.ParquetWriter | None = None
        self._schema = self.matches.file_schema().with_metadata(_PARQUET_METADATA)

    def _write_part(self, tables: Iterator[pa.Table], path: str) -> int:
        """One row group a chunk (a valid empty file for none)."""
        rows = 0
        with pq.ParquetWriter(path, self._schema) as writer:
            for table in tables:
                writer.write_table(self._stored(table))
                rows += table.num_rows
        return rows

    def _append(self, table: pa.Table) -> None:
        if self._writer is None:
            self._writer = pq.ParquetWriter(self.path, self._schema)
        self._writer.write_table(self._stored(table))

    def _stored(self, table: pa.Table) -> pa.Table:
        """The record as the file holds it: timestamps, flat columns, the unit's note."""
        return self.matches.file_table(table).replace_schema_metadata(_PARQUET_METADATA)

    def _finish(self) -> None:
        """Finish the file (a valid empty file when nothing was written)."""
        if not self.directory and self._writer is None:
            self._writer = pq.ParquetWriter(self.path, self._schema)
        if self._writer is not None:
            self._writer.close()


_DOT_HEAD = "digraph matches {\n  rankdir=LR;\n  node [shape=box];\n"


def _dot_clusters(rows: list[dict[str, Any]], graph: Callable[[dict[str, Any]], MatchDrawing],
                  first: int) -> str:
    return "".join(dot_cluster(graph(row), first + i) for i, row in enumerate(rows))


def drawing_dot(graph: MatchDrawing) -> str:
    """One match as a whole Graphviz document (``graphcep draw --graphviz``)."""
    return _DOT_HEAD + dot_cluster(graph, 1) + "}\n"


def to_dot(table: pa.Table) -> str:
    """A match table (SAL's :data:`MATCH_SCHEMA` or DDST's, told apart by DDST's
    ``vertices`` column) as one Graphviz document, as :class:`DotSink` writes it: to save,
    or to render in a notebook (``graphviz.Source(to_dot(matches))``).

    Examples
    --------
    >>> from graphcep.events import Match, MatchedEdge, matches_to_table
    >>> m = Match("q", (("x", "a"), ("y", "b")), (MatchedEdge("e", 1_500_000, "a", "b", 0, 7),),
    ...           1_500_000, 1_500_000)
    >>> print(to_dot(matches_to_table([m])))  # doctest: +NORMALIZE_WHITESPACE
    digraph matches {
      rankdir=LR;
      node [shape=box];
      subgraph "cluster_1" {
        label="match 1  q  id=...  1.5s .. 1.5s";
        "m1/0" [label="a\\nx"];
        "m1/1" [label="b\\ny"];
        "m1/0" -> "m1/1" [label="e\\n1.5s"];
      }
    }
    <BLANKLINE>
    """
    graph = ddst_match_drawing if "vertices" in table.column_names else sal_match_drawing
    return _DOT_HEAD + _dot_clusters(table.to_pylist(), graph, 1) + "}\n"


class DotSink(_FileSink):
    """Matches as Graphviz DOT: one ``digraph`` per file (per part in a directory), a
    cluster per match; see module docstring. Matches are numbered from 1 in the order
    written, per file."""

    suffix = ".dot"

    def __init__(self, path: str | os.PathLike, directory: bool | None = None,
                 matches: MatchFormat | None = None, whole: bool = False) -> None:
        super().__init__(path, directory, matches, whole)
        self._out: TextIO | None = None
        self._numbered = 0

    def _clusters(self, table: pa.Table, first: int) -> str:
        return _dot_clusters(_rows(table, self.matches.schema), self.matches.graph, first)

    def _write_part(self, tables: Iterator[pa.Table], path: str) -> int:
        rows = 0
        with open(path, "w", encoding="utf-8") as out:
            out.write(_DOT_HEAD)
            for table in tables:
                out.write(self._clusters(table, rows + 1))
                rows += table.num_rows
            out.write("}\n")
        return rows

    def _append(self, table: pa.Table) -> None:
        if self._out is None:
            self._out = open(self.path, "w", encoding="utf-8")  # noqa: SIM115 -- held open
            self._out.write(_DOT_HEAD)
        self._out.write(self._clusters(table, self._numbered + 1))
        self._numbered += table.num_rows
        self._out.flush()

    def _finish(self) -> None:
        """End the graph (an empty graph when nothing was written)."""
        if not self.directory:
            if self._out is None:
                self._out = open(self.path, "w", encoding="utf-8")  # noqa: SIM115
                self._out.write(_DOT_HEAD)
            self._out.write("}\n")
            self._out.close()


_SINK_SUFFIXES = {".jsonl": "jsonl", ".ndjson": "jsonl", ".json": "jsonl", ".parquet": "parquet",
                  ".dot": "dot", ".gv": "dot"}


#: The formats :func:`make_sink` writes (``--output-format``).
SINK_FORMATS = ("jsonl", "parquet", "dot", "console")


class SinkError(ValueError):
    """An output target that cannot be written (unknown format, no permission, a directory
    where a file is wanted...); raised by :func:`check_target` before any work is done."""


def check_target(target: str | os.PathLike | None, fmt: str | None = None,
                 directory: bool | None = None, role: str = "output") -> str:
    """Check that :func:`make_sink` can write ``target``, before a run computes anything;
    return the format it will write (``"console"`` for ``None`` or ``"-"``).

    A name without a known suffix needs ``fmt`` (``-o /dev/null`` with ``jsonl``). The
    console takes the matches only, in their console form: a file format for it, ``-`` for
    another ``role`` or a file with ``fmt="console"`` is refused (never silently ignored,
    nor written as a file named ``-``). Nothing
    is created or truncated: a run that fails later leaves an earlier output as it was.
    ``role`` names the target in messages (``"output"``, ``"rejects"``).

    Raises
    ------
    SinkError
        For an unknown format, a file target that is a directory or cannot be written, or
        a directory target under a path that cannot hold it.

    Examples
    --------
    >>> check_target("-"), check_target("out/matches.jsonl"), check_target("/dev/null", "jsonl")
    ('console', 'jsonl', 'jsonl')
    >>> check_target("matches.txt")
    Traceback (most recent call last):
    ...
    graphcep.io.sinks.SinkError: cannot tell the output format of 'matches.txt' from its name (known: .jsonl, .ndjson, .json, .parquet, .dot, .gv); rename it or give the format (--output-format jsonl|parquet|dot|console)
    """
    if target is None or str(target) == "-":
        return _console_target(fmt, role)
    if fmt == "console":
        raise SinkError(f"{role} {str(target)!r} is a file, and --output-format console prints "
                        "the matches: leave out one of them")
    kind = fmt or sink_format(target)
    if kind is None:
        raise SinkError(
            f"cannot tell the output format of {str(target)!r} from its name (known: "
            f"{', '.join(_SINK_SUFFIXES)}); rename it or give the format "
            f"(--output-format {'|'.join(SINK_FORMATS)})"
        )
    if kind not in SINK_FORMATS:
        raise SinkError(f"unknown output format {kind!r}; use {', '.join(SINK_FORMATS)}")
    path = Path(target)
    if is_directory_target(target, directory):
        if path.exists() and not path.is_dir():
            raise SinkError(f"{role} {str(target)!r} exists and is not a directory (one part "
                            "file per micro-batch goes into a directory)")
        _check_creatable(path, target, role)
    elif path.is_dir():
        raise SinkError(f"{role} {str(target)!r} is a directory; name a file")
    elif path.exists():
        if not os.access(path, os.W_OK):
            raise SinkError(f"{role} {str(target)!r} cannot be written (permission denied)")
    else:
        _check_creatable(path, target, role)
    return kind


def refuse_earlier_parts(target: str | os.PathLike | None, role: str = "output") -> None:
    """A batch run's directory target holds no ``part-*`` files yet: the run's part would
    be added beside them (:func:`_next_part`), and the directory, read as one data set,
    would mix the runs (each match twice, for the same command run again). A stream's
    restart writes into its own parts on purpose and does not call this.

    Raises
    ------
    SinkError
        Naming how many parts are there and the first.
    """
    if target is None or str(target) == "-" or not is_directory_target(target):
        return
    path = Path(target)
    parts = sorted(p.name for p in path.iterdir() if _PART.match(p.name)) if path.is_dir() else []
    if parts:
        count = f"{len(parts)} part file{'s' if len(parts) > 1 else ''}"
        raise SinkError(f"{role} {str(target)!r} already holds {count} of an earlier run "
                        f"({parts[0]}{' ...' if len(parts) > 1 else ''}): this run's "
                        "matches would be added to them; remove them or name another "
                        "directory")


def refuse_files_among_parts(parts: str | os.PathLike | None,
                             targets: dict[str, str | os.PathLike | None]) -> None:
    """Other outputs (pictures, pages, plots, rejects, late edges) stay out of a directory
    of match parts (``-o DIR/``, or the directory ``draw`` reads): pyarrow and Spark read
    it as one data set, files and subdirectories alike, and would take them for parts.
    ``parts`` is ``None`` when the matches go to a file or the console.

    Raises
    ------
    SinkError
        Naming the first target inside ``parts``.
    """
    if parts is None:
        return
    root = Path(parts).resolve()
    for role, target in targets.items():
        if target is not None and root in (where := Path(target).resolve(), *where.parents):
            raise SinkError(f"{role} {target} is inside {parts}, a directory of match parts: "
                            "read as one data set (pyarrow, Spark), it would take what "
                            f"{role} writes for parts; name a place outside it")


def _console_target(fmt: str | None, role: str) -> str:
    """``"console"`` for the console target (``None``, ``-``) of the matches in their console
    form; a file format or another role asks for a file (a file named ``-`` would be
    written otherwise)."""
    if role != "output":
        raise SinkError(f"{role} '-' is the console, which shows the matches: name a file "
                        "(/dev/stdout or /dev/stderr writes there)")
    if fmt not in (None, "console"):
        raise SinkError(f"--output-format {fmt} writes a file, and the output is the console: "
                        f"name it with -o FILE (-o /dev/stdout --output-format {fmt} pipes it)")
    return "console"


def _check_creatable(path: Path, target: str | os.PathLike, role: str) -> None:
    """The nearest existing ancestor of ``path`` is a directory this process may write."""
    ancestor = path.absolute().parent
    while not ancestor.exists():
        ancestor = ancestor.parent
    if path.exists():
        return
    if not ancestor.is_dir():
        raise SinkError(f"{role} {str(target)!r} cannot be created: {str(ancestor)!r} is "
                        "not a directory")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise SinkError(f"{role} {str(target)!r} cannot be created in {str(ancestor)!r} "
                        "(permission denied)")


@contextlib.contextmanager
def writing(target: str | None) -> Iterator[None]:
    """Name ``target`` in an :class:`OSError` raised while writing it (a full disk says
    which output it could not finish); ``main`` prints it in one line, exit status 1."""
    try:
        yield
    except OSError as err:
        if err.filename or target in (None, "-") or isinstance(err, BrokenPipeError):
            raise
        raise OSError(err.errno, err.strerror or str(err), target) from err


def sink_format(target: str | os.PathLike) -> str | None:
    """The sink format a path names by its suffix (``.jsonl``/``.ndjson``/``.json``,
    ``.parquet``, ``.dot``/``.gv``; a trailing ``/`` is ignored), or ``None``."""
    return _SINK_SUFFIXES.get(Path(target).suffix.lower())  # Path() drops a trailing "/"


def make_sink(
    target: str | os.PathLike | None,
    fmt: str | None = None,
    limit: int | None = None,
    directory: bool | None = None,
    matches: MatchFormat | None = None,
    whole: bool = False,
) -> Sink:
    """A sink for ``target``.

    Parameters
    ----------
    target
        ``None`` or ``"-"`` for the console; otherwise a file or directory path.
    fmt
        ``"console"``, ``"jsonl"``, ``"parquet"`` or ``"dot"``; ``None`` = from the suffix
        of the path (``.jsonl``/``.ndjson``/``.json``, ``.parquet``, ``.dot``/``.gv``; a
        trailing ``/`` is ignored).
    limit
        Console only: how many matches to print.
    directory
        Force directory (part files) or single-file mode; ``None`` = directory when the
        path exists as one or ends with ``/``.
    matches
        The kind of match record written (default :data:`SAL_MATCHES`).
    whole
        A single file appears whole when the sink is closed, or not at all (a run's
        output; see :class:`JsonlSink`'s base).
    """
    if target is None or str(target) == "-" or fmt == "console":
        return ConsoleSink(limit=limit, matches=matches)
    path = Path(target)
    kind = fmt or sink_format(target)
    if kind is None:
        raise SinkError(f"cannot tell the sink format of {str(target)!r}; give fmt")
    if directory is None and str(target).endswith(("/", os.sep)):
        directory = True
    sinks = {"jsonl": JsonlSink, "parquet": ParquetSink, "dot": DotSink}
    if kind in sinks:
        return sinks[kind](path, directory, matches, whole)
    raise SinkError(f"unknown sink format {kind!r}; use console, jsonl, parquet or dot")


__all__ = [
    "SAL_MATCHES",
    "SINK_FORMATS",
    "CONSOLE_EDGE_PAIRS",
    "CONSOLE_VERTICES",
    "ConsoleSink",
    "DotSink",
    "MatchDrawing",
    "JsonlSink",
    "MatchFormat",
    "ParquetSink",
    "Sink",
    "SinkError",
    "check_target",
    "ddst_match_drawing",
    "ddst_match_to_json",
    "dot_cluster",
    "drawing_dot",
    "format_ddst_match",
    "format_match",
    "is_directory_target",
    "make_sink",
    "refuse_earlier_parts",
    "refuse_files_among_parts",
    "sal_match_drawing",
    "match_to_json",
    "sink_format",
    "to_dot",
    "writing",
]
