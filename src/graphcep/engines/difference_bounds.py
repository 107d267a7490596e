"""Temporal constraints as a difference-bound matrix: closure, satisfiability, extent.

Each query edge ``i`` contributes two time variables, its start ``s_i`` (index ``2i``) and
end ``f_i = s_i + dur_i`` (index ``2i + 1``); one more variable ``z`` (the time origin,
index ``2k``) carries comparisons with constants. Every SAL constraint is a difference
constraint ``x - y <= c`` over integer microseconds once strictness is folded in
(``x - y < c`` is ``x - y <= ceil(c) - 1``), so the tightest implied bounds are a
Floyd-Warshall closure, and the query is unsatisfiable exactly when the closure has a
negative cycle.

The *extent* of a query is the largest possible gap between the start times of two of its
edges; the engine keeps an edge only while a later edge could still complete a match with
it, so its state is bounded by the extent. Constraints written against end times bound
start times only once durations are bounded: callers pass ``max_duration_us`` for that.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

import numpy as np

from graphcep.events import format_seconds
from graphcep.patterns.subgraph import (
    MAX_BOUND_US,
    QueryError,
    SubgraphQuery,
    TemporalConstraint,
    TimeRef,
)

#: "No bound": large enough to never bind (bounds stay below it, see
#: :data:`~graphcep.patterns.subgraph.MAX_BOUND_US`), small enough that sums do not
#: overflow int64.
UNBOUNDED = np.int64(MAX_BOUND_US)


class UnboundedQueryError(QueryError):
    """The constraints do not bound how far apart a match's edges may be in time."""


class UnsatisfiableQueryError(QueryError):
    """The temporal constraints contradict each other; the query can never match."""


def variable_index(ref: TimeRef, edge_index: dict[str, int]) -> int:
    return 2 * edge_index[ref.edge] + (1 if ref.kind == "end" else 0)


def integer_bounds(op: str, bound: Fraction) -> tuple[int | None, int | None]:
    """Integer ``(upper, lower)`` bounds on an integer X from ``X op bound`` (None = none).

    >>> integer_bounds("<", Fraction(10))
    (9, None)
    >>> integer_bounds(">=", Fraction(5, 2))
    (None, 3)
    """
    floor_b, ceil_b = math.floor(bound), math.ceil(bound)
    if op == "<=":
        return floor_b, None
    if op == "<":
        return ceil_b - 1, None
    if op == ">=":
        return None, ceil_b
    if op == ">":
        return None, floor_b + 1
    return floor_b, ceil_b  # "=": contradictory when bound is not integral


@dataclass
class DifferenceBounds:
    """Closed bounds ``upper[x, y] >= value(x) - value(y)`` over a query's time variables."""

    edges: tuple[str, ...]
    upper: np.ndarray  # (2k+1, 2k+1) int64, UNBOUNDED where nothing is known

    @property
    def origin(self) -> int:
        return 2 * len(self.edges)

    def start_gap(self, later: int, earlier: int) -> int:
        """Upper bound on ``s_later - s_earlier`` (UNBOUNDED if none)."""
        return int(self.upper[2 * later, 2 * earlier])

    def forced_before(self, a: int, b: int) -> bool:
        """True when every match has ``s_a < s_b`` strictly."""
        return self.upper[2 * a, 2 * b] < 0

    def extent(self) -> int | None:
        """Largest possible ``s_i - s_j`` over all edge pairs, or None if unbounded."""
        k = len(self.edges)
        if k == 1:
            return 0
        starts = self.upper[0 : 2 * k : 2, 0 : 2 * k : 2]
        worst = int(starts.max())
        return None if worst >= UNBOUNDED else max(worst, 0)


    def unbounded_gap(self) -> tuple[str, str] | None:
        """A pair ``(later, earlier)`` of edges whose start gap ``s_later - s_earlier``
        nothing bounds (the first such in query order), or None."""
        k = len(self.edges)
        for later in range(k):
            for earlier in range(k):
                if later != earlier and self.start_gap(later, earlier) >= UNBOUNDED:
                    return self.edges[later], self.edges[earlier]
        return None


def build_bounds(
    query: SubgraphQuery,
    max_duration_us: int | None = None,
    window_us: int | None = None,
) -> DifferenceBounds:
    """Close the query's temporal constraints (plus durations and window) into bounds.

    ``max_duration_us`` adds ``f_i - s_i <= D`` (use for the extent only: a stream edge
    longer than D would violate it). ``window_us`` adds ``|s_i - s_j| <= W`` for all pairs.
    """
    upper = _closed_bounds(query, query.temporal, max_duration_us, window_us)
    if np.any(np.diag(upper) < 0):
        raise UnsatisfiableQueryError(_contradiction(query, max_duration_us, window_us))
    if upper.min() <= -UNBOUNDED:
        raise QueryError(
            f"query {query.name!r}: the temporal constraints put two edge times 2**61 µs "
            "(about 73,000 years) or more apart, beyond the range of times"
        )
    return DifferenceBounds(query.edge_names, upper)


