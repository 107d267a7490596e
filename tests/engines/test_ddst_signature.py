"""The DDST-SIGNATURE engine: the paper's Example 6 and Theorem 4, and exactness against the
baseline engine and the brute-force oracle."""

from __future__ import annotations

import itertools
import math
import pickle
import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.engines.base import OutOfOrderError, StateBoundError
from graphcep.engines.ddst.baseline import DDSTBaselineEngine
from graphcep.engines.ddst.signature import (
    WORD_BITS,
    DDSTSignatureEngine,
    Signature,
    key_factor,
    pack_words,
    query_keys,
    signature_word_bound,
    stream_residues,
)
from graphcep.lang.ddst import parse_ddst
from graphcep.patterns.ddst import DDSTQuery, QueryEdge, QueryVertex, Window
from tests import ddst_oracle as oracle
from tests.engines.test_ddst_baseline import (
    EXAMPLE_5,
    EXAMPLE_5_STREAM,
    queries,
    reported,
    stream_of,
    streams,
    table,
)

# -- the paper's Example 6 ------------------------------------------------------------------
#
# What the text gives: p = 17; the query's edge factors (9 - 3 + 16)(6 - 9 + 16)(9 - 14 + 7)
# = 130 and degree factors (9 + 1)(9 - 1)(9 - 2) = 560, sigma[0] = 72,800; vertex labels
# 0-3, edge labels 1 and 2; the stream (0, 2), (3, 2), (3, 0) labelled 2, (3, 0) labelled
# 1, (0, 1), where a number at a vertex is its label; the first residue
# (9 - 14 + 7)(9 - 1)(14 + 1) = 240, then 16,000, 12,000, 52,000 and 0, a true match.
# So r[vertex 0] = 9, r[vertex 2] = 14, and the values 3 and 6 (vertex labels 1 and 3) and
# 16 and 7 (edge labels 1 and 2) are to be placed; the query is A -> B, C -> A, A -> D with
# A labelled 0 (r = 9; in-degree 1, out-degree 2: the factors 10, 8, 7). The labels of
# three stream edges are not given. test_example_6_reconstruction searches all of it.

R_VERTEX = {"0": 9, "1": 3, "2": 14, "3": 6}
R_EDGE = {"1": 16, "2": 7}
EXAMPLE_6 = parse_ddst("""
    QUERY fig4;
    VERTICES A:0, B:1, C:3, D:2;
    EDGES AB: A -> B [1]; CA: C -> A [1]; AD: A -> D [2];
    WITHIN 10 EDGES;
""")


def example_6_stream(labels: tuple[str, str, str] = ("2", "2", "1")) -> list[dict]:
    """Fig. 4(b): a vertex's id is its label; ``labels`` of edges 1, 2 and 5 (not in the text)."""
    ends = [("0", "2"), ("3", "2"), ("3", "0"), ("3", "0"), ("0", "1")]
    edge_labels = [labels[0], labels[1], "2", "1", labels[2]]
    return [{"t": i, "seq": i, "src": s, "dst": d, "label": lab, "src_label": s, "dst_label": d}
            for i, ((s, d), lab) in enumerate(zip(ends, edge_labels, strict=True))]  # fmt: skip


EXAMPLE_6_RESIDUES = [240, 16_000, 12_000, 52_000, 0]


def test_example_6_query_signature():
    sig = Signature.of(EXAMPLE_6, 17, R_VERTEX, R_EDGE)
    factors = dict(zip(sig.keys, sig.factors, strict=True))
    edge_factors = [f for k, f in factors.items() if k[0] == "edge"]
    assert edge_factors == [5, 13, 2] and math.prod(edge_factors) == 130
    a_degrees = [factors[("in", "0", 1)], factors[("out", "0", 1)], factors[("out", "0", 2)]]
    assert a_degrees == [10, 8, 7] and math.prod(a_degrees) == 560
    assert pack_words([*edge_factors, *a_degrees]) == ((72_800,), [0] * 6)
    # The text stops at A's degree factors; lines 8-12 also multiply in B's in-degree
    # (3 + 1), C's out-degree (6 - 1) and D's in-degree (14 + 1): 300 more.
    rest = [factors[("in", "1", 1)], factors[("out", "3", 1)], factors[("in", "2", 1)]]
    assert rest == [4, 5, 15]
    assert sig.words == (72_800 * 300,) and sig.sigma == 21_840_000


