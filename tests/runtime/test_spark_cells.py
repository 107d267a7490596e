"""Cells as Spark keys (:mod:`graphcep.runtime.streaming.cells`): the per-cell step against the
brute-force matcher and the driver's operator, without Spark; then the streaming query on
Spark, across a restart from its checkpoint and a SIGKILL of the driver."""

from __future__ import annotations

import json
import pickle
import tempfile
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphcep.events import table_to_matches
from graphcep.io.generator import generate_netflow
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.runtime.streaming.cells import (
    PACKED,
    CellState,
    InlineStates,
    LiveCells,
    StateFiles,
    cell_attributes,
    cell_grid,
    edges_part,
    flush_cell,
    packed_rows,
    partition_keys,
    refuse_state_store,
    routed_rows,
    spilled_chunks,
    step_cell,
    unpacked_rows,
)
from graphcep.runtime.streaming.checkpoint_bytes import CheckpointDamaged
from graphcep.runtime.streaming.driver import StreamOperator
from tests.oracle import brute_force_matches
from tests.runtime.test_streaming import arrival_batches, late_seqs

S = 1_000_000
TRIANGLE = """{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);
                starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }"""


def triangle_job() -> SubgraphJob:
    return SubgraphJob.create(parse_program(TRIANGLE))


def run_cells(job: SubgraphJob, batches: list[pa.Table], cells: int, lateness: int,
              partitions: int = 2, attrs: pa.Schema | None = None,
              flush: bool = False) -> tuple[list[pa.Table], set[int]]:
    """The cells' step over micro-batches, each cut into ``partitions`` partitions routed
    apart (as Spark's tasks route them), then (``flush``) the end of input; the matches
    and late seqs reported."""
    shares = cell_grid(job, cells)
    states: dict[int, CellState] = {}
    found, late = [], []
    attrs = attrs if attrs is not None else pa.schema([])
    inline = InlineStates()  # each step restores its engine from the state's snapshot
    for batch_id, batch in enumerate(batches):
        step = -(-batch.num_rows // partitions) or 1
        # each task's rows packed one Spark row per cell, as the shuffle carries them
        packed = pa.Table.from_batches([
            packed_rows(routed_rows(edges_part(batch.slice(i, step)), job, shares, attrs))
            for i in range(0, max(batch.num_rows, 1), step)], schema=PACKED).to_pandas()
        for cell in sorted(set(packed["_cell"])):
            mine = unpacked_rows(packed[packed["_cell"] == cell]["rows"], attrs)
            assert set(mine.column("_cell").to_pylist()) == {cell}
            result = step_cell(job, shares, lateness, cell, states.get(cell), mine)
            states[cell] = inline.read(inline.save(cell, result, None, batch_id))
            found.append(result.matches)
            late.extend(result.late.column("seq").to_pylist())
    if flush:
        found.extend(flush_cell(job, shares, cell, state).matches
                     for cell, state in states.items())
    assert len(late) == len(set(late)), "a late edge was reported twice"
    return found, set(late)


def keys(tables: list[pa.Table]) -> list[tuple[int, ...]]:
    return [tuple(e.seq for e in m.edges) for t in tables for m in table_to_matches(t)]


@pytest.mark.slow
@pytest.mark.parametrize("cells", [1, 2, 4, 8, 27])  # 2x1x1, 2x2x1: grids for the work
def test_cells_match_like_the_oracle_and_the_driver_operator(cells):
    table = generate_netflow(500, 20, 30, seed=7).select(["t", "src", "dst", "dur", "seq"])
    delays = [(i * 7919) % (3 * S) for i in range(table.num_rows)]
    batches = arrival_batches(table, delays, list(range(0, 500, 60)))
    # a far edge last: its frontier releases every buffered edge (the flush is tested below)
    end = pa.table({"t": [10**12], "src": ["far1"], "dst": ["far2"], "dur": [0],
                    "seq": [10**6]}).cast(table.schema)
    batches.append(end)
    job = triangle_job()
    found, late = run_cells(job, batches, cells, 2 * S)
    assert late == late_seqs(batches, 2 * S)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    got = keys(found)
    assert len(got) == len(set(got)), "a match was reported twice"
    assert set(got) == brute_force_matches(job.query, on_time)
    driver: list[pa.Table] = []
    operator = StreamOperator(job, lateness_us=2 * S, on_matches=lambda m, _: driver.append(m))
    for batch_id, batch in enumerate(batches):
        operator.process(batch_id, batch)
    assert sorted(got) == sorted(keys(driver))


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cells=st.sampled_from([1, 2, 4, 8, 16]),
       lateness=st.sampled_from([0, S, 4 * S]),
       cuts=st.lists(st.integers(0, 80), max_size=6))
