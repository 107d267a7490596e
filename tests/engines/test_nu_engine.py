"""The timed ν-automata engine: the paper's examples, memory and time semantics, modes,
bounds, and the SAL engine's triangles as an independent check."""

from __future__ import annotations

import pyarrow as pa
import pytest

from graphcep.engines.base import StateBoundError
from graphcep.engines.nu.automaton import compile_pattern
from graphcep.engines.nu.engine import NuEngine
from graphcep.io.generator import generate_netflow
from graphcep.lang.nu import parse_nu
from graphcep.lang.sal import parse_program
from graphcep.runtime.local import run_local

S = 1_000_000


def links(*rows: tuple) -> pa.Table:
    """``(seconds, src, dst)`` rows as a link table."""
    return pa.table({"t": [round(r[0] * S) for r in rows], "src": [r[1] for r in rows],
                     "dst": [r[2] for r in rows]})


def found(text: str, table: pa.Table, mode: str = "search") -> list[tuple]:
    engine = NuEngine(parse_nu(text, "p"), mode=mode)
    return sorted((m["first_t"], m["last_t"], tuple(m["bindings"]))
                  for m in engine.push(table).to_pylist())


# -- the paper --------------------------------------------------------------------------

#: Fig. 2: a path from a to b whose links all come within one second of its first (the
#: paper's clock starts at the first link's target y; here at the first link: the same time)
PATH = "<a ~> #X . (X! ~> #X)* . X! ~> b>[0, 1]"


def test_fig2_accepts_the_paper_input():
    stream = links((0, "a", "y"), (0.1, "y", "z"), (0.4, "y", "b"))
    assert found(PATH, stream) == [(0, 400_000, (("X", "y"),))]


def test_fig2_rejects_it_when_the_second_delay_is_one_second():
    assert found(PATH, links((0, "a", "y"), (0.1, "y", "z"), (1.1, "y", "b"))) == []


def test_fig2_anchored_as_the_paper_writes_it():
    """The paper's form: the path shuffled with any links, matched from the stream's start."""
    pattern = f"(@ ~> @)* % {PATH}"
    assert found(pattern, links((0, "a", "y"), (0.1, "y", "z"), (0.4, "y", "b")),
                 "anchored") == [(0, 400_000, (("X", "y"),))]
    assert found(pattern, links((0, "a", "y"), (0.1, "y", "z"), (1.1, "y", "b")),
                 "anchored") == []


def test_fig2_follows_a_path_through_fresh_nodes():
    stream = links((0, "a", "y"), (0.2, "y", "z"), (0.5, "z", "w"), (0.9, "w", "b"))
    assert found(PATH, stream) == [(0, 900_000, (("X", "w|y|z"),))]


def test_fig3_and_fig4_allocation_adds_fresh_nodes_and_release_clears():
    """Fig. 3: allocating X again adds a fresh node to what it holds ({v} -> {v, w});
    Fig. 4: reading X (any node it holds) and releasing it empties it."""
    pattern = "#X ~> a . #X ~> a . X! ~> b . X ~> c"
    base = [(0, "v", "a"), (1, "w", "a"), (2, "v", "b")]
    assert found("#X ~> a . #X ~> a . X! ~> b", links(*base)) == [(0, 2 * S, (("X", "v|w"),))]
    assert found(pattern, links(*base, (3, "v", "c"))) == []  # released: holds nothing
    not_fresh = links((0, "v", "a"), (1, "v", "a"), (2, "v", "b"))
    assert found("#X ~> a . #X ~> a . X! ~> b", not_fresh) == []


def test_fig6_memory_only_automaton_holds_every_subset():
    """Fig. 6: with no delay to bound it, a memory-only pattern doubles its tokens at each
    new node: after a, b, c, eight versions of U, one per subset of {a, b, c}."""
    engine = NuEngine(parse_nu("(#U ~> @ | @ ~> @)*", "subsets"), mode="anchored")
    engine.push(links((0, "a", "z"), (1, "b", "z"), (2, "c", "z")))
    versions = {values for ((values, _),) in (token.memory for token in engine._tokens)}
    assert versions == {frozenset(s) for s in ("", "a", "b", "c", "ab", "ac", "bc", "abc")}