def test_example_6_online_residues():
    got = stream_residues((72_800,), example_6_stream(), R_VERTEX, R_EDGE, 17)
    assert [s[0] for s in got] == EXAMPLE_6_RESIDUES
    # With the whole signature (all degree factors) the last product is divisible too.
    full = stream_residues((21_840_000,), example_6_stream(), R_VERTEX, R_EDGE, 17)
    assert full[-1] == (0,) and all(s != (0,) for s in full[:-1])


def test_example_6_reconstruction():
    """Fig. 4 is determined by the factors and residues up to the last edge's label.

    Searched: which of vertex labels 1, 3 gets 3 or 6, which of edge labels 1, 2 gets 16
    or 7, and the labels of stream edges 1, 2 and 5. Exactly one placement of the values
    gives the residues 240, 16,000, 12,000, 52,000, 0; edge 1 must be labelled 2 (its
    factor is 9 - 14 + 7), and edge 2 labelled 2 as well (labelled 1, the second residue
    would be 8,000). The last residue is 0 modulo 72,800 whatever the last edge's label
    (the other factors already hold 72,800); the whole signature and "Line 9 will find
    that it is a true match" both need it labelled 1, as the query edge A -> B is.
    """
    consistent = []
    for v1, v3 in itertools.permutations((3, 6)):
        for e1, e2 in itertools.permutations((16, 7)):
            r_vertex, r_edge = {"0": 9, "1": v1, "2": 14, "3": v3}, {"1": e1, "2": e2}
            for labels in itertools.product("12", repeat=3):
                got = stream_residues((72_800,), example_6_stream(labels), r_vertex, r_edge, 17)
                if [s[0] for s in got] == EXAMPLE_6_RESIDUES:
                    consistent.append((v1, v3, e1, e2, labels))
    assert consistent == [(3, 6, 16, 7, ("2", "2", "1")), (3, 6, 16, 7, ("2", "2", "2"))]
    for labels, divisible in ((("2", "2", "1"), True), (("2", "2", "2"), False)):
        full = stream_residues((21_840_000,), example_6_stream(labels), R_VERTEX, R_EDGE, 17)
        assert (full[-1] == (0,)) is divisible
    for labels, trigger in ((("2", "2", "1"), [4]), (("2", "2", "2"), [])):
        out = DDSTBaselineEngine(EXAMPLE_6).push(table(example_6_stream(labels)))
        assert out.column("trigger_seq").to_pylist() == trigger


def test_example_6_through_the_engine():
    """The engine multiplies only the factors of keys an edge fits: (3, 2) and (3, 0)
    labelled 2 fit no query edge and leave the residues alone."""
    stream = example_6_stream()
    engine = DDSTSignatureEngine(EXAMPLE_6, signature=Signature.of(EXAMPLE_6, 17, R_VERTEX, R_EDGE))
    residues, rows = [], []
    for edge in stream:
        rows += reported(engine.push(table([edge])))
        residues.append(engine.residues("0", "0"))
    assert residues == [(240,), (240,), (240,), (240 * 13 * 5 * 10,), (0,)]
    assert engine.verifications == 1
    assert rows == reported(DDSTBaselineEngine(EXAMPLE_6).push(table(stream)))
    assert rows == [(4, {("A", "0", "0"), ("B", "1", "1"), ("C", "3", "3"), ("D", "2", "2")},
                     {("AD", 0), ("CA", 3), ("AB", 4)})]  # fmt: skip


def test_paper_signature_misses_a_match_with_shared_edges():
    """A query path x -> y -> z -> w is matched (DDS) by a 2-cycle a -> b -> a: three query
    edges share two stream edges, so the paper's signature (one factor per query edge and
    degree) does not divide the stream's product. Counting each key once does."""
    q = parse_ddst("""VERTICES X:M, Y:M, Z:M, W:M;
                      EDGES xy: X -> Y [e]; yz: Y -> Z [e]; zw: Z -> W [e]; WITHIN 10 s""")
    stream = stream_of([(1, "a", "b", "e"), (2, "b", "a", "e")], "M")
    r_vertex, r_edge = {"M": 5}, {"e": 3}
    paper = [key_factor(k, r_vertex, r_edge, 17) for k in query_keys(q, distinct=False)]
    words, _ = pack_words(paper)
    assert stream_residues(words, stream, r_vertex, r_edge, 17)[-1] != (0,) * len(words)
    want = reported(DDSTBaselineEngine(q).push(table(stream)))
    assert [trigger for trigger, _, _ in want] == [1] and want == oracle.reports(q, stream)
    engine = DDSTSignatureEngine(q, signature=Signature.of(q, 17, r_vertex, r_edge))
    assert reported(engine.push(table(stream))) == want


