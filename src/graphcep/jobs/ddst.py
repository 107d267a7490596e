"""DDST jobs: an event pattern over a graph stream and the algorithm that runs it.

Xu et al., "Event pattern matching over graph streams" (PVLDB 2014); the semantics are
stated in :mod:`graphcep.engines.ddst.baseline`. :func:`load` reads a ``.ddst`` file with
the command line's options; :class:`DDSTJob` is what the runtimes replay. Its extent is the
query's window (two windows with ``report="new"``); labels the query asks for and no edge
carries are reported as warnings (:meth:`DDSTJob.absent_labels`), since a run that matches
nothing for want of labelling says nothing about the pattern.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.lang.ddst import parse_ddst
>>> job = DDSTJob(parse_ddst("VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; "
...                          "WITHIN 10 s"))
>>> job.extent()
Extent(size=10000000, unit='us')
>>> edges = pa.table({"t": [0, 1_000_000], "src": ["a", "b"], "dst": ["b", "a"]})
>>> from graphcep.runtime.local import run_job
>>> matches, _ = run_job(job, edges)
>>> [[e["qedge"] for e in row] for row in matches.column("edges").to_pylist()]
[['x', 'y']]
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import Engine
from graphcep.engines.ddst.schema import COLORING_MAX_BITS, DDST_MATCH_SCHEMA, REPORT_MODES
from graphcep.events import format_seconds
from graphcep.hashing import salt64
from graphcep.io.flat_columns import FlatColumns
from graphcep.io.sinks import (
    MatchFormat,
    ddst_match_drawing,
    ddst_match_to_json,
    format_ddst_match,
)
from graphcep.jobs.base import Extent, Instances, JobBase
from graphcep.patterns.ddst import DDSTQuery
from graphcep.patterns.subgraph import QueryError

#: Why no cells split a DDST pattern exactly, whatever pattern node keys them: a match
#: component is a connected component of the match graph of the window's *whole* graph
#: (the paper's preliminaries on match graphs), and two data nodes playing the key
#: pattern node join one component through a node they share (``a1 -> b`` and
#: ``a2 -> b`` for ``A -> B``), which cells keyed by the key node's data node would
#: report as two smaller components; and the degree condition counts each data node's
#: neighbours over the whole window.
NO_CELLS = ("its match components are the connected components of the window's whole "
            "match graph: two nodes playing one pattern node join one component through a "
            "node they share (a1 -> b and a2 -> b for A -> B), which cells keyed by that "
            "pattern node would report apart")

#: DDST match components (:data:`DDST_MATCH_SCHEMA`) on the console, in JSONL and in DOT.
DDST_MATCHES = MatchFormat(DDST_MATCH_SCHEMA, format_ddst_match, ddst_match_to_json,
                           ddst_match_drawing)

#: ``--ddst-engine`` name -> (module, class); imported on use, so an algorithm's module is
#: loaded only by the jobs that run it.
DDST_ENGINES: dict[str, tuple[str, str]] = {
    "baseline": ("graphcep.engines.ddst.baseline", "DDSTBaselineEngine"),
    "signature": ("graphcep.engines.ddst.signature", "DDSTSignatureEngine"),
    "coloring": ("graphcep.engines.ddst.coloring", "DDSTColoringEngine"),
}
#: The engines this kind runs (the protocol suite runs each).
ENGINES = DDST_ENGINES
#: The engine a DDST job runs unless told otherwise: all three report the same matches, and
#: coloring was at or above the baseline in every configuration of ``bench/ddst.py`` (the
#: signature engine falls below it where most arrivals pass its filter).
DEFAULT_DDST_ENGINE = "coloring"

def engine_for(query: DDSTQuery, chosen: str | None) -> str:
    """The engine a job over ``query`` runs: ``chosen`` (``--ddst-engine``), else the
    default, or the signature engine for a query wider than the coloring engine takes."""
    if chosen:
        return chosen
    wide = max(len(query.edges), len(query.vertices)) > COLORING_MAX_BITS
    return "signature" if wide else DEFAULT_DDST_ENGINE

#: SAL options a DDST query has no use for, with what DDST does instead.
NOT_FOR = {
    "query_name": "a DDST file holds one query, named by its QUERY statement",
    "window": "a DDST query gives its window with WITHIN",
    "max_duration": "a DDST window is over start times, so durations bound nothing",
    "homomorphic": "DDST's dual simulation already lets query vertices share stream vertices",
}


def load(path: str, options: Mapping[str, Any]) -> DDSTJob:
    """A ``.ddst`` file as a job with the command line's options; SAL options are refused,
    saying what DDST does instead."""
    from graphcep.lang.ddst import parse_ddst_file

    query = parse_ddst_file(path)
    engine = engine_for(query, options.get("ddst_engine"))
    job = DDSTJob(query, engine, engine_options(engine, options))
    try:
        job.new_engine()  # an option the engine rejects (p not prime) fails here, clearly
    except ValueError as err:
        raise QueryError(f"--ddst-engine {job.engine}: {err}") from None
    return job


def engine_options(engine: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """Keyword options for the DDST engine from the command line's."""
    out: dict[str, Any] = {}
    if options.get("max_window_edges") is not None:
        out["max_window_edges"] = options["max_window_edges"]
    if (options.get("ddst_report") or REPORT_MODES[0]) != REPORT_MODES[0]:
        out["report"] = options["ddst_report"]
    for flag, key in (("signature_p", "p"), ("signature_seed", "seed")):
        value = options.get(flag)
        if value is None:
            continue
        if engine != "signature":
            raise QueryError(f"--{flag.replace('_', '-')} applies to --ddst-engine signature "
                             f"only (got {engine})")
        out[key] = value
    return out


