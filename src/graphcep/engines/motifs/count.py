"""All 36 three-event δ-temporal motifs of a stream: the three counters and the 6x6 tables.

Semantics are SNAP's ``temporalmotifs``: an instance is any 3 events, in the group's
order (:mod:`~graphcep.engines.motifs.order`), on at most 3 vertices and connected, with
``t3 - t1 <= δ`` (inclusive); self-loops are dropped; equal events are distinct events.
All δ are counted in one call over one grouping of the events.
"""

from __future__ import annotations

from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import numba
import numpy as np

from graphcep.engines.motifs.layout import matrices, raphtory_local
from graphcep.engines.motifs.order import (
    MotifStream,
    Pairs,
    Stars,
    paired_stars,
    pairs,
    sort_ties,
)
from graphcep.engines.motifs.pairs import count_pairs
from graphcep.engines.motifs.stars import star_sweeps
from graphcep.engines.motifs.triangles import (
    count_triangles,
    directed_lists,
    group_triangles,
    higher_neighbours,
    list_triangles,
)

_EMPTY = np.zeros((0, 1, 1, 1, 1), dtype=np.int64)


@dataclass(frozen=True)
class StreamCounts:
    """Counts of one stream for several δ.

    ``tables``: ``(deltas, 6, 6)`` int64 in SNAP's layout
    (:mod:`graphcep.engines.motifs.layout`);
    ``local``: ``(vertices, deltas, 40)`` in Raphtory's local layout, or ``None``.
    """

    tables: np.ndarray
    local: np.ndarray | None


def count_stream(stream: MotifStream, deltas: np.ndarray, local: bool = False) -> StreamCounts:
    """Count every motif of ``stream`` for each δ (int64, in the unit of ``stream.t``).

    The groups of each counter are spread over numba's thread count
    (``NUMBA_NUM_THREADS``, :func:`numba.set_num_threads`); the kernels release the GIL.
    """
    deltas = np.asarray(deltas, dtype=np.int64)
    n, nd = stream.n, len(deltas)
    grouped = pairs(stream)
    hi_first = 1 - grouped.rev  # letters relative to hi, ties in hi's star order
    sort_ties(grouped.t, hi_first, grouped.off)

    def rows(shape: tuple[int, ...]) -> np.ndarray:
        return np.zeros(shape, np.int64) if local else _EMPTY.reshape((0,) + shape[1:])

    per_pair, per_hi = rows((len(grouped.lo), nd, 2, 2, 2)), rows((len(grouped.lo), nd, 2, 2, 2))
    per_centre, per_vertex = rows((n, nd, 3, 2, 2, 2)), rows((n, nd, 2, 2, 2))
    threads = _threads()
    with _pool(threads) as pool:
        jobs = [_spread(pool, threads, _pair_part, grouped.off, grouped.t, letters, deltas, out)
                for letters, out in ((grouped.rev, per_pair), (hi_first, per_hi))]
        centred = paired_stars(stream, grouped)  # while the pairs count
        jobs.append(_spread(pool, threads, _star_part, centred.off, centred, deltas, per_centre))
        groups = triangle_groups(stream, grouped, local)  # while the stars count
        # triangle groups vary most in cost: more runs, taken as threads free up
        jobs.append(_spread(pool, 4 * threads if threads > 1 else 1, _triangle_part, groups.off,
                            groups, grouped, deltas, per_vertex, by_vertex=True))
        pair_total, hi_total, star_total, tri_total = (_total(job) for job in jobs)
    star_total -= (pair_total + hi_total)[:, None]  # the triples on one neighbour
    tables = matrices(pair_total, star_total, tri_total)
    if not local:
        return StreamCounts(tables, None)
    # the star sweeps leave in the triples on one neighbour: taken out per centre with
    # the pair counts, as from the totals above (lo's ties in its order, hi's in its own)
    same = np.zeros_like(per_vertex)
    np.add.at(same, grouped.lo, per_pair)
    np.add.at(same, grouped.hi, per_hi)
    per_centre -= same[:, :, None]
    return StreamCounts(tables, local_counts(per_centre, grouped.lo, grouped.hi, per_pair,
                                             per_vertex))