# -- Theorem 4 ------------------------------------------------------------------------------

PRIMES = [2, 3, 17, 97, 257, 997, 65_521, 1_000_003, 2_147_483_647]


@st.composite
def big_queries(draw: st.DrawFn) -> DDSTQuery:
    """Connected queries of 1-24 edges over 1-8 vertices, self-loops and parallel edges
    included, labels from a few values and ``*``."""
    nv = draw(st.integers(1, 8))
    ne = draw(st.integers(max(1, nv - 1), 24))
    labels = st.sampled_from([None, "a", "b", "c"])
    ends = []
    for k in range(ne):
        if k < nv - 1:  # a spanning tree first: connected
            a, b = draw(st.integers(0, k)), k + 1
        else:
            a, b = draw(st.integers(0, nv - 1)), draw(st.integers(0, nv - 1))
        ends.append((a, b) if draw(st.booleans()) else (b, a))
    vertices = tuple(QueryVertex(f"V{i}", draw(labels)) for i in range(nv))
    edges = tuple(QueryEdge(f"e{k}", f"V{a}", f"V{b}", draw(labels))
                  for k, (a, b) in enumerate(ends))  # fmt: skip
    return DDSTQuery("q", vertices, edges, (), Window("count", 5))


@settings(max_examples=150)
@given(query=big_queries(), p=st.sampled_from(PRIMES), seed=st.integers(0, 2**16))
def test_theorem_4_bounds_the_words(query, p, seed):
    sig = Signature.random(query, p, seed)
    assert len(sig.keys) <= 3 * len(query.edges)  # |Eq| edge factors, 2|Eq| degree ones
    assert all(1 <= f <= p for f in sig.factors)
    assert all(1 <= w < 2**WORD_BITS for w in sig.words)
    assert sig.sigma == math.prod(sig.factors)
    c = len(sig.words) - 1
    assert c <= signature_word_bound(len(query.edges), p)
    # the paper's form: also true with the non-distinct (paper's) factors and their count
    paper = [key_factor(k, sig.r_vertex, sig.r_edge, p) for k in query_keys(query, distinct=False)]
    assert len(pack_words(paper)[0]) - 1 <= signature_word_bound(len(query.edges), p)


def test_theorem_4_as_printed_is_off_by_one():
    """``c + 1 <= 3 log p |Eq| / (size - log p)`` fails for one edge: one word, bound < 1."""
    q = parse_ddst("VERTICES A, B; EDGES x: A -> B; WITHIN 1 s")
    sig = Signature.random(q, 97)
    assert len(sig.words) == 1 and signature_word_bound(1, 97) < 1


def test_bad_parameters():
    with pytest.raises(ValueError, match="prime"):
        DDSTSignatureEngine(EXAMPLE_5, p=91)
    with pytest.raises(ValueError, match="another query"):
        DDSTSignatureEngine(EXAMPLE_5, signature=Signature.random(EXAMPLE_6))


# -- exactness: the baseline and the oracle --------------------------------------------------


def run_split(engine: DDSTSignatureEngine, stream: list[dict], cuts: list[int]) -> pa.Table:
    """Push ``stream`` in pieces cut at ``cuts``."""
    bounds = [0, *sorted(cuts), len(stream)]
    parts = [engine.push(table(stream[a:b])) for a, b in itertools.pairwise(bounds)]
    return pa.concat_tables(parts)


class SlackFreeEngine(DDSTSignatureEngine):
    """Rebuilds its groups, and forgets vertex numbers, as soon as it may."""

    _slack = 0