# -- semantics --------------------------------------------------------------------------


def test_variables_read_unknown_nodes_only():
    """A node named in the pattern is known: no variable may hold it (c.1.2)."""
    assert found("#X ~> b", links((0, "b", "b"), (1, "a", "b"))) == [(S, S, (("X", "a"),))]


def test_fresh_means_distinct_from_every_held_node():
    stream = links((0, "a", "a"), (1, "a", "c"))
    assert found("#X ~> #Y", stream) == [(S, S, (("X", "a"), ("Y", "c")))]


def test_links_are_atomic_under_shuffle():
    """(a ~> b) % (c ~> d) reads the links a->b and c->d, never a->c then b->d."""
    pattern = "<a ~> b % c ~> d>[0, 5]"
    assert found(pattern, links((0, "a", "c"), (1, "b", "d"))) == []
    assert found(pattern, links((0, "c", "d"), (1, "a", "b"))) == [(0, S, ())]


def test_a_delay_counts_from_the_matchs_previous_link():
    """<e>[x, y] holds when e's last link comes x to y after the link the match read
    before e (as the paper's Fig. 2 resets its clock at the event before the delay), or
    after e's own first link when e begins the match -- never from the stream's start nor
    from a link the match does not hold (here the stream starts 100 s before)."""
    stream = links((0, "q", "r"), (100, "a", "b"), (101, "b", "c"))
    assert found("a ~> b . <b ~> c>[0, 0.5]", stream) == []
    assert found("a ~> b . <b ~> c>[1, 2]", stream) == [(100 * S, 101 * S, ())]
    assert found("<a ~> b . b ~> c>[0, 1]", stream) == [(100 * S, 101 * S, ())]
    assert found("<a ~> b . b ~> c>[0, 0.999999]", stream) == []


def test_anchored_delays_count_from_time_zero_as_the_papers_tool():
    """Anchored at the stream's start, a delay that begins the pattern counts from time 0
    (a .tes sequence's start): MaTiNA accepts <a.b>[5,7] on '2 a 3 b'."""
    stream = links((2, "a", "x"), (5, "b", "x"))
    assert found("<a ~> x . b ~> x>[5, 7]", stream, "anchored") == [(2 * S, 5 * S, ())]
    assert found("<a ~> x . b ~> x>[5, 7]", stream) == []  # search: from a's link, 3 s


def test_a_waiting_token_expires_at_the_delay_after_it():
    """A token that has read a ~> b waits for <c ~> d>[0, 2] only 2 s."""
    engine = NuEngine(parse_nu("a ~> b . <c ~> d>[0, 2]", "p"))
    engine.push(links((0, "a", "b")))
    assert engine.state_size()["tokens"] == 1
    engine.push(links((2.5, "x", "y")))
    assert engine.state_size()["tokens"] == 0


def test_delays_are_exact_to_the_microsecond():
    """0.1 + 0.2 s is exactly 0.3 s (floats would put it past a 0.3 s bound)."""
    stream = pa.table({"t": [0, 100_000, 300_000], "src": ["a", "b", "c"],
                       "dst": ["b", "c", "d"]})
    assert found("<a ~> b . b ~> c . c ~> d>[0, 0.3]", stream) == [(0, 300_000, ())]
    assert found("<a ~> b . b ~> c . c ~> d>[0, 0.299999]", stream) == []


def test_ties_keep_stream_order():
    stream = links((5, "a", "b"), (5, "b", "c"))
    assert found("<a ~> b . b ~> c>[0, 0]", stream) == [(5 * S, 5 * S, ())]
    assert found("<b ~> c . a ~> b>[0, 0]", stream) == []


