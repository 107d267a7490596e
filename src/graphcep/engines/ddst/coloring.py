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
   At vertices with more than 16 edges round 1, read from the kept counts of red edges by
   match set, stands in for round 2 (rounds only shrink: still a superset), so this costs
   the size of the part and of the vertices around it, not of the red component. A part
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

from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass
from operator import attrgetter

import numpy as np
import pyarrow as pa

from graphcep.engines.base import EngineBase, StateBoundError
from graphcep.engines.ddst.common import (
    INT_MAX,
    INT_MIN,
    PartGraphs,
    WindowGraph,
    batch_columns,
    component_of,
    edge_fit,
    index_query,
    run_ddst,
)
from graphcep.engines.ddst.reports import (
    NO_MATCHES,
    Reports,
    reported_pairs,
)
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
_NUM = attrgetter("num")
_ROW = attrgetter("row")
#: Vertices left without edges kept for reuse, at most this many: on sparse windows over
#: many hosts (netflow) most arrivals bring a vertex the window does not hold, and most
#: departures take one away; a kept one is reused with its row instead of being rebuilt.
_SPARE_VERTICES = 1024
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


class _Vertex:
    """A stream vertex ``(id, label)`` with black edges in the window."""

    __slots__ = ("key", "row", "out_fits", "in_fits", "red_out", "red_in", "out_edges",
                 "in_edges", "hosts", "red_degree", "anchor")  # fmt: skip

    def __init__(self, key: tuple[str, str | None], row: int) -> None:
        self.key = key
        self.row = row  # its row in the engine's vertex rows
        self.out_fits: dict[int, int] = {}  # fit set (bit mask) -> number of out-edges with it
        self.in_fits: dict[int, int] = {}
        self.red_out: dict[int, int] = {}  # match set -> number of red out-edges with it
        self.red_in: dict[int, int] = {}
        self.out_edges: deque[int] = deque()  # edge numbers, oldest first (they leave first)
        self.in_edges: deque[int] = deque()
        self.hosts = 0  # bit s: this vertex can host query vertex s
        self.red_degree = 0  # red edge ends here
        self.anchor = -1  # union-find node of a red edge here; valid while red_degree > 0


class _Edge:
    """A black edge of the window: fit set, match set (red bits) and union-find node."""

    __slots__ = ("num", "row", "t", "seq", "src", "dst", "fits", "red", "node")

    def __init__(
        self, num: int, row: int, t: int, seq: int, src: _Vertex, dst: _Vertex, fits: int
    ) -> None:
        self.num = num  # arrival number (every edge counts, black or not)
        self.row = row  # its row in the engine's edge rows
        self.t = t
        self.seq = seq
        self.src = src
        self.dst = dst
        self.fits = fits
        self.red = 0
        self.node = -1  # its current union-find node while red, else -1


class _Component:
    """The master's record: countMap, needMap, membership and timing extremes."""

    __slots__ = ("count", "need", "alive", "dead", "split", "members", "first", "last")

    def __init__(self, ne: int) -> None:
        self.count = [0] * ne  # countMap
        self.need = (1 << ne) - 1  # needMap: query edges with count 0
        self.alive: dict[int, _Edge] = {}  # its red edges by edge row (listed as rows)
        self.dead = 0  # nodes of deleted edges, kept for the chains
        self.split = False  # a deletion may have disconnected it
        self.members: list[int] = []  # all its nodes, live and dead
        self.first = [INT_MAX] * ne  # earliest / latest time of a red edge per query edge,
        self.last = [INT_MIN] * ne  # never undone on deletion (only widens the test)

    @property
    def live(self) -> int:
        """Nodes of red edges."""
        return len(self.alive)


class _Rows:
    """Parallel NumPy columns whose rows are taken on arrival and given back on departure.

    A verification gathers its part of the window from these by fancy indexing, instead
    of reading every edge's attributes in Python (that was most of a verification's time
    on dense windows: ~1 µs per edge against the DDST kernel's ~0.2 µs).
    """

    def __init__(self, **dtypes: type) -> None:
        self.cols = {name: np.empty(0, dtype=dtype) for name, dtype in dtypes.items()}
        self.free: list[int] = []

    def take(self, *values: object) -> int:
        """A free row, set to ``values`` (in column order); the columns double when full."""
        if not self.free:
            self._grow(1)
        row = self.free.pop()
        for col, value in zip(self.cols.values(), values, strict=True):
            col[row] = value
        return row

    def take_many(self, n: int, **values: np.ndarray) -> list[int]:
        """``n`` free rows, in the order :meth:`take` would give them with nothing given
        back between; the columns named in ``values`` are set at once (a batch's arrivals:
        one fancy assignment per column instead of one NumPy scalar write per edge)."""
        if len(self.free) < n:
            self._grow(n - len(self.free))
        cut = len(self.free) - n
        rows = self.free[cut:][::-1]  # the stack's top first, as pop() takes them
        del self.free[cut:]
        at = np.asarray(rows, dtype=np.int64)
        for name, value in values.items():
            self.cols[name][at] = value
        return rows

    def _grow(self, more: int) -> None:
        """Double the columns (at least ``more`` new rows); the new rows are free, lowest
        taken first."""
        size = len(next(iter(self.cols.values())))
        grown = max(64, 2 * size, size + more)
        for name, col in self.cols.items():
            self.cols[name] = np.concatenate([col, np.empty(grown - size, dtype=col.dtype)])
        self.free[:0] = range(grown - 1, size - 1, -1)

    def give(self, row: int, clear: str | None = None) -> None:
        """Free ``row``; drop the object it holds in column ``clear``."""
        if clear is not None:
            self.cols[clear][row] = None
        self.free.append(row)