@settings(max_examples=200)
@given(data=st.data())
def test_engine_equals_baseline_and_oracle(data):
    """Time and count windows, several batch splits, and small primes (2, 3: signature
    matches by chance everywhere, so verification is what keeps the result exact); with
    no slack, groups are rebuilt and vertices renumbered all the time."""
    query = data.draw(queries(max_vertices=data.draw(st.sampled_from([2, 4]))), "query")
    stream = data.draw(streams(query, apart=data.draw(st.booleans())), "stream")
    p = data.draw(st.sampled_from([2, 3, 17, 997]), "p")
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=3), "cuts")
    want = DDSTBaselineEngine(query).push(table(stream))
    engine_class = data.draw(st.sampled_from([DDSTSignatureEngine, SlackFreeEngine]), "class")
    engine = engine_class(query, p=p, seed=data.draw(st.integers(0, 99), "seed"))
    got = run_split(engine, stream, cuts)
    assert got.equals(want)  # same rows, same order, same match ids
    assert reported(got) == oracle.reports(query, stream)
    assert engine.verifications >= got.num_rows


@st.composite
def long_streams(draw: st.DrawFn) -> list[dict]:
    """20-60 edges over four vertices with stable labels, times rising by 0-2."""
    n = draw(st.integers(20, 60))
    pool = "abcd"
    vlabel = {v: draw(st.sampled_from([None, "M", "S"])) for v in pool}
    t, out = 0, []
    for i in range(n):
        t += draw(st.integers(0, 2))
        src, dst = draw(st.sampled_from(pool)), draw(st.sampled_from(pool))
        out.append({"t": t, "seq": i, "src": src, "dst": dst,
                    "label": draw(st.sampled_from([None, "x", "y"])),
                    "src_label": vlabel[src], "dst_label": vlabel[dst]})  # fmt: skip
    return out


@settings(max_examples=30)
@given(data=st.data())
def test_engine_equals_baseline_on_longer_streams(data):
    """Windows that slide over many edges: stale groups, rebuilds inside a batch."""
    query = data.draw(queries(), "query")
    stream = data.draw(long_streams(), "stream")
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=4), "cuts")
    engine = data.draw(st.sampled_from([DDSTSignatureEngine, SlackFreeEngine]))(query, p=17)
    assert run_split(engine, stream, cuts).equals(DDSTBaselineEngine(query).push(table(stream)))


@settings(max_examples=80)
@given(data=st.data())
def test_snapshot_restore_mid_stream(data):
    query = data.draw(queries(), "query")
    stream = data.draw(streams(query), "stream")
    split = data.draw(st.integers(0, len(stream)), "split")
    p = data.draw(st.sampled_from([3, 997]), "p")
    whole = DDSTSignatureEngine(query, p=p).push(table(stream))
    engine = DDSTSignatureEngine(query, p=p)
    first = engine.push(table(stream[:split]))
    restored = DDSTSignatureEngine.restore(pickle.loads(pickle.dumps(engine.snapshot())))
    assert restored.signature == engine.signature
    assert pa.concat_tables([first, restored.push(table(stream[split:]))]).equals(whole)
    assert restored.edges_seen == len(stream)


class TightEngine(DDSTSignatureEngine):
    """Rebuilds its groups, and forgets vertex numbers, with little slack."""

    _slack = 8


@pytest.mark.parametrize(("engine_class", "p"), [(TightEngine, 3), (DDSTSignatureEngine, 997)])
def test_longer_stream_rebuilds_and_forgets_vertices(engine_class, p):
    """600 edges among three hubs and many one-off vertices, in batches of 50: the groups
    are rebuilt (on stale signature matches, and when holding too much) and the vertex
    numbering compacted, and the result is still the baseline's."""
    q = parse_ddst("""VERTICES A:M, B, C:S; EDGES x: A -> B [x]; y: B -> C; z: C -> A [x];
                      ORDER x < y; WITHIN 6 EDGES""")
    rng = random.Random(2)
    fixed = {"a": "M", "c": "S"}
    stream = []
    for i in range(600):
        hub = rng.random() < 0.7
        src, dst = (rng.choice("abc"), rng.choice("abc")) if hub else (f"v{i}", f"w{i}")
        stream.append({"t": i // 2, "seq": i, "src": src, "dst": dst,
                       "label": rng.choice(["x", "y", None]),
                       "src_label": fixed.get(src) or rng.choice(["M", "S"]),
                       "dst_label": fixed.get(dst) or rng.choice(["M", "S"])})  # fmt: skip
    engine = engine_class(q, p=p)
    got = run_split(engine, stream, list(range(50, 600, 50)))
    assert got.equals(DDSTBaselineEngine(q).push(table(stream)))
    assert got.num_rows == 5 and engine.rebuilds > 0
    assert got.num_rows <= engine.verifications < len(stream) // 3
    if engine_class is TightEngine:
        assert len(engine._vid) < 4 * (5 + 8) + 2 * 50


