"""A whole SAL program: constants, connections, partitioning, features, filters, queries.

The SAL parser (:mod:`graphcep.lang.sal`) builds a :class:`Program`; runtimes read it.
Statements may come in any sensible order; names must be defined before they are used.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from graphcep.patterns.subgraph import EdgePredicate, QueryError, SubgraphQuery

#: Stream feature operators SAL knows, with their argument count (field first, then numbers).
FEATURE_OPERATORS: dict[str, int] = {
    "topk": 4,  # topk(field, window_items, basic_window_items, k)
    "ehsum": 2,  # ehsum(field, window_items)
    "ehave": 2,  # ehave(field, window_items)
    "ehvar": 2,  # ehvar(field, window_items)
    "countdistinct": 2,  # countdistinct(field, window_items)
}


#: Feature operators whose value is a set of items, so ``x in F`` can test membership; the
#: others give a number per key.
SET_FEATURES = frozenset({"topk"})


@dataclass(frozen=True)
class Connection:
    """``Name = VastStream("host", port);`` -- where a stream comes from.

    ``kind`` is the reader (``VastStream`` -> ``vast``; ``NetflowV5Stream`` -> ``netflow5``;
    ``SnapStream``/``CsvStream``/``JsonStream``/``ParquetStream`` for files). A file or
    stream given on the command line replaces the connection.
    """

    name: str
    kind: str
    args: tuple[str | int | float, ...] = ()


@dataclass(frozen=True)
class Partition:
    """``PARTITION S BY f1, f2;`` -- fields the stream is spread across workers by."""

    stream: str
    fields: tuple[str, ...]


@dataclass(frozen=True)
class HashSpec:
    """``HASH field WITH function;``"""

    field: str
    function: str


@dataclass(frozen=True)
class KeyedStream:
    """``X = STREAM S BY f1, f2;`` -- stream ``S`` keyed by fields (features per key)."""

    name: str
    source: str
    keys: tuple[str, ...]


@dataclass(frozen=True)
class FeatureDef:
    """``X = FOREACH S GENERATE op(field, n1, n2, ...);``"""

    name: str
    stream: str
    operator: str
    field: str
    params: tuple[int, ...]


@dataclass(frozen=True)
class FilterDef:
    """``X = FILTER S BY field op value [AND ...];`` -- a sub-stream of matching edges.

    The predicates use :class:`EdgePredicate` with ``edge`` set to the stream name.
    """

    name: str
    stream: str
    predicates: tuple[EdgePredicate, ...]


@dataclass
class Program:
    """Everything one SAL file says."""

    constants: dict[str, int | float | str] = field(default_factory=dict)
    connections: dict[str, Connection] = field(default_factory=dict)
    partitions: list[Partition] = field(default_factory=list)
    hashes: list[HashSpec] = field(default_factory=list)
    keyed_streams: dict[str, KeyedStream] = field(default_factory=dict)
    features: dict[str, FeatureDef] = field(default_factory=dict)
    filters: dict[str, FilterDef] = field(default_factory=dict)
    queries: list[SubgraphQuery] = field(default_factory=list)

    def query(self, name: str | None = None) -> SubgraphQuery:
        """The query called ``name`` (None: the first).

        Raises
        ------
        QueryError
            When the program has no query, or none of that name (the message lists them).
        """
        if not self.queries:
            raise QueryError("the program defines no SUBGRAPH query")
        if name is None:
            return self.queries[0]
        for q in self.queries:
            if q.name == name:
                return q
        names = ", ".join(q.name for q in self.queries)
        raise QueryError(f"no query named {name!r} (the program's queries: {names})")
