"""A brute-force DDST checker written from Definitions 1-2 of "Event pattern matching over
graph streams" -- not from Algorithm DDST.

It knows nothing of the engine: no dual-simulation refinement, no timing graph, no
topological passes, no bipartite matching. For one window it computes the maximal match
graph ``(S, Se)`` in the most naive way:

1. start from every label-compatible vertex pair (Definition 1, condition 1) and every
   label-compatible edge pair whose endpoints are in ``S``;
2. delete any pair that breaks a condition, checked by plain enumeration:

   * a vertex pair ``(u, v)`` needs, for the out-edges of ``u``, pairwise distinct stream
     edges out of ``v`` paired with them in ``Se`` -- tried as every ordered choice
     (:func:`itertools.permutations`) -- and likewise for the in-edges (conditions 2b, 2c);
   * an edge pair ``(eq, e)`` needs its endpoints in ``S``, and a timing witness in its
     match component: one ``Se``-partner per query edge (``e`` for ``eq``) -- tried as
     every combination (:func:`itertools.product`) -- whose times satisfy every pair of
     the strict partial order ``≺`` (its transitive closure, computed here) pairwise:
     ``a ≺ b`` means ``t_a < t_b`` (Definition 2, condition 1);

3. repeat until nothing changes; then require every query vertex to have a match
   (condition 2a).

Why deleting violators gives *the* maximal match graph: each condition only asks for
something to exist in the relations (and in the component, which only grows with them),
so a pair that violates a condition in the current relations violates it in every smaller
one and is in no valid match graph; what is left when nothing changes satisfies every
condition. The window itself (Definition 2, condition 2) is the caller's: every window
of the stream is given here separately (:func:`windows`).

Edges are dicts with ``t`` (µs), ``seq``, ``src``, ``dst`` and optional ``label``,
``src_label``, ``dst_label`` (``None``: no label). A stream vertex is an id with the label
an edge gives it, ``(src, src_label)`` and ``(dst, dst_label)``: ``L`` is then a function
on vertices, as the definitions have it. ``S`` is returned as ``(query vertex, id, label)``
triples, ``Se`` as ``(query edge, seq)`` pairs.
"""

from __future__ import annotations

from itertools import permutations, product

from graphcep.patterns.ddst import DDSTQuery

Vertex = tuple[str, str | None]
VertexPairs = frozenset[tuple[str, str, str | None]]
EdgePairs = frozenset[tuple[str, int]]


def ends(edge: dict) -> dict[str, Vertex]:
    """The stream vertices an edge joins, by end."""
    return {
        "src": (edge["src"], edge.get("src_label")),
        "dst": (edge["dst"], edge.get("dst_label")),
    }


def fits(wanted: str | None, given: str | None) -> bool:
    """A query label (``None``: any) against a stream label."""
    return wanted is None or wanted == given


def strict_order(query: DDSTQuery) -> set[tuple[str, str]]:
    """The transitive closure of the query's timing-order pairs (naively)."""
    pairs = set(query.order)
    while True:
        more = {(a, d) for a, b in pairs for c, d in pairs if b == c} - pairs
        if not more:
            return pairs
        pairs |= more


def components(edges: dict[int, dict], se: set[tuple[str, int]]) -> dict[int, int]:
    """Match component of each matched edge: the smallest seq reachable through shared vertices."""
    matched = sorted({s for _, s in se})
    comp = {s: s for s in matched}
    changed = True
    while changed:
        changed = False
        for a in matched:
            for b in matched:
                ends_a = set(ends(edges[a]).values())
                if comp[b] < comp[a] and ends_a & set(ends(edges[b]).values()):
                    comp[a] = comp[b]
                    changed = True
    return comp


