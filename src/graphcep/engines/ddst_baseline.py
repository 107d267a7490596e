"""Baseline DDST engine: Algorithm DDST of "Event pattern matching over graph streams"
(Sec. 3.1), run on every window.

This is the reference the faster signature and coloring engines are checked against; it
favours being obviously right over being fast.

Semantics
---------
*Labels.* Stream edges carry ``label``; their endpoints carry ``src_label`` /
``dst_label`` (all optional columns; absent or null means "no label"). A query label
``None`` (``*``) matches any label, null included; a query label ``"M"`` matches exactly
``"M"``. A stream vertex is an id *with* the label an edge gives it: the graph of a window
has vertex ``(a, "M")`` for every edge giving ``a`` the label ``M``, and ``(a, null)``
for every edge giving it none. The paper's ``L`` is a function on vertices, so in its
model -- every edge reporting the same label for ``a`` -- this is just ``L``. When labels
disagree, ``a`` labelled ``S`` and ``a`` labelled ``M`` are two vertices; a later edge can
then never relabel an earlier one, which the reporting rule below needs (with "the newest
label wins", an edge fitting no query edge could relabel ``a`` and complete a match that
holds no new edge, and that no arrival would report).

*Definition 1 (DDS), read per pair.* A vertex relation ``S ⊆ Vq × V`` with, for **every**
``(u, v) ∈ S``: the labels agree (1); the out-edges of ``u`` have pairwise *distinct*
matching edges out of ``v`` whose destinations match in ``S`` and whose labels agree (2b);
likewise the in-edges (2c), as a separate family (so a stream self-loop may serve a query
self-loop once as an out-edge and once as an in-edge); and every query vertex has a match
(2a). (The paper's text quantifies (2b)-(2c) under (2a)'s ``∃v``; its explanation "for a
pair of matching vertices u and v, conditions (2bc) ensure in_degree(u) <= in_degree(v)
..." and line 25 of Algorithm DDST, which removes every failing ``v`` from ``sim(u)``,
make it per pair.)

*Definition 2 (DDST).* The match graph is a pair ``(S, Se)``, ``Se ⊆ Eq × E`` the edge
match relation, such that: every ``(eq, e) ∈ Se`` has agreeing labels and endpoints
matched in ``S``; the DDS conditions (2b)-(2c) hold with the matching edges taken from
``Se`` (the match graph, after timing removal -- as the algorithm checks degrees on it);
and every ``(eq, e) ∈ Se`` has a timing witness *in its match component* (a weakly
connected component of the match graph): a choice of one ``Se``-partner in that component
for every query edge, with ``e`` for ``eq``, such that ``a ≺ b`` implies
``t(choice(a)) < t(choice(b))`` -- strictly earlier, so equal times are unordered; the
chosen stream edges need not be distinct (Definition 2 asks for "a set of edges ... that
together conform"). All conditions are monotone (a larger relation keeps every witness),
so the union of all such pairs is again one: **the maximal match graph** of a window is
unique, and it is what Algorithm DDST computes -- dual simulation with edge labels (line
2, Ma et al.'s ``DualSim``), then, to a fixpoint, timing filtering per match component in
topological and reverse topological order of the timing graph (lines 9-18; one forward
and one backward pass leave exactly the edges that have a witness, for fixed candidates)
and degree preservation (lines 20-26, a bipartite matching per pair). Since the query
graph is connected, every match component matches every query vertex and edge (the
paper's "each connected component of a match graph contains at least one match
instance").

*Windows* (the paper's line 1: "for each time window G of size w", evaluated "per window
(i.e., per item in the stream)"). One window per arriving edge ``e_k``, in stream order
``(t, seq)``:

* ``WITHIN W`` (time): the edges so far with ``t >= t_k - W``, i.e. ``[t_k - W, t_k]``,
  both ends included -- the paper's "time window [t − w, t] ... edge e expires ... if its
  timestamp T(e) < t − w";
* ``WITHIN N EDGES`` (count): the ``N`` most recent edges, ``e_{k-N+1} .. e_k``.

Edges with equal ``t`` each open their own window (the later one holds the earlier).

*Reporting* ("our goal is to report matches as soon as they appear, in an online
manner"). At window ``k`` the engine reports the match component of the maximal match
graph that contains the newest edge ``e_k`` -- if ``e_k`` is matched at all -- and nothing
else. This loses nothing and never repeats without news: validity is monotone in the
graph (and a vertex's label is fixed by its identity), so a component of window ``k``
that does not contain ``e_k`` lies within window ``k-1``, is valid there, and lies inside
one component of it; by induction every component of every
window is a subgraph of a component reported at that window or earlier. Each report holds
its newest edge for the first time; a component that only shrinks as old edges expire is
not reported again. Equivalently: every matched stream edge is reported by the arrival
of the newest edge of its component, like the signature method's "run DDST for the last
window" on a signature hit. (Reporting whenever a window's graph differs from the previous
one would repeat every match each time one of its edges expires.)

*Exact shortcut.* The maximal match graph decomposes over the connected components of the
window's *candidate* edges (those whose labels fit some query edge), since every
condition is local to a component; so window ``k`` is evaluated on the candidate component
of ``e_k`` only, and not at all when ``e_k`` fits no query edge.
:func:`ddst_match_graph` evaluates a whole window, as the paper's line 1 does.

Output
------
:data:`DDST_MATCH_SCHEMA`, one row per report:

================  =============================================  ==========================
column            type                                           meaning
================  =============================================  ==========================
``query``         string                                         query name
``match_id``      string                                         hash of query and trigger
``window_start``  int64                                          µs: ``t_k - W`` (time) or
                                                                 the oldest edge's ``t``
``window_end``    int64                                          µs: ``t_k``
``trigger_seq``   int64                                          ``seq`` of ``e_k``
``first_t``       int64                                          earliest matched edge's t
``vertices``      list<struct<qvar: string, vertex: string,      the component's ``S``:
                  label: string>>                                query vertex, stream
                                                                 vertex id and label
``edges``         list<struct<qedge: string, seq: int64,         the component's ``Se``,
                  t: int64, src: string, dst: string,            in stream order, with the
                  label: string, src_label: string,              stream edge's labels
                  dst_label: string>>
================  =============================================  ==========================

Example (the paper's Example 5 as a stream: AB edges at 30, 40, 90; CA at 2, 45, 100; DC at
50, 95 -- times in seconds)
---------------------------------------------------------------------------------------
>>> import pyarrow as pa
>>> from graphcep.patterns.ddst import DDSTBuilder
>>> q = (DDSTBuilder("spread").vertex("A", "M").vertex("B", "M").vertex("C", "M")
...      .vertex("D", "M").edge("AB", "A", "B", "congested").edge("CA", "C", "A", "congested")
...      .edge("DC", "D", "C", "congested").order("AB", "CA", "DC").within(200, "s").build())
>>> rows = sorted([(2, "c", "a"), (30, "a", "b"), (40, "a", "b"), (45, "c", "a"), (50, "d", "c"),
...                (90, "a", "b"), (95, "d", "c"), (100, "c", "a")])
>>> stream = pa.table({"t": [r[0] * 1_000_000 for r in rows], "src": [r[1] for r in rows],
...     "dst": [r[2] for r in rows], "label": ["congested"] * 8,
...     "src_label": ["M"] * 8, "dst_label": ["M"] * 8})
>>> out = DDSTBaselineEngine(q).push(stream)
>>> out.column("window_end").to_pylist()       # reported by the edges at 50 s and 95 s
[50000000, 95000000]
>>> [(e["qedge"], e["t"] // 1_000_000) for e in out.column("edges")[1].as_py()]
[('AB', 30), ('AB', 40), ('CA', 45), ('DC', 50), ('DC', 95)]
"""

