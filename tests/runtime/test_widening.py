"""Progressive window widening (graphcep.runtime.widening) against independent oracles:
the brute-force SAL matcher (tests/oracle.py) and the detector run over the whole
stream, never PWW's own output."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphcep.jobs import as_job
from graphcep.lang.nu import parse_nu
from graphcep.patterns.subgraph import QueryBuilder
from graphcep.runtime.local import run_job
from graphcep.runtime.widening import Widening, compress, level_plan, levels_for, run_widening
from tests.oracle import brute_force_matches
from tests.widening_oracle import assert_theorem_1

S = 1_000_000
#: a temporal 2-path with no time bound: only the windows bound it
PATH = QueryBuilder("path").edge("a", "e1", "b").edge("b", "e2", "c").before("e1", "e2").build()


def stream(draw, hosts: int = 6, horizon_s: int = 600) -> list[dict]:
    """Random background edges plus injected 2-paths of random durations (1 µs to the
    horizon), in stream order with seq = position."""
    n = draw(st.integers(5, 30))
    rows = [(draw(st.integers(0, horizon_s * S)), f"h{draw(st.integers(0, hosts - 1))}",
             f"h{draw(st.integers(0, hosts - 1))}") for _ in range(n)]
    for i in range(draw(st.integers(1, 4))):
        start = draw(st.integers(0, horizon_s * S))
        gap = 10 ** draw(st.integers(0, 8)) * draw(st.integers(1, 9))
        rows += [(start, f"u{i}", f"v{i}"), (start + gap, f"v{i}", f"w{i}")]
    rows = [r for r in sorted(rows) if r[1] != r[2]]
    return [{"t": t, "src": s, "dst": d, "dur": 0, "seq": q} for q, (t, s, d) in enumerate(rows)]


def span_in_records(seqs: tuple[int, ...]) -> int:
    """Records from an instance's first to its last, both included (seq = position)."""
    return max(seqs) - min(seqs) + 1


def keys_of(matches: pa.Table) -> list[tuple[int, ...]]:
    return [tuple(e["seq"] for e in row) for row in matches.column("edges").to_pylist()]


def leveled(matches: pa.Table) -> list[tuple]:
    levels = matches.column("pww_level").to_pylist()
    return sorted(zip(keys_of(matches), levels, strict=True))


@st.composite
def cases(draw):
    return stream(draw), draw(st.integers(1, 6)), 10 ** draw(st.integers(0, 7))


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_theorem_1_every_instance_of_at_most_L_records_once_and_nothing_else(case):
    edges, keep, base = case
    truth = brute_force_matches(PATH, edges)
    matches, stats = run_widening(as_job(PATH), pa.Table.from_pylist(edges), keep=keep,
                                  base_us=base)
    assert_theorem_1(keys_of(matches), truth, lambda m: span_in_records(m) <= keep)
    for level in stats.levels[1:]:  # Algorithm 2: no combined batch holds more than 2L
        assert level.records_held <= 2 * keep


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(0, 9))
def test_a_duration_bound_fixes_the_levels_and_keeps_instances_within_it(case, power):
    edges, keep, base = case
    bound = 10 ** power
    truth = brute_force_matches(PATH, edges)
    matches, stats = run_widening(as_job(PATH), pa.Table.from_pylist(edges), keep=keep,
                                  base_us=base, max_duration_us=bound)
    times = {e["seq"]: e["t"] for e in edges}
    wanted = {m for m in truth if span_in_records(m) <= keep
              and times[m[-1]] - times[m[0]] <= bound}
    assert wanted <= set(keys_of(matches)) <= truth
    assert len(stats.levels) <= levels_for(base, bound)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.lists(st.integers(1, 7), min_size=1, max_size=10))
