"""DDST-SIGNATURE engine: number theoretic signatures as a filter in front of Algorithm DDST
("Event pattern matching over graph streams", Sec. 3.2, Algorithm DDST-SIGNATURE).

The query graph is encoded offline as a product of small *factors*; as edges arrive, the
same factors are multiplied, modulo the query's signature words, into residues kept per
connected group of stream edges. Only when every residue of the arriving edge's group is
0 -- a *signature match* -- does the engine run Algorithm DDST (the baseline's own code,
:mod:`graphcep.engines.ddst.baseline`) on the arriving edge's candidate component in its
window, as the baseline does at every arriving edge. The semantics -- labels, vertices
as ``(id, label)`` pairs, time and count windows, the reporting rule "at each arriving edge
report the match component containing it" -- are the baseline's, and so is the output:
row for row, with the same match ids, the same as :class:`DDSTBaselineEngine`.

Signature (offline part, lines 1-12)
------------------------------------
Every vertex label and every edge label of the query gets a random value ``r`` in
``[0, p)`` (vertex and edge labels separately; ``*``, the any-label, gets one too). The
factors, taken modulo ``p`` and represented in ``[1, p]`` (``0`` as ``p``, so that no
factor is 0: a zero word cannot be a modulus and a zero residue would be absorbing):

* edge factor of a query edge ``u -> v``: ``r[L(u)] - r[L(v)] + r[L(e)]`` (line 5);
* degree factors of a query vertex ``u``: ``r[L(u)] + i`` for ``i = 1..in_degree(u)`` and
  ``r[L(u)] - i`` for ``i = 1..out_degree(u)`` (lines 9-12).

They are packed greedily into words ``σ[0..c]`` below ``2**32`` (lines 6-7); residues are
below their word, so the product of two residues, needed when two groups merge, fits in
64 bits. Theorem 4's count of words is checked by :func:`signature_word_bound`.

Online part (lines 1-10), adapted so that the test is a sound necessary condition
---------------------------------------------------------------------------------
The filter must never skip a window that the baseline reports from. The paper's test is
not sound under these semantics as written, for these reasons, each with its adaptation:

1. *Factors are keys, and each key counts once.* Degree-preserving dual simulation lets
   several query edges share one stream edge and several query vertices share one stream
   vertex (Sec. 2, Fig. 3: two query ``C`` vertices on one stream vertex; a query path
   ``x -> y -> z -> w`` is matched by a 2-cycle ``a -> b -> a``). The paper's ``σ`` has one
   factor per query edge and per query degree, so there it needs three equal edge factors
   where the stream has two: ``σ`` does not divide ``S``, and Theorem 3's "all the factors
   in Q are present" fails. Here a factor stands for a *key* -- an edge key
   ``(source label, edge label, destination label)`` or a degree key ``(vertex label,
   in/out, i)`` -- and ``σ`` multiplies each distinct key of the query once. A match holds
   every key: each query edge has a matching stream edge, which has the query edge's key;
   each query vertex ``u`` has a matching stream vertex with at least ``u``'s in- and
   out-degree. A group of stream edges holding every key has a product that the product
   of the distinct keys' factors divides (a product over a subset of factors divides the
   product over all), whatever the values -- so collisions, small ``p`` included, only
   cause extra verification, never a lost match.
2. *Stream factors are the keys an edge fits.* With the any-label ``*`` (``None``) a
   query edge fits many label triples and a stream edge may fit several query keys; a
   candidate stream edge (one that fits some query edge, the baseline's test) multiplies
   the factor of every edge key it fits, and, when its source reaches out-degree ``i``
   (its destination in-degree ``i``), the factor of every degree key ``(λ, out, i)``
   whose query label ``λ`` fits the vertex's label (``λ`` is the label or ``*``) and that
   the query has. Factors of edges fitting no query edge are left out: they cannot make a
   key present, only collide.
3. *Residues per group, not per window.* A reported match component lies inside the
   *candidate component* (connected candidate edges) of the arriving edge, so the test is
   made on the residues of that component alone -- a necessary condition that is much
   tighter than the whole window's, which a large window almost always passes. Vertices
   are ``(id, label)`` pairs, as the baseline's; a stream vertex's degree counts its
   candidate edges.
4. *Arrival and expiry.* Groups are kept in a union-find structure: an arriving candidate
   edge merges its endpoints' groups (residues multiply, word by word) and multiplies its
   factors into the result. Residues cannot be divided (line 7 reduces them modulo
   ``σ[i]``), so an edge leaving the window stays in its group, and degree counts stay
   up, until the structure is rebuilt from the window -- the paper's line 10, "recompute
   ``s[0..c]`` from ... last window". Until then each group holds a superset of a
   candidate component of the window and counts at least its degrees, so the test stays
   necessary. A group remembers its oldest edge; a signature match in a group holding an
   edge older than the window triggers that rebuild and a second test on the exact
   component; the structure is also rebuilt once it holds more than twice the window's
   candidate edges (plus 1024), which bounds its size and keeps the cost amortised O(1)
   per edge. Count windows (``WITHIN N EDGES``) and time windows (both ends closed; equal
   times in one window) differ only in where a window starts.
5. *Resume rule.* After a verification the paper resumes "from the match position" --
   after the earliest edge of a true match -- or from the window's second edge. Under the
   reporting rule a match component that gains an edge is reported again *with* its old
   edges (edges 0, 1 of a component, then edge 3 joining it), so dropping them would lose
   that report; and in a time window the second edge can still be in the next window (no
   edge expires when the next one has the same time). The sound resume point is the
   start of the next window: the residues are simply kept -- they never hold less than
   the window -- and old edges leave at the next rebuild. For a count window that is the
   paper's ``e_2``.
6. *One word per factor.* Each key's factor is multiplied only into the word that holds
   it (the paper multiplies every factor into every word): ``σ[i]`` divides the product
   of its own keys' factors when those keys are present, so this is as sound, tighter
   and cheaper.
7. *Timing order* plays no part in the residues: it only removes matches, and the
   verification applies it.
8. *Verification* (line 9) is the baseline's: Algorithm DDST on the candidate component
   of the arriving edge in its window, reported by the baseline's rule. The component is
   the edge's group, exact by then (point 4), so the window's other edges are not
   touched -- the baseline numbers every vertex of the window first.
9. *Only a possible trigger is tested.* The window of an arrival ends at it, and a query
   edge ``q`` with a successor ``q ≺ b`` needs a partner of ``b`` strictly later than its
   own: the arriving edge can be in the match graph only as a partner of a query edge
   with no successor. An arrival fitting none of those (by labels) is added to its group
   but not tested -- it cannot be reported, whatever the residues.

Theorem 4 as printed, ``c + 1 <= 3 log p / (size - log p) |Eq|``, is off by one: its
proof bounds every word but the last from below, so it shows ``c <= 3 |Eq| log p /
(size - log p)``; a one-edge query has ``c + 1 = 1`` word but a right-hand side below 1.

Cost: per arriving candidate edge, two union-find look-ups and ``O(|Eq|)`` word
multiplications in compiled code (no Python call per edge); per signature match, a scan
of the window in compiled code and Algorithm DDST on the component; per rebuild, a scan
of the window in compiled code.

References
----------
"Event pattern matching over graph streams": Sec. 2 (Definitions 1-2), Sec. 3.1
(Algorithm DDST), Sec. 3.2 (Algorithm DDST-SIGNATURE, Example 6, Theorems 2-4).

Examples
--------
The paper's Fig. 1 query (both branches at ``A``) on a stream where an unrelated congested
road ``x -> y -> z`` arrives in between: ``A`` needs two incoming congested roads, so the
signature matches only once ``a`` has them -- at ``e -> a``, too early for a match, and at
``f -> e``, which completes it. Algorithm DDST runs twice, where the baseline runs it on
the candidate component of each of the seven edges.

>>> import pyarrow as pa
>>> from graphcep.patterns.ddst import DDSTBuilder
>>> from graphcep.engines.ddst.baseline import DDSTBaselineEngine
>>> q = (DDSTBuilder("robust").vertex("A", "M").vertex("B", "M").vertex("C", "M")
...      .vertex("D", "M").vertex("E", "M").vertex("F", "M")
...      .edge("AB", "A", "B", "congested").edge("CA", "C", "A", "congested")
...      .edge("DC", "D", "C", "congested").edge("EA", "E", "A", "congested")
...      .edge("FE", "F", "E", "congested")
...      .order("AB", "CA", "DC").order("AB", "EA", "FE").within(5, "min").build())
>>> roads = [("a", "b"), ("x", "y"), ("c", "a"), ("d", "c"), ("y", "z"), ("e", "a"), ("f", "e")]
>>> stream = pa.table({"t": [i * 1_000_000 for i in range(7)],
...     "src": [s for s, _ in roads], "dst": [d for _, d in roads],
...     "label": ["congested"] * 7, "src_label": ["M"] * 7, "dst_label": ["M"] * 7})
>>> engine = DDSTSignatureEngine(q, p=97, seed=1)
>>> out = engine.push(stream)
>>> out.column("trigger_seq").to_pylist(), engine.verifications
([6], 2)
>>> out.equals(DDSTBaselineEngine(q).push(stream))
True
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numba as nb
import numpy as np
import pyarrow as pa

from graphcep.engines.ddst.baseline import (
    DDSTBaselineEngine,
)
from graphcep.engines.ddst.common import (
    PartGraphs,
    WindowGraph,
    component_of,
    edge_fit,
    label_fit,
    number_vertices,
    run_ddst,
)
from graphcep.engines.ddst.reports import (
    Reports,
)
from graphcep.patterns.ddst import DDSTQuery

__all__ = [
    "WORD_BITS",
    "DEFAULT_P",
    "Key",
    "Signature",
    "DDSTSignatureEngine",
    "degree_factor",
    "edge_factor",
    "key_factor",
    "pack_words",
    "query_keys",
    "signature_word_bound",
    "stream_residues",
]

#: Signature words are below ``2**WORD_BITS``: residues then multiply within 64 bits.
WORD_BITS = 32
#: Default modulus: a prime in the range the paper finds to work well (97 to 997).
DEFAULT_P = 997
#: A factor's meaning: ``("edge", src label, edge label, dst label)`` or
#: ``("in" | "out", vertex label, i)``; a label ``None`` is the any-label ``*``.
Key = tuple[Any, ...]

_NEVER = np.int64(2**62)  # "no edge yet" for a group's oldest position
#: Per-vertex integer arrays of the group structure (see the kernel's comment).
_VERTEX_ARRAYS = ("_epoch", "_parent", "_size", "_outc", "_inc", "_oldest")


# -- the offline part: factors, keys and words ------------------------------------------


def _rep(x: int, p: int) -> int:
    """``x mod p`` as an integer in ``[1, p]``: 0 is represented by ``p``."""
    return (x - 1) % p + 1


def edge_factor(r_src: int, r_dst: int, r_edge: int, p: int) -> int:
    """Line 5: ``(r[L(u)] - r[L(v)] + r[L(e)]) mod p``, in ``[1, p]``.

    >>> edge_factor(9, 3, 16, 17), edge_factor(6, 9, 16, 17), edge_factor(9, 14, 7, 17)
    (5, 13, 2)
    """
    return _rep(r_src - r_dst + r_edge, p)


def degree_factor(r: int, i: int, p: int, *, incoming: bool) -> int:
    """Lines 10 and 12: ``(r + i) mod p`` for in-degree ``i``, ``(r - i) mod p`` for out.

    >>> [degree_factor(9, 1, 17, incoming=True), degree_factor(9, 2, 17, incoming=False)]
    [10, 7]
    """
    return _rep(r + i if incoming else r - i, p)


def query_keys(query: DDSTQuery, *, distinct: bool = True) -> list[Key]:
    """The keys of a query's factors, in the paper's order: edges, then per vertex its
    in-degree and out-degree factors.

    ``distinct=False`` gives the paper's list, one entry per query edge and per unit of
    degree; the engine uses each distinct key once (see the module docstring, point 1).

    >>> from graphcep.patterns.ddst import DDSTBuilder
    >>> q = (DDSTBuilder().vertex("A", "M").vertex("B", "M").edge("x", "A", "B")
    ...      .edge("y", "A", "B").within(1, "s").build())
    >>> query_keys(q)
    [('edge', 'M', None, 'M'), ('out', 'M', 1), ('out', 'M', 2), ('in', 'M', 1), ('in', 'M', 2)]
    >>> len(query_keys(q, distinct=False))
    6
    """
    label = {v.name: v.label for v in query.vertices}
    keys: list[Key] = [("edge", label[e.src], e.label, label[e.dst]) for e in query.edges]
    for v in query.vertices:
        indeg = sum(e.dst == v.name for e in query.edges)
        outdeg = sum(e.src == v.name for e in query.edges)
        keys += [("in", v.label, i) for i in range(1, indeg + 1)]
        keys += [("out", v.label, i) for i in range(1, outdeg + 1)]
    return list(dict.fromkeys(keys)) if distinct else keys


def key_factor(
    key: Key, r_vertex: Mapping[str | None, int], r_edge: Mapping[str | None, int], p: int
) -> int:
    """The factor of one key under the given label values."""
    if key[0] == "edge":
        return edge_factor(r_vertex[key[1]], r_vertex[key[3]], r_edge[key[2]], p)
    return degree_factor(r_vertex[key[1]], key[2], p, incoming=key[0] == "in")


def pack_words(factors: Iterable[int], bits: int = WORD_BITS) -> tuple[tuple[int, ...], list[int]]:
    """Lines 3-12: multiply factors into words below ``2**bits``, starting a new word when
    the next factor would not fit. Returns the words and each factor's word.

    >>> pack_words([5, 13, 2, 10, 8, 7])
    ((72800,), [0, 0, 0, 0, 0, 0])
    >>> pack_words([200, 200, 200], bits=16)
    ((40000, 200), [0, 0, 1])
    """
    words, where = [1], []
    for f in factors:
        if words[-1] * f >= 2**bits:
            words.append(1)
        words[-1] *= f
        where.append(len(words) - 1)
    return tuple(words), where


def signature_word_bound(edges: int, p: int, bits: int = WORD_BITS) -> float:
    """Theorem 4, as its proof shows it: an upper bound on ``c`` (there are ``c + 1``
    words) for a query of ``edges`` edges: ``3 |Eq| log p / (bits - log p)``.

    >>> round(signature_word_bound(5, 997), 2)
    6.78
    """
    log_p = math.log2(p)
    return 3 * edges * log_p / (bits - log_p)


def _is_prime(n: int) -> bool:
    return n >= 2 and all(n % d for d in range(2, math.isqrt(n) + 1))


def _sorted_labels(labels: Iterable[str | None]) -> list[str | None]:
    """Distinct labels, ``None`` first: a fixed order for drawing random values."""
    return sorted(set(labels), key=lambda lab: (lab is not None, lab or ""))


@dataclass(frozen=True)
class Signature:
    """A query's signature: label values, distinct keys with their factors, and words.

    Build it with :meth:`random` (the paper's line 2) or :meth:`of` (chosen values).
    """

    p: int
    r_vertex: Mapping[str | None, int]
    r_edge: Mapping[str | None, int]
    keys: tuple[Key, ...]
    factors: tuple[int, ...]
    word_of: tuple[int, ...]
    words: tuple[int, ...]

    @classmethod
    def of(
        cls,
        query: DDSTQuery,
        p: int,
        r_vertex: Mapping[str | None, int],
        r_edge: Mapping[str | None, int],
    ) -> Signature:
        """The signature of ``query`` under the given label values (lines 3-12).

        >>> from graphcep.patterns.ddst import DDSTBuilder
        >>> q = DDSTBuilder().vertex("A", "M").vertex("B").edge("x", "A", "B", "x") \\
        ...     .within(1, "s").build()
        >>> Signature.of(q, 17, {"M": 9, None: 3}, {"x": 16}).factors
        (5, 8, 4)
        """
        if not _is_prime(p) or p >= 2**31:
            raise ValueError(f"p must be a prime below 2**31, not {p}")
        keys = query_keys(query)
        factors = [key_factor(k, r_vertex, r_edge, p) for k in keys]
        words, where = pack_words(factors)
        return cls(p, dict(r_vertex), dict(r_edge), tuple(keys), tuple(factors),
                   tuple(where), words)  # fmt: skip

    @classmethod
    def random(cls, query: DDSTQuery, p: int = DEFAULT_P, seed: int = 0) -> Signature:
        """Line 2: a random value in ``[0, p)`` per vertex label and per edge label."""
        rng = np.random.default_rng(seed)
        vlabels = _sorted_labels(v.label for v in query.vertices)
        elabels = _sorted_labels(e.label for e in query.edges)
        r_vertex = {lab: int(rng.integers(0, p)) for lab in vlabels}
        r_edge = {lab: int(rng.integers(0, p)) for lab in elabels}
        return cls.of(query, p, r_vertex, r_edge)

    @property
    def sigma(self) -> int:
        """The whole signature ``σ̂``: the product of the words."""
        return math.prod(self.words)

    def edge_keys(self) -> list[tuple[int, Key]]:
        """``(index, key)`` of the edge keys."""
        return [(i, k) for i, k in enumerate(self.keys) if k[0] == "edge"]

    def vertex_labels(self) -> list[str | None]:
        """The degree keys' vertex labels, in first-seen order."""
        return list(dict.fromkeys(k[1] for k in self.keys if k[0] != "edge"))

    def tables(self) -> tuple[np.ndarray, ...]:
        """The signature as the arrays the online kernel reads (see :func:`_insert`)."""
        words = np.array(self.words, dtype=np.uint64)
        edges = self.edge_keys()
        ek_factor = np.array([self.factors[i] for i, _ in edges], dtype=np.uint64)
        ek_word = np.array([self.word_of[i] for i, _ in edges], dtype=np.int64)
        return (words, ek_factor, ek_word, *self._degree_table("out"),
                *self._degree_table("in"))  # fmt: skip

    def _degree_table(self, direction: str) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per vertex label and degree ``i``: factor, word; and the largest ``i`` per label."""
        labels = self.vertex_labels()
        mine = [(i, k) for i, k in enumerate(self.keys) if k[0] == direction]
        top = max((k[2] for _, k in mine), default=0)
        factor = np.ones((len(labels), top + 1), dtype=np.uint64)
        word = np.zeros((len(labels), top + 1), dtype=np.int64)
        most = np.zeros(len(labels), dtype=np.int64)
        for i, (_, lab, deg) in mine:
            row = labels.index(lab)
            factor[row, deg], word[row, deg] = self.factors[i], self.word_of[i]
            most[row] = max(most[row], deg)
        return factor, word, most


def stream_residues(
    words: Sequence[int],
    edges: Iterable[Mapping[str, Any]],
    r_vertex: Mapping[str | None, int],
    r_edge: Mapping[str | None, int],
    p: int,
) -> list[tuple[int, ...]]:
    """Lines 1-7 of the online part, literally: the residues ``s[0..c]`` after each edge.

    Every edge multiplies its own edge factor and the degree factors of its endpoints
    (``outNum``, ``inNum``: degrees so far, this edge included) into every word; there
    is no window, no resume and no verification. Edges are mappings with ``src``,
    ``dst``, ``label``, ``src_label``, ``dst_label``. This is the paper's Example 6
    computation; the engine's own residues differ (module docstring, points 1-6).

    >>> stream_residues([72800], [dict(src=0, dst=2, label="2", src_label="0",
    ...     dst_label="2")], {"0": 9, "2": 14}, {"2": 7}, 17)
    [(240,)]
    """
    s = [1 % w for w in words]
    out_num: Counter[Any] = Counter()
    in_num: Counter[Any] = Counter()
    trace = []
    for e in edges:
        u, v = (e["src"], e["src_label"]), (e["dst"], e["dst_label"])
        out_num[u] += 1
        in_num[v] += 1
        ru, rv = r_vertex[e["src_label"]], r_vertex[e["dst_label"]]
        factors = (
            edge_factor(ru, rv, r_edge[e["label"]], p),
            degree_factor(ru, out_num[u], p, incoming=False),
            degree_factor(rv, in_num[v], p, incoming=True),
        )
        s = [x * math.prod(factors) % w for x, w in zip(s, words, strict=True)]
        trace.append(tuple(s))
    return trace


# -- the online kernel ----------------------------------------------------------------
#
# Arrays: ``qt`` the signature tables (Signature.tables); ``edges`` per window edge its
# source and destination vertex numbers, which edge keys it fits and whether it fits any;
# ``verts`` per vertex number which vertex labels of the query fit it, then the group
# structure: epoch (a vertex of an older epoch counts as untouched, so a rebuild is O(1)
# before re-adding the window), union-find parent and size, candidate out-/in-degree,
# the group's oldest edge position and its residues; ``ctl`` epoch, edges held, the hold
# limit that triggers a rebuild, the number of rebuilds, and the slack of the limit.


@nb.njit(cache=True, nogil=True)
def _touch(x, verts, words, epoch_now):
    """Reset vertex ``x`` if it was last touched before the current epoch."""
    _, epoch, parent, size, outc, inc, oldest, res = verts
    if epoch[x] != epoch_now:
        epoch[x], parent[x], size[x], outc[x], inc[x] = epoch_now, x, 1, 0, 0
        oldest[x] = _NEVER
        for w in range(words.shape[0]):
            res[x, w] = np.uint64(1) % words[w]


@nb.njit(cache=True, nogil=True)
def _find(parent, x):
    while parent[x] != x:
        parent[x] = parent[parent[x]]
        x = parent[x]
    return x


@nb.njit(cache=True, nogil=True)
def _union(a, b, verts, words):
    """Merge the groups of ``a`` and ``b``: residues multiply word by word."""
    _, _, parent, size, _, _, oldest, res = verts
    ra, rb = _find(parent, a), _find(parent, b)
    if ra == rb:
        return ra
    if size[ra] < size[rb]:
        ra, rb = rb, ra
    parent[rb] = ra
    size[ra] += size[rb]
    oldest[ra] = min(oldest[ra], oldest[rb])
    for w in range(words.shape[0]):
        res[ra, w] = res[ra, w] * res[rb, w] % words[w]
    return ra


@nb.njit(cache=True, nogil=True)
def _degree(x, count, vfit, factor, word, most, res, root, words):
    """Multiply the degree factors for ``x`` reaching degree ``count``, per fitting label."""
    for lab in range(most.shape[0]):
        if vfit[x, lab] and count <= most[lab]:
            w = word[lab, count]
            res[root, w] = res[root, w] * factor[lab, count] % words[w]


@nb.njit(cache=True, nogil=True)
def _insert(i, position, qt, edges, verts, ctl):
    """Add candidate edge ``i`` (at absolute ``position``); return its group's root."""
    words, ek_factor, ek_word, out_f, out_w, out_most, in_f, in_w, in_most = qt
    src, dst, fit, _ = edges
    vfit, _, _, _, outc, inc, oldest, res = verts
    a, b = src[i], dst[i]
    _touch(a, verts, words, ctl[0])
    _touch(b, verts, words, ctl[0])
    root = _union(a, b, verts, words)
    oldest[root] = min(oldest[root], position)
    for k in range(ek_factor.shape[0]):
        if fit[i, k]:
            w = ek_word[k]
            res[root, w] = res[root, w] * ek_factor[k] % words[w]
    outc[a] += 1
    _degree(a, outc[a], vfit, out_f, out_w, out_most, res, root, words)
    inc[b] += 1
    _degree(b, inc[b], vfit, in_f, in_w, in_most, res, root, words)
    ctl[1] += 1
    return root


@nb.njit(cache=True, nogil=True)
def _complete(res, root):
    """A signature match: every residue of the group is 0."""
    for w in range(res.shape[1]):  # noqa: SIM110 -- a plain loop: no allocation in numba
        if res[root, w] != 0:
            return False
    return True


@nb.njit(cache=True, nogil=True)
def _rebuild(lo, hi, offset, qt, edges, verts, ctl):
    """Line 10: recompute the groups from the window ``lo..hi`` (window positions)."""
    ctl[0] += 1
    ctl[1] = 0
    ctl[3] += 1
    cand = edges[3]
    for i in range(lo, hi + 1):
        if cand[i]:
            _insert(i, offset + i, qt, edges, verts, ctl)
    ctl[2] = 2 * ctl[1] + ctl[4]


@nb.njit(cache=True, nogil=True)
def _feed(start, stop, base, lo, offset, last, qt, edges, verts, ctl):
    """Add edges ``start..stop-1``; stop at the first one that fits a last query edge
    (``last``) and whose exact group has a signature match, and return its position (-1:
    none). ``lo[j - base]`` is edge ``j``'s window start.
    """
    src, _, _, cand = edges
    parent, oldest, res = verts[2], verts[6], verts[7]
    for j in range(start, stop):
        if not cand[j]:
            continue
        root = _insert(j, offset + j, qt, edges, verts, ctl)
        first = lo[j - base]
        if last[j] and _complete(res, root):
            if oldest[root] >= offset + first:
                return j
            _rebuild(first, j, offset, qt, edges, verts, ctl)  # stale: test the exact one
            if _complete(res, _find(parent, src[j])):
                return j
        elif ctl[1] > ctl[2]:
            _rebuild(first, j, offset, qt, edges, verts, ctl)
    return -1


@nb.njit(cache=True, nogil=True)
def _group_edges(lo, hi, src, cand, parent):
    """Positions ``lo..hi`` of the candidate edges in the group of edge ``hi``."""
    root = _find(parent, src[hi])
    keep = np.zeros(hi - lo + 1, dtype=np.bool_)
    for i in range(lo, hi + 1):
        keep[i - lo] = cand[i] and _find(parent, src[i]) == root
    return np.flatnonzero(keep) + lo


# -- the engine ---------------------------------------------------------------------------


class DDSTSignatureEngine(DDSTBaselineEngine):
    """Online DDST matching with Algorithm DDST-SIGNATURE: verify only on signature matches.

    Parameters
    ----------
    query : DDSTQuery
        The event pattern (query graph, timing order, window).
    p : int
        The prime modulus of the factors (below ``2**31``). Small values make signature
        matches by chance frequent -- the result stays exact, only slower.
    seed : int
        Seed of the random label values.
    signature : Signature, optional
        A signature of ``query`` with chosen label values; overrides ``p`` and ``seed``.
    max_window_edges : int
        State bound: a window holding more edges raises :class:`StateBoundError`.
    report : str
        ``"component"`` or ``"new"``, as :class:`~graphcep.engines.ddst.baseline.DDSTBaselineEngine`.

    Notes
    -----
    The engine protocol of :mod:`graphcep.engines.base`; output in
    :data:`DDST_MATCH_SCHEMA`, identical to :class:`DDSTBaselineEngine`'s. Counters:
    ``verifications`` (Algorithm DDST runs) and ``rebuilds`` (group recomputations).
    """

    #: Edges the group structure may hold beyond twice the window's before it is rebuilt;
    #: vertices are renumbered from the window once there are more than four numbers per
    #: window edge plus four times this.
    _slack = 1024

    def __init__(
        self,
        query: DDSTQuery,
        *,
        p: int = DEFAULT_P,
        seed: int = 0,
        signature: Signature | None = None,
        max_window_edges: int = 1_000_000,
        report: str = "component",
    ) -> None:
        super().__init__(query, max_window_edges=max_window_edges, report=report)
        sig = signature if signature is not None else Signature.random(query, p, seed)
        if sig.keys != tuple(query_keys(query)):
            raise ValueError("the signature was computed for another query graph")
        self.signature, self.p, self.seed = sig, sig.p, seed
        self._qt = sig.tables()
        self._vlabels = sig.vertex_labels()
        self._ekeys = [k for _, k in sig.edge_keys()]
        q = self._q
        # the candidates of a verification are read from the fits kept per window edge and
        # per vertex (no label comparisons): each query edge's key, each query vertex's label
        edge_keys = query_keys(query, distinct=False)[: len(q.enames)]  # one per query edge
        self._key_of_edge = np.array([self._ekeys.index(k) for k in edge_keys], dtype=np.int64)
        self._label_of_vertex = np.array([self._vlabels.index(lab) for lab in q.vlabels],
                                         dtype=np.int64)  # fmt: skip
        # the query edges an arrival must fit to be reportable (point 9)
        self._last_keys = [(q.vlabels[q.qsrc[j]], q.elabels[j], q.vlabels[q.qdst[j]])
                           for j in range(len(q.enames)) if not q.post[j]]  # fmt: skip
        self.verifications = 0
        self._part_graphs = PartGraphs()
        self._ctl = np.array([0, 0, self._slack, 0, self._slack], dtype=np.int64)
        self._resync()

    # -- protocol -----------------------------------------------------------------------

    def _report(self, new: dict[str, np.ndarray], reports: Reports,
                chunk_rows: int | None) -> Iterator[pa.Table]:
        """The baseline's reports of the new edges, from the windows the signatures pick."""
        self._check_order(new["t"], new["seq"])
        if self._dirty or len(self._vid) > 4 * (len(self._cols["t"]) + self._slack):
            self._resync()  # after a failed push, a restore, or to forget old vertices
        base = len(self._cols["t"])
        self._cols = {k: np.concatenate([self._cols[k], new[k]]) for k in self._cols}
        self._append(new)
        lo = self._window_starts(base)
        self._check_bound(base, lo)
        yield from self._scan(base, lo, reports, chunk_rows)

    @property
    def rebuilds(self) -> int:
        """How many times the groups were recomputed from a window."""
        return int(self._ctl[3])

    def describe(self) -> str:
        return ("each edge that fits a query edge updates its candidate group's label "
                "residues mod p; Algorithm DDST runs on the group only when the edge fits a "
                "last query edge of the timing order and the residues match the query's "
                "signature")

    def state(self) -> dict:
        return {
            "query": self.query,
            "options": {
                "max_window_edges": self.max_window_edges,
                "signature": self.signature,
                "seed": self.seed,
                "report": self.report,
            },
            "cols": self._cols,
            "verifications": self.verifications,
            "reported": self._reported,
        }

    @classmethod
    def from_state(cls, state: dict) -> DDSTSignatureEngine:
        engine = cls(state["query"], **state["options"])
        engine._cols = state["cols"]
        engine.verifications = state["verifications"]
        engine._reported = state["reported"]
        engine._dirty = True  # the groups are recomputed from the window at the next push
        return engine

    def residues(self, vertex: str, label: str | None = None) -> tuple[int, ...] | None:
        """The residues ``s[0..c]`` of the group holding stream vertex ``(vertex, label)``
        (``None`` if it has no candidate edge since the last rebuild)."""
        x = self._vid.get((vertex, label))
        if self._dirty or x is None or self._epoch[x] != self._ctl[0]:
            return None
        root = _find(self._parent, x)
        return tuple(int(r) for r in self._res[root])

    # -- internals ----------------------------------------------------------------------

    def _scan(self, base: int, lo: np.ndarray, reports: Reports,
              chunk_rows: int | None) -> Iterator[pa.Table]:
        """Feed the new edges to the kernel; verify each signature match with DDST,
        handing out the reports each time they fill a chunk."""
        start, stop = base, len(self._cols["t"])
        while start < stop:
            hit = _feed(start, stop, base, lo, self._offset, self._may_trigger, self._qt, self._edges(),
                        self._verts(), self._ctl)  # fmt: skip
            if hit < 0:
                break
            self.verifications += 1
            self._verify(hit, int(lo[hit - base]), reports)
            if reports.full(chunk_rows):
                yield reports.take()
            start = hit + 1

    def _verify(self, k: int, lo: int, reports: Reports) -> None:
        """Line 9: Algorithm DDST on the candidate component of edge ``k`` in its window
        ``lo..k``; its report, if any.

        This is the baseline's ``_evaluate`` (which runs DDST on that component only: the
        maximal match graph decomposes over candidate components) with the component
        taken from the groups -- exact here, ``_feed`` returns only exact ones -- instead
        of numbering the whole window's vertices first, which costs more than DDST.
        """
        part = _group_edges(lo, k, self._src, self._cand, self._parent)
        g, vertices = self._part_graph(part)
        # the baseline's label_compat, from the fits: a vertex's label fits a query vertex's; an
        # edge's key (its label and its ends' labels) fits a query edge's
        vc = self._vfit[np.ix_(vertices, self._label_of_vertex)].T
        ec = self._fit[np.ix_(part, self._key_of_edge)].T
        sim, se = run_ddst(self._q, g, vc, ec)
        at = len(part) - 1  # edge k, the newest
        if not se[:, at].any():
            return
        w = self.query.window
        opened = int(g.t[at]) - w.size if w.kind == "time" else int(self._cols["t"][lo])
        reports.add(g, *component_of(g, sim, se, at), at, opened)

    def _part_graph(self, part: np.ndarray) -> tuple[WindowGraph, np.ndarray]:
        """The window edges at positions ``part`` as a window graph, and the engine's numbers
        of its vertices."""
        cols = self._cols
        return self._part_graphs.graph(self._src[part], self._dst[part], cols["t"][part],
                                       cols["seq"][part], cols["label"][part],
                                       self._vertex_names, self._vertex_labels)  # fmt: skip

    def _window_starts(self, base: int) -> np.ndarray:
        """The window start (a position in the window arrays) of each new edge."""
        w = self.query.window
        k = np.arange(base, len(self._cols["t"]), dtype=np.int64)
        if w.kind == "count":
            return np.maximum(0, k - w.size + 1)
        t = self._cols["t"]
        return np.searchsorted(t, t[base:] - w.size, side="left").astype(np.int64)

    def _check_bound(self, base: int, lo: np.ndarray) -> None:
        """Raise :class:`StateBoundError` where the baseline would: at the first new edge
        whose window is too large, with its message."""
        k = np.arange(base, len(self._cols["t"]))
        over = np.flatnonzero(k - lo + 1 > self.max_window_edges)
        if len(over):
            self._dirty = True
            self._check_window_size(int(k[over[0]] - lo[over[0]] + 1))

    def _evict(self, now_us: int) -> None:
        before = len(self._cols["t"])
        super()._evict(now_us)
        gone = before - len(self._cols["t"])
        if gone:
            self._src, self._dst = self._src[gone:], self._dst[gone:]
            self._fit, self._cand = self._fit[gone:], self._cand[gone:]
            self._may_trigger = self._may_trigger[gone:]
            self._offset += gone

    def _edges(self) -> tuple[np.ndarray, ...]:
        return self._src, self._dst, self._fit, self._cand

    def _verts(self) -> tuple[np.ndarray, ...]:
        return (self._vfit, self._epoch, self._parent, self._size, self._outc, self._inc,
                self._oldest, self._res)  # fmt: skip

    def _resync(self) -> None:
        """Number the window's vertices afresh and recompute the groups from it."""
        self._vid: dict[tuple[str, str | None], int] = {}
        self._offset = 0
        self._clear_vertices()
        self._ctl[1], self._ctl[2] = 0, self._slack
        self._src = self._dst = np.zeros(0, dtype=np.int64)
        self._fit, self._cand = np.zeros((0, len(self._ekeys)), dtype=bool), np.zeros(0, bool)
        self._may_trigger = np.zeros(0, bool)
        self._append(self._cols)
        if len(self._src):
            _rebuild(0, len(self._src) - 1, self._offset, self._qt, self._edges(), self._verts(),
                     self._ctl)  # fmt: skip
        self._dirty = False

    def _append(self, cols: Mapping[str, np.ndarray]) -> None:
        """Per-edge numbers of new window edges: vertex numbers and the edge keys fitted."""
        m = len(cols["t"])
        ends = self._intern(np.concatenate([cols["src"], cols["dst"]]),
                            np.concatenate([cols["src_label"], cols["dst_label"]]))  # fmt: skip
        fit = np.ones((m, len(self._ekeys)), dtype=bool)
        for k, (_, src_label, label, dst_label) in enumerate(self._ekeys):
            fit[:, k] = edge_fit(cols, src_label, label, dst_label)
        self._src = np.concatenate([self._src, ends[:m]])
        self._dst = np.concatenate([self._dst, ends[m:]])
        self._fit = np.concatenate([self._fit, fit])
        self._cand = np.concatenate([self._cand, fit.any(axis=1)])
        last = np.zeros(m, dtype=bool)
        for key in self._last_keys:
            last |= edge_fit(cols, *key)
        self._may_trigger = np.concatenate([self._may_trigger, last])

    def _intern(self, ids: np.ndarray, labels: np.ndarray) -> np.ndarray:
        """Vertex numbers of ``(id, label)`` pairs, numbering new ones (a dictionary look-up
        per distinct pair, not per edge)."""
        pair_code, names, pair_labels = number_vertices(ids, labels)
        labs = pair_labels.tolist()
        before, table = len(self._vid), self._vid
        number = np.fromiter(
            (table.setdefault(key, len(table)) for key in zip(names.tolist(), labs, strict=True)),
            dtype=np.int64,
            count=len(names),
        )
        if len(table) > before:
            new = number >= before  # numbered in this order: before, before + 1, ...
            self._add_vertices(names[new], pair_labels[new])
        return number[pair_code]

    def _add_vertices(self, names: np.ndarray, labels: np.ndarray) -> None:
        """Room, ids, labels and label fits for new vertices (numbered in order, after the
        others)."""
        old = len(self._vid) - len(labels)
        self._grow(len(self._vid))
        self._vertex_names[old : len(self._vid)] = names
        self._vertex_labels[old : len(self._vid)] = labels
        for row, lab in enumerate(self._vlabels):
            self._vfit[old : len(self._vid), row] = label_fit(lab, labels)

    def _clear_vertices(self) -> None:
        """No vertex arrays yet (:meth:`_grow` makes room)."""
        self._vfit = np.zeros((0, len(self._vlabels)), dtype=bool)
        self._res = np.zeros((0, len(self.signature.words)), dtype=np.uint64)
        self._vertex_names = self._vertex_labels = np.empty(0, dtype=object)
        for name in _VERTEX_ARRAYS:
            setattr(self, name, np.zeros(0, dtype=np.int64))

    def _grow(self, n: int) -> None:
        """Room for ``n`` vertices, doubling; a new vertex has epoch -1: never touched."""
        had = len(self._epoch)
        if n <= had:
            return
        size = max(n, 2 * had)

        def grown(old: np.ndarray, fill: int) -> np.ndarray:
            out = np.full((size, *old.shape[1:]), fill, dtype=old.dtype)
            out[:had] = old
            return out

        self._vfit, self._res = grown(self._vfit, 0), grown(self._res, 0)
        self._vertex_names = grown(self._vertex_names, None)
        self._vertex_labels = grown(self._vertex_labels, None)
        self._epoch = grown(self._epoch, -1)
        for name in _VERTEX_ARRAYS[1:]:
            setattr(self, name, grown(getattr(self, name), 0))
