"""Pattern subscriptions against the paper's examples (du Mouza, Rigaux, Scholl, SSDBM
2006) and against brute-force oracles written from its definitions (tests/sequences_oracle.py)."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.engines.sequences.active import KeyState, TreeEvaluator
from graphcep.engines.sequences.engine import NaiveSequenceEngine, SequenceEngine
from graphcep.engines.sequences.kmp_var import KmpVar
from graphcep.engines.sequences.skip import skip_search
from graphcep.engines.sequences.tree import PatternTree
from graphcep.patterns.sequences import (
    SequencePattern,
    Var,
    contains,
    lub,
    mark,
    normalize,
    parse_items,
    show,
)
from tests.sequences_oracle import expected_notifications, occurrences, refines


def m(text):
    return mark(parse_items(text))


# -- Section 2-3: refinement, normal form, lub ----------------------------------------------


def test_refinements_of_section_2_and_figure_1():
    P0, P1, P2, P3, P4 = (m(t) for t in ("@x.@y.a", "b.@x.a", "b.@x.a.c", "b.@x.a.@x",
                                         "b.c.a.c"))
    refined = {(a, b) for a in range(5) for b in range(5) if a != b
               and contains((P0, P1, P2, P3, P4)[a], (P0, P1, P2, P3, P4)[b])}
    # Figure 1: P1 <- P2, P3 <- P4, and P0 above P1; transitively the rest
    assert refined == {(1, 0), (2, 1), (3, 1), (4, 2), (4, 3), (2, 0), (3, 0), (4, 0), (4, 1)}
    assert contains(m("b.@x.a.@y"), m("b.@x.a")) and contains(m("a.@x.b.@x.c"), m("a.@x.b"))
    assert not contains(m("a.@x.b.@y"), m("a.@x.b.@x"))
    assert contains(m("a.@x.b.@x"), m("a.@x.b.@y"))


def test_normal_form_and_lubs_of_the_paper():
    assert show(normalize(m("@y.c.@x.@y.@z"))) == "@x1.c.@x2.@x1"
    assert m("@z.a.@x.b.@y.@z") == m("@y.a.@z.b.@x.@y")
    assert show(lub(m("b.a.c.a"), m("b.d.c.d"))) == "b.@x1.c.@x1"
    assert show(lub(m("b.a.c.a"), m("b.c.c"))) == "b.@x1.c"


PATTERNS = st.lists(st.one_of(st.sampled_from("abc"), st.sampled_from([Var("x"), Var("y"),
                                                                        Var("z")])),
                    min_size=1, max_size=5).map(tuple)


@settings(max_examples=300, deadline=None)
@given(PATTERNS, PATTERNS)
def test_contain_is_definition_3_and_lub_is_least(p, q):
    assert contains(mark(p), mark(q)) == refines(p, q)
    common = lub(mark(p), mark(q))
    assert refines(p, common) and refines(q, common)


# -- KMP_var --------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(PATTERNS, st.lists(st.sampled_from("abcd"), max_size=40))
def test_kmp_var_finds_every_occurrence(pattern, sequence):
    kmp, state, found = KmpVar(mark(pattern)), None, []
    state = kmp.START
    for q, s in enumerate(sequence):
        state, done = kmp.step(state, s)
        found += [q - kmp.m + 1 for _ in done]
    assert found == [start for start, _ in occurrences(pattern, sequence)]


@settings(max_examples=300, deadline=None)
@given(PATTERNS, st.lists(st.sampled_from("abc"), min_size=2, max_size=2), PATTERNS,
       st.lists(st.sampled_from("abcd"), max_size=40))
def test_skip_search_finds_every_occurrence(head, pair, tail, sequence):
    """The Horspool-style skip, run online as a top node runs it, against brute force."""
    pattern = (*head, *pair, *tail)
    skip = skip_search(KmpVar(mark(pattern)))
    assert skip is not None and skip.m == len(pattern)
    order = list(dict.fromkeys(i for i in pattern if isinstance(i, Var)))
    found, end = [], skip.m - 1
    for q in range(len(sequence)):
        if q < end:
            continue
        window = sequence[q - skip.m + 1:q + 1]
        binds = skip.verify(window)
        if binds is not None:
            found.append((q - skip.m + 1, binds))
        end = q + skip.shift(window[skip.probe])
        assert end > q
    assert found == [(start, tuple(nu[v] for v in order))
                     for start, nu in occurrences(pattern, sequence)]


def test_skip_search_is_used_only_where_it_can_pay():
    assert skip_search(KmpVar(m("@x.@y.@x"))) is None  # no constant
    assert skip_search(KmpVar(m("a.@x.b.@x.c"))) is None  # no two constants in a row: shifts 1
    assert skip_search(KmpVar(m("b"))) is None
    skip = skip_search(KmpVar(m("@x.a.@x.c.b")))  # probe at the last b: after c, a variable
    assert skip.probe == 4 and [skip.shift(c) for c in "abcz"] == [2, 2, 1, 2]
    skip = skip_search(KmpVar(m("n.h.s.@x.d")))  # probe at s, the start three back
    assert skip.probe == 2 and [skip.shift(c) for c in "hnsz"] == [1, 2, 3, 3]


# -- the pattern tree -------------------------------------------------------------------------


def test_figure_5_insertion_steps():
    tree = PatternTree()
    for sid, text in enumerate(["@x.a", "b.@x.c", "b.c.c", "b.d.c.d"]):
        tree.insert(m(text), str(sid))
    assert tree.candidate_parent(m("b.a.c.a")).pattern == m("b.@x.c")
    tree.insert(m("b.a.c.a"), "P")
    tree.check()
    assert tree.render().split("\n") == ["ε", "  @x1.a", "  b.@x1.c", "    b.c.c",
                                         "    b.@x1.c.@x1", "      b.d.c.d", "      b.a.c.a"]


def test_the_tie_break_prefers_the_earlier_selective_prefix():
    tree = PatternTree()
    for sid, text in enumerate(["@x.a", "d.a.d", "b.a.a"]):
        tree.insert(m(text), str(sid))
    tree.insert(m("b.a.d"), "P'")
    parent = tree.subscriptions["P'"].parent
    assert show(parent.pattern) == "b.a"  # the paper's b.a.@x1, in normal form


def test_figures_3_4_active_automata():
    tree = PatternTree()
    for sid, text in [("P1", "a"), ("P2", "a.@x.b"), ("P4", "a.@x.b.@x"), ("P5", "a.c.b.a"),
                      ("P6", "a.c.b.b"), ("P3", "a.c")]:
        tree.insert(m(text), sid)
    evaluator, key = TreeEvaluator(tree), KeyState()
    trace = []
    for s in "acbcadb":
        evaluator.read(key, s, 8)
        trace.append(sorted(i for n in evaluator.active(key) for i in n.ids))
    assert trace == [["P1", "P2", "P3"], ["P1", "P2"], ["P1", "P4", "P5", "P6"], ["P1"],
                     ["P1", "P2", "P3"], ["P1", "P2"], ["P1", "P4"]]


# -- the engines against the oracle, through adds and removes --------------------------------


@pytest.mark.parametrize("skip", [True, False])
@settings(max_examples=150, deadline=None)
@given(st.integers(0, 2**32))
def test_engines_equal_the_oracle_after_every_change(skip, seed):
    rng = random.Random(seed)
    alphabet = "abcd"[:rng.randint(2, 4)]
    tree, naive = SequenceEngine(skip=skip), NaiveSequenceEngine()
    live, added, sequences, got, got_naive, n = {}, {}, {}, [], [], 0
    for _ in range(rng.randint(1, 10)):
        for _ in range(rng.randint(0, 3)):
            if live and rng.random() < 0.35:
                sid = rng.choice(sorted(live))
                del live[sid]
                tree.remove(sid)
                naive.remove(sid)
                added[sid] = (*added[sid][:2], n)
            else:
                sid = f"s{len(added)}"
                pattern = SequencePattern(tuple(
                    rng.choice(alphabet) if rng.random() < 0.5 else Var(rng.choice("xyz"))
                    for _ in range(rng.randint(1, 5))))
                if live and rng.random() < 0.3:  # an equal pattern, another id
                    pattern = live[rng.choice(sorted(live))]
                live[sid], added[sid] = pattern, (pattern, n, None)
                tree.add(sid, pattern)
                naive.add(sid, pattern)
            tree.tree.check()
        k = rng.randint(0, 10)
        keys = [rng.choice("uv") for _ in range(k)]
        symbols = [rng.choice(alphabet) for _ in range(k)]
        batch = pa.table({"t": list(range(n, n + k)), "src": keys, "dst": symbols})
        got += tree.push(batch).to_pylist()
        got_naive += naive.push(batch).to_pylist()
        for key, s in zip(keys, symbols, strict=True):
            sequences.setdefault(key, []).append((s, n))
            n += 1
    expected = expected_notifications(added, sequences)
    for rows in (got, got_naive):
        found = [(r["subscription"], r["key"], r["start"]) for r in rows]
        assert len(found) == len(set(found)) and set(found) == expected
    assert sorted(got, key=lambda r: r["match_id"]) == sorted(got_naive,
                                                              key=lambda r: r["match_id"])


def test_a_notification_holds_bindings_edges_and_times():
    engine = SequenceEngine({"probe": SequencePattern(parse_items("22.@port.22.@port"))})
    edges = pa.table({"t": [0, 10, 20, 30, 40], "src": ["h", "h", "g", "h", "h"],
                      "dst": [22, 8080, 22, 22, 8080], "seq": [5, 6, 7, 8, 9]})
    (row,) = engine.push(edges).to_pylist()
    assert (row["key"], row["start"], row["end"], row["start_t"], row["end_t"]) == \
        ("h", 0, 3, 0, 40)
    assert row["bindings"] == [{"var": "port", "value": "8080"}]
    assert [e["seq"] for e in row["edges"]] == [5, 6, 8, 9]


def test_removal_cases_keep_the_tree_sound():
    tree = PatternTree()
    for sid, text in enumerate(["a.b.c", "a.b.d", "a.b.e", "a.c"]):
        tree.insert(m(text), str(sid))
    tree.check()
    lub_node = tree.subscriptions["0"].parent
    assert show(lub_node.pattern) == "a.b"
    tree.remove("2")  # more than one sibling left: the lub stays, tightened if it can be
    tree.check()
    tree.remove("1")  # one sibling left: it replaces the lub (case 2)
    tree.check()
    assert tree.subscriptions["0"].parent.pattern != m("a.b")
