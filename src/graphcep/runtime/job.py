"""A matching job: a SAL program's query bound to a concrete stream format.

Both runtimes start here, so the way a query's field names, features and options are
resolved against a stream is written once.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

import pyarrow as pa

from graphcep.features.feature_set import FeatureSet
from graphcep.io.formats import FORMAT_FIELD_ALIASES, resolve_field
from graphcep.patterns.program import Program
from graphcep.patterns.subgraph import EdgePredicate, QueryError, SubgraphQuery


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
    ) -> Job:
        query = _with_stream_filters(program, program.query(query_name))
        if window_us is not None:
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
        return cls(program, query, fmt, homomorphic, max_duration_us, swap, aliases)

    def features(self) -> FeatureSet | None:
        """A fresh feature set for one engine (None when the query uses no feature)."""
        used = {c.feature for c in self.query.vertex_constraints}
        if not used:
            return None
        return FeatureSet({n: self.program.features[n] for n in sorted(used)}, self.field_aliases)

    def engine_options(self) -> dict:
        return {
            "homomorphic": self.homomorphic,
            "max_duration_us": self.max_duration_us,
            "field_aliases": self.field_aliases,
        }

    def needed_columns(self, available: list[str]) -> list[str]:
        """The edge columns the engine and the features read, in ``available``'s order."""
        wanted = {"t", "src", "dst", "seq", "pos"}
        if self._uses_durations():
            wanted.add("dur")
        wanted |= {self.field_aliases.get(p.field, p.field) for p in self.query.edge_predicates}
        for name in {c.feature for c in self.query.vertex_constraints}:
            field_name = self.program.features[name].field
            wanted.add(self.field_aliases.get(field_name, field_name))
        return [c for c in available if c in wanted]

    def _uses_durations(self) -> bool:
        return any(
            ref is not None and ref.kind == "end"
            for c in self.query.temporal
            for ref in (c.plus, c.minus)
        )

    def orient(self, edges: pa.Table) -> pa.Table:
        """Swap ``src``/``dst`` when the query reads edges the other way round."""
        if not self.swap_endpoints:
            return edges
        names = edges.column_names
        i, j = names.index("src"), names.index("dst")
        src, dst = edges.column(i), edges.column(j)
        return edges.set_column(i, "src", dst).set_column(j, "dst", src)


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
