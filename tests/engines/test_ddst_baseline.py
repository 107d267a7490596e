"""The baseline DDST engine: the paper's examples, the semantics, and a brute-force oracle."""

from __future__ import annotations

import pickle

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import graphcep.engines.ddst.common as common_module
import graphcep.engines.ddst.reports as reports_module
from graphcep.engines.base import OutOfOrderError, StateBoundError
from graphcep.engines.ddst.baseline import (
    DDST_MATCH_SCHEMA,
    DDSTBaselineEngine,
    ddst_match_graph,
    timing_filter,
)
from graphcep.engines.ddst.common import number_vertices
from graphcep.lang.ddst import parse_ddst
from graphcep.patterns.ddst import DDSTQuery, QueryEdge, QueryVertex, Window
from tests import ddst_oracle as oracle

S = 1_000_000  # microseconds per second


def test_vertices_are_id_and_label_pairs():
    """An id with two labels is two vertices, an unlabelled one a third; all label-less
    pairs (None) are one label, distinct from every string, the empty one included."""
    ids = np.array(["a", "b", "a", "a", "b", "a"], dtype=object)
    labels = np.array(["M", None, "M", None, "", None], dtype=object)
    number, names, vlabels = number_vertices(ids, labels)
    assert number.tolist() == [0, 1, 0, 2, 3, 2]
    assert list(zip(names.tolist(), vlabels.tolist(), strict=True)) == [
        ("a", "M"), ("b", None), ("a", None), ("b", "")]
    number, names, vlabels = number_vertices(ids[[1, 3]], labels[[1, 3]])  # no label at all
    assert number.tolist() == [0, 1] and vlabels.tolist() == [None, None]


def table(stream: list[dict]) -> pa.Table:
    """Edge dicts as an Arrow table in the edge schema with the three label columns."""
    cols = ("t", "seq", "src", "dst", "label", "src_label", "dst_label")
    types = (pa.int64(), pa.int64()) + (pa.string(),) * 5
    return pa.table(
        {c: pa.array([e.get(c) for e in stream], ty) for c, ty in zip(cols, types, strict=True)}
    )


def stream_of(rows: list[tuple], vlabel: str | None = None) -> list[dict]:
    """rows of (t_seconds, src, dst, edge_label); every vertex labelled ``vlabel``."""
    return [
        {"t": r[0] * S, "seq": i, "src": r[1], "dst": r[2], "label": r[3],
         "src_label": vlabel, "dst_label": vlabel}
        for i, r in enumerate(rows)
    ]  # fmt: skip


def reported(out: pa.Table) -> list[tuple[int, frozenset, frozenset]]:
    """Engine output as (trigger seq, S, Se as (qedge, seq)) triples."""
    return [
        (
            row["trigger_seq"],
            frozenset((v["qvar"], v["vertex"], v["label"]) for v in row["vertices"]),
            frozenset((e["qedge"], e["seq"]) for e in row["edges"]),
        )
        for row in out.to_pylist()
    ]


def run(query: DDSTQuery, stream: list[dict], batch: int | None = None) -> list:
    engine = DDSTBaselineEngine(query)
    step = batch or max(len(stream), 1)
    out = []
    for start in range(0, len(stream), step):
        out += reported(engine.push(table(stream[start : start + step])))
    return out


