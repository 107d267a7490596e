"""A small deterministic layout for a match graph: vertices on a circle in the order
they first appear, edges numbered by time, parallel edges bent apart.

Works on a :class:`~graphcep.io.sinks.MatchDrawing` (the graph DOT output draws too),
so every kind of match record is laid out the same way. A match with more than
:data:`MAX_EDGES` edges (a DDST component on a dense stream) is drawn with its first
edges in time, and its title says so.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from graphcep.io.sinks import MatchDrawing
from graphcep.io.time_text import SECONDS, Clock

#: The most edges one picture draws (the earliest ones); the title says how many more.
MAX_EDGES = 40

Key = tuple[str, str | None]


@dataclass(frozen=True)
class PlacedEdge:
    """One stream edge: its ends, its label text, its 1-based order by time, its time in
    µs and how far it bends (0 straight; parallel edges bend apart)."""

    src: Key
    dst: Key
    label: str
    order: int
    t: int
    bend: float


@dataclass(frozen=True)
class MatchLayout:
    """Positions (unit square around the origin) and texts of one match picture."""

    title: str
    positions: dict[Key, tuple[float, float]]
    node_labels: dict[Key, str]
    edges: list[PlacedEdge]


def edge_label(order: int, text: str, t_us: int, clock: Clock = SECONDS) -> str:
    """The text an edge is drawn with: its order, what it matches, its time."""
    return f"{order}. {text}\n{clock.text(t_us)}"


def node_label(text: str, roles: list[str]) -> str:
    """The text a vertex is drawn with: the vertex, then the query vertices it hosts."""
    shown = text or '""'  # a subscription's empty key
    return shown if not roles else f"{shown}\n{', '.join(roles)}"


def circle(count: int) -> list[tuple[float, float]]:
    """``count`` points on the unit circle, the first at the top, clockwise."""
    if count == 1:
        return [(0.0, 0.0)]
    return [(math.sin(2 * math.pi * i / count), math.cos(2 * math.pi * i / count))
            for i in range(count)]


def lay_out(drawing: MatchDrawing, max_edges: int = MAX_EDGES) -> MatchLayout:
    """Place ``drawing``'s vertices and number its edges by ``(time, position)``.

    Parameters
    ----------
    drawing
        The match as a graph (:class:`~graphcep.io.sinks.MatchDrawing`).
    max_edges
        Draw at most this many edges, the earliest; then only the vertices they touch.
    """
    ranked = sorted(enumerate(drawing.edges), key=lambda item: (item[1][3], item[0]))
    kept = ranked[:max_edges]
    title = drawing.title
    if len(ranked) > max_edges:
        title += f"\n(first {max_edges} of {len(ranked):,} edges)"
        touched = {end for _, e in kept for end in e[:2]}
        keys = [k for k in drawing.nodes if k in touched]
    else:
        keys = list(drawing.nodes)
    positions = dict(zip(keys, circle(len(keys)), strict=True))
    labels = {k: node_label(*drawing.nodes[k]) for k in keys}
    return MatchLayout(title, positions, labels, _placed(kept, drawing.clock))


def _placed(kept: list[tuple[int, tuple]], clock: Clock) -> list[PlacedEdge]:
    """Edges numbered 1.. in time order; the k-th edge between one pair of vertices
    (either direction) bends by an alternating, growing amount."""
    seen: dict[frozenset, int] = {}
    placed = []
    for order, (_, (src, dst, text, t)) in enumerate(kept, start=1):
        pair = frozenset((src, dst))
        k = seen.get(pair, 0)
        seen[pair] = k + 1
        bend = 0.0 if k == 0 else 0.45 * ((k + 1) // 2) * (1 if k % 2 else -1)
        placed.append(PlacedEdge(src, dst, edge_label(order, text, t, clock), order, t, bend))
    return placed