def test_cells_report_each_match_and_late_edge_once(seed, cells, lateness, cuts):
    """Ends with the end-of-input flush: every buffered edge matched, as the driver's."""
    table = generate_netflow(80, 6, 20, seed=seed).select(["t", "src", "dst", "dur", "seq"])
    delays = [((i * 104729 + seed) % 4) * S for i in range(table.num_rows)]
    batches = arrival_batches(table, delays, cuts)
    job = triangle_job()
    found, late = run_cells(job, batches, cells, lateness, flush=True)
    assert late == late_seqs(batches, lateness)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    got = keys(found)
    assert len(got) == len(set(got)), "a match was reported twice"
    assert set(got) == brute_force_matches(job.query, on_time)


@pytest.mark.parametrize("cells", [1, 8])
def test_cells_carry_the_attributes_the_predicates_read(cells):
    """``e1.port == 80`` and ``e3.proto != "udp"``: the columns travel with the edges (an
    unread one does not), routing and matching read them; the flush ends the input."""
    table = generate_netflow(300, 12, 30, seed=5).select(["t", "src", "dst", "dur", "seq"])
    n = table.num_rows
    table = (table.append_column("port", pa.array([(80, 443)[i % 3 == 0] for i in range(n)]))
             .append_column("proto", pa.array([("tcp", "udp")[i % 4 == 0] for i in range(n)]))
             .append_column("unread", pa.array([1.5] * n)))
    job = SubgraphJob.create(parse_program(TRIANGLE.replace(
        "}", 'e1.port == 80; e3.proto != "udp"; }')))
    attrs = cell_attributes(job, table.schema)
    assert attrs.names == ["port", "proto"]
    batches = arrival_batches(table, [(i * 31) % (2 * S) for i in range(n)],
                              list(range(0, n, 70)))
    found, late = run_cells(job, batches, cells, S, attrs=attrs, flush=True)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    want = brute_force_matches(job.query, on_time)
    assert want and set(keys(found)) == want and len(keys(found)) == len(want)


def run_live_cells(job: SubgraphJob, batches: list[pa.Table], cells: int, lateness: int,
                   workers: list[int], reruns: set[int],
                   states: InlineStates | StateFiles | None = None
                   ) -> tuple[list[pa.Table], int]:
    """The cells' steps as Spark's Python workers run them: two workers, each keeping the
    engines it stepped (:class:`LiveCells`), step ``i`` of the run on worker
    ``workers[i % len(workers)]``; a step whose number is in ``reruns`` is run, then lost
    (its batch re-run from the state before it: a failed task, a killed driver), then run
    again on the next worker. The state store keeps what ``states`` (default: inline
    blobs) gives it. The matches the committed steps report, flush included, and how many
    steps found their engine alive."""
    shares = cell_grid(job, cells)
    states = states if states is not None else InlineStates()
    pool, store = [LiveCells(), LiveCells()], {}
    found, alive, number = [], 0, 0
    for batch_id, batch in enumerate(batches):
        rows = routed_rows(edges_part(batch), job, shares)
        for cell in sorted(set(rows.column("_cell").to_pylist())):
            mine = rows.filter(pc.equal(rows.column("_cell"), cell))
            for _ in range(2 if number in reruns else 1):
                live = pool[workers[number % len(workers)]]
                number += 1
                state, engine = states.open(store.get(cell), ("run", cell), live)
                alive += engine is not None
                step = step_cell(job, shares, lateness, cell, state, mine, engine, states=states)
                saved = states.save(cell, step, store.get(cell), batch_id)
                live.keep(("run", cell), step)
            store[cell] = saved  # the last run of the batch is committed
            found.append(step.matches)
    found.extend(flush_cell(job, shares, cell, states.read(blob), states).matches
                 for cell, blob in store.items())
    return found, alive


def state_stores(tmp: Path) -> dict[str, InlineStates | StateFiles]:
    return {"inline": InlineStates(), "files": StateFiles(tmp / "state")}


