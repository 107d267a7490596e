"""Progressive window widening in streaming (``graphcep stream --pww``): micro-batches,
however cut, out of order within the lateness, checkpointed and restarted, report what
the batch run (``graphcep run --pww --engine local``, :func:`run_widening`) reports --
the same rows, levels and report times, each instance once -- and no level above 0 holds
more than ``2L`` records between micro-batches."""

from __future__ import annotations

import json
import os
import pickle
import signal
import subprocess
import sys
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from graphcep.events import format_seconds
from graphcep.runtime.streaming.driver import StreamOperator
from graphcep.runtime.widening import WidenedJob, Widening, run_widening
from tests.runtime.test_widening_spark import JOBS, slow_stream
from tests.sequences_oracle import occurrences

S = 1_000_000
#: the triangle of tests/runtime/test_widening_spark.py as a SAL file: no time bound
TRIANGLE_SAL = """{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);
                    starttime(e2) < starttime(e3); }"""


def numbered(edges: pa.Table) -> pa.Table:
    """The stream with ``seq`` = position, as a file source numbers it."""
    return edges.append_column("seq", pa.array(np.arange(edges.num_rows, dtype=np.int64)))


def cut(edges: pa.Table, sizes: list[int]) -> list[pa.Table]:
    """Micro-batches of the given sizes, cycling through them."""
    batches, start, i = [], 0, 0
    while start < edges.num_rows:
        batches.append(edges.slice(start, sizes[i % len(sizes)]))
        start, i = start + sizes[i % len(sizes)], i + 1
    return batches


def shuffled(edges: pa.Table, within_us: int, seed: int) -> pa.Table:
    """The stream in arrival order: each edge delayed by up to ``within_us``."""
    delay = np.random.default_rng(seed).integers(0, within_us + 1, edges.num_rows)
    order = np.argsort(edges.column("t").to_numpy() + delay, kind="stable")
    return edges.take(pa.array(order))


def streamed(job: WidenedJob, batches: list[pa.Table], *, lateness_us: int = 0,
             checkpoint: Path | None = None, restart_at: tuple[int, ...] = (),
             rerun: tuple[int, ...] = (), check_state=None) -> pa.Table:
    """Every row the operator reports over ``batches`` and its flush: replaced by a new
    operator (a restart from the checkpoint) before the batches in ``restart_at``; the
    batches in ``rerun`` are processed twice, the first time by an operator that dies
    after writing (Spark re-runs such a batch, and its output replaces the first)."""
    parts: dict[int, pa.Table] = {}

    def operator() -> StreamOperator:
        return StreamOperator(job, lateness_us=lateness_us, checkpoint=checkpoint,
                              on_matches=lambda m, b: parts.__setitem__(b, m))

    op = operator()
    for batch_id, batch in enumerate(batches):
        if batch_id in restart_at:
            op = operator()
        if batch_id in rerun:
            op.process(batch_id, batch)
            op = operator()
        op.process(batch_id, batch)
        if check_state is not None:
            check_state(op.engine)
    (operator() if checkpoint is not None else op).flush()
    return pa.concat_tables([parts[b] for b in sorted(parts)])


@pytest.mark.parametrize("sizes", [[1], [7, 50], [300]], ids=["1", "7-50", "300"])
@pytest.mark.parametrize("kind", sorted(JOBS))
def test_micro_batches_report_the_batch_runs_rows(kind, sizes):
    edges = numbered(slow_stream(3))
    expected, _ = run_widening(JOBS[kind](), edges, keep=3, base_us=S)
    got = streamed(WidenedJob(JOBS[kind](), 3, S), cut(edges, sizes))
    assert expected.num_rows > 10 and set(expected.column("pww_level").to_pylist()) != {0}
    assert got.equals(expected)  # the same rows, levels, report times, in the same order