def times(stream: list[dict], pairs: frozenset) -> dict[str, list[int]]:
    """Se as query edge -> sorted matched times (seconds)."""
    by_seq = {e["seq"]: e["t"] // S for e in stream}
    out: dict[str, list[int]] = {}
    for q, seq in sorted(pairs):
        out.setdefault(q, []).append(by_seq[seq])
    return {q: sorted(v) for q, v in out.items()}


# -- the paper's Example 5 --------------------------------------------------------------

EXAMPLE_5 = parse_ddst("""
    QUERY spread;
    VERTICES A:M, B:M, C:M, D:M;
    EDGES
      AB: A -> B [congested];
      CA: C -> A [congested];
      DC: D -> C [congested];
    ORDER AB < CA < DC;
    WITHIN 200 s;
""")
# AB matches edges at 30, 40, 90; CA at 2, 45, 100; DC at 50, 95 -- one component.
EXAMPLE_5_STREAM = stream_of(
    sorted(
        [(t, "a", "b", "congested") for t in (30, 40, 90)]
        + [(t, "c", "a", "congested") for t in (2, 45, 100)]
        + [(t, "d", "c", "congested") for t in (50, 95)]
    ),
    "M",
)
EXAMPLE_5_RESULT = {"AB": [30, 40], "CA": [45], "DC": [50, 95]}


def test_example_5_timing_filter():
    got = timing_filter(
        {"AB": [30, 40, 90], "CA": [2, 45, 100], "DC": [50, 95]}, [("AB", "CA"), ("CA", "DC")]
    )
    assert got == EXAMPLE_5_RESULT


def test_timing_filter_generators_equal_closure_and_rejects_cycles():
    cands = {"AB": [30, 40, 90], "CA": [2, 45, 100], "DC": [50, 95]}
    closed = [("AB", "CA"), ("CA", "DC"), ("AB", "DC")]
    assert timing_filter(cands, closed) == EXAMPLE_5_RESULT
    assert timing_filter(cands, []) == cands
    assert timing_filter({"x": [5], "y": [5]}, [("x", "y")]) == {"x": [], "y": []}
    with pytest.raises(ValueError, match="cycle: CA < AB < CA"):
        timing_filter(cands, [("AB", "CA"), ("CA", "AB")])
    with pytest.raises(ValueError, match="unknown"):
        timing_filter(cands, [("AB", "ZZ")])


def test_example_5_whole_window():
    graph = ddst_match_graph(EXAMPLE_5, table(EXAMPLE_5_STREAM))
    assert times(EXAMPLE_5_STREAM, graph.edge_pairs()) == EXAMPLE_5_RESULT
    assert graph.vertex_pairs() == {("A", "a", "M"), ("B", "b", "M"), ("C", "c", "M"),
                                    ("D", "d", "M")}  # fmt: skip
    assert oracle.match_graph(EXAMPLE_5, EXAMPLE_5_STREAM)[1] == graph.edge_pairs()


def test_example_5_through_the_engine():
    engine = DDSTBaselineEngine(EXAMPLE_5)
    out = engine.push(table(EXAMPLE_5_STREAM))
    assert out.schema == DDST_MATCH_SCHEMA
    got = reported(out)
    # first complete at DC's 50; the edge at 90 (AB) and at 100 (CA) are filtered away by
    # timing, so they report nothing; DC's 95 reports Example 5's result.
    assert [trigger for trigger, _, _ in got] == [4, 6]
    assert times(EXAMPLE_5_STREAM, got[0][2]) == {"AB": [30, 40], "CA": [45], "DC": [50]}
    assert times(EXAMPLE_5_STREAM, got[1][2]) == EXAMPLE_5_RESULT
    assert times(EXAMPLE_5_STREAM, engine.window_match_graph().edge_pairs()) == EXAMPLE_5_RESULT
    row = out.to_pylist()[1]
    assert (row["window_start"], row["window_end"], row["first_t"]) == (-105 * S, 95 * S, 30 * S)
    assert [e["qedge"] for e in row["edges"]] == ["AB", "AB", "CA", "DC", "DC"]
    assert got == oracle.reports(EXAMPLE_5, EXAMPLE_5_STREAM)


# -- semantics ----------------------------------------------------------------------------

FIG_1 = parse_ddst("""
    VERTICES A:M, B:M, C:M, D:M, E:M, F:M;
    EDGES AB: A -> B [congested]; CA: C -> A [congested]; DC: D -> C [congested];
          EA: E -> A [congested]; FE: F -> E [congested];
    ORDER AB < CA < DC, AB < EA < FE;
    WITHIN 5 min;
""")


def test_degree_preservation_needs_both_branches():
    # Sec. 2: "without degree preservation, roads CA (DC) and EA (FE) could match to the
    # same road -- resulting in only one branch of congested roads".
    one_branch = stream_of([(1, "a", "b", "congested"), (2, "c", "a", "congested"),
                            (3, "d", "c", "congested")], "M")  # fmt: skip
    assert run(FIG_1, one_branch) == []
    both = one_branch + stream_of([(4, "e", "a", "congested"), (5, "f", "e", "congested")], "M")
    for i, e in enumerate(both):
        e["seq"] = i
    got = run(FIG_1, both)
    assert [g[0] for g in got] == [4]
    assert {(u, v) for u, v, _ in got[0][1]} == {
        ("A", "a"), ("B", "b"), ("C", "c"), ("C", "e"), ("D", "d"),
        ("D", "f"), ("E", "c"), ("E", "e"), ("F", "d"), ("F", "f"),
    }  # fmt: skip


def test_smooth_edges_and_minor_intersections_do_not_match():
    # Fig. 1(d): two "smooth" edges keep it from matching; at time 8, after two congested
    # edges arrive, it matches (Fig. 1(e)).
    rows = [(1, "a", "b", "congested"), (2, "c", "a", "congested"), (3, "d", "c", "smooth"),
            (4, "e", "a", "congested"), (5, "f", "e", "smooth")]  # fmt: skip
    assert run(FIG_1, stream_of(rows, "M")) == []
    rows += [(6, "d", "c", "congested"), (8, "f", "e", "congested")]
    assert [g[0] for g in run(FIG_1, stream_of(rows, "M"))] == [6]
    assert run(FIG_1, stream_of(rows, "S")) == []  # secondary intersections


def test_dual_simulation_lets_two_query_vertices_share_a_stream_vertex():
    # Fig. 3: two core vertices of the query both match one core person.
    q = parse_ddst("""VERTICES P:P, C1:C, C2:C;
        EDGES a: P -> C1 [L]; b: P -> C2 [L]; WITHIN 1 h;""")
    one_call = stream_of([(1, "p", "c", "L")])
    for e in one_call:
        e.update(src_label="P", dst_label="C")
    assert run(q, one_call) == []  # two out-edges of P need two distinct calls
    two_calls = stream_of([(1, "p", "c", "L"), (2, "p", "c", "L")])
    for e in two_calls:
        e.update(src_label="P", dst_label="C")
    [(trigger, s, se)] = run(q, two_calls)
    assert s == {("P", "p", "P"), ("C1", "c", "C"), ("C2", "c", "C")}
    assert se == {("a", 0), ("a", 1), ("b", 0), ("b", 1)}


def test_parallel_query_edges_need_distinct_stream_edges():
    q = parse_ddst("VERTICES C, P; EDGES s1: C -> P [S]; s2: C -> P [S]; WITHIN 10 s")
    assert run(q, stream_of([(1, "c", "p", "S")])) == []
    assert run(q, stream_of([(1, "c", "p", "S"), (2, "c", "x", "S")])) == []
    assert [g[0] for g in run(q, stream_of([(1, "c", "p", "S"), (2, "c", "p", "S")]))] == [1]


def test_unlabelled_stream_matches_only_wildcards():
    stream = [{"t": t, "seq": t, "src": "a", "dst": "b"} for t in range(3)]
    any_label = parse_ddst("VERTICES A, B:*; EDGES e: A -> B [*]; WITHIN 5 us")
    assert [g[0] for g in run(any_label, stream)] == [0, 1, 2]
    bare = pa.table({"t": [0, 1], "src": ["a", "a"], "dst": ["b", "b"]})
    assert DDSTBaselineEngine(any_label).push(bare).num_rows == 2
    for text in ("VERTICES A:x, B; EDGES e: A -> B; WITHIN 5 us",
                 "VERTICES A, B; EDGES e: A -> B [x]; WITHIN 5 us"):  # fmt: skip
        assert run(parse_ddst(text), stream) == []
        assert DDSTBaselineEngine(parse_ddst(text)).push(bare).num_rows == 0


def test_time_window_is_closed_at_both_ends():
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; WITHIN 10 s")
    inside = stream_of([(0, "a", "b", None), (10, "b", "a", None)])
    assert [g[0] for g in run(q, inside)] == [1]
    outside = [dict(e, t=e["t"] + (1 if e["seq"] else 0)) for e in inside]
    assert run(q, outside) == []


def test_count_window_holds_the_last_n_edges():
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; WITHIN 3 EDGES")
    rows = [(0, "a", "b", None), (1, "p", "q", None), (2, "b", "a", None)]
    assert [g[0] for g in run(q, stream_of(rows))] == [2]
    rows.insert(1, (0, "r", "s", None))
    assert run(q, stream_of(rows)) == []


def test_equal_times_are_unordered():
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; WITHIN 10 s")
    assert run(q, stream_of([(5, "a", "b", None), (5, "b", "a", None)])) == []
    free = parse_ddst("VERTICES A, B; EDGES x: A -> B; y: B -> A; WITHIN 10 s")
    assert [g[0] for g in run(free, stream_of([(5, "a", "b", None), (5, "b", "a", None)]))] == [1]


def test_reports_each_component_once_by_its_newest_edge():
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; WITHIN 10 s")
    rows = [(0, "a", "b", None), (1, "b", "a", None),  # a component, reported at 1
            (2, "c", "d", None),                       # unrelated: no report
            (3, "b", "a", None),                       # joins the component: reported again
            (11, "x", "y", None),                      # 0 expires: the component shrinks...
            (12, "d", "c", None)]  # fmt: skip
    got = run(q, stream_of(rows))
    assert [g[0] for g in got] == [1, 3, 5]  # ...and is not reported again
    assert got[1][2] == {("x", 0), ("y", 1), ("y", 3)}
    assert got[2][2] == {("x", 2), ("y", 5)}


LOOP = parse_ddst("VERTICES A, B; EDGES x: A -> B [x]; y: B -> A [y]; ORDER x < y; WITHIN 1 h")


def test_reports_only_the_component_of_the_newest_edge():
    # c->d / d->c and a->b / b->a are two match components joined by a candidate edge
    # b->c (it fits x by its label) that dual simulation removes.
    stream = stream_of([(1, "a", "b", "x"), (2, "c", "d", "x"), (3, "d", "c", "y"),
                        (4, "b", "c", "x"), (5, "b", "a", "y")])  # fmt: skip
    got = run(LOOP, stream)
    assert [(g[0], g[2]) for g in got] == [(2, {("x", 1), ("y", 2)}), (4, {("x", 0), ("y", 4)})]
    whole = ddst_match_graph(LOOP, table(stream))
    assert [c.edge_pairs() for c in whole.components()] == [{("x", 0), ("y", 4)},
                                                            {("x", 1), ("y", 2)}]  # fmt: skip
    assert got == oracle.reports(LOOP, stream)


def test_timing_witness_comes_from_the_same_component():
    # In c/d, y@3 precedes every x there; x@1 of the a/b component must not rescue it.
    stream = stream_of([(1, "a", "b", "x"), (3, "d", "c", "y"), (5, "c", "d", "x"),
                        (7, "b", "c", "x"), (10, "b", "a", "y"), (11, "d", "c", "y")])  # fmt: skip
    got = run(LOOP, stream)
    assert [(g[0], g[2]) for g in got] == [(4, {("x", 0), ("y", 4)}), (5, {("x", 2), ("y", 5)})]
    window = ddst_match_graph(LOOP, table(stream[:5]))
    assert window.edge_pairs() == {("x", 0), ("y", 4)}
    assert got == oracle.reports(LOOP, stream)


def test_a_vertex_is_an_id_with_the_label_an_edge_gives_it():
    q = parse_ddst("VERTICES A:M, B; EDGES x: A -> B [x]; WITHIN 10 s")
    stream = stream_of([(1, "a", "b", "x"), (2, "a", "c", "z")])
    stream[0]["src_label"], stream[1]["src_label"] = "S", "M"
    # a labelled M (edge 2) is not a labelled S (edge 1): edge 2 cannot relabel edge 1's
    # source -- if it could, window 2 would hold a match that no arriving edge reports
    assert not ddst_match_graph(q, table(stream))
    assert run(q, stream) == [] == oracle.reports(q, stream)
    stream[0]["src_label"] = "M"
    [(trigger, s, se)] = run(q, stream)
    assert (trigger, s, se) == (0, {("A", "a", "M"), ("B", "b", None)}, {("x", 0)})
    out = DDSTBaselineEngine(q).push(table(stream)).to_pylist()[0]
    assert out["vertices"] == [{"qvar": "A", "vertex": "a", "label": "M"},
                               {"qvar": "B", "vertex": "b", "label": None}]  # fmt: skip
    assert out["edges"] == [{"qedge": "x", "seq": 0, "t": 1 * S, "src": "a", "dst": "b",
                             "label": "x", "src_label": "M", "dst_label": None}]  # fmt: skip


def test_report_orders_vertex_pairs_by_query_vertex_then_id_then_label():
    """A report's vertex pairs: by query vertex, then stream id (code points), then the
    unlabelled vertex before the labelled ones, then label."""
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; WITHIN 10 s")
    rows = [(1, "b", "z", None, None), (2, "a", "z", "M", None), (3, "é", "z", None, None),
            (4, "a", "z", None, None), (5, "a", "z", "B", None), (6, "B", "z", None, None)]
    stream = [{"t": t * S, "seq": t, "src": s, "dst": d, "label": None, "src_label": sl,
               "dst_label": dl} for t, s, d, sl, dl in rows]  # fmt: skip
    out = DDSTBaselineEngine(q).push(table(stream)).to_pylist()[-1]
    got = [(v["qvar"], v["vertex"], v["label"]) for v in out["vertices"]]
    assert got == [("A", "B", None), ("A", "a", None), ("A", "a", "B"), ("A", "a", "M"),
                   ("A", "b", None), ("A", "é", None), ("B", "z", None)]  # fmt: skip


def test_report_orders_edge_pairs_by_time_then_seq_then_query_edge():
    """A report's edge pairs: stream order (t, then seq -- which need not grow with t),
    then query-edge order for a stream edge matching several query edges; reports of one
    push each in their own order."""
    q = parse_ddst("VERTICES A, B; EDGES y: A -> B; x: A -> B; WITHIN 10 s")
    rows = [(1, 9, "a", "b"), (2, 4, "a", "b"), (2, 7, "a", "b"), (3, 1, "c", "d"),
            (4, 0, "c", "d")]
    stream = [{"t": t * S, "seq": seq, "src": s, "dst": d, "label": None} for t, seq, s, d in rows]
    out = DDSTBaselineEngine(q).push(table(stream)).to_pylist()
    got = [[(e["t"] // S, e["seq"], e["qedge"]) for e in r["edges"]] for r in out]
    assert got == [
        [(1, 9, "y"), (1, 9, "x"), (2, 4, "y"), (2, 4, "x")],
        [(1, 9, "y"), (1, 9, "x"), (2, 4, "y"), (2, 4, "x"), (2, 7, "y"), (2, 7, "x")],
        [(3, 1, "y"), (3, 1, "x"), (4, 0, "y"), (4, 0, "x")],
    ]


@pytest.mark.parametrize("top", [7, 1 << 40])  # combined key; lexsort past 62 bits
def test_report_order_of_several_keys_is_lexicographic(top):
    rng = np.random.default_rng(5)
    rows = {(int(rng.integers(top)), int(rng.integers(4)), int(rng.integers(1 << 20)))
            for _ in range(500)}  # fmt: skip
    a, b, c = (np.array(col, dtype=np.int64) for col in zip(*rows, strict=True))
    order = reports_module._order(a, b, c)
    assert list(zip(a[order], b[order], c[order], strict=True)) == sorted(rows)


@pytest.mark.parametrize("size", [5, 2_000])  # a dict below _SMALL_FACTORIZE, pandas above
def test_factorize_numbers_values_by_first_appearance(size):
    rng = np.random.default_rng(size)
    values = np.empty(size, dtype=object)
    values[:] = [None if x == 0 else f"v{x}" for x in rng.integers(0, 7, size)]
    codes, distinct = reports_module._factorize(values)
    first = list(dict.fromkeys(v for v in values if v is not None))
    assert distinct.tolist() == first
    assert codes.tolist() == [-1 if v is None else first.index(v) for v in values]



def test_part_graphs_renumber_by_first_appearance():
    rng = np.random.default_rng(11)
    names = np.array([f"v{i}" for i in range(50)], dtype=object)
    labels = np.array([None if i % 3 else "M" for i in range(50)], dtype=object)
    parts = common_module.PartGraphs()
    for size in (0, 1, 40, 40):  # one numbering for every part: its scratch is reused
        src, dst = rng.integers(0, 50, size), rng.integers(0, 50, size)
        t = np.arange(size, dtype=np.int64)
        g, kept = parts.graph(src, dst, t, t, np.full(size, None), names, labels)
        first = list(dict.fromkeys([*src.tolist(), *dst.tolist()]))  # sources first
        assert kept.tolist() == first
        assert g.src.tolist() == [first.index(v) for v in src.tolist()]
        assert g.dst.tolist() == [first.index(v) for v in dst.tolist()]
        assert g.names.tolist() == [f"v{v}" for v in first]
        assert g.vlabel.tolist() == [labels[v] for v in first]
        assert (parts._scratch == -1).all()  # left ready for the next part


def test_inconsistent_labels_make_two_vertices():
    q = parse_ddst("VERTICES A:M, B; EDGES x: A -> B; y: B -> A; WITHIN 10 s")
    stream = stream_of([(1, "a", "b", None), (2, "b", "a", None)])
    stream[0]["src_label"], stream[1]["dst_label"] = "M", "S"
    assert run(q, stream) == [] == oracle.reports(q, stream)
    stream[1]["dst_label"] = "M"
    assert [g[0] for g in run(q, stream)] == [1]


def test_query_self_loop():
    q = parse_ddst("VERTICES A; EDGES l: A -> A [ping]; WITHIN 10 s")
    assert run(q, stream_of([(1, "a", "b", "ping")])) == []
    assert [g[0] for g in run(q, stream_of([(1, "a", "a", "ping")]))] == [0]


# -- engine protocol --------------------------------------------------------------------


def test_out_of_order_and_watermark():
    q = EXAMPLE_5
    engine = DDSTBaselineEngine(q)
    engine.push(table(EXAMPLE_5_STREAM[:3]))
    with pytest.raises(OutOfOrderError):
        engine.push(table(EXAMPLE_5_STREAM[1:2]))
    with pytest.raises(OutOfOrderError):
        engine.push(table([EXAMPLE_5_STREAM[5], EXAMPLE_5_STREAM[4]]))
    engine = DDSTBaselineEngine(q)
    engine.push(table(EXAMPLE_5_STREAM[:3]))
    assert engine.state_size()["edges"] == 3
    assert engine.advance(1_000 * S).num_rows == 0
    assert engine.state_size() == {"edges": 0, "vertices": 0, "partial_matches": 0}
    with pytest.raises(OutOfOrderError):
        engine.push(table(EXAMPLE_5_STREAM[3:4]))


def test_state_is_bounded_by_the_window():
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; WITHIN 2 EDGES")
    engine = DDSTBaselineEngine(q)
    engine.push(table(stream_of([(t, "a", "b", None) for t in range(10)])))
    assert engine.state_size()["edges"] == 1
    bounded = DDSTBaselineEngine(EXAMPLE_5, max_window_edges=3)
    with pytest.raises(StateBoundError, match="max_window_edges=3"):
        bounded.push(table(EXAMPLE_5_STREAM))


def test_snapshot_restore_and_batches():
    whole = run(EXAMPLE_5, EXAMPLE_5_STREAM)
    assert run(EXAMPLE_5, EXAMPLE_5_STREAM, batch=1) == whole
    engine = DDSTBaselineEngine(EXAMPLE_5)
    got = reported(engine.push(table(EXAMPLE_5_STREAM[:5])))
    blob = engine.snapshot()
    restored = DDSTBaselineEngine.restore(pickle.loads(pickle.dumps(blob)))
    got += reported(restored.push(table(EXAMPLE_5_STREAM[5:])))
    assert got == whole
    assert restored.edges_seen == len(EXAMPLE_5_STREAM) and restored.matches_found == 2


def test_seq_is_numbered_when_absent():
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; WITHIN 5 us")
    engine = DDSTBaselineEngine(q)
    first = engine.push(pa.table({"t": [0, 1], "src": ["a", "a"], "dst": ["b", "b"]}))
    second = engine.push(pa.table({"t": [2], "src": ["a"], "dst": ["b"]}))
    assert first.column("trigger_seq").to_pylist() == [0, 1]
    assert second.column("trigger_seq").to_pylist() == [2]
    assert engine.push(pa.table({"t": pa.array([], pa.int64()), "src": pa.array([], pa.string()),
                                 "dst": pa.array([], pa.string())})).num_rows == 0  # fmt: skip


# -- against the oracle ---------------------------------------------------------------------

VERTEX_LABELS = st.sampled_from([None, "M", "S"])
EDGE_LABELS = st.sampled_from([None, "x", "y"])


@st.composite
def queries(draw: st.DrawFn, max_vertices: int = 4) -> DDSTQuery:
    """Connected queries of 2-4 edges over 2-4 vertices, with a random acyclic order."""
    nv = draw(st.integers(2, max_vertices))
    ne = draw(st.integers(max(2, nv - 1), 4))
    ends = []
    for k in range(ne):  # the first nv-1 edges make a spanning tree: connected
        if k < nv - 1:
            a, b = draw(st.integers(0, k)), k + 1
            ends.append((a, b) if draw(st.booleans()) else (b, a))
        else:
            ends.append((draw(st.integers(0, nv - 1)), draw(st.integers(0, nv - 1))))
    vertices = tuple(QueryVertex(f"V{i}", draw(VERTEX_LABELS)) for i in range(nv))
    edges = tuple(QueryEdge(f"e{k}", f"V{a}", f"V{b}", draw(EDGE_LABELS))
                  for k, (a, b) in enumerate(ends))  # fmt: skip
    rank = draw(st.permutations(range(ne)))
    order = tuple(
        (f"e{a}", f"e{b}")
        for a in range(ne)
        for b in range(ne)
        if rank[a] < rank[b] and draw(st.integers(0, 2)) == 0
    )
    if draw(st.booleans()):
        window = Window("time", draw(st.sampled_from([0, 1, 2, 4, 8, 100])))
    else:
        window = Window("count", draw(st.integers(1, 12)))
    return DDSTQuery("q", vertices, edges, order, window)


@st.composite
def streams(
    draw: st.DrawFn, query: DDSTQuery | None = None, apart: bool = False, noise: int = 12
) -> list[dict]:
    """Up to 12 edges over up to 5 vertices, small times with ties, few labels.

    With a ``query``, up to two copies of it are planted first (query vertices mapped to
    stream vertices, not necessarily one-to-one, with the query's labels), so that matches,
    near misses and timing violations are common; up to ``noise`` random edges fill the
    rest. ``apart``: five vertices and two copies on disjoint vertices where they fit, so
    that a window often has several match components.
    """
    pool = "abcde"[: 5 if apart else draw(st.integers(2, 5))]
    stable = draw(st.booleans())  # one label per vertex, or labels that change
    fixed = {v: draw(VERTEX_LABELS) for v in pool}
    raw: list[tuple[str, str, str | None]] = []
    free = list(pool)
    for _ in range(draw(st.integers(2 if apart else 0, 2)) if query is not None else 0):
        if (apart or draw(st.booleans())) and len(free) >= len(query.vertices):
            picked = draw(st.permutations(free))[: len(query.vertices)]
            free = [v for v in free if v not in picked]
            where = {u.name: v for u, v in zip(query.vertices, picked, strict=False)}
        else:
            where = {u.name: draw(st.sampled_from(pool)) for u in query.vertices}
        for u in query.vertices:
            if u.label is not None and draw(st.integers(0, 4)):
                fixed[where[u.name]] = u.label
        for name in query.topological_order():
            e = query.edge(name)
            label = e.label if e.label is not None else draw(EDGE_LABELS)
            raw.append((where[e.src], where[e.dst], label))
    raw = raw[:12]
    in_order = draw(st.booleans())  # copies in timing order (times are sorted) or shuffled
    for _ in range(draw(st.integers(1 if not raw else 0, min(noise, 12 - len(raw))))):
        raw.append((draw(st.sampled_from(pool)), draw(st.sampled_from(pool)), draw(EDGE_LABELS)))
    if not in_order:
        raw = draw(st.permutations(raw))
    ts = sorted(draw(st.lists(st.integers(0, 10), min_size=len(raw), max_size=len(raw))))
    out = []
    for i, (t, (src, dst, label)) in enumerate(zip(ts, raw, strict=True)):
        sl = fixed[src] if stable else draw(VERTEX_LABELS)
        dl = fixed[dst] if stable else draw(VERTEX_LABELS)
        out.append({"t": t, "seq": 10 + i, "src": src, "dst": dst,
                    "label": label, "src_label": sl, "dst_label": dl})  # fmt: skip
    return out


def _graph_pairs(query: DDSTQuery, window: list[dict]) -> tuple[frozenset, frozenset]:
    graph = ddst_match_graph(query, table(window))
    return graph.vertex_pairs(), graph.edge_pairs()


@settings(max_examples=250, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_engine_equals_oracle_on_every_window(data):
    query = data.draw(queries(), "query")
    stream = data.draw(streams(query), "stream")
    split = data.draw(st.integers(0, len(stream)), "split")
    for window in oracle.windows(query, stream):
        assert _graph_pairs(query, window) == oracle.match_graph(query, window)
    engine = DDSTBaselineEngine(query)
    got = reported(engine.push(table(stream[:split])))
    engine = DDSTBaselineEngine.restore(engine.snapshot())
    got += reported(engine.push(table(stream[split:])))
    assert got == oracle.reports(query, stream)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_engine_equals_oracle_with_several_components(data):
    """Two-vertex queries on five vertices: copies on disjoint vertices, several components."""
    query = data.draw(queries(max_vertices=2), "query")
    stream = data.draw(streams(query, apart=True, noise=3), "stream")
    for window in oracle.windows(query, stream):
        assert _graph_pairs(query, window) == oracle.match_graph(query, window)
    assert reported(DDSTBaselineEngine(query).push(table(stream))) == oracle.reports(query, stream)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_reports_cover_every_window(data):
    """The reporting rule loses nothing: every component of every window's maximal match
    graph lies inside one component reported at that window or before (oracle only)."""
    query = data.draw(queries(max_vertices=data.draw(st.sampled_from([2, 4]))), "query")
    stream = data.draw(streams(query, apart=data.draw(st.booleans())), "stream")
    made = oracle.reports(query, stream)
    for window in oracle.windows(query, stream):
        newest = window[-1]["seq"]
        s, se = oracle.match_graph(query, window)
        for seq in {x for _, x in se}:
            cs, cse = oracle.component_of(window, (s, se), seq)
            assert any(t <= newest and cs <= rs and cse <= rse for t, rs, rse in made)


@settings(max_examples=60, deadline=None)
@given(stream=streams())
def test_example_5_query_equals_oracle(stream):
    q = DDSTQuery(
        "q",
        (QueryVertex("A", "M"), QueryVertex("B"), QueryVertex("C", "S")),
        (QueryEdge("AB", "A", "B", "x"), QueryEdge("CA", "C", "A"), QueryEdge("BC", "B", "C")),
        (("AB", "CA"), ("CA", "BC")),
        Window("time", 6),
    )
    assert reported(DDSTBaselineEngine(q).push(table(stream))) == oracle.reports(q, stream)
