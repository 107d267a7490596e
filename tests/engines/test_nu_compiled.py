"""The compiled token game (engines/nu/compiled) against the interpreted one and the
brute-force oracle: the same match rows -- bindings, times and witnesses -- and the same
state, on random link streams with ties, repeated links and self-loops, pushed in pieces;
snapshots, the state bound, the patterns it leaves to the interpreted game."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest

from graphcep.engines.base import StateBoundError
from graphcep.engines.nu.automaton import compile_pattern
from graphcep.engines.nu.compiled import CompiledNuEngine
from graphcep.engines.nu.engine import NuEngine
from graphcep.engines.nu.tables import ineligibility
from graphcep.jobs.nu import NuJob
from graphcep.lang.nu import parse_nu, parse_nu_file
from graphcep.patterns.nu import NuPattern
from graphcep.patterns.subgraph import QueryError
from tests import paths
from tests.engines.test_nu_oracle import PATTERNS, PLANTED, planted, random_links
from tests.nu_oracle import Oracle

S = 1_000_000


@pytest.fixture(autouse=True)
def small_arrays(monkeypatch):
    """Start the compiled engine's arrays at 8 tokens, so that every test also grows the
    token rows, the hash tables and the index (and sweeps) while links are read."""
    from graphcep.engines.nu import compiled

    monkeypatch.setattr(compiled, "_FIRST_CAPACITY", 8)
COMPILED = {name: NuPattern(name, expr) for name, expr in PATTERNS.items()
            if ineligibility(compile_pattern(NuPattern(name, expr))) is None}
#: Every example but the 4-clique and the remote shell (no time bound to scale random
#: streams to; tests/io/test_syscall.py compares both games on system-call traces).
EXAMPLES = {p.stem: parse_nu_file(p) for p in sorted((paths.EXAMPLES / "nu").glob("*.nu"))
            if p.stem not in ("clique4", "remote_shell")}


def table(links) -> pa.Table:
    return pa.table({"t": [x[0] for x in links], "src": [x[1] for x in links],
                     "dst": [x[2] for x in links]})


def pushed(engine, links, cuts: int) -> list[dict]:
    rows, size = [], max(1, len(links) // cuts)
    for start in range(0, len(links), size):
        rows += engine.push(table(links).slice(start, size)).to_pylist()
    return rows


def streams(name: str, unit: int, trials: int):
    rng = random.Random(sum(map(ord, name)) + 17)
    for trial in range(trials):
        links = [(t * unit // S, u, v)
                 for t, u, v in random_links(rng, rng.randint(4, 14), "abcde"[:3 + trial % 3])]
        if name in PLANTED and trial % 2:
            links = planted(rng, links[:6], PLANTED[name], unit)
        yield trial, links


def test_the_patterns_it_runs_and_leaves():
    assert set(COMPILED) == {"triangle", "square", "star", "alternation"}
    assert set(EXAMPLES) - {"path", "alternation"} == {
        name for name, p in EXAMPLES.items() if ineligibility(compile_pattern(p)) is None}
    assert "loop" in ineligibility(compile_pattern(EXAMPLES["path"]))
    assert "more than one node" in ineligibility(compile_pattern(NuPattern("m", PATTERNS["mixed"])))


@pytest.mark.parametrize("name", sorted(COMPILED) + sorted(set(EXAMPLES) - {"path", "alternation"}))
def test_rows_and_state_equal_the_interpreted_game(name):
    pattern = COMPILED.get(name) or EXAMPLES[name]
    span = pattern.span_us()
    unit = int(span) // 4
    nonempty = 0
    for trial, links in streams(name, unit, 60):
        cuts = 1 + trial % 3
        interpreted, compiled = NuEngine(pattern), CompiledNuEngine(pattern)
        storing = CompiledNuEngine(pattern, join=False)
        rows = pushed(interpreted, links, cuts)
        assert pushed(compiled, links, cuts) == rows, links
        assert pushed(storing, links, cuts) == rows, links
        assert storing.state_size() == interpreted.state_size(), links
        assert compiled.state_size()["tokens"] == unjoined_tokens(interpreted, compiled), links
        nonempty += bool(interpreted.matches_found)
    assert nonempty >= 5


def unjoined_tokens(interpreted: NuEngine, compiled: CompiledNuEngine) -> int:
    """The interpreted game's tokens but those the closing join never stores."""
    join = compiled.tables.join
    return sum(join is None or token.loc != join.last for token in interpreted._tokens)


@pytest.mark.parametrize("name", sorted(COMPILED))
def test_matches_equal_the_oracle(name):
    pattern = COMPILED[name]
    oracle = Oracle(pattern)
    for _, links in streams(name, S, 40):
        found = {(r["first_t"], r["last_t"], tuple(r["bindings"]))
                 for r in pushed(CompiledNuEngine(pattern), links, 2)}
        assert found == oracle.matches(links), links


def test_a_big_stream_grows_and_sweeps_its_arrays_and_still_equals_the_interpreted_game():
    """Thousands of tokens: the arrays double, expired tokens are swept, the index and
    hash table are rebuilt, all while links are read."""
    pattern = parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 3]", "triangle")
    rng = random.Random(5)
    links, t = [], 0
    for _ in range(6000):
        t += rng.choice([0, 50_000, 100_000])
        links.append((t, f"n{rng.randrange(40)}", f"n{rng.randrange(40)}"))
    interpreted, compiled = NuEngine(pattern), CompiledNuEngine(pattern)
    storing = CompiledNuEngine(pattern, join=False)
    rows = pushed(interpreted, links, 7)
    assert pushed(compiled, links, 7) == rows
    assert pushed(storing, links, 7) == rows
    assert storing.state_size() == interpreted.state_size()
    assert compiled.state_size()["tokens"] == unjoined_tokens(interpreted, compiled)
    assert compiled.tables.join is not None and interpreted.matches_found > 50