def test_micro_batches_report_what_one_batch_reports(case, sizes):
    edges, keep, base = case
    table = pa.Table.from_pylist(edges)
    whole, _ = run_widening(as_job(PATH), table, keep=keep, base_us=base)
    widening, parts, start, i = Widening(as_job(PATH), keep, base), [], 0, 0
    while start < table.num_rows:
        size = sizes[i % len(sizes)]
        parts.append(widening.push(table.slice(start, size)))
        if i % 3 == 2:  # a watermark at the last edge closes nothing that can still grow
            parts.append(widening.advance(edges[min(start + size, len(edges)) - 1]["t"]))
        start, i = start + size, i + 1
    parts.append(widening.flush())
    streamed = pa.concat_tables(parts)
    assert leveled(streamed) == leveled(whole)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_delay_is_report_time_minus_the_last_record_and_report_time_is_a_record(case):
    edges, keep, base = case
    matches, _ = run_widening(as_job(PATH), pa.Table.from_pylist(edges), keep=keep,
                              base_us=base)
    times = {e["t"] for e in edges}
    for row in matches.to_pylist():
        last = max(e["t"] for e in row["edges"])
        assert row["pww_delay_us"] == row["pww_report_t"] - last >= 0
        assert row["pww_report_t"] in times


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases())
def test_a_nu_expression_without_delays_against_its_whole_stream_run(case):
    edges, keep, base = case
    job = as_job(parse_nu("#X ~> #Y . Y ~> #Z", "path"))
    table = pa.Table.from_pylist(edges)
    truth, _ = run_job(job, table)  # the same detector over the whole stream: the reference
    position = {e["seq"]: i for i, e in enumerate(edges)}
    spans = {row["match_id"]: max(position[e["seq"]] for e in row["edges"])
             - min(position[e["seq"]] for e in row["edges"]) + 1 for row in truth.to_pylist()}
    matches, _ = run_widening(job, table, keep=keep, base_us=base)
    found = matches.column("match_id").to_pylist()
    assert len(found) == len(set(found))
    assert set(found) <= set(spans)
    assert {m for m, span in spans.items() if span <= keep} <= set(found)


def test_compress_keeps_exactly_L_records_at_each_end():
    batch = pa.table({"t": np.arange(10), "seq": np.arange(10)})
    assert compress(batch, 3).column("seq").to_pylist() == [0, 1, 2, 7, 8, 9]
    assert compress(batch, 5).num_rows == 10  # not longer than 2L: whole
    assert compress(batch, 6).num_rows == 10


def test_levels_double_and_a_duration_bound_fixes_their_number():
    plan = level_plan(5, 2 * S, 15 * S)
    assert [p.batch_us for p in plan] == [2 * S, 4 * S, 8 * S, 16 * S]  # 16 s > 15 s
    assert [p.window_us for p in plan] == [4 * S, 8 * S, 16 * S, 32 * S]
    assert [p.record_bound for p in plan] == [None, 10, 10, 10]
    assert levels_for(S, 0) == 1 and levels_for(S, S - 1) == 1 and levels_for(S, S) == 2


def test_a_combined_batch_drops_its_middle_and_an_instance_across_it_survives():
    # 20 edges a second; one 2-path from t=0 to t=9.95 s (its edges are the stream's
    # first and last records, 200 apart); L = 2: combining two 1-s batches keeps 2 of
    # their 40 records at each end, and the path's edges are always among them
    rows = [{"t": i * 50_000, "src": f"n{i}", "dst": f"m{i}"} for i in range(200)]
    rows[0] = {"t": 0, "src": "x", "dst": "y"}
    rows[199] = {"t": 9_950_000, "src": "y", "dst": "z"}
    matches, stats = run_widening(as_job(PATH), pa.Table.from_pylist(rows), keep=2,
                                  base_us=S)
    assert keys_of(matches) == [(1, 200)]  # seq: the 1-based row number
    assert matches.column("pww_level").to_pylist() == [3]  # 8-s batches: 0 s and 9.95 s adjacent
    assert stats.levels[0].dropped > 0 and all(s.records_held <= 4 for s in stats.levels[1:])