# -- small helpers -------------------------------------------------------------------------


def _distinct_representatives(fits: dict[int, int], want: int) -> bool:
    """Whether the query edges ``want`` (a bit mask) can take pairwise distinct edges, given
    edge counts by fit set; a bipartite matching on the few distinct fit sets."""
    if not want & (want - 1):  # most query vertices have at most one edge on a side:
        if not want:  # any fitting edge does
            return True
        for mask in fits:  # noqa: SIM110 -- a loop, not any(): this runs at every arrival
            if mask & want:
                return True
        return False
    need = _bits(want)
    n = len(need)
    if n <= _HALL_LIMIT:
        return _hall(fits, _hall_sets(want))
    groups: dict[int, int] = {}
    for mask, c in fits.items():
        m = mask & want
        if m:
            groups[m] = groups.get(m, 0) + c
    if sum(groups.values()) < n:
        return False
    per = [sum(c for m, c in groups.items() if m >> j & 1) for j in need]
    if min(per) == 0:
        return False
    if min(per) >= n:  # each can still choose after the others took theirs
        return True
    slots = [m for m, c in groups.items() for _ in range(min(c, n))]
    owner = [-1] * len(slots)

    def place(j: int, seen: set[int]) -> bool:
        for i, m in enumerate(slots):
            if m >> j & 1 and i not in seen:
                seen.add(i)
                if owner[i] < 0 or place(owner[i], seen):
                    owner[i] = j
                    return True
        return False

    return all(place(j, set()) for j in need)


def _hall(fits: dict[int, int], subsets: tuple[tuple[int, int], ...]) -> bool:
    """Hall's condition: every subset of the query edges is fitted by at least as many
    edges as it has members -- exactly when distinct representatives exist. For the 2-4
    query edges a vertex side usually has, this beats building the matching (the hosting
    tests run at every arrival, and a vertex's fit sets grow with the window)."""
    for sub, size in subsets:
        total = 0
        for mask, c in fits.items():
            if mask & sub:
                total += c
        if total < size:
            return False
    return True


#: Sides with at most this many query edges take Hall's condition (2**n - 1 subsets).
_HALL_LIMIT = 4
_HALL_SETS: dict[int, tuple[tuple[int, int], ...]] = {}


def _hall_sets(want: int) -> tuple[tuple[int, int], ...]:
    """The non-empty subsets of ``want``'s bits with their sizes, smallest first (a single
    query edge without a fitting edge fails soonest)."""
    subsets = _HALL_SETS.get(want)
    if subsets is None:
        bits = [1 << j for j in _bits(want)]
        every = []
        for pick in range(1, 1 << len(bits)):
            chosen = [b for i, b in enumerate(bits) if pick >> i & 1]
            every.append((sum(chosen), len(chosen)))
        subsets = _HALL_SETS[want] = tuple(sorted(every, key=lambda s: s[1]))
    return subsets


def _connected(edges: list[_Edge]) -> list[list[_Edge]]:
    """Group edges (in arrival order) into connected parts, ordered by their first edge."""
    up: dict[_Vertex, _Vertex] = {}

    def top(v: _Vertex) -> _Vertex:
        while up.setdefault(v, v) is not v:
            up[v] = up[up[v]]
            v = up[v]
        return v

    for e in edges:
        a, b = top(e.src), top(e.dst)
        if a is not b:
            up[b] = a
    groups: dict[_Vertex, list[_Edge]] = {}
    for e in edges:
        groups.setdefault(top(e.src), []).append(e)
    return list(groups.values())


# -- the engine ------------------------------------------------------------------------------