def test_edges_out_of_order_within_the_lateness_report_the_batch_runs_rows():
    edges = numbered(slow_stream(5))
    expected, _ = run_widening(JOBS["sal"](), edges, keep=4, base_us=S // 2,
                               max_duration_us=30 * S)
    got = streamed(WidenedJob(JOBS["sal"](), 4, S // 2, 30 * S),
                   cut(shuffled(edges, 2 * S, 1), [13, 40]), lateness_us=2 * S)
    assert expected.num_rows > 10 and got.equals(expected)


@pytest.mark.parametrize("kind", sorted(JOBS))
def test_restarts_and_reruns_from_checkpoints_equal_an_uninterrupted_stream(kind, tmp_path):
    edges = numbered(slow_stream(8))
    job = WidenedJob(JOBS[kind](), 3, S)
    batches = cut(edges, [9, 31])
    straight = streamed(job, batches)
    restarted = streamed(job, batches, checkpoint=tmp_path, restart_at=(2, 5, 6, 11),
                         rerun=(3, 9))
    expected, _ = run_widening(JOBS[kind](), edges, keep=3, base_us=S)
    assert straight.equals(expected) and restarted.equals(expected)
    # every restart replayed the batches since the last snapshot, then snapshotted at its
    # first batch: the newest at the last restart's
    assert [p.name for p in (tmp_path / "state").glob("engine-*")] == ["engine-000000000011.bin"]


def test_a_snapshot_mid_stream_continues_as_the_uninterrupted_engine():
    edges = numbered(slow_stream(4))
    job = JOBS["nu"]()
    straight, stopped = Widening(job, 2, S), Widening(job, 2, S)
    got, expected = [], []
    for i, batch in enumerate(cut(edges, [23])):
        expected += [straight.push(batch), straight.advance(int(batch["t"][-1].as_py()))]
        got += [stopped.push(batch), stopped.advance(int(batch["t"][-1].as_py()))]
        if i % 3 == 1:  # through bytes, as a checkpoint holds it
            stopped = Widening.restore(stopped.snapshot(), **stopped.restore_context())
    expected.append(straight.flush())
    got.append(stopped.flush())
    assert pa.concat_tables(got).equals(pa.concat_tables(expected))
    assert [s.as_dict()["windows"] for s in stopped.stats()] == \
        [s.as_dict()["windows"] for s in straight.stats()]
    assert (stopped.edges_seen, stopped.matches_found) == (edges.num_rows,
                                                           pa.concat_tables(got).num_rows)


@pytest.mark.parametrize("keep", [1, 3, 6])
def test_no_level_above_0_holds_more_than_2L_records_in_checkpointed_state(keep, tmp_path):
    """Between micro-batches, in the engine and in the snapshot a checkpoint writes."""
    edges = numbered(slow_stream(keep, background=600))
    most: list[int] = []

    def check(engine: Widening) -> None:
        held = engine.state_size()["most_held_above_level_0"]
        state = pickle.loads(engine.snapshot())["state"]
        levels = state["planner"]["levels"]
        assert all(level.held() <= 2 * keep for level in levels[1:]), held
        assert held <= 2 * keep
        most.append(held)

    streamed(WidenedJob(JOBS["sal"](), keep, S // 4), cut(edges, [17]), check_state=check,
             checkpoint=tmp_path)
    assert max(most) == 2 * keep  # the bound is reached, and kept


def test_explain_and_extent_of_a_widened_job():
    job = WidenedJob(JOBS["sal"](), 4, S, 3 * S)
    text = "\n".join(job.describe())
    assert "L = 4 records, T0 = 1 s, D = 3 s (3 levels)" in text
    assert job.extent().size == 8 * S  # level 2's windows: two batches of 4 s
    assert job.whole_stream and job.output.schema.names[-3:] == [
        "pww_level", "pww_report_t", "pww_delay_us"]


# -- the command ------------------------------------------------------------------------


def write_files(edges: pa.Table, directory: Path, files: int) -> None:
    """The stream as CSV files of about equal size (times in exact seconds), modified
    one second apart in stream order: a file source takes them oldest first."""
    directory.mkdir(parents=True, exist_ok=True)
    rows = edges.to_pylist()
    step = -(-len(rows) // files)
    for i in range(files):
        lines = ["t,src,dst"] + [f"{format_seconds(r['t'])},{r['src']},{r['dst']}"
                                 for r in rows[i * step:(i + 1) * step]]
        path = directory / f"part-{i:03d}.csv"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def instance_keys(rows: list[dict]) -> list[tuple]:
    """Each reported instance by its edges' times and endpoints, with its level and
    report time (``seq`` differs between a batch read and a stream's file ordinals)."""
    return [(tuple((e["t"], e["src"], e["dst"]) for e in row["edges"]), row["pww_level"],
             row["pww_report_t"]) for row in rows]


def jsonl(path: Path) -> list[dict]:
    files = sorted(path.glob("part-*.jsonl")) if path.is_dir() else [path]
    return [json.loads(line) for f in files for line in f.read_text().splitlines()]


def batch_run(tmp_path: Path, query: Path, incoming: Path) -> list[tuple]:
    from graphcep.cli import main

    out = tmp_path / "batch.jsonl"
    assert main(["run", str(query), "-i", str(incoming), "--format", "csv", "--pww", "3",
                 "--engine", "local", "--output", str(out), "--summary", "json"]) == 0
    return instance_keys(jsonl(out))


def stream_args(tmp_path: Path, query: Path, incoming: Path) -> list[str]:
    return ["stream", str(query), "--source", str(incoming), "--format", "csv",
            "--checkpoint", str(tmp_path / "ckpt"), "--output", str(tmp_path / "out") + "/",
            "--pww", "3", "--max-files-per-trigger", "1", "--master", "local[2]"]


@pytest.fixture
def files(tmp_path):
    query = tmp_path / "triangle.sal"
    query.write_text(TRIANGLE_SAL)
    incoming = tmp_path / "in"
    write_files(slow_stream(3), incoming, 6)
    return query, incoming


@pytest.mark.parametrize(("extra", "reason"), [
    (["--pww-base", "2"], "--pww-base goes with --pww L"),
    (["--pww", "3", "--cells", "2"], "window widening runs each window in one engine")])
def test_stream_command_refuses_before_starting(files, tmp_path, capsys, extra, reason):
    from graphcep.cli import main

    query, incoming = files
    args = [a for a in stream_args(tmp_path, query, incoming) if a not in ("--pww", "3")]
    assert main([*args, "--once", *extra]) == 2
    assert reason in capsys.readouterr().err


@pytest.mark.spark
def test_stream_command_reports_what_the_batch_run_reports(spark, files, tmp_path, capsys):
    from graphcep.cli import main

    query, incoming = files
    assert main([*stream_args(tmp_path, query, incoming), "--once", "--quiet",
                 "--summary", "json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    got = instance_keys(jsonl(tmp_path / "out"))
    expected = batch_run(tmp_path, query, incoming)
    assert len(expected) > 10 and got == expected
    assert summary["matches"] == len(expected) and summary["pww"]["L"] == 3
    assert sum(level["instances"] for level in summary["pww_levels"]) == len(expected)
    assert all(level["records_held"] <= 6 for level in summary["pww_levels"][1:])


@pytest.mark.slow
@pytest.mark.spark
def test_a_killed_and_restarted_stream_reports_each_instance_once(spark, files, tmp_path,
                                                                 capsys):
    """SIGKILL ``graphcep stream --pww`` once micro-batches are under way, then drain the
    same checkpoint with ``--once`` (in this process, on the tests' session: one JVM start
    fewer): the batch run's instances, none lost or repeated."""
    from graphcep.cli import main

    query, incoming = files
    command = [sys.executable, "-m", "graphcep.cli", *stream_args(tmp_path, query, incoming),
               "--trigger", "0.5"]
    proc = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True, start_new_session=True)
    assert proc.stderr is not None
    killed = False
    for line in proc.stderr:
        if line.startswith("batch 2:"):
            os.killpg(proc.pid, signal.SIGKILL)  # the JVM with it
            killed = True
            break
    proc.wait(timeout=60)
    assert killed, "the stream ended before its third micro-batch"
    assert main([*command[3:], "--once", "--quiet"]) == 0, capsys.readouterr().err[-3000:]
    got = instance_keys(jsonl(tmp_path / "out"))
    assert len(got) == len(set(got)), "an instance was written twice"
    assert sorted(got) == sorted(batch_run(tmp_path, query, incoming))


SUBS = "twice: @x.@x\nback: @a.@b.@a\nabc: a.b.c\n"


def subscription_truth(rows: list[dict], keep: int) -> tuple[set[tuple], set[tuple]]:
    """``(id, key, start, end, edges)`` of every occurrence of :data:`SUBS` in each key's
    whole sequence (brute force, tests/sequences_oracle.py), and those spanning at most
    ``keep`` stream records (``rows`` in stream order)."""
    sequences: dict[str, list[int]] = {}
    for i, row in enumerate(rows):
        sequences.setdefault(row["src"], []).append(i)
    found, within = set(), set()
    for line in SUBS.splitlines():
        sid, text = (part.strip() for part in line.split(":"))
        items = tuple(i if not i.startswith("@") else ("var", i) for i in text.split("."))
        for key, index in sequences.items():
            for start, _ in occurrences(items, [rows[i]["dst"] for i in index]):
                taken = index[start:start + len(items)]
                occurrence = (sid, key, start, start + len(items) - 1,
                              tuple((rows[i]["t"] // S, rows[i]["dst"]) for i in taken))
                found.add(occurrence)
                if taken[-1] - taken[0] + 1 <= keep:
                    within.add(occurrence)
    return found, within


@pytest.mark.spark
def test_stream_widens_a_subscriptions_file(spark, tmp_path, capsys):
    """``graphcep stream SUBS --pww``: notifications of each key's whole sequence, every
    one spanning at most L records, none twice, at the stream's positions; the file is
    read once, so a restart with the file edited is refused (the checkpoint's set)."""
    from graphcep.cli import main

    rng = np.random.default_rng(3)
    t = np.cumsum(rng.choice([0, 1, 1, 3, 40], 90)).astype(np.int64) * S
    rows = [{"t": int(x), "src": str(rng.choice(["h", "g", "k"])),
             "dst": str(rng.choice(["a", "b", "c"]))} for x in t]
    incoming = tmp_path / "in"
    write_files(pa.Table.from_pylist(rows), incoming, 5)
    query = tmp_path / "s.subs"
    query.write_text(SUBS)
    args = [*stream_args(tmp_path, query, incoming), "--quiet"]
    args[args.index("--pww") + 1] = "2"
    assert main([*args, "--once"]) == 0, capsys.readouterr().err
    got = [(r["subscription"], r["key"], r["start"], r["end"],
            tuple((e["t"], e["dst"]) for e in r["edges"])) for r in jsonl(tmp_path / "out")]
    found, within = subscription_truth(rows, keep=2)
    assert len(within) > 10 and len(got) == len(set(got))
    assert within <= set(got) <= found
    query.write_text(SUBS + "more: a.a\n")
    capsys.readouterr()
    assert main([*args, "--once"]) == 2
    err = capsys.readouterr().err
    assert "the query file" in err and len(err.strip().splitlines()) == 1
