"""DDST reports: the match record schema, match graphs, and the rows of one push.

A report is one arriving edge's match component (see :mod:`graphcep.engines.ddst.baseline`
for when an edge reports); :class:`Reports` builds the rows of all of a push's reports
column by column, for the three engines alike.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from graphcep.engines.ddst.common import IndexedQuery, WindowGraph
from graphcep.engines.ddst.schema import (
    DDST_EDGE_TYPE,
    DDST_MATCH_SCHEMA,
    DDST_VERTEX_TYPE,
    REPORT_MODES,
)
from graphcep.events import match_ids
from graphcep.patterns.ddst import DDSTQuery

#: An empty result (tables are immutable: one serves every push without matches).
NO_MATCHES = DDST_MATCH_SCHEMA.empty_table()


# -- results ---------------------------------------------------------------------------


@dataclass(frozen=True)
class EdgeMatch:
    """One pair ``(qedge, stream edge)`` of the edge match relation ``Se``, with the edge."""

    qedge: str
    seq: int
    t: int
    src: str
    dst: str
    label: str | None = None
    src_label: str | None = None
    dst_label: str | None = None

    @property
    def ends(self) -> tuple[tuple[str, str | None], tuple[str, str | None]]:
        """The stream vertices it joins: ``(id, label)`` of its source and destination."""
        return (self.src, self.src_label), (self.dst, self.dst_label)


@dataclass(frozen=True)
class MatchGraph:
    """A match graph: vertex relation ``S`` and edge relation ``Se`` (empty: no match).

    ``vertices`` are ``(query vertex, stream vertex id, its label)`` in query-vertex order;
    ``edges`` are in stream order (then query-edge order).
    """

    vertices: tuple[tuple[str, str, str | None], ...] = ()
    edges: tuple[EdgeMatch, ...] = ()

    def __bool__(self) -> bool:
        return bool(self.edges)

    def vertex_pairs(self) -> frozenset[tuple[str, str, str | None]]:
        """``S`` as a set of ``(query vertex, stream vertex id, label)``."""
        return frozenset(self.vertices)

    def edge_pairs(self) -> frozenset[tuple[str, int]]:
        """``Se`` as a set of ``(query edge, seq)``."""
        return frozenset((e.qedge, e.seq) for e in self.edges)

    def components(self) -> list[MatchGraph]:
        """The match components (weakly connected), ordered by their earliest edge."""
        Vertex = tuple[str, str | None]
        root: dict[Vertex, Vertex] = {}

        def find(x: Vertex) -> Vertex:
            while root.setdefault(x, x) != x:
                root[x] = root[root[x]]
                x = root[x]
            return x

        for e in self.edges:
            root[find(e.ends[0])] = find(e.ends[1])
        groups: dict[Vertex, list[EdgeMatch]] = {}
        for e in self.edges:
            groups.setdefault(find(e.ends[0]), []).append(e)
        return [
            MatchGraph(tuple(p for p in self.vertices if find((p[1], p[2])) == r), tuple(es))
            for r, es in groups.items()
        ]

    def component_of(self, seq: int) -> MatchGraph:
        """The match component holding stream edge ``seq`` (empty if it is unmatched)."""
        mine = (c for c in self.components() if any(e.seq == seq for e in c.edges))
        return next(mine, MatchGraph())



def match_graph(q: IndexedQuery, g: WindowGraph, sim: np.ndarray, se: np.ndarray) -> MatchGraph:
    """Boolean relations as a :class:`MatchGraph` (names, times; in report order)."""
    es, ks = np.nonzero(se.T)
    edges, vertices = _pair_rows([_Part(g, ks, es, *np.nonzero(sim))])
    edge_rows = zip([q.enames[k] for k in edges[0]], *(col.to_pylist() for col in edges[1:]),
                    strict=True)  # fmt: skip
    vertex_rows = zip([q.vnames[u] for u in vertices[0]],
                      *(col.to_pylist() for col in vertices[1:]), strict=True)  # fmt: skip
    return MatchGraph(tuple(vertex_rows), tuple(EdgeMatch(*row) for row in edge_rows))






class ReportedPairs:
    """The edge pairs ``(query edge, stream edge)`` reported so far, for ``report="new"``.

    A pair is kept while its edge may still be in a window: a report holds only edges of
    its window, and windows only move forward, so a pair whose edge is older than the
    current window's start can never be reported again and is forgotten (in bulk, once
    the set has doubled). Sorted keys ``seq * |Eq| + query edge``, looked up vectorized.
    """

    #: pairs held before the first sweep of pairs that left the window
    first_limit = 1024

    def __init__(self, edges: int) -> None:
        self._edges = edges
        self._keys = np.empty(0, dtype=np.int64)
        self._times = np.empty(0, dtype=np.int64)
        self._limit = self.first_limit

    def __len__(self) -> int:
        return len(self._keys)

    def take_new(self, ks: np.ndarray, seqs: np.ndarray, ts: np.ndarray,
                 opened: int) -> np.ndarray:
        """Which of these pairs were not reported before (recording them as reported);
        ``opened`` is the current window's start time."""
        keys = seqs.astype(np.int64) * self._edges + ks
        at = np.searchsorted(self._keys, keys)
        known = at < len(self._keys)
        known[known] = self._keys[at[known]] == keys[known]
        new = ~known
        if new.any():
            order = np.argsort(keys[new], kind="stable")
            self._keys = np.insert(self._keys, at[new][order], keys[new][order])
            self._times = np.insert(self._times, at[new][order], ts[new][order])
        if len(self._keys) > self._limit:
            live = self._times >= opened
            self._keys, self._times = self._keys[live], self._times[live]
            self._limit = 2 * len(self._keys) + self.first_limit
        return new