def local_counts(per_centre: np.ndarray, lo: np.ndarray, hi: np.ndarray, per_pair: np.ndarray,
                 per_vertex: np.ndarray) -> np.ndarray:
    """Raphtory's ``(vertices, deltas, 40)`` from the counters' per-vertex outputs: stars
    per centre (the triples on one neighbour taken out), two-node counts per pair
    (``lo``/``hi`` its vertices), triangles per vertex."""
    pair_local = np.zeros_like(per_vertex)
    np.add.at(pair_local, lo, per_pair)
    np.add.at(pair_local, hi, per_pair[:, :, ::-1, ::-1, ::-1])
    return raphtory_local(per_centre, pair_local, per_vertex)


# -- threads: each counter's groups in runs of about equal size, one job per run --------


def _threads() -> int:
    """numba's thread count: ``NUMBA_NUM_THREADS``, or :func:`numba.set_num_threads`."""
    return numba.get_num_threads()


class _Inline:
    """A one-thread pool: each job runs when submitted."""

    def __enter__(self) -> _Inline:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def submit(self, job: Callable, *args: Any) -> Future:
        done: Future = Future()
        done.set_result(job(*args))
        return done


def _pool(threads: int) -> ThreadPoolExecutor | _Inline:
    return ThreadPoolExecutor(threads) if threads > 1 else _Inline()


def _spread(pool: ThreadPoolExecutor | _Inline, parts: int, job: Callable, off: np.ndarray,
            *args: Any, by_vertex: bool = False
            ) -> list[tuple[Future, np.ndarray | None, np.ndarray]]:
    """Submit ``job(a, b, off, *args)`` for about ``parts`` runs ``[a, b)`` of the groups
    ``off``, of about equal size. The last argument, the per-group output (when it has rows), is sliced to
    the run; indexed ``by_vertex``, each run has its own, added in by :func:`_total`."""
    runs = _runs(off, parts)
    *head, out = args
    jobs = []
    for a, b in runs:
        own = by_vertex and len(out) > 0 and len(runs) > 1
        mine = np.zeros_like(out) if own else out[a:b] if len(out) and not by_vertex else out
        jobs.append((pool.submit(job, a, b, off, *head, mine), mine if own else None, out))
    return jobs


def _runs(off: np.ndarray, parts: int) -> list[tuple[int, int]]:
    """About ``parts`` runs ``[a, b)`` of the groups ``off`` (CSR offsets of their
    sizes), of about equal size; one empty run when there is no group."""
    groups = len(off) - 1
    cuts = np.searchsorted(off, np.linspace(0, off[-1], max(parts, 1) + 1)[1:-1])
    bounds = [0, *np.unique(cuts[(cuts > 0) & (cuts < groups)]).tolist(), groups]
    return list(zip(bounds[:-1], bounds[1:], strict=True))


def _total(jobs: list[tuple[Future, np.ndarray | None, np.ndarray]]) -> np.ndarray:
    """The jobs' results summed; each run's own per-vertex output added to the whole."""
    total = jobs[0][0].result()
    for future, _, _ in jobs[1:]:
        total = total + future.result()
    for _, mine, out in jobs:
        if mine is not None:
            out += mine
    return total


def _pair_part(a: int, b: int, off: np.ndarray, t: np.ndarray, letters: np.ndarray,
               deltas: np.ndarray, out: np.ndarray) -> np.ndarray:
    run = slice(off[a], off[b])
    return count_pairs(t[run], letters[run], off[a:b + 1] - off[a], deltas, out)


def _star_part(a: int, b: int, off: np.ndarray, centred: Stars, deltas: np.ndarray,
               out: np.ndarray) -> np.ndarray:
    run = slice(off[a], off[b])
    return star_sweeps(centred.t[run], centred.nbr[run], centred.out[run], off[a:b + 1] - off[a],
                       centred.width, deltas, out, False)


