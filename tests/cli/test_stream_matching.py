"""``graphcep stream --matching driver|executors|auto``: the executor mode through the command
equals the brute-force matcher and the driver mode (matches, late edges, rejects, totals),
for several cell counts, ending with the end-of-input flush; wrong combinations are one
line and exit 2 before Spark starts."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.cli import main
from graphcep.io.generator import generate_netflow
from graphcep.io.readers import FILE_INDEX_SHIFT, read_edges
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from tests.oracle import brute_force_matches
from tests.paths import ROOT
from tests.runtime.test_streaming import arrival_batches, late_seqs

S = 1_000_000
#: the temporal triangle with predicates on two attribute columns (one numeric, one text)
QUERY = """{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);
  starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10;
  e1.port != 443; e3.proto == "tcp"; }"""
LATENESS = 2


def write_stream(directory: Path, count: int = 900, files: int = 4) -> None:
    """Generated netflow arriving out of order in ``files`` CSV files (modification times
    in name order, the order Spark's file source takes them in), one malformed line."""
    table = generate_netflow(count, 25, 45, seed=3).select(["t", "src", "dst", "dur", "seq"])
    delays = [(i * 7919) % (3 * S) for i in range(table.num_rows)]
    batches = arrival_batches(table, delays, list(range(0, count, -(-count // files))))
    directory.mkdir(parents=True)
    for i, batch in enumerate(batches):
        lines = ["t,src,dst,dur,port,proto,note"]
        for row in batch.to_pylist():
            port = (80, 443, 22)[row["seq"] % 3]
            proto = ("tcp", "udp")[row["seq"] % 5 == 0]
            lines.append(f"{row['t'] / S},{row['src']},{row['dst']},{row['dur'] / S},"
                         f"{port},{proto},x")
        if i == 1:
            lines.append("not,a,number,line,1,tcp,x")
        path = directory / f"flows-{i:03d}.csv"
        path.write_text("\n".join(lines) + "\n")
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def oracle(directory: Path) -> set[tuple[int, ...]]:
    """The brute-force matches of the on-time edges, as the files are read (``seq``: line
    plus file ordinal), late by the arrival of the files one per micro-batch."""
    edges = read_edges(directory, "csv").edges
    ordinal = pa.array([s >> FILE_INDEX_SHIFT for s in edges.column("seq").to_pylist()])
    files = [edges.filter(pa.compute.equal(ordinal, i))
             for i in range(max(ordinal.to_pylist()) + 1)]
    late = late_seqs(files, LATENESS * S)
    on_time = [{**r, "port": int(r["port"])} for r in edges.to_pylist()
               if r["seq"] not in late]
    return brute_force_matches(SubgraphJob.create(parse_program(QUERY)).query, on_time)


def stream(work: Path, source: Path, query: Path, *extra: str, capsys,
           stderr: list[str] | None = None) -> dict:
    """The summary of one ``--once`` run; its stderr lines added to ``stderr``."""
    code = main(["stream", str(query), "--source", str(source), "--format", "csv",
                 "--checkpoint", str(work / "ck"), "--output", f"{work / 'out'}/", "--once",
                 "--lateness", str(LATENESS), "--max-files-per-trigger", "1",
                 "--master", "local[2]", "--quiet", "--summary", "json", *extra])
    captured = capsys.readouterr()
    assert code == 0, captured.err[-3000:]
    if stderr is not None:
        stderr.extend(captured.err.splitlines())
    return json.loads(captured.out.strip().splitlines()[-1])


def written(directory: Path) -> list[str]:
    return sorted(line for part in directory.glob("part-*") for line in
                  part.read_text().splitlines())


def in_order(directory: Path) -> list[str]:
    """The lines of the parts, part after part, each part's in its own order."""
    return [line for part in sorted(directory.glob("part-*"))
            for line in part.read_text().splitlines()]


def match_keys(directory: Path) -> list[tuple[int, ...]]:
    return [tuple(e["seq"] for e in json.loads(line)["edges"]) for line in written(directory)]


@pytest.mark.spark
@pytest.mark.slow
def test_executor_mode_equals_the_oracle_and_the_driver_mode(spark, tmp_path, capsys,
                                                            monkeypatch):
    """On 1 to 27 cells; on two tasks (``local[2]``) each reads the whole micro-batch
    (:func:`~graphcep.runtime.streaming.cells.rereads`), and 8 cells once more with the
    batch's rows shuffled to the tasks instead, as a larger cluster's or Kafka's are."""
    from graphcep.runtime.streaming import cells as cells_module

    source = tmp_path / "in"
    write_stream(source)
    query = tmp_path / "q.sal"
    query.write_text(QUERY)
    want = oracle(source)
    assert len(want) > 50
    driver = stream(tmp_path / "driver", source, query, "--matching", "driver", capsys=capsys)
    assert driver["matching"] == "driver" and driver["rejected"] == 1 and driver["late"] > 0
    assert set(match_keys(tmp_path / "driver" / "out")) == want
    # 2: the grid 2x1x1, chosen for the work
    for cells, reread in ((1, True), (2, True), (8, True), (8, False), (27, True)):
        monkeypatch.setattr(cells_module, "REREAD_TASKS", 4 if reread else 1)
        work = tmp_path / f"cells-{cells}-{reread}"
        profile = ("--profile",) if cells == 8 and reread else ()
        err: list[str] = []
        summary = stream(work, source, query, "--matching", "executors", "--cells", str(cells),
                         *profile, capsys=capsys, stderr=err)
        assert summary["matching"].startswith("executors")
        if profile:
            check_profile(summary, err)
        got = match_keys(work / "out")
        assert len(got) == len(set(got)), f"{cells} cells: a match written twice"
        assert set(got) == want, f"{cells} cells"
        assert written(work / "out") == written(tmp_path / "driver" / "out")
        assert written(work / "ck" / "rejects") == written(tmp_path / "driver" / "ck" / "rejects")
        # the same late records in the same order (each part's in line order, not
        # grouped by cell), file and line included; the unread column stays behind
        late = [json.loads(line) for line in in_order(work / "ck" / "late")]
        assert late == [{k: v for k, v in json.loads(line).items() if k != "note"}
                        for line in in_order(tmp_path / "driver" / "ck" / "late")]
        for total in ("edges", "late", "rejected", "matches", "files", "lines", "batches"):
            assert summary[total] == driver[total], (cells, total)


def check_profile(summary: dict, err: list[str]) -> None:
    """``--profile`` of an executor-mode ``--once`` run: the cells' phases and Spark's
    parts of the batches under the micro-batches, and one Spark line per micro-batch
    Spark ran -- the batches the summary counts but the end-of-input flush, which is no
    Spark micro-batch."""
    phases = summary["phases"]
    assert "  cells: matching (summed)" in phases
    assert "  cells: routing to cells (tasks) (summed)" in phases
    assert "  cells: numbering, late edges, reorder buffer (the rest of a step) (summed)" \
        in phases
    # 8 cells in the tasks of local[2]: a task steps several, with Spark's work between
    assert "  cells: Spark between two cells of a task (Python worker) (summed)" in phases
    assert 0 < phases["  Spark and the driver (the rest of the batches)"] \
        <= phases["micro-batches"]
    spark = {name: seconds for name, seconds in phases.items()
             if name.startswith("  Spark: ") and ": running the batch: " not in name}
    running = [name for name in spark if name.startswith("  Spark: running the batch")]
    assert len(running) == 1 and "jobs" in running[0] and "tasks per batch" in running[0]
    assert "  Spark: planning the batch" in spark
    # Spark times the same batches the phase does, inside it
    assert 0 < sum(spark.values()) <= phases["micro-batches"]
    # the driver's foreachBatch runs inside Spark's addBatch (timed in whole ms)
    driver = (phases["  driver: collecting the batch (its Spark job included)"]
              + phases["  driver: writing the parts"])
    assert 0 < driver <= spark[running[0]] + 0.001 * summary["batches"]
    batches = sorted(int(line.split()[3].rstrip(":")) for line in err
                     if line.startswith("graphcep: profile: micro-batch ")
                     and ": Spark " in line)
    assert batches == list(range(summary["batches"] - 1))


def refused(tmp_path: Path, capsys, query: Path, *args: str) -> str:
    (tmp_path / "in").mkdir(exist_ok=True)
    code = main(["stream", str(query), "--checkpoint", str(tmp_path / "ck"),
                 "--matching", "executors", *args])
    err = capsys.readouterr().err.strip()
    assert code == 2 and len(err.splitlines()) == 1, err
    return err


def test_wrong_combinations_are_one_line_and_exit_2(tmp_path, capsys):
    sal = tmp_path / "q.sal"
    sal.write_text(QUERY)
    triangle = ROOT / "examples" / "triangle.sal"
    source = ["--source", str(tmp_path / "in")]
    assert "match graph" in refused(tmp_path, capsys, ROOT / "examples" / "ddst" /
                                    "rumor.ddst", *source)
    anchored = tmp_path / "ping.nu"
    anchored.write_text("#X ~> #Y . Y ~> X\n")
    assert "runs anchored" in refused(tmp_path, capsys, anchored, *source, "--anchored")
    assert "tcp://127.0.0.1:9" in refused(tmp_path, capsys, triangle,
                                          "--source", "tcp://127.0.0.1:9")
    assert "--processes" in refused(tmp_path, capsys, triangle, *source, "--cells", "4",
                                    "--processes", "2")
    assert "--pww" in refused(tmp_path, capsys, triangle, *source, "--pww", "3")
    assert "--snapshot-interval" in refused(tmp_path, capsys, triangle, *source,
                                            "--snapshot-interval", "5")
    # the types of the attributes come from a file there when the stream starts
    err = refused(tmp_path, capsys, sal, *source)
    assert "none there yet: start the stream once one has arrived" in err and "lacks" not in err
    assert "generator" in refused(tmp_path, capsys, sal, "--source", "generator")


def test_a_checkpoint_keeps_the_cells_it_started_with(tmp_path):
    """The cells' state is keyed by their grid: a restart without --cells takes the
    recorded budget, one with another budget is refused."""
    from graphcep.patterns.subgraph import QueryError
    from graphcep.runtime.streaming.cells_run import CellsRun

    job = SubgraphJob.create(parse_program(QUERY))

    def start(cells: int | None) -> CellsRun:
        return CellsRun(job, cells=cells, default_cells=2, lateness_us=0,
                        checkpoint=tmp_path, sinks={}, on_report=None, attrs=pa.schema([]))

    assert start(None).cells == 2 and start(None).cells == 2
    assert start(2).shares.shares == (2, 1, 1)  # the cells screen roles: two halves
    with pytest.raises(QueryError, match="--cells 2"):
        start(8)


def test_a_checkpoint_keeps_the_grid_an_earlier_graphcep_chose(tmp_path):
    """A checkpoint whose record names no grid ran on the grid chosen without roles: for
    the triangle on 4 cells, one cell. Its states are that cell's, so a restart that would
    lay them out as 2 x 2 x 1 is refused; a record from before any batch is not."""
    import json

    from graphcep.patterns.subgraph import QueryError
    from graphcep.runtime.streaming.cells import StateFiles
    from graphcep.runtime.streaming.cells_run import CellsRun

    job = SubgraphJob.create(parse_program(QUERY))

    def start(checkpoint: Path) -> CellsRun:
        return CellsRun(job, cells=None, lateness_us=0, checkpoint=checkpoint, sinks={},
                        on_report=None, attrs=pa.schema([]))

    for checkpoint, ran in ((tmp_path / "ran", True), (tmp_path / "new", False)):
        (checkpoint / "cells").mkdir(parents=True)
        (checkpoint / "cells" / "grid.json").write_text(json.dumps({"cells": 4}))
        if ran:
            StateFiles(checkpoint / "cells" / "state").record(0, {})
    with pytest.raises(QueryError, match="grid 1x1x1; --cells 4 is now the grid 2x2x1"):
        start(tmp_path / "ran")
    with pytest.raises(QueryError, match="start from a new --checkpoint"):
        start(tmp_path / "ran")  # refused again: the record now names its grid
    assert start(tmp_path / "new").shares.shares == (2, 2, 1)


def test_auto_picks_the_driver_on_local_masters_and_the_executors_on_a_cluster(tmp_path):
    from argparse import Namespace

    from graphcep import jobs
    from graphcep.cli.stream import matching_mode
    from graphcep.runtime.streaming.sources import FileSource, SocketSource

    sal, ddst = ROOT / "examples" / "triangle.sal", ROOT / "examples" / "ddst" / "rumor.ddst"
    files = FileSource(str(tmp_path))

    def mode(query: Path, master: str, source=files, **extra) -> str:
        args = Namespace(matching="auto", master=master, query=str(query), pww=None,
                         processes=None, **extra)
        return matching_mode(args, jobs.load(str(query), {}), source)

    assert mode(sal, "local[2]") == "driver"
    assert mode(sal, "spark://head:7077") == "executors"
    assert mode(sal, "yarn") == "executors"
    assert mode(ddst, "spark://head:7077") == "driver"  # no exact split into cells
    assert mode(sal, "spark://head:7077", SocketSource("127.0.0.1", 9)) == "driver"
    ping = tmp_path / "ping.nu"
    ping.write_text("<#X ~> #Y . Y ~> X>[0, 3]\n")
    assert mode(ping, "spark://head:7077") == "executors"  # keyed by X
    subs = tmp_path / "s.subs"
    subs.write_text("back: @x.@y.@x\n")
    assert mode(subs, "spark://head:7077") == "executors"  # keyed by src, when not watched


@pytest.mark.spark
def test_a_state_bound_hit_in_an_executor_cell_is_one_line_and_status_3(spark, tmp_path,
                                                                         capsys):
    """As in the driver mode: the bound's own message, exit status 3, no traceback."""
    source = tmp_path / "in"
    write_stream(source, count=300, files=1)
    query = tmp_path / "q.sal"
    query.write_text(QUERY)
    code = main(["stream", str(query), "--source", str(source), "--format", "csv",
                 "--checkpoint", str(tmp_path / "ck"), "--once", "--master", "local[2]",
                 "--quiet", "--matching", "executors", "--cells", "1",
                 "--max-window-edges", "20"])
    ours = [line for line in capsys.readouterr().err.splitlines()
            if line.startswith("graphcep: ")]
    assert code == 3
    assert len(ours) == 1 and "above max_window_edges=20" in ours[0], ours


@pytest.mark.spark
def test_a_cells_missing_checkpoint_file_is_one_line_naming_it_and_status_2(spark, tmp_path,
                                                                           capsys):
    """A cell warms its engine from the edges earlier batches released to it; with one of
    those files gone, the restart stops at its first batch with one line naming the file
    (a restart could not go on either: no 'runs it again'), exit status 2."""
    source = tmp_path / "in"
    write_stream(source, count=400, files=3)
    later = sorted(source.iterdir())[-1]
    held = later.read_bytes()
    later.unlink()
    query = tmp_path / "q.sal"
    query.write_text(QUERY)
    stream(tmp_path, source, query, "--matching", "executors", "--cells", "1", capsys=capsys)
    released = sorted((tmp_path / "ck").rglob("released-*.arrow"))
    assert released, "the cell logged no released edges"
    released[-1].unlink()
    later.write_bytes(held)
    code = main(["stream", str(query), "--source", str(source), "--format", "csv",
                 "--checkpoint", str(tmp_path / "ck"), "--output", f"{tmp_path / 'out'}/",
                 "--once", "--lateness", str(LATENESS), "--max-files-per-trigger", "1",
                 "--master", "local[2]", "--quiet", "--matching", "executors", "--cells", "1"])
    ours = [line for line in capsys.readouterr().err.splitlines()
            if line.startswith("graphcep: ")]
    assert code == 2
    assert len(ours) == 1, ours
    assert f"the checkpoint cannot be read: {released[-1]}" in ours[0]
    assert "runs it again" not in ours[0] and "Traceback" not in ours[0]


def test_subscriptions_in_the_cells_are_read_once_their_text_in_the_checkpoint(tmp_path):
    """Watched in the driver, an edit is applied (the digest leaves the text out); in
    the cells it is the query's text, so a checkpoint refuses an edited file."""
    from argparse import Namespace

    from graphcep.cli.stream import _query_digest

    subs = tmp_path / "s.subs"
    args = Namespace(query=str(subs))

    def digest(text: str, **how) -> str:
        subs.write_text(text)
        return _query_digest(args, **how)

    assert digest("a: @x.@x\n", watched=True) == digest("b: @y\n", watched=True)
    assert digest("a: @x.@x\n", matching="executors") != digest("b: @y\n",
                                                                 matching="executors")


@pytest.mark.spark
@pytest.mark.slow
def test_an_executor_stream_stops_between_micro_batches(tmp_path):
    """``--run-for`` stops the stream after the micro-batch under way (one mostly is: the
    stream runs near its capacity on one core). Stopping inside one cut its Python code
    short, and Spark's reading of that error's long text overflowed the JVM's stack (a
    thousand-line trace on stderr). The summary counts whole batches."""
    import subprocess
    import sys

    query = tmp_path / "q.sal"
    query.write_text(QUERY.replace("e1.port != 443; e3.proto == \"tcp\";", ""))
    done = subprocess.run(
        [sys.executable, "-m", "graphcep", "stream", str(query), "--source", "generator",
         "--rate", "30000", "--vertices", "3000", "--run-for", "12", "--checkpoint",
         str(tmp_path / "ck"), "--output", f"{tmp_path / 'out'}/", "--master", "local[1]",
         "--matching", "executors", "--cells", "1", "--quiet", "--summary", "json"],
        capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert "StackOverflowError" not in done.stderr and "Exception in thread" not in done.stderr
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    assert summary["edges"] == 30000 * summary["batches"] > 0


@pytest.mark.spark
@pytest.mark.parametrize("matching", ["driver", "executors"])
def test_a_file_of_millisecond_times_is_skipped_with_a_warning_naming_the_fix(
        matching, tmp_path, capsys):
    """A file whose times are milliseconds (read as seconds they fall 50,000 years
    ahead) is skipped whole, in either mode: besides its reject, one warning line on
    stderr names it and the fix, and the other files are matched as before."""
    source = tmp_path / "in"
    write_stream(source, count=300, files=2)
    ms = source / "flows-zzz.csv"
    ms.write_text("t,src,dst,dur,port,proto,note\n" + "".join(
        f"{1_700_000_000_000 + 37 * i},h{i % 7},h{i % 5},0,80,tcp,x\n" for i in range(50)))
    os.utime(ms, (1_700_000_100, 1_700_000_100))
    query = tmp_path / "q.sal"
    query.write_text(QUERY)
    err: list[str] = []
    summary = stream(tmp_path / matching, source, query, "--matching", matching,
                     capsys=capsys, stderr=err)
    warned = [line for line in err if "flows-zzz.csv" in line]
    assert len(warned) == 1, err
    assert warned[0].startswith("graphcep: warning: skipped ") and "--time-unit ms" in warned[0]
    assert summary["rejected"] == 2  # the malformed line of the second file, and the file
    assert set(match_keys(tmp_path / matching / "out")) == oracle_without(source, ms)


def oracle_without(source: Path, skipped: Path) -> set[tuple[int, ...]]:
    """The oracle's matches of the stream without ``skipped`` (its ordinal kept empty:
    the files after it keep theirs, as the stream numbers them)."""
    rest = source.parent / "oracle-in"
    rest.mkdir()
    for path in source.iterdir():
        (rest / path.name).write_bytes(b"" if path == skipped else path.read_bytes())
    return oracle(rest)


@pytest.mark.spark
def test_late_edges_are_warned_of_as_in_the_driver_mode(tmp_path, capsys):
    """The executor mode warns of late edges as the driver mode does, from the cells'
    counts: an edge 10^6 s ahead (jump.csv, line 2) makes the next file's edges late, and
    the warning names it; a batch mostly late where almost nothing was before names the
    edge that set the watermark (line 21 of a.csv, t = 20 s). Before: no warning."""
    query = tmp_path / "q.sal"
    query.write_text(QUERY.replace("e1.port != 443; e3.proto == \"tcp\";", ""))
    header = "t,src,dst,dur\n"
    jump = {"a.csv": [(1, "a", "b"), (2, "b", "c")], "jump.csv": [(1_000_002, "c", "d")],
            "z.csv": [(3, "c", "a"), (4, "d", "e")]}
    share = {"a.csv": [(t, "a", "b") for t in range(1, 21)],
             "b.csv": [(1, "x", "y"), (2, "y", "z"), (30, "z", "x")]}
    for name, files in (("jump", jump), ("share", share)):
        source = tmp_path / f"{name}-in"
        source.mkdir()
        expected = (f"2 edges late behind the edge at {source / 'jump.csv'}:2 (t = 1000002 "
                    "s), which moved event time 1000000 s past the newest edge before it"
                    if name == "jump" else
                    f"batch 1: 2 of 3 edges late (watermark 15 s, set by the edge at "
                    f"{source / 'a.csv'}:21, t = 20 s)")
        for i, (file, rows) in enumerate(files.items()):
            path = source / file
            path.write_text(header + "".join(f"{t},{s},{d},0\n" for t, s, d in rows))
            os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))
        warned = {}
        for matching in ("driver", "executors"):
            err: list[str] = []
            stream(tmp_path / name / matching, source, query, "--matching", matching,
                   "--lateness", "5" if name == "share" else "1", capsys=capsys, stderr=err)
            warned[matching] = [line for line in err if "late" in line and "warning" in line]
        assert len(warned["driver"]) == 1 and expected in warned["driver"][0], warned
        assert warned["executors"] == warned["driver"]


def test_the_batch_newest_edge_is_the_newest_of_the_cells_newest():
    """The driver follows event time from each cell's newest counted edge: the batch's
    newest is the greatest; the time below it the greatest of the other cells' newest and
    its own cell's next; at a tie the first line names it; a source of records is named
    by its stream and line, as in the driver mode."""
    from graphcep.runtime.streaming.cells_run import EventWatch
    from graphcep.runtime.streaming.driver import NEVER, Jump, StreamTotals

    watch = EventWatch(StreamTotals())
    watch.follow([{"newest_t": 5, "below_t": 3, "newest_seq": 9},
                  {"newest_t": 2, "below_t": NEVER, "newest_seq": 1}, {}],
                 frontier=4, limit=10, stream="kafka://b:9092/t")
    assert (watch.max_t, watch.newest_place, watch.frontier, watch.jump) == (
        5, "kafka://b:9092/t:9", 4, None)
    # 200 is 160 past 40 (another cell's newest, above the first cell's 6): a jump
    watch.follow([{"newest_t": 200, "below_t": 6, "newest_seq": 30, "newest_place": "f:3"},
                  {"newest_t": 40, "below_t": 7, "newest_seq": 12, "newest_place": "g:2"},
                  {"newest_t": 200, "below_t": 8, "newest_seq": 20, "newest_place": "e:1"}],
                 frontier=190, limit=100)
    assert (watch.max_t, watch.newest_place, watch.frontier) == (200, "e:1", 190)
    assert watch.jump == Jump(200, 40, "e:1")
    watch.follow([{"newest_t": 150, "below_t": 1, "newest_seq": 40}], frontier=150, limit=100)
    assert (watch.max_t, watch.frontier) == (200, 190)  # neither goes back
    saved = EventWatch.of(StreamTotals(), watch.as_dict())  # kept with the totals
    assert (saved.max_t, saved.frontier, saved.newest_place, saved.jump) == (
        200, 190, "e:1", Jump(200, 40, "e:1"))
