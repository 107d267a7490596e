"""When a delay inside a shuffle starts its clock: at the last link *its own part* read
(the paper's construction: the clock is reset by the event transition before the delay,
and a shuffle is the product of its parts' automata), never at a link the other part read
meanwhile.

Oracles: the paper's own Fig. 2 narrative, cases worked out by hand from the definitions,
and the brute-force matcher of tests/nu_oracle.py (rewriting, no automaton) on random
expressions with delays inside shuffles, in search and anchored mode, for the interpreted
and the compiled token game.
"""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.engines.nu.automaton import compile_pattern
from graphcep.engines.nu.compiled import CompiledNuEngine
from graphcep.engines.nu.engine import NuEngine
from graphcep.engines.nu.tables import ineligibility
from graphcep.io.tes import parse_tes
from graphcep.lang.nu import parse_nu, parse_nu_file
from graphcep.patterns.nu import (
    Alloc,
    AnyNode,
    Concat,
    Const,
    Delay,
    Link,
    NuPattern,
    Or,
    Release,
    Repeat,
    Shuffle,
    Var,
    walk,
)
from tests import paths
from tests.nu_oracle import Oracle

S = 1_000_000

#: The paper's Fig. 2 pattern: (@ -> @)* ⊗ ((a -> b) ∨ a -> ♯X · <(X! -> ♯X)* · (X! -> b)>[0,1])
FIG2 = "(@ ~> @)* % ((a ~> b) | (a ~> #X . <(X! ~> #X)* . X! ~> b>[0,1]))"


def us(links: list[tuple[float, str, str]]) -> list[tuple[int, str, str]]:
    """Links timed in seconds, in microseconds."""
    return [(round(t * S), u, v) for t, u, v in links]


def table(links: list[tuple[float, str, str]]) -> pa.Table:
    return pa.table({"t": [t for t, _, _ in us(links)],
                     "src": [u for _, u, _ in links], "dst": [v for _, _, v in links]})


def found(engine, links) -> set[tuple]:
    """``(first_t, last_t, bindings)`` of every report ``engine`` makes on ``links``."""
    return {(r["first_t"], r["last_t"], tuple(r["bindings"]))
            for r in engine.push(table(links)).to_pylist()}


def both_engines(pattern: NuPattern, links) -> set[tuple]:
    """The search-mode matches, the same from the interpreted and the compiled game."""
    interpreted = found(NuEngine(pattern), links)
    assert ineligibility(compile_pattern(pattern)) is None
    assert found(CompiledNuEngine(pattern), links) == interpreted
    return interpreted


# -- the paper's Fig. 2 ---------------------------------------------------------------------


@pytest.mark.parametrize(("pause", "recognised"), [("0.3", True), ("1.0", False)])
def test_fig2_anchored_recognises_with_0_3_and_times_out_with_1_0(pause, recognised):
    """'(a, y) 0.1 (y, z) 0.3 (y, b)' is accepted, clock c = 0.4 at the last link; 'if the
    second delay is not 0.3 but e.g. 1.0 then the link stream is not recognized because of
    a timeout': c counts from (a, y), which the delay's own part read, not from (y, z),
    which the left part (@ -> @)* read."""
    events = parse_tes(f"a y 0.1 y z {pause} y b", "fig2")[0]
    engine = NuEngine(parse_nu(FIG2), mode="anchored")
    engine.push(events.slice(0, events.num_rows - 1))
    last = engine.push(events.slice(events.num_rows - 1)).to_pylist()
    assert bool(last) is recognised
    if recognised:
        assert [(r["first_t"], r["last_t"], r["bindings"]) for r in last] == [
            (0, 400_000, [("X", "y")])]


def test_fig2_in_search_mode():
    """The same stream as links: a→y @0, y→z @0.1, y→b @0.4 or @1.1. With 0.3 the path
    a→y, y→b is within the second; with 1.0 nothing matches: no run of the pattern has a
    clock that started at y→z."""
    pattern = parse_nu(FIG2)
    near = [(0, "a", "y"), (0.1, "y", "z"), (0.4, "y", "b")]
    far = [(0, "a", "y"), (0.1, "y", "z"), (1.1, "y", "b")]
    assert found(NuEngine(pattern), near) == {(0, 400_000, (("X", "y"),))}
    assert found(NuEngine(pattern), far) == set()
    assert Oracle(pattern).matches(us(far)) == set()