def accepts(pattern: Any) -> bool:
    """Whether ``pattern`` is a DDST pattern object (:func:`graphcep.jobs.as_job`)."""
    return isinstance(pattern, DDSTQuery)


def from_pattern(pattern: DDSTQuery, **options: Any) -> DDSTJob:
    """A bare DDST query as a job (``engine=``, engine keyword ``options=``)."""
    return DDSTJob(pattern, **{**options, "engine": engine_for(pattern, options.get("engine"))})


#: Where a DDST query's labels are looked for: edge labels, and vertex labels at either end.
LABEL_COLUMNS = {"edge label": ("label",), "vertex label": ("src_label", "dst_label")}
#: Reports holding this many edge pairs on average are said while a run writes them
#: (:meth:`DDSTJob.output_warnings`).
LARGE_REPORT = 1_000


@dataclass(frozen=True)
class DDSTJob(JobBase):
    """A DDST event pattern and the algorithm that runs it (``engine``, a key of
    :data:`DDST_ENGINES`, with its keyword ``options``).

    A time window ``WITHIN W`` holds the edges with ``t >= t_k - W``: a shard starting at
    ``s`` needs the edges of ``[s - W, s)`` as warm-up. A count window of ``N`` edges
    needs the ``N - 1`` edges before the shard's first. DDST engines report a window's
    match component only at the window's newest edge, so warm-up pushes only fill state.

    With ``report="new"`` a report leaves out the pairs earlier reports held, so a shard
    must also replay the reports that held pairs its windows can still hold: those of the
    arrivals within one window before the shard, whose own windows reach one more window
    back. The warm-up is two windows (``2W``, or ``2(N - 1)`` edges).
    """

    query: DDSTQuery
    engine: str = DEFAULT_DDST_ENGINE
    options: Mapping[str, Any] = field(default_factory=dict)

    @property
    def output(self) -> MatchFormat:
        """Match components, with per query vertex the list of its stream vertices and
        per query edge the list of its stream edges' ``seq``."""
        return DDST_MATCHES.with_flat(FlatColumns(
            "ddst", tuple(v.name for v in self.query.vertices),
            tuple(e.name for e in self.query.edges)))

    def __post_init__(self) -> None:
        if self.engine not in DDST_ENGINES:
            raise QueryError(f"unknown DDST engine {self.engine!r}: "
                             f"{', '.join(DDST_ENGINES)}")

    @property
    def name(self) -> str:
        return self.query.name

    @property
    def whole_stream(self) -> bool:
        return False

    def bind(self, longest_duration_us: int) -> DDSTJob:
        return self  # DDST windows look at start times only

    def extent(self) -> Extent:
        window = self.query.window
        reach = 2 if self.options.get("report") == "new" else 1  # see the class docstring
        if window.kind == "count":
            return Extent(reach * (window.size - 1), "edges")
        return Extent(reach * window.size)

    def needed_columns(self, available: list[str]) -> list[str]:
        wanted = {"t", "src", "dst", "seq", "label", "src_label", "dst_label"}
        return [c for c in available if c in wanted]

    def check_columns(self, available: list[str]) -> None:
        """Refuse a stream without a label column the query reads: every edge would carry no
        label there, and no edge could match a labelled query edge or vertex -- a run that
        reports nothing for want of labelling, not for want of matches."""
        q = self.query
        vlabel = {v.name: v.label for v in q.vertices}
        wanted = {
            "label": ("edge labels", {e.label for e in q.edges}),
            "src_label": ("source vertex labels", {vlabel[e.src] for e in q.edges}),
            "dst_label": ("destination vertex labels", {vlabel[e.dst] for e in q.edges}),
        }
        for column, (what, labels) in wanted.items():
            labels.discard(None)
            if labels and column not in available:
                raise QueryError(
                    f"query {q.name!r} reads {what} ({', '.join(map(repr, sorted(labels)))}) "
                    f"from the field {column!r}, which the stream lacks: no edge could match. "
                    f"Fields: {list(available)}. Label the stream first (graphcep.io.labels; "
                    f"see examples/ddst/README.md)"
                )

    def wanted_labels(self) -> dict[str, set[str]]:
        """The labels the query asks for, by kind (``edge label``, ``vertex label``)."""
        q = self.query
        return {"edge label": {e.label for e in q.edges if e.label is not None},
                "vertex label": {v.label for v in q.vertices if v.label is not None}}

    def labels_present(self, edges: pa.Table) -> dict[str, set[str]]:
        """The query's labels found in each label column of ``edges`` (as text)."""
        wanted = pa.array(sorted(set().union(*self.wanted_labels().values())), pa.string())
        present: dict[str, set[str]] = {}
        for column in set().union(*LABEL_COLUMNS.values()):
            if column in edges.column_names and len(wanted):
                values = pc.unique(edges.column(column).cast(pa.string()))
                present[column] = set(pc.filter(values, pc.is_in(values, wanted)).to_pylist())
        return present

    def absent_labels(self, present: dict[str, set[str]]) -> list[str]:
        """The labels the query asks for that no edge carries, in words (``'congested'
        (edge label)``), given the values ``present`` in each label column (as
        :meth:`labels_present` gives them); the query edges and vertices wanting them can
        never match. Labels are compared as text, as the query writes them."""
        absent = []
        for what, labels in self.wanted_labels().items():
            seen = set().union(*(present.get(c, set()) for c in LABEL_COLUMNS[what]))
            absent += [f"{label!r} ({what})" for label in sorted(labels - seen)]
        return absent

    def output_warnings(self, matches: pa.Table) -> list[str]:
        """Reports of whole components (``report="component"``) that hold at least
        :data:`LARGE_REPORT` edge pairs on average: every arrival in a component writes it
        again, so the output grows with the square of the window (an unlabelled pattern
        over a dense stream is one giant component); ``report="new"`` writes each pair
        once."""
        if self.options.get("report") == "new" or not matches.num_rows:
            return []
        pairs = pc.sum(pc.list_value_length(matches.column("edges"))).as_py() or 0
        average = pairs / matches.num_rows
        if average < LARGE_REPORT:
            return []
        return [f"its reports hold {average:,.0f} edge pairs on average: each is a whole "
                "match component, written again by every arrival in it, so the output "
                "grows with the square of the window (--ddst-report new writes each pair "
                "once)"]

    def orient(self, edges: pa.Table) -> pa.Table:
        return edges  # DDST edges are read as the stream gives them

    def instances(self, matches: pa.Table) -> Instances:
        """A report is its component's stream edges: the identity hashes the query and
        their sorted ``seq`` (the ``match_id`` names only the trigger, and a window that
        holds fewer edges may report a smaller component at the same trigger)."""
        keys = [f"{q}|{int(salt64(','.join(map(str, sorted({e['seq'] for e in edges}))))):016x}"
                for q, edges in zip(matches.column("query").to_pylist(),
                                    matches.column("edges").to_pylist(), strict=True)]
        return Instances(keys, matches.column("first_t").to_numpy().astype(np.int64),
                         matches.column("window_end").to_numpy().astype(np.int64))

    def summary_fields(self) -> dict[str, Any]:
        return {"ddst_engine": self.engine}

    def cell_query(self) -> Any:
        raise QueryError(f"{self.name!r} is a DDST pattern: {NO_CELLS}")

    def new_engine(self, threads: int | None = 1) -> Engine:
        # threads: DDST engines run one thread (Spark runs one task per core)
        module, cls = DDST_ENGINES[self.engine]
        return getattr(importlib.import_module(module), cls)(self.query, **self.options)

    def describe(self) -> list[str]:
        """The window, the timing order and the plan, in words (``graphcep explain``)."""
        q, w = self.query, self.query.window
        warm = self.extent()
        if w.kind == "count":
            window = f"window: the {w.size} most recent edges, one window per arriving edge"
            shards = (f"Spark: shards cut by edge rank, each warmed up on the {warm.size} "
                      "edges before its first")
        else:
            window = (f"window: {w} -- the edges with t >= t_k - {format_seconds(w.size)} s, "
                      "one window per arriving edge e_k")
            shards = (f"Spark: time shards, each warmed up on the {format_seconds(warm.size)} "
                      "s before its start")
        order = ", ".join(f"{a} < {b}" for a, b in sorted(q.closure())) or "none"
        return [
            f"DDST query {q.name}: {len(q.vertices)} vertices, {len(q.edges)} edges",
            q.to_text().rstrip(),
            "",
            window,
            f"timing order (closed): {order}",
            f"plan ({self.engine} engine): {self.new_engine().describe()}; when the edge is "
            "matched, its match component is reported"
            + (" (only its pairs no earlier report held)"
               if self.options.get("report") == "new" else ""),
            shards,
        ]
