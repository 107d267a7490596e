"""The compiled subscriptions engine (a trie of all patterns) against brute-force matching
from the paper's definitions (tests/sequences_oracle.py), through adds and removes, and
against the naive engine's records field by field."""

from __future__ import annotations

import random

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.engines.sequences.compiled import CompiledSequenceEngine
from graphcep.engines.sequences.engine import NaiveSequenceEngine
from graphcep.engines.sequences.trie import tokens
from graphcep.engines.sequences.trie_arrays import Trie
from graphcep.patterns.sequences import SequencePattern, Var, parse_items
from tests.sequences_oracle import expected_notifications, occurrences


def pattern(text: str) -> SequencePattern:
    return SequencePattern(parse_items(text))


class Run:
    """A compiled and a naive engine fed the same changes and edges, and what the oracle
    needs: each key's ``(symbol, arrival, seq, t)`` and each subscription's life."""

    def __init__(self) -> None:
        self.engine = CompiledSequenceEngine(key="key", symbol="sym")
        self.naive = NaiveSequenceEngine(key="key", symbol="sym")
        self.added: dict[str, tuple] = {}
        self.sequences: dict[str, list[tuple]] = {}
        self.rows: list[dict] = []
        self.naive_rows: list[dict] = []
        self.n = 0

    def add(self, sid: str, p: SequencePattern) -> None:
        self.engine.add(sid, p)
        self.naive.add(sid, p)
        self.added[(sid, self.n)] = (p, self.n, None)  # one life of the id

    def remove(self, sid: str) -> None:
        self.engine.remove(sid)
        self.naive.remove(sid)
        life = max(k for k in self.added if k[0] == sid)
        self.added[life] = (*self.added[life][:2], self.n)

    def pattern_of(self, sid: str, arrival: int) -> SequencePattern:
        """The pattern of the life of ``sid`` in force at ``arrival``."""
        return self.added[max(k for k in self.added if k[0] == sid and k[1] <= arrival)][0]

    def push(self, keys: list, symbols: list) -> None:
        k = len(keys)
        batch = pa.table({"t": list(range(10 * self.n, 10 * (self.n + k), 10)),
                          "src": [str(x) for x in keys], "dst": [f"d{i}" for i in range(k)],
                          "key": pa.array(keys, pa.string()), "sym": pa.array(symbols, pa.string()),
                          "seq": list(range(self.n, self.n + k))})
        self.rows += self.engine.push(batch).to_pylist()
        self.naive_rows += self.naive.push(batch).to_pylist()
        for key, s in zip(keys, symbols, strict=True):
            if key is not None and s is not None:
                self.sequences.setdefault(key, []).append((s, self.n, self.n, 10 * self.n))
            self.n += 1

    def check(self) -> None:
        """Every notification the oracle expects, once, with its bindings and edges; and
        the naive engine's records, field for field."""
        expected = expected_notifications(self.added, {
            k: [(s, a) for s, a, _, _ in seq] for k, seq in self.sequences.items()})
        found = [(r["subscription"], r["key"], r["start"]) for r in self.rows]
        assert len(found) == len(set(found))
        assert set(found) == {(sid, key, start) for (sid, _), key, start in expected}
        for r in self.rows:
            seq = self.sequences[r["key"]]
            p = self.pattern_of(r["subscription"], seq[r["start"]][1])
            window = seq[r["start"]:r["start"] + len(p)]
            ((_, valuation),) = occurrences(p.items, [s for s, *_ in window])
            assert {b["var"]: b["value"] for b in r["bindings"]} == \
                {v.name: s for v, s in valuation.items()}
            assert [b["var"] for b in r["bindings"]] == list(p.variables())
            assert [(e["seq"], e["t"]) for e in r["edges"]] == [(q, t) for _, _, q, t in window]
            assert r["end"] == r["start"] + len(p) - 1
            assert (r["start_t"], r["end_t"]) == (window[0][3], window[-1][3])
        assert sorted(self.rows, key=lambda r: r["match_id"]) == \
            sorted(self.naive_rows, key=lambda r: r["match_id"])


def random_pattern(rng: random.Random, alphabet: str, live: dict) -> SequencePattern:
    roll = rng.random()
    if live and roll < 0.2:  # an equal pattern under another id
        return live[rng.choice(sorted(live))]
    if live and roll < 0.4:  # a refinement: a live pattern made longer
        base = live[rng.choice(sorted(live))].items
        more = tuple(rng.choice(alphabet) if rng.random() < 0.5 else Var(rng.choice("xyz"))
                     for _ in range(rng.randint(1, 3)))
        return SequencePattern(base + more)
    return SequencePattern(tuple(
        rng.choice(alphabet) if rng.random() < 0.5 else Var(rng.choice("xyzw"))
        for _ in range(rng.randint(1, 7))))


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 2**32))
def test_compiled_engine_equals_the_oracle_through_adds_and_removes(seed):
    rng = random.Random(seed)
    alphabet = "abcd"[:rng.randint(1, 4)]
    run, live = Run(), {}
    for _ in range(rng.randint(1, 10)):
        for _ in range(rng.randint(0, 4)):
            if live and rng.random() < 0.35:
                sid = rng.choice(sorted(live))
                del live[sid]
                run.remove(sid)
            else:
                sid = f"s{len(run.added)}"
                live[sid] = random_pattern(rng, alphabet, live)
                run.add(sid, live[sid])
        k = rng.randint(0, 12)
        keys = [rng.choice(["u", "v", "w", None] if rng.random() < 0.1 else ["u", "v"])
                for _ in range(k)]
        symbols = [None if rng.random() < 0.05 else rng.choice(alphabet) for _ in range(k)]
        run.push(keys, symbols)
    run.check()


