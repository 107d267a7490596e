"""``report="new"``: each report holds only the edge pairs of its match component that no
earlier report held (and the vertex pairs at their ends), for all three DDST engines."""

from __future__ import annotations

from unittest import mock

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.engines.ddst.baseline import DDSTBaselineEngine
from graphcep.engines.ddst.coloring import DDSTColoringEngine
from graphcep.engines.ddst.reports import ReportedPairs
from graphcep.engines.ddst.signature import DDSTSignatureEngine
from graphcep.patterns.ddst import DDSTQuery
from tests import ddst_oracle as oracle
from tests.engines.test_ddst_baseline import (
    EXAMPLE_5,
    EXAMPLE_5_STREAM,
    queries,
    reported,
    streams,
    table,
)

ENGINES = {
    "baseline": lambda q, **kw: DDSTBaselineEngine(q, **kw),
    "signature": lambda q, **kw: DDSTSignatureEngine(q, p=5, **kw),
    "coloring": lambda q, **kw: DDSTColoringEngine(q, **kw),
}


def new_reports(query: DDSTQuery, stream: list[dict]) -> list[tuple]:
    """The oracle's reports, each cut to the edge pairs no earlier report held, with the
    vertex pairs at the ends of those (a stream vertex is its id with the edge's label)."""
    ends = {e.name: (e.src, e.dst) for e in query.edges}
    by_seq = {e["seq"]: e for e in stream}
    seen: set[tuple[str, int]] = set()
    out = []
    for trigger, _, pairs in oracle.reports(query, stream):
        new = frozenset(p for p in pairs if p not in seen)
        seen |= new
        vertices = set()
        for qedge, seq in new:
            e, (u, v) = by_seq[seq], ends[qedge]
            vertices |= {(u, e["src"], e["src_label"]), (v, e["dst"], e["dst_label"])}
        out.append((trigger, frozenset(vertices), new))
    return out


def run(name: str, query: DDSTQuery, stream: list[dict], cuts: list[int],
        report: str) -> pa.Table:
    """One engine's output over the stream pushed in pieces, restored between pieces."""
    engine = ENGINES[name](query, report=report)
    parts = []
    bounds = sorted({0, len(stream), *cuts})
    for lo, hi in zip(bounds, bounds[1:], strict=False):
        parts.append(engine.push(table(stream[lo:hi])))
        engine = type(engine).restore(engine.snapshot())
    return pa.concat_tables(parts)


@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_new_pairs_equal_the_oracle_for_every_engine(data):
    """Random queries and streams (time and count windows), in pieces with restores; the
    pairs that left the window are swept after every report or after many."""
    query = data.draw(queries(), "query")
    stream = data.draw(streams(query, apart=data.draw(st.booleans())), "stream")
    cuts = data.draw(st.lists(st.integers(0, len(stream)), max_size=3), "cuts")
    sweep = data.draw(st.sampled_from([0, 1024]), "first sweep")
    expected = new_reports(query, stream)
    with mock.patch.object(ReportedPairs, "first_limit", sweep):
        for name in ENGINES:
            got = run(name, query, stream, cuts, "new")
            assert reported(got) == expected, name
            whole = run(name, query, stream, [], "component")
            for column in ("trigger_seq", "match_id", "window_start", "window_end", "first_t"):
                assert got.column(column).equals(whole.column(column)), (name, column)


def test_example_5_second_report_holds_only_what_is_new():
    """Example 5's stream: the report at 95 s repeats none of the 50 s report's pairs."""
    first, second = reported(DDSTBaselineEngine(EXAMPLE_5, report="new").push(
        table(EXAMPLE_5_STREAM)))
    assert first[2] and second[2] and not first[2] & second[2]
    whole = reported(DDSTBaselineEngine(EXAMPLE_5).push(table(EXAMPLE_5_STREAM)))
    assert first[2] | second[2] == whole[0][2] | whole[1][2]


@pytest.mark.parametrize("name", list(ENGINES))
def test_unknown_report_mode_is_refused(name):
    with pytest.raises(ValueError, match="report must be one of component, new"):
        ENGINES[name](EXAMPLE_5, report="delta")