def reported_pairs(query: DDSTQuery, report: str) -> ReportedPairs | None:
    """The state an engine keeps for its ``report`` mode (None: whole components)."""
    if report not in REPORT_MODES:
        raise ValueError(f"report must be one of {', '.join(REPORT_MODES)}, got {report!r}")
    return ReportedPairs(len(query.edges)) if report == "new" else None


class Reports:
    """The report rows of one push (:data:`DDST_MATCH_SCHEMA`), built column by column.

    A report holds a whole match component, thousands of edges on dense windows, and a
    push can make hundreds of reports. ``add`` keeps each report's pairs as found; ``table``
    orders and converts the pairs of all of them at once, in a fixed number of array
    operations per push: the ids and labels are converted to Arrow once per push and
    distinct value, and the rows take them by index. Shared by the three DDST engines.

    With ``reported`` (``report="new"``), a report holds only the component's edge pairs
    not reported before and the vertex pairs at their ends; ``first_t`` stays the
    component's earliest time. The arriving edge's own pairs are always new, so every
    report that the component rule makes is made, smaller.

    An engine's ``push_chunks`` hands the rows out as they are made (:meth:`take`) once
    they hold about ``chunk_rows`` edges (:meth:`full`): on a window that is one giant
    component every arrival reports all of it, and a push's reports together hold the
    square of the window.
    """

    def __init__(self, q: IndexedQuery, query_name: str,
                 reported: ReportedPairs | None = None) -> None:
        self._q = q
        self._name = query_name
        self._reported = reported
        self._enames = pa.array(list(q.enames), pa.string())
        self._vnames = pa.array(list(q.vnames), pa.string())
        self._heads: list[tuple[int, int, int, int]] = []  # start, end, trigger, first_t
        self._parts: list[_Part] = []
        self._held = 0  # edges held: the reports' graphs and pairs
        self.made = 0  # reports made, taken or not

    def __len__(self) -> int:
        """Reports held (made and not taken)."""
        return len(self._heads)

    def full(self, chunk_rows: int | None) -> bool:
        """Whether the reports held hold ``chunk_rows`` edges or more (None: no bound)."""
        return chunk_rows is not None and self._held >= chunk_rows

    def take(self) -> pa.Table:
        """The rows held, in the order added; none are held after."""
        table = self.table()
        self._heads, self._parts, self._held = [], [], 0
        return table

    def add(self, g: WindowGraph, sim: np.ndarray, se: np.ndarray, at: int, opened: int) -> None:
        """Report the component ``(sim, se)`` of ``g``, triggered by edge ``at``."""
        es, ks = np.nonzero(se.T)  # by edge, then query edge: report order if g's edges
        first_t = int(g.t[es].min())  # are in stream order (see _pair_rows)
        if self._reported is not None:
            new = self._reported.take_new(ks, g.seq[es], g.t[es], opened)
            ks, es = ks[new], es[new]
            sim = np.zeros_like(sim)
            sim[self._q.qsrc[ks], g.src[es]] = True
            sim[self._q.qdst[ks], g.dst[es]] = True
        self._parts.append(_Part(g, ks, es, *np.nonzero(sim)))
        self._heads.append((opened, int(g.t[at]), int(g.seq[at]), first_t))
        self._held += len(g.t) + len(es)
        self.made += 1

    def table(self) -> pa.Table:
        """The rows held, in the order added."""
        if not self._heads:
            return NO_MATCHES
        opened, ends, triggers, firsts = (list(c) for c in zip(*self._heads, strict=True))
        edges, vertices = _pair_rows(self._parts)
        columns = {
            "query": pa.array([self._name] * len(triggers), pa.string()),
            "match_id": pa.array(match_ids(self._name, np.array(triggers)[:, None]).tolist(),
                                 pa.string()),
            "window_start": pa.array(opened, pa.int64()),
            "window_end": pa.array(ends, pa.int64()),
            "trigger_seq": pa.array(triggers, pa.int64()),
            "first_t": pa.array(firsts, pa.int64()),
            "vertices": pa.ListArray.from_arrays(
                _offsets(len(p.vs) for p in self._parts),
                pa.StructArray.from_arrays([self._vnames.take(vertices.pop(0)), *vertices],
                                           fields=list(DDST_VERTEX_TYPE))),
            "edges": pa.ListArray.from_arrays(
                _offsets(len(p.es) for p in self._parts),
                pa.StructArray.from_arrays([self._enames.take(edges.pop(0)), *edges],
                                           fields=list(DDST_EDGE_TYPE))),
        }  # fmt: skip
        return pa.table(columns, schema=DDST_MATCH_SCHEMA)