def _triangle_part(a: int, b: int, off: np.ndarray, groups: TriangleGroups, grouped: Pairs,
                   deltas: np.ndarray, out: np.ndarray) -> np.ndarray:
    run = slice(off[a], off[b])
    part = TriangleGroups(off[a:b + 1] - off[a], groups.pair[a:b], groups.sides[run],
                          groups.thirds[run], groups.fwd, groups.bwd, groups.d_off,
                          groups.d_rank, groups.times)
    return count_triangle_groups(part, grouped, deltas, out)


@dataclass(frozen=True)
class TriangleGroups:
    """The triangle counter's input: group g is the pair ``pair[g]`` with its triangles'
    other pairs ``sides[off[g]:off[g + 1]]`` (with ``a``, with ``b``) and third vertices;
    ``fwd``/``bwd``/``d_off``/``d_rank``/``times``: each pair's directed event lists."""

    off: np.ndarray
    pair: np.ndarray
    sides: np.ndarray
    thirds: np.ndarray
    fwd: np.ndarray
    bwd: np.ndarray
    d_off: np.ndarray
    d_rank: np.ndarray
    times: np.ndarray


def triangle_groups(stream: MotifStream, grouped: Pairs, local: bool = False) -> TriangleGroups:
    """List the static triangles, give each to one edge, group them by edge (one group
    per triangle when ``local``: its counts then go to its three vertices)."""
    lo, hi = grouped.lo, grouped.hi
    d_off, d_rank = directed_lists(grouped.off, grouped.rev, grouped.rank, grouped.directed)
    pair = np.arange(len(lo))
    fwd = np.where(grouped.directed[:, 0] > 0, 2 * pair, -1)
    bwd = np.where(grouped.directed[:, 1] > 0, 2 * pair + 1, -1)
    degree = np.bincount(np.concatenate([lo, hi]), minlength=stream.n) + stream.self_loop
    rank = np.empty(stream.n, dtype=np.int64)
    rank[np.lexsort((np.arange(stream.n), degree))] = np.arange(stream.n)
    found = _listed(higher_neighbours(lo, hi, grouped.directed, rank), grouped.events, lo)
    g_off, g_pair, sides, thirds = group_triangles(found, lo, hi, local)
    return TriangleGroups(g_off, g_pair, sides, thirds, fwd, bwd, d_off, d_rank, grouped.times)


def _listed(up: tuple[np.ndarray, np.ndarray, np.ndarray], events: np.ndarray,
            lo: np.ndarray) -> np.ndarray:
    """:func:`list_triangles` over all vertices, in runs of vertices of about equal work
    on numba's thread count, the runs' triangles in vertex order."""
    up_off, nbr, ids = up
    threads, n = _threads(), len(up_off) - 1
    degree = np.diff(up_off)
    work = np.zeros(n + 1, dtype=np.int64)  # the neighbour lists each vertex scans
    np.cumsum(np.bincount(np.repeat(np.arange(n), degree), weights=degree[nbr], minlength=n)
              .astype(np.int64) + 1, out=work[1:])
    with _pool(threads) as pool:
        runs = [pool.submit(list_triangles, up_off, nbr, ids, events, lo, a, b)
                for a, b in _runs(work, 2 * threads if threads > 1 else 1)]
        return np.concatenate([run.result() for run in runs])


def count_triangle_groups(groups: TriangleGroups, grouped: Pairs, deltas: np.ndarray,
                          per_vertex: np.ndarray) -> np.ndarray:
    """The triangle counter's ``(deltas, 2, 2, 2)`` totals (SNAP's triad table)."""
    return count_triangles(groups.off, groups.pair, groups.sides, groups.thirds, grouped.lo,
                           grouped.hi, groups.fwd, groups.bwd, groups.d_off, groups.d_rank,
                           groups.times, grouped.t, grouped.off, deltas, per_vertex)


__all__ = ["StreamCounts", "TriangleGroups", "count_stream", "count_triangle_groups",
           "local_counts", "triangle_groups"]
