"""A running subscriptions stream is paused by emptying its file: every subscription is
removed (one line says so), nothing is reported meanwhile, and refilling the file resumes
from the stream position of the edit."""

from __future__ import annotations

import pyarrow as pa

from tests.runtime.test_subs_stream import Run, S


def test_emptying_the_subscriptions_file_pauses_the_stream(tmp_path):
    """One key reading a, b, a, b, ...: ``ab: a.b`` in force for batch 0; the file emptied
    (a comment left) before batch 1 (3 edges released) removes it; refilled before batch 3
    (9 released) it reports the occurrences starting at position 9 or later, as the
    oracle of positions says: a at even positions, each followed by b."""
    table = pa.table({"t": [i * S for i in range(16)], "src": ["h"] * 16,
                      "dst": ["a", "b"] * 8, "seq": list(range(1, 17))})
    source = tmp_path / "s.subs"
    source.write_text("ab: a.b\n")
    run = Run(tmp_path, source)
    run.process(0, table.slice(0, 4))     # releases positions 0..2
    source.write_text("# paused\n")
    run.process(1, table.slice(4, 4))     # releases 3..6
    run.process(2, table.slice(8, 2))     # releases 7..8
    source.write_text("ab: a.b\n")
    run.process(3, table.slice(10, 6))    # releases 9..14
    run.flush()                           # releases 15
    starts = sorted(r["start"] for t in run.parts.values() for r in t.to_pylist())
    # in force: the occurrence at 0 (complete at 1); after the refill at 9: 10, 12, 14
    assert starts == [0, 10, 12, 14]
    assert run.notes == ["subscriptions: +0 -1 (s.subs, from stream position 3): removed ab",
                         "subscriptions: +1 -0 (s.subs, from stream position 9): added ab"]
