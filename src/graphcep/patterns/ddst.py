"""DDST event pattern queries: the pattern objects, their checks, and a Python builder.

A DDST query is the event pattern of degree-preserving dual simulation with timing
constraints (Definitions 1-2 of "Event pattern matching over graph streams"):

* a labelled directed **query graph** ``Q = (Vq, Eq, Lq)``: vertex variables
  (:class:`QueryVertex`) and edge variables (:class:`QueryEdge`), each with an optional
  label -- ``None`` (written ``*`` or left out) matches any label, including none;
* a **timing order** ``≺``: a strict partial order on the query edges, given by pairs
  ``(a, b)`` meaning "``a``'s match arrives strictly before ``b``'s"; any generating set
  of pairs may be given (``AB < CA, CA < DC`` implies ``AB < DC``), and a cycle (which a
  strict partial order cannot have) is rejected;
* a **window** (:class:`Window`): time-based, an exact number of microseconds, or
  count-based, a number of edges.

The paper assumes the query graph is connected ("if it contained more than one connected
component, one could equivalently do the matching on multiple connected query graphs");
so does this module: a query whose graph is not (weakly) connected, or with a vertex on no
edge, is rejected. Names are identifiers (``[A-Za-z_][A-Za-z0-9_]*``); vertex and edge
names are unique across both and are not one of the language's keywords (:data:`RESERVED`).

The text form is parsed by :mod:`graphcep.lang.ddst`; :meth:`DDSTQuery.to_text` writes
it back. Every check lives here, so the parser and the builder agree; the parser adds
line and column.

Example (the paper's Fig. 1 road query, one branch)
---------------------------------------------------
>>> q = (DDSTBuilder("congestion")
...      .vertex("A", "M").vertex("B", "M").vertex("C", "M").vertex("D", "M")
...      .edge("AB", "A", "B", "congested").edge("CA", "C", "A", "congested")
...      .edge("DC", "D", "C", "congested")
...      .order("AB", "CA", "DC")
...      .within(5, "min")
...      .build())
>>> q.window.size, q.topological_order(), sorted(q.closure())
(300000000, ('AB', 'CA', 'DC'), [('AB', 'CA'), ('AB', 'DC'), ('CA', 'DC')])
>>> print(q.to_text())
QUERY congestion;
VERTICES A:M, B:M, C:M, D:M;
EDGES
  AB: A -> B [congested];
  CA: C -> A [congested];
  DC: D -> C [congested];
ORDER AB < CA, CA < DC;
WITHIN 5 min;
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Literal

from graphcep.events import TimeFormatError, seconds_to_fraction_us
from graphcep.patterns.subgraph import QueryError

__all__ = [
    "RESERVED",
    "TIME_UNITS",
    "COUNT_UNITS",
    "DDSTQueryError",
    "QueryVertex",
    "QueryEdge",
    "Window",
    "DDSTQuery",
    "DDSTBuilder",
    "window_us",
    "MAX_WINDOW",
    "order_cycle",
    "disconnected_vertex",
    "format_label",
]

#: Keywords of the DDST language; they cannot be used as names.
RESERVED = frozenset({"query", "vertices", "edges", "order", "within"})

#: Time units of a window, in seconds each (keys are lower case; units are case-insensitive).
TIME_UNITS: dict[str, Fraction] = {
    "us": Fraction(1, 1_000_000),
    "ms": Fraction(1, 1_000),
    "s": Fraction(1),
    "sec": Fraction(1),
    "secs": Fraction(1),
    "second": Fraction(1),
    "seconds": Fraction(1),
    "min": Fraction(60),
    "mins": Fraction(60),
    "minute": Fraction(60),
    "minutes": Fraction(60),
    "h": Fraction(3600),
    "hour": Fraction(3600),
    "hours": Fraction(3600),
    "d": Fraction(86400),
    "day": Fraction(86400),
    "days": Fraction(86400),
}

#: Words after the number of a count-based window (``WITHIN 100 EDGES``).
COUNT_UNITS = frozenset({"edges", "edge"})

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NUMBER_LABEL = re.compile(r"[0-9]+(?:\.[0-9]+)?\Z")
#: Units :meth:`Window.__str__` writes, largest first, with their size in microseconds.
_DISPLAY_UNITS = (
    ("d", 86_400_000_000),
    ("h", 3_600_000_000),
    ("min", 60_000_000),
    ("s", 1_000_000),
    ("ms", 1_000),
)

WindowKind = Literal["time", "count"]
#: Windows (µs or edges) stay below this, like times (:func:`graphcep.events.seconds_to_us`).
MAX_WINDOW = 2**62


class DDSTQueryError(QueryError):
    """A DDST query that does not make sense (unknown name, cyclic timing order, ...)."""


def format_label(label: str | None) -> str:
    """A label as the DDST language writes it: ``*`` for any, quoted when needed.

    Examples
    --------
    >>> format_label(None), format_label("M"), format_label("7"), format_label("very slow")
    ('*', 'M', '7', '"very slow"')
    """
    if label is None:
        return "*"
    if _IDENTIFIER.match(label) or _NUMBER_LABEL.match(label):
        return label
    escaped = (
        label.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")
        .replace("\t", "\\t").replace("\r", "\\r")
    )  # fmt: skip
    return f'"{escaped}"'


@dataclass(frozen=True)
class QueryVertex:
    """A vertex variable ``name`` with an optional label (``None``: any label)."""

    name: str
    label: str | None = None

    def __str__(self) -> str:
        return self.name if self.label is None else f"{self.name}:{format_label(self.label)}"


@dataclass(frozen=True)
class QueryEdge:
    """Edge variable ``name`` from vertex ``src`` to vertex ``dst``, optional label."""

    name: str
    src: str
    dst: str
    label: str | None = None

    def __str__(self) -> str:
        tail = "" if self.label is None else f" [{format_label(self.label)}]"
        return f"{self.name}: {self.src} -> {self.dst}{tail}"


@dataclass(frozen=True)
class Window:
    """A window: ``kind="time"`` of ``size`` microseconds, or ``kind="count"`` of ``size`` edges.

    Examples
    --------
    >>> Window.of(5, "min"), Window.edges(100)
    (Window(kind='time', size=300000000), Window(kind='count', size=100))
    >>> str(Window.of("1.5", "s")), str(Window.of(90, "s")), str(Window.edges(3))
    ('1500 ms', '90 s', '3 EDGES')
    """

    kind: WindowKind
    size: int

    def __post_init__(self) -> None:
        """Refuse a window that cannot be (a negative time, no edges, a size that is not a
        whole number): one check for the parser, the builder and direct construction."""
        if self.kind not in ("time", "count"):
            raise DDSTQueryError(f"a window is 'time' or 'count', not {self.kind!r}")
        if isinstance(self.size, bool) or not isinstance(self.size, int):
            raise DDSTQueryError(f"a window size is a whole number, not {self.size!r}")
        if self.kind == "count" and self.size < 1:
            raise DDSTQueryError(f"a count window needs at least 1 edge ({self.size} given)")
        if self.kind == "time" and self.size < 0:
            raise DDSTQueryError(f"a time window cannot be negative ({self.size} us given)")
        if self.size >= MAX_WINDOW:
            raise DDSTQueryError(f"a window must be below 2**62 ({self.size} given)")

    @classmethod
    def of(cls, amount: str | int | Decimal, unit: str = "s") -> Window:
        """A time window of ``amount`` ``unit`` (exactly; see :func:`window_us`)."""
        return cls("time", window_us(amount, unit))

    @classmethod
    def edges(cls, count: int) -> Window:
        """A count window of the ``count`` most recent edges."""
        return cls("count", count)

    def __str__(self) -> str:
        if self.kind == "count":
            return f"{self.size} EDGES"
        for unit, us in _DISPLAY_UNITS:
            if self.size and self.size % us == 0:
                return f"{self.size // us} {unit}"
        return f"{self.size} us"


def window_us(amount: str | int | Decimal, unit: str = "s") -> int:
    """A time window of ``amount`` ``unit`` as a whole number of microseconds, exactly.

    Parameters
    ----------
    amount : str, int or Decimal
        A non-negative decimal number (``"2.5"``); converted without float rounding
        (:func:`graphcep.events.seconds_to_fraction_us`).
    unit : str
        A key of :data:`TIME_UNITS` (``us ms s sec min h d`` ...), any letter case.

    Raises
    ------
    DDSTQueryError
        For an unknown unit, a negative amount, one that is not a whole number of
        microseconds (``0.5 us``), or one of 2**62 microseconds or more.

    Examples
    --------
    >>> window_us(5, "min"), window_us("0.25", "ms"), window_us(7, "US")
    (300000000, 250, 7)
    """
    per = TIME_UNITS.get(unit.lower())
    if per is None:
        raise DDSTQueryError(f"unknown time unit {unit!r} (use {', '.join(TIME_UNITS)})")
    try:
        exact = seconds_to_fraction_us(amount) * per
    except TimeFormatError as exc:
        raise DDSTQueryError(f"window size {amount!r} is not a number") from exc
    if exact < 0:
        raise DDSTQueryError(f"a window cannot be negative: {amount} {unit}")
    if exact.denominator != 1:
        raise DDSTQueryError(
            f"a window must be a whole number of microseconds: {amount} {unit} is {exact} us"
        )
    if exact >= MAX_WINDOW:
        raise DDSTQueryError(f"a window must be below 2**62 us: {amount} {unit}")
    return int(exact)


def order_cycle(pairs: Iterable[tuple[str, str]]) -> list[str] | None:
    """The first cycle of a timing order, as a closed path ``[a, b, ..., a]``, or ``None``.

    Pairs are added in the order given; the cycle reported is the one closed by the first
    pair ``(a, b)`` whose ``b`` already reaches ``a`` (``a < a`` is a cycle of one).

    Examples
    --------
    >>> order_cycle([("AB", "CA"), ("CA", "DC")]) is None
    True
    >>> order_cycle([("AB", "CA"), ("CA", "DC"), ("DC", "AB")])
    ['DC', 'AB', 'CA', 'DC']
    """
    succ: dict[str, list[str]] = {}
    for a, b in pairs:
        path = _path(succ, b, a)
        if path is not None:
            return [a, *path]
        succ.setdefault(a, []).append(b)
    return None


def _path(succ: dict[str, list[str]], start: str, goal: str) -> list[str] | None:
    """A path ``[start, ..., goal]`` along ``succ`` (depth first), or ``None``."""
    stack: list[tuple[str, list[str]]] = [(start, [start])]
    seen = {start}
    while stack:
        node, path = stack.pop()
        if node == goal:
            return path
        for nxt in reversed(succ.get(node, [])):
            if nxt not in seen:
                seen.add(nxt)
                stack.append((nxt, [*path, nxt]))
    return None


def disconnected_vertex(vertices: Sequence[str], edges: Sequence[QueryEdge]) -> str | None:
    """The first vertex (in ``vertices`` order) not weakly connected to the first one.

    Examples
    --------
    >>> disconnected_vertex(["A", "B", "C"], [QueryEdge("e", "A", "B")])
    'C'
    """
    if not vertices:
        return None
    adj: dict[str, set[str]] = {v: set() for v in vertices}
    for e in edges:
        adj.setdefault(e.src, set()).add(e.dst)
        adj.setdefault(e.dst, set()).add(e.src)
    seen = {vertices[0]}
    todo = [vertices[0]]
    while todo:
        for nxt in adj[todo.pop()] - seen:
            seen.add(nxt)
            todo.append(nxt)
    return next((v for v in vertices if v not in seen), None)


def _check_name(name: str, what: str) -> None:
    if not isinstance(name, str) or not _IDENTIFIER.match(name):
        raise DDSTQueryError(f"{what} name {name!r} is not an identifier ([A-Za-z_][A-Za-z0-9_]*)")
    if what != "query" and name.lower() in RESERVED:
        raise DDSTQueryError(f"{what} name {name!r} is a reserved word")


@dataclass(frozen=True)
class DDSTQuery:
    """A DDST event pattern: query graph, timing order and window (validated on creation).

    Parameters
    ----------
    name : str
        Query name (an identifier), used in match records.
    vertices : tuple of QueryVertex
        Vertex variables, in declaration order.
    edges : tuple of QueryEdge
        Edge variables, in declaration order.
    order : tuple of (str, str)
        Generating pairs of the timing order, as given.
    window : Window
        The window.

    Raises
    ------
    DDSTQueryError
        For any inconsistency (see the module docstring).
    """

    name: str
    vertices: tuple[QueryVertex, ...]
    edges: tuple[QueryEdge, ...]
    order: tuple[tuple[str, str], ...]
    window: Window

    def __post_init__(self) -> None:
        object.__setattr__(self, "vertices", tuple(self.vertices))
        object.__setattr__(self, "edges", tuple(self.edges))
        object.__setattr__(self, "order", tuple((a, b) for a, b in self.order))
        _check_name(self.name, "query")
        self._check_graph()
        self._check_order()
        self._check_window()

    # -- checks -------------------------------------------------------------------------

    def _check_graph(self) -> None:
        if not self.vertices or not self.edges:
            raise DDSTQueryError("a query needs at least one vertex and one edge")
        seen: dict[str, str] = {}
        for kind, name in [("vertex", v.name) for v in self.vertices] + [
            ("edge", e.name) for e in self.edges
        ]:
            _check_name(name, kind)
            if name in seen:
                raise DDSTQueryError(f"{kind} name {name!r} is already used by a {seen[name]}")
            seen[name] = kind
        for e in self.edges:
            for end in (e.src, e.dst):
                if seen.get(end) != "vertex":
                    raise DDSTQueryError(f"edge {e.name!r} names an unknown vertex {end!r}")
        lonely = disconnected_vertex(self.vertex_names, self.edges)
        if lonely is not None:
            raise DDSTQueryError(
                f"the query graph must be connected: vertex {lonely!r} is not connected "
                f"to {self.vertices[0].name!r}"
            )

    def _check_order(self) -> None:
        names = set(self.edge_names)
        for a, b in self.order:
            for n in (a, b):
                if n not in names:
                    raise DDSTQueryError(f"the timing order names an unknown edge {n!r}")
        cycle = order_cycle(self.order)
        if cycle is not None:
            raise DDSTQueryError(f"the timing order has a cycle: {' < '.join(cycle)}")

    def _check_window(self) -> None:
        if not isinstance(self.window, Window):  # a Window checks itself on creation
            raise DDSTQueryError(f"bad window {self.window!r}")

    # -- structure ----------------------------------------------------------------------

    @property
    def vertex_names(self) -> tuple[str, ...]:
        return tuple(v.name for v in self.vertices)

    @property
    def edge_names(self) -> tuple[str, ...]:
        return tuple(e.name for e in self.edges)

    def vertex(self, name: str) -> QueryVertex:
        """The vertex variable called ``name``."""
        return next(v for v in self.vertices if v.name == name)

    def edge(self, name: str) -> QueryEdge:
        """The edge variable called ``name``."""
        return next(e for e in self.edges if e.name == name)

    def predecessors(self) -> dict[str, tuple[str, ...]]:
        """``pre(e)`` of the paper's timing graph: edges directly ordered before each edge."""
        pre: dict[str, list[str]] = {e: [] for e in self.edge_names}
        for a, b in dict.fromkeys(self.order):
            pre[b].append(a)
        return {k: tuple(v) for k, v in pre.items()}

    def successors(self) -> dict[str, tuple[str, ...]]:
        """``post(e)`` of the paper's timing graph: edges directly ordered after each edge."""
        post: dict[str, list[str]] = {e: [] for e in self.edge_names}
        for a, b in dict.fromkeys(self.order):
            post[a].append(b)
        return {k: tuple(v) for k, v in post.items()}

    def topological_order(self) -> tuple[str, ...]:
        """Query edges in a topological order of the timing graph (ties: declaration order)."""
        pre = {k: set(v) for k, v in self.predecessors().items()}
        done: list[str] = []
        while len(done) < len(pre):
            nxt = next(e for e in self.edge_names if e not in done and pre[e] <= set(done))
            done.append(nxt)
        return tuple(done)

    def closure(self) -> frozenset[tuple[str, str]]:
        """The strict partial order ``≺`` itself: the transitive closure of :attr:`order`."""
        post = self.successors()
        pairs: set[tuple[str, str]] = set()
        for a in self.edge_names:
            todo = list(post[a])
            while todo:
                b = todo.pop()
                if (a, b) not in pairs:
                    pairs.add((a, b))
                    todo.extend(post[b])
        return frozenset(pairs)

    def to_text(self) -> str:
        """The query in the DDST language (:func:`graphcep.lang.ddst.parse_ddst` reads it)."""
        lines = [f"QUERY {self.name};", f"VERTICES {', '.join(map(str, self.vertices))};", "EDGES"]
        lines += [f"  {e};" for e in self.edges]
        if self.order:
            lines.append(f"ORDER {', '.join(f'{a} < {b}' for a, b in self.order)};")
        lines.append(f"WITHIN {self.window};")
        return "\n".join(lines)