# -- the filter itself ----------------------------------------------------------------------

LOOP = parse_ddst("VERTICES A, B; EDGES x: A -> B [x]; y: B -> A [y]; ORDER x < y; WITHIN 10 s")


def test_no_verification_while_a_key_is_missing():
    engine = DDSTSignatureEngine(LOOP)
    engine.push(table(stream_of([(t, "a", "b", "x") for t in range(50)])))
    assert engine.verifications == 0


def test_an_expired_edge_does_not_complete_the_signature():
    """x at 0 has left the window [10, 20] when y arrives at 20: its group, holding the old
    edge, matches the signature, so it is recomputed from the window -- and then lacks x."""
    engine = DDSTSignatureEngine(LOOP)
    out = engine.push(table(stream_of([(0, "a", "b", "x"), (20, "b", "a", "y")])))
    assert out.num_rows == 0
    assert (engine.rebuilds, engine.verifications) == (1, 0)
    engine = DDSTSignatureEngine(LOOP)
    out = engine.push(table(stream_of([(10, "a", "b", "x"), (20, "b", "a", "y")])))
    assert out.column("trigger_seq").to_pylist() == [1]
    assert (engine.rebuilds, engine.verifications) == (0, 1)


def test_groups_are_connected_components():
    """Keys spread over two unconnected groups do not make a signature match."""
    engine = DDSTSignatureEngine(LOOP)
    engine.push(table(stream_of([(1, "a", "b", "x"), (2, "d", "c", "y")])))
    assert engine.verifications == 0
    engine.push(table(stream_of([(3, "b", "a", "y")])))
    assert engine.verifications == 1


# -- engine protocol --------------------------------------------------------------------


def test_out_of_order_and_watermark():
    engine = DDSTSignatureEngine(EXAMPLE_5)
    engine.push(table(EXAMPLE_5_STREAM[:3]))
    with pytest.raises(OutOfOrderError):
        engine.push(table(EXAMPLE_5_STREAM[1:2]))
    with pytest.raises(OutOfOrderError):
        engine.push(table([EXAMPLE_5_STREAM[5], EXAMPLE_5_STREAM[4]]))
    assert engine.advance(1_000 * 1_000_000).num_rows == 0
    assert engine.state_size() == {"edges": 0, "vertices": 0, "partial_matches": 0}
    with pytest.raises(OutOfOrderError):
        engine.push(table(EXAMPLE_5_STREAM[3:4]))


def test_state_bound():
    bounded = DDSTSignatureEngine(EXAMPLE_5, max_window_edges=3)
    with pytest.raises(StateBoundError, match="max_window_edges=3"):
        bounded.push(table(EXAMPLE_5_STREAM))
    # raised like the baseline even where no signature matches: nothing here fits a query edge
    quiet = stream_of([(t, "a", "b", "smooth") for t in range(5)], "M")
    for engine in (DDSTBaselineEngine(EXAMPLE_5, max_window_edges=3),
                   DDSTSignatureEngine(EXAMPLE_5, max_window_edges=3)):  # fmt: skip
        with pytest.raises(StateBoundError, match="holds 4 edges"):
            engine.push(table(quiet))


def test_seq_is_numbered_when_absent_and_batches_agree():
    engine = DDSTSignatureEngine(EXAMPLE_5)
    first = engine.push(pa.table({"t": [0, 1], "src": ["a", "a"], "dst": ["b", "b"]}))
    assert first.num_rows == 0 and engine._next_seq == 2
    one_by_one = DDSTSignatureEngine(EXAMPLE_5)
    rows = [reported(one_by_one.push(table([e]))) for e in EXAMPLE_5_STREAM]
    assert sum(rows, []) == reported(DDSTBaselineEngine(EXAMPLE_5).push(table(EXAMPLE_5_STREAM)))