@dataclass(frozen=True)
class _Part:
    """One report's pairs as found: ``Se`` as (query edge, edge of ``g``) and ``S`` as
    (query vertex, vertex of ``g``)."""

    g: WindowGraph
    ks: np.ndarray
    es: np.ndarray
    us: np.ndarray
    vs: np.ndarray


def _pair_rows(parts: list[_Part]) -> tuple[list[Any], list[Any]]:
    """The edge and vertex rows of the reports ``parts``, report after report, each in
    report order -- edge pairs in stream order ``(t, seq)``, then by query edge; vertex
    pairs by query vertex, then stream vertex id (code points), unlabelled before
    labelled, then label: edge rows ``[query edge number, seq, t, src, dst, label,
    src_label, dst_label]`` and vertex rows ``[query vertex number, vertex, label]``;
    numbers as NumPy, the rest as Arrow.

    The graphs of all reports are stacked into one (their vertex and edge numbers offset),
    so each step is one array operation for the whole push. A report whose graph lists its
    edges in stream order (every engine's does) needs no sort of its edge pairs.
    """
    graphs = [p.g for p in parts]
    edge_base = _starts([len(g.t) for g in graphs])
    vertex_base = _starts([g.n for g in graphs])
    edge_count = [len(p.es) for p in parts]
    vertex_count = [len(p.vs) for p in parts]

    def stacked(column: str) -> np.ndarray:
        return np.concatenate([getattr(g, column) for g in graphs])

    # edge pairs, by report, then (t, seq), then query edge
    es = np.concatenate([p.es for p in parts]) + np.repeat(edge_base, edge_count)
    ks = np.concatenate([p.ks for p in parts])
    t, seq = stacked("t")[es], stacked("seq")[es]
    report = np.repeat(np.arange(len(parts)), edge_count)
    if not _in_stream_order(report, t, seq):
        order = np.lexsort((ks, seq, t, report))
        ks, es, t, seq = ks[order], es[order], t[order], seq[order]
    shift = np.repeat(vertex_base, [len(g.t) for g in graphs])
    src, dst = (stacked("src") + shift)[es], (stacked("dst") + shift)[es]
    vs = np.concatenate([p.vs for p in parts]) + np.repeat(vertex_base, vertex_count)
    us = np.concatenate([p.us for p in parts])
    named = _Named(stacked("names"), stacked("vlabel"), [vs, src, dst])
    # vertex pairs by report, then query vertex, then id, then label
    by = _order(np.repeat(np.arange(len(parts)), vertex_count), us, *named.ranks(vs))
    m = len(src)
    ids, labels = named.text(np.concatenate([src, dst, vs[by]]))  # one take each
    ends = [(a.slice(0, m), a.slice(m, m), a.slice(2 * m)) for a in (ids, labels)]
    (src_id, dst_id, vertex_id), (src_label, dst_label, vertex_label) = ends
    label = _few_strings(stacked("label")[es])
    edges = [ks, pa.array(seq), pa.array(t), src_id, dst_id, label, src_label, dst_label]
    return edges, [us[by], vertex_id, vertex_label]