class DDSTColoringEngine(EngineBase):
    """Online DDST matching by edge coloring (COLOR-EDGE) with verification on red components.

    Parameters
    ----------
    query : DDSTQuery
        The event pattern (query graph, timing order, window).
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

    def __init__(self, query: DDSTQuery, *, max_window_edges: int = 1_000_000,
                 report: str = "component") -> None:
        super().__init__()
        self.query = query
        self.max_window_edges = max_window_edges
        self._reported = reported_pairs(query, report)
        self.report = report
        self._setup()
        self._vertices: dict[tuple[str, str | None], _Vertex] = {}
        self._edges: dict[int, _Edge] = {}  # black edges of the window by arrival number
        # masks wider than 62 bits are Python ints (as in _fit_sets)
        vmask = object if len(self._q.vnames) > 62 else np.int64
        emask = object if self._ne > 62 else np.int64
        self._vertex_rows = _Rows(name=object, label=object, vertex=object, hosts=vmask)
        self._edge_rows = _Rows(t=np.int64, seq=np.int64, src=np.int64, dst=np.int64,
                                label=object, num=np.int64, red=emask)  # fmt: skip
        self._part_graphs = PartGraphs()
        # vertices without edges (all their counts empty, hosting nothing) and their rows
        self._spare: list[_Vertex] = []
        # the same edges, oldest first; vertices list theirs by number, so that pickling
        # (snapshot) stays shallow however long the chains of edges in a window
        self._fifo: deque[_Edge] = deque()
        self._parent: dict[int, int] = {}  # union-find over nodes
        self._node_edge: dict[int, _Edge] = {}  # node -> its edge (kept after deletion)
        self._comps: dict[int, _Component] = {}  # master node -> record
        self._next_node = 0
        self._times = np.empty(0, dtype=np.int64)  # times of the window's edges, all of them
        self._count = 0  # edges seen, black or not: the next arrival number
        self._watermark = INT_MIN
        self.verifications = 0

    def _setup(self) -> None:
        """Query tables the hot path reads (rebuilt on restore, never pickled)."""
        q = self._q = index_query(self.query)
        nv, ne = len(q.vnames), len(q.enames)
        self._ne = ne
        self._esrc = q.qsrc.tolist()
        self._edst = q.qdst.tolist()
        self._out_want = [sum(1 << j for j in q.out_q[s]) for s in range(nv)]
        self._in_want = [sum(1 << j for j in q.in_q[s]) for s in range(nv)]
        self._wants = list(zip(self._out_want, self._in_want, strict=True))
        # query vertices that need no in-edge / no out-edge
        self._no_in = sum(1 << s for s in range(nv) if not self._in_want[s])
        self._no_out = sum(1 << s for s in range(nv) if not self._out_want[s])
        self._last_edges = sum(1 << j for j in range(ne) if not q.post[j])
        self._ordered = any(q.pre)
        self._src_roles: dict[int, int] = {}  # fit set -> query vertices its source may host
        self._dst_roles: dict[int, int] = {}
        self._kind = self.query.window.kind
        self._size = self.query.window.size

    # -- protocol -----------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Add edges in stream order; return the match components they complete.

        Returns one row per arriving edge that is in the maximal match graph of its
        window: that graph's component holding the edge (as the baseline does).
        """
        cols = batch_columns(batch, self._next_seq)
        if cols is None:
            return NO_MATCHES
        self._check_order(cols["t"], cols["seq"], record=False)
        opened, kept = self._window_marks(cols["t"])  # raises before anything changes
        self._record_last(cols["t"], cols["seq"])
        self._times = kept
        reports = Reports(self._q, self.query.name, self._reported)
        self._run(cols, opened, reports)
        self._count += batch.num_rows
        self._expire(self._count, int(cols["t"][-1]))  # what the next window cannot hold
        self.edges_seen += batch.num_rows
        self.matches_found += len(reports)
        return reports.table()

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
        red = sum(c.live for c in self._comps.values())
        return {"edges": len(self._edges), "vertices": len(self._vertices),
                "partial_matches": len(self._comps), "red_edges": red,
                "union_find_nodes": len(self._parent)}  # fmt: skip

    def describe(self) -> str:
        return ("each edge that fits a query edge is colored black, or red where both its "
                "ends can host its query edges, and red edges form red components "
                "(union-find); Algorithm DDST runs only when the edge can close a match (its "
                "component's counts full, a timing witness possible, local rounds passed)")

    def state(self) -> dict:
        return {
            "query": self.query,
            "options": {"max_window_edges": self.max_window_edges, "report": self.report},
            "reported": self._reported,
            "graph": (self._vertices, self._edges, self._fifo, self._times,
                      self._vertex_rows, self._edge_rows),
            "union_find": (self._parent, self._node_edge, self._comps, self._next_node),
            "count": self._count,
            "verifications": self.verifications,
            "spare": self._spare,
        }

    @classmethod
    def from_state(cls, state: dict) -> DDSTColoringEngine:
        engine = cls(state["query"], **state["options"])
        (engine._vertices, engine._edges, engine._fifo, engine._times, engine._vertex_rows,
         engine._edge_rows) = state["graph"]
        engine._parent, engine._node_edge, engine._comps, engine._next_node = state["union_find"]
        engine._count = state["count"]
        engine._spare = state.get("spare", [])
        engine.verifications = state["verifications"]
        engine._reported = state["reported"]
        return engine

    # -- inspection -----------------------------------------------------------------------

    def color(self, seq: int) -> str | None:
        """``"red"`` or ``"black"`` for an edge of the window; ``None`` if it fits no query
        edge or has left the window."""
        e = self._edge_by_seq(seq)
        if e is None:
            return None
        return "red" if e.red else "black"

    def match_set(self, seq: int) -> frozenset[str]:
        """The query edges an edge of the window is red for (line 20's match set)."""
        e = self._edge_by_seq(seq)
        return frozenset() if e is None else frozenset(self._q.enames[j] for j in _bits(e.red))

    def red_component(self, seq: int) -> RedComponent | None:
        """The red component (as held) of a red edge of the window; ``None`` if not red."""
        e = self._edge_by_seq(seq)
        if e is None or not e.red:
            return None
        root = self._find(e.node)
        return self._view(root, self._comps[root])

    def red_components(self) -> list[RedComponent]:
        """All red components, exact (possibly split ones are rebuilt first), by master."""
        for root in [r for r, c in self._comps.items() if c.split]:
            self._rebuild(root)
        views = [self._view(r, c) for r, c in self._comps.items()]
        return sorted(views, key=attrgetter("master"))

    def _view(self, root: int, comp: _Component) -> RedComponent:
        names = self._q.enames
        alive = frozenset(e.seq for e in self._alive(comp))
        return RedComponent(
            master=self._node_edge[root].seq,
            edges=alive,
            count_map={names[j]: c for j, c in enumerate(comp.count)},
            need_map=frozenset(names[j] for j in _bits(comp.need)),
            exact=not comp.split,
        )

    def _edge_by_seq(self, seq: int) -> _Edge | None:
        return next((e for e in self._edges.values() if e.seq == seq), None)

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
        n = len(cols["t"])
        wide = self._ne > 62
        fits = np.zeros(n, dtype=object if wide else np.int64)
        for j, want in enumerate(q.elabels):
            ok = edge_fit(cols, q.vlabels[self._esrc[j]], want, q.vlabels[self._edst[j]])
            fits |= ok.astype(object) * (1 << j) if wide else ok.astype(np.int64) << j
        return fits

    def _run(self, cols: dict[str, np.ndarray], opened: np.ndarray, reports: Reports) -> None:
        """Color the black edges of a batch one by one; report the matches they trigger.

        The loop is the engine's hot path (every black edge passes it twice, arriving and
        leaving): what every edge needs is done here with local names, and the edge rows
        of the batch are taken and filled at once; methods are called only where
        something changes (a hosting bit flips, an edge turns red, a trigger).
        """
        fits = self._fit_sets(cols)
        black = np.flatnonzero(fits)
        if not len(black):
            return
        columns = ("t", "seq", "src", "dst", "label", "src_label", "dst_label")
        t, seq, src, dst, label, sl, dl = (cols[c][black].tolist() for c in columns)
        nums = black + self._count
        rows = self._edge_rows.take_many(
            len(black), t=cols["t"][black], seq=cols["seq"][black], label=cols["label"][black],
            num=nums, red=0)  # fmt: skip
        ends_src, ends_dst = self._edge_rows.cols["src"], self._edge_rows.cols["dst"]
        starts = opened[black].tolist()
        fit_list = fits[black].tolist()
        vertices, edges, fifo, last = self._vertices, self._edges, self._fifo, self._last_edges
        for i, num in enumerate(nums.tolist()):
            ti = t[i]
            self._expire(num, ti)
            f = fit_list[i]
            key = (src[i], sl[i])
            a = vertices.get(key) or self._new_vertex(key)
            key = (dst[i], dl[i])
            b = vertices.get(key) or self._new_vertex(key)
            row = rows[i]
            ends_src[row], ends_dst[row] = a.row, b.row
            e = edges[num] = _Edge(num, row, ti, seq[i], a, b, f)
            fifo.append(e)
            self._arrive(e, a, b, f)
            if e.red & last:
                self._trigger(e, starts[i], reports)

    # -- arrival and departure (COLOR-EDGE) -----------------------------------------------

    def _new_vertex(self, key: tuple[str, str | None]) -> _Vertex:
        """A vertex not in the window yet, in a vertex row of its own: a spare one if
        there is one (its counts are empty, it hosts nothing; its row holds it)."""
        rows = self._vertex_rows
        if self._spare:
            v = self._spare.pop()
            v.key = key
            rows.cols["name"][v.row], rows.cols["label"][v.row] = key
        else:
            row = rows.take(key[0], key[1], None, 0)
            v = rows.cols["vertex"][row] = _Vertex(key, row)
        self._vertices[key] = v
        return v

    def _forget_vertex(self, v: _Vertex) -> None:
        """``v`` has no edge left in the window: keep it as a spare, or free its row."""
        if len(self._spare) < _SPARE_VERTICES:
            self._spare.append(v)
        else:
            self._vertex_rows.give(v.row, clear="vertex")

    def _arrive(self, e: _Edge, src: _Vertex, dst: _Vertex, fits: int) -> None:
        """Lines 1-23 for a black edge ``e`` (registered in the window, its row filled):
        count it at its ends, color it, then its neighbours."""
        out_fits, in_fits = src.out_fits, dst.in_fits
        out_fits[fits] = out_fits.get(fits, 0) + 1
        src.out_edges.append(e.num)
        in_fits[fits] = in_fits.get(fits, 0) + 1
        dst.in_edges.append(e.num)
        # what may start hosting: not hosted yet, and, at an end with edges on one side
        # only (a vertex new to the window), needing no edge on the other side
        roles = self._roles(fits, self._src_roles, self._esrc)
        roles &= ~src.hosts if src.in_fits else self._no_in & ~src.hosts
        up_src = self._gain(src, roles) if roles else 0
        roles = self._roles(fits, self._dst_roles, self._edst)
        roles &= ~dst.hosts if dst.out_fits else self._no_out & ~dst.hosts
        up_dst = self._gain(dst, roles) if roles else 0
        if src.hosts and dst.hosts:  # red needs both ends hosting something
            self._recolor(e, fits)  # the new edge first (lines 5-20), as its master rule needs
        if up_src:
            self._recolor_at(src, up_src)  # lines 21-23: black neighbours turning red
        if up_dst:
            self._recolor_at(dst, up_dst)

    def _expire(self, num: int, now: int) -> None:
        """Departures before arrival ``num`` at time ``now`` (oldest first)."""
        fifo, edges = self._fifo, self._edges
        if self._kind == "count":
            while fifo and fifo[0].num <= num - self._size:
                self._depart(edges.pop(fifo.popleft().num))
        else:
            while fifo and fifo[0].t < now - self._size:
                self._depart(edges.pop(fifo.popleft().num))

    def _depart(self, e: _Edge) -> None:
        """An edge leaves the window: delete it logically and recolor around its ends."""
        if e.red:
            self._remove_red(e, e.red)
        src, dst, fits = e.src, e.dst, e.fits
        self._edge_rows.give(e.row, clear="label")
        _decrement(src.out_fits, fits)
        src.out_edges.popleft()  # it is the oldest edge anywhere, so the oldest here
        _decrement(dst.in_fits, fits)
        dst.in_edges.popleft()
        if src.hosts:  # a vertex hosting nothing has nothing to lose: no call then
            self._lose(src, self._roles(fits, self._src_roles, self._esrc))
        if dst.hosts:
            self._lose(dst, self._roles(fits, self._dst_roles, self._edst))
        vertices = self._vertices
        if not src.out_edges and not src.in_edges and vertices.pop(src.key, None):
            self._forget_vertex(src)
        # a self-loop's one vertex was popped just above: pop it once
        if not dst.out_edges and not dst.in_edges and vertices.pop(dst.key, None):
            self._forget_vertex(dst)

    def _roles(self, fits: int, cache: dict[int, int], end: list[int]) -> int:
        """Query vertices whose hosting an edge with this fit set can change at one end."""
        roles = cache.get(fits)
        if roles is None:
            roles = cache[fits] = sum({1 << end[j] for j in _bits(fits)})
        return roles

    def _hosts(self, out_fits: dict[int, int], in_fits: dict[int, int], s: int) -> bool:
        """Whether edges counted by fit (or match) set, out of and into a vertex, give query
        vertex ``s`` distinct edges for all its out- and in-edges."""
        ow, iw = self._wants[s]  # often 0 on one side: no call then; no edges there: no
        return (not ow or (bool(out_fits) and _distinct_representatives(out_fits, ow))) and (
            not iw or (bool(in_fits) and _distinct_representatives(in_fits, iw))
        )

    def _gain(self, v: _Vertex, roles: int) -> int:
        """After an arrival at ``v``: which of the query vertices ``roles``, not hosted
        there yet, it can now host (hosting only grows with more edges)."""
        flips = 0
        for s in _bits(roles):
            if self._hosts(v.out_fits, v.in_fits, s):
                flips |= 1 << s
        if flips:
            self._set_hosts(v, v.hosts | flips)
        return flips

    def _lose(self, v: _Vertex, roles: int) -> None:
        """After a departure at ``v``: the query vertices among ``roles`` it can no longer
        host stop being hosted, and the edges around it are recolored."""
        flips = 0
        for s in _bits(roles & v.hosts):
            if not self._hosts(v.out_fits, v.in_fits, s):
                flips |= 1 << s
        if flips:
            self._set_hosts(v, v.hosts & ~flips)
            self._recolor_at(v, flips)

    def _set_hosts(self, v: _Vertex, hosts: int) -> None:
        """Change what ``v`` can host, in its vertex row too (verifications read it there)."""
        v.hosts = self._vertex_rows.cols["hosts"][v.row] = hosts

    def _recolor_at(self, v: _Vertex, flips: int) -> None:
        """Recolor the edges at ``v`` for the query edges of the query vertices that flipped."""
        outs = sum({self._out_want[s] for s in _bits(flips)})
        ins = sum({self._in_want[s] for s in _bits(flips)})
        edges = self._edges
        for side, want in ((v.out_edges, outs), (v.in_edges, ins)):
            if want:
                for num in side:  # recoloring never adds or removes edges here
                    e = edges[num]
                    if e.fits & want:
                        self._recolor(e, e.fits & want)

    def _recolor(self, e: _Edge, which: int) -> None:
        """Set ``e``'s red bits among ``which``: red for ``q`` when both ends can host."""
        red = 0
        hs, hd = e.src.hosts, e.dst.hosts
        for j in _bits(which):
            if hs >> self._esrc[j] & 1 and hd >> self._edst[j] & 1:
                red |= 1 << j
        now = e.red & which
        if red & ~now:
            self._add_red(e, red & ~now)
        if now & ~red:
            self._remove_red(e, now & ~red)

    # -- red components (union-find) ----------------------------------------------------------

    def _find(self, node: int) -> int:
        """The master node of ``node``'s component, compressing the chain (path compression)."""
        parent = self._parent
        root = node
        while parent[root] != root:
            root = parent[root]
        while parent[node] != root:
            parent[node], node = root, parent[node]
        return root

    def _add_red(self, e: _Edge, bits: int) -> None:
        """Add query edges to ``e``'s match set, joining it to a component if it was black."""
        comp = self._comps[self._find(e.node)] if e.red else self._join(e)
        self._set_red(e, e.red | bits)
        for j in _bits(bits):
            c = comp.count[j] = comp.count[j] + 1
            if c == 1:
                comp.need &= ~(1 << j)
            comp.first[j] = min(comp.first[j], e.t)
            comp.last[j] = max(comp.last[j], e.t)

    def _set_red(self, e: _Edge, red: int) -> None:
        """Change ``e``'s match set, keeping its ends' counts of red edges by match set
        and its edge row's ``red``."""
        if e.red:
            _decrement(e.src.red_out, e.red)
            _decrement(e.dst.red_in, e.red)
        if red:
            e.src.red_out[red] = e.src.red_out.get(red, 0) + 1
            e.dst.red_in[red] = e.dst.red_in.get(red, 0) + 1
        e.red = self._edge_rows.cols["red"][e.row] = red

    def _join(self, e: _Edge) -> _Component:
        """Lines 7-18: find the masters at both ends; join, merge, or start a component."""
        node = e.node = self._next_node
        self._next_node += 1
        self._node_edge[node] = e
        roots: list[int] = []
        for v in (e.src, e.dst):
            if v.red_degree:
                r = self._find(v.anchor)
                if r not in roots:
                    roots.append(r)
        if not roots:
            root, comp = node, _Component(self._ne)
            self._comps[node] = comp
        else:
            root = roots[0] if len(roots) == 1 else self._union(*roots)
            comp = self._comps[root]
        self._parent[node] = root
        comp.members.append(node)
        comp.alive[e.row] = e
        for v in (e.src, e.dst):
            if not v.red_degree:
                v.anchor = node
            v.red_degree += 1
        return comp

    def _union(self, a: int, b: int) -> int:
        """Lines 11-14: merge two components; the larger one's master stays (ties: ``a``)."""
        ca, cb = self._comps[a], self._comps[b]
        if len(cb.members) > len(ca.members):
            a, b, ca, cb = b, a, cb, ca
        self._parent[b] = a
        del self._comps[b]
        ca.count = [x + y for x, y in zip(ca.count, cb.count, strict=True)]
        ca.need &= cb.need
        ca.members.extend(cb.members)
        ca.alive.update(cb.alive)
        ca.dead += cb.dead
        ca.split = ca.split or cb.split
        ca.first = [min(x, y) for x, y in zip(ca.first, cb.first, strict=True)]
        ca.last = [max(x, y) for x, y in zip(ca.last, cb.last, strict=True)]
        return a

    def _remove_red(self, e: _Edge, bits: int) -> None:
        """Remove query edges from ``e``'s match set; an emptied one deletes ``e`` logically."""
        root = self._find(e.node)
        comp = self._comps[root]
        for j in _bits(bits):
            comp.count[j] -= 1
            if not comp.count[j]:
                comp.need |= 1 << j
        self._set_red(e, e.red & ~bits)
        if e.red:
            return
        e.node = -1
        del comp.alive[e.row]
        comp.dead += 1
        for v in (e.src, e.dst):
            v.red_degree -= 1
            if not v.red_degree:
                v.anchor = -1
        # a pendant edge or a self-loop holds no path between other red edges
        if e.src is not e.dst and e.src.red_degree and e.dst.red_degree:
            comp.split = True
        if not comp.live:
            self._drop(root)
        elif comp.dead > comp.live + _GARBAGE_SLACK:
            self._rebuild(root)

    def _drop(self, root: int) -> None:
        """Forget a component with no red edge left (nothing points into it any more)."""
        for n in self._comps.pop(root).members:
            del self._parent[n]
            del self._node_edge[n]

    def _alive(self, comp: _Component) -> list[_Edge]:
        """The red edges of a component, in arrival order."""
        return sorted(comp.alive.values(), key=_NUM)

    def _rebuild(self, root: int) -> None:
        """Regroup a component's red edges into their true components; drop deleted nodes.

        ``O(size)``. The old master stays master of its part if its edge is still red;
        other parts get their earliest edge as master.
        """
        comp = self._comps.pop(root)
        alive = self._alive(comp)
        for n in comp.members:
            if self._node_edge[n].node != n:
                del self._parent[n]
                del self._node_edge[n]
        for part in _connected(alive):
            master = root if any(e.node == root for e in part) else part[0].node
            new = self._comps[master] = _Component(self._ne)
            new.members = [e.node for e in part]
            new.alive = {e.row: e for e in part}
            for e in part:
                self._parent[e.node] = master
                e.src.anchor = e.dst.anchor = master
                for j in _bits(e.red):
                    new.count[j] += 1
                    new.first[j] = min(new.first[j], e.t)
                    new.last[j] = max(new.last[j], e.t)
            new.need = sum(1 << j for j, c in enumerate(new.count) if not c)

    # -- verification ------------------------------------------------------------------------

    def _trigger(self, e: _Edge, opened: int, reports: Reports) -> None:
        """Tests 1-3 of the module docstring, then VERIFY-MATCH; report a match if found."""
        pins = e.red & self._last_edges
        comp = self._comps[self._find(e.node)]
        if comp.need or not self._timing_possible(comp.first, comp.last, e.t, pins):
            return
        part = _TOO_BIG if comp.live <= _DIRECT_COMPONENT else self._local_part(e)
        if part is _TOO_BIG:  # tests 4-5 cost more than DDST here, and seldom fail
            rows = np.fromiter(comp.alive, dtype=np.int64, count=comp.live)
            self._verify(rows, None, None, opened, reports)
            return
        refined = None if part is None else self._refine(part, e)
        if refined is not None:
            kept, hosts = refined
            rows = np.fromiter(map(_ROW, kept), dtype=np.int64, count=len(kept))
            self._verify(rows, list(kept.values()), hosts, opened, reports)

    def _timing_possible(self, first: list[int], last: list[int], t: int, pins: int) -> bool:
        """Whether some query edge in ``pins``, at time ``t``, can have a timing witness,
        given each query edge's earliest and latest candidate time."""
        if not self._ordered:
            return True
        return any(self._bounds_meet(first, last, t, pin) for pin in _bits(pins))

    def _bounds_meet(self, first: list[int], last: list[int], t: int, pin: int) -> bool:
        """Earliest times forward along ``≺``, latest backward: every range non-empty."""
        q = self._q
        lo = [0] * self._ne
        for j in q.topo:
            x = t if j == pin else first[j]
            for p in q.pre[j]:
                x = max(x, lo[p] + 1)
            lo[j] = x
        hi = [0] * self._ne
        for j in reversed(q.topo):
            x = t if j == pin else last[j]
            for s in q.post[j]:
                x = min(x, hi[s] - 1)
            if x < lo[j]:
                return False
            hi[j] = x
        return True

    def _part_possible(self, part: dict[_Edge, int], trigger: _Edge) -> bool:
        """Tests 1-3 on a part of a component, pairs as given: exact counts and times."""
        pins = part.get(trigger, 0) & self._last_edges
        if not pins:
            return False
        first, last = [INT_MAX] * self._ne, [INT_MIN] * self._ne
        covered = 0
        for e, m in part.items():
            covered |= m
            for j in _bits(m):
                first[j], last[j] = min(first[j], e.t), max(last[j], e.t)
        full = covered == (1 << self._ne) - 1
        return full and self._timing_possible(first, last, trigger.t, pins)

    # Local rounds: pairs_0 = the red pairs; a vertex hosts s in round r when the pairs of
    # round r-1 at it give s distinct partners; pairs_r = red pairs with both ends hosted
    # in round r. Every pair of the maximal match graph is in every round (its partners
    # are, by induction), and round r at an edge reads only the edges within r hops. At a
    # vertex with many edges, round 1 (read from its counts) stands in for later rounds:
    # rounds only shrink, so that is a superset again, and the cost stays bounded.

    def _local_part(self, trigger: _Edge) -> dict[_Edge, int] | None:
        """The edges reachable from ``trigger`` through pairs of the last local round, with
        those pairs; ``None`` if the trigger's own pairs or tests 1-3 fail on them;
        ``_TOO_BIG`` once the part grows past ``_LOCAL_BUDGET`` edges.

        The match component holding the trigger lies inside, whatever the size of the red
        component: the cost follows this part, not the window. A part that large is nearly
        always a match component being reported (dense windows): the interpreted rounds
        would cost several times compiled Algorithm DDST on the red component, which holds
        the match component too (test 2), so the caller runs DDST there instead.
        """
        memo: dict[tuple[_Vertex, int, int], bool] = {}
        if not self._round_pairs(trigger, self._last_edges, _LOCAL_ROUNDS, memo):
            return None
        part: dict[_Edge, int] = {}
        todo, seen = [trigger.src, trigger.dst], set()
        edges = self._edges
        while todo:
            v = todo.pop()
            if v in seen:
                continue
            seen.add(v)
            for side in (v.out_edges, v.in_edges):
                for num in side:
                    e = edges[num]
                    if e.red and e not in part:
                        m = part[e] = self._round_pairs(e, e.red, _LOCAL_ROUNDS, memo)
                        if m:
                            todo.extend((e.src, e.dst))
                            if len(part) > _LOCAL_BUDGET:
                                return _TOO_BIG
        part = {e: m for e, m in part.items() if m}
        return part if self._part_possible(part, trigger) else None

    def _round_pairs(
        self, e: _Edge, which: int, r: int, memo: dict[tuple[_Vertex, int, int], bool]
    ) -> int:
        """The query edges among ``which`` for which ``e``'s pair is in round ``r``."""
        keep = 0
        for j in _bits(which & e.red):
            if r == 0 or (
                self._held(e.src, self._esrc[j], r, memo)
                and self._held(e.dst, self._edst[j], r, memo)
            ):
                keep |= 1 << j
        return keep

    def _held(self, v: _Vertex, s: int, r: int, memo: dict[tuple[_Vertex, int, int], bool]) -> bool:
        """Whether ``v`` hosts query vertex ``s`` in round ``r`` (a superset at hubs)."""
        if not v.hosts >> s & 1:
            return False
        if len(v.out_edges) + len(v.in_edges) > _LOCAL_DEGREE:
            r = 1
        key = (v, s, r)
        held = memo.get(key)
        if held is None:
            if r == 1:
                held = self._hosts(v.red_out, v.red_in, s)
            else:
                held = self._held_by_round(v, s, r, memo)
            memo[key] = held
        return held

    def _held_by_round(
        self, v: _Vertex, s: int, r: int, memo: dict[tuple[_Vertex, int, int], bool]
    ) -> bool:
        """Round ``r`` hosting from the round ``r - 1`` pairs of the edges at ``v``."""
        edges = self._edges
        for side, want in ((v.out_edges, self._out_want[s]), (v.in_edges, self._in_want[s])):
            if not want:
                continue
            fits: dict[int, int] = {}
            for num in side:
                e = edges[num]
                if e.red & want:
                    m = self._round_pairs(e, want, r - 1, memo)
                    if m:
                        fits[m] = fits.get(m, 0) + 1
            if not _distinct_representatives(fits, want):
                return False
        return True

    def _refine(
        self, part: dict[_Edge, int], trigger: _Edge
    ) -> tuple[dict[_Edge, int], dict[_Vertex, int]] | None:
        """VERIFY-MATCH lines 3-7 on ``part`` taken as the whole graph: shrink match sets
        until every pair's ends can host with distinct pairs; the part still connected to
        ``trigger`` and the hosting left; ``None`` if tests 1-3 now fail.

        ``part`` holds the trigger's match component ``C``, which is valid in ``part``;
        every pair of ``C`` survives (its distinct partners do, by induction), so the part
        returned holds ``C`` too, and Algorithm DDST on it gives ``C``.
        """
        mask = dict(part)
        outs: dict[_Vertex, list[_Edge]] = {}
        ins: dict[_Vertex, list[_Edge]] = {}
        for e in part:
            outs.setdefault(e.src, []).append(e)
            ins.setdefault(e.dst, []).append(e)
        hosts = {v: v.hosts for v in (*outs, *ins)}
        todo = set(hosts)
        while todo:
            v = todo.pop()
            h = self._hosting(v, hosts[v], outs.get(v, ()), ins.get(v, ()), mask)
            if h == hosts[v]:
                continue
            hosts[v] = h
            for e in (*outs.get(v, ()), *ins.get(v, ())):
                keep = self._pairs(mask[e], hosts[e.src], hosts[e.dst])
                if keep != mask[e]:
                    mask[e] = keep
                    todo.update((e.src, e.dst))
        if not mask[trigger] & self._last_edges:
            return None
        kept = {e: mask[e] for e in self._reach(trigger, outs, ins, mask)}
        return (kept, hosts) if self._part_possible(kept, trigger) else None

    def _hosting(
        self,
        v: _Vertex,
        hosts: int,
        outs: Iterable[_Edge],
        ins: Iterable[_Edge],
        mask: dict[_Edge, int],
    ) -> int:
        """Which of ``hosts`` vertex ``v`` still hosts with the surviving pairs at it."""
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
            if self._hosts(out_fits, in_fits, s):
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
    def _reach(
        start: _Edge,
        outs: dict[_Vertex, list[_Edge]],
        ins: dict[_Vertex, list[_Edge]],
        mask: dict[_Edge, int],
    ) -> list[_Edge]:
        """The edges with surviving pairs connected to ``start`` through such edges."""
        seen = {start}
        todo = [start.src, start.dst]
        visited: set[_Vertex] = set()
        while todo:
            v = todo.pop()
            if v in visited:
                continue
            visited.add(v)
            for e in (*outs.get(v, ()), *ins.get(v, ())):
                if mask[e] and e not in seen:
                    seen.add(e)
                    todo.extend((e.src, e.dst))
        return list(seen)

    def _verify(
        self,
        rows: np.ndarray,
        masks: list[int] | None,
        hosts: dict[_Vertex, int] | None,
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
        if masks is None:
            red = self._edge_rows.cols["red"][rows]
        else:
            red = np.array(masks, dtype=self._edge_rows.cols["red"].dtype)[order]
        if hosts is None:
            hosted = self._vertex_rows.cols["hosts"][vrows]
        else:
            hosted = [hosts.get(v, v.hosts) for v in self._vertex_rows.cols["vertex"][vrows]]
        # no label check (the baseline's label_compat): a pair is within the edge's fit set, which
        # fitted its labels and its ends' labels; a vertex hosts only query vertices it has
        # fitting edges for, at the right end, so their labels fit too (every query vertex
        # is on a query edge)
        sim, se = run_ddst(self._q, g, _bit_matrix(hosted, len(self._q.vnames)),
                        _bit_matrix(red, self._ne))  # fmt: skip
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
        ec, vc = self._edge_rows.cols, self._vertex_rows.cols
        order = np.argsort(ec["num"][rows])
        rows = rows[order]
        g, vrows = self._part_graphs.graph(ec["src"][rows], ec["dst"][rows], ec["t"][rows],
                                           ec["seq"][rows], ec["label"][rows], vc["name"],
                                           vc["label"])  # fmt: skip
        return g, vrows, rows, order


_BITS: dict[int, tuple[int, ...]] = {}


def _bits(mask: int) -> tuple[int, ...]:
    """The set bits of ``mask``, cached (masks here are small and recur)."""
    bits = _BITS.get(mask)
    if bits is None:
        bits = _BITS[mask] = tuple(i for i in range(mask.bit_length()) if mask >> i & 1)
    return bits


def _bit_matrix(masks: list[int] | np.ndarray, width: int) -> np.ndarray:
    """bool ``(width, len(masks))``: bit ``j`` of each mask in row ``j``."""
    wide = width > 62  # fit sets of more query edges are Python ints (object arrays)
    values = np.asarray(masks, dtype=object if wide else np.int64)
    shifts = np.arange(width, dtype=object if wide else np.int64)
    return ((values[None, :] >> shifts[:, None]) & 1).astype(bool)


def _decrement(counts: dict[int, int], key: int) -> None:
    c = counts[key] - 1
    if c:
        counts[key] = c
    else:
        del counts[key]