def test_snapshot_and_restore_go_on_as_one_run():
    pattern = EXAMPLES["triangle"]
    _, links = next(iter(streams("triangle", 3 * S, 2)))
    links = [(i * 2 * S, u, v) for i, (_, u, v) in enumerate(links * 8)]
    whole = pushed(CompiledNuEngine(pattern), links, 1)
    first = CompiledNuEngine(pattern)
    half = len(links) // 2
    rows = pushed(first, links[:half], 1)
    restored = CompiledNuEngine.restore(first.snapshot())
    rows += restored.push(table(links).slice(half)).to_pylist()
    assert rows == whole


def test_the_state_bound_stops_the_run_naming_the_unbounded_part():
    engine = CompiledNuEngine(parse_nu("#X ~> #Y . Y ~> X", "p"), max_tokens=50)
    links = [(i, f"a{i}", f"b{i}") for i in range(200)]
    with pytest.raises(StateBoundError, match="max_tokens=50") as err:
        pushed(engine, links, 1)
    assert "'#X ~> #Y . Y ~> X' has no time bound" in str(err.value)


def test_links_kept_for_the_closing_join_count_towards_the_state_bound():
    """1,000 distinct links within the triangle's 10 s: 1,000 tokens after the first link
    and the same links kept for the join -- above a bound of 1,500, below 2,500."""
    pattern = parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]", "triangle")
    links = [(i, f"a{i}", f"b{i}") for i in range(1_000)]
    with pytest.raises(StateBoundError, match="tokens and links kept for the closing join"):
        pushed(CompiledNuEngine(pattern, max_tokens=1_500), links, 1)
    pushed(CompiledNuEngine(pattern, max_tokens=2_500), links, 1)


def test_a_time_event_sequence_goes_to_the_interpreted_game():
    pattern = parse_nu("a . #X . X", "p")
    events = pa.table({"t": [0, 1, 2], "src": ["a", "x", "x"], "dst": ["", "", ""]})
    assert CompiledNuEngine(pattern).push(events).to_pylist() == \
        NuEngine(pattern).push(events).to_pylist()


def test_the_job_picks_the_compiled_game_where_it_can():
    assert NuJob(EXAMPLES["triangle"]).chosen == "compiled"
    assert NuJob(EXAMPLES["triangle"], mode="anchored").chosen == "interpreted"
    assert NuJob(EXAMPLES["triangle"], engine="interpreted").chosen == "interpreted"
    assert NuJob(parse_nu_file(paths.EXAMPLES / "nu" / "path.nu")).chosen == "interpreted"
    with pytest.raises(QueryError, match="compiled engine cannot run it"):
        NuJob(parse_nu_file(paths.EXAMPLES / "nu" / "path.nu"), engine="compiled")
    assert isinstance(NuJob(EXAMPLES["triangle"]).new_engine(), CompiledNuEngine)


#: Shapes of the closing join (engines/nu/closing.py): an end of the last-but-one link
#: from the joined token, a constant, the closing link, or any node; a delay that the
#: last-but-one link starts; a lower time bound; four links.
JOINED = {
    "constant": ("<a ~> #X . X ~> #Y . Y ~> a>[0, 3]", "ab bc ca"),
    "wildcard": ("<#X ~> #Y . Y ~> @ . @ ~> X>[0, 3]", "ab bc ca"),
    "first end": ("<#X ~> #Y . #Z ~> Y . X ~> Z>[0, 3]", "ab cb ac"),
    "inner delay": ("<#X ~> #Y . <Y ~> #Z . Z ~> X>[0, 1]>[0, 4]", "ab bc ca"),
    "lower bound": ("<#X ~> #Y . Y ~> #Z . Z ~> X>[2, 4]", "ab bc ca"),
    "cycle of four": ("<#A ~> #B . B ~> #C . C ~> #D . D ~> A>[0, 4]", "ab bc cd da"),
}


@pytest.mark.parametrize("name", sorted(JOINED))
def test_each_shape_of_the_closing_join_equals_the_oracle_and_the_interpreted_game(name):
    text, instance = JOINED[name]
    pattern = parse_nu(text, name.replace(" ", "_"))
    assert CompiledNuEngine(pattern).tables.join is not None
    oracle = Oracle(pattern)
    rng = random.Random(sum(map(ord, name)))
    nonempty = 0
    for trial in range(40):
        nodes = "abcde"[:3 + trial % 3]
        links = [(t // 2, u, v) for t, u, v in random_links(rng, rng.randint(5, 10), nodes)]
        if trial % 2:  # an instance among them, a link every 0.5 s or 1 s
            t, step = rng.choice(links)[0], rng.choice([S // 2, S])
            links = sorted(links + [(t + i * step, pair[0], pair[1])
                                    for i, pair in enumerate(instance.split())],
                           key=lambda link: link[0])
        rows = pushed(NuEngine(pattern), links, 1 + trial % 3)
        compiled = CompiledNuEngine(pattern)
        assert pushed(compiled, links, 1 + trial % 3) == rows, links
        assert {(r["first_t"], r["last_t"], tuple(r["bindings"])) for r in rows} == \
            oracle.matches(links), links
        nonempty += bool(rows)
    assert nonempty >= 5
