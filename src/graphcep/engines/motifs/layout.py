"""SNAP's 6x6 table of the 36 motifs, and Raphtory's 40-count layout of local counts.

The 6x6 table (Paranjape et al., Figure 1; SNAP's ``Count3TEdge23Node``): name the
first event's vertices 0 -> 1 and the third vertex 2. The second event picks the row,
the third event the column::

    row     second event         column  third event
    0       2 -> 1               0       0 -> 1
    1       1 -> 2               1       1 -> 0
    2       2 -> 0               2       0 -> 2
    3       0 -> 2               3       2 -> 0
    4       1 -> 0               4       1 -> 2
    5       0 -> 1               5       2 -> 1

Cells (4, 0), (4, 1), (5, 0), (5, 1) are the two-node motifs; (0, 2), (0, 3), (1, 2),
(1, 3), (2, 4), (2, 5), (3, 4), (3, 5) the triangles; the other 24 the stars.
"""

from __future__ import annotations

import numpy as np

#: The second event of row r and the third event of column c, over vertices 0, 1, 2.
ROW_EDGES = ((2, 1), (1, 2), (2, 0), (0, 2), (1, 0), (0, 1))
COL_EDGES = ((0, 1), (1, 0), (0, 2), (2, 0), (1, 2), (2, 1))

TWO_NODE_CELLS = ((4, 0), (4, 1), (5, 0), (5, 1))
TRIANGLE_CELLS = ((0, 2), (0, 3), (1, 2), (1, 3), (2, 4), (2, 5), (3, 4), (3, 5))
STAR_CELLS = tuple((r, c) for r in range(6) for c in range(6)
                   if (r, c) not in TWO_NODE_CELLS + TRIANGLE_CELLS)

# cell -> the pair counter's letters (0: first vertex -> second); two sequences each
_PAIR = {(4, 0): ((0, 1, 0), (1, 0, 1)), (4, 1): ((1, 0, 0), (0, 1, 1)),
         (5, 0): ((0, 0, 0), (1, 1, 1)), (5, 1): ((0, 0, 1), (1, 1, 0))}
# cell -> (role, dir1, dir2, dir3) of the star counter; role 0 pre, 1 pos, 2 mid;
# directions relative to the centre, 0 out of it, 1 into it
_STAR = {(0, 0): (2, 1, 1, 1), (0, 1): (2, 1, 1, 0), (0, 4): (1, 1, 1, 0), (0, 5): (1, 1, 1, 1),
         (1, 0): (2, 1, 0, 1), (1, 1): (2, 1, 0, 0), (1, 4): (1, 1, 0, 0), (1, 5): (1, 1, 0, 1),
         (2, 0): (2, 0, 1, 0), (2, 1): (2, 0, 1, 1), (2, 2): (1, 0, 1, 0), (2, 3): (1, 0, 1, 1),
         (3, 0): (2, 0, 0, 0), (3, 1): (2, 0, 0, 1), (3, 2): (1, 0, 0, 0), (3, 3): (1, 0, 0, 1),
         (4, 2): (0, 0, 1, 0), (4, 3): (0, 0, 1, 1), (4, 4): (0, 1, 0, 0), (4, 5): (0, 1, 0, 1),
         (5, 2): (0, 0, 0, 0), (5, 3): (0, 0, 0, 1), (5, 4): (0, 1, 1, 0), (5, 5): (0, 1, 1, 1)}
# cell -> index of the triangle counter's (2, 2, 2) table
_TRIANGLE = {(0, 2): (0, 0, 0), (0, 3): (0, 0, 1), (1, 2): (0, 1, 0), (1, 3): (0, 1, 1),
             (2, 4): (1, 0, 0), (2, 5): (1, 0, 1), (3, 4): (1, 1, 0), (3, 5): (1, 1, 1)}


def matrices(pairs: np.ndarray, stars: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """The ``(deltas, 6, 6)`` tables from the three counters' totals.

    ``pairs``: ``(deltas, 2, 2, 2)``; ``stars``: ``(deltas, 3, 2, 2, 2)``;
    ``triangles``: ``(deltas, 2, 2, 2)``.
    """
    out = np.zeros((pairs.shape[0], 6, 6), dtype=np.int64)
    for cell, (first, second) in _PAIR.items():
        out[:, cell[0], cell[1]] = pairs[(slice(None), *first)] + pairs[(slice(None), *second)]
    for cell, index in _STAR.items():
        out[:, cell[0], cell[1]] = stars[(slice(None), *index)]
    for cell, index in _TRIANGLE.items():
        out[:, cell[0], cell[1]] = triangles[(slice(None), *index)]
    return out


def group_totals(tables: np.ndarray) -> dict[str, np.ndarray]:
    """Per δ: the two-node, star and triangle totals and their sum."""
    def cells(group: tuple[tuple[int, int], ...]) -> np.ndarray:
        return sum((tables[:, r, c] for r, c in group), np.zeros(tables.shape[0], np.int64))

    return {"two_node": cells(TWO_NODE_CELLS), "stars": cells(STAR_CELLS),
            "triangles": cells(TRIANGLE_CELLS), "all": tables.sum(axis=(1, 2))}


# Raphtory's local layout: 24 star counts (pre, mid, post; direction 1 = out of the
# vertex, index 4 * d1 + 2 * d2 + d3), 8 two-node counts (same directions), 8 triangles.
_RAPHTORY_ROLES = (0, 2, 1)  # Raphtory's pre, mid, post -> the star counter's roles


def raphtory_local(stars: np.ndarray, pairs: np.ndarray, triangles: np.ndarray) -> np.ndarray:
    """Per-vertex counts ``(vertices, deltas, 40)`` in Raphtory's local layout.

    ``stars``: ``(vertices, deltas, 3, 2, 2, 2)`` as centre; ``pairs``:
    ``(vertices, deltas, 2, 2, 2)`` two-node counts with letters relative to the vertex
    (0: out of it); ``triangles``: ``(vertices, deltas, 2, 2, 2)`` of the triangles the
    vertex is in.
    """
    nv, nd = stars.shape[:2]
    out = np.zeros((nv, nd, 40), dtype=np.int64)
    flip = (slice(None), slice(None), slice(None, None, -1), slice(None, None, -1),
            slice(None, None, -1))
    for block, role in enumerate(_RAPHTORY_ROLES):
        out[:, :, 8 * block:8 * block + 8] = stars[:, :, role][flip].reshape(nv, nd, 8)
    out[:, :, 24:32] = pairs[flip].reshape(nv, nd, 8)
    out[:, :, 32:40] = triangles.reshape(nv, nd, 8)
    return out


__all__ = ["COL_EDGES", "ROW_EDGES", "STAR_CELLS", "TRIANGLE_CELLS", "TWO_NODE_CELLS",
           "group_totals", "matrices", "raphtory_local"]
