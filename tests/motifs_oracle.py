"""Brute-force δ-temporal motif counts, from the definition (small streams only).

Every set of 3 events (self-loops dropped; equal events are distinct) that spans at most
3 vertices and is connected is one instance; it counts for δ when its latest and
earliest times differ by at most δ. Its cell in the 6x6 table follows from the order of
its 3 events: the first event's vertices are 0 -> 1, the third vertex is 2, the second
event picks the row and the third the column (README, "Motif counts").

Equal times are ordered by SNAP's rule, written here from SNAP's description in the
README: per pair, per star centre, per triangle edge.
"""

from __future__ import annotations

from collections import defaultdict
from itertools import combinations

import numpy as np

ROW = [(2, 1), (1, 2), (2, 0), (0, 2), (1, 0), (0, 1)]
COL = [(0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1)]
TRIAD_OF_CELL = {(0, 2): 0, (0, 3): 1, (1, 2): 2, (1, 3): 3,
                 (2, 4): 4, (2, 5): 5, (3, 4): 6, (3, 5): 7}


def _rank(names: set[str]) -> dict[str, tuple]:
    try:
        return {v: (int(v), v) for v in names}
    except ValueError:
        return {v: (0, v) for v in names}


class Oracle:
    """Counts of ``events`` (a list of ``(src, dst, t)``) for any δ."""

    def __init__(self, events: list[tuple[str, str, int]]) -> None:
        names = {v for s, d, _ in events for v in (s, d)}
        self.rank = _rank(names)
        self.events = [(s, d, t) for s, d, t in events if s != d]
        self.sends = {(s, d) for s, d, _ in events}  # the static graph, self-loops included
        nbrs: dict[str, set[str]] = defaultdict(set)
        for s, d, _ in events:
            nbrs[s].add(d)
            nbrs[d].add(s)
        self.nbrs = nbrs
        self.pair_events: dict[frozenset, int] = defaultdict(int)
        for s, d, _ in self.events:
            self.pair_events[frozenset((s, d))] += 1

    # -- tie keys -------------------------------------------------------------------------
    def _nbr_key(self, centre: str, x: str) -> tuple:
        return (0 if (centre, x) in self.sends else 1, self.rank[x])

    def _pair_key(self, e: tuple) -> tuple:
        s, d, t = e
        lo = min((s, d), key=self.rank.get)
        hi = d if lo == s else s
        first = lo if (lo, hi) in self.sends else hi
        return (t, 0 if s == first else 1)

    def _star_key(self, centre: str, e: tuple) -> tuple:
        s, d, t = e
        x = d if s == centre else s
        return (t, *self._nbr_key(centre, x), 0 if s == centre else 1)

    def _triangle_edge(self, a: str, b: str, c: str) -> tuple[str, str, str]:
        degree = {v: (len(self.nbrs[v]), self.rank[v]) for v in (a, b, c)}
        u = min((a, b, c), key=degree.get)
        v, w = sorted({a, b, c} - {u}, key=lambda x: self._nbr_key(u, x))
        count = {p: self.pair_events[frozenset(p)] for p in ((u, v), (u, w), (v, w))}
        if count[(u, v)] >= max(count[(u, w)], count[(v, w)]):
            x, y, third = u, v, w
        elif count[(u, w)] >= max(count[(u, v)], count[(v, w)]):
            x, y, third = u, w, v
        else:
            x, y, third = v, w, u
        lo, hi = sorted((x, y), key=self.rank.get)
        return lo, hi, third

    def _triangle_key(self, edge: tuple[str, str, str], e: tuple) -> tuple:
        a, b, w = edge
        order = [(a, b), (b, a), (w, a), (w, b), (a, w), (b, w)]
        return (e[2], order.index((e[0], e[1])))

    # -- instances ------------------------------------------------------------------------
    def instances(self):
        """Yield ``(kind, ordered events, centre or None)`` for every instance."""
        for triple in combinations(self.events, 3):
            vertices = {v for s, d, _ in triple for v in (s, d)}
            if len(vertices) > 3:
                continue
            pairs = {frozenset((s, d)) for s, d, _ in triple}
            if len(pairs) == 1:
                yield "pair", sorted(triple, key=self._pair_key), None
            elif len(pairs) == 2:
                centre = next(iter(set.intersection(*(set(p) for p in pairs))))
                yield "star", sorted(triple, key=lambda e, c=centre: self._star_key(c, e)), centre
            else:
                edge = self._triangle_edge(*sorted(vertices))
                yield "triangle", sorted(triple, key=lambda e, g=edge: self._triangle_key(g, e)), None

    def table(self, delta: int) -> np.ndarray:
        """The 6x6 table for ``delta``."""
        out = np.zeros((6, 6), dtype=np.int64)
        for _, ordered, _ in self.instances():
            if ordered[-1][2] - ordered[0][2] <= delta:
                out[cell(ordered)] += 1
        return out

    def local(self, delta: int) -> dict[str, list[int]]:
        """Per-vertex counts in Raphtory's 40-count layout."""
        out = {v: [0] * 40 for v in self.rank}
        for kind, ordered, centre in self.instances():
            if ordered[-1][2] - ordered[0][2] > delta:
                continue
            if kind == "triangle":
                for v in {x for s, d, _ in ordered for x in (s, d)}:
                    out[v][32 + TRIAD_OF_CELL[cell(ordered)]] += 1
            elif kind == "pair":
                for v in (ordered[0][0], ordered[0][1]):
                    out[v][24 + _directions(v, ordered)] += 1
            else:
                nbr = [d if s == centre else s for s, d, _ in ordered]
                block = 0 if nbr[0] == nbr[1] else (16 if nbr[1] == nbr[2] else 8)
                out[centre][block + _directions(centre, ordered)] += 1
        return out


def _directions(v: str, ordered: list[tuple]) -> int:
    """Raphtory's index ``4 d1 + 2 d2 + d3``, ``d`` 1 for an event out of ``v``."""
    bits = [1 if s == v else 0 for s, _, _ in ordered]
    return 4 * bits[0] + 2 * bits[1] + bits[2]


def cell(ordered: list[tuple]) -> tuple[int, int]:
    """The 6x6 cell of an instance whose events are in order."""
    label = {ordered[0][0]: 0, ordered[0][1]: 1}
    for s, d, _ in ordered[1:]:
        for v in (s, d):
            label.setdefault(v, 2)
    second = (label[ordered[1][0]], label[ordered[1][1]])
    third = (label[ordered[2][0]], label[ordered[2][1]])
    return ROW.index(second), COL.index(third)
