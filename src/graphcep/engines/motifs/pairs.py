"""Two-node δ-temporal motifs: every 3-event subsequence of one vertex pair (numba).

Paranjape et al.'s general counter over a 2-letter alphabet (letter 0: ``lo -> hi``,
letter 1: ``hi -> lo``): sliding over a pair's events in order, it keeps how many
1-, 2- and 3-letter subsequences the window holds; a new event ``e`` closes
``counts2[i, j]`` triples ``(i, j, e)``, an event leaving the window removes the
subsequences it starts. The window holds the events within δ of the newest one
(``t3 - t1 <= δ``, inclusive). Each δ keeps its own window over the same pass.
"""

from __future__ import annotations

import numba as nb
import numpy as np


@nb.njit(cache=True, nogil=True)
def pair_group(t, rev, begin, end, deltas, scratch, out):
    """Add the group's triple counts ``out[d, i, j, k]`` (letters i, j, k) for every δ;
    ``scratch``: :func:`pair_scratch`."""
    c1, c2, start = scratch
    nd = deltas.shape[0]
    c1[:] = 0
    c2[:] = 0
    start[:] = begin
    for j in range(begin, end):
        e = rev[j]
        for d in range(nd):
            s = start[d]
            while t[s] + deltas[d] < t[j]:
                f = rev[s]
                c1[d, f] -= 1
                c2[d, f, 0] -= c1[d, 0]
                c2[d, f, 1] -= c1[d, 1]
                s += 1
            start[d] = s
            for a in range(2):
                for b in range(2):
                    out[d, a, b, e] += c2[d, a, b]
            c2[d, 0, e] += c1[d, 0]
            c2[d, 1, e] += c1[d, 1]
            c1[d, e] += 1


@nb.njit(cache=True, nogil=True)
def pair_scratch(nd):
    """The 2-letter counter's state for ``nd`` windows."""
    return (np.zeros((nd, 2), dtype=np.int64), np.zeros((nd, 2, 2), dtype=np.int64),
            np.zeros(nd, dtype=np.int64))


@nb.njit(cache=True, nogil=True)
def count_pairs(t, rev, off, deltas, per_pair):
    """Triple counts of every pair group.

    Parameters
    ----------
    t, rev, off
        The pair groups (:class:`~graphcep.engines.motifs.order.Pairs`).
    deltas
        int64 windows, in the unit of ``t``.
    per_pair
        Output ``(pairs, len(deltas), 2, 2, 2)`` int64, letters relative to the pair's
        lower vertex, or an empty array to sum all pairs into the result only.

    Returns
    -------
    numpy.ndarray
        ``(len(deltas), 2, 2, 2)`` int64, summed over pairs.
    """
    nd = deltas.shape[0]
    total = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    keep = per_pair.shape[0] > 0
    group = np.zeros((nd, 2, 2, 2), dtype=np.int64)
    scratch = pair_scratch(nd)
    for p in range(off.shape[0] - 1):
        if off[p + 1] - off[p] < 3:
            continue
        group[:] = 0
        pair_group(t, rev, off[p], off[p + 1], deltas, scratch, group)
        total += group
        if keep:
            per_pair[p] = group
    return total


__all__ = ["count_pairs", "pair_group", "pair_scratch"]