from __future__ import annotations

import math
import pickle
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines import ddst_kernel as kernel
from graphcep.engines.base import StateBoundError
from graphcep.engines.base import check_stream_order as check_batch_order
from graphcep.events import empty_edges, match_ids, normalize_edges
from graphcep.patterns.ddst import DDSTQuery, order_cycle

__all__ = [
    "DDST_VERTEX_TYPE",
    "DDST_EDGE_TYPE",
    "DDST_MATCH_SCHEMA",
    "EdgeMatch",
    "MatchGraph",
    "DDSTBaselineEngine",
    "ddst_match_graph",
    "timing_filter",
]

#: One pair of the vertex match relation ``S``: query vertex, stream vertex id and label.
DDST_VERTEX_TYPE = pa.struct(
    [pa.field("qvar", pa.string()), pa.field("vertex", pa.string()), pa.field("label", pa.string())]
)
#: One pair of the edge match relation ``Se``, with the stream edge's time and endpoints.
DDST_EDGE_TYPE = pa.struct(
    [
        pa.field("qedge", pa.string()),
        pa.field("seq", pa.int64()),
        pa.field("t", pa.int64()),
        pa.field("src", pa.string()),
        pa.field("dst", pa.string()),
        pa.field("label", pa.string()),
        pa.field("src_label", pa.string()),
        pa.field("dst_label", pa.string()),
    ]
)
#: Reported match components (see the module docstring).
DDST_MATCH_SCHEMA = pa.schema(
    [
        pa.field("query", pa.string()),
        pa.field("match_id", pa.string()),
        pa.field("window_start", pa.int64()),
        pa.field("window_end", pa.int64()),
        pa.field("trigger_seq", pa.int64()),
        pa.field("first_t", pa.int64()),
        pa.field("vertices", pa.list_(DDST_VERTEX_TYPE)),
        pa.field("edges", pa.list_(DDST_EDGE_TYPE)),
    ]
)

