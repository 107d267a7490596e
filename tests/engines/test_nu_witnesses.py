"""The links a ν match lists (its witness): search mode, every link its run read, checked
against the brute-force oracle (tests/nu_oracle.py) read on the witness alone; anchored,
the links of ``P`` in ``(@ ~> @)* % P`` (those read as ``@ ~> @`` are left out);
witnesses across a snapshot; and witnesses shared between tokens (the links held stay
linear in the links read)."""

from __future__ import annotations

import pickle
import random

import pyarrow as pa
import pytest

from graphcep.engines.nu.engine import NuEngine
from graphcep.lang.nu import parse_nu
from graphcep.patterns.nu import (
    Alloc,
    AnyNode,
    Concat,
    Const,
    Link,
    NuPattern,
    Release,
    Repeat,
    Shuffle,
    Var,
)
from tests.engines.test_nu_oracle import PATTERNS, PLANTED, planted, random_links
from tests.nu_oracle import Oracle

S = 1_000_000
#: the paper's Fig. 2 path, and its form as the paper's tool searches
PATH = "<a ~> #X . (X! ~> #X)* . X! ~> b>[0, 1]"
FIG2 = [(0, "a", "y"), (S // 10, "y", "z"), (S // 5, "q", "r"), (2 * S // 5, "y", "b")]


def table(links: list[tuple[int, str, str]]) -> pa.Table:
    return pa.table({"t": [x[0] for x in links], "src": [x[1] for x in links],
                     "dst": [x[2] for x in links]})


def searched(pattern: NuPattern) -> NuPattern:
    """``(@ ~> @)* % P``: the interleaving of a search, written into the pattern."""
    return NuPattern(pattern.name, Shuffle((Repeat(Link(AnyNode(), AnyNode())),
                                            pattern.expr)))


def reports(engine: NuEngine, links, cuts: int = 1) -> list[dict]:
    rows, size = [], max(1, -(-len(links) // cuts))
    for start in range(0, len(links), size):
        rows += engine.push(table(links).slice(start, size)).to_pylist()
    return rows


def witness(row: dict) -> list[tuple[int, str, str]]:
    return [(e["t"], e["src"], e["dst"]) for e in row["edges"]]


def key(row: dict) -> tuple:
    return row["first_t"], row["last_t"], tuple(row["bindings"])


def check_witnesses(pattern: NuPattern, links, mode: str, cuts: int = 1) -> int:
    """Search mode: every report's witness is links of the stream, in stream order, that
    the oracle reads whole as that very match. Anchored (``pattern`` is P, the engine runs
    ``(@ ~> @)* % P``): links of the prefix accepted, in order, that the oracle reads whole
    from time 0 as P with the same bindings. The number of reports."""
    oracle = Oracle(pattern)
    engine = NuEngine(searched(pattern) if mode == "anchored" else pattern, mode=mode)
    rows = reports(engine, links, cuts)
    for row in rows:
        seqs = [e["seq"] for e in row["edges"]]
        assert seqs == sorted(set(seqs)), row
        assert witness(row) == [links[s] for s in seqs], row
        if mode == "search":
            assert key(row) in oracle.whole(witness(row)), row
        else:
            assert links[seqs[-1]][0] <= row["last_t"], row
            assert tuple(row["bindings"]) in {
                b for _, _, b in oracle.whole(witness(row), anchored=True)}, row
    return len(rows)


def test_fig2_witnesses_list_the_paths_links():
    """Search mode lists the Fig. 2 path's links; anchored ``(@ ~> @)* % P`` the same
    (y -> z and q -> r, read by ``@ ~> @``, left out); the oracle reads both whole."""
    path = parse_nu(PATH, "p")
    (search,) = NuEngine(path).push(table(FIG2)).to_pylist()
    assert (key(search), witness(search)) == ((0, 2 * S // 5, (("X", "y"),)),
                                              [FIG2[0], FIG2[3]])
    assert key(search) in Oracle(path).whole(witness(search))
    (anchored,) = NuEngine(searched(path), mode="anchored").push(table(FIG2)).to_pylist()
    assert (key(anchored), witness(anchored)) == (key(search), witness(search))


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_witnesses_are_matches_the_oracle_reads_whole(name):
    """Search mode for P, anchored for ``(@ ~> @)* % P``, on random streams."""
    pattern = NuPattern(name, PATTERNS[name])
    rng = random.Random(sum(map(ord, name)) + 7)
    counted = {"search": 0, "anchored": 0}
    for trial in range(30):
        links = random_links(rng, rng.randint(4, 8), "abc" if trial % 3 else "abcd")
        if name in PLANTED and trial % 2:
            links = planted(rng, links[:5], PLANTED[name])
        cuts = 1 + trial % 3
        counted["search"] += check_witnesses(pattern, links, "search", cuts)
        counted["anchored"] += check_witnesses(pattern, links, "anchored", cuts)
    assert min(counted.values()) >= 2  # the trials reach matches


@pytest.mark.parametrize("mode", ["search", "anchored"])
def test_a_restored_engine_gives_the_same_witnesses(mode):
    """An engine restored from a snapshot taken mid-stream goes on with the same
    reports, witnesses included, as the engine that was never stopped."""
    rng = random.Random(3)
    for name in ("path", "square", "mixed"):
        pattern = NuPattern(name, PATTERNS[name])
        if mode == "anchored":
            pattern = searched(pattern)
        for _ in range(6):
            links = random_links(rng, 10, "abc")
            whole = reports(NuEngine(pattern, mode=mode), links)
            engine = NuEngine(pattern, mode=mode)
            first = engine.push(table(links[:5])).to_pylist()
            restored = NuEngine.restore(engine.snapshot())
            assert first + restored.push(table(links[5:])).to_pylist() == whole


X, Y = Var("X"), Var("Y")
#: anchored, every link between two distinct unknown nodes, then a -> b: every token
#: holds the whole stream read as its witness
EVERY_LINK = NuPattern("p", Concat((
    Repeat(Link(Release(Alloc(("X",), X), ("X",)), Release(Alloc(("Y",), Y), ("Y",)))),
    Link(Const("a"), Const("b")))))


def anchored_state(n: int) -> tuple[dict, int]:
    """The state of the anchored ``EVERY_LINK`` engine after ``n`` links, and its size
    pickled; the engine is checked to report the a -> b that follows with every link."""
    rng = random.Random(n)
    links = [(i, *rng.sample("cdef", 2)) for i in range(n)]
    engine = NuEngine(EVERY_LINK, mode="anchored")
    for start in range(0, n, 100):
        assert engine.push(table(links[start:start + 100])).num_rows == 0
    state = engine.state()
    assert engine.state_size()["edges"] == n
    (row,) = engine.push(table([(n, "a", "b")])).to_pylist()
    assert witness(row) == links + [(n, "a", "b")]
    return state, len(pickle.dumps(state))


def test_tokens_share_the_links_they_read():
    """Every token of the anchored ``EVERY_LINK`` holds the stream read as its witness,
    held once: the snapshot's arena has one link per link read (the last one per token
    that read it), and the state grows linearly with the stream. (Tokens copying their
    witnesses would hold the stream once per token, and copy it at each link: time
    quadratic in the stream.)"""
    sizes = {}
    for n in (500, 2000, 8000):
        state, sizes[n] = anchored_state(n)
        assert len(state["tokens"]) >= 2  # more than one token shares the links
        # the links read once, and the last link once per token that read it
        assert n <= len(state["witnesses"]["t"]) <= n + len(state["tokens"])
    assert sizes[2000] < 4.5 * sizes[500]
    assert sizes[8000] < 4.5 * sizes[2000]
