"""Several SUBGRAPH statements of one SAL program, run over one read of the stream.

The oracle is the brute-force matcher of :mod:`tests.oracle`, run on each query alone:
the matches of the program are, query by query, exactly the oracle's.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from graphcep.cli import main
from graphcep.io.generator import generate_netflow
from graphcep.jobs import as_job
from graphcep.jobs.composite import CompositeJob
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.local import run_job
from graphcep.runtime.streaming.driver import StreamOperator
from tests.oracle import brute_force_matches

#: Three queries of different shapes, extents and orientations: the composite's shards
#: must be wide enough for the widest, and ``Rev`` reads edges the other way round.
PROGRAM = """
S = CsvStream("edges.csv");
SUBGRAPH Tri {
    x1 e1 x2; x2 e2 x3; x3 e3 x1;
    starttime(e3) - starttime(e1) <= 10;
    starttime(e1) < starttime(e2); starttime(e2) < starttime(e3);
}
SUBGRAPH Back {
    a f1 b; b f2 a;
    starttime(f1) < starttime(f2); starttime(f2) - starttime(f1) <= 3;
}
SUBGRAPH Rev ON S WITH source(dst) AND target(src) {
    p g1 q; p g2 r;
    starttime(g1) < starttime(g2); starttime(g2) - starttime(g1) <= 1;
}
"""
NAMES = ("Tri", "Back", "Rev")


@pytest.fixture(scope="module")
def stream() -> pa.Table:
    table = generate_netflow(600, 14, 20, seed=7)
    rng = np.random.default_rng(7)
    return table.set_column(3, "dur", pa.array(rng.integers(0, 2_000_000, table.num_rows)))


def oracle(name: str, stream: pa.Table) -> set[tuple]:
    """The brute-force matches of query ``name`` alone, as (query, edge seqs)."""
    query = SubgraphJob.create(parse_program(PROGRAM), name).query
    rows = stream.to_pylist()
    if query.source_field == "dst":  # the oracle reads edges as the query does
        rows = [{**row, "src": row["dst"], "dst": row["src"]} for row in rows]
    return {(name, seqs) for seqs in brute_force_matches(query, rows)}


def found(matches: pa.Table) -> set[tuple]:
    return {(q, tuple(e["seq"] for e in edges)) for q, edges in
            zip(matches.column("query").to_pylist(), matches.column("edges").to_pylist(),
                strict=True)}


def test_every_query_of_a_program_runs_and_each_match_names_its_query(stream):
    program = parse_program(PROGRAM)
    job = as_job(program)
    assert isinstance(job, CompositeJob) and job.name == "Tri, Back, Rev"
    matches, _ = run_job(job, stream)
    expected = {name: oracle(name, stream) for name in NAMES}
    assert all(expected.values()), "each query matches something here"
    assert found(matches) == set().union(*expected.values())
    assert matches.num_rows == len(found(matches))  # no match twice
    for name in NAMES:  # the union of the single-query runs
        alone, _ = run_job(SubgraphJob.create(program, name), stream)
        assert found(alone) == expected[name]


def test_the_composite_extent_is_the_widest_members(stream):
    job = as_job(parse_program(PROGRAM)).bind(2_000_000)
    assert job.extent().size == max(m.extent().size for m in job.members)
    assert job.extent().size == SubgraphJob.create(parse_program(PROGRAM), "Tri").bind(
        2_000_000).extent().size


def test_streaming_runs_every_query_and_restarts_from_a_snapshot(stream, tmp_path):
    """Micro-batches through the stream operator, with a checkpoint restart midway; the
    members' engines are snapshotted (a member with vertex features is whole-stream)."""
    job = as_job(parse_program(PROGRAM)).bind(2_000_000)
    expected = set().union(*(oracle(name, stream) for name in NAMES))
    batches = [stream.slice(i, 100) for i in range(0, stream.num_rows, 100)]
    collected: list[pa.Table] = []
    operator = StreamOperator(job, checkpoint=tmp_path,
                              on_matches=lambda m, b: collected.append(m))
    for b, batch in enumerate(batches[:3]):
        operator.process(b, batch)
    restarted = StreamOperator(job, checkpoint=tmp_path,
                               on_matches=lambda m, b: collected.append(m))
    for b, batch in enumerate(batches[3:], 3):
        restarted.process(b, batch)
    restarted.flush()  # the end of the stream releases its newest edges
    assert found(pa.concat_tables(collected)) == expected


