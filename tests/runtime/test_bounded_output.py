"""Matching in bounded memory: the SAL search hands out its matches in chunks it caps
(even when one edge closes more matches than a chunk holds), other engines' pushes shrink
until their output fits, counting makes no match at all, and a run with many matches
holds about one chunk of them. Checked against the brute-force oracles."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
import threading

import numpy as np
import pyarrow as pa
import pytest

from graphcep.engines.nu.compiled import CompiledNuEngine
from graphcep.engines.nu.engine import NuEngine
from graphcep.engines.subgraph.engine import SubgraphEngine
from graphcep.jobs import as_job
from graphcep.jobs.ddst import DDSTJob
from graphcep.lang.ddst import parse_ddst
from graphcep.lang.nu import parse_nu
from graphcep.lang.sal import parse_query
from graphcep.runtime import local
from graphcep.runtime.local import (
    MatchLimitReached,
    count_job,
    replay_job_chunks,
    stream_job,
)
from tests import ddst_oracle
from tests.oracle import brute_force_matches, cycles_in_order
from tests.paths import EXAMPLES, ROOT

S = 1_000_000
TRIANGLE = parse_query((EXAMPLES / "triangle.sal").read_text())
#: both orientations of a triangle's three edges: every later edge closes many triangles
SIX_EDGES = [("a", "b"), ("b", "c"), ("c", "a"), ("b", "a"), ("c", "b"), ("a", "c")]


def repeated_stream(reps: int, step_us: int = 1_000) -> pa.Table:
    """The six edges repeated ``reps`` times, one every ``step_us``; ``seq`` from 0."""
    pairs = SIX_EDGES * reps
    n = len(pairs)
    return pa.table({"t": pa.array(np.arange(n, dtype=np.int64) * step_us),
                     "src": [s for s, _ in pairs], "dst": [d for _, d in pairs],
                     "seq": pa.array(np.arange(n, dtype=np.int64))})


def triangles_in_order(pairs: list[tuple[str, str]]) -> int:
    """Temporal triangles of a stream whose edges all lie within 10 s, in strictly
    increasing times (:func:`tests.oracle.cycles_in_order`)."""
    return cycles_in_order(pairs, 3)


def seq_rows(tables) -> list[tuple[int, ...]]:
    """Each match as the seq of its edges in query-edge order."""
    return [tuple(e["seq"] for e in edges)
            for table in tables for edges in table.column("edges").to_pylist()]


def oracle(stream: pa.Table, homomorphic: bool = False) -> set[tuple[int, ...]]:
    return brute_force_matches(TRIANGLE, stream.to_pylist(), homomorphic)


def test_the_sal_search_caps_its_chunks_even_inside_one_edges_matches():
    """Chunks of at most 7 matches, while single edges close dozens: the search stops
    inside an edge's search and goes on where it stopped, losing and repeating none."""
    stream = repeated_stream(8)
    expected = oracle(stream)
    engine = SubgraphEngine(TRIANGLE, threads=1)
    chunks = list(engine.push_chunks(stream, 7))
    got = seq_rows(chunks)
    assert max(t.num_rows for t in chunks) <= 7
    assert len(got) == len(set(got)) and set(got) == expected
    assert len(expected) > 7 * 20  # many chunks
    assert engine.matches_found == len(expected)


def test_chunks_searched_in_threads_come_out_in_one_threads_order(monkeypatch):
    """Anchors split across threads: each thread's blocks wait their turn, so the rows
    come in the order one thread gives them, every chunk within its cap."""
    stream = repeated_stream(10)
    alone = seq_rows(SubgraphEngine(TRIANGLE, threads=1).push_chunks(stream, 5))
    monkeypatch.setattr(SubgraphEngine, "_chunks", lambda self, anchors: 3)
    chunks = list(SubgraphEngine(TRIANGLE, threads=3).push_chunks(stream, 5))
    assert max(t.num_rows for t in chunks) <= 5
    assert seq_rows(chunks) == alone
    assert set(alone) == oracle(stream)


