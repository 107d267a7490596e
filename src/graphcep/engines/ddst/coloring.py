"""Coloring DDST engine: Algorithm COLOR-EDGE of "Event pattern matching over graph streams"
(Sec. 4), with VERIFY-MATCH ended by Algorithm DDST (Sec. 3.1) on part of one red component.

The output is exactly :class:`~graphcep.engines.ddst.baseline.DDSTBaselineEngine`'s -- the
same rows in the same order, with the same match ids -- for every input: the semantics
(labels, vertices as ``(id, label)`` pairs, time and count windows, equal timestamps, the
reporting rule "at each arriving edge, report the match component holding it") are fixed
in :mod:`graphcep.engines.ddst.baseline`. What changes is the work per edge: instead of
running Algorithm DDST on the window of every arriving edge, the engine keeps the paper's
coloring up to date incrementally, and runs DDST only where a chain of cheap tests, each
passed by every match component, lets it through.

Coloring (COLOR-EDGE)
---------------------
*Black.* An edge is black when it fits some query edge (its label and its endpoints'
labels, ``None`` in the query matching anything): its *fit set* ``M_e`` (line 2). Edges
fitting no query edge are not kept (only their times, for the window bounds).

*Red.* Edge ``e = (x, y)`` is red for query edge ``q = (s, t)`` in ``M_e`` when ``x`` can
host ``s`` and ``y`` can host ``t``, where "``x`` can host ``s``" means: the black out-edges
of ``x`` can be assigned to the out-edges of ``s`` *one each and pairwise distinct* (a
system of distinct representatives, each fitting its query edge), and likewise the black
in-edges of ``x`` to the in-edges of ``s``. This is line 6 ("all edges incident to s or t
in Q have a match in G") with degree preservation: the paper's Example 7 colors edge AD red
"because edge AD's neighboring edges in Q -- AE (outgoing) and AA (incoming) are both
matched". The *match set* of an edge (line 20) is the set of query edges it is red for.
Hosting depends only on a vertex's black edges, so the engine keeps per vertex its number
of black edges by fit set and the query vertices it can host; an arriving edge can only
turn hosting on at its own two endpoints, so only the edges there are recolored (lines
21-23), and only when a hosting bit actually flips.

*Red components* are the connected components of the red edges (sharing a stream vertex
``(id, label)``). Each has a *master edge* holding the ``countMap`` (per query edge, how
many red edges of the component are red for it) and the ``needMap`` (the query edges whose
count is 0); every other red edge reaches the master through a chain of parent pointers,
compressed on every lookup (union-find with path compression, lines 7-19). A new red edge
joins the component of the red edges at its endpoints, merges the two components there
(the larger one's master stays master; on a tie, the source side's), or starts its own.
Each vertex keeps one *anchor*, a node of one of its red edges: all red edges at a vertex
lie in one component, so finding it needs no scan of the vertex's edges.

*Departure.* Windows slide in arrival order, so the oldest edge leaves first. A departing
red edge is logically deleted: its node stays in the parent chains (it may carry the
forwarding address to the master, which may be itself) and its counts leave the
``countMap``. Its endpoints' black-edge counts drop, which may turn hosting off there and
recolor the edges there (red edges losing query edges, some turning black, deleted the
same way). A deletion may split a component, which union-find cannot do: the component is
marked *possibly split* and keeps counting all its remaining red edges -- a union of true
components, whose counts can only make the tests below pass more often, never fail
wrongly. Deleting a pendant edge (an end with no other red edge) or a self-loop cannot
split, and does not mark. A component is rebuilt -- its red edges regrouped into their
true components in one ``O(size)`` pass, deleted nodes dropped -- when its deleted nodes
outnumber its live ones (so garbage stays bounded and rebuilding costs amortized ``O(1)``
per deletion), or when it is inspected (:meth:`DDSTColoringEngine.red_components`).

When does DDST run?
-------------------
Only at an arriving edge ``e_k``, and only when every test below passes. Each is
*necessary* for ``e_k`` to be in the maximal match graph of its window, so a failing test
loses no report (the module docstring of the baseline explains why reporting only the
newest edge's component loses nothing):

1. ``e_k`` is red for a query edge ``q`` with no successor in the timing order. A pair
   ``(q, e) ∈ Se`` needs, for every ``q ≺ b``, a partner of ``b`` strictly later than
   ``e``; no edge of the window is later than the newest one.
2. The ``needMap`` of ``e_k``'s component is empty (all ``|Eq|`` counters positive). Every
   pair ``(q, e) ∈ Se`` is red: ``(src q, src e) ∈ S`` needs distinct ``Se``-partners out
   of ``src e`` for the out-edges of ``src q`` (Definition 1, 2b), all of them black, and
   in-edges alike (2c); so the match component ``C`` holding ``e_k`` is connected through
   red edges, lies inside one red component, and holds a pair for every query edge (the
   query graph is connected). This holds with wildcard labels (fit sets use them), with
   vertices as ``(id, label)`` pairs (so do hosting and components), with count windows
   (the coloring always describes exactly the current window, whatever made edges leave
   it) and with equal timestamps (they play no part).
3. A timing witness for ``e_k`` can exist: with ``e_k``'s time pinned to ``q``, earliest
   times pushed forward along ``≺`` from each query edge's earliest red time in the
   component, and latest times pushed back from the latest, every query edge keeps a
   non-empty range (times are integers and ``≺`` is strict). The earliest and latest times
   are not undone on deletion: stale values only widen the ranges.
4. *Local rounds.* Round 0 is the red pairs; in round ``r`` a vertex hosts ``s`` when the
   pairs of round ``r-1`` at it give ``s`` distinct partners, and a red pair stays when
   both its ends host in round ``r``. Every pair of ``C`` stays in every round (its
   distinct partners do, by induction). ``e_k`` must keep a pair of test 1 in round 2 --
   the trigger's neighbourhood within two hops -- and the *part* grown from ``e_k``
   through edges keeping round-2 pairs (which holds ``C``) must pass tests 2-3 exactly.
   At vertices with more than 16 edges round 1, read from the match sets of their red
   edges (one compiled pass), stands in for round 2 (rounds only shrink: still a superset),
   so this costs the size of the part and of the vertices around it, not of the red
   component. A part
   that grows past 64 edges ends tests 4-5: on dense windows such parts are nearly always
   match components about to be reported, and interpreted rounds over them cost several
   times compiled Algorithm DDST, which then runs on the whole red component (it holds
   ``C`` by test 2). For the same reason a red component of at most 4,096 live edges
   skips tests 4-5 and is verified whole: the rounds pay off only where the red component
   is much larger than the part around ``e_k``.
5. VERIFY-MATCH's refinement (its lines 3-7: drop a query edge from a match set unless
   its adjacent query edges "all match to distinct red edges") run to a fixpoint on the
   part, which shrinks it further; ``e_k`` must keep a pair of test 1, and what stays
   connected to it must pass tests 2-3. ``C`` is valid within the part and survives.

Algorithm DDST (the baseline's functions), its candidate vertex and edge pairs limited to
the hosting and the pairs left (supersets of ``C``'s), then runs on what is left and gives
``C``: validity of a match graph is monotone in the graph and in the candidates, so the
maximal match graph of a subgraph ``H`` of the window lies inside the window's, and ``C``
is valid in any ``H ⊇ C``; so ``e_k``'s match component is ``C`` in both.

The paper's ``needMap`` also serves to skip re-verifying a component after a failed
verification until "a new match for an edge in needMap" arrives. That rule is not sound
under per-arrival reporting: a verification that fails for timing alone sets no bit, yet
the next arrival can complete a witness (``x ≺ y`` with edges ``y@1, x@2``: no match; then
``y@3`` matches). Here ``needMap`` is what test 2 reads; repeated verification of a
component whose ``countMap`` is full is avoided by tests 1, 3, 4 and 5 instead, which look
at the arriving edge and its surroundings rather than the component as a whole.

Cost per edge
-------------
An edge fitting no query edge costs a few vectorized array operations per batch. A black
edge costs ``O(|M_e|·|Vq|)`` hosting tests at its ends (each ``O(distinct fit sets there)``),
the recoloring of the edges at an end whose hosting flips (``O(degree)``, once per flip),
and amortized near-constant union-find work per color change (Theorem 6). A departure
costs the same as an arrival, plus rebuilds amortized ``O(1)`` per deletion. Tests 1-3
cost ``O(|Eq| + |≺|)``, at arrivals red for a last query edge; test 4 costs the size of the
part around ``e_k``; test 5 and DDST run on the part only when tests 1-4 pass, and DDST runs
on the whole red component when that is small (at most 4,096 live edges) or the part
outgrew test 4's budget. The upkeep does not grow with the number of edges in the window,
only with vertex degrees; a verification costs the size of the part or red component
around a matching edge, gathered from array rows (no Python per edge). So throughput holds
across window sizes where matches are rare, and falls with the match rate where they are
dense (``bench/ddst.py``; figures in ``bench/RESULTS.md``).

The upkeep -- arrivals, departures, hosting, recoloring, union-find and tests 1-3 -- is
compiled (:mod:`graphcep.engines.ddst.coloring_kernel`, over integer arrays): it stops at
an edge that passes tests 1-3, and the rest of the verification runs here. Masks are
int64: queries of at most 62 edges and 62 vertices (the signature engine takes wider ones).

Example (the paper's Example 5 stream; see :mod:`graphcep.engines.ddst.baseline`)
---------------------------------------------------------------------------------
>>> import pyarrow as pa
>>> from graphcep.engines.ddst.baseline import DDSTBaselineEngine
>>> from graphcep.patterns.ddst import DDSTBuilder
>>> q = (DDSTBuilder("spread").vertex("A", "M").vertex("B", "M").vertex("C", "M")
...      .vertex("D", "M").edge("AB", "A", "B", "congested").edge("CA", "C", "A", "congested")
...      .edge("DC", "D", "C", "congested").order("AB", "CA", "DC").within(200, "s").build())
>>> rows = sorted([(2, "c", "a"), (30, "a", "b"), (40, "a", "b"), (45, "c", "a"), (50, "d", "c"),
...                (90, "a", "b"), (95, "d", "c"), (100, "c", "a")])
>>> stream = pa.table({"t": [r[0] * 1_000_000 for r in rows], "src": [r[1] for r in rows],
...     "dst": [r[2] for r in rows], "label": ["congested"] * 8,
...     "src_label": ["M"] * 8, "dst_label": ["M"] * 8})
>>> engine = DDSTColoringEngine(q)
>>> out = engine.push(stream)
>>> out.equals(DDSTBaselineEngine(q).push(stream))
True
>>> out.column("window_end").to_pylist()       # reported by the edges at 50 s and 95 s
[50000000, 95000000]
>>> engine.verifications                       # DDST ran 3 times, not once per edge
3
>>> sorted(engine.match_set(0))                # every edge here fits all three query edges
['AB', 'CA', 'DC']
>>> c = engine.red_component(7)                # one red component, master: the edge at 30 s
>>> c.master, sorted(c.edges), c.count_map, c.need_map
(1, [0, 1, 2, 3, 4, 5, 6, 7], {'AB': 6, 'CA': 3, 'DC': 5}, frozenset())
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.engines.base import (
    MATCH_CHUNK_ROWS,
    EngineBase,
    StateBoundError,
    joined_chunks,
    numbered_batch,
)
from graphcep.engines.ddst import coloring_kernel as K
from graphcep.engines.ddst.common import (
    INT_MAX,
    INT_MIN,
    PartGraphs,
    WindowGraph,
    component_of,
    edge_fit,
    engine_columns,
    index_query,
    number_vertices,
    run_ddst,
    strings,
)
from graphcep.engines.ddst.reports import (
    NO_MATCHES,
    Reports,
    reported_pairs,
)
from graphcep.engines.ddst.schema import COLORING_MAX_BITS
from graphcep.engines.vertex_ids import distinct_codes
from graphcep.patterns.ddst import DDSTQuery

__all__ = ["DDSTColoringEngine", "RedComponent"]
#: A possibly-split component is rebuilt once its deleted nodes exceed its live ones by this.
_GARBAGE_SLACK = 8
#: Rounds of local refinement around a trigger before the part to verify is grown.
_LOCAL_ROUNDS = 2
#: Vertices with more edges than this use round 1 (their counts) in later rounds.
_LOCAL_DEGREE = 16
#: A part grown past this many edges stops tests 4-5: DDST runs on the red component.
_LOCAL_BUDGET = 64
#: A red component of at most this many live edges is verified whole, without tests 4-5:
#: compiled DDST on it costs less than the interpreted rounds (measured: 3x faster on the
#: CTU-13 sample at 20 min, no slower on any stream of bench/ddst.py).
_DIRECT_COMPONENT = 4096
#: Vertex rows whose edges all left stay numbered (they equal absent vertices) until the
#: rows in use exceed twice the vertices with edges plus this many; then they are freed
#: at once (on sparse windows over many hosts most arrivals bring a new vertex).
_IDLE_VERTICES = 16384
#: Edge rows taken at once: a batch's black edges are colored this many at a time, so the
#: rows (and snapshots) stay near the window's size, not the batch's (the departures of one
#: slice free rows for the next).
_ROWS_AT_ONCE = 4096
#: :meth:`DDSTColoringEngine._local_part`'s answer for a part over the budget.
_TOO_BIG: dict = {}


@dataclass(frozen=True)
class RedComponent:
    """A red component as the engine holds it (for inspection).

    ``master`` is the ``seq`` of the master edge, which may have left the window (logically
    deleted, still the root of the parent chains); ``edges`` the ``seq`` of its red edges in
    the window; ``count_map`` / ``need_map`` as in the paper. ``exact`` is ``False`` while
    departures may have split it: it is then a union of red components.
    """

    master: int
    edges: frozenset[int]
    count_map: dict[str, int]
    need_map: frozenset[str]
    exact: bool


def _distinct_representatives(fits: dict[int, int], want: int) -> bool:
    """Whether the query edges ``want`` (a bit mask) can take pairwise distinct edges, given
    edge counts by fit (or match) set (:func:`coloring_kernel.representatives`)."""
    masks = np.fromiter(fits.keys(), dtype=np.int64, count=len(fits))
    counts = np.fromiter(fits.values(), dtype=np.int64, count=len(fits))
    return bool(K.representatives(masks, counts, want))


def _grown(array: np.ndarray, size: int, fill: int, axis: int = -1) -> np.ndarray:
    """``array`` with its last (or ``axis``) dimension grown to ``size``, new cells ``fill``."""
    shape = list(array.shape)
    more = size - shape[axis]
    shape[axis] = more
    return np.concatenate([array, np.full(shape, fill, dtype=array.dtype)], axis=axis)


# -- the engine ------------------------------------------------------------------------------


class DDSTColoringEngine(EngineBase):
    """Online DDST matching by edge coloring (COLOR-EDGE) with verification on red components.

    Parameters
    ----------
    query : DDSTQuery
        The event pattern (query graph, timing order, window): at most 62 query edges and
        62 query vertices.
    max_window_edges : int
        State bound: a window holding more edges raises :class:`StateBoundError` (the
        baseline's bound, so both engines accept the same streams).
    report : str
        ``"component"`` or ``"new"``, as :class:`~graphcep.engines.ddst.baseline.DDSTBaselineEngine`.

    Notes
    -----
    Follows the engine protocol of :mod:`graphcep.engines.base`; matches come back in
    :data:`~graphcep.engines.ddst.baseline.DDST_MATCH_SCHEMA`, identical to the baseline's.
    See the module docstring for the coloring, the verification tests and the costs.
    ``verifications`` counts the runs of Algorithm DDST.
    """

    #: 2: the state as arrays (the compiled upkeep); 1 held Python objects
    state_version = 2

    def __init__(self, query: DDSTQuery, *, max_window_edges: int = 1_000_000,
                 report: str = "component") -> None:
        super().__init__()
        nv, ne = len(query.vertices), len(query.edges)
        if max(nv, ne) > COLORING_MAX_BITS:
            raise ValueError(
                f"the coloring engine takes at most {COLORING_MAX_BITS} query edges and vertices; "
                f"{query.name!r} has {ne} edges and {nv} vertices (the signature engine "
                "takes it)")
        self.query = query
        self.max_window_edges = max_window_edges
        self._reported = reported_pairs(query, report)
        self.report = report
        self._setup()
        self._E = np.full((K.EDGE_FIELDS, 0), -1, dtype=np.int64)  # edge rows
        self._labels = np.empty(0, dtype=object)  # per edge row: its label
        self._efree = np.empty(0, dtype=np.int64)
        self._V = np.full((K.VERTEX_FIELDS, 0), -1, dtype=np.int64)  # vertex rows
        self._CNT = np.zeros((2, 0, 0), dtype=np.int64)
        self._vname = np.empty(0, dtype=object)
        self._vlabel = np.empty(0, dtype=object)
        self._vfree: list[int] = []
        self._vertices: dict[tuple[Any, Any], int] = {}  # (id, label) -> vertex row
        self._N = np.full((K.NODE_FIELDS, 0), -1, dtype=np.int64)  # union-find nodes
        self._CT = np.zeros((3, 0, ne), dtype=np.int64)
        self._nfree = np.empty(0, dtype=np.int64)
        self._S = np.array([-1, -1, 0, 0, 0, 0], dtype=np.int64)
        self._fit_ids: dict[int, int] = {}  # fit set -> its number
        self._fitmask = np.empty(0, dtype=np.int64)
        self._src_roles = np.empty(0, dtype=np.int64)
        self._dst_roles = np.empty(0, dtype=np.int64)
        self._scratch = np.empty(0, dtype=np.int64)  # -1 per vertex row (rebuilds)
        self._part_graphs = PartGraphs()
        self._times = np.empty(0, dtype=np.int64)  # times of the window's edges, all of them
        self._count = 0  # edges seen, black or not: the next arrival number
        self._watermark = INT_MIN
        self.verifications = 0
        self._tables()

    def _setup(self) -> None:
        """Query tables (rebuilt on restore, never pickled)."""
        q = self._q = index_query(self.query)
        nv, ne = len(q.vnames), len(q.enames)
        self._ne, self._nv = ne, nv
        self._esrc = q.qsrc.tolist()
        self._edst = q.qdst.tolist()
        self._out_want = [sum(1 << j for j in q.out_q[s]) for s in range(nv)]
        self._in_want = [sum(1 << j for j in q.in_q[s]) for s in range(nv)]
        self._last_edges = sum(1 << j for j in range(ne) if not q.post[j])
        self._ordered = any(q.pre)
        self._kind = self.query.window.kind
        self._size = self.query.window.size
        (_, _, topo, pre_ptr, pre_idx, post_ptr, post_idx, *_rest) = q.arrays
        self._order_arrays = (topo, pre_ptr, pre_idx, post_ptr, post_idx)
        no_in = sum(1 << s for s in range(nv) if not self._in_want[s])
        no_out = sum(1 << s for s in range(nv) if not self._out_want[s])
        self._P = np.array([ne, nv, no_in, no_out, self._last_edges,
                            int(self._kind == "count"), self._size, _GARBAGE_SLACK,
                            int(self._ordered)], dtype=np.int64)  # fmt: skip

    def _tables(self) -> None:
        """The query tables the kernel reads, fit sets included (they grow with the stream)."""
        i64 = np.int64
        self._Q = (np.asarray(self._esrc, i64), np.asarray(self._edst, i64),
                   np.asarray(self._out_want, i64), np.asarray(self._in_want, i64),
                   self._fitmask, self._src_roles, self._dst_roles, *self._order_arrays)  # fmt: skip

    # -- protocol -----------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Add edges in stream order; return the match components they complete.

        Returns one row per arriving edge that is in the maximal match graph of its
        window: that graph's component holding the edge (as the baseline does).
        """
        return joined_chunks(self.push_chunks(batch, None), lambda: NO_MATCHES)

    def push_chunks(self, batch: pa.Table | pa.RecordBatch,
                    chunk_rows: int | None = MATCH_CHUNK_ROWS) -> Iterator[pa.Table]:
        """:meth:`push`'s rows, handed out as they are made once they hold about
        ``chunk_rows`` edges (None: all at the end). Take every chunk before the next
        push."""
        table = numbered_batch(batch, self._next_seq)
        if table is None:
            return
        cols = engine_columns(table, ends=False)
        self._check_order(cols["t"], cols["seq"], record=False)
        opened, kept = self._window_marks(cols["t"])  # raises before anything changes
        self._record_last(cols["t"], cols["seq"])
        self._times = kept
        reports = Reports(self._q, self.query.name, self._reported)
        yield from self._run(cols, table, opened, reports, chunk_rows)
        self._count += batch.num_rows
        self._expire(self._count, int(cols["t"][-1]))  # what the next window cannot hold
        self.edges_seen += batch.num_rows
        self.matches_found += reports.made
        if len(reports):
            yield reports.take()

    def advance(self, watermark_us: int) -> pa.Table:
        """No edge before ``watermark_us`` will come: drop edges no later window holds.

        Matches are reported on arrival, so nothing becomes due here.
        """
        self._watermark = max(self._watermark, int(watermark_us))
        if self._kind == "time":
            self._expire(self._count, self._watermark)
            cut = np.searchsorted(self._times, self._watermark - self._size, side="left")
            self._times = self._times[cut:]
        return NO_MATCHES

    def state_size(self) -> dict[str, int]:
        roots = self._roots()
        V = self._V
        held = int(np.count_nonzero(V[K.DEG_OUT] + V[K.DEG_IN] > 0))
        return {"edges": int(self._S[K.FIFO_LEN]), "vertices": held,
                "partial_matches": len(roots),
                "red_edges": int(self._N[K.C_LIVE, roots].sum()),
                "union_find_nodes": int(self._S[K.NODES_USED])}  # fmt: skip

    def describe(self) -> str:
        return ("each edge that fits a query edge is colored black, or red where both its "
                "ends can host its query edges, and red edges form red components "
                "(union-find); Algorithm DDST runs only when the edge can close a match (its "
                "component's counts full, a timing witness possible, local rounds passed)")

    _STATE = ("_E", "_labels", "_efree", "_V", "_CNT", "_vname", "_vlabel", "_vfree",
              "_vertices", "_N", "_CT", "_nfree", "_S", "_fit_ids", "_fitmask", "_src_roles",
              "_dst_roles", "_times", "_count", "_watermark", "verifications")

    def state(self) -> dict:
        return {"query": self.query,
                "options": {"max_window_edges": self.max_window_edges, "report": self.report},
                "reported": self._reported,
                "arrays": {name: getattr(self, name) for name in self._STATE}}  # fmt: skip

    @classmethod
    def from_state(cls, state: dict) -> DDSTColoringEngine:
        engine = cls(state["query"], **state["options"])
        for name, value in state["arrays"].items():
            setattr(engine, name, value)
        engine._reported = state["reported"]
        engine._scratch = np.full(engine._V.shape[1], -1, dtype=np.int64)
        engine._tables()
        return engine

    # -- inspection -----------------------------------------------------------------------

    def color(self, seq: int) -> str | None:
        """``"red"`` or ``"black"`` for an edge of the window; ``None`` if it fits no query
        edge or has left the window."""
        e = self._edge_by_seq(seq)
        if e is None:
            return None
        return "red" if self._E[K.RED, e] else "black"

    def match_set(self, seq: int) -> frozenset[str]:
        """The query edges an edge of the window is red for (line 20's match set)."""
        e = self._edge_by_seq(seq)
        if e is None:
            return frozenset()
        return frozenset(self._q.enames[j] for j in _bits(int(self._E[K.RED, e])))

    def red_component(self, seq: int) -> RedComponent | None:
        """The red component (as held) of a red edge of the window; ``None`` if not red."""
        e = self._edge_by_seq(seq)
        if e is None or not self._E[K.RED, e]:
            return None
        return self._view(K.find(self._N, self._E[K.NODE, e]))

    def red_components(self) -> list[RedComponent]:
        """All red components, exact (possibly split ones are rebuilt first), by master."""
        for root in self._roots():
            if self._N[K.C_SPLIT, root]:
                K.rebuild(self._E, self._V, self._N, self._CT, self._S, self._nfree, root,
                          self._ne, self._scratch)  # fmt: skip
        views = [self._view(r) for r in self._roots()]
        return sorted(views, key=attrgetter("master"))

    def _roots(self) -> np.ndarray:
        N = self._N
        return np.flatnonzero((N[K.ALLOC] == 1) & (N[K.PARENT] == np.arange(N.shape[1])))

    def _view(self, root: int) -> RedComponent:
        names, N, CT = self._q.enames, self._N, self._CT
        alive = K.alive_rows(self._E, N, root)
        return RedComponent(
            master=int(N[K.NSEQ, root]),
            edges=frozenset(self._E[K.SEQ, alive].tolist()),
            count_map={names[j]: int(c) for j, c in enumerate(CT[K.COUNT, root])},
            need_map=frozenset(names[j] for j in _bits(int(N[K.C_NEED, root]))),
            exact=not N[K.C_SPLIT, root],
        )

    def _edge_by_seq(self, seq: int) -> int | None:
        E = self._E
        at = np.flatnonzero((E[K.NUM] >= 0) & (E[K.SEQ] == seq))
        return int(at[0]) if len(at) else None

    # -- batches ---------------------------------------------------------------------------

    def _window_marks(self, t: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Each new edge's ``window_start`` and the times to keep; checks the state bound.

        Only times are kept for edges fitting no query edge: the bound counts every edge
        of a window, and a count window starts at its oldest edge, fitting or not.
        """
        times = np.concatenate([self._times, t])
        pos = np.arange(len(self._times), len(times))
        if self._kind == "count":
            lo = np.maximum(pos - self._size + 1, 0)
            opened = times[lo]
            kept = times[max(0, len(times) - (self._size - 1)) :] if self._size > 1 else times[:0]
        else:
            lo = np.searchsorted(times, t - self._size, side="left")
            opened = t - self._size
            kept = times[np.searchsorted(times, t[-1] - self._size, side="left") :]
        widest = int((pos - lo).max()) + 1
        if widest > self.max_window_edges:
            raise StateBoundError(
                f"query {self.query.name!r}: a window holds {widest:,} edges, above "
                f"max_window_edges={self.max_window_edges:,}; raise the bound or narrow the window"
            )
        return opened, kept.copy()

    def _fit_sets(self, cols: dict[str, np.ndarray]) -> np.ndarray:
        """Per edge, the bit mask of the query edges it fits (labels; ``None`` is any)."""
        q = self._q
        fits = np.zeros(len(cols["t"]), dtype=np.int64)
        for j, want in enumerate(q.elabels):
            ok = edge_fit(cols, q.vlabels[self._esrc[j]], want, q.vlabels[self._edst[j]])
            fits |= ok.astype(np.int64) << j
        return fits

    def _run(self, cols: dict[str, np.ndarray], table: pa.Table, opened: np.ndarray,
             reports: Reports, chunk_rows: int | None) -> Iterator[pa.Table]:
        """Color the black edges of a batch (compiled); verify the triggers it stops at,
        handing out the reports each time they fill a chunk."""
        fits = self._fit_sets(cols)
        black = np.flatnonzero(fits)
        if not len(black):
            return
        fids = self._number_fits(fits[black])
        taken = None if len(black) == table.num_rows else pa.array(black)  # None: all
        labelled = any(name in table.column_names and
                       table.column(name).null_count < table.num_rows
                       for name in ("src_label", "dst_label"))
        ends = self._vertex_rows(
            pa.concat_arrays([(column if taken is None else column.take(taken))
                              .combine_chunks() for column in (table.column("src"),
                                                               table.column("dst"))]),
            np.concatenate([cols["src_label"][black], cols["dst_label"][black]])
            if labelled else None)
        src, dst = ends[: len(black)], ends[len(black) :]
        for lo in range(0, len(black), _ROWS_AT_ONCE):
            part = slice(lo, lo + _ROWS_AT_ONCE)
            values = ((K.T, cols["t"][black[part]]), (K.SEQ, cols["seq"][black[part]]),
                      (K.SRC, src[part]), (K.DST, dst[part]), (K.FID, fids[part]),
                      (K.FITS, fits[black[part]]))  # fmt: skip
            yield from self._color(values, cols["label"][black[part]], black[part],
                                   opened, reports, chunk_rows)

    def _color(self, values: tuple[tuple[int, np.ndarray], ...], labels: np.ndarray,
               black: np.ndarray, opened: np.ndarray, reports: Reports,
               chunk_rows: int | None) -> Iterator[pa.Table]:
        """Arrivals of black edges (batch positions ``black``, their edge fields
        ``values``), in rows taken for them."""
        rows = self._take_edges(len(black))
        for field, column in values:
            self._E[field, rows] = column
        self._labels[rows] = labels
        nums = black + self._count
        at = 0
        while True:
            what, at = K.run(self._E, self._V, self._N, self._CT, self._CNT, self._S,
                             self._nfree, self._efree, self._Q, self._P, self._scratch, rows,
                             nums, at)  # fmt: skip
            if what == K.DONE:
                return
            if what == K.NEED_NODES:
                self._grow_nodes(int(2 * self._E.shape[1]) + 64)
                continue
            self._trigger(int(rows[at]), int(opened[black[at]]), reports)
            if reports.full(chunk_rows):
                yield reports.take()
            at += 1

    def _expire(self, num: int, now: int) -> None:
        """Departures before arrival ``num`` at time ``now``; then idle vertex rows go."""
        K.expire(self._E, self._V, self._N, self._CT, self._CNT, self._S, self._nfree,
                 self._efree, self._Q, self._P, self._scratch, num, now)  # fmt: skip
        if len(self._vertices) > 2 * self._S[K.FIFO_LEN] + _IDLE_VERTICES:
            self._free_idle_vertices()

    # -- rows ------------------------------------------------------------------------------

    def _number_fits(self, fits: np.ndarray) -> np.ndarray:
        """Each fit set's number; a new one gets the next, with its roles and counts."""
        distinct, back = np.unique(fits, return_inverse=True)
        ids = np.empty(len(distinct), dtype=np.int64)
        new = False
        for i, mask in enumerate(distinct.tolist()):
            f = self._fit_ids.get(mask)
            if f is None:
                f = self._fit_ids[mask] = len(self._fit_ids)
                new = True
            ids[i] = f
        if new:
            masks = list(self._fit_ids)  # insertion order: by number
            self._fitmask = np.asarray(masks, dtype=np.int64)
            self._src_roles = np.asarray([self._roles(m, self._esrc) for m in masks], np.int64)
            self._dst_roles = np.asarray([self._roles(m, self._edst) for m in masks], np.int64)
            self._CNT = _grown(self._CNT, len(masks), 0)
            self._tables()
        return ids[back]

    @staticmethod
    def _roles(fits: int, end: list[int]) -> int:
        """Query vertices whose hosting an edge with this fit set can change at one end."""
        roles = 0
        for j in _bits(fits):
            roles |= 1 << end[j]
        return roles

    def _vertex_rows(self, ids: pa.Array, labels: np.ndarray | None) -> np.ndarray:
        """The vertex row of each ``(id, label)`` (``labels`` None: none has a label);
        vertices new to the window get free rows.

        A vertex is keyed by its id alone when it has no label (most streams), else by
        ``(id, label)``: the two kinds of key never collide (a string or int against a
        tuple), and no tuple is built and hashed per vertex of an unlabelled stream --
        whose ids Arrow numbers (no Python string per edge)."""
        if labels is None:
            number, distinct = distinct_codes(ids)
            name_list = distinct.to_pylist()
            names = np.array(name_list, dtype=object)
            vlabels = np.full(len(names), None, dtype=object)
            keys = name_list
        else:
            number, names, vlabels = number_vertices(strings(ids), labels)
            name_list, label_list = names.tolist(), vlabels.tolist()
            keys = [n if lab is None else (n, lab) for n, lab in zip(name_list, label_list,
                                                                      strict=True)]
        rows = np.fromiter(map(self._vertices.get, keys, repeat(-1)), np.int64, len(keys))
        new = np.flatnonzero(rows < 0)
        if len(new):
            if len(self._vfree) < len(new):
                self._grow_vertices(len(new) - len(self._vfree))
            taken = self._vfree[-len(new):][::-1]  # as pop() would take them
            del self._vfree[-len(new):]
            rows[new] = taken
            self._vertices.update(zip([keys[i] for i in new.tolist()], taken, strict=True))
            self._vname[taken] = names[new]
            self._vlabel[taken] = vlabels[new]
        return rows[number]

    def _free_idle_vertices(self) -> None:
        """Free the rows of vertices whose edges all left (they hold nothing)."""
        V = self._V
        idle = V[K.DEG_OUT] + V[K.DEG_IN] == 0
        kept = {key: row for key, row in self._vertices.items() if not idle[row]}
        freed = sorted(set(self._vertices.values()) - set(kept.values()), reverse=True)
        self._vname[freed] = None
        self._vlabel[freed] = None
        self._vfree.extend(freed)
        self._vertices = kept

    def _grow_vertices(self, more: int) -> None:
        size = self._V.shape[1]
        grown = max(64, 2 * size, size + more)
        V = _grown(self._V, grown, -1)
        V[[K.HOSTS, K.RED_DEG, K.DEG_OUT, K.DEG_IN], size:] = 0
        self._V = V
        self._CNT = _grown(self._CNT, grown, 0, axis=1)
        self._vname = _grown(self._vname, grown, None)
        self._vlabel = _grown(self._vlabel, grown, None)
        self._scratch = _grown(self._scratch, grown, -1)
        self._vfree.extend(range(grown - 1, size - 1, -1))  # lowest taken first

    def _take_edges(self, n: int) -> np.ndarray:
        """``n`` free edge rows (the kernel gives rows back on departure)."""
        free = int(self._S[K.EFREE_N])
        if free < n:
            size = self._E.shape[1]
            grown = max(64, 2 * size, size + n - free)
            self._E = _grown(self._E, grown, -1)
            self._labels = _grown(self._labels, grown, None)
            efree = np.empty(grown, dtype=np.int64)
            efree[:free] = self._efree[:free]
            efree[free : free + grown - size] = np.arange(grown - 1, size - 1, -1)
            self._efree = efree
            free = self._S[K.EFREE_N] = free + grown - size
        rows = self._efree[free - n : free][::-1].copy()
        self._S[K.EFREE_N] = free - n
        return rows

    def _grow_nodes(self, more: int) -> None:
        size = self._N.shape[1]
        grown = max(64, 2 * size, size + more)
        N = _grown(self._N, grown, -1)
        N[K.ALLOC, size:] = 0
        self._N = N
        self._CT = _grown(self._CT, grown, 0, axis=1)
        free = int(self._S[K.NFREE_N])
        nfree = np.empty(grown, dtype=np.int64)
        nfree[:free] = self._nfree[:free]
        nfree[free : free + grown - size] = np.arange(grown - 1, size - 1, -1)
        self._nfree = nfree
        self._S[K.NFREE_N] = free + grown - size

    # -- verification ------------------------------------------------------------------------

    def _trigger(self, e: int, opened: int, reports: Reports) -> None:
        """An edge that passed tests 1-3 (in the kernel): tests 4-5, then VERIFY-MATCH."""
        root = K.find(self._N, self._E[K.NODE, e])
        live = int(self._N[K.C_LIVE, root])
        part = _TOO_BIG if live <= _DIRECT_COMPONENT else self._local_part(e)
        if part is _TOO_BIG:  # tests 4-5 cost more than DDST here, and seldom fail
            self._verify(K.alive_rows(self._E, self._N, root), None, None, opened, reports)
            return
        refined = None if part is None else self._refine(part, e)
        if refined is not None:
            kept, hosts = refined
            rows = np.fromiter(kept, dtype=np.int64, count=len(kept))
            self._verify(rows, list(kept.values()), hosts, opened, reports)

    def _timing_possible(self, first: list[int], last: list[int], t: int, pins: int) -> bool:
        """Whether some query edge in ``pins``, at time ``t``, can have a timing witness."""
        return bool(K.timing_possible(np.asarray(first, dtype=np.int64),
                                      np.asarray(last, dtype=np.int64), t, pins,
                                      self._ordered, *self._order_arrays))  # fmt: skip

    def _part_possible(self, part: dict[int, int], trigger: int) -> bool:
        """Tests 1-3 on a part of a component, pairs as given: exact counts and times."""
        pins = part.get(trigger, 0) & self._last_edges
        if not pins:
            return False
        first, last = [INT_MAX] * self._ne, [INT_MIN] * self._ne
        covered = 0
        times = self._E[K.T]
        for e, m in part.items():
            covered |= m
            t = int(times[e])
            for j in _bits(m):
                first[j], last[j] = min(first[j], t), max(last[j], t)
        full = covered == (1 << self._ne) - 1
        return full and self._timing_possible(first, last, int(times[trigger]), pins)

    # Local rounds: pairs_0 = the red pairs; a vertex hosts s in round r when the pairs of
    # round r-1 at it give s distinct partners; pairs_r = red pairs with both ends hosted
    # in round r. Every pair of the maximal match graph is in every round (its partners
    # are, by induction), and round r at an edge reads only the edges within r hops. At a
    # vertex with many edges, round 1 (read from its counts) stands in for later rounds:
    # rounds only shrink, so that is a superset again, and the cost stays bounded.
    # Edges and vertices are rows here.

    def _local_part(self, trigger: int) -> dict[int, int] | None:
        """The edges reachable from ``trigger`` through pairs of the last local round, with
        those pairs; ``None`` if the trigger's own pairs or tests 1-3 fail on them;
        ``_TOO_BIG`` once the part grows past ``_LOCAL_BUDGET`` edges.

        The match component holding the trigger lies inside, whatever the size of the red
        component: the cost follows this part, not the window. A part that large is nearly
        always a match component being reported (dense windows): the interpreted rounds
        would cost several times compiled Algorithm DDST on the red component, which holds
        the match component too (test 2), so the caller runs DDST there instead.
        """
        memo: dict[tuple[int, int, int], bool] = {}
        if not self._round_pairs(trigger, self._last_edges, _LOCAL_ROUNDS, memo):
            return None
        E = self._E
        part: dict[int, int] = {}
        todo, seen = [int(E[K.SRC, trigger]), int(E[K.DST, trigger])], set()
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            for e in K.edges_at(E, self._V, v).tolist():
                if E[K.RED, e] and e not in part:
                    m = part[e] = self._round_pairs(e, int(E[K.RED, e]), _LOCAL_ROUNDS, memo)
                    if m:
                        todo.extend((int(E[K.SRC, e]), int(E[K.DST, e])))
                        if len(part) > _LOCAL_BUDGET:
                            return _TOO_BIG
        part = {e: m for e, m in part.items() if m}
        return part if self._part_possible(part, trigger) else None

    def _round_pairs(self, e: int, which: int, r: int, memo: dict[tuple[int, int, int], bool]
                     ) -> int:
        """The query edges among ``which`` for which ``e``'s pair is in round ``r``."""
        keep = 0
        E = self._E
        for j in _bits(which & int(E[K.RED, e])):
            if r == 0 or (
                self._held(int(E[K.SRC, e]), self._esrc[j], r, memo)
                and self._held(int(E[K.DST, e]), self._edst[j], r, memo)
            ):
                keep |= 1 << j
        return keep

    def _held(self, v: int, s: int, r: int, memo: dict[tuple[int, int, int], bool]) -> bool:
        """Whether ``v`` hosts query vertex ``s`` in round ``r`` (a superset at hubs)."""
        V = self._V
        if not V[K.HOSTS, v] >> s & 1:
            return False
        if V[K.DEG_OUT, v] + V[K.DEG_IN, v] > _LOCAL_DEGREE:
            r = 1
        key = (v, s, r)
        held = memo.get(key)
        if held is None:
            if r == 1:
                held = bool(K.hosts_by_red(self._E, V, self._Q[2], self._Q[3], v, s))
            else:
                held = self._held_by_round(v, s, r, memo)
            memo[key] = held
        return held

    def _held_by_round(self, v: int, s: int, r: int,
                       memo: dict[tuple[int, int, int], bool]) -> bool:
        """Round ``r`` hosting from the round ``r - 1`` pairs of the edges at ``v``."""
        E = self._E
        at = K.edges_at(E, self._V, v).tolist()
        outs = int(self._V[K.DEG_OUT, v])
        for side, want in ((at[:outs], self._out_want[s]), (at[outs:], self._in_want[s])):
            if not want:
                continue
            fits: dict[int, int] = {}
            for e in side:
                if E[K.RED, e] & want:
                    m = self._round_pairs(e, want, r - 1, memo)
                    if m:
                        fits[m] = fits.get(m, 0) + 1
            if not _distinct_representatives(fits, want):
                return False
        return True

    def _refine(self, part: dict[int, int], trigger: int
                ) -> tuple[dict[int, int], dict[int, int]] | None:
        """VERIFY-MATCH lines 3-7 on ``part`` taken as the whole graph: shrink match sets
        until every pair's ends can host with distinct pairs; the part still connected to
        ``trigger`` and the hosting left; ``None`` if tests 1-3 now fail.

        ``part`` holds the trigger's match component ``C``, which is valid in ``part``;
        every pair of ``C`` survives (its distinct partners do, by induction), so the part
        returned holds ``C`` too, and Algorithm DDST on it gives ``C``.
        """
        E = self._E
        mask = dict(part)
        ends = {e: (int(E[K.SRC, e]), int(E[K.DST, e])) for e in part}
        outs: dict[int, list[int]] = {}
        ins: dict[int, list[int]] = {}
        for e, (a, b) in ends.items():
            outs.setdefault(a, []).append(e)
            ins.setdefault(b, []).append(e)
        hosts = {v: int(self._V[K.HOSTS, v]) for v in (*outs, *ins)}
        todo = set(hosts)
        while todo:
            v = todo.pop()
            h = self._hosting(hosts[v], outs.get(v, ()), ins.get(v, ()), mask)
            if h == hosts[v]:
                continue
            hosts[v] = h
            for e in (*outs.get(v, ()), *ins.get(v, ())):
                a, b = ends[e]
                keep = self._pairs(mask[e], hosts[a], hosts[b])
                if keep != mask[e]:
                    mask[e] = keep
                    todo.update((a, b))
        if not mask[trigger] & self._last_edges:
            return None
        kept = {e: mask[e] for e in self._reach(trigger, ends, outs, ins, mask)}
        return (kept, hosts) if self._part_possible(kept, trigger) else None

    def _hosting(self, hosts: int, outs: Any, ins: Any, mask: dict[int, int]) -> int:
        """Which of ``hosts`` a vertex still hosts with the surviving pairs at it."""
        out_fits: dict[int, int] = {}
        for e in outs:
            if mask[e]:
                out_fits[mask[e]] = out_fits.get(mask[e], 0) + 1
        in_fits: dict[int, int] = {}
        for e in ins:
            if mask[e]:
                in_fits[mask[e]] = in_fits.get(mask[e], 0) + 1
        kept = 0
        for s in _bits(hosts):
            ow, iw = self._out_want[s], self._in_want[s]
            if (not ow or (bool(out_fits) and _distinct_representatives(out_fits, ow))) and (
                    not iw or (bool(in_fits) and _distinct_representatives(in_fits, iw))):
                kept |= 1 << s
        return kept

    def _pairs(self, red: int, src_hosts: int, dst_hosts: int) -> int:
        """The query edges of ``red`` whose two ends are hosted."""
        keep = 0
        for j in _bits(red):
            if src_hosts >> self._esrc[j] & 1 and dst_hosts >> self._edst[j] & 1:
                keep |= 1 << j
        return keep

    @staticmethod
    def _reach(start: int, ends: dict[int, tuple[int, int]], outs: dict[int, list[int]],
               ins: dict[int, list[int]], mask: dict[int, int]) -> list[int]:
        """The edges with surviving pairs connected to ``start`` through such edges."""
        seen = {start}
        todo = list(ends[start])
        visited: set[int] = set()
        while todo:
            v = todo.pop()
            if v in visited:
                continue
            visited.add(v)
            for e in (*outs.get(v, ()), *ins.get(v, ())):
                if mask[e] and e not in seen:
                    seen.add(e)
                    todo.extend(ends[e])
        return list(seen)

    def _verify(
        self,
        rows: np.ndarray,
        masks: list[int] | None,
        hosts: dict[int, int] | None,
        opened: int,
        reports: Reports,
    ) -> None:
        """Algorithm DDST on a part: its edges' ``rows`` (any order) with their pairs
        ``masks`` and the hosting left (each a superset of the match component's); ``None``
        for the edges' match sets and the vertices' own hosting, read from the rows (a whole
        red component: no Python per edge). The trigger is the newest edge, last once the
        part is in stream order."""
        self.verifications += 1
        g, vrows, rows, order = self._part_graph(rows)
        red = self._E[K.RED, rows] if masks is None else np.array(masks, np.int64)[order]
        hosted = self._V[K.HOSTS, vrows]
        if hosts is not None:
            hosted = np.array([hosts.get(v, h) for v, h in
                               zip(vrows.tolist(), hosted.tolist(), strict=True)], np.int64)
        # no label check (the baseline's label_compat): a pair is within the edge's fit set, which
        # fitted its labels and its ends' labels; a vertex hosts only query vertices it has
        # fitting edges for, at the right end, so their labels fit too (every query vertex
        # is on a query edge)
        sim, se = run_ddst(self._q, g, _bit_matrix(hosted, self._nv), _bit_matrix(red, self._ne))
        at = len(rows) - 1
        if se[:, at].any():
            reports.add(g, *component_of(g, sim, se, at), at, opened)

    def _part_graph(self, rows: np.ndarray) -> tuple[WindowGraph, np.ndarray, np.ndarray,
                                                     np.ndarray]:
        """The part of edge ``rows`` as the baseline's window graph, gathered from the edge
        and vertex rows; its vertices' rows (numbered as :class:`PartGraphs` does; the
        baseline's results do not depend on the numbering); its edges' rows in stream order;
        and where each of them was in ``rows``.

        The edges are put in stream order (arrival order), as in a window: the trigger,
        the newest, stays last, and a report then needs no sort of its edge pairs."""
        E = self._E
        order = np.argsort(E[K.NUM, rows])
        rows = rows[order]
        g, vrows = self._part_graphs.graph(E[K.SRC, rows], E[K.DST, rows], E[K.T, rows],
                                           E[K.SEQ, rows], self._labels[rows], self._vname,
                                           self._vlabel)  # fmt: skip
        return g, vrows, rows, order


_BITS: dict[int, tuple[int, ...]] = {}


def _bits(mask: int) -> tuple[int, ...]:
    """The set bits of ``mask``, cached (masks here are small and recur)."""
    bits = _BITS.get(mask)
    if bits is None:
        bits = _BITS[mask] = tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
    return bits


def _bit_matrix(masks: np.ndarray, width: int) -> np.ndarray:
    """bool ``(width, len(masks))``: bit ``j`` of each mask in row ``j``."""
    shifts = np.arange(width, dtype=np.int64)
    return ((np.asarray(masks, dtype=np.int64)[None, :] >> shifts[:, None]) & 1).astype(bool)