def test_each_distinct_match_is_reported_once():
    """Two ways to the same (first, last, bindings) -- here through either of two equal
    middle links -- make one report; another first link makes another."""
    stream = links((0, "a", "b"), (1, "b", "c"), (1, "b", "c"), (2, "c", "d"), (3, "a", "b"),
                   (3.5, "c", "d"))
    assert found("<a ~> b . b ~> c . c ~> d>[0, 10]", stream) == [
        (0, 2 * S, ()), (0, 3_500_000, ())]  # a->b at 3 s has no b->c after it


def test_anchored_mode_reads_every_link_from_the_start():
    stream = links((0, "a", "b"), (1, "x", "y"), (2, "b", "c"))
    assert found("a ~> b . b ~> c", stream, "anchored") == []
    assert found("a ~> b . b ~> c", stream) == [(0, 2 * S, ())]
    assert found("a ~> b . @ ~> @ . b ~> c", stream, "anchored") == [(0, 2 * S, ())]


def test_expired_tokens_are_dropped():
    engine = NuEngine(parse_nu("<#X ~> #Y . Y ~> X>[0, 2]", "p"))
    engine.push(links(*[(i, f"u{i}", f"v{i}") for i in range(100)]))
    assert engine.state_size()["tokens"] <= 10  # the last two seconds' attempts


def test_an_unbounded_pattern_stops_at_the_token_bound_naming_its_part():
    engine = NuEngine(parse_nu("#X ~> #Y . Y ~> X", "p"), max_tokens=50)
    with pytest.raises(StateBoundError, match="'#X ~> #Y . Y ~> X' has no time bound") as err:
        engine.push(links(*[(i, f"u{i}", f"v{i}") for i in range(100)]))
    assert "max_tokens=50" in str(err.value)


def test_the_automaton_keeps_links_atomic_in_a_shuffle():
    automaton = compile_pattern(parse_nu("a ~> b % c ~> d"))
    middle = automaton.middles
    for t in automaton.transitions:
        if t.source in middle:  # inside a link only that link's own moves
            assert t.label is None or t.label.text() in ("b", "d")


# -- an independent check: the SAL engine -------------------------------------------------


@pytest.mark.parametrize("seed", [1, 2])
def test_triangles_equal_the_sal_engines(seed):
    """A directed triangle among three distinct hosts within 10 s, as a ν-expression and as
    SAL: SAL's matches projected to (first time, last time, bindings) are the ν matches.
    The generated stream has no equal times, where the two languages agree on order."""
    edges = generate_netflow(3000, 60, 100, seed).select(["t", "src", "dst", "dur"])
    assert len(set(edges.column("t").to_pylist())) == edges.num_rows
    nu = found("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]", edges)
    program = parse_program("{ x e1 y; y e2 z; z e3 x; starttime(e3) - starttime(e1) <= 10;"
                            " starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }")
    sal, _ = run_local(program.query(), edges)
    projected = {(m["first_t"], m["last_t"], tuple(sorted((v.upper(), n)
                                                       for v, n in m["bindings"])))
                 for m in sal.to_pylist()}  # SAL's x, y, z are the ν-expression's X, Y, Z
    assert len(nu) > 20
    assert set(nu) == projected