def test_a_composite_engine_snapshot_continues_where_it_stopped(stream):
    job = as_job(parse_program(PROGRAM)).bind(2_000_000)
    whole = found(job.new_engine().push(stream))
    first = job.new_engine()
    head = first.push(stream.slice(0, 300))
    again = type(first).restore(first.snapshot(), **first.restore_context())
    tail = again.push(stream.slice(300))
    assert found(head) | found(tail) == whole and not found(head) & found(tail)


def write_program(tmp_path: Path) -> Path:
    path = tmp_path / "three.sal"
    path.write_text(PROGRAM)
    return path


def written(path: Path) -> set[tuple]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["query"], tuple(e["seq"] for e in r["edges"])) for r in rows}


def test_cli_runs_all_queries_or_those_named(stream, tmp_path, capsys):
    program, data = write_program(tmp_path), tmp_path / "s.parquet"
    import pyarrow.parquet as pq

    pq.write_table(stream.replace_schema_metadata({b"graphcep.time_unit": b"us"}), data)
    expected = {name: oracle(name, stream) for name in NAMES}
    for chosen in (None, "Back,Tri", "Rev"):
        out = tmp_path / f"{chosen}.jsonl"
        pick = [] if chosen is None else ["--query-name", chosen]
        status = main(["run", str(program), "--input", str(data), "--engine", "local",
                       "--max-duration", "2", "-o", str(out), *pick])
        assert status == 0, capsys.readouterr().err
        names = NAMES if chosen is None else chosen.split(",")
        assert written(out) == set().union(*(expected[n] for n in names))


def test_explain_shows_every_query(tmp_path, capsys):
    program = write_program(tmp_path)
    assert main(["explain", str(program)]) == 0
    out = capsys.readouterr().out
    assert "3 queries" in out
    for name in NAMES:
        assert f"query {name} on stream" in out
    assert main(["explain", str(program), "--query-name", "Rev"]) == 0
    out = capsys.readouterr().out
    assert "query Rev on stream" in out and "query Tri" not in out


@pytest.mark.parametrize("names, message", [
    ("Tri,Nope", "no query named 'Nope' (the program's queries: Tri, Back, Rev)"),
    ("Tri,", "--query-name 'Tri,' has an empty name"),
])
def test_a_wrong_query_name_is_one_line(tmp_path, capsys, names, message):
    program = write_program(tmp_path)
    assert main(["explain", str(program), "--query-name", names]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1


def test_cells_refuse_several_queries():
    with pytest.raises(QueryError, match="several queries"):
        as_job(parse_program(PROGRAM)).cell_query()


@pytest.mark.spark
def test_spark_runs_every_query(spark, stream):
    from graphcep.runtime.spark import run_spark

    job = as_job(parse_program(PROGRAM))
    expected = set().union(*(oracle(name, stream) for name in NAMES))
    matches, stats = run_spark(spark, job, spark.createDataFrame(stream), shards=3,
                               strategy="shuffle")
    assert stats.extra["strategy"] == "shuffle"
    assert found(matches) == expected and matches.num_rows == len(expected)


def test_a_stream_restarts_a_composite_with_a_whole_stream_member(stream, tmp_path):
    """A member with vertex features makes the composite whole-stream: checkpoints then
    hold the members' engine snapshots (and the features), and a restart from them
    reports what one uninterrupted run does."""
    program = parse_program("""
        S = CsvStream("x.csv");
        Top = FOREACH S GENERATE topk(dst, 100, 10, 3);
        SUBGRAPH Hot ON S WITH source(src) AND target(dst) { a e1 b; b in Top; }
        SUBGRAPH Back ON S WITH source(src) AND target(dst) { a f1 b; b f2 a;
            starttime(f1) < starttime(f2); starttime(f2) - starttime(f1) <= 3; }""")
    job = as_job(program).bind(2_000_000)
    assert job.whole_stream
    whole, _ = run_job(job, stream)
    assert set(whole.column("query").to_pylist()) == {"Hot", "Back"}
    collected: list[pa.Table] = []
    batches = [stream.slice(i, 100) for i in range(0, stream.num_rows, 100)]
    first = StreamOperator(job, checkpoint=tmp_path, on_matches=lambda m, b: collected.append(m))
    for b, batch in enumerate(batches[:3]):
        first.process(b, batch)
    again = StreamOperator(job, checkpoint=tmp_path, on_matches=lambda m, b: collected.append(m))
    for b, batch in enumerate(batches[3:], 3):
        again.process(b, batch)
    again.flush()
    assert sorted(pa.concat_tables(collected).column("match_id").to_pylist()) == \
        sorted(whole.column("match_id").to_pylist())