#: An empty result (tables are immutable: one serves every push without matches).
_NO_MATCHES = DDST_MATCH_SCHEMA.empty_table()
_LABEL_COLUMNS = ("label", "src_label", "dst_label")
_INT_MIN = np.iinfo(np.int64).min
_INT_MAX = np.iinfo(np.int64).max


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


# -- the query and the window as arrays ------------------------------------------------


@dataclass(frozen=True)
class _Query:
    """A :class:`DDSTQuery` as index arrays: query vertices ``0..nv-1``, edges ``0..ne-1``."""

    vnames: tuple[str, ...]
    enames: tuple[str, ...]
    vlabels: tuple[str | None, ...]
    elabels: tuple[str | None, ...]
    qsrc: np.ndarray
    qdst: np.ndarray
    out_q: tuple[tuple[int, ...], ...]
    in_q: tuple[tuple[int, ...], ...]
    topo: tuple[int, ...]
    pre: tuple[tuple[int, ...], ...]
    post: tuple[tuple[int, ...], ...]
    arrays: tuple[np.ndarray, ...] = ()  #: the above for the compiled kernel (kernel.ddst)


def _compile(query: DDSTQuery) -> _Query:
    vidx = {n: i for i, n in enumerate(query.vertex_names)}
    eidx = {n: i for i, n in enumerate(query.edge_names)}
    qsrc = np.array([vidx[e.src] for e in query.edges], dtype=np.int64)
    qdst = np.array([vidx[e.dst] for e in query.edges], dtype=np.int64)
    pre_names, post_names = query.predecessors(), query.successors()
    pre = tuple(tuple(eidx[p] for p in pre_names[e]) for e in query.edge_names)
    post = tuple(tuple(eidx[s] for s in post_names[e]) for e in query.edge_names)
    out_q = tuple(tuple(np.flatnonzero(qsrc == u).tolist()) for u in range(len(vidx)))
    in_q = tuple(tuple(np.flatnonzero(qdst == u).tolist()) for u in range(len(vidx)))
    topo = tuple(eidx[e] for e in query.topological_order())
    arrays = (qsrc, qdst, np.array(topo, dtype=np.int64),
              *kernel.csr(pre), *kernel.csr(post), *kernel.csr(out_q), *kernel.csr(in_q))
    return _Query(
        vnames=query.vertex_names,
        enames=query.edge_names,
        vlabels=tuple(v.label for v in query.vertices),
        elabels=tuple(e.label for e in query.edges),
        qsrc=qsrc,
        qdst=qdst,
        out_q=out_q,
        in_q=in_q,
        topo=topo,
        pre=pre,
        post=post,
        arrays=arrays,
    )