# -- cases worked out from the definitions ----------------------------------------------------


def test_a_back_and_forth_counts_from_its_own_first_link():
    """(#X ~> #Y . <Y ~> X>[0,1]) % (n0 ~> @): the link back must come within 1 s of
    n1→n2, whatever the other part reads in between (n0→n1 @10 is 1 s before n2→n1)."""
    pattern = parse_nu("(#X ~> #Y . <(Y ~> X)>[0,1]) % (n0 ~> @)")
    assert both_engines(pattern, [(7, "n1", "n2"), (10, "n0", "n1"), (11, "n2", "n1")]) == set()
    assert both_engines(pattern, [(7, "n1", "n2"), (7.5, "n0", "n1"), (8, "n2", "n1")]) == {
        (7 * S, 8 * S, (("X", "n1"), ("Y", "n2")))}


@pytest.mark.parametrize(("bound", "matches"), [("[1]", False), ("[4]", True)])
def test_one_link_is_not_both_1_s_and_4_s_after_its_start(bound, matches):
    """a→n1 @4 is 4 s after n0→a @0, which its part read; the other part's n2→b @3 does not
    restart the clock."""
    pattern = parse_nu(f"(n0 ~> #X . <X ~> n1>{bound}) % (n2 ~> #Y . <Y ~> n3>[0,2])")
    links = [(0, "n0", "a"), (3, "n2", "b"), (4, "a", "n1"), (4, "b", "n3")]
    expected = {(0, 4 * S, (("X", "a"), ("Y", "b")))} if matches else set()
    assert both_engines(pattern, links) == expected == Oracle(pattern).matches(us(links))


def test_remote_shell_pairs_each_dup_with_its_own_return():
    """examples/nu/remote_shell.nu: <Y ~> "2">[0] reads the rest of the dup call just
    matched, not of one 5 s later that another part took."""
    pattern = parse_nu_file(paths.EXAMPLES / "nu" / "remote_shell.nu")
    calls = [(0, "accept", "x"), (0, "x", "y"), (5, "dup", "y"), (5, "y", "0"),
             (6, "dup", "y"), (6, "y", "1"), (6, "y", "2"), (7, "execve", "z")]
    stray = [(1, "dup", "y")]  # a dup whose return never comes
    assert both_engines(pattern, sorted(calls + stray)) == set()
    whole = sorted(calls + [(6, "dup", "y")])  # the "2" dup's own call, tied at 6 s
    assert both_engines(pattern, whole) == {(0, 7 * S, (("X", "x"), ("Y", "y")))}


# -- random expressions against the oracle ----------------------------------------------------

NODES = "abc"
A, B = Const("a"), Const("b")
X, Y = Var("X"), Var("Y")

node_terms = st.sampled_from([A, B, AnyNode(), Alloc(("X",), X), X, Alloc(("Y",), Y), Y,
                              Release(X, ("X",))])
