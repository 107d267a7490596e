"""Compile a :class:`SubgraphQuery` into search plans for the subgraph kernel.

For every query edge that can be a match's last edge in stream order (the *anchor*: an
edge that no constraint forces to start before another), a plan fixes the order in which
the other query edges are bound and how each is looked up: among the out-edges of a bound
vertex, the in-edges of a bound vertex, the edges between two bound vertices, or the whole
window. The greedy order prefers lookups with both endpoints bound, then one, and among
equals the query edge whose start time is most tightly bounded by the edges already
bound, so that scans stay short.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from graphcep.engines.difference_bounds import (
    UNBOUNDED,
    DifferenceBounds,
    UnboundedQueryError,
    build_bounds,
    difference_constraints,
)
from graphcep.patterns.subgraph import SubgraphQuery

#: An optional int64 column of a pushed batch: bit ``q`` set where the edge may play query
#: edge ``q`` (in ``query.edges`` order), on top of the query's own edge predicates. A
#: HyperCube cell sends each edge with the query edges it was routed there to play
#: (:func:`graphcep.runtime.hypercube.route_roles`), so that the cell finds only its own
#: matches.
ROLES = "_roles"

#: How a level finds its candidates (the compiled search's lookup modes; planning a query
#: does not load the compiler).
MODE_OUT = 0
MODE_IN = 1
MODE_PAIR = 2
MODE_ALL = 3

MODE_NAMES = {MODE_OUT: "out-edges of", MODE_IN: "in-edges of", MODE_PAIR: "edges between",
              MODE_ALL: "all window edges"}


@dataclass(frozen=True)
class AnchorPlan:
    """Binding order, lookup mode, time ranges and checks per level for one anchor.

    Level ``d`` binds query edge ``order[d]``. Its start must lie within the bounds
    ``rng_*[rng_off[d]:rng_off[d+1]]`` derived from the closed constraints and the values
    bound before it (these enforce every start-start and start-origin constraint); the
    remaining constraints -- those on end times, and all of them for the anchor -- are
    checked explicitly by ``chk_*`` at the level where their last edge is bound.
    """

    order: np.ndarray  # int32[k]: query edge bound at each level; order[0] is the anchor
    mode: np.ndarray  # int32[k]: lookup mode per level (level 0 unused)
    parallel: np.ndarray  # bool[k]: an earlier level has the same endpoint variables
    sig_side: np.ndarray  # int8[k]: pair lookups test the source's (0) or target's (1) row
    rng_off: np.ndarray
    rng_var: np.ndarray
    rng_upper: np.ndarray
    rng_c: np.ndarray
    chk_off: np.ndarray
    chk_x: np.ndarray
    chk_y: np.ndarray
    chk_c: np.ndarray


@dataclass(frozen=True)
class CompiledQuery:
    """Everything the engine needs that depends on the query only."""

    query: SubgraphQuery
    vertex_vars: tuple[str, ...]
    esrc: np.ndarray  # int32[k]: vertex variable index of each query edge's source
    edst: np.ndarray  # int32[k]
    check_bounds: np.ndarray  # closed bounds without duration assumptions (exact checks)
    extent_us: int  # largest start-time gap within a match
    plans: tuple[AnchorPlan, ...]

    @property
    def k(self) -> int:
        return len(self.query.edges)

    def describe(self) -> list[str]:
        lines = []
        names = self.query.edge_names
        for plan in self.plans:
            steps = [f"anchor {names[plan.order[0]]} (in the new batch)"]
            for level in range(1, len(plan.order)):
                q = int(plan.order[level])
                e = self.query.edges[q]
                mode = int(plan.mode[level])
                if mode == MODE_OUT:
                    how = f"{MODE_NAMES[mode]} {e.src}"
                elif mode == MODE_IN:
                    how = f"{MODE_NAMES[mode]} {e.dst}"
                elif mode == MODE_PAIR:
                    how = f"{MODE_NAMES[mode]} {e.src} and {e.dst}"
                else:
                    how = MODE_NAMES[mode]
                steps.append(f"{names[q]} from {how}")
            lines.append(" -> ".join(steps))
        return lines


def _unbounded_message(query: SubgraphQuery, bounds: DifferenceBounds) -> str:
    """Why a query has no extent, naming two edges whose start gap nothing bounds, and
    the constraints that would bound it (an order only where it contradicts nothing)."""
    later, earlier = bounds.unbounded_gap() or (query.edges[-1].name, query.edges[0].name)
    fixes = [f"bound it ('starttime({later}) - starttime({earlier}) <= 10;')"]
    if not bounds.forced_before(bounds.edges.index(earlier), bounds.edges.index(later)):
        fixes.append(f"put {later} first ('starttime({later}) < starttime({earlier});')")
    advice = ", ".join(fixes)
    return (f"query {query.name!r} has no upper bound on how far apart its edges may be in "
            f"time: nothing bounds how much later {later} may start than {earlier}, so a "
            f"match could need the whole stream in memory. {advice[0].upper()}{advice[1:]} "
            "or give a window (--window SECONDS) or run it in widening windows (--pww L).")


def compile_query(
    query: SubgraphQuery,
    max_duration_us: int | None = None,
) -> CompiledQuery:
    """Derive bounds, extent and anchor plans; raise if the extent is unbounded.

    The extent uses ``max_duration_us`` (constraints on end times bound start times only
    through durations) and the query's explicit window; the exact per-match checks use
    neither assumption beyond the explicit window. A plan depends on these two only and
    no engine changes it, so the plans of recent queries are kept: window widening
    starts an engine per window, all of a level's windows with the same query.
    """
    try:
        hash(query)
    except TypeError:  # a query holding an unhashable value: plan it every time
        return _compile(query, max_duration_us)
    return _compile_cached(query, max_duration_us)


@lru_cache(maxsize=64)
def _compile_cached(query: SubgraphQuery, max_duration_us: int | None) -> CompiledQuery:
    return _compile(query, max_duration_us)


def _compile(query: SubgraphQuery, max_duration_us: int | None) -> CompiledQuery:
    window = query.window_us
    check = build_bounds(query, None, window)
    extent_bounds = build_bounds(query, max_duration_us, window)
    extent = extent_bounds.extent()
    if extent is None:
        hint = ""
        if any(c.plus.kind == "end" or (c.minus and c.minus.kind == "end") for c in query.temporal):
            hint = (" Its constraints use end times, which bound start times only when "
                    "durations are bounded: give a maximum duration (--max-duration SECONDS).")
        raise UnboundedQueryError(_unbounded_message(query, extent_bounds) + hint)
    vertex_vars = query.vertices
    vindex = {v: i for i, v in enumerate(vertex_vars)}
    esrc = np.array([vindex[e.src] for e in query.edges], dtype=np.int32)
    edst = np.array([vindex[e.dst] for e in query.edges], dtype=np.int32)
    constraints = difference_constraints(query)
    plans = tuple(
        plan_for_anchor(a, esrc, edst, check, constraints)
        for a in anchor_candidates(check, len(query.edges))
    )
    return CompiledQuery(query, vertex_vars, esrc, edst, check.upper, extent, plans)


def anchor_candidates(bounds: DifferenceBounds, k: int) -> list[int]:
    """Query edges that may be the last in stream order: none is forced to start before another."""
    return [a for a in range(k) if not any(bounds.forced_before(a, b) for b in range(k) if b != a)]


def plan_for_anchor(
    anchor: int,
    esrc: np.ndarray,
    edst: np.ndarray,
    bounds: DifferenceBounds,
    constraints: list[tuple[int, int, int]],
) -> AnchorPlan:
    k = len(esrc)
    order = [anchor]
    modes = [MODE_ALL]
    bound_vars = {int(esrc[anchor]), int(edst[anchor])}
    remaining = [q for q in range(k) if q != anchor]
    while remaining:
        best = min(remaining, key=lambda q: _cost(q, order, esrc, edst, bound_vars, bounds))
        s_bound, d_bound = int(esrc[best]) in bound_vars, int(edst[best]) in bound_vars
        if s_bound and d_bound:
            mode = MODE_PAIR
        elif s_bound:
            mode = MODE_OUT
        elif d_bound:
            mode = MODE_IN
        else:
            mode = MODE_ALL
        order.append(best)
        modes.append(mode)
        bound_vars |= {int(esrc[best]), int(edst[best])}
        remaining.remove(best)
    return _level_tables(order, modes, esrc, edst, bounds, constraints)


def _level_tables(order, modes, esrc, edst, bounds: DifferenceBounds, constraints) -> AnchorPlan:
    k = len(order)
    z = 2 * k
    upper = bounds.upper
    parallel = [
        any(esrc[b] == esrc[q] and edst[b] == edst[q] for b in order[:d])
        for d, q in enumerate(order)
    ]
    # pair lookups test the signature row of the endpoint bound first: it stays cached
    first_bound: dict[int, int] = {}
    for d, q in enumerate(order):
        first_bound.setdefault(int(esrc[q]), d)
        first_bound.setdefault(int(edst[q]), d)
    sig_side = [0 if first_bound[int(esrc[q])] <= first_bound[int(edst[q])] else 1 for q in order]
    rng: list[list[tuple[int, bool, int]]] = [[] for _ in range(k)]
    chk: list[list[tuple[int, int, int]]] = [[] for _ in range(k)]
    level_of = {q: d for d, q in enumerate(order)}
    for d in range(1, k):
        sq = 2 * order[d]
        for var in [z] + [2 * b + j for b in order[:d] for j in (0, 1)]:
            # s_q <= f_b + c never beats s_q <= s_b + c' when c >= c' (f_b >= s_b)
            redundant_upper = var != z and var % 2 == 1 and upper[sq, var] >= upper[sq, var - 1]
            if upper[sq, var] < UNBOUNDED and not redundant_upper:
                rng[d].append((var, True, int(upper[sq, var])))
            if upper[var, sq] < UNBOUNDED:
                rng[d].append((var, False, int(upper[var, sq])))
    for x, y, c in constraints:
        edges = {v // 2 for v in (x, y) if v != z}
        d = max(level_of[e] for e in edges)
        starts_only = all(v == z or v % 2 == 0 for v in (x, y))
        if d == 0 or not starts_only or len(edges) == 1 and z not in (x, y):
            chk[d].append((x, y, c))
    return AnchorPlan(
        np.array(order, dtype=np.int32),
        np.array(modes, dtype=np.int32),
        np.array(parallel, dtype=np.bool_),
        np.array(sig_side, dtype=np.int8),
        *_ragged([[(v,) for v, _, _ in r] for r in rng], np.int32),
        np.array([u for r in rng for _, u, _ in r], dtype=np.bool_),
        np.array([c for r in rng for _, _, c in r], dtype=np.int64),
        *_ragged([[(x,) for x, _, _ in r] for r in chk], np.int32),
        np.array([y for r in chk for _, y, _ in r], dtype=np.int32),
        np.array([c for r in chk for _, _, c in r], dtype=np.int64),
    )


def _ragged(rows: list[list[tuple[int]]], dtype) -> tuple[np.ndarray, np.ndarray]:
    """Offsets and flat first elements of a list of per-level lists."""
    off = np.zeros(len(rows) + 1, dtype=np.int64)
    off[1:] = np.cumsum([len(r) for r in rows])
    flat = np.array([item[0] for r in rows for item in r], dtype=dtype)
    return off, flat


def _cost(q, order, esrc, edst, bound_vars, bounds: DifferenceBounds) -> tuple[int, int]:
    endpoints = (int(esrc[q]) in bound_vars) + (int(edst[q]) in bound_vars)
    width = min(
        min(int(bounds.upper[2 * q, 2 * b]), int(UNBOUNDED)) + min(int(bounds.upper[2 * b, 2 * q]), int(UNBOUNDED))
        for b in order
    )
    return (-endpoints, width)