def _closed_bounds(
    query: SubgraphQuery,
    constraints: tuple[TemporalConstraint, ...],
    max_duration_us: int | None,
    window_us: int | None,
) -> np.ndarray:
    """The closure of ``constraints`` over the query's time variables, with durations
    (never negative; at most ``max_duration_us``) and the window."""
    names = query.edge_names
    index = {n: i for i, n in enumerate(names)}
    k = len(names)
    size = 2 * k + 1
    z = 2 * k
    upper = np.full((size, size), UNBOUNDED, dtype=np.int64)
    np.fill_diagonal(upper, 0)

    def tighten(x: int, y: int, c: int) -> None:
        if c < upper[x, y]:
            upper[x, y] = c

    for i in range(k):
        tighten(2 * i, 2 * i + 1, 0)  # s_i - f_i <= 0: durations are never negative
        if max_duration_us is not None:
            tighten(2 * i + 1, 2 * i, max_duration_us)
    if window_us is not None:
        for i in range(k):
            for j in range(k):
                if i != j:
                    tighten(2 * i, 2 * j, window_us)
    for c in constraints:
        add_constraint(c, index, z, tighten)
    close(upper)
    return upper


def _satisfiable(query: SubgraphQuery, constraints: tuple[TemporalConstraint, ...],
                 max_duration_us: int | None, window_us: int | None) -> bool:
    upper = _closed_bounds(query, constraints, max_duration_us, window_us)
    return not np.any(np.diag(upper) < 0)


def _contradiction(query: SubgraphQuery, max_duration_us: int | None,
                   window_us: int | None) -> str:
    """Why the constraints cannot hold, naming the constraint that closes the contradiction
    (the first whose addition, in the order written, leaves nothing satisfiable) where it
    was written, and the window or duration bound when that is part of it."""
    temporal = query.temporal
    closing = next(k for k in range(len(temporal))
                   if not _satisfiable(query, temporal[: k + 1], max_duration_us, window_us))
    c = temporal[closing]
    head = f"{c.where}: " if c.where else ""
    if not _satisfiable(query, temporal[: closing + 1], None, None):
        others = "the constraints before it" if closing else "the rule that an edge ends no " \
                                                             "earlier than it starts"
    elif not _satisfiable(query, temporal[: closing + 1], max_duration_us, None):
        others = f"edge durations of at most {format_seconds(max_duration_us or 0)} s"
    else:
        others = f"the window of {format_seconds(window_us or 0)} s (--window)"
    return (f"{head}query {query.name!r}: the temporal constraint '{c}' contradicts {others}; "
            "no set of edges can satisfy them")


def difference_constraints(query: SubgraphQuery) -> list[tuple[int, int, int]]:
    """The query's own constraints as ``(x, y, c)`` meaning ``value(x) - value(y) <= c``."""
    index = {n: i for i, n in enumerate(query.edge_names)}
    out: list[tuple[int, int, int]] = []
    for c in query.temporal:
        add_constraint(c, index, 2 * len(index), lambda x, y, b: out.append((x, y, b)))
    return out


def add_constraint(c: TemporalConstraint, index: dict[str, int], z: int, tighten) -> None:
    x = variable_index(c.plus, index)
    y = z if c.minus is None else variable_index(c.minus, index)
    hi, lo = integer_bounds(c.op, c.bound_us)
    if hi is not None:
        tighten(x, y, hi)  # x - y <= hi
    if lo is not None:
        tighten(y, x, -lo)  # y - x <= -lo


def close(upper: np.ndarray) -> None:
    """Floyd-Warshall in place; values are kept within ``[-UNBOUNDED, UNBOUNDED]`` so sums
    never overflow (a negative cycle drives values down at every round; clipping keeps
    them negative, which is all its detection needs)."""
    n = upper.shape[0]
    for m in range(n):
        col, row = upper[:, m : m + 1], upper[m : m + 1, :]
        via = np.where((col >= UNBOUNDED) | (row >= UNBOUNDED), UNBOUNDED, col + row)
        np.minimum(upper, via, out=upper)
        np.maximum(upper, -UNBOUNDED, out=upper)


def own_extent(query: SubgraphQuery, max_duration_us: int | None = None) -> int | None:
    """The extent the query's constraints give without any window (durations bounded by
    ``max_duration_us`` when given), or None when they do not bound it."""
    return build_bounds(query.with_window(None), max_duration_us).extent()


def check_window(query: SubgraphQuery, window_us: int,
                 max_duration_us: int | None = None) -> int | None:
    """Check a window (``--window``) against a query; return the query's own extent.

    The window is the extent of a query whose constraints do not bound it. A query that
    bounds itself keeps its own matches: a window at least as wide changes nothing (the
    query's bound applies), and a narrower one -- which would drop matches the query
    allows -- is refused. A query bounded only through edge durations (end-time
    constraints) bounds itself when ``max_duration_us`` is given (``--max-duration``);
    without it the window is its extent.

    Raises
    ------
    QueryError
        When the query bounds its own extent more widely than the window.

    Examples
    --------
    >>> from graphcep.patterns.subgraph import QueryBuilder
    >>> q = QueryBuilder("q").edge("a", "e1", "b").edge("b", "e2", "c").within("e1", "e2", 10)
    >>> q = q.before("e1", "e2").build()
    >>> check_window(q, 20_000_000)
    10000000
    >>> check_window(q, 3_000_000)
    Traceback (most recent call last):
    ...
    graphcep.patterns.subgraph.QueryError: --window 3 s is narrower than the extent query 'q' gives itself, 10 s: it would drop matches the query allows. Leave --window out (it is the extent of queries whose constraints do not bound it), or tighten the query's constraints
    """
    extent = own_extent(query, max_duration_us)
    if extent is not None and window_us < extent:
        raise QueryError(
            f"--window {format_seconds(window_us)} s is narrower than the extent query "
            f"{query.name!r} gives itself, {format_seconds(extent)} s: it would drop matches "
            "the query allows. Leave --window out (it is the extent of queries whose "
            "constraints do not bound it), or tighten the query's constraints"
        )
    return extent