links_of_pattern = st.builds(Link, node_terms, node_terms)
bounds = st.sampled_from([(0, 0), (0, S // 2), (0, S), (S // 2, S), (S, 2 * S), (0, None)])


@st.composite
def delays(draw, body) -> Delay:
    low, high = draw(bounds)
    return Delay(draw(body), low, high)


def pieces(depth: int):
    """A sequence piece: a link, a delay of pieces, a choice, an optional piece, or a
    concatenation of two."""
    if depth == 0:
        return links_of_pattern
    smaller = pieces(depth - 1)
    return st.one_of(
        links_of_pattern,
        delays(smaller),
        st.builds(lambda a, b: Concat((a, b)), smaller, smaller),
        st.builds(lambda a, b: Or((a, b)), smaller, smaller),
        st.builds(lambda a: Repeat(a, 0, 1), smaller),
    )


@st.composite
def shuffled_delays(draw) -> NuPattern:
    """A shuffle with a delay in (at least) one part, maybe after a leading piece and
    inside an outer delay: the family where the clock's start matters."""
    piece = st.one_of(links_of_pattern, pieces(1))
    timed = Concat((draw(piece), draw(delays(piece))))
    other = draw(st.one_of(piece, delays(piece),
                           st.builds(lambda a, d: Concat((a, d)), pieces(0),
                                     delays(pieces(0)))))
    expr = Shuffle((timed, other) if draw(st.booleans()) else (other, timed))
    if draw(st.booleans()):
        expr = Concat((draw(pieces(0)), expr))
    if draw(st.booleans()):
        low, high = draw(bounds)
        expr = Delay(expr, low, high)
    return NuPattern("p", expr)


@st.composite
def streams(draw, pattern: NuPattern, most: int = 7) -> list[tuple[int, str, str]]:
    """Links with ties (steps of 0), half-second to two-second steps and self-loops:
    one concrete link for each link of ``pattern`` (its constants, a node per variable,
    any node for ``@``) among random links, in random order -- so that matches and near
    misses are frequent."""
    nodes = st.sampled_from(NODES)
    chosen = {name: draw(nodes) for name in ("X", "Y")}

    def end(term) -> str:
        while isinstance(term, Alloc | Release):
            term = term.body
        if isinstance(term, Const):
            return term.name
        return chosen[term.name] if isinstance(term, Var) else draw(nodes)

    shaped = [(end(e.src), end(e.dst)) for e in walk(pattern.expr) if isinstance(e, Link)]
    noise = draw(st.lists(st.tuples(nodes, nodes), max_size=max(0, most - len(shaped))))
    ends = draw(st.permutations(shaped + noise))
    steps = draw(st.lists(st.sampled_from([0, 0, S // 2, S, 2 * S]),
                          min_size=len(ends), max_size=len(ends)))
    times = [sum(steps[:i + 1]) for i in range(len(ends))]
    return [(t, u, v) for t, (u, v) in zip(times, ends, strict=True)]


def pushed(engine, links) -> list[tuple]:
    tab = pa.table({"t": [t for t, _, _ in links], "src": [u for _, u, _ in links],
                    "dst": [v for _, _, v in links]})
    return [(r["first_t"], r["last_t"], tuple(r["bindings"]))
            for r in engine.push(tab).to_pylist()]


# -- a memory ε-move held back while the other part reads ---------------------------------
#
# Table 2: ``#{X} e`` is an ε-transition allocating X into e, ``e {X}!`` one releasing X
# out of it; a shuffle is the product of its parts' automata, so one part's allocation may
# run before the other part's link and one part's release may wait while the other reads.
# Definition 7 then decides each read: X reads a fresh node in write mode, a node it holds
# in read mode. The expected matches are worked out by hand from these definitions.

HELD_BACK = [
    # #X (right, ε) . a -> b (left: X = b fresh) . b -> a (right: X holds b) . X! (left)
    # . a -> a (right); each delay spans links at time 0: [0, 0] holds
    (Shuffle((Delay(Link(Const("a"), Release(Var("X"), ("X",))), 0, 0),
              Concat((Link(Alloc(("X",), Var("X")), Const("a")),
                      Delay(Link(Const("a"), Const("a")), 0, 0))))),
     [(0, "a", "b"), (0, "b", "a"), (0, "a", "a")], {(0, 0, (("X", "b"),))}),
]


def _waiting_release(high_us: int) -> Shuffle:
    """``(#X ~> f . g ~> X) % (c ~> X! . <d ~> e>[0, high])``: the right part's release
    must wait for the left part's ``g -> X``; its delay still counts from its own ``c -> X``."""
    return Shuffle((Concat((Link(Alloc(("X",), Var("X")), Const("f")),
                            Link(Const("g"), Var("X")))),
                    Concat((Link(Const("c"), Release(Var("X"), ("X",))),
                            Delay(Link(Const("d"), Const("e")), 0, high_us)))))


WAITING = [(0, "x", "f"), (1, "c", "x"), (2, "g", "x"), (3, "d", "e")]
HELD_BACK += [
    (_waiting_release(5), WAITING, {(0, 3, (("X", "x"),))}),  # c -> x at 1, d -> e at 3: 2
    (_waiting_release(1), WAITING, set()),  # 2 > 1 (counted from g -> x it would be 1)
]


@pytest.mark.parametrize(("expr", "links", "expected"), HELD_BACK)
def test_a_memory_move_waits_while_the_other_part_reads(expr, links, expected):
    """A part's release (or the other part's allocation) runs between the other part's
    links, and the part's delays still start and close at its own links."""
    pattern = NuPattern("p", expr)
    assert Oracle(pattern).matches(links) == expected
    assert set(pushed(NuEngine(pattern), links)) == expected
    assert ineligibility(compile_pattern(pattern)) is None
    assert set(pushed(CompiledNuEngine(pattern), links)) == expected


@settings(max_examples=200)
@given(data=st.data())
def test_search_mode_equals_the_oracle(data):
    """Both games (the compiled one where it runs) report the oracle's matches."""
    pattern = data.draw(shuffled_delays())
    links = data.draw(streams(pattern))
    expected = Oracle(pattern).matches(links)
    assert set(pushed(NuEngine(pattern), links)) == expected
    if ineligibility(compile_pattern(pattern)) is None:
        assert set(pushed(CompiledNuEngine(pattern), links)) == expected


@settings(max_examples=150)
@given(data=st.data())
def test_anchored_mode_equals_the_oracle(data):
    """Anchored, with any links interleaving as the paper's tool is used, (@ ~> @)* % P:
    each accepted prefix and bindings once, in stream order."""
    pattern = data.draw(shuffled_delays())
    links = data.draw(streams(pattern))
    anchored = NuPattern("p", Shuffle((Repeat(Link(AnyNode(), AnyNode()), 0, None),
                                       pattern.expr)))
    expected = Oracle(anchored).anchored_matches(links)
    assert sorted(pushed(NuEngine(anchored, mode="anchored"), links)) == sorted(expected)
    plain = Oracle(pattern).anchored_matches(links)
    assert sorted(pushed(NuEngine(pattern, mode="anchored"), links)) == sorted(plain)


# -- on Spark -------------------------------------------------------------------------------


@pytest.mark.spark
def test_spark_time_shards_start_the_clocks_as_the_oracle(spark, tmp_path, capsys):
    """``graphcep run`` on Spark in three time shards (the executors' engines build the
    same automaton): the oracle's matches of a shuffle of two timed parts, on a stream
    with instances, near misses whose clock would start at the other part's link, and
    ties."""
    from tests.runtime.test_nu_spark import keys_of, query_file, rows_of, run_cli, write_links

    text = "<(n0 ~> #X . <X ~> n1>[1, 2]) % (n2 ~> #Y . <Y ~> n3>[0, 1])>[0, 4]\n"
    rng = random.Random(30)
    links: list[tuple[int, str, str]] = []
    for k in range(12):  # one instance or near miss every 10 s
        t0, x, y = 10 * S * k, f"x{k}", f"y{k}"
        gap = rng.choice([S // 2, S, 2 * S, 3 * S])
        links += [(t0, "n0", x), (t0 + gap, "n2", y), (t0 + rng.choice([S, 2 * S, 3 * S]), x, "n1"),
                  (t0 + gap + rng.choice([0, S, 2 * S]), y, "n3"),
                  (t0 + rng.choice([0, S]), rng.choice("ab"), rng.choice("ab"))]
    links.sort(key=lambda link: link[0])
    pattern = parse_nu(text, "pair")
    expected = Oracle(pattern).matches(links, sizes=[4])
    data = write_links(links, tmp_path / "links.csv")
    query = query_file(tmp_path, "pair", text)
    summary, _ = run_cli(["run", str(query), "--input", str(data), "--master", "local[2]",
                          "--shards", "3", "-o", str(tmp_path / "spark.jsonl")], capsys)
    assert summary["shards"] == 3
    assert keys_of(rows_of(tmp_path / "spark.jsonl")) == {
        (first, last, tuple(sorted(b))) for first, last, b in expected}
    assert len(expected) >= 2  # and near misses: 12 planted, 2 within the bounds