class _Named:
    """The vertices that report rows name, of a stack of graphs: their ids and labels,
    each distinct one converted to Arrow once, and their ranks in report order (ids by
    code point; unlabelled before labelled, then by label)."""

    def __init__(self, names: np.ndarray, labels: np.ndarray, rows: list[np.ndarray]) -> None:
        named = np.zeros(len(names), dtype=bool)
        for r in rows:
            named[r] = True
        self._local = np.cumsum(named) - 1  # stack vertex -> its number among the named
        used = np.flatnonzero(named)
        self._id_code, ids = _factorize(names[used])
        self._label_code, distinct = _factorize(labels[used])  # None: -1
        self._id_rank = _ranks(ids)[self._id_code]
        self._label_rank = np.append(_ranks(distinct) + 1, 0)[self._label_code]  # None: 0
        self._ids = pa.array(ids, pa.string())
        self._labels = pa.array(distinct, pa.string())

    def ranks(self, vertices: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Sort keys of stack vertices: id rank, label rank."""
        v = self._local[vertices]
        return self._id_rank[v], self._label_rank[v]

    def text(self, vertices: np.ndarray) -> tuple[pa.Array, pa.Array]:
        """Ids and labels of stack vertices, as Arrow strings."""
        v = self._local[vertices]
        return _take_text(self._ids, self._id_code[v]), _take_text(self._labels,
                                                                   self._label_code[v])


def _in_stream_order(report: np.ndarray, t: np.ndarray, seq: np.ndarray) -> bool:
    """Whether consecutive pairs of one report never step back in ``(t, seq)``. Pairs of
    one edge are adjacent and by query edge (``np.nonzero`` of ``Se`` transposed), and
    ``(t, seq)`` names one edge, so then the pairs are in report order."""
    dt = np.diff(t)
    back = (dt < 0) | ((dt == 0) & (np.diff(seq) < 0))
    return not np.any(back & (report[1:] == report[:-1]))


def _order(*keys: np.ndarray) -> np.ndarray:
    """The order sorting by ``keys``, the first most significant, all non-negative and
    jointly distinct: one sort of a combined key when it fits 62 bits (a sort per key,
    ``np.lexsort``, costs several times more on large pushes), else ``np.lexsort``."""
    sizes = [int(k.max()) + 1 if len(k) else 1 for k in keys]
    if math.prod(sizes) >= 1 << 62:
        return np.lexsort(keys[::-1])
    combined = np.zeros(len(keys[0]), dtype=np.int64)
    for key, size in zip(keys, sizes, strict=True):
        combined = combined * size + key
    return np.argsort(combined)


def _starts(sizes: list[int]) -> np.ndarray:
    """Where each of consecutive blocks of these sizes starts."""
    return np.cumsum([0, *sizes[:-1]], dtype=np.int64)


def _ranks(values: Any) -> np.ndarray:
    """Each value's position in sorted order (Python ``<``: code points for strings)."""
    rank = np.empty(len(values), dtype=np.int64)
    rank[np.argsort(np.asarray(values, dtype=object), kind="stable")] = np.arange(len(values))
    return rank


def _few_strings(values: np.ndarray) -> pa.Array:
    """An object array of strings or ``None`` drawn from a small vocabulary (edge labels),
    as Arrow: each distinct string is converted once."""
    codes, distinct = _factorize(values)
    return _take_text(pa.array(distinct, pa.string()), codes)


def _take_text(words: pa.Array, codes: np.ndarray) -> pa.Array:
    """``words`` taken by ``codes`` (from :func:`_factorize`; -1, a ``None``, is null)."""
    return words.take(pa.array(codes, mask=codes < 0))


#: Below this many values a dict numbers them faster than ``pd.factorize``, whose fixed
#: cost (tens of µs) dominates the reports of a push on sparse streams.
_SMALL_FACTORIZE = 256


def _factorize(values: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Number the distinct values of an object array in order of first appearance:
    ``(code of each value, None: -1; the distinct values as an object array)``."""
    if len(values) > _SMALL_FACTORIZE:
        codes, distinct = pd.factorize(values)
        return codes, np.asarray(distinct, dtype=object)
    index: dict[Any, int] = {}
    codes = np.fromiter((-1 if v is None else index.setdefault(v, len(index))
                         for v in values.tolist()), dtype=np.int64, count=len(values))  # fmt: skip
    distinct = np.empty(len(index), dtype=object)
    distinct[:] = list(index)
    return codes, distinct



def _offsets(sizes: Iterable[int]) -> pa.Array:
    """List offsets (int32) for consecutive lists of these sizes."""
    return pa.array(np.cumsum([0, *sizes], dtype=np.int32))