def test_the_4_clique_of_the_library_finds_every_planted_clique():
    """examples/nu/clique4.nu against a clique oracle written from its meaning: six links,
    one per pair of four distinct hosts (either direction), within 600 s of each other;
    the variables are symmetric, so each clique is reported under its 24 namings."""
    import itertools
    import random

    from graphcep.lang.nu import parse_nu_file
    from tests.paths import EXAMPLES

    pattern = parse_nu_file(EXAMPLES / "nu" / "clique4.nu")
    rng = random.Random(4)
    rows = []
    for start in (0, 2000, 4000):  # three planted cliques, with noise around them
        nodes = rng.sample("abcdefgh", 4)
        pairs = list(itertools.combinations(nodes, 2))
        rng.shuffle(pairs)
        for i, (u, v) in enumerate(pairs):
            rows.append((start + 60 * i, *((u, v) if rng.random() < 0.5 else (v, u))))
        rows += [(start + rng.randrange(400), rng.choice("abcdefgh"), rng.choice("abcdefgh"))
                 for _ in range(4)]
    rows.sort(key=lambda r: r[0])
    expected = set()
    for chosen in itertools.combinations(range(len(rows)), 6):
        links = [rows[i] for i in chosen]
        hosts = {h for _, u, v in links for h in (u, v)}
        pairs = {frozenset((u, v)) for _, u, v in links}
        if len(hosts) == 4 and len(pairs) == 6 and all(len(p) == 2 for p in pairs) \
                and links[-1][0] - links[0][0] <= 600:
            for naming in itertools.permutations(sorted(hosts)):
                expected.add((links[0][0] * S, links[-1][0] * S,
                              tuple(zip("WXYZ", naming, strict=True))))
    assert len(expected) >= 3 * 24
    assert set(found_pattern(pattern, links_of(rows))) == expected


def links_of(rows) -> pa.Table:
    return links(*rows)


def found_pattern(pattern, table: pa.Table) -> list[tuple]:
    engine = NuEngine(pattern)
    return sorted((m["first_t"], m["last_t"], tuple(m["bindings"]))
                  for m in engine.push(table).to_pylist())


def test_a_shuffle_too_large_to_compile_is_refused():
    from graphcep.patterns.nu import NuPatternError

    many = " % ".join(f"a{i} ~> b{i}" for i in range(20))
    with pytest.raises(NuPatternError, match="needs more than 200,000 locations"):
        compile_pattern(parse_nu(many))


def test_the_token_bound_stops_a_doubling_pattern_early():
    """The paper's memory-only doubling stops at the bound, counted as tokens are made."""
    engine = NuEngine(parse_nu("(#U ~> @ | @ ~> @)*", "subsets"), max_tokens=1000)
    with pytest.raises(StateBoundError, match="max_tokens=1,000"):
        engine.push(links(*[(i, f"n{i}", "z") for i in range(40)]))
    assert len(engine._tokens) <= 1001


def test_search_witnesses_keep_links_read_as_any():
    stream = links((0, "a", "b"), (1, "b", "c"))
    engine = NuEngine(parse_nu("a ~> b . @ ~> @", "p"))
    (row,) = engine.push(stream).to_pylist()
    assert [(e["src"], e["dst"]) for e in row["edges"]] == [("a", "b"), ("b", "c")]


@pytest.mark.parametrize(("text", "reads"), [
    ("a ~> b", 2),  # a link is read as its two ends
    ("(a ~> b)*", 0),  # the empty word is accepted
    ("a ~> b | (c ~> d . e ~> f)", 2),  # the shorter side
    ("<a ~> #X . X ~> b>[0, 1] . (c ~> d)?", 4),  # the option is skipped
    ("(a ~> b)+ % c ~> d", 4),  # a shuffle reads both sides
])
def test_fewest_reads_is_the_shortest_accepted_word(text, reads):
    assert compile_pattern(parse_nu(text, "p")).fewest_reads() == reads


def test_no_match_holds_fewer_records_than_the_job_says():
    """Window widening skips windows with fewer records than ``min_records``: every match
    of the example library on a random stream holds at least that many links."""
    from pathlib import Path

    from graphcep.jobs import as_job

    table = generate_netflow(150, 6, 40, seed=9)
    seen = 0
    for path in sorted(Path(__file__).parents[2].glob("examples/nu/*.nu")):
        if path.stem == "clique4":  # a shuffle of six links: millions of tokens here
            continue
        job = as_job(parse_nu(path.read_text(), path.stem))
        matches = job.new_engine().push(table)
        for edges in matches.column("edges").to_pylist():
            assert len({e["seq"] for e in edges}) >= job.min_records, path.name
            seen += 1
    assert seen > 0