def test_equal_patterns_refinements_and_variables_binding_constants():
    run = Run()
    for sid, text in [("p", "a.@x.a"), ("q", "a.@x.a"), ("r", "a.@y.a.@y"), ("s", "@x.@y.@x"),
                      ("t", "a.@x.@y"), ("u", "@x.@x")]:
        run.add(sid, pattern(text))
    run.push(["h"] * 6, list("aaaaba"))  # @x binds a, which the pattern names as a constant
    run.check()
    starts = {(r["subscription"], r["start"]) for r in run.rows}
    assert {("p", 0), ("q", 0), ("r", 0), ("s", 0), ("u", 0), ("u", 1)} <= starts


def test_patterns_longer_than_the_sequence_and_trailing_variables():
    run = Run()
    run.add("long", pattern(".".join("abcdefghijkl")))
    run.add("tail", pattern("a.@x"))
    run.push(["h"] * 3, list("abc"))
    run.push(["h"] * 9, list("defghijkl"))  # the long one completes across pushes
    run.push(["h"], ["a"])  # a.@x waits for one more symbol
    assert [r["subscription"] for r in run.rows] == ["tail", "long"]
    run.push(["h"], ["z"])
    run.check()
    assert run.rows[-1]["bindings"] == [{"var": "x", "value": "z"}]


def test_keys_are_separate_sequences_and_nulls_belong_to_none():
    run = Run()
    run.add("abc", pattern("a.b.c"))
    run.push(["h", "g", "h", None, "h", "g", "g"], ["a", "a", "b", "x", "c", "b", None])
    run.push(["g", "h"], ["c", "x"])
    run.check()
    assert sorted((r["key"], r["start"]) for r in run.rows) == [("g", 0), ("h", 0)]


def test_add_and_remove_between_pushes():
    run = Run()
    run.add("ab", pattern("a.b"))
    run.push(["h", "h"], ["x", "a"])
    run.add("late", pattern("a.b"))  # the a before the add: no occurrence for late
    run.push(["h", "h", "h"], ["b", "a", "b"])
    run.remove("ab")
    run.push(["h", "h"], ["a", "b"])
    run.add("ab", pattern("@x.b"))  # the id again, another pattern
    run.add("re", pattern("a.b"))
    run.push(["h", "h"], ["a", "b"])
    assert [(r["subscription"], r["start"]) for r in run.rows] == \
        [("ab", 1), ("ab", 3), ("late", 3), ("late", 5), ("late", 7), ("ab", 7), ("re", 7)]
    run.check()
    with pytest.raises(ValueError):
        run.engine.add("re", pattern("a"))
    with pytest.raises(KeyError):
        run.engine.remove("nobody")


def test_many_keys_and_pushes_compact_the_store():
    rng = random.Random(7)
    run = Run()
    for i in range(30):
        run.add(f"p{i}", random_pattern(rng, "abc", {}))
    for _ in range(80):  # more pushes than the store keeps pieces
        keys = [rng.randrange(40) for _ in range(25)]
        run.push([str(k) for k in keys], [rng.choice("abc") for _ in keys])
    assert len(run.engine.store.pieces) < 80 and run.engine.store.size < 80 * 25
    run.check()


def test_snapshot_restores_keys_history_and_subscriptions():
    rng = random.Random(3)
    whole, cut = CompiledSequenceEngine(), CompiledSequenceEngine()
    for i in range(20):
        p = random_pattern(rng, "ab", {})
        whole.add(f"p{i}", p)
        cut.add(f"p{i}", p)
    batches = [pa.table({"t": list(range(i * 30, i * 30 + 30)),
                         "src": [rng.choice("hg") for _ in range(30)],
                         "dst": [rng.choice("ab") for _ in range(30)]}) for i in range(4)]
    expected = [r for b in batches for r in whole.push(b).to_pylist()]
    got = cut.push(batches[0]).to_pylist()
    cut = CompiledSequenceEngine.restore(cut.snapshot())
    cut.remove("p3")
    cut.add("p3", whole.patterns["p3"])  # re-added: reports what starts from now on
    for b in batches[1:]:
        got += cut.push(b).to_pylist()
    assert [r for r in expected if r["subscription"] != "p3"] == \
        [r for r in got if r["subscription"] != "p3"]
    assert {r["match_id"] for r in got if r["subscription"] == "p3"} <= \
        {r["match_id"] for r in expected if r["subscription"] == "p3"}


