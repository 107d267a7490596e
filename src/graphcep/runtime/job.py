"""Matching jobs: what a runtime replays over a stream.

A job is a query bound to everything a runtime needs to replay it, shard by shard,
without knowing which matching semantics it runs (:class:`ReplayJob`): how far back a
shard must read to warm its engine up (:class:`Extent`), which columns the engine reads,
how edges are oriented, how to build a fresh engine, and how its match records look.
Two kinds exist: :class:`Job` (a SAL program's query bound to a stream format) and
:class:`DDSTJob` (a DDST event pattern and the algorithm that runs it). Both runtimes
start here, so the way a query is resolved against a stream is written once.
"""

from __future__ import annotations

import importlib
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any, ClassVar, Literal, Protocol

import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import Engine
from graphcep.engines.ddst.reports import DDST_MATCH_SCHEMA
from graphcep.engines.difference_bounds import check_window
from graphcep.engines.subgraph.plan import compile_query
from graphcep.events import CORE_NAMES, format_seconds
from graphcep.features.feature_set import FeatureSet
from graphcep.io.formats import FORMAT_FIELD_ALIASES, resolve_field
from graphcep.io.sinks import (
    SAL_MATCHES,
    MatchFormat,
    ddst_match_drawing,
    ddst_match_to_json,
    format_ddst_match,
)
from graphcep.patterns.ddst import DDSTQuery
from graphcep.patterns.program import Program
from graphcep.patterns.subgraph import EdgePredicate, QueryError, SubgraphQuery
from graphcep.runtime.local import make_engine

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
#: What each engine does per arriving edge, in words (``graphcep explain``).
DDST_PLANS: dict[str, str] = {
    "baseline": "at each arriving edge that fits a query edge, Algorithm DDST runs on the "
                "edge's candidate component in its window",
    "signature": "each edge that fits a query edge updates its candidate group's label "
                 "residues mod p; Algorithm DDST runs on the group only when the edge fits a "
                 "last query edge of the timing order and the residues match the query's "
                 "signature",
    "coloring": "each edge that fits a query edge is colored black, or red where both its "
                "ends can host its query edges, and red edges form red components "
                "(union-find); Algorithm DDST runs only when the edge can close a match (its "
                "component's counts full, a timing witness possible, local rounds passed)",
}
#: The engine a DDST job runs unless told otherwise: all three report the same matches, and
#: coloring was at or above the baseline in every configuration of ``bench/ddst.py`` (the
#: signature engine falls below it where most arrivals pass its filter).
DEFAULT_DDST_ENGINE = "coloring"


@dataclass(frozen=True)
class Extent:
    """How far before a shard's first edge its engine must have seen the stream, so that
    every window ending in the shard is whole: ``size`` microseconds of event time
    (``unit="us"``), or the ``size`` edges before it in stream order (``unit="edges"``,
    for count windows, whose reach in time is unknown until the stream is ranked)."""

    size: int
    unit: Literal["us", "edges"] = "us"


class ReplayJob(Protocol):
    """What the in-process and Spark runtimes replay (:class:`Job`, :class:`DDSTJob`).

    The runtimes rely on one property of every engine a job builds: a push reports
    exactly the matches *triggered* by the edges it delivers, so edges before a shard
    (its warm-up) only fill state, and a match is reported by the shard holding the edge
    that triggers it -- exactly once.
    """

    #: how matches are written, with their Arrow schema
    output: MatchFormat

    @property
    def name(self) -> str: ...

    @property
    def whole_stream(self) -> bool:
        """Whether the query needs the whole stream in one engine (no sharding)."""
        ...

    def bind(self, longest_duration_us: int) -> ReplayJob:
        """The job with bounds that default to the data's (the longest edge duration)."""
        ...

    def extent(self) -> Extent: ...

    def needed_columns(self, available: list[str]) -> list[str]: ...

    def check_columns(self, available: list[str]) -> None:
        """Refuse, with a :class:`QueryError` naming the fields, a stream that lacks fields
        the query cannot do without."""
        ...

    def orient(self, edges: pa.Table) -> pa.Table: ...

    def new_engine(self, threads: int | None = 1) -> Engine: ...


