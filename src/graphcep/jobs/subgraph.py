"""SAL jobs: a SAL program's query bound to a stream format (Goodman & Grunwald 2019).

:func:`load` reads a ``.sal`` file with the command line's options; :class:`SubgraphJob`
is what the runtimes replay (:class:`~graphcep.jobs.base.ReplayJob`). The extent of a
shard's warm-up is the largest start-time gap a match can have, from the query's
difference-bound matrix; a query with vertex features (``x in Top1000``) needs the whole
stream in one engine, as a feature counts every edge.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.lang.sal import parse_program
>>> job = SubgraphJob.create(parse_program("{ x1 e1 x2; x2 e2 x3; "
...     "starttime(e2) - starttime(e1) <= 5; starttime(e1) < starttime(e2); }"))
>>> job.extent().size                       # µs
5000000
>>> edges = pa.table({"t": [0, 1_000_000, 9_000_000], "src": ["a", "b", "c"],
...                   "dst": ["b", "c", "d"]})
>>> from graphcep.runtime.local import run_job
>>> matches, stats = run_job(job, edges)
>>> matches.num_rows                        # a -> b -> c; b -> c -> d is 8 s apart
1
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from fractions import Fraction
from numbers import Real
from typing import TYPE_CHECKING, Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.difference_bounds import (
    UnboundedQueryError,
    UnsatisfiableQueryError,
    check_window,
)
from graphcep.engines.subgraph.plan import ROLES, compile_query
from graphcep.events import CORE_NAMES, format_seconds, match_ids, max_duration_of
from graphcep.io.flat_columns import FlatColumns
from graphcep.io.formats import FORMAT_FIELD_ALIASES, resolve_field
from graphcep.io.sinks import SAL_MATCHES, MatchFormat
from graphcep.jobs.base import CellSplit, DeclaredSource, Extent, JobBase, renamed_matches
from graphcep.jobs.composite import CompositeJob
from graphcep.patterns.program import Program
from graphcep.patterns.subgraph import (
    MAX_BOUND_US,
    EdgePredicate,
    QueryError,
    SubgraphQuery,
    TimeRef,
)

if TYPE_CHECKING:
    from graphcep.engines.subgraph.engine import SubgraphEngine, VertexFeatures
    from graphcep.features.feature_set import FeatureSet

#: The duration bound under which a query given none is planned before its run bounds
#: durations (``explain``, the checks of :func:`load`): the plan does not depend on it,
#: whether the query is bounded neither (2**40 µs, about 13 days).
UNBOUND_DURATION_US = 2**40

#: The engines this kind runs, name -> (module, class) (the protocol suite runs each).
ENGINES: dict[str, tuple[str, str]] = {
    "subgraph": ("graphcep.engines.subgraph.engine", "SubgraphEngine"),
}


def load(path: str, options: Mapping[str, Any]) -> SubgraphJob | CompositeJob:
    """A SAL file as a job, with the command line's options (``fmt``, ``query_name``,
    ``window_us``, ``max_duration_us``, ``homomorphic``, ``max_window_edges``; ``explain``:
    a job only to be described, which may use features the program leaves undefined, as
    the paper's listings do). A program with several SUBGRAPH statements runs them all
    over one read of the stream (a :class:`~graphcep.jobs.composite.CompositeJob`), or
    those ``query_name`` lists (``"A,B"``)."""
    from graphcep.lang.sal import parse_file

    program = parse_file(path)
    jobs = [SubgraphJob.create(
        program,
        name,
        options.get("fmt"),
        window_us=options.get("window_us"),
        homomorphic=bool(options.get("homomorphic")),
        max_duration_us=options.get("max_duration_us"),
        max_window_edges=options.get("max_window_edges"),
        undefined_features=bool(options.get("explain")),
    ) for name in selected_queries(program, options.get("query_name"))]
    for job in jobs:
        # an unbounded or contradictory query fails here, before any work; under window
        # widening the windows bound it (SubgraphJob.bounded_by), so only the width is tried
        (job.bounded_by(MAX_BOUND_US - 1) if options.get("pww") else job).compiled()
    return jobs[0] if len(jobs) == 1 else CompositeJob(jobs)


def selected_queries(program: Program, names: str | None) -> list[str]:
    """The names of the queries to run: ``names`` (comma-separated, as ``--query-name``
    gives them), each checked against the program, else every query of the program.

    >>> from graphcep.lang.sal import parse_program
    >>> program = parse_program("SUBGRAPH A "
    ...     "{ x e y; } SUBGRAPH B { x e y; }")
    >>> selected_queries(program, None), selected_queries(program, "B, A")
    (['A', 'B'], ['B', 'A'])
    >>> selected_queries(program, "A,C")
    Traceback (most recent call last):
    ...
    graphcep.patterns.subgraph.QueryError: no query named 'C' (the program's queries: A, B)
    """
    if names is None:
        program.query()  # a program without a query: its one-line refusal
        return [q.name for q in program.queries]
    wanted = [name.strip() for name in names.split(",")]
    if "" in wanted:
        raise QueryError(f"--query-name {names!r} has an empty name: give query names "
                         "separated by commas (A,B)")
    return list(dict.fromkeys(program.query(name).name for name in wanted))


def accepts(pattern: Any) -> bool:
    """Whether ``pattern`` is a SAL pattern object (:func:`graphcep.jobs.as_job`)."""
    return isinstance(pattern, SubgraphQuery | Program)


def from_pattern(pattern: SubgraphQuery | Program, **options: Any
                 ) -> SubgraphJob | CompositeJob:
    """A bare query (or program) as a job with default options: a program's every query
    (one job per query over one read of the stream, as :func:`load`), or the one
    ``query_name`` names."""
    program = pattern if isinstance(pattern, Program) else Program(queries=[pattern])
    if options.get("query_name") is not None or len(program.queries) < 2:
        return SubgraphJob.create(program, **options)
    return CompositeJob([SubgraphJob.create(program, q.name, **options)
                         for q in program.queries])


@dataclass
class SubgraphJob(JobBase):
    """What to run: the query, how its names map onto the stream, and engine options."""

    program: Program
    query: SubgraphQuery
    fmt: str | None = None
    homomorphic: bool = False
    max_duration_us: int | None = None
    swap_endpoints: bool = False
    field_aliases: dict[str, str] = field(default_factory=dict)
    max_window_edges: int | None = None  # the engine's state bound (None: its default)
    window_us: int | None = None  # --window as given (explain says which bound applies)
    own_extent_us: int | None = None  # the query's own extent, where it has one

    @property
    def output(self) -> MatchFormat:
        """SAL match records, with a flat column per query vertex and edge field."""
        return SAL_MATCHES.with_flat(FlatColumns("sal", self.query.vertices,
                                                 self.query.edge_names))

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
        undefined_features: bool = False,
    ) -> SubgraphJob:
        """The query ``query_name`` of ``program`` (default: its first) bound to streams of
        format ``fmt``; ``undefined_features`` lets a job that is only described use
        features the program does not define (no engine can be built for it)."""
        if max_window_edges is not None and max_window_edges < 1:
            raise QueryError("max_window_edges must be at least 1")
        query = _with_stream_filters(program, program.query(query_name))
        own_extent = None
        if window_us is not None:
            # a query that bounds itself keeps its matches: a narrower window is refused
            own_extent = check_window(query, window_us, max_duration_us)
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
        if missing and not undefined_features:
            raise QueryError(
                f"query {query.name!r} uses feature(s) {missing} that the program does not "
                "define; add e.g. 'Top1000 = FOREACH Netflows GENERATE topk(DestIp, 100000, "
                "10000, 1000);'"
            )
        return cls(program, query, fmt, homomorphic, max_duration_us, swap, aliases,
                   max_window_edges, window_us, own_extent)

    def features(self) -> FeatureSet | None:
        """A fresh feature set for one engine (None when the query uses no feature)."""
        used = {c.feature for c in self.query.vertex_constraints}
        if not used:
            return None
        # imported here: the features need pandas, a quarter second most runs do without
        from graphcep.features.feature_set import FeatureSet

        return FeatureSet({n: self.program.features[n] for n in sorted(used)}, self.field_aliases)

    @property
    def name(self) -> str:
        return self.query.name

    @property
    def whole_stream(self) -> bool:
        # a feature such as topk counts items over the whole stream, which no shard sees
        return bool(self.query.vertex_constraints)

    @property
    def local_matches(self) -> bool:
        # a match is its edges and their constraints; a feature counts the whole stream
        return not self.whole_stream

    def bounded_by(self, span_us: int) -> SubgraphJob:
        """The query with ``span_us`` as its window where it has none as narrow: inside a
        window whose start times lie within ``span_us``, no match is lost, and a query
        that no constraint bounds can be planned (window widening needs no ``--window``)."""
        if self.query.window_us is not None and self.query.window_us <= span_us:
            return self
        return replace(self, query=self.query.with_window(span_us))

    @property
    def min_records(self) -> int:
        """One stream edge per query edge: the edges of a match are distinct."""
        return len(self.query.edges)

    def bind(self, longest_duration_us: int) -> SubgraphJob:
        if self.max_duration_us is not None:
            return self
        return replace(self, max_duration_us=longest_duration_us)

    def compiled(self):  # noqa: ANN201 -- a CompiledQuery
        """The query's compiled plan (durations bound as bound; unbound: up to
        :data:`UNBOUND_DURATION_US`, so that a query needing edges of some duration is
        not refused before the run bounds them by its input's longest edge)."""
        return compile_query(self.query, self.max_duration_us if self.max_duration_us
                             is not None else UNBOUND_DURATION_US)

    def extent(self) -> Extent:
        """The largest gap between two start times in a match (durations bound as bound)."""
        return Extent(compile_query(self.query, self.max_duration_us).extent_us)

    def prepare(self) -> None:
        from graphcep.engines.subgraph.engine import load_kernels

        load_kernels()

    def new_engine(self, threads: int | None = 1) -> SubgraphEngine:
        return make_engine(self.query, features=self.features(), threads=threads,
                           **self.engine_options())

    def shared_form(self) -> tuple[Hashable, Real] | None:
        """Queries that differ only in the bound of their one *span* constraint
        (``starttime(e2) - starttime(e1) <= 5``: a difference of two edges' times bounded
        above by a positive bound) share one engine: a match is an assignment of stream
        edges that satisfies every constraint, so the matches under a bound are those
        under a wider one whose difference keeps within it. A query with vertex features
        keeps an engine of its own (its features count the edges of its own window)."""
        at = self._span_constraint()
        if at is None:
            return None
        constraint = self.query.temporal[at]
        temporal = list(self.query.temporal)
        temporal[at] = replace(constraint, bound_us=Fraction(0))
        query = replace(self.query, name="", temporal=tuple(temporal))
        return ("sal", query, constraint.op, self.fmt, self.homomorphic,
                self.max_duration_us, self.swap_endpoints,
                tuple(sorted(self.field_aliases.items())), self.max_window_edges,
                self.window_us), constraint.bound_us

    def own_matches(self, matches: pa.Table) -> pa.Table:
        """The matches whose span constraint holds under this query's bound, named
        after it."""
        constraint = self.query.temporal[self._span_constraint()]
        k = len(self.query.edges)
        edges = pa.chunked_array(matches.column("edges")).combine_chunks().flatten()

        def time_of(ref: TimeRef) -> np.ndarray:
            j = self.query.edge_names.index(ref.edge)
            start = edges.field("t").to_numpy().reshape(-1, k)[:, j]
            return start + (edges.field("dur").to_numpy().reshape(-1, k)[:, j]
                            if ref.kind == "end" else 0)

        gap = time_of(constraint.plus) - time_of(constraint.minus)
        bound = constraint.bound_us  # exact: integer gaps against a rational bound
        most = math.floor(bound) if constraint.op == "<=" else math.ceil(bound) - 1
        keep = gap <= most
        mine = matches.filter(pa.array(keep))
        seqs = edges.field("seq").to_numpy().reshape(-1, k)[keep]
        return renamed_matches(mine, self.query.name, match_ids(self.query.name, seqs))

    def _span_constraint(self) -> int | None:
        """The place of the query's one span constraint among its temporal ones (None:
        none, several, or a query with vertex features)."""
        if self.query.vertex_constraints:
            return None
        spans = [at for at, c in enumerate(self.query.temporal)
                 if c.minus is not None and c.op in ("<", "<=") and c.bound_us > 0]
        return spans[0] if len(spans) == 1 else None

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
        wanted = {*CORE_NAMES, "pos", ROLES}  # ROLES: a HyperCube cell's, where given
        wanted |= {self.field_aliases.get(p.field, p.field) for p in self.query.edge_predicates}
        for name in {c.feature for c in self.query.vertex_constraints}:
            field_name = self.program.features[name].field
            wanted.add(self.field_aliases.get(field_name, field_name))
        return [c for c in available if c in wanted]

    def check_columns(self, available: list[str]) -> None:
        """Refuse a stream without a field a vertex feature counts (``topk(DestIp, ...)``):
        features are updated at every edge, so the run would stop at its first batch. A
        predicate names a missing field where it is evaluated
        (:func:`~graphcep.engines.subgraph.engine.predicate_mask`), on every engine."""
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

    def cell_query(self) -> SubgraphQuery:
        if self.whole_stream:
            names = sorted({c.feature for c in self.query.vertex_constraints})
            raise QueryError(f"query {self.name!r} uses vertex features {names}, which "
                             "count the whole stream (no cell sees it)")
        return self.query

    def eligible_patterns(self, edges: pa.Table) -> dict[tuple[str, str], np.ndarray]:
        """``(x, y) -> bool[n]``: which of the (oriented) ``edges`` may play some query edge
        ``x -> y`` -- its predicates hold, and it is a loop ``u -> u`` exactly when the
        query edge is (under isomorphism, distinct variables bind distinct vertices).
        Query edges with the same endpoints share one mask (their cells are the same)."""
        from graphcep.engines.subgraph.engine import predicate_mask  # numba: loaded when used

        same = np.asarray(pc.fill_null(pc.equal(edges.column("src"), edges.column("dst")),
                                       False).to_numpy(zero_copy_only=False), dtype=bool)
        masks: dict[tuple[str, str], np.ndarray] = {}
        for edge in self.query.edges:
            if edge.src == edge.dst:
                ok = same.copy()  # x -> x binds both ends to one vertex
            elif self.homomorphic:
                ok = np.ones(edges.num_rows, dtype=bool)
            else:
                ok = ~same
            for pred in self.query.edge_predicates:
                if pred.edge == edge.name:
                    ok &= predicate_mask(edges, pred, self.field_aliases)
            key = (edge.src, edge.dst)
            masks[key] = masks[key] | ok if key in masks else ok
        return masks

    def playable(self, edges: pa.Table) -> np.ndarray | None:
        """bool[n]: the (oriented) edges that may play some query edge; the others change
        no match (a cell drops them, and so may many rules' shared input). None when they
        do: vertex features count every edge of the stream."""
        if self.whole_stream:
            return None
        masks = list(self.eligible_patterns(edges).values())
        return np.logical_or.reduce(masks) if masks else np.zeros(edges.num_rows, bool)

    def playable_key(self) -> Any:
        """What decides :meth:`playable` (the queries with equal keys keep the same edges
        of a stream): how the query reads edges and, per query edge, whether it is a loop
        and its predicates' text. None when nothing is dropped (:meth:`playable`)."""
        if self.whole_stream:
            return None
        per_edge = sorted((edge.src == edge.dst, tuple(sorted(
            str(p) for p in self.query.edge_predicates if p.edge == edge.name)))
            for edge in self.query.edges)
        return ("sal", self.swap_endpoints, self.homomorphic,
                tuple(sorted(self.field_aliases.items())), tuple(per_edge))

    def cell_split(self) -> CellSplit:
        """HyperCube over the query's vertex variables; the cells carry the fields the
        predicates read."""
        fields = {self.field_aliases.get(p.field, p.field) for p in self.query.edge_predicates}
        return CellSplit(query=self.cell_query(), fields=frozenset(fields - set(CORE_NAMES)))

    def declared_source(self) -> DeclaredSource | None:
        """The program's ``VastStream("host", port)`` (or NetflowV5), if it names one."""
        for connection in self.program.connections.values():
            host, port = (list(connection.args) + [None, None])[:2]
            if connection.kind in ("vast", "netflow5") and host and str(port).isdigit() \
                    and 0 < int(port) < 65536:
                return DeclaredSource(connection.kind, str(host), int(port))
        return None

    def describe(self) -> list[str]:
        """The query, its extent and plan (``graphcep explain``)."""
        query = self.query
        compiled, extent = self._explained_plan()
        lines = [
            f"query {query.name} on stream {query.stream or '(default)'} "
            f"with source({query.source_field}) and target({query.target_field})",
            query.to_sal(),
            "",
            f"extent: {extent}{self._window_note()}",
            "state: edges whose start lies within the extent of the newest edge",
            "plan (one line per query edge that can arrive last):",
            *(f"  {line}" for line in compiled.describe()),
        ]
        lines += [f"feature {name}: {feature.operator}({feature.field}, "
                  f"{', '.join(map(str, feature.params))}) over {feature.stream}"
                  for name, feature in self.program.features.items()]
        used = sorted({c.feature for c in query.vertex_constraints})
        lines += [f"feature {name}: not defined by this program (a run needs it defined)"
                  for name in used if name not in self.program.features]
        return lines

    def _explained_plan(self) -> tuple[Any, str]:
        """The plan ``explain`` shows and its extent in words. A query whose end-time
        constraints bound it only once edge durations are bounded, explained without
        ``--max-duration``, gets its extent for edges of no duration (where it allows
        them), saying so: a run bounds durations (``--max-duration``, or the longest edge
        of its input). The plan itself does not depend on durations."""
        max_dur = self.max_duration_us
        if max_dur is not None:
            compiled = compile_query(self.query, max_dur)
            return compiled, (f"{format_seconds(compiled.extent_us)} s (edge durations up to "
                              f"{format_seconds(max_dur)} s)")
        try:
            compiled = compile_query(self.query)
            return compiled, f"{format_seconds(compiled.extent_us)} s"
        except UnboundedQueryError:
            pass
        try:  # still unbounded: one line, status 2
            shortest = f"{format_seconds(compile_query(self.query, 0).extent_us)} s for " \
                "edges of no duration, more for longer ones"
        except UnsatisfiableQueryError:  # the constraints want edges of some duration
            shortest = "set by edge durations"
        bound = "a run bounds durations by --max-duration, else by the longest edge of its input"
        return self.compiled(), f"{shortest}: {bound}"

    def _window_note(self) -> str:
        """Which bound gives the extent: the query's own, or --window."""
        window = self.window_us
        if window is None:
            return ""
        if self.own_extent_us is None:
            return f" (--window {format_seconds(window)}: the constraints do not bound it)"
        return (f" (the query's own bound; --window {format_seconds(window)} is at least as "
                "wide and changes nothing)")


def make_engine(
    query: SubgraphQuery,
    edges: pa.Table | None = None,
    *,
    homomorphic: bool = False,
    max_duration_us: int | None = None,
    features: VertexFeatures | None = None,
    field_aliases: dict[str, str] | None = None,
    threads: int | None = None,
    max_window_edges: int | None = None,
) -> SubgraphEngine:
    """An engine for ``query``; the duration bound defaults to the longest edge in ``edges``,
    the state bound to the engine's own."""
    from graphcep.engines.subgraph.engine import SubgraphEngine  # numba: loaded when used

    if max_duration_us is None and edges is not None:
        max_duration_us = max_duration_of(edges)
    bound = {} if max_window_edges is None else {"max_window_edges": max_window_edges}
    return SubgraphEngine(
        query,
        homomorphic=homomorphic,
        max_duration_us=max_duration_us,
        features=features,
        field_aliases=field_aliases,
        threads=threads,
        **bound,
    )


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
