"""The streaming operator: event time with lateness, late edges, checkpoints and re-runs.

Oracle: the brute-force matcher on the edges that are *not* late, where lateness is
worked out here from the arrival order alone (an edge is late when it is more than the
allowed lateness behind the newest edge of an earlier batch).
"""

from __future__ import annotations

import json
import os
import pickle
import stat

import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphcep.engines.difference_bounds import UnboundedQueryError, UnsatisfiableQueryError
from graphcep.events import table_to_matches
from graphcep.io.sinks import JsonlSink
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.patterns.program import Program
from graphcep.runtime.streaming.driver import PartWriter, StreamOperator
from tests.engines.test_subgraph_engine import random_query, random_stream
from tests.oracle import brute_force_matches

S = 1_000_000
TRIANGLE = """{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);
                starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }"""


#: A query with a vertex feature (top-k destinations), which no partition of the stream sees.
FEATURE_QUERY = """
    Netflows = VastStream("localhost", 9999);
    Top = FOREACH Netflows GENERATE topk(DestIp, 100, 10, 3);
    SUBGRAPH ON Netflows WITH source(SourceIp) AND target(DestIp) {
        a e1 b; a e2 c; b in Top; starttime(e1) < starttime(e2);
        starttime(e2) - starttime(e1) <= 5; }"""


def job_of(query, max_duration_us: int = 2_500_000) -> SubgraphJob:
    return SubgraphJob.create(Program(queries=[query]), max_duration_us=max_duration_us)


def keys(tables: list[pa.Table]) -> list[tuple[int, ...]]:
    return [tuple(e.seq for e in m.edges) for t in tables for m in table_to_matches(t)]


def arrival_batches(table: pa.Table, delays: list[int], cuts: list[int]) -> list[pa.Table]:
    """Edges re-ordered by ``t + delay`` (their arrival), cut into batches at ``cuts``."""
    order = sorted(range(table.num_rows), key=lambda i: (table["t"][i].as_py() + delays[i], i))
    arrived = table.take(pa.array(order, pa.int64()))
    bounds = sorted({0, arrived.num_rows, *(c % (arrived.num_rows + 1) for c in cuts)})
    return [arrived.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]