@dataclass(frozen=True)
class _Graph:
    """A window's edges; vertices, ``(id, label)`` pairs, are numbered ``0..n-1``."""

    src: np.ndarray  #: int64 vertex numbers
    dst: np.ndarray
    t: np.ndarray  #: int64 µs
    seq: np.ndarray
    label: np.ndarray  #: object: edge label or None
    vlabel: np.ndarray  #: object, per vertex number: its label or None
    names: np.ndarray  #: object, per vertex number: the stream vertex id

    @property
    def n(self) -> int:
        return len(self.names)

    def select(self, keep: np.ndarray) -> _Graph:
        """The edges where ``keep``; vertices (and their labels) unchanged."""
        kept = (self.src, self.dst, self.t, self.seq, self.label)
        return _Graph(*(col[keep] for col in kept), self.vlabel, self.names)


def number_vertices(ids: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray,
                                                                   np.ndarray]:
    """Number the distinct ``(id, label)`` pairs of two parallel arrays, in order of first
    appearance: ``(number of each element, id of each pair, label of each pair or None)``.

    By hashing: ids are Python strings, and sorting them (``np.unique``) costs a Python
    comparison per step -- it was most of a verification's time on real streams.
    """
    id_code, id_names = pd.factorize(ids)
    label_code, label_names = pd.factorize(labels)  # None: -1
    width = len(label_names) + 1
    number, pairs = pd.factorize(id_code.astype(np.int64) * width + label_code + 1)
    label_of = np.empty(width, dtype=object)  # code 0: no label
    label_of[1:] = label_names
    names = np.asarray(id_names, dtype=object)[pairs // width]
    return number.astype(np.int64), names, label_of[pairs % width]


class PartGraphs:
    """Window graphs of parts of an engine's window (the signature and coloring engines).

    A part's edges carry the engine's own vertex numbers (indexes into its ``names`` /
    ``labels``); :meth:`graph` renumbers them ``0..n-1`` in order of first appearance.
    Integers: no string hashing per verification. A scratch array of -1 as long as the
    engine's numbering is kept between calls, so that each costs the part's edges only (a
    verification renumbers a few hundred edges of a window of thousands).
    """

    def __init__(self) -> None:
        self._scratch = np.empty(0, dtype=np.int64)

    def graph(self, src: np.ndarray, dst: np.ndarray, t: np.ndarray, seq: np.ndarray,
              label: np.ndarray, names: np.ndarray,
              labels: np.ndarray) -> tuple[_Graph, np.ndarray]:
        """The part's graph, and per new vertex number the engine's."""
        if len(self._scratch) < len(names):
            self._scratch = np.full(len(names), -1, dtype=np.int64)
        new_src, new_dst, kept = kernel.renumber(src, dst, self._scratch)
        return _Graph(new_src, new_dst, t, seq, label, labels[kept], names[kept]), kept


def _graph(cols: Mapping[str, np.ndarray]) -> _Graph:
    """Number the vertices, ``(id, label)`` pairs, of a window's columns."""
    m = len(cols["t"])
    number, names, vlabel = number_vertices(np.concatenate([cols["src"], cols["dst"]]),
                                            np.concatenate([cols["src_label"], cols["dst_label"]]))
    return _Graph(number[:m], number[m:], cols["t"], cols["seq"], cols["label"], vlabel, names)


# -- Algorithm DDST ----------------------------------------------------------------------


def _compat(q: _Query, g: _Graph) -> tuple[np.ndarray, np.ndarray]:
    """Label compatibility: vertices ``(nv, n)`` and edges with their endpoints ``(ne, m)``."""
    vl = [np.ones(g.n, bool) if lab is None else g.vlabel == lab for lab in q.vlabels]
    vc = np.array(vl, dtype=bool).reshape(len(q.vlabels), g.n)
    el = [np.ones(len(g.t), bool) if lab is None else g.label == lab for lab in q.elabels]
    ec = np.array(el, dtype=bool).reshape(len(q.elabels), len(g.t))
    return vc, ec & vc[q.qsrc][:, g.src] & vc[q.qdst][:, g.dst]


def _components(n: int, src: np.ndarray, dst: np.ndarray) -> np.ndarray:
    """Weakly connected components: per vertex, the smallest vertex number in its part."""
    return kernel.components(n, src, dst)


def _ddst(q: _Query, g: _Graph, vc: np.ndarray, ec: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Algorithm DDST on one window: the maximal ``(S, Se)`` as boolean matrices (compiled:
    :func:`graphcep.engines.ddst_kernel.ddst`)."""
    return kernel.ddst(*q.arrays, g.src, g.dst, g.t, np.ascontiguousarray(vc),
                       np.ascontiguousarray(ec))


def _match_graph(q: _Query, g: _Graph, sim: np.ndarray, se: np.ndarray) -> MatchGraph:
    """Boolean relations as a :class:`MatchGraph` (names, times; in report order)."""
    es, ks = np.nonzero(se.T)
    edges, vertices = _pair_rows([_Part(g, ks, es, *np.nonzero(sim))])
    edge_rows = zip([q.enames[k] for k in edges[0]], *(col.to_pylist() for col in edges[1:]),
                    strict=True)  # fmt: skip
    vertex_rows = zip([q.vnames[u] for u in vertices[0]],
                      *(col.to_pylist() for col in vertices[1:]), strict=True)  # fmt: skip
    return MatchGraph(tuple(vertex_rows), tuple(EdgeMatch(*row) for row in edge_rows))


#: What a report holds: the whole match component, or only its pairs not reported before.
REPORT_MODES = ("component", "new")


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
    """

    def __init__(self, q: _Query, query_name: str,
                 reported: ReportedPairs | None = None) -> None:
        self._q = q
        self._name = query_name
        self._reported = reported
        self._enames = pa.array(list(q.enames), pa.string())
        self._vnames = pa.array(list(q.vnames), pa.string())
        self._heads: list[tuple[int, int, int, int]] = []  # start, end, trigger, first_t
        self._parts: list[_Part] = []

    def __len__(self) -> int:
        return len(self._heads)

    def add(self, g: _Graph, sim: np.ndarray, se: np.ndarray, at: int, opened: int) -> None:
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

    def table(self) -> pa.Table:
        """The rows added so far, in the order added."""
        if not self._heads:
            return _NO_MATCHES
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

    g: _Graph
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


def label_fit(wanted: str | None, given: np.ndarray) -> np.ndarray:
    """A query label (``None``: any) against an object array of stream labels."""
    if wanted is None:
        return np.ones(len(given), dtype=bool)
    return np.asarray(given == wanted, dtype=bool).reshape(len(given))


def edge_fit(cols: Mapping[str, np.ndarray], src_label: str | None, label: str | None,
             dst_label: str | None) -> np.ndarray:
    """Which edges of ``cols`` fit a query edge's labels (its source's, its own, its
    destination's; ``None`` is any). Shared by the signature and coloring engines."""
    return (label_fit(src_label, cols["src_label"]) & label_fit(label, cols["label"])
            & label_fit(dst_label, cols["dst_label"]))  # fmt: skip


def _offsets(sizes: Iterable[int]) -> pa.Array:
    """List offsets (int32) for consecutive lists of these sizes."""
    return pa.array(np.cumsum([0, *sizes], dtype=np.int32))


def _component_of(g: _Graph, sim: np.ndarray, se: np.ndarray, e: int) -> tuple[np.ndarray, ...]:
    """Restrict ``(S, Se)`` to the match component holding stream edge ``e``."""
    active = se.any(axis=0)
    comp = _components(g.n, g.src[active], g.dst[active])
    mine = comp == comp[g.src[e]]
    return sim & mine[None, :], se & mine[g.src][None, :]


# -- public functions ------------------------------------------------------------------


def timing_filter(
    candidates: Mapping[str, Iterable[int]], order: Iterable[tuple[str, str]]
) -> dict[str, list[int]]:
    """Lines 9-18 of Algorithm DDST on one match component: drop times without a witness.

    Parameters
    ----------
    candidates : mapping of str to iterable of int
        For each query edge, the timestamps of the stream edges matching it.
    order : iterable of (str, str)
        Timing order pairs ``(a, b)``: ``a ≺ b``.

    Returns
    -------
    dict of str to list of int
        The kept timestamps per query edge, in the given order: exactly those that belong
        to some choice of one timestamp per query edge respecting ``≺``.

    Examples
    --------
    The paper's Example 5:

    >>> timing_filter({"AB": [30, 40, 90], "CA": [2, 45, 100], "DC": [50, 95]},
    ...               [("AB", "CA"), ("CA", "DC")])
    {'AB': [30, 40], 'CA': [45], 'DC': [50, 95]}
    """
    names = list(candidates)
    pairs = list(order)
    cycle = order_cycle(pairs)
    if cycle is not None:
        raise ValueError(f"the timing order has a cycle: {' < '.join(cycle)}")
    idx = {n: i for i, n in enumerate(names)}
    unknown = [n for p in pairs for n in p if n not in idx]
    if unknown:
        raise ValueError(f"the timing order names unknown edges: {', '.join(unknown)}")
    pre = tuple(tuple(idx[a] for a, b in pairs if b == n) for n in names)
    post = tuple(tuple(idx[b] for a, b in pairs if a == n) for n in names)
    topo: list[int] = []
    while len(topo) < len(names):
        topo.append(
            next(i for i in range(len(names)) if i not in topo and set(pre[i]) <= set(topo))
        )
    times = [np.asarray(list(candidates[n]), dtype=np.int64) for n in names]
    # one candidate column per time, in one component; row k: query edge k's candidates
    owner = np.repeat(np.arange(len(names)), [len(x) for x in times])
    cand = np.arange(len(names))[:, None] == owner[None, :]
    flat = np.concatenate([np.zeros(0, np.int64), *times])
    keep = kernel.timing_keep(cand, flat, np.zeros(len(flat), np.int64), 1,
                              np.array(topo, np.int64), *kernel.csr(pre), *kernel.csr(post))
    return {n: flat[keep[i]].tolist() for i, n in enumerate(names)}


def ddst_match_graph(query: DDSTQuery, window: pa.Table) -> MatchGraph:
    """The maximal DDST match graph of one window (Algorithm DDST, lines 2-27).

    Parameters
    ----------
    query : DDSTQuery
        The pattern; its window is not applied (``window`` *is* the window).
    window : pyarrow.Table
        The window's edges in the edge schema (``t``, ``src``, ``dst``, ``seq``, optional
        ``label``, ``src_label``, ``dst_label``), in stream order.

    Returns
    -------
    MatchGraph
        All match components (empty when there is no match).

    Examples
    --------
    >>> from graphcep.patterns.ddst import DDSTBuilder
    >>> q = DDSTBuilder().vertex("A").vertex("B").edge("x", "A", "B").edge("y", "B", "A") \\
    ...     .before("x", "y").within(10, "s").build()
    >>> w = pa.table({"t": [1, 2, 3], "src": ["a", "b", "c"], "dst": ["b", "a", "d"]})
    >>> sorted(ddst_match_graph(q, w).edge_pairs())
    [('x', 0), ('y', 1)]
    """
    cols = _columns(normalize_edges(window))
    if len(cols["t"]) == 0:
        return MatchGraph()
    q = _compile(query)
    g = _graph(cols)
    sim, se = _ddst(q, g, *_compat(q, g))
    return _match_graph(q, g, sim, se)


def _labels(table: pa.Table, name: str) -> np.ndarray:
    """A label column as an object array of str/None (all None when absent)."""
    if name not in table.column_names:
        return np.full(table.num_rows, None, dtype=object)
    col = table.column(name)
    if not pa.types.is_string(col.type):
        col = pc.cast(col, pa.string())
    return _strings(col)


def _strings(col: pa.ChunkedArray) -> np.ndarray:
    """A string column as a 1-d object array of str/None (half the cost of ``to_pylist``)."""
    return np.asarray(col.to_numpy(), dtype=object).reshape(len(col))


def _columns(table: pa.Table) -> dict[str, np.ndarray]:
    """The columns the engine keeps, as NumPy arrays."""
    cols = {
        "t": table.column("t").to_numpy().astype(np.int64),
        "seq": table.column("seq").to_numpy().astype(np.int64),
        "src": _strings(table.column("src")),
        "dst": _strings(table.column("dst")),
    }
    cols.update({name: _labels(table, name) for name in _LABEL_COLUMNS})
    return cols


# -- the engine --------------------------------------------------------------------------


def batch_columns(batch: pa.Table | pa.RecordBatch, next_seq: int) -> dict[str, np.ndarray] | None:
    """A pushed batch as engine columns (``None`` when empty); without a ``seq`` column the
    edges are numbered on from ``next_seq``. Shared by the three DDST engines."""
    if isinstance(batch, pa.RecordBatch):
        batch = pa.Table.from_batches([batch])
    if batch.num_rows == 0:
        return None
    if "seq" not in batch.column_names:
        numbers = np.arange(next_seq, next_seq + batch.num_rows, dtype=np.int64)
        batch = batch.append_column("seq", pa.array(numbers))
    return _columns(normalize_edges(batch))


def check_stream_order(t: np.ndarray, seq: np.ndarray, last: tuple[int, int],
                       watermark: int) -> None:
    """Raise :class:`OutOfOrderError` unless the batch follows ``last`` in stream order
    ``(t, seq)``, is in order itself, and starts at or after the watermark (the message
    names the first offending row: :func:`graphcep.engines.base.check_stream_order`)."""
    check_batch_order(t, seq, last, watermark)


class DDSTBaselineEngine:
    """Online DDST matching by running Algorithm DDST on the window of every arriving edge.

    Parameters
    ----------
    query : DDSTQuery
        The event pattern (query graph, timing order, window).
    max_window_edges : int
        State bound: a window holding more edges raises :class:`StateBoundError`.
    report : str
        ``"component"`` (default): each report holds its whole match component.
        ``"new"``: only the component's edge pairs not reported before, and the vertex
        pairs at their ends (:class:`Reports`) -- the same reports, without repeating a
        growing component at every arrival.

    Notes
    -----
    Follows the engine protocol of :mod:`graphcep.engines.base`; matches come back in
    :data:`DDST_MATCH_SCHEMA`. Cost per arriving edge: Algorithm DDST on the candidate
    component of the edge, ``O(|Eq| |Ew| + |Se|^2)`` as in the paper.
    """

    def __init__(self, query: DDSTQuery, *, max_window_edges: int = 1_000_000,
                 report: str = "component") -> None:
        self.query = query
        self.max_window_edges = max_window_edges
        self._reported = reported_pairs(query, report)
        self.report = report
        self._q = _compile(query)
        self._cols: dict[str, np.ndarray] = _columns(empty_edges())
        self._last = (_INT_MIN, _INT_MIN)
        self._watermark = _INT_MIN
        self._next_seq = 0
        self.edges_seen = 0
        self.matches_found = 0

    # -- protocol -----------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Add edges in stream order; return the match components they complete.

        Returns one row per arriving edge that is in the maximal match graph of its
        window: that graph's component holding the edge.
        """
        new = batch_columns(batch, self._next_seq)
        if new is None:
            return _NO_MATCHES
        self._check_order(new["t"], new["seq"])
        base = len(self._cols["t"])
        self._cols = {k: np.concatenate([self._cols[k], new[k]]) for k in self._cols}
        reports = Reports(self._q, self.query.name, self._reported)
        for k in range(base, base + batch.num_rows):
            self._evaluate(k, reports)
        self._evict(int(new["t"][-1]))
        self.edges_seen += batch.num_rows
        self.matches_found += len(reports)
        return reports.table()

    def advance(self, watermark_us: int) -> pa.Table:
        """No edge before ``watermark_us`` will come: drop edges no later window holds.

        Matches are reported on arrival, so nothing becomes due here.
        """
        self._watermark = max(self._watermark, int(watermark_us))
        self._evict(self._watermark)
        return _NO_MATCHES

    def state_size(self) -> dict[str, int]:
        vertices = len(set(self._cols["src"].tolist()) | set(self._cols["dst"].tolist()))
        return {"edges": len(self._cols["t"]), "vertices": vertices, "partial_matches": 0}

    def snapshot(self) -> bytes:
        state = {
            "query": self.query,
            "options": {"max_window_edges": self.max_window_edges, "report": self.report},
            "cols": self._cols,
            "marks": (self._last, self._watermark, self._next_seq),
            "counters": (self.edges_seen, self.matches_found),
            "reported": self._reported,
        }
        return pickle.dumps(state, protocol=pickle.HIGHEST_PROTOCOL)

    @classmethod
    def restore(cls, blob: bytes) -> DDSTBaselineEngine:
        state = pickle.loads(blob)
        engine = cls(state["query"], **state["options"])
        engine._cols = state["cols"]
        engine._last, engine._watermark, engine._next_seq = state["marks"]
        engine.edges_seen, engine.matches_found = state["counters"]
        engine._reported = state["reported"]
        return engine

    def window_match_graph(self) -> MatchGraph:
        """The maximal match graph of the current window (the last edge's), all components."""
        n = len(self._cols["t"])
        if n == 0:
            return MatchGraph()
        lo = self._window_start(n - 1)
        g = _graph({k: v[lo:] for k, v in self._cols.items()})
        return _match_graph(self._q, g, *_ddst(self._q, g, *_compat(self._q, g)))

    # -- internals ----------------------------------------------------------------------

    def _check_order(self, t: np.ndarray, seq: np.ndarray) -> None:
        check_stream_order(t, seq, self._last, self._watermark)
        self._last = (int(t[-1]), int(seq[-1]))
        self._next_seq = int(seq[-1]) + 1

    def _window_start(self, k: int) -> int:
        """Index of the oldest edge in the window ending at edge ``k``."""
        w = self.query.window
        if w.kind == "count":
            return max(0, k - w.size + 1)
        t = self._cols["t"]
        return int(np.searchsorted(t[: k + 1], t[k] - w.size, side="left"))

    def _evict(self, now_us: int) -> None:
        """Keep only the edges a window ending at or after ``now_us`` (or the next edge) holds."""
        w = self.query.window
        n = len(self._cols["t"])
        if w.kind == "count":
            keep_from = max(0, n - (w.size - 1))
        else:
            keep_from = int(np.searchsorted(self._cols["t"], now_us - w.size, side="left"))
        if keep_from:
            self._cols = {k: v[keep_from:] for k, v in self._cols.items()}

    def _check_window_size(self, edges: int) -> None:
        """Raise :class:`StateBoundError` if a window of ``edges`` edges is over the bound."""
        if edges > self.max_window_edges:
            raise StateBoundError(
                f"query {self.query.name!r}: a window holds {edges:,} edges, above "
                f"max_window_edges={self.max_window_edges:,}; raise the bound or narrow the window"
            )

    def _evaluate(self, k: int, reports: Reports) -> None:
        """Algorithm DDST on the window ending at edge ``k``; its report, if any."""
        lo = self._window_start(k)
        self._check_window_size(k - lo + 1)
        label = self._cols["label"][k]
        if all(lab is not None and lab != label for lab in self._q.elabels):
            return  # e_k fits no query edge: it cannot be matched
        g = _graph({name: col[lo : k + 1] for name, col in self._cols.items()})
        new = k - lo
        vc, ec = _compat(self._q, g)
        cand = ec.any(axis=0)
        if not cand[new]:
            return
        comp = _components(g.n, g.src[cand], g.dst[cand])
        part = cand & (comp[g.src] == comp[g.src[new]])
        sub, at = g.select(part), int(part[:new].sum())
        sim, se = _ddst(self._q, sub, vc, ec[:, part])
        if not se[:, at].any():
            return
        w = self.query.window
        opened = int(g.t[new]) - w.size if w.kind == "time" else int(g.t[0])
        reports.add(sub, *_component_of(sub, sim, se, at), at, opened)
