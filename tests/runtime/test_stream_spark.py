"""``graphcep stream`` on Spark Structured Streaming: sources, restarts, kills.

Oracle: the in-process batch run (``read_edges`` + ``run_local``) over the same files,
itself checked against brute force elsewhere.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.io.generator import generate_netflow, write_edges
from graphcep.io.readers import read_edges
from graphcep.io.sinks import JsonlSink
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.runtime.local import run_local
from graphcep.runtime.streaming.driver import PartWriter, StreamOperator

pytestmark = pytest.mark.spark

S = 1_000_000
TRIANGLE = """{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);
                starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }"""


def write_parts(table: pa.Table, directory: Path, parts: int, start: int = 0) -> list[Path]:
    """Cut ``table`` into ``parts`` VAST files named in arrival order, written atomically."""
    directory.mkdir(parents=True, exist_ok=True)
    step = -(-table.num_rows // parts)
    paths = []
    for i in range(parts):
        chunk = table.slice(i * step, step)
        tmp = directory.parent / f".tmp-{start + i:04d}.csv"
        write_edges(chunk, tmp, "vast")
        target = directory / f"flows-{start + i:04d}.csv"
        os.replace(tmp, target)
        paths.append(target)
    return paths


def expected_keys(directory: Path) -> set[tuple[int, ...]]:
    read = read_edges(directory, "vast")
    job = SubgraphJob.create(parse_program(TRIANGLE), fmt="vast")
    matches, _ = run_local(job.query, read.edges)
    return {tuple(e["seq"] for e in m) for m in matches.column("edges").to_pylist()}


def output_lines(directory: Path) -> list[dict]:
    return [json.loads(line) for part in sorted(directory.glob("part-*.jsonl"))
            for line in part.read_text().splitlines()]


def keys_of(rows: list[dict]) -> list[tuple[int, ...]]:
    return [tuple(e["seq"] for e in row["edges"]) for row in rows]


def test_file_source_matches_the_batch_run_and_resumes(spark, tmp_path):
    from graphcep.runtime.streaming.query import run_available_now
    from graphcep.runtime.streaming.sources import FileSource

    table = generate_netflow(4_000, 60, 200, seed=3)
    incoming = tmp_path / "in"
    write_parts(table.slice(0, 2_000), incoming, 3)
    with open(incoming / "flows-0001.csv", "a") as fh:  # a bad line in the middle file
        fh.write("1.0,not,a,flow\n")
    job = SubgraphJob.create(parse_program(TRIANGLE), fmt="vast")

    def run() -> StreamOperator:
        op = StreamOperator(job, checkpoint=tmp_path / "ckpt",
                            sink=JsonlSink(tmp_path / "out", directory=True),
                            reject_sink=PartWriter(tmp_path / "rejects"))
        run_available_now(spark, op, FileSource(str(incoming), "vast"),
                          checkpoint=tmp_path / "ckpt", on_report=None)
        return op

    first = run()
    assert first.totals.rejected == 1
    rejected = output_lines(tmp_path / "rejects")
    assert [(Path(r["file"]).name, r["line"]) for r in rejected] == [("flows-0001.csv", 668)]
    assert set(keys_of(output_lines(tmp_path / "out"))) == expected_keys(incoming)
    write_parts(table.slice(2_000), incoming, 2, start=3)
    run()  # a new process: continues from the checkpoint with the new files only
    rows = output_lines(tmp_path / "out")
    assert len(keys_of(rows)) == len(set(keys_of(rows)))
    assert set(keys_of(rows)) == expected_keys(incoming)
    assert len(expected_keys(incoming)) > 5


def test_generator_source_is_the_generated_stream(spark, tmp_path):
    from graphcep.runtime.streaming.query import start_stream
    from graphcep.runtime.streaming.sources import GeneratorSource, generated_edges

    found: list[pa.Table] = []
    job = SubgraphJob.create(parse_program(TRIANGLE))
    op = StreamOperator(job, lateness_us=0, on_matches=lambda m, _: found.append(m))
    query = start_stream(spark, op, GeneratorSource(vertices=500, rate=1_000, seed=7),
                         checkpoint=tmp_path / "ckpt", on_report=None)
    deadline = time.time() + 60
    while op.totals.edges < 5_000 and time.time() < deadline:
        time.sleep(0.5)
    query.stop()
    assert op.totals.edges >= 5_000
    seen = op.totals.edges
    edges = generated_edges(pa.array(range(seen)).to_numpy(), 500, 1_000, 7)
    # what the watermark has released: every edge up to the newest one's time
    released = edges.filter(pa.compute.less_equal(edges.column("t"),
                                                  int(edges.column("t")[-1].as_py())))
    matches, _ = run_local(job.query, released)
    expected = {tuple(e["seq"] for e in m) for m in matches.column("edges").to_pylist()}
    got = [tuple(e["seq"] for e in m) for t in found for m in t.column("edges").to_pylist()]
    assert len(got) == len(set(got))
    assert set(got) == expected and expected


def test_both_modes_start_a_generator_at_its_own_pace():
    """A generator's micro-batches are its interval apart in either mode (back to back, it
    would offer more than its rate); any other source takes the trigger asked for."""
    from graphcep.runtime.streaming.sources import FileSource, GeneratorSource, paced

    generator = GeneratorSource(vertices=10, rate=1_000, max_records=250)
    assert paced(generator, None) == paced(generator, 5.0) == 0.25
    assert paced(FileSource("in", "vast"), 5.0) == 5.0
    assert paced(FileSource("in", "vast"), None) is None


def test_a_capped_generator_stream_restarts_where_it_stopped(spark, tmp_path):
    """Two starts on one checkpoint, micro-batches capped at 700 rows and stopped between
    batches: together they read rows 0 .. n-1 of the generated stream once each (the
    second start resumes from Spark's offsets, whatever its own clock), and their
    matches are those of the generated edges the watermark released, each once. Kept by
    batch id, as the sinks' parts are: a stop that lands after a batch but before Spark
    commits it makes the next start run that batch again, with the same rows."""
    from graphcep.runtime.streaming.query import start_stream, stop_between_batches
    from graphcep.runtime.streaming.sources import GeneratorSource, generated_edges

    job = SubgraphJob.create(parse_program(TRIANGLE))
    found: dict[int, pa.Table] = {}
    sizes: dict[int, int] = {}
    for target in (2_000, 4_000):
        op = StreamOperator(job, lateness_us=0, checkpoint=tmp_path / "ckpt",
                            on_matches=lambda m, batch: found.__setitem__(batch, m))
        source = GeneratorSource(vertices=200, rate=5_000, seed=3, max_records=700)
        query = start_stream(spark, op, source, checkpoint=tmp_path / "ckpt",
                             on_report=lambda r: sizes.__setitem__(r.batch_id, r.edges_in))
        deadline = time.time() + 120
        while op.totals.edges < target and time.time() < deadline:
            time.sleep(0.2)
        stop_between_batches(query, op)
        assert op.totals.edges >= target
    assert sizes and max(sizes.values()) <= 700
    seen = op.totals.edges
    assert sum(sizes.values()) == seen and op.totals.batches == len(sizes)
    edges = generated_edges(pa.array(range(seen)).to_numpy(), 200, 5_000, 3)
    released = edges.filter(pa.compute.less(edges.column("t"),
                                            int(edges.column("t")[-1].as_py())))
    matches, _ = run_local(job.query, released)
    expected = {tuple(e["seq"] for e in m) for m in matches.column("edges").to_pylist()}
    got = [tuple(e["seq"] for e in m) for t in found.values()
           for m in t.column("edges").to_pylist()]
    assert len(got) == len(set(got))
    assert set(got) == expected and expected


def test_socket_source_reads_vast_lines(spark, tmp_path):
    from graphcep.runtime.streaming.query import start_stream
    from graphcep.runtime.streaming.sources import SocketSource

    table = generate_netflow(600, 20, 50, seed=4)
    write_edges(table, tmp_path / "flows.csv", "vast")
    payload = (tmp_path / "flows.csv").read_bytes() + b"garbage line\n"
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    port = server.getsockname()[1]

    def serve() -> None:
        conn, _ = server.accept()
        conn.sendall(payload)
        time.sleep(30)  # keep the connection open while Spark reads
        conn.close()

    threading.Thread(target=serve, daemon=True).start()
    found: list[pa.Table] = []
    job = SubgraphJob.create(parse_program(TRIANGLE), fmt="vast")
    op = StreamOperator(job, on_matches=lambda m, _: found.append(m))
    source = SocketSource("127.0.0.1", port)
    query = start_stream(spark, op, source, checkpoint=tmp_path / "ck", on_report=None)
    deadline = time.time() + 60
    while op.totals.lines < 601 and time.time() < deadline:
        time.sleep(0.5)
    query.stop()
    source.close()
    server.close()
    op.flush()
    assert op.totals.lines == 601 and op.totals.rejected == 1
    expected = expected_keys(tmp_path)  # the file, read as a batch
    got = {tuple(e["seq"] for e in m) for t in found for m in t.column("edges").to_pylist()}
    assert got == expected


@pytest.mark.slow
def test_killed_and_restarted_stream_loses_and_repeats_nothing(spark, tmp_path, capsys):
    """SIGKILL ``graphcep stream`` at random moments while files keep arriving; restart it
    from its checkpoint each time; finally drain with ``--once`` (in this process, on the
    tests' session: one JVM start fewer). The output must equal the batch run over all
    files: no match lost, none written twice."""
    from graphcep.cli import main

    query_file = tmp_path / "triangle.sal"
    query_file.write_text(TRIANGLE)
    table = generate_netflow(12_000, 80, 400, seed=11)
    incoming, staging = tmp_path / "in", tmp_path / "staging"
    staging.mkdir()
    write_parts(table, staging, 12)
    incoming.mkdir()
    command = [sys.executable, "-m", "graphcep.cli", "stream", str(query_file),
               "--source", str(incoming), "--format", "vast", "--checkpoint",
               str(tmp_path / "ckpt"), "--output", str(tmp_path / "out") + "/",
               "--lateness", "1", "--max-files-per-trigger", "2", "--quiet",
               "--master", "local[2]"]
    rng = random.Random(2026)
    files = sorted(staging.glob("flows-*.csv"))
    kills = 0
    while files or kills < 3:
        proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        deadline = time.time() + rng.uniform(6, 14)
        while time.time() < deadline:
            if files and rng.random() < 0.5:
                path = files.pop(0)
                os.replace(path, incoming / path.name)
            time.sleep(0.5)
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait()
        kills += 1
        if kills > 8:
            break
    for path in files:
        shutil.move(path, incoming / path.name)
    assert main([*command[3:], "--once"]) == 0, capsys.readouterr().err[-2000:]
    rows = output_lines(tmp_path / "out")
    got = keys_of(rows)
    assert len(got) == len(set(got)), "a match was written twice"
    assert set(got) == expected_keys(incoming)
    assert len(got) > 20


def test_stream_command_runs_ddst_queries(spark, tmp_path, capsys):
    """``graphcep stream QUERY.ddst``: the reports equal the baseline engine's on the file."""
    from graphcep.cli import main
    from graphcep.engines.ddst.baseline import DDSTBaselineEngine
    from graphcep.lang.ddst import parse_ddst_file

    query_file = tmp_path / "spread.ddst"
    query_file.write_text("QUERY spread; VERTICES A:M, B:M, C:M;\n"
                          "EDGES AB: A -> B [x]; CA: C -> A [x];\nORDER AB < CA; WITHIN 20 s;\n")
    incoming = tmp_path / "in"
    incoming.mkdir()
    lines = ["t,src,dst,label,src_label,dst_label"]
    lines += [f"{t},v{(t * 7) % 5},v{(t * 3 + 1) % 5},x,M,M" for t in range(60)]
    (incoming / "events.csv").write_text("\n".join(lines) + "\n")
    code = main(["stream", str(query_file), "--source", str(incoming), "--format", "csv",
                 "--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out") + "/",
                 "--once", "--quiet", "--summary", "json", "--ddst-engine", "signature"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    got = [row["trigger_seq"] for row in output_lines(tmp_path / "out")]
    edges = read_edges(incoming / "events.csv", "csv").edges
    expected = DDSTBaselineEngine(parse_ddst_file(str(query_file))).push(edges)
    assert got == expected.column("trigger_seq").to_pylist()
    assert summary["matches"] == expected.num_rows > 3


def test_stream_command_refuses_a_ddst_stream_without_labels(spark, tmp_path, capsys):
    """A DDST query with edge labels over a stream without a ``label`` field: the command
    stops with status 2 and the job's one-line reason (not Spark's traceback)."""
    from graphcep.cli import main

    query_file = tmp_path / "q.ddst"
    query_file.write_text("QUERY q; VERTICES A, B; EDGES x: A -> B [mail]; WITHIN 5 s;\n")
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "events.csv").write_text("t,src,dst\n1,a,b\n2,b,c\n")
    code = main(["stream", str(query_file), "--source", str(incoming), "--format", "csv",
                 "--checkpoint", str(tmp_path / "ck"), "--once", "--quiet"])
    err = capsys.readouterr().err
    assert code == 2
    assert "graphcep: query 'q' reads edge labels ('mail') from the field 'label'" in err
    assert "Traceback" not in err


def test_stream_command_partitions_over_cells(spark, tmp_path, capsys):
    """``graphcep stream --cells 8 --processes 2``: a 2x2x2 grid of engines in two worker
    processes writes exactly the batch run's triangles, each once; a feature query or a
    DDST query is refused with a clear message."""
    from graphcep.cli import main

    query_file = tmp_path / "triangle.sal"
    query_file.write_text(TRIANGLE)
    write_parts(generate_netflow(3_000, 60, 200, seed=4), tmp_path / "in", 3)
    code = main(["stream", str(query_file), "--source", str(tmp_path / "in"), "--format", "vast",
                 "--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out") + "/",
                 "--once", "--quiet", "--summary", "json", "--cells", "8", "--processes", "2"])
    assert code == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    got = keys_of(output_lines(tmp_path / "out"))
    assert len(got) == len(set(got)) == summary["matches"] > 20
    assert set(got) == expected_keys(tmp_path / "in")
    assert summary["state"]["cells"] == 8
    ddst = tmp_path / "q.ddst"
    ddst.write_text("QUERY q; VERTICES A, B; EDGES x: A -> B; WITHIN 5 s;\n")
    assert main(["stream", str(ddst), "--source", str(tmp_path / "in"), "--checkpoint",
                 str(tmp_path / "ck2"), "--once", "--cells", "4"]) == 2
    assert "--cells partitions SAL queries" in capsys.readouterr().err



@pytest.mark.parametrize("matching", ["driver", "executors"])
def test_a_stream_killed_while_spark_wrote_its_first_offsets_restarts(
        spark, tmp_path, capsys, matching):
    """A kill during Spark's write of batch 0's offsets leaves its hidden temporary file in
    the checkpoint (``offsets/.0.UUID.tmp`` and its ``.crc``, as a SIGKILL left them);
    Spark then refuses to start ("should be empty on batch 0"). The restart runs, and its
    matches are the batch run's over the same file."""
    from graphcep.cli import main

    query_file = tmp_path / "tri.sal"
    query_file.write_text(TRIANGLE)
    incoming = tmp_path / "in"
    incoming.mkdir()
    argv = ["stream", str(query_file), "--source", str(incoming), "--format", "vast",
            "--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out") + "/",
            "--once", "--quiet", "--matching", matching]
    assert main(argv) == 0  # claims the checkpoint; no file yet, no batch
    offsets = tmp_path / "ck" / "spark" / "offsets"
    offsets.mkdir(parents=True, exist_ok=True)
    (offsets / ".0.87c33a00-c5c7-4a26-84d3-566cf1c2a595.tmp").write_text("")
    (offsets / "..0.87c33a00-c5c7-4a26-84d3-566cf1c2a595.tmp.crc").write_text("")
    edges = generate_netflow(300, 12, 30.0, seed=5)
    write_edges(edges, incoming / "flows.vast.csv", "vast")
    capsys.readouterr()
    assert main(argv) == 0, capsys.readouterr().err
    want, _ = run_local(parse_program(TRIANGLE).queries[0],
                        read_edges(incoming / "flows.vast.csv", "vast").edges)
    got = sorted(tuple(e["seq"] for e in row["edges"]) for row in output_lines(tmp_path / "out"))
    assert got == sorted(tuple(e["seq"] for e in edges) for edges in
                         want.column("edges").to_pylist())
    assert len(got) > 0


def test_a_stream_past_max_matches_stops_with_one_line_and_exit_3(spark, tmp_path, capsys):
    """``graphcep stream --max-matches``: the micro-batch that would pass the bound is not
    committed, one line names the option and the count, exit status 3."""
    from graphcep.cli import main
    from tests.paths import EXAMPLES

    incoming = tmp_path / "in"
    incoming.mkdir()
    pairs = [("a", "b"), ("b", "c"), ("c", "a"), ("b", "a"), ("c", "b"), ("a", "c")] * 4
    (incoming / "edges.txt").write_text(
        "".join(f"{s} {d} {i / 1000:.3f}\n" for i, (s, d) in enumerate(pairs)))
    code = main(["stream", str(EXAMPLES / "triangle.sal"), "--source", str(incoming),
                 "--checkpoint", str(tmp_path / "ck"), "--output", str(tmp_path / "out") + "/",
                 "--once", "--quiet", "--max-matches", "5"])
    (line,) = capsys.readouterr().err.strip().splitlines()
    assert code == 3
    assert "--max-matches 5" in line and "(0 written before it)" in line
    assert not [p for p in (tmp_path / "out").iterdir() if p.read_text()]