def test_leaving_a_threaded_search_early_stops_its_threads(monkeypatch):
    """A consumer that stops taking chunks (``--max-matches``) leaves no thread behind,
    though the threads of later anchors wait with full queues."""
    monkeypatch.setattr(SubgraphEngine, "_chunks", lambda self, anchors: 3)
    before = threading.active_count()
    # one match a chunk: the first thread alone has more than the queue holds (20 edges
    # close 39 triangles), so every thread is still there
    chunks = SubgraphEngine(TRIANGLE, threads=3).push_chunks(repeated_stream(10), 1)
    next(chunks)
    assert threading.active_count() == before + 3
    chunks.close()  # the producers see the stop and end
    assert threading.active_count() == before


@pytest.mark.parametrize("homomorphic", [False, True])
@pytest.mark.parametrize("seed", [1, 2])
def test_count_equals_the_oracle_for_sal(seed, homomorphic):
    rng = np.random.default_rng(seed)
    n = 160
    stream = pa.table({"t": pa.array(np.sort(rng.integers(0, 40 * S, n))),
                       "src": [f"v{v}" for v in rng.integers(0, 6, n)],
                       "dst": [f"v{v}" for v in rng.integers(0, 6, n)],
                       "seq": pa.array(np.arange(n, dtype=np.int64))})
    expected = oracle(stream, homomorphic)
    engine = SubgraphEngine(TRIANGLE, homomorphic=homomorphic, threads=1)
    halves = engine.count(stream.slice(0, n // 2)) + engine.count(stream.slice(n // 2))
    assert halves == len(expected) > 0
    assert engine.matches_found == len(expected)


def test_count_of_the_repeated_stream_equals_the_oracle_and_the_records():
    stream = repeated_stream(9)
    job = as_job(TRIANGLE)
    records = seq_rows(replay_job_chunks(job, stream, chunk_rows=11))
    assert count_job(job, stream) == len(records) == len(oracle(stream))


DDST_TEXT = """
QUERY relay;
VERTICES A, B, C;
EDGES ab: A -> B; bc: B -> C;
ORDER ab < bc;
WITHIN {window};
"""
DDST = parse_ddst(DDST_TEXT.format(window="3 s"))


def ddst_stream(n: int, seed: int) -> pa.Table:
    rng = np.random.default_rng(seed)
    return pa.table({"t": pa.array(np.cumsum(rng.integers(0, 400_000, n))),
                     "src": [f"v{v}" for v in rng.integers(0, 5, n)],
                     "dst": [f"v{v}" for v in rng.integers(0, 5, n)],
                     "seq": pa.array(np.arange(1, n + 1), pa.int64())})


def test_another_kinds_chunks_and_count_equal_its_oracle():
    """A DDST engine returns a push's reports at once: the replay shrinks its pushes
    until they fit a chunk (here 3 reports) and cuts what is left; the count, push by
    push, equals the oracle's number of reports."""
    stream = ddst_stream(300, seed=5)
    expected = ddst_oracle.reports(DDST, stream.to_pylist())
    chunks = list(replay_job_chunks(DDSTJob(DDST), stream, chunk_rows=3))
    assert max(t.num_rows for t in chunks) <= 3
    assert sum(t.num_rows for t in chunks) == len(expected) > 10
    assert count_job(DDSTJob(DDST), stream) == len(expected)


def test_a_consumer_stops_the_run_and_the_statistics_say_so():
    taken: list[int] = []

    def consume(table: pa.Table) -> None:
        if sum(taken) + table.num_rows > 30:
            taken.append(30 - sum(taken))
            raise MatchLimitReached("--max-matches 30", taken[-1])
        taken.append(table.num_rows)

    stats = stream_job(as_job(TRIANGLE), repeated_stream(8), consume, chunk_rows=8)
    assert sum(taken) == stats.matches == 30
    assert stats.extra["stopped"] == "--max-matches 30"


def test_a_run_with_many_matches_holds_about_one_chunk_of_them():
    """About two million triangle matches (records of some 400 MB if held together)
    streamed to a consumer that drops them: the process's Arrow memory peaks at a few
    chunks' worth, and the Python heap (where the search's buffers live) likewise."""
    script = textwrap.dedent(f"""
        import json, sys, tracemalloc
        sys.path[:0] = [{str(ROOT / 'src')!r}]
        import numpy as np, pyarrow as pa
        from graphcep.jobs import as_job
        from graphcep.lang.sal import parse_query
        from graphcep.runtime.local import stream_job, MATCH_CHUNK_ROWS
        pairs = {SIX_EDGES!r} * 126
        n = len(pairs)
        edges = pa.table({{"t": pa.array(np.arange(n, dtype=np.int64) * 1000),
                          "src": [s for s, _ in pairs], "dst": [d for _, d in pairs]}})
        job = as_job(parse_query(open({str(EXAMPLES / "triangle.sal")!r}).read()))
        largest = [0]
        def drop(table):
            largest[0] = max(largest[0], table.num_rows)
        pool = pa.default_memory_pool()
        tracemalloc.start()
        stats = stream_job(job, edges, drop)
        heap = tracemalloc.get_traced_memory()[1]
        print(json.dumps({{"matches": stats.matches, "arrow_peak": pool.max_memory(),
                           "heap_peak": heap, "largest": largest[0],
                           "chunk": MATCH_CHUNK_ROWS}}))
    """)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=600)
    assert done.returncode == 0, done.stderr
    seen = json.loads(done.stdout.strip().splitlines()[-1])
    assert seen["matches"] == triangles_in_order(SIX_EDGES * 126) > 1_900_000
    assert seen["largest"] <= seen["chunk"] == local.MATCH_CHUNK_ROWS
    assert seen["arrow_peak"] < 100 * 2**20, seen
    assert seen["heap_peak"] < 100 * 2**20, seen


def spread_stream(n: int, seed: int) -> pa.Table:
    """``n`` random edges over 6 vertices in some 200 s: long enough for time shards."""
    rng = np.random.default_rng(seed)
    return pa.table({"t": pa.array(np.sort(rng.integers(0, 200 * S, n))),
                     "src": [f"v{v}" for v in rng.integers(0, 6, n)],
                     "dst": [f"v{v}" for v in rng.integers(0, 6, n)],
                     "dur": pa.array(np.zeros(n, dtype=np.int64)),
                     "seq": pa.array(np.arange(n, dtype=np.int64))})


@pytest.mark.spark
@pytest.mark.parametrize("strategy,shards,arrow", [
    ("single", None, True), ("single", None, False), ("shuffle", 4, False), ("cells", 4, False)])
def test_spark_tasks_count_what_the_oracle_finds(spark, strategy, shards, arrow):
    """Counting tasks send one number each (no match rows), for every strategy, and the
    driver counts a stream it holds itself; cells count only the matches whose home they
    are."""
    from graphcep.runtime.spark import run_spark

    stream = spread_stream(600, seed=3)
    expected = oracle(stream)
    frame = stream if arrow else spark.createDataFrame(stream.to_pandas())
    matches, stats = run_spark(spark, as_job(TRIANGLE), frame, strategy=strategy,
                               shards=shards, count=True)
    assert stats.matches == len(expected) > 0 and matches.num_rows == 0
    kept, _ = run_spark(spark, as_job(TRIANGLE), frame, strategy=strategy, shards=shards)
    assert set(seq_rows([kept])) == expected


@pytest.mark.spark
@pytest.mark.parametrize("window", ["3 s", "6 EDGES"])
def test_spark_tasks_count_another_kind(spark, window):
    """DDST in time shards, and in stretches of edge rank for a count window."""
    from graphcep.runtime.spark import run_spark

    query = parse_ddst(DDST_TEXT.format(window=window))
    stream = ddst_stream(300, seed=5)
    expected = ddst_oracle.reports(query, stream.to_pylist())
    frame = spark.createDataFrame(stream.to_pandas())
    _, stats = run_spark(spark, DDSTJob(query), frame, shards=3, count=True)
    assert stats.matches == len(expected) > 10


#: a link answered within 10 s: each answer closes every token its question left open
BACK = parse_nu("<#X ~> #Y . Y ~> X>[0, 10]", "back")


def questions_and_answers(pairs: list[tuple[str, str]]) -> pa.Table:
    """``pairs`` as links 1 ms apart (all within the pattern's 10 s)."""
    n = len(pairs)
    return pa.table({"t": pa.array(np.arange(n, dtype=np.int64) * 1_000),
                     "src": [s for s, _ in pairs], "dst": [d for _, d in pairs]})


@pytest.mark.parametrize("engine_class", [CompiledNuEngine, NuEngine])
def test_a_nu_game_hands_out_its_matches_between_links(engine_class):
    """One push whose answers close 30 tokens each: the game stops once a chunk's 7
    matches are made, at the end of the link it reads, and goes on when they are taken:
    the same matches in the same order as one whole push, those of the oracle."""
    pairs = ([("a", "b")] * 30 + [("c", "d")] * 10 + [("b", "a")] * 20 + [("d", "c")] * 5
             + [("a", "b")] * 5 + [("b", "a")] * 5)
    links = questions_and_answers(pairs)
    whole = engine_class(BACK).push(links)
    engine = engine_class(BACK)
    chunks = list(engine.push_chunks(links, 7))
    most_one_link_closes = 35
    assert max(t.num_rows for t in chunks) < 7 + most_one_link_closes
    assert len(chunks) > 20
    assert pa.concat_tables(chunks).equals(whole)
    assert whole.num_rows == cycles_in_order(pairs, 2) == engine.matches_found
    assert engine.edges_seen == len(pairs)


def test_a_stream_writes_a_batchs_matches_chunk_by_chunk_into_one_part(tmp_path,
                                                                       monkeypatch):
    """A micro-batch whose edges close hundreds of triangles: the operator hands the
    sink chunks of at most 7 as the search finds them, and the batch's part holds them
    all, those of the oracle, once."""
    from graphcep.engines import base
    from graphcep.io.sinks import JsonlSink
    from graphcep.runtime.streaming.driver import StreamOperator

    monkeypatch.setattr(base, "MATCH_CHUNK_ROWS", 7)
    stream = repeated_stream(8)
    sizes: list[int] = []
    with JsonlSink(tmp_path / "out", directory=True) as sink:
        operator = StreamOperator(as_job(TRIANGLE), checkpoint=tmp_path / "ck", sink=sink,
                                  on_matches=lambda table, _: sizes.append(table.num_rows))
        operator.process(0, stream)
        report = operator.flush()
    parts = sorted((tmp_path / "out").iterdir())
    records = [json.loads(line) for part in parts for line in part.read_text().splitlines()]
    got = [tuple(edge["seq"] for edge in record["edges"]) for record in records]
    assert len(got) == len(set(got)) and set(got) == oracle(stream)
    assert max(sizes) <= 7 and sum(sizes) == len(got) > 7 * 20
    assert operator.totals.matches == len(got)
    assert [p.name for p in parts] == [f"part-{b:08d}.jsonl" for b in range(report.batch_id + 1)]


@pytest.mark.parametrize("suffix", ["jsonl", "parquet", "dot"])
def test_a_part_written_in_chunks_replaces_the_batchs_part_only_when_whole(tmp_path,
                                                                            suffix):
    """Exactly once: a batch written again replaces its part; one that fails between two
    chunks leaves the part written before as it was, and no temporary file."""
    from graphcep.io.sinks import make_sink

    stream = repeated_stream(3)
    found = list(SubgraphEngine(TRIANGLE, threads=1).push_chunks(stream, 5))
    target = tmp_path / "out"
    target.mkdir()

    def failing():
        yield found[0]
        raise RuntimeError("the engine failed")

    with make_sink(str(target) + "/", suffix) as sink:
        assert sink.write_chunks(iter(found[:2]), 4) == found[0].num_rows + found[1].num_rows
        assert sink.write_chunks(iter(found), 4) == sum(t.num_rows for t in found)
        before = {p.name: p.read_bytes() for p in target.iterdir()}
        with pytest.raises(RuntimeError):
            sink.write_chunks(failing(), 4)
    assert {p.name: p.read_bytes() for p in target.iterdir()} == before
    (part,) = before
    assert part == f"part-00000004.{suffix}"
    assert parts_records(target / part, suffix) == sum(t.num_rows for t in found) > 10


def parts_records(path, suffix: str) -> int:
    if suffix == "parquet":
        import pyarrow.parquet as pq

        return pq.read_table(path).num_rows
    text = path.read_text()
    if suffix == "dot":
        assert text.startswith("digraph") and text.endswith("}\n")
        return text.count("subgraph \"cluster_")
    return len([json.loads(line) for line in text.splitlines()])


def test_a_stream_past_max_matches_commits_nothing_of_the_batch_that_passes_it(tmp_path):
    """The bound is the stream's total, kept in the checkpoint: the batch that would pass
    it raises before its part is in place and before its checkpoint, so a restart with
    the same bound stops again, and one with a higher bound loses and repeats nothing."""
    from graphcep.engines.base import StateBoundError
    from graphcep.io.sinks import JsonlSink
    from graphcep.runtime.streaming.driver import StreamOperator

    stream = repeated_stream(4)
    # batch 0 releases the edges before its newest (lateness 0): the first 11
    bound = len(oracle(stream.slice(0, 11)))
    out, checkpoint = tmp_path / "out", tmp_path / "ck"

    def operator(max_matches: int | None) -> StreamOperator:
        return StreamOperator(as_job(TRIANGLE), checkpoint=checkpoint, max_matches=max_matches,
                              sink=JsonlSink(out, directory=True))

    first = operator(bound)
    assert first.process(0, stream.slice(0, 12)).matches == bound > 0
    with pytest.raises(StateBoundError, match=f"--max-matches {bound} \\({bound:,} written"):
        first.process(1, stream.slice(12))
    assert sorted(p.name for p in out.iterdir()) == ["part-00000000.jsonl"]
    again = operator(bound)
    assert again.resume() == 0 and again.totals.matches == bound
    with pytest.raises(StateBoundError):
        again.process(1, stream.slice(12))
    raised = operator(None)
    raised.resume()
    raised.process(1, stream.slice(12))
    raised.flush()
    records = [json.loads(line) for part in sorted(out.iterdir())
               for line in part.read_text().splitlines()]
    got = [tuple(edge["seq"] for edge in record["edges"]) for record in records]
    assert len(got) == len(set(got)) and set(got) == oracle(stream)


@pytest.mark.spark
def test_the_driver_reads_the_tasks_chunks_in_parts_of_bounded_bytes(spark):
    """Chunks of two tasks, regrouped into parts of at most 100 bytes (a larger chunk
    alone): the parts hold every chunk once, in the tasks' order."""
    from graphcep.runtime.spark.replay import _split_by_bytes

    rng = np.random.default_rng(4)
    blobs = [bytes([i]) * int(size) for i, size in enumerate(rng.integers(1, 140, 40))]
    rows = spark.sparkContext.parallelize(blobs, 2)
    sizes = rows.mapPartitions(lambda part: [[len(b) for b in part]]).collect()
    parts = _split_by_bytes(rows, sizes, 100).glom().collect()
    assert [blob for part in parts for blob in part] == blobs
    assert all(sum(map(len, part)) <= 100 or len(part) == 1 for part in parts)
    assert len(parts) > 10


@pytest.mark.spark
def test_a_spark_run_read_in_parts_writes_the_oracles_matches_in_task_order(spark,
                                                                             monkeypatch):
    """Parts of one chunk each (a bound of one byte): the driver writes the same records,
    in the same order, as the tasks' output read whole, and those of the oracle."""
    from graphcep.runtime.spark import replay
    from graphcep.runtime.spark.replay import plan_spark

    stream = spread_stream(600, seed=3)
    expected = oracle(stream)
    whole = plan_spark(spark, as_job(TRIANGLE), stream, strategy="shuffle",
                       shards=4).collected()
    parts: list[int] = []
    split = replay._split_by_bytes

    def counted(rows, sizes, bound):
        parts.append(sum(len(task) for task in sizes))
        return split(rows, sizes, bound)

    monkeypatch.setattr(replay, "DRIVER_PART_BYTES", 1)
    monkeypatch.setattr(replay, "_split_by_bytes", counted)
    run = plan_spark(spark, as_job(TRIANGLE), stream, strategy="shuffle", shards=4)
    got = pa.Table.from_batches(list(run.batches()))
    assert parts and parts[0] > 1  # several chunks, one part each
    assert seq_rows([got]) == seq_rows([whole])
    assert set(seq_rows([got])) == expected