def late_seqs(batches: list[pa.Table], lateness: int) -> set[int]:
    """Seqs of the edges more than ``lateness`` behind the newest edge of earlier batches."""
    late, newest = set(), None
    for batch in batches:
        for row in batch.to_pylist():
            if newest is not None and row["t"] < newest - lateness:
                late.add(row["seq"])
        on_time = [r["t"] for r in batch.to_pylist() if r["seq"] not in late]
        if on_time:
            newest = max([newest, *on_time]) if newest is not None else max(on_time)
    return late


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(query=random_query(), table=random_stream(), homomorphic=st.booleans(),
       delays=st.lists(st.sampled_from([0, 0, S // 2, S, 3 * S, 6 * S]), min_size=14,
                       max_size=14),
       cuts=st.lists(st.integers(0, 14), max_size=5), lateness=st.sampled_from([0, S, 4 * S]))
def test_out_of_order_stream_matches_like_the_sorted_stream(query, table, homomorphic, delays,
                                                            cuts, lateness):
    job = job_of(query)
    job.homomorphic = homomorphic
    collected: list[pa.Table] = []
    try:
        op = StreamOperator(job, lateness_us=lateness,
                            on_matches=lambda matches, _: collected.append(matches))
    except UnsatisfiableQueryError:
        return
    batches = arrival_batches(table, delays, cuts)
    late = late_seqs(batches, lateness)
    reported_late = sum(op.process(batch_id, batch).late for batch_id, batch in enumerate(batches))
    op.flush()
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    expected = brute_force_matches(query, on_time, homomorphic)
    got = keys(collected)
    assert len(got) == len(set(got)), "a match was reported twice"
    assert set(got) == expected
    assert reported_late == len(late) == op.totals.late


def test_late_edges_are_written_out_and_counted(tmp_path):
    job = SubgraphJob.create(parse_program(TRIANGLE))
    late_dir = tmp_path / "late"
    op = StreamOperator(job, lateness_us=2 * S, late_sink=PartWriter(late_dir))
    edge = {"t": 0, "src": "", "dst": "", "seq": 0}
    rows = [[dict(edge, t=10 * S, src="a", dst="b", seq=1)],
            [dict(edge, t=7 * S, src="b", dst="c", seq=2),  # 3 s behind: late
             dict(edge, t=8 * S, src="c", dst="d", seq=3)]]  # exactly 2 s behind: on time
    for batch_id, batch in enumerate(rows):
        op.process(batch_id, pa.Table.from_pylist(batch))
    written = [json.loads(line) for line in (late_dir / "part-00000001.jsonl").read_text().splitlines()]
    # times in seconds, as in the match output; no file names given: line is the seq
    assert [(r["seq"], r["t"], r["file"], r["line"]) for r in written] == [(2, 7, None, 2)]
    assert op.totals.late == 1 and op.totals.edges == 3


def test_restart_from_checkpoint_and_rerun_of_a_batch_lose_and_repeat_nothing(tmp_path):
    from graphcep.io.generator import generate_netflow

    table = generate_netflow(3_000, 40, 100, seed=5).select(["t", "src", "dst", "dur", "seq"])
    # shuffle within 2 s so the reorder buffer is exercised
    batches = arrival_batches(table, [(i * 7919) % (2 * S) for i in range(table.num_rows)],
                              list(range(0, 3_000, 250)))
    job = SubgraphJob.create(parse_program(TRIANGLE))

    def operator(directory) -> StreamOperator:
        return StreamOperator(job, lateness_us=2 * S, checkpoint=directory / "ckpt",
                              sink=JsonlSink(directory / "out", directory=True))

    straight = operator(tmp_path / "a")
    for batch_id, batch in enumerate(batches):
        straight.process(batch_id, batch)
    straight.flush()

    restarted = operator(tmp_path / "b")
    for batch_id, batch in enumerate(batches):
        if batch_id in (3, 7):  # the process died after writing batch-1 ... or mid-batch
            restarted = operator(tmp_path / "b")
        if batch_id == 5:  # Spark re-runs batch 5 after a crash that followed its sink write
            restarted.process(batch_id, batch)
            restarted = operator(tmp_path / "b")
        restarted.process(batch_id, batch)
    operator(tmp_path / "b").flush()  # a fresh process flushes from the checkpoint

    def output(directory) -> list[str]:
        return sorted(line for part in sorted((directory / "out").glob("part-*.jsonl"))
                      for line in part.read_text().splitlines())

    first = output(tmp_path / "a")
    assert len(first) > 10, "the stream should hold triangles"
    assert output(tmp_path / "b") == first
    ids = [json.loads(line)["match_id"] for line in first]
    assert len(ids) == len(set(ids))


def run_with_restarts(job, batches, directory, restart_at=(), lateness=0,
                      snapshot_interval: float = 30.0) -> list[pa.Table]:
    """Matches of ``batches`` through operators that are replaced (a restart from the
    checkpoint) before the batches in ``restart_at``; flushed at the end."""
    found: list[pa.Table] = []

    def operator() -> StreamOperator:
        return StreamOperator(job, lateness_us=lateness, checkpoint=directory,
                              on_matches=lambda m, _: found.append(m),
                              snapshot_interval=snapshot_interval)

    op = operator()
    for batch_id, batch in enumerate(batches):
        if batch_id in restart_at:
            op = operator()
        op.process(batch_id, batch)
    operator().flush()
    return found


@pytest.mark.parametrize("interval", [0.0, float("inf")])
def test_feature_queries_restart_from_a_snapshot_and_the_batches_since(tmp_path, interval):
    """A feature query's engine is snapshotted (every batch, or only after the first and
    at a restart's first batch: then a restart replays the batches since the last
    snapshot through the restored engine) and restarts to the matches of a run that never
    stopped, each once."""
    from graphcep.io.generator import generate_netflow

    job = SubgraphJob.create(parse_program(FEATURE_QUERY), fmt="vast")
    table = generate_netflow(1_500, 30, 100, seed=9)
    batches = [table.slice(i, 150) for i in range(0, 1_500, 150)]
    straight = keys(run_with_restarts(job, batches, tmp_path / "a"))
    restarted = keys(run_with_restarts(job, batches, tmp_path / "b", restart_at=(2, 5, 6),
                                       snapshot_interval=interval))
    assert straight and sorted(restarted) == sorted(straight)
    state = tmp_path / "b" / "state"
    snapshots = sorted(p.name for p in state.glob("engine-*.bin"))
    logged = list(state.glob("released-*.arrow"))
    if interval == 0:  # the newest two states' snapshots; their logs empty
        assert snapshots == ["engine-000000000008.bin", "engine-000000000009.bin"]
        assert len(logged) <= 1
    else:  # restarts before 2 and 5 replayed (6's did not: 5 had just snapshotted)
        assert snapshots == ["engine-000000000005.bin"] and len(logged) == 4  # 6 to 9


def test_state_is_written_compressed_and_an_earlier_uncompressed_one_still_restarts(tmp_path):
    """The engine's snapshot is compressed (a feature query's: most of its bytes are
    small integers); a checkpoint as an earlier graphcep wrote it -- one bare pickle, the
    engine's snapshot inside -- restarts as well, to the matches of a run without
    restarts."""
    from graphcep.io.generator import generate_netflow
    from graphcep.runtime.streaming.checkpoint_bytes import decompressed

    job = SubgraphJob.create(parse_program(FEATURE_QUERY), fmt="vast")
    table = generate_netflow(1_500, 30, 100, seed=9)
    batches = [table.slice(i, 150) for i in range(0, 1_500, 150)]
    straight = keys(run_with_restarts(job, batches, tmp_path / "a"))
    directory, found = tmp_path / "b", []

    def operator() -> StreamOperator:
        return StreamOperator(job, lateness_us=0, checkpoint=directory, snapshot_interval=0,
                              on_matches=lambda m, _: found.append(m))

    op = operator()
    for batch_id, batch in enumerate(batches):
        if batch_id in (3, 7):
            newest = sorted((directory / "state").glob("state-*.bin"))[-1]
            state = pickle.loads(decompressed(newest.read_bytes()))
            engine_file = directory / "state" / f"engine-{state.engine_batch:012d}.bin"
            packed = engine_file.read_bytes()
            bare = decompressed(packed)
            assert len(packed) < len(bare) // 2 and state.log == []
            state.engine, state.features = pickle.loads(bare)
            del state.engine_batch  # as an earlier graphcep left it
            engine_file.unlink()
            newest.write_bytes(pickle.dumps(state))
            op = operator()
        op.process(batch_id, batch)
    operator().flush()
    assert straight and sorted(keys(found)) == sorted(straight)


def test_window_log_stays_within_the_extent(tmp_path):
    from graphcep.io.generator import generate_netflow

    job = SubgraphJob.create(parse_program(TRIANGLE))
    table = generate_netflow(6_000, 50, 100, seed=2).select(["t", "src", "dst", "seq"])
    batches = [table.slice(i, 200) for i in range(0, 6_000, 200)]  # 2 s per batch
    straight = keys(run_with_restarts(job, batches, tmp_path / "a"))
    restarted = keys(run_with_restarts(job, batches, tmp_path / "b", restart_at=(4, 17, 18)))
    assert straight and sorted(restarted) == sorted(straight)
    logged = sorted((tmp_path / "b" / "state").glob("released-*.arrow"))
    # a 10 s extent is 5-6 batches of 2 s; the previous state may still list one more
    assert 5 <= len(logged) <= 8


def test_ddst_queries_stream_like_the_batch_engine(tmp_path):
    from graphcep.engines.ddst.baseline import DDSTBaselineEngine
    from graphcep.jobs.ddst import DDSTJob
    from graphcep.lang.ddst import parse_ddst

    query = parse_ddst("""QUERY spread; VERTICES A:M, B:M, C:M;
        EDGES AB: A -> B [x]; CA: C -> A [x]; ORDER AB < CA; WITHIN 20 s;""")
    rows = [(t, f"v{(t * 7) % 5}", f"v{(t * 3 + 1) % 5}") for t in range(60)]
    table = pa.table({"t": [r[0] * S for r in rows], "src": [r[1] for r in rows],
                      "dst": [r[2] for r in rows], "label": ["x"] * 60,
                      "src_label": ["M"] * 60, "dst_label": ["M"] * 60,
                      "seq": list(range(1, 61))})
    expected = DDSTBaselineEngine(query).push(table)
    batches = [table.slice(i, 7) for i in range(0, 60, 7)]
    got = run_with_restarts(DDSTJob(query), batches, tmp_path, restart_at=(3, 4))
    got = pa.concat_tables(got)
    assert got.column("trigger_seq").to_pylist() == expected.column("trigger_seq").to_pylist()
    assert got.column("match_id").to_pylist() == expected.column("match_id").to_pylist()
    assert expected.num_rows > 3


def test_nu_patterns_stream_like_the_batch_engine(tmp_path):
    """A ν-expression through the streaming operator, out of order within the lateness and
    restarted from its checkpoint twice, reports what one engine reports on the sorted
    stream: the same matches, each once."""
    from graphcep.engines.nu.engine import NuEngine
    from graphcep.io.generator import generate_netflow
    from graphcep.jobs.nu import NuJob
    from graphcep.lang.nu import parse_nu

    pattern = parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]", "triangle")
    table = generate_netflow(2_000, 40, 100, seed=6).select(["t", "src", "dst", "seq"])
    expected = NuEngine(pattern).push(table)
    batches = arrival_batches(table, [(i * 7919) % S for i in range(table.num_rows)],
                              list(range(0, 2_000, 150)))
    got = pa.concat_tables(run_with_restarts(NuJob(pattern), batches, tmp_path,
                                             restart_at=(4, 9), lateness=S))
    assert expected.num_rows > 10
    assert sorted(got.column("match_id").to_pylist()) == \
        sorted(expected.column("match_id").to_pylist())


def test_ddst_stream_without_the_label_field_is_refused_before_state_changes(tmp_path):
    """A micro-batch lacking a label field the DDST query reads is refused with the job's
    message, kept as ``refusal``; nothing is buffered, counted or checkpointed, so the
    corrected stream resumes from the same checkpoint."""
    from graphcep.jobs.ddst import DDSTJob
    from graphcep.lang.ddst import parse_ddst
    from graphcep.patterns.subgraph import QueryError

    query = parse_ddst("QUERY q; VERTICES A, B; EDGES x: A -> B [mail]; WITHIN 5 s;")
    op = StreamOperator(DDSTJob(query), checkpoint=tmp_path)
    unlabelled = pa.table({"t": [S, 2 * S], "src": ["a", "b"], "dst": ["b", "c"]})
    with pytest.raises(QueryError, match="'label'"):
        op.process(0, unlabelled)
    assert isinstance(op.refusal, QueryError)
    assert op.totals.batches == 0 and op.state_size()["buffered"] == 0
    assert not list((tmp_path / "state").iterdir())
    labelled = unlabelled.append_column("label", pa.array(["mail", "mail"]))
    assert op.process(0, labelled).edges_in == 2


def test_end_time_queries_need_the_longest_duration():
    job = SubgraphJob.create(parse_program("{ a e1 b; b e2 c; starttime(e2) - endtime(e1) <= 3; "
                                   "starttime(e1) < starttime(e2); }"))
    with pytest.raises(UnboundedQueryError, match="--max-duration"):
        StreamOperator(job)


def test_the_flush_line_says_end_of_input_not_a_microsecond_past_the_newest_edge():
    """The end-of-input flush releases every edge held: its progress line says so, where
    it printed the flush's frontier, 919.000001 s, a time no edge of the stream has."""
    job = SubgraphJob.create(parse_program(TRIANGLE))
    op = StreamOperator(job, lateness_us=0)
    edges = pa.table({"t": [1 * S, 2 * S, 3 * S, 919 * S], "src": ["a", "b", "c", "x"],
                      "dst": ["b", "c", "a", "y"], "dur": [0] * 4, "seq": [1, 2, 3, 4]})
    first = op.process(0, edges)
    assert first.line().startswith("batch 0: 4 edges in, 0 late, 0 rejected, 1 match | "
                                   "state ")
    assert "| watermark 919s |" in first.line()
    assert "| watermark end of input |" in op.flush().line()


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_parts_follow_the_umask(tmp_path, umask, mode):
    """Match parts, late-edge and reject parts and the operator's state are created as
    ``open`` creates files under the umask (before: 0600 whatever the umask)."""
    job = SubgraphJob.create(parse_program(TRIANGLE))
    previous = os.umask(umask)
    try:
        op = StreamOperator(job, lateness_us=0, checkpoint=tmp_path / "ckpt",
                            sink=JsonlSink(tmp_path / "out", directory=True),
                            late_sink=PartWriter(tmp_path / "late"))
        op.process(0, pa.table({"t": [5 * S, 6 * S], "src": ["a", "b"], "dst": ["b", "c"],
                                "seq": [1, 2]}))
        op.process(1, pa.table({"t": [1 * S], "src": ["c"], "dst": ["a"], "seq": [3]}))
    finally:
        os.umask(previous)
    written = [*(tmp_path / "out").glob("part-*"), *(tmp_path / "late").glob("part-*"),
               *(tmp_path / "ckpt" / "state").glob("state-*")]
    assert len(written) >= 4  # two match parts, a late part, a state
    assert {path.name: stat.S_IMODE(path.stat().st_mode) for path in written} == {
        path.name: mode for path in written}


def test_pace_warns_once_when_the_lag_grows_three_batches_in_a_row():
    """The lag growing batch after batch is one warning (at the third growth), not one per
    batch; a batch that catches up ends the run, and a new run of growth warns again.
    Rates: records over the wall-clock time since the batch before."""
    from graphcep.runtime.streaming.driver import GROWING_BATCHES, Pace

    pace = Pace(offered_rate=10_000, cap=500)
    lags = [1.0, 2.0, 3.0, 2.5, 3.0, 3.5, 4.0, 5.0, 6.0]  # seconds, after each batch
    warned = [bool(pace.observe(500, 0.25, int(lag * S), now=0.25 * (i + 1)))
              for i, lag in enumerate(lags)]
    # growths: batches 1, 2 | 4, 5, 6, 7, 8 -> the third growth of a run is batch 6
    assert GROWING_BATCHES == 3
    assert warned == [False, False, False, False, False, False, True, False, False]
    assert pace.batch_rate == 2_000  # 500 records in the 0.25 s since the batch before
    figures = pace.as_dict()
    assert figures == {"matched_rate": 2_000.0, "offered_rate": 10_000, "lag_s": 6.0,
                       "max_lag_s": 6.0, "backlog": 60_000}
    assert pace.line() == "matched 2,000/s, offered 10,000/s, lag 6.0 s (60,000 records behind)"


def test_pace_without_a_lag_reports_the_matched_rate_only():
    from graphcep.runtime.streaming.driver import Pace

    pace = Pace()
    assert pace.observe(300, 2.0, None, now=10.0) == []
    assert pace.line() == "matched 150/s"
    assert pace.as_dict() == {"matched_rate": 150.0}


@pytest.mark.parametrize("damage", ["missing", "truncated"])
def test_a_damaged_checkpoint_is_one_clear_error_naming_its_file(tmp_path, damage):
    """A snapshot or logged batch of the checkpoint gone or cut short: the restart says
    which file and that the stream cannot go on from it, not a bare traceback."""
    from graphcep.io.generator import generate_netflow
    from graphcep.runtime.streaming.checkpoint_bytes import CheckpointDamaged

    job = SubgraphJob.create(parse_program(FEATURE_QUERY), fmt="vast")
    table = generate_netflow(600, 30, 100, seed=9)
    batches = [table.slice(i, 150) for i in range(0, 600, 150)]
    run_with_restarts(job, batches[:3], tmp_path)
    victim = sorted((tmp_path / "state").glob("released-*.arrow"))[-1]
    if damage == "missing":
        victim.unlink()
    else:
        victim.write_bytes(victim.read_bytes()[:20])
    with pytest.raises(CheckpointDamaged, match=f"cannot be read: {victim}"):
        StreamOperator(job, checkpoint=tmp_path).process(3, batches[3])