def degree_ok(query: DDSTQuery, edges: dict[int, dict], se: set, u: str, v: Vertex) -> bool:
    """Conditions 2b and 2c for ``(u, v)``: distinct matching edges for u's out- and in-edges."""
    for end in ("src", "dst"):  # out-edges of u at v, then in-edges
        mine = [q.name for q in query.edges if getattr(q, end) == u]
        at_v = [s for s, e in edges.items() if ends(e)[end] == v]
        if mine and not any(
            all((q, s) in se for q, s in zip(mine, choice, strict=True))
            for choice in permutations(at_v, len(mine))
        ):
            return False
    return True


def timing_ok(
    query: DDSTQuery,
    order: set[tuple[str, str]],
    edges: dict[int, dict],
    se: set,
    comp: dict[int, int],
    eq: str,
    seq: int,
) -> bool:
    """Definition 2(1): partners in ``seq``'s component, one per query edge, that obey ``order``."""
    names = [q.name for q in query.edges]
    options = [
        [seq] if name == eq else [s for q, s in se if q == name and comp[s] == comp[seq]]
        for name in names
    ]
    for choice in product(*options):
        t = {name: edges[s]["t"] for name, s in zip(names, choice, strict=True)}
        if all(t[a] < t[b] for a, b in order):
            return True
    return False


def match_graph(query: DDSTQuery, window: list[dict]) -> tuple[VertexPairs, EdgePairs]:
    """The maximal DDST match graph of one window: ``(S, Se)`` with ``Se`` as (qedge, seq)."""
    edges = {e["seq"]: e for e in window}
    order = strict_order(query)
    vertices = {v for e in window for v in ends(e).values()}
    s = {(u.name, v) for u in query.vertices for v in vertices if fits(u.label, v[1])}
    se = {
        (q.name, e["seq"])
        for q in query.edges
        for e in window
        if fits(q.label, e.get("label"))
        and (q.src, ends(e)["src"]) in s
        and (q.dst, ends(e)["dst"]) in s
    }
    while True:
        comp = components(edges, se)
        s_next = {(u, v) for u, v in s if degree_ok(query, edges, se, u, v)}
        src_dst = {q.name: (q.src, q.dst) for q in query.edges}
        se_next = {
            (q, x)
            for q, x in se
            if (src_dst[q][0], ends(edges[x])["src"]) in s_next
            and (src_dst[q][1], ends(edges[x])["dst"]) in s_next
            and timing_ok(query, order, edges, se, comp, q, x)
        }
        if s_next == s and se_next == se:
            break
        s, se = s_next, se_next
    if any(all(u.name != a for a, _ in s) for u in query.vertices):
        return frozenset(), frozenset()
    return frozenset((u, v, lab) for u, (v, lab) in s), frozenset(se)


def windows(query: DDSTQuery, stream: list[dict]) -> list[list[dict]]:
    """The window ending at each edge of a stream (in stream order)."""
    out = []
    for k, e in enumerate(stream):
        if query.window.kind == "count":
            out.append(stream[max(0, k - query.window.size + 1) : k + 1])
        else:
            out.append([x for x in stream[: k + 1] if x["t"] >= e["t"] - query.window.size])
    return out


def component_of(
    window: list[dict], graph: tuple[VertexPairs, EdgePairs], seq: int
) -> tuple[VertexPairs, EdgePairs]:
    """The match component of ``graph`` holding stream edge ``seq`` (empty if none)."""
    s, se = graph
    if not any(x == seq for _, x in se):
        return frozenset(), frozenset()
    edges = {e["seq"]: e for e in window}
    comp = components(edges, set(se))
    mine = {x for _, x in se if comp[x] == comp[seq]}
    vertices = {v for x in mine for v in ends(edges[x]).values()}
    return (
        frozenset((u, v, lab) for u, v, lab in s if (v, lab) in vertices),
        frozenset((q, x) for q, x in se if x in mine),
    )


def reports(query: DDSTQuery, stream: list[dict]) -> list[tuple[int, VertexPairs, EdgePairs]]:
    """What the engine must report: per window, the component holding its newest edge."""
    out = []
    for window in windows(query, stream):
        newest = window[-1]["seq"]
        s, se = component_of(window, match_graph(query, window), newest)
        if se:
            out.append((newest, s, se))
    return out
