"""Progressive window widening around pattern subscriptions, against the brute-force
occurrences of each key's whole sequence (tests/sequences_oracle.py): every occurrence
whose records span at most L stream records is reported once, with the stream's
positions, and nothing else -- in particular nothing across a dropped middle."""

from __future__ import annotations

import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphcep.jobs.sequences import SubscriptionJob
from graphcep.lang.sequences import parse_subscriptions
from graphcep.patterns.sequences import parse_items
from graphcep.runtime.widening import Widening, run_widening
from tests.sequences_oracle import occurrences
from tests.widening_oracle import assert_theorem_1

S = 1_000_000


@st.composite
def cases(draw):
    n = draw(st.integers(3, 40))
    times = sorted(draw(st.integers(0, 10 ** draw(st.integers(1, 4)))) * S // 10
                   for _ in range(n))
    edges = [{"t": t, "seq": q, "src": draw(st.sampled_from(["h", "g", "k"])), "dst": "d",
              "sym": draw(st.sampled_from("abc"))} for q, t in enumerate(times)]
    for row in edges:  # a few records that belong to no sequence
        if draw(st.integers(0, 9)) == 0:
            row["sym"] = None
    item = st.sampled_from(["a", "b", "c", "@x", "@y"])
    patterns = [".".join(draw(st.lists(item, min_size=1, max_size=4)))
                for _ in range(draw(st.integers(1, 3)))]
    return edges, patterns, draw(st.integers(1, 8)), 10 ** draw(st.integers(4, 7))


def truth(edges: list[dict], patterns: list[str]) -> set[tuple]:
    """``(id, key, start, end, seqs)`` of every occurrence in each key's whole sequence."""
    sequences: dict[str, list[dict]] = {}
    for row in edges:
        if row["sym"] is not None:
            sequences.setdefault(row["src"], []).append(row)
    found = set()
    for i, text in enumerate(patterns):
        items = tuple(i if isinstance(i, str) else ("var", i.name)
                      for i in parse_items(text))
        for key, rows in sequences.items():
            for start, _ in occurrences(items, [r["sym"] for r in rows]):
                end = start + len(items) - 1
                found.add((f"s{i}", key, start, end,
                           tuple(r["seq"] for r in rows[start:end + 1])))
    return found


def reported(matches: pa.Table) -> list[tuple]:
    return [(r["subscription"], r["key"], r["start"], r["end"],
             tuple(e["seq"] for e in r["edges"])) for r in matches.to_pylist()]


def job_of(patterns: list[str], symbol: str = "sym") -> SubscriptionJob:
    text = "\n".join(f"s{i}: {p}" for i, p in enumerate(patterns))
    return SubscriptionJob(parse_subscriptions(text, "subs"), key="src", symbol=symbol)


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_every_occurrence_of_at_most_L_records_once_with_the_streams_positions(case):
    edges, patterns, keep, base = case
    expected = truth(edges, patterns)
    matches, _ = run_widening(job_of(patterns), pa.Table.from_pylist(edges), keep=keep,
                              base_us=base)
    assert_theorem_1(reported(matches), expected, lambda o: o[4][-1] - o[4][0] + 1 <= keep)


def test_a_dropped_middle_joins_no_records():
    """h's a, b, c, a, d, e, f, g, one a second, L = 1, T0 = 1 s: level 2's batches keep
    one record at each end (a..a and d..g), and its window reads a, a, d, g. ``@x.@x``
    occurs nowhere in h's sequence, so nothing may be reported (without the stream's
    positions the kept a, a looked adjacent)."""
    edges = pa.table({"t": [k * S for k in range(8)], "seq": list(range(8)),
                      "src": ["h"] * 8, "dst": list("abcadefg")})
    matches, stats = run_widening(job_of(["@x.@x"], "dst"), edges, keep=1, base_us=S)
    assert stats.levels[2].windows >= 1  # the window with the dropped middles ran
    assert reported(matches) == []


def test_a_restored_widening_numbers_on_from_its_checkpoint():
    """The keys' counters travel with the widening's snapshot: the stream's positions
    stay the stream's after a restart."""
    job = job_of(["a.b"], "dst")
    first = Widening(job, keep=4, base_us=S)
    first.push(pa.table({"t": [0, S], "seq": [0, 1], "src": ["h", "h"], "dst": ["c", "a"]}))
    restored = Widening.restore(first.snapshot(), **first.restore_context())
    out = pa.concat_tables([restored.push(pa.table({"t": [2 * S], "seq": [2], "src": ["h"],
                                                    "dst": ["b"]})), restored.flush()])
    assert [(r["start"], r["end"]) for r in out.to_pylist()] == [(1, 2)]
