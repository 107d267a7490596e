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

import numpy as np

from graphcep.engines.difference_bounds import (
    UNBOUNDED,
    DifferenceBounds,
    UnboundedQueryError,
    build_bounds,
)
from graphcep.engines.subgraph_kernel import MODE_ALL, MODE_IN, MODE_OUT, MODE_PAIR
from graphcep.patterns.subgraph import SubgraphQuery

MODE_NAMES = {MODE_OUT: "out-edges of", MODE_IN: "in-edges of", MODE_PAIR: "edges between",
              MODE_ALL: "all window edges"}


@dataclass(frozen=True)
class AnchorPlan:
    """Binding order and lookup mode per level for one anchor query edge."""

    order: np.ndarray  # int32[k]: query edge bound at each level; order[0] is the anchor
    mode: np.ndarray  # int32[k]: lookup mode per level (level 0 unused)


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


def compile_query(
    query: SubgraphQuery,
    max_duration_us: int | None = None,
) -> CompiledQuery:
    """Derive bounds, extent and anchor plans; raise if the extent is unbounded.

    The extent uses ``max_duration_us`` (constraints on end times bound start times only
    through durations) and the query's explicit window; the exact per-match checks use
    neither assumption beyond the explicit window.
    """
    window = query.window_us
    check = build_bounds(query, None, window)
    extent_bounds = build_bounds(query, max_duration_us, window)
    extent = extent_bounds.extent()
    if extent is None:
        hint = ""
        if any(c.plus.kind == "end" or (c.minus and c.minus.kind == "end") for c in query.temporal):
            hint = (" Its constraints use end times, which bound start times only when "
                    "durations are bounded: give a maximum duration.")
        raise UnboundedQueryError(
            f"query {query.name!r} has no upper bound on how far apart its edges may be "
            "in time, so a match could need the whole stream in memory. Add a constraint "
            "such as 'starttime(eN) - starttime(e1) <= 10;' or give a window "
            f"(--window SECONDS).{hint}"
        )
    vertex_vars = query.vertices
    vindex = {v: i for i, v in enumerate(vertex_vars)}
    esrc = np.array([vindex[e.src] for e in query.edges], dtype=np.int32)
    edst = np.array([vindex[e.dst] for e in query.edges], dtype=np.int32)
    plans = tuple(
        plan_for_anchor(a, esrc, edst, check) for a in anchor_candidates(check, len(query.edges))
    )
    return CompiledQuery(query, vertex_vars, esrc, edst, check.upper, extent, plans)


def anchor_candidates(bounds: DifferenceBounds, k: int) -> list[int]:
    """Query edges that may be the last in stream order: none is forced to start before another."""
    return [a for a in range(k) if not any(bounds.forced_before(a, b) for b in range(k) if b != a)]


def plan_for_anchor(
    anchor: int, esrc: np.ndarray, edst: np.ndarray, bounds: DifferenceBounds
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
    return AnchorPlan(np.array(order, dtype=np.int32), np.array(modes, dtype=np.int32))


def _cost(q, order, esrc, edst, bound_vars, bounds: DifferenceBounds) -> tuple[int, int]:
    endpoints = (int(esrc[q]) in bound_vars) + (int(edst[q]) in bound_vars)
    width = min(
        min(int(bounds.upper[2 * q, 2 * b]), int(UNBOUNDED)) + min(int(bounds.upper[2 * b, 2 * q]), int(UNBOUNDED))
        for b in order
    )
    return (-endpoints, width)
