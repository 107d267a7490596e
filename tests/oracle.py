"""An independent brute-force temporal subgraph matcher, written from the definitions.

It knows nothing of the engine: it tries every assignment of distinct stream edges to the
query's edges (pruned only by endpoint consistency: a query edge whose endpoint is bound
already looks only at the stream edges leaving or entering that vertex) and evaluates
each constraint exactly with fractions. Used as the oracle in tests.
"""

from __future__ import annotations

from fractions import Fraction

from graphcep.patterns.subgraph import SubgraphQuery

US = 1_000_000


def _value(edge: dict, kind: str) -> int:
    return edge["t"] if kind == "start" else edge["t"] + edge.get("dur", 0)


def _holds(lhs: Fraction, op: str, rhs: Fraction) -> bool:
    return {
        "<": lhs < rhs,
        "<=": lhs <= rhs,
        ">": lhs > rhs,
        ">=": lhs >= rhs,
        "=": lhs == rhs,
    }[op]


def brute_force_matches(
    query: SubgraphQuery, edges: list[dict], homomorphic: bool = False
) -> set[tuple[int, ...]]:
    """All matches as tuples of edge ``seq`` values in query-edge order.

    ``edges`` are dicts with ``t`` (µs), ``src``, ``dst``, optional ``dur`` (µs), ``seq``
    and attribute keys used by the query's predicates.
    """
    qedges = query.edges
    found: set[tuple[int, ...]] = set()
    leaving: dict[str, list[dict]] = {}
    entering: dict[str, list[dict]] = {}
    for e in edges:
        leaving.setdefault(e["src"], []).append(e)
        entering.setdefault(e["dst"], []).append(e)

    def candidates(qe, bind: dict[str, str]) -> list[dict]:
        """The stream edges whose ends agree with the query edge's bound endpoints."""
        if qe.src in bind:
            return leaving.get(bind[qe.src], [])
        if qe.dst in bind:
            return entering.get(bind[qe.dst], [])
        return edges

    def extend(i: int, chosen: list[dict], bind: dict[str, str]) -> None:
        if i == len(qedges):
            if _constraints_hold(query, chosen):
                found.add(tuple(e["seq"] for e in chosen))
            return
        qe = qedges[i]
        for e in candidates(qe, bind):
            if any(e is c for c in chosen):
                continue
            new_bind = dict(bind)
            ok = True
            for var, vertex in ((qe.src, e["src"]), (qe.dst, e["dst"])):
                if var in new_bind:
                    ok = ok and new_bind[var] == vertex
                else:
                    if not homomorphic and vertex in new_bind.values():
                        ok = False
                    new_bind[var] = vertex
            if ok and _predicates_hold(query, qe.name, e):
                extend(i + 1, [*chosen, e], new_bind)

    extend(0, [], {})
    return found


def _predicates_hold(query: SubgraphQuery, edge_name: str, edge: dict) -> bool:
    for p in query.edge_predicates:
        if p.edge != edge_name:
            continue
        v = edge.get(p.field)
        if v is None or not _compare(v, p.op, p.value):
            return False
    return True


def _compare(a, op: str, b) -> bool:
    return {
        "==": a == b,
        "!=": a != b,
        "<": a < b,
        "<=": a <= b,
        ">": a > b,
        ">=": a >= b,
    }[op]


def _constraints_hold(query: SubgraphQuery, chosen: list[dict]) -> bool:
    by_name = {qe.name: e for qe, e in zip(query.edges, chosen, strict=True)}
    for c in query.temporal:
        lhs = Fraction(_value(by_name[c.plus.edge], c.plus.kind))
        if c.minus is not None:
            lhs -= _value(by_name[c.minus.edge], c.minus.kind)
        if not _holds(lhs, c.op, c.bound_us):
            return False
    if query.window_us is not None:
        times = [e["t"] for e in chosen]
        if max(times) - min(times) > query.window_us:
            return False
    return True


def cycles_in_order(pairs: list[tuple[str, str]], length: int) -> int:
    """Temporal cycles of ``length`` edges (on distinct vertices) in a stream of ``pairs``
    whose edges all lie within the query's window, in strictly increasing times: for each
    directed cycle and each of its edges as the first, the subsequences of the stream
    that follow the cycle, counted by dynamic programming over the stream (a count the
    brute force above could not enumerate)."""
    from itertools import permutations

    total = 0
    vertices = sorted({v for pair in pairs for v in pair})
    for cycle in permutations(vertices, length):
        wanted = [(cycle[i], cycle[(i + 1) % length]) for i in range(length)]
        ways = [1] + [0] * length  # ways[i]: subsequences matching wanted[:i]
        for pair in pairs:
            for i in reversed(range(length)):
                if pair == wanted[i]:
                    ways[i + 1] += ways[i]
        total += ways[length]
    return total