@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cells=st.sampled_from([1, 8]),
       workers=st.lists(st.integers(0, 1), min_size=1, max_size=5),
       reruns=st.sets(st.integers(0, 30), max_size=6), kept=st.sampled_from(["inline", "files"]))
def test_live_engines_match_like_the_oracle_across_workers_and_reruns(seed, cells, workers,
                                                                     reruns, kept):
    """An engine kept alive serves only the state its snapshot is in: a cell moved to the
    other worker, or a batch re-run from the state before it, restores from the stored
    state (a live engine that had already taken the batch would report its matches twice
    or refuse the edges as out of order) -- a blob in the state store or its file."""
    table = generate_netflow(120, 8, 20, seed=seed).select(["t", "src", "dst", "dur", "seq"])
    delays = [((i * 104729 + seed) % 4) * S for i in range(table.num_rows)]
    batches = arrival_batches(table, delays, [20, 45, 70, 90, 105])
    job = triangle_job()
    with tempfile.TemporaryDirectory() as tmp:
        found, _ = run_live_cells(job, batches, cells, S, workers, reruns,
                                  state_stores(Path(tmp))[kept])
    late = late_seqs(batches, S)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    got = keys(found)
    assert len(got) == len(set(got)), "a match was reported twice"
    assert set(got) == brute_force_matches(job.query, on_time)


@pytest.mark.parametrize("kept", ["inline", "files"])
def test_one_worker_keeps_every_engine_alive_after_the_first_batch(kept, tmp_path):
    """With one worker and no failure, every step after a cell's first finds its engine
    alive (no restore), and the matches are the restoring steps' own."""
    table, batches = stream_batches(400, 80)
    job = triangle_job()
    found, alive = run_live_cells(job, batches, 8, 2 * S, [0], set(),
                                  state_stores(tmp_path)[kept])
    restored, _ = run_cells(job, batches, 8, 2 * S, partitions=1, flush=True)
    steps = sum(len(set(routed_rows(edges_part(b), job, cell_grid(job, 8))
                        .column("_cell").to_pylist())) for b in batches)
    assert alive == steps - 8  # each of the 8 cells restores nothing at its first step
    assert sorted(keys(found)) == sorted(keys(restored))


def test_state_files_keep_what_a_rerun_needs_and_sweep_the_rest(tmp_path):
    """A cell's state files: each step writes its own; the file of the state a step
    started from is kept (a re-run of the batch starts from it, and finds it), and the
    step after deletes it with what failed attempts left, but not a file of a later
    micro-batch (an attempt running beside it): a cell holds at most two files of its
    own."""
    table, batches = stream_batches(400, 80)
    job, files = triangle_job(), StateFiles(tmp_path)
    shares, live, stored = cell_grid(job, 1), LiveCells(), None
    folder, windows = tmp_path / "cell-0", []
    for number, batch in enumerate(batches):
        rows = routed_rows(edges_part(batch), job, shares)
        state, engine = files.open(stored, ("run", 0), live)
        left = {p.name for p in folder.iterdir()} if folder.exists() else set()
        assert not {n for n in left if n.startswith(f"{number - 3:012d}-")}, left
        if number:  # a failed attempt of this batch, and one of a later batch beside it
            (folder / f"{number:012d}-dead").write_bytes(b"x")
            (folder / f"{number + 1:012d}-beef").write_bytes(b"x")
        step = step_cell(job, shares, 2 * S, 0, state, rows, engine, states=files)
        before, stored = stored, files.save(0, step, stored, number)
        live.keep(("run", 0), step)
        ours = [p.name for p in folder.iterdir() if "dead" not in p.name
                and "beef" not in p.name and not p.name.startswith("released-")]
        assert len(ours) == (1 if number == 0 else 2), ours
        # the released edges the two newest states read, no more
        read = {e.batch_id for ref in (before, stored) if ref is not None
                for e in files.read(ref).log}
        assert {int(p.stem.split("-")[1]) for p in folder.glob("released-*")} == read
        windows.append(len(files.read(stored).log))
        if before is not None:  # the batch re-run from the state before it, elsewhere
            again, engine = files.open(before, ("run", 0), LiveCells())
            assert engine is None and again.version == pickle.loads(before).version
    files.open(stored, ("run", 0), LiveCells())
    last = len(batches) - 1
    assert sorted(p.name for p in folder.iterdir() if not p.name.startswith("released-")) \
        == sorted([pickle.loads(stored).name.split("/")[-1], f"{last + 1:012d}-beef"])
    assert max(windows) < len(batches), "the log keeps the window's batches only"