def test_the_trie_shares_prefixes_and_frees_what_no_path_passes():
    trie, symbols = Trie(), {}
    texts = ["a.@x.@x", "a.@x.b", "a.@x.b", "@x.@y.@x", "@x.@y.@y"]
    slots = [trie.add(tokens(pattern(t).marked(), symbols), 0) for t in texts]
    # root, a, a.@x, a.@x.@x, a.@x.b, @x, @x.@y, @x.@y.@x(back 0), @x.@y.@y(back 1)
    assert trie.live_nodes() == 9
    trie.remove(slots[1])
    assert trie.live_nodes() == 9  # a.@x.b is still subscribed (slot 2)
    for slot in slots[2:]:
        trie.remove(slot)
    assert trie.live_nodes() == 4
    again = trie.add(tokens(pattern("@x.@y.@x").marked(), symbols), 0)
    assert again in slots and trie.live_nodes() == 7


def test_a_push_finding_more_occurrences_than_the_kernel_has_room_for():
    run = Run()
    run.add("any", pattern("@x"))
    run.add("pair", pattern("@x.@y.@x"))
    rng = random.Random(5)
    run.push(["h"] * 3000, [rng.choice("ab") for _ in range(3000)])
    assert len(run.rows) > 4000
    run.check()


def test_thousands_of_changes_grow_the_trie_and_stay_exact():
    """Past the first sizes of every array (nodes, table, slots, the root's symbols), with
    about half the subscriptions removed between pushes."""
    rng = random.Random(11)
    common, rare = "abcde", [f"r{i}" for i in range(300)]

    def item():
        roll = rng.random()
        if roll < 0.35:
            return Var(rng.choice("xyz"))
        return rng.choice(common) if roll < 0.85 else rng.choice(rare)

    engine, added, sequences, rows, n = CompiledSequenceEngine(), {}, {}, [], 0
    for round_ in range(3):
        for i in range(1500):
            sid = f"p{round_}-{i}"
            p = SequencePattern(tuple(item() for _ in range(rng.randint(1, 6))))
            engine.add(sid, p)
            added[sid] = (p, n, None)
        for sid in rng.sample(sorted(engine.patterns), 700):
            engine.remove(sid)
            added[sid] = (*added[sid][:2], n)
        keys = [rng.choice("uv") for _ in range(40)]
        symbols = [rng.choice(common) if rng.random() < 0.95 else rng.choice(rare)
                   for _ in keys]
        rows += engine.push(pa.table({"t": list(range(n, n + 40)), "src": keys,
                                      "dst": symbols})).to_pylist()
        for key, s in zip(keys, symbols, strict=True):
            sequences.setdefault(key, []).append((s, n))
            n += 1
    assert len(engine.trie.nodes) > 1024 and len(engine.trie.root) > 256
    assert len(rows) > 1000
    found = [(r["subscription"], r["key"], r["start"]) for r in rows]
    assert len(found) == len(set(found))
    assert set(found) == expected_notifications(added, sequences)


def test_the_arrays_grow_a_few_rows_per_change_and_pushes_between_stay_exact(monkeypatch):
    """Subscriptions added and removed one at a time with pushes in between, the larger
    arrays built while the trie works (pushes read the current ones). No change ever
    finishes the copy at once, none copies more rows than its step, a checkpoint taken
    meanwhile restores, and every notification is the oracle's."""
    from graphcep.engines.sequences import trie_arrays

    def refuse(self, trie):
        raise AssertionError("a change finished the copy at once")

    steps = []
    step = trie_arrays._Larger.step
    monkeypatch.setattr(trie_arrays._Larger, "finish", refuse)
    monkeypatch.setattr(trie_arrays._Larger, "step",
                        lambda self, trie, rows: steps.append(rows) or step(self, trie, rows))
    rng = random.Random(23)
    run, live, during, restored = Run(), [], 0, False
    for i in range(1800):
        if live and rng.random() < 0.3:
            run.remove(live.pop(rng.randrange(len(live))))
        else:
            items = [rng.choice([*"abcdefghijkl", Var("x"), Var("y")])
                     for _ in range(rng.randint(1, 7))]
            run.add(f"s{i}", SequencePattern(tuple(items)))
            live.append(f"s{i}")
        if i % 25 == 0:
            during += run.engine.trie.larger is not None
            if during == 3 and not restored:  # a checkpoint taken while the copy runs
                run.engine, restored = CompiledSequenceEngine.restore(run.engine.snapshot()), True
            run.push([rng.choice("uv") for _ in range(8)], [rng.choice("abc") for _ in range(8)])
    trie = run.engine.trie
    assert len(trie.nodes) >= 4096 and len(trie.subs) >= 2048 and during >= 5 and restored
    assert max(steps) == trie_arrays.STEP_PER_NODE * 8  # patterns of at most 7 items
    run.check()