class DDSTBuilder:
    """Build a :class:`DDSTQuery` in Python; ``build()`` runs the same checks as the parser.

    Examples
    --------
    >>> q = (DDSTBuilder("calls").vertex("C", "core").vertex("P", "periphery")
    ...      .edge("c1", "C", "P", "S").edge("c2", "C", "P", "S").within_edges(50).build())
    >>> [str(e) for e in q.edges], str(q.window)
    (['c1: C -> P [S]', 'c2: C -> P [S]'], '50 EDGES')
    """

    def __init__(self, name: str = "query") -> None:
        self._name = name
        self._vertices: list[QueryVertex] = []
        self._edges: list[QueryEdge] = []
        self._order: list[tuple[str, str]] = []
        self._window: Window | None = None

    def vertex(self, name: str, label: str | None = None) -> DDSTBuilder:
        """Declare vertex variable ``name``; label ``None`` or ``"*"`` matches any label."""
        self._vertices.append(QueryVertex(name, None if label == "*" else label))
        return self

    def edge(self, name: str, src: str, dst: str, label: str | None = None) -> DDSTBuilder:
        """Declare edge variable ``name`` from ``src`` to ``dst`` (label ``"*"``: any)."""
        self._edges.append(QueryEdge(name, src, dst, None if label == "*" else label))
        return self

    def before(self, first: str, then: str) -> DDSTBuilder:
        """Timing order ``first ≺ then``."""
        self._order.append((first, then))
        return self

    def order(self, *chain: str) -> DDSTBuilder:
        """A chain ``a ≺ b ≺ c ...`` (one pair per neighbouring two)."""
        if len(chain) < 2:
            raise DDSTQueryError("a timing-order chain needs at least two edges")
        for a, b in zip(chain, chain[1:], strict=False):
            self.before(a, b)
        return self

    def within(self, amount: str | int | Decimal, unit: str = "s") -> DDSTBuilder:
        """A time window of ``amount`` ``unit`` (exact; see :func:`window_us`)."""
        self._window = Window.of(amount, unit)
        return self

    def within_edges(self, count: int) -> DDSTBuilder:
        """A count window of the ``count`` most recent edges."""
        self._window = Window.edges(count)
        return self

    def build(self) -> DDSTQuery:
        """The validated query."""
        if self._window is None:
            raise DDSTQueryError("a DDST query needs a window: call within() or within_edges()")
        return DDSTQuery(
            self._name, tuple(self._vertices), tuple(self._edges), tuple(self._order), self._window
        )
