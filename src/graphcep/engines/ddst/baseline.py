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

from collections.abc import Iterable, Iterator, Mapping

import numpy as np
import pyarrow as pa

from graphcep.engines.base import MATCH_CHUNK_ROWS, EngineBase, StateBoundError, joined_chunks
from graphcep.engines.ddst import kernel
from graphcep.engines.ddst.common import (
    INT_MIN,
    batch_columns,
    component_of,
    components,
    engine_columns,
    index_query,
    label_compat,
    run_ddst,
    window_graph,
)
from graphcep.engines.ddst.reports import (
    DDST_EDGE_TYPE,
    DDST_MATCH_SCHEMA,
    DDST_VERTEX_TYPE,
    NO_MATCHES,
    EdgeMatch,
    MatchGraph,
    Reports,
    match_graph,
    reported_pairs,
)
from graphcep.events import empty_edges, normalize_edges
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
    [('x', 1), ('y', 2)]
    """
    cols = engine_columns(normalize_edges(window))
    if len(cols["t"]) == 0:
        return MatchGraph()
    q = index_query(query)
    g = window_graph(cols)
    sim, se = run_ddst(q, g, *label_compat(q, g))
    return match_graph(q, g, sim, se)



# -- the engine --------------------------------------------------------------------------


class DDSTBaselineEngine(EngineBase):
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
        super().__init__()
        self.query = query
        self.max_window_edges = max_window_edges
        self._reported = reported_pairs(query, report)
        self.report = report
        self._q = index_query(query)
        self._cols: dict[str, np.ndarray] = engine_columns(empty_edges())
        self._watermark = INT_MIN

    # -- protocol -----------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Add edges in stream order; return the match components they complete.

        Returns one row per arriving edge that is in the maximal match graph of its
        window: that graph's component holding the edge.
        """
        return joined_chunks(self.push_chunks(batch, None), lambda: NO_MATCHES)

    def push_chunks(self, batch: pa.Table | pa.RecordBatch,
                    chunk_rows: int | None = MATCH_CHUNK_ROWS) -> Iterator[pa.Table]:
        """:meth:`push`'s rows, handed out as they are made once they hold about
        ``chunk_rows`` edges (None: all at the end). Take every chunk before the next
        push."""
        new = batch_columns(batch, self._next_seq)
        if new is None:
            return
        reports = Reports(self._q, self.query.name, self._reported)
        yield from self._report(new, reports, chunk_rows)
        self._evict(int(new["t"][-1]))
        self.edges_seen += batch.num_rows
        self.matches_found += reports.made
        if len(reports):
            yield reports.take()

    def advance(self, watermark_us: int) -> pa.Table:
        """No edge before ``watermark_us`` will come: drop edges no later window holds.

        Matches are reported on arrival, so nothing becomes due here.
        """
        self._watermark = max(self._watermark, int(watermark_us))
        self._evict(self._watermark)
        return NO_MATCHES

    def state_size(self) -> dict[str, int]:
        vertices = len(set(self._cols["src"].tolist()) | set(self._cols["dst"].tolist()))
        return {"edges": len(self._cols["t"]), "vertices": vertices, "partial_matches": 0}

    def describe(self) -> str:
        return ("at each arriving edge that fits a query edge, Algorithm DDST runs on the "
                "edge's candidate component in its window")

    def state(self) -> dict:
        return {
            "query": self.query,
            "options": {"max_window_edges": self.max_window_edges, "report": self.report},
            "cols": self._cols,
            "reported": self._reported,
        }

    @classmethod
    def from_state(cls, state: dict) -> DDSTBaselineEngine:
        engine = cls(state["query"], **state["options"])
        engine._cols = state["cols"]
        engine._reported = state["reported"]
        return engine

    def window_match_graph(self) -> MatchGraph:
        """The maximal match graph of the current window (the last edge's), all components."""
        n = len(self._cols["t"])
        if n == 0:
            return MatchGraph()
        lo = self._window_start(n - 1)
        g = window_graph({k: v[lo:] for k, v in self._cols.items()})
        return match_graph(self._q, g, *run_ddst(self._q, g, *label_compat(self._q, g)))

    # -- internals ----------------------------------------------------------------------

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

    def _report(self, new: dict[str, np.ndarray], reports: Reports,
                chunk_rows: int | None) -> Iterator[pa.Table]:
        """Take the new edges into the window and report each one's window, handing out
        the reports each time they fill a chunk."""
        self._check_order(new["t"], new["seq"])
        base = len(self._cols["t"])
        self._cols = {k: np.concatenate([self._cols[k], new[k]]) for k in self._cols}
        for k in range(base, len(self._cols["t"])):
            self._evaluate(k, reports)
            if reports.full(chunk_rows):
                yield reports.take()

    def _evaluate(self, k: int, reports: Reports) -> None:
        """Algorithm DDST on the window ending at edge ``k``; its report, if any."""
        lo = self._window_start(k)
        self._check_window_size(k - lo + 1)
        label = self._cols["label"][k]
        if all(lab is not None and lab != label for lab in self._q.elabels):
            return  # e_k fits no query edge: it cannot be matched
        g = window_graph({name: col[lo : k + 1] for name, col in self._cols.items()})
        new = k - lo
        vc, ec = label_compat(self._q, g)
        cand = ec.any(axis=0)
        if not cand[new]:
            return
        comp = components(g.n, g.src[cand], g.dst[cand])
        part = cand & (comp[g.src] == comp[g.src[new]])
        sub, at = g.select(part), int(part[:new].sum())
        sim, se = run_ddst(self._q, sub, vc, ec[:, part])
        if not se[:, at].any():
            return
        w = self.query.window
        opened = int(g.t[new]) - w.size if w.kind == "time" else int(g.t[0])
        reports.add(sub, *component_of(sub, sim, se, at), at, opened)