@dataclass
class Job:
    """What to run: the query, how its names map onto the stream, and engine options."""

    program: Program
    query: SubgraphQuery
    fmt: str | None = None
    homomorphic: bool = False
    max_duration_us: int | None = None
    swap_endpoints: bool = False
    field_aliases: dict[str, str] = field(default_factory=dict)
    max_window_edges: int | None = None  # the engine's state bound (None: its default)

    output: ClassVar[MatchFormat] = SAL_MATCHES

    @classmethod
    def create(
        cls,
        program: Program,
        query_name: str | None = None,
        fmt: str | None = None,
        *,
        window_us: int | None = None,
        homomorphic: bool = False,
        max_duration_us: int | None = None,
        max_window_edges: int | None = None,
    ) -> Job:
        if max_window_edges is not None and max_window_edges < 1:
            raise QueryError("max_window_edges must be at least 1")
        query = _with_stream_filters(program, program.query(query_name))
        if window_us is not None:
            # a query that bounds itself keeps its matches: a narrower window is refused
            check_window(query, window_us, max_duration_us)
            query = query.with_window(window_us)
        aliases = dict(FORMAT_FIELD_ALIASES.get(fmt or "", {}))
        source = resolve_field(fmt, query.source_field)
        target = resolve_field(fmt, query.target_field)
        if (source, target) == ("src", "dst"):
            swap = False
        elif (source, target) == ("dst", "src"):
            swap = True
        else:
            raise QueryError(
                f"query {query.name!r}: source({query.source_field}) and "
                f"target({query.target_field}) must name the stream's two endpoint fields "
                f"(for {fmt or 'this'} streams: {_endpoint_names(fmt)})"
            )
        missing = sorted({c.feature for c in query.vertex_constraints} - set(program.features))
        if missing:
            raise QueryError(
                f"query {query.name!r} uses feature(s) {missing} that the program does not "
                "define; add e.g. 'Top1000 = FOREACH Netflows GENERATE topk(DestIp, 100000, "
                "10000, 1000);'"
            )
        return cls(program, query, fmt, homomorphic, max_duration_us, swap, aliases,
                   max_window_edges)

    def features(self) -> FeatureSet | None:
        """A fresh feature set for one engine (None when the query uses no feature)."""
        used = {c.feature for c in self.query.vertex_constraints}
        if not used:
            return None
        return FeatureSet({n: self.program.features[n] for n in sorted(used)}, self.field_aliases)

    @property
    def name(self) -> str:
        return self.query.name

    @property
    def whole_stream(self) -> bool:
        # a feature such as topk counts items over the whole stream, which no shard sees
        return bool(self.query.vertex_constraints)

    def bind(self, longest_duration_us: int) -> Job:
        if self.max_duration_us is not None:
            return self
        return replace(self, max_duration_us=longest_duration_us)

    def extent(self) -> Extent:
        """The largest gap between two start times in a match (durations bound as bound)."""
        return Extent(compile_query(self.query, self.max_duration_us).extent_us)

    def new_engine(self, threads: int | None = 1) -> Engine:
        return make_engine(self.query, features=self.features(), threads=threads,
                           **self.engine_options())

    def engine_options(self) -> dict:
        return {
            "homomorphic": self.homomorphic,
            "max_duration_us": self.max_duration_us,
            "field_aliases": self.field_aliases,
            "max_window_edges": self.max_window_edges,  # make_engine: None is the default
        }

    def needed_columns(self, available: list[str]) -> list[str]:
        """The edge columns the engine, the features and the match records read, in
        ``available``'s order: every core column (a match record carries each edge's
        ``dur`` even when no constraint reads it), the predicates' and features' fields."""
        wanted = {*CORE_NAMES, "pos"}
        wanted |= {self.field_aliases.get(p.field, p.field) for p in self.query.edge_predicates}
        for name in {c.feature for c in self.query.vertex_constraints}:
            field_name = self.program.features[name].field
            wanted.add(self.field_aliases.get(field_name, field_name))
        return [c for c in available if c in wanted]

    def check_columns(self, available: list[str]) -> None:
        """Refuse a stream without a field a vertex feature counts (``topk(DestIp, ...)``):
        features are updated at every edge, so the run would stop at its first batch. A
        predicate names a missing field where it is evaluated
        (:func:`~graphcep.engines.subgraph.predicate_mask`), on every engine."""
        for name in sorted({c.feature for c in self.query.vertex_constraints}):
            feature = self.program.features[name]
            column = self.field_aliases.get(feature.field, feature.field)
            if column not in available:
                fields = ", ".join(c for c in available if c not in ("seq", "pos"))
                raise QueryError(
                    f"feature {name!r} ({feature.operator}({feature.field}, ...)) counts the "
                    f"field {feature.field!r}, which the stream lacks (fields: {fields})"
                )

    def orient(self, edges: pa.Table) -> pa.Table:
        """Swap ``src``/``dst`` when the query reads edges the other way round."""
        if not self.swap_endpoints:
            return edges
        names = edges.column_names
        i, j = names.index("src"), names.index("dst")
        src, dst = edges.column(i), edges.column(j)
        return edges.set_column(i, "src", dst).set_column(j, "dst", src)


#: Where a DDST query's labels are looked for: edge labels, and vertex labels at either end.
LABEL_COLUMNS = {"edge label": ("label",), "vertex label": ("src_label", "dst_label")}


@dataclass(frozen=True)
class DDSTJob:
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

    output: ClassVar[MatchFormat] = DDST_MATCHES

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

    def orient(self, edges: pa.Table) -> pa.Table:
        return edges  # DDST edges are read as the stream gives them

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
            f"plan ({self.engine} engine): {DDST_PLANS[self.engine]}; when the edge is "
            "matched, its match component is reported"
            + (" (only its pairs no earlier report held)"
               if self.options.get("report") == "new" else ""),
            shards,
        ]


def _with_stream_filters(program: Program, query: SubgraphQuery) -> SubgraphQuery:
    """A query ON a FILTER stream: the filter's predicates hold for every query edge.

    Edges that fail the filter are still pushed to the engine (they simply match no query
    edge), so features defined on the unfiltered stream keep seeing every edge.
    """
    predicates = []
    stream = query.stream
    seen = set()
    while stream in program.filters and stream not in seen:
        seen.add(stream)
        flt = program.filters[stream]
        predicates.extend(flt.predicates)
        stream = flt.stream
    if not predicates:
        return query
    for name, feature in program.features.items():
        if feature.stream in program.filters:
            raise QueryError(
                f"feature {name!r} is computed over the FILTER stream {feature.stream!r}; "
                "features over filtered streams are not supported yet: define it on the "
                "unfiltered stream"
            )
    extra = tuple(
        EdgePredicate(edge.name, p.field, p.op, p.value) for edge in query.edges for p in predicates
    )
    return replace(query, edge_predicates=query.edge_predicates + extra)


def _endpoint_names(fmt: str | None) -> str:
    aliases = FORMAT_FIELD_ALIASES.get(fmt or "", {})
    names = [k for k, v in aliases.items() if v in ("src", "dst")]
    return ", ".join(["src", "dst", *names])
