"""Temporal subgraph queries: the pattern objects SAL builds, and a Python builder.

A :class:`SubgraphQuery` is a directed multigraph pattern -- topology lines ``x1 e1 x2``
meaning "edge variable ``e1`` goes from vertex variable ``x1`` to ``x2``" -- plus

* temporal constraints over ``starttime(e)`` / ``endtime(e)``, normalised to the
  difference form ``plus - minus  OP  bound`` (``minus`` may be absent, for a constraint
  against a constant), with the bound as an exact number of microseconds;
* vertex constraints ``x in Feature`` / ``x not in Feature``;
* edge attribute predicates ``e1.DestPort == 80``.

From: E. L. Goodman and D. Grunwald, "Streaming Temporal Graphs: Subgraph Matching",
IEEE Big Data 2019 (Definitions 2-4, Listings 1-3).

Example
-------
>>> q = (QueryBuilder("triangle")
...      .edge("x1", "e1", "x2").edge("x2", "e2", "x3").edge("x3", "e3", "x1")
...      .within("e1", "e3", 10)
...      .before("e1", "e2").before("e2", "e3")
...      .build())
>>> [e.name for e in q.edges]
['e1', 'e2', 'e3']
>>> str(q.temporal[0])
'starttime(e3) - starttime(e1) <= 10'
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any, Literal

from graphcep.events import US_PER_SECOND, seconds_to_fraction_us

TimeKind = Literal["start", "end"]
Comparison = Literal["<", "<=", ">", ">=", "="]
COMPARISONS: tuple[str, ...] = ("<", "<=", ">", ">=", "=")
#: Bounds and windows stay below this many microseconds (about 73,000 years): times are
#: int64 microseconds, and sums of two bounds must not overflow.
MAX_BOUND_US = 2**61
#: Each comparison a predicate may make, with its Arrow compute function and its Python
#: operator (Spark columns overload the operators): one table for the engine's Arrow back
#: end and the Spark back end that routes edges (HyperCube cells).
PREDICATE_COMPARISONS: dict[str, tuple[str, Callable[[Any, Any], Any]]] = {
    "==": ("equal", operator.eq),
    "!=": ("not_equal", operator.ne),
    "<": ("less", operator.lt),
    "<=": ("less_equal", operator.le),
    ">": ("greater", operator.gt),
    ">=": ("greater_equal", operator.ge),
}
PREDICATE_OPS: tuple[str, ...] = tuple(PREDICATE_COMPARISONS)


class QueryError(ValueError):
    """A query that is well formed text but does not make sense (unknown edge, ...)."""


@dataclass(frozen=True)
class EdgePattern:
    """Topology line ``src name dst``: edge variable ``name`` from ``src`` to ``dst``."""

    src: str
    name: str
    dst: str

    def __str__(self) -> str:
        return f"{self.src} {self.name} {self.dst}"


@dataclass(frozen=True)
class TimeRef:
    """``starttime(edge)`` or ``endtime(edge)``."""

    edge: str
    kind: TimeKind = "start"

    def __str__(self) -> str:
        return f"{self.kind}time({self.edge})"


@dataclass(frozen=True)
class TemporalConstraint:
    """``plus - minus  op  bound_us`` (``minus`` is None for a comparison with a constant).

    ``bound_us`` is an exact rational number of microseconds, below
    :data:`MAX_BOUND_US` in magnitude. ``where`` says where the constraint was written
    (``query.sal:4:5``; empty when built in Python): messages about it lead with it.
    """

    plus: TimeRef
    minus: TimeRef | None
    op: Comparison
    bound_us: Fraction = Fraction(0)
    where: str = field(default="", compare=False, repr=False)

    def __post_init__(self) -> None:
        if self.op not in COMPARISONS:
            raise QueryError(f"unknown comparison {self.op!r}")
        if abs(self.bound_us) >= MAX_BOUND_US:
            seconds = float(Fraction(self.bound_us) / US_PER_SECOND)
            raise QueryError(
                f"the bound {seconds:g} s exceeds the range of times (int64 microseconds: a bound "
                f"must be under 2**61 µs, about 73,000 years)"
            )

    def edges(self) -> tuple[str, ...]:
        return (self.plus.edge,) if self.minus is None else (self.plus.edge, self.minus.edge)

    def __str__(self) -> str:
        bound = self.bound_us / US_PER_SECOND
        btxt = str(bound.numerator) if bound.denominator == 1 else str(float(bound))
        if self.minus is None:
            return f"{self.plus} {self.op} {btxt}"
        if self.bound_us == 0:
            return f"{self.plus} {self.op} {self.minus}"
        return f"{self.plus} - {self.minus} {self.op} {btxt}"


@dataclass(frozen=True)
class VertexConstraint:
    """``vertex in feature`` (or ``not in`` when ``negated``)."""

    vertex: str
    feature: str
    negated: bool = False

    def __str__(self) -> str:
        return f"{self.vertex} {'not in' if self.negated else 'in'} {self.feature}"


@dataclass(frozen=True)
class EdgePredicate:
    """``edge.field op value``, e.g. ``e1.DestPort == 80``."""

    edge: str
    field: str
    op: str
    value: str | int | float

    def __post_init__(self) -> None:
        if self.op not in PREDICATE_OPS:
            raise QueryError(f"unknown predicate operator {self.op!r}")

    def __str__(self) -> str:
        v = f'"{self.value}"' if isinstance(self.value, str) else str(self.value)
        return f"{self.edge}.{self.field} {self.op} {v}"

    def operand(self, text_columns: Mapping[str, bool],
                aliases: Mapping[str, str] | None = None) -> tuple[str, str | int | float]:
        """The stream column this predicate reads and the value it compares it with, by
        the rule every back end follows: a text column compares with the value's text, a
        numeric one with the number (a text value there is refused), a null never holds.

        ``text_columns`` maps each column of the stream to whether it holds text.

        Examples
        --------
        >>> EdgePredicate("e1", "DestPort", "==", 80).operand({"DestPort": True})
        ('DestPort', '80')
        >>> EdgePredicate("e1", "port", "<", 80).operand({"DestPort": False},
        ...                                                {"port": "DestPort"})
        ('DestPort', 80)
        """
        name = (aliases or {}).get(self.field, self.field)
        if name not in text_columns:
            raise QueryError(f"predicate '{self}': the stream has no field {self.field!r}; "
                             f"fields are {list(text_columns)}")
        if text_columns[name]:
            return name, str(self.value)
        if isinstance(self.value, str):
            raise QueryError(f"predicate '{self}': field {self.field!r} is numeric, got a "
                             "string")
        return name, self.value


@dataclass(frozen=True)
class SubgraphQuery:
    """A temporal subgraph query (Definition 4 of the SAL paper).

    ``source_field`` / ``target_field`` name the stream fields that are the edge's
    endpoints (``SUBGRAPH ON S WITH source(SourceIp) AND target(DestIp)``); the reader
    maps them to the schema's ``src`` / ``dst``. ``window_us`` is an explicit extent
    (``--window``) used when the constraints do not bound the query's time span.
    """

    name: str
    edges: tuple[EdgePattern, ...]
    temporal: tuple[TemporalConstraint, ...] = ()
    vertex_constraints: tuple[VertexConstraint, ...] = ()
    edge_predicates: tuple[EdgePredicate, ...] = ()
    stream: str | None = None
    source_field: str = "src"
    target_field: str = "dst"
    window_us: int | None = None

    def __post_init__(self) -> None:
        self.validate()

    @property
    def edge_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.edges)

    @property
    def vertices(self) -> tuple[str, ...]:
        seen: dict[str, None] = {}
        for e in self.edges:
            seen.setdefault(e.src)
            seen.setdefault(e.dst)
        return tuple(seen)

    def edge(self, name: str) -> EdgePattern:
        for e in self.edges:
            if e.name == name:
                return e
        raise QueryError(f"unknown edge {name!r}")

    def validate(self) -> None:
        if not self.edges:
            raise QueryError(f"query {self.name!r} has no edges")
        names = [e.name for e in self.edges]
        dupes = sorted({n for n in names if names.count(n) > 1})
        if dupes:
            raise QueryError(f"edge variable {dupes[0]!r} is defined twice")
        clash = set(names) & set(self.vertices)
        if clash:
            raise QueryError(
                f"{sorted(clash)[0]!r} is used both as an edge and as a vertex variable"
            )
        known = set(names)
        for c in self.temporal:
            for e in c.edges():
                if e not in known:
                    raise QueryError(f"temporal constraint '{c}' uses unknown edge {e!r}")
        verts = set(self.vertices)
        for vc in self.vertex_constraints:
            if vc.vertex not in verts:
                raise QueryError(f"vertex constraint '{vc}' uses unknown vertex {vc.vertex!r}")
        for p in self.edge_predicates:
            if p.edge not in known:
                raise QueryError(f"predicate '{p}' uses unknown edge {p.edge!r}")
        if self.window_us is not None and self.window_us < 0:
            raise QueryError("window must not be negative")
        if self.window_us is not None and self.window_us >= MAX_BOUND_US:
            raise QueryError("window exceeds the range of times (int64 microseconds: it must "
                             "be under 2**61 µs, about 73,000 years)")

    def with_window(self, window_us: int | None) -> SubgraphQuery:
        return SubgraphQuery(
            self.name,
            self.edges,
            self.temporal,
            self.vertex_constraints,
            self.edge_predicates,
            self.stream,
            self.source_field,
            self.target_field,
            window_us,
        )

    def to_sal(self) -> str:
        """The query as SAL text (a ``{ ... }`` block)."""
        lines = [f"    {e};" for e in self.edges]
        lines += [f"    {c};" for c in self.temporal]
        lines += [f"    {c};" for c in self.vertex_constraints]
        lines += [f"    {p};" for p in self.edge_predicates]
        return "{\n" + "\n".join(lines) + "\n}"


@dataclass
class QueryBuilder:
    """Fluent builder for :class:`SubgraphQuery`; times are in seconds."""

    name: str = "query"
    _edges: list[EdgePattern] = field(default_factory=list)
    _temporal: list[TemporalConstraint] = field(default_factory=list)
    _vertex: list[VertexConstraint] = field(default_factory=list)
    _preds: list[EdgePredicate] = field(default_factory=list)
    _window_us: int | None = None

    def edge(self, src: str, name: str, dst: str) -> QueryBuilder:
        self._edges.append(EdgePattern(src, name, dst))
        return self

    def constraint(
        self,
        plus: str | TimeRef,
        op: Comparison,
        bound_seconds: str | int | float = 0,
        minus: str | TimeRef | None = None,
    ) -> QueryBuilder:
        """``plus - minus op bound`` with edge names meaning their start times."""
        p = plus if isinstance(plus, TimeRef) else TimeRef(plus)
        m = minus if (minus is None or isinstance(minus, TimeRef)) else TimeRef(minus)
        bound = seconds_to_fraction_us(repr(bound_seconds) if isinstance(bound_seconds, float) else bound_seconds)
        self._temporal.append(TemporalConstraint(p, m, op, bound))
        return self

    def before(self, first: str, second: str, strict: bool = True) -> QueryBuilder:
        """``starttime(first) < starttime(second)`` (``<=`` unless ``strict``)."""
        return self.constraint(second, ">" if strict else ">=", 0, first)

    def within(self, first: str, last: str, seconds: str | int | float) -> QueryBuilder:
        """``starttime(last) - starttime(first) <= seconds``."""
        return self.constraint(last, "<=", seconds, first)

    def vertex_in(self, vertex: str, feature: str, negated: bool = False) -> QueryBuilder:
        self._vertex.append(VertexConstraint(vertex, feature, negated))
        return self

    def where(self, edge: str, field_name: str, op: str, value: str | int | float) -> QueryBuilder:
        self._preds.append(EdgePredicate(edge, field_name, op, value))
        return self

    def window(self, seconds: str | int | float) -> QueryBuilder:
        frac = seconds_to_fraction_us(repr(seconds) if isinstance(seconds, float) else seconds)
        self._window_us = int(frac)
        return self

    def build(self) -> SubgraphQuery:
        return SubgraphQuery(
            self.name,
            tuple(self._edges),
            tuple(self._temporal),
            tuple(self._vertex),
            tuple(self._preds),
            window_us=self._window_us,
        )