# -- on Spark ------------------------------------------------------------------------------


def start_cells_query(spark, source, work, cells: int, once: bool, text: str):
    """The stream of the kill test: Parquet parts, one a micro-batch, through ``cells``
    cells; matches, late edges, checkpoint and the cells' state files (as ``graphcep
    stream --matching executors`` keeps them) under ``work``."""
    from graphcep.io.sinks import JsonlSink
    from graphcep.runtime.streaming.cells import start_cells_stream
    from graphcep.runtime.streaming.driver import PartWriter

    edges = (spark.readStream.schema("t long, src string, dst string, dur long, seq long")
             .option("maxFilesPerTrigger", "1").parquet(str(source)))
    return start_cells_stream(spark, edges, SubgraphJob.create(parse_program(text)),
                              cells=cells, lateness_us=2_000_000,
                              checkpoint=f"{work}/checkpoint",
                              sink=JsonlSink(f"{work}/out", directory=True),
                              late_sink=PartWriter(f"{work}/late"), available_now=once,
                              states=StateFiles(f"{work}/cells"))


#: the driver a test starts and kills: :func:`start_cells_query` in a process of its own
DRIVER = """
import sys
sys.path.insert(0, sys.argv[4])
from graphcep.runtime.spark import spark_session
from tests.runtime.test_spark_cells import start_cells_query

spark = spark_session("local[2]", shuffle_partitions=2)
source, work, cells = sys.argv[1], sys.argv[2], int(sys.argv[3])
start_cells_query(spark, source, work, cells, False, sys.stdin.read()).awaitTermination()
"""


def write_parquet_parts(batches: list[pa.Table], directory) -> None:
    """One Parquet file per batch, their modification times in batch order (the order
    Spark's file source takes them in)."""
    import os

    import pyarrow.parquet as pq

    directory.mkdir(parents=True)
    for i, batch in enumerate(batches):
        path = directory / f"part-{i:04d}.parquet"
        pq.write_table(batch, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def stream_batches(count: int = 1_200, step: int = 240) -> tuple[pa.Table, list[pa.Table]]:
    """``count`` edges arriving out of order (late ones included) in files of ``step``
    arrivals, then one far edge that releases the rest."""
    table = generate_netflow(count, 30, 60, seed=11).select(["t", "src", "dst", "dur", "seq"])
    delays = [(i * 7919) % (3 * S) for i in range(table.num_rows)]
    batches = arrival_batches(table, delays, list(range(0, count, step)))
    end = pa.table({"t": [10**12], "src": ["far1"], "dst": ["far2"], "dur": [0],
                    "seq": [10**6]}).cast(table.schema)
    return table, [*batches, end]


def batches_as_run(checkpoint, files: list[pa.Table]) -> list[pa.Table]:
    """The micro-batches a file stream ran, as the edges of the files each took. Query
    batch ``N`` took the file source's log entries after the previous batch's offset up
    to its own (``offsets/N``'s last line, ``{"logOffset": k}``); entry ``k``
    (``sources/0/k``) names its file. A restarted query can take two entries at once: the
    killed one logged a file for a batch it never planned."""
    import json
    import re

    def numbered(directory):
        return sorted((int(p.name), p) for p in directory.iterdir() if p.name.isdigit())

    file_of = {}
    for entry, path in numbered(checkpoint / "sources" / "0"):
        (line,) = path.read_text().splitlines()[1:]
        file_of[entry] = int(re.search(r"part-(\d+)\.parquet", json.loads(line)["path"])[1])
    run, last = [], -1
    for _, path in numbered(checkpoint / "offsets"):
        offset = json.loads(path.read_text().splitlines()[-1])["logOffset"]
        run.append(pa.concat_tables([files[file_of[k]] for k in range(last + 1, offset + 1)]))
        last = offset
    assert last + 1 == len(files), "a file the stream never took"
    return run


def written_keys(directory) -> list[tuple[int, ...]]:
    import json

    return [tuple(e["seq"] for e in json.loads(line)["edges"])
            for part in sorted(directory.glob("part-*.jsonl"))
            for line in part.read_text().splitlines()]


def expected(table: pa.Table, batches: list[pa.Table]) -> tuple[set, set[int]]:
    late = late_seqs(batches, 2 * S)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    return brute_force_matches(triangle_job().query, on_time), late


def start_driver(source, work, cells: int):
    """:data:`DRIVER` in a session of its own (its JVM in the same process group)."""
    import subprocess
    import sys

    from tests.paths import ROOT

    proc = subprocess.Popen([sys.executable, "-c", DRIVER, str(source), str(work), str(cells),
                             str(ROOT)], stdin=subprocess.PIPE, text=True,
                            start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    proc.stdin.write(TRIANGLE)
    proc.stdin.close()
    return proc


@pytest.mark.spark
@pytest.mark.slow
def test_a_killed_driver_restarts_from_spark_state_losing_and_repeating_nothing(spark,
                                                                                tmp_path):
    """Eight cells on Spark, the driver SIGKILLed once micro-batches have been written and
    restarted on the same checkpoint (in this process, on the tests' session: one JVM
    start fewer): every match of the oracle and every late edge written exactly once
    (parts of a re-run batch overwritten). One cell, and these cells without Spark, are
    checked against the oracle and driver mode above."""
    import os
    import signal
    import time

    table, batches = stream_batches()
    write_parquet_parts(batches, tmp_path / "in")
    proc = start_driver(tmp_path / "in", tmp_path, 8)
    deadline = time.monotonic() + 300
    while len(list((tmp_path / "out").glob("part-*.jsonl"))) < 2:
        assert proc.poll() is None and time.monotonic() < deadline, "the driver stopped"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    written_before = len(list((tmp_path / "out").glob("part-*.jsonl")))
    assert written_before < len(batches), "the driver finished before it was killed"
    start_cells_query(spark, tmp_path / "in", tmp_path, 8, True, TRIANGLE).awaitTermination()
    # which edges are late depends on the micro-batches' bounds (the watermark before each),
    # and a restarted query may take two files in one batch: the oracle follows the batches
    # the checkpoint says were run
    want, late = expected(table, batches_as_run(tmp_path / "checkpoint", batches))
    got = written_keys(tmp_path / "out")
    assert len(got) == len(set(got)), "a match was written twice"
    assert set(got) == want
    import json

    written_late = [json.loads(line)["seq"] for part in (tmp_path / "late").glob("part-*")
                    for line in part.read_text().splitlines()]
    assert sorted(written_late) == sorted(late)


def test_state_records_keep_what_a_rerun_starts_from(tmp_path):
    """The driver records the cells' states after each micro-batch before Spark commits
    it: a batch (re-)run starts from the newest record before it, and that record
    outlives the next batch's, so a batch re-run after a kill finds its start."""
    files = StateFiles(tmp_path)
    assert files.recorded_before(0) == {} and not files.recorded()
    for batch in range(4):
        files.record(batch, {0: f"after {batch}".encode(), 1: b"one"})
    assert files.recorded_before(4) == {0: b"after 3", 1: b"one"}
    assert files.recorded_before(3) == {0: b"after 2", 1: b"one"}  # batch 3 re-run
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "states-000000000002.pickle", "states-000000000003.pickle"]
    (tmp_path / "states-000000000003.pickle").write_bytes(b"not a pickle")
    with pytest.raises(CheckpointDamaged, match="states-000000000003"):
        files.recorded_before(4)


def test_a_checkpoint_whose_cells_kept_states_in_spark_is_refused(tmp_path):
    """A checkpoint of the executor mode before its states were recorded beside it holds
    them in Spark's state store, which the cells no longer read: one line to start anew."""
    from graphcep.patterns.subgraph import QueryError

    checkpoint = tmp_path / "spark"
    (checkpoint / "state" / "0").mkdir(parents=True)
    files = StateFiles(tmp_path / "cells")
    with pytest.raises(QueryError, match="start from a new --checkpoint"):
        refuse_state_store(checkpoint, files)
    files.record(0, {})
    refuse_state_store(checkpoint, files)  # a checkpoint of this graphcep's cells


@pytest.mark.spark
def test_partition_keys_send_each_cells_rows_to_its_own_task(spark):
    """``repartition(tasks, key)`` puts the rows keyed for task ``i`` in partition ``i``:
    the cells spread evenly over the tasks."""
    from pyspark.sql import functions as F

    for tasks in (1, 2, 3, 5):
        keys = partition_keys(spark, tasks)
        frame = spark.createDataFrame([(k, i) for i, k in enumerate(keys)], "key long, i long")
        placed = (frame.repartition(tasks, "key")
                  .select("i", F.spark_partition_id().alias("p")).collect())
        assert sorted((row.i, row.p) for row in placed) == [(i, i) for i in range(tasks)]


def test_a_batch_of_many_matches_is_spilled_in_chunks(tmp_path, monkeypatch):
    """A micro-batch whose edges complete many matches: the cell writes them to its
    spill file chunk by chunk as the engine finds them (none larger than a chunk, so no
    process holds the batch's matches at once), and the driver reads back the brute-force
    matcher's matches, each once, from the files the output rows name."""
    import graphcep.engines.base as engines

    monkeypatch.setattr(engines, "MATCH_CHUNK_ROWS", 200)
    path = SubgraphJob.create(parse_program(
        "{ a e1 b; b e2 c; starttime(e1) < starttime(e2); "
        "starttime(e2) - starttime(e1) <= 10; }"))
    table = generate_netflow(600, 6, 5, seed=3).select(["t", "src", "dst", "dur", "seq"])
    end = pa.table({"t": [10**12], "src": ["far1"], "dst": ["far2"], "dur": [0],
                    "seq": [10**6]}).cast(table.schema)
    files, shares = StateFiles(tmp_path), cell_grid(path, 2)
    spilled, steps = [], {}
    for batch_id, batch in enumerate([table, end]):
        rows = routed_rows(edges_part(batch), path, shares)
        for cell in range(shares.cells):
            mine = rows.filter(pc.equal(rows.column("_cell"), cell))
            out = files.matches_out(cell, batch_id)
            before = steps.get(cell)
            steps[cell] = step_cell(path, shares, S, cell, before and before.state, mine,
                                    before and before.engine, states=files, out=out)
            spilled.extend(name.decode() for kind, name, _ in out.rows() if kind == "spilled")
    sizes = [b.num_rows for name in spilled for b in pa.ipc.open_stream(pa.OSFile(name))]
    assert max(sizes) <= 200 and len(sizes) > 5, sizes
    got = keys([t for name in spilled for t in spilled_chunks(name)])
    assert len(got) == len(set(got))
    assert set(got) == brute_force_matches(path.query, table.to_pylist())



def test_cells_write_the_json_lines_the_sink_would_and_the_driver_joins_them(tmp_path):
    """Given the JSONL sink's encoder, each cell writes its matches as the sink's own
    lines, and the part joined from the cells' pieces is, byte for byte, the part the sink
    writes from the same cells' matches spilled as Arrow; its matches are the brute-force
    matcher's."""
    from graphcep.io.sinks import JsonlSink

    table, batches = stream_batches(600, 200)
    job, shares = triangle_job(), cell_grid(triangle_job(), 8)
    sinks = {way: JsonlSink(tmp_path / way, directory=True) for way in ("encoded", "arrow")}
    files = {way: StateFiles(tmp_path / f"state-{way}") for way in sinks}
    steps: dict = {}
    for batch_id, batch in enumerate(batches):
        rows = routed_rows(edges_part(batch), job, shares)
        written: dict = {"encoded": [], "arrow": []}
        for cell in range(shares.cells):
            mine = rows.filter(pc.equal(rows.column("_cell"), cell))
            for way, sink in sinks.items():
                out = files[way].matches_out(cell, batch_id,
                                             sink.encoder() if way == "encoded" else None)
                before = steps.get((way, cell))
                steps[way, cell] = step_cell(job, shares, 2 * S, cell,
                                             before and before.state, mine,
                                             before and before.engine, states=files[way],
                                             out=out)
                written[way] += [(name.decode(), count) for _, name, count in out.rows()]
        sinks["encoded"].write_encoded(written["encoded"], batch_id)
        sinks["arrow"].write_chunks((t for name, _ in written["arrow"]
                                     for t in spilled_chunks(name)), batch_id)
    for number in range(len(batches)):
        part = f"part-{number:08d}.jsonl"
        assert (tmp_path / "encoded" / part).read_bytes() == \
            (tmp_path / "arrow" / part).read_bytes()
    got = [tuple(e["seq"] for e in json.loads(line)["edges"])
           for path in sorted((tmp_path / "encoded").glob("part-*"))
           for line in path.read_text().splitlines()]
    late = late_seqs(batches, 2 * S)
    on_time = [r for r in table.to_pylist() if r["seq"] not in late]
    assert len(got) == len(set(got)) and len(got) > 20
    assert set(got) == brute_force_matches(job.query, on_time)
