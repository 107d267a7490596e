"""DDST queries through the runtimes: Spark's exact sharded replay (every strategy, time and
count windows) equals one in-process baseline engine and the brute-force oracle; the CLI
runs ``.ddst`` queries locally and on Spark."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from graphcep.events import format_seconds
from graphcep.io.readers import read_edges
from graphcep.jobs.base import Extent
from graphcep.jobs.ddst import DDSTJob
from graphcep.lang.ddst import parse_ddst
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.local import replay_job, run_job
from tests import ddst_oracle as oracle

S = 1_000_000
QUERY = """
QUERY relay;
VERTICES A:M, B, C:M;
EDGES ab: A -> B [x]; bc: B -> C [y]; ac: A -> C;
ORDER ab < bc;
WITHIN {window};
"""
TIME_QUERY = parse_ddst(QUERY.format(window="4 s"))
COUNT_QUERY = parse_ddst(QUERY.format(window="14 EDGES"))


def labelled_stream(n: int, vertices: int, seed: int) -> pa.Table:
    """``n`` random edges, about 4 a second with equal times common, each vertex with one
    label (M or N) and each edge labelled x or y; ``seq`` is 1..n."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.integers(0, 500_000, n))
    src, dst = rng.integers(0, vertices, n), rng.integers(0, vertices, n)
    vlabel = rng.choice(["M", "N"], vertices)
    return pa.table({
        "t": pa.array(t, pa.int64()),
        "src": [f"v{v}" for v in src],
        "dst": [f"v{v}" for v in dst],
        "seq": pa.array(np.arange(1, n + 1), pa.int64()),
        "label": rng.choice(["x", "y"], n).tolist(),
        "src_label": vlabel[src].tolist(),
        "dst_label": vlabel[dst].tolist(),
    })


def keys(matches: pa.Table) -> set[tuple]:
    """Each report as (trigger seq, sorted (query edge, seq) pairs); checks none repeats."""
    rows = [
        (trigger, tuple(sorted((e["qedge"], e["seq"]) for e in edges)))
        for trigger, edges in zip(matches.column("trigger_seq").to_pylist(),
                                  matches.column("edges").to_pylist(), strict=True)
    ]
    assert len(rows) == len(set(rows)), "a report was repeated"
    return set(rows)


def full_keys(matches: pa.Table) -> set[tuple]:
    """Reports as the oracle gives them: (trigger seq, S, Se)."""
    return {
        (row["trigger_seq"],
         frozenset((v["qvar"], v["vertex"], v["label"]) for v in row["vertices"]),
         frozenset((e["qedge"], e["seq"]) for e in row["edges"]))
        for row in matches.to_pylist()
    }


def oracle_keys(query, stream: pa.Table) -> set[tuple]:
    return set(oracle.reports(query, stream.to_pylist()))


@pytest.fixture(scope="module")
def stream() -> pa.Table:
    return labelled_stream(700, 6, seed=7)


def test_jobs_know_their_extent_and_columns():
    assert DDSTJob(TIME_QUERY).extent() == Extent(4 * S)
    assert DDSTJob(COUNT_QUERY).extent() == Extent(13, "edges")
    assert DDSTJob(TIME_QUERY).needed_columns(["t", "src", "dst", "dur", "seq", "label", "x"]) == [
        "t", "src", "dst", "seq", "label"]


def test_warm_up_only_fills_state(stream):
    """A shard replayed after its warm-up reports exactly the whole replay's reports
    triggered inside the shard."""
    job = DDSTJob(TIME_QUERY)
    whole = keys(replay_job(job, stream))
    cut = int(stream.column("t")[350].as_py())
    t = stream.column("t")
    own = stream.filter(pa.compute.greater_equal(t, cut))
    warm = stream.filter(pa.compute.and_(pa.compute.greater_equal(t, cut - 4 * S),
                                         pa.compute.less(t, cut)))
    seqs = set(own.column("seq").to_pylist())
    assert keys(replay_job(job, own, warmup=warm)) == {k for k in whole if k[0] in seqs}


@pytest.mark.parametrize("engine", ["signature", "coloring"])
def test_other_ddst_engines_run_as_jobs(stream, engine):
    pytest.importorskip(f"graphcep.engines.ddst.{engine}")
    for query in (TIME_QUERY, COUNT_QUERY):
        expected, _ = run_job(DDSTJob(query, "baseline"), stream)
        got, _ = run_job(DDSTJob(query, engine), stream)
        assert keys(got) == keys(expected)


# -- Spark ------------------------------------------------------------------------------


@pytest.mark.spark
@pytest.mark.parametrize("query", [TIME_QUERY, COUNT_QUERY], ids=["time", "count"])
def test_spark_equals_baseline_for_every_strategy(spark, stream, query):
    from graphcep.runtime.spark import run_spark

    expected = keys(replay_job(DDSTJob(query, "baseline"), stream))
    assert len(expected) > 20
    df = spark.createDataFrame(stream).cache()
    for shards in (2, 5):
        matches, stats = run_spark(spark, DDSTJob(query), df, shards=shards)
        assert stats.extra["strategy"] == "shuffle"
        assert keys(matches) == expected, f"{shards} shards"
    assert stats.extra["shards"] > 1
    # time-ordered input partitions are shards where they are
    ordered = spark.createDataFrame(stream).repartitionByRange(4, "t").cache()
    matches, stats = run_spark(spark, query, ordered, strategy="partitions")
    assert (stats.extra["strategy"], stats.extra["shards"]) == ("partitions", 4)
    assert keys(matches) == expected
    matches, stats = run_spark(spark, query, df, strategy="single")
    assert keys(matches) == expected
    unit = "us" if query.window.kind == "time" else "edges"
    assert stats.extra[f"extent_{unit}"] == DDSTJob(query).extent().size
    df.unpersist()
    ordered.unpersist()


@pytest.mark.spark
@pytest.mark.parametrize("query", [TIME_QUERY, COUNT_QUERY], ids=["time", "count"])
def test_spark_new_pair_reports_equal_one_replay(spark, stream, query):
    """report="new" on time shards: each shard warms up on two windows, so it leaves out
    exactly the pairs the reports before it held (a one-window warm-up repeats some)."""
    from graphcep.runtime.spark import run_spark

    job = DDSTJob(query, "coloring", {"report": "new"})
    expected = keys(replay_job(job, stream))
    assert expected != keys(replay_job(DDSTJob(query), stream))  # the mode changes reports
    df = spark.createDataFrame(stream).cache()
    for shards in (2, 5):
        matches, _ = run_spark(spark, job, df, shards=shards)
        assert keys(matches) == expected, f"{shards} shards"
    ordered = spark.createDataFrame(stream).repartitionByRange(4, "t").cache()
    matches, stats = run_spark(spark, job, ordered, strategy="partitions")
    assert stats.extra["shards"] == 4 and keys(matches) == expected
    df.unpersist()
    ordered.unpersist()


@pytest.mark.spark
@pytest.mark.parametrize("query", [TIME_QUERY, COUNT_QUERY], ids=["time", "count"])
def test_spark_equals_the_oracle(spark, query):
    from graphcep.runtime.spark import run_spark

    small = labelled_stream(60, 5, seed=3)
    expected = oracle_keys(query, small)
    assert expected
    matches, stats = run_spark(spark, query, spark.createDataFrame(small), shards=3)
    assert stats.extra["shards"] > 1
    assert full_keys(matches) == expected


# -- the command line -------------------------------------------------------------------


def write_csv(table: pa.Table, path: Path) -> None:
    """The stream as CSV with a header, times in seconds, labels in their own columns."""
    lines = ["t,src,dst,label,src_label,dst_label"]
    for r in table.to_pylist():
        lines.append(f"{format_seconds(r['t'])},{r['src']},{r['dst']},{r['label']},"
                     f"{r['src_label']},{r['dst_label']}")
    path.write_text("\n".join(lines) + "\n")


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


@pytest.fixture
def cli_files(tmp_path: Path) -> dict[str, Path]:
    query = tmp_path / "relay.ddst"
    query.write_text(QUERY.format(window="4 s"))
    stream = tmp_path / "relay.csv"
    write_csv(labelled_stream(80, 6, seed=11), stream)
    return {"query": query, "stream": stream, "rejects": tmp_path / "rejects.jsonl"}


def test_cli_runs_ddst_locally(cli_files, tmp_path, capsys):
    edges = read_edges(cli_files["stream"]).edges  # seq = line numbers, as the CLI reads it
    expected = oracle_keys(TIME_QUERY, edges)
    out = tmp_path / "m.jsonl"
    base = ["run", str(cli_files["query"]), "--input", str(cli_files["stream"]),
            "--engine", "local", "--rejects", str(cli_files["rejects"])]
    assert main([*base, "--summary", "json", "--output", str(out)]) == 0
    summary = last_json(capsys.readouterr().out)
    assert (summary["query"], summary["edges"], summary["rejected"]) == ("relay", 80, 0)
    assert summary["matches"] == len(expected) > 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = {(r["trigger_seq"], frozenset((v["qvar"], v["vertex"], v["label"]) for v in r["vertices"]),
            frozenset((e["qedge"], e["seq"]) for e in r["edges"])) for r in rows}
    assert got == expected
    # the console shows query vertex -> stream vertices and the edges with times in seconds
    assert main([*base, "--limit", "1"]) == 0
    console = capsys.readouterr().out
    first = rows[0]
    assert f"trigger seq={first['trigger_seq']}" in console
    edge = first["edges"][0]
    assert f"{edge['qedge']}: {edge['src']} -> {edge['dst']}" in console
    assert f"@ {edge['t']}s" in console and "  A -> " in console


def test_cli_reports_new_pairs(cli_files, tmp_path, capsys):
    """--ddst-report new: the same triggers, each row only with the pairs no earlier row
    held (together, the component rows' pairs); explain shows the two-window warm-up.
    A 20 s window, so that components grow over several reports."""
    query = tmp_path / "relay20.ddst"
    query.write_text(QUERY.format(window="20 s"))
    base = ["run", str(query), "--input", str(cli_files["stream"]),
            "--engine", "local", "--rejects", str(cli_files["rejects"])]
    rows = {}
    for mode in ("component", "new"):
        out = tmp_path / f"{mode}.jsonl"
        assert main([*base, "--ddst-report", mode, "--output", str(out)]) == 0
        rows[mode] = [json.loads(line) for line in out.read_text().splitlines()]
    capsys.readouterr()
    assert [r["trigger_seq"] for r in rows["new"]] == [r["trigger_seq"] for r in rows["component"]]
    pairs = [{(e["qedge"], e["seq"]) for e in r["edges"]} for r in rows["new"]]
    assert sum(map(len, pairs)) == len(set().union(*pairs))  # no pair twice
    assert set().union(*pairs) == {(e["qedge"], e["seq"])
                                   for r in rows["component"] for e in r["edges"]}
    assert sum(map(len, pairs)) < sum(len(r["edges"]) for r in rows["component"])
    assert main(["explain", str(query), "--ddst-report", "new"]) == 0
    assert "each warmed up on the 40 s before its start" in capsys.readouterr().out


def test_cli_explains_and_rejects_sal_options(cli_files, capsys):
    assert main(["explain", str(cli_files["query"])]) == 0
    out = capsys.readouterr().out
    assert "window: 4 s" in out and "ab < bc" in out
    assert "plan (coloring engine)" in out  # the default
    for engine, words in (("baseline", "candidate component"), ("signature", "residues mod p"),
                          ("coloring", "red components")):
        assert main(["explain", str(cli_files["query"]), "--ddst-engine", engine]) == 0
        plan = next(line for line in capsys.readouterr().out.splitlines()
                    if line.startswith("plan"))
        assert plan.startswith(f"plan ({engine} engine): ") and words in plan
    assert main(["run", str(cli_files["query"]), "--input", str(cli_files["stream"]),
                 "--engine", "local", "--window", "3"]) == 2
    assert "--window" in capsys.readouterr().err


def test_cli_passes_engine_options(cli_files, tmp_path, capsys):
    """--signature-p / --signature-seed reach the signature engine (a small p only adds
    verifications: the output stays the oracle's); --max-window-edges is the state bound;
    an option the engine cannot take is a clear error."""
    edges = read_edges(cli_files["stream"]).edges
    expected = oracle_keys(TIME_QUERY, edges)
    base = ["run", str(cli_files["query"]), "--input", str(cli_files["stream"]),
            "--engine", "local", "--rejects", str(cli_files["rejects"]), "--summary", "json"]
    out = tmp_path / "m.jsonl"
    assert main([*base, "--ddst-engine", "signature", "--signature-p", "3",
                 "--signature-seed", "5", "--output", str(out)]) == 0
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    got = {(r["trigger_seq"], frozenset((v["qvar"], v["vertex"], v["label"]) for v in r["vertices"]),
            frozenset((e["qedge"], e["seq"]) for e in r["edges"])) for r in rows}
    assert got == expected
    capsys.readouterr()
    assert main([*base, "--ddst-engine", "signature", "--signature-p", "10"]) == 2
    assert "p must be a prime" in capsys.readouterr().err
    assert main([*base, "--ddst-engine", "coloring", "--signature-p", "13"]) == 2
    assert "--signature-p applies to --ddst-engine signature only" in capsys.readouterr().err
    assert main([*base, "--ddst-engine", "coloring", "--max-window-edges", "3"]) == 3
    assert "max_window_edges=3" in capsys.readouterr().err


@pytest.mark.spark
def test_cli_runs_ddst_on_spark(spark, cli_files, tmp_path, capsys):
    edges = read_edges(cli_files["stream"]).edges
    expected = keys(replay_job(DDSTJob(TIME_QUERY), edges))
    out = tmp_path / "m.parquet"
    assert main(["run", str(cli_files["query"]), "--input", str(cli_files["stream"]),
                 "--master", "local[2]", "--shards", "3", "--ddst-engine", "baseline",
                 "--rejects", str(cli_files["rejects"]), "--summary", "json",
                 "--output", str(out)]) == 0
    summary = last_json(capsys.readouterr().out)
    assert (summary["engine"], summary["ddst_engine"], summary["strategy"]) == (
        "spark", "baseline", "shuffle")
    assert summary["matches"] == len(expected) > 0 and summary["edges"] == 80
    assert keys(pq.read_table(out)) == expected


def test_spark_reads_columns_differing_only_in_case(spark, cli_files, tmp_path, capsys):
    # a netflow export's numeric `Label` next to the string edge `label` (VAST layout plus
    # io.labels.service_labels): Spark must take `label` by its exact name
    from graphcep.io.generator import write_edges
    from graphcep.runtime.spark import check_column_names

    edges = read_edges(cli_files["stream"]).edges
    expected = keys(replay_job(DDSTJob(TIME_QUERY), edges))
    both = tmp_path / "both.parquet"
    write_edges(edges.append_column("Label", pa.array(np.arange(edges.num_rows))), both)
    assert main(["run", str(cli_files["query"]), "--input", str(both), "--master", "local[2]",
                 "--summary", "json", "--output", str(tmp_path / "m.parquet")]) == 0
    assert last_json(capsys.readouterr().out)["matches"] == len(expected) > 0
    assert keys(pq.read_table(tmp_path / "m.parquet")) == expected
    # a session of the user's, comparing names ignoring case: a clear refusal, not an
    # ambiguous-reference error from deep inside the run
    spark.conf.set("spark.sql.caseSensitive", "false")
    try:
        with pytest.raises(ValueError, match="'Label' and 'label' differ only in case"):
            check_column_names(spark, ["t", "Label", "src", "label"])
        check_column_names(spark, ["t", "src", "label"])  # no clash: nothing to say
    finally:
        spark.conf.set("spark.sql.caseSensitive", "true")


def test_a_stream_without_the_label_fields_a_query_reads_is_refused(tmp_path, capsys):
    # relay reads edge labels (x, y) and source / destination vertex labels (M)
    job = DDSTJob(TIME_QUERY)
    core = ["t", "src", "dst", "seq"]
    for missing in ("label", "src_label", "dst_label"):
        fields = [*core, *(c for c in ("label", "src_label", "dst_label") if c != missing)]
        with pytest.raises(QueryError, match=f"from the field '{missing}', which the stream lacks"):
            job.check_columns(fields)
    job.check_columns([*core, "label", "src_label", "dst_label"])
    DDSTJob(parse_ddst("VERTICES A, B; EDGES e: A -> B; WITHIN 1 s")).check_columns(core)
    plain_edges = pa.table({"t": [1, 2], "src": ["a", "b"], "dst": ["b", "c"]})
    with pytest.raises(QueryError, match="from the field 'label'"):
        run_job(job, plain_edges)  # the runtimes check, not only the command line
    # on the command line: exit status 2 and the message, before any edge is matched
    plain = tmp_path / "plain.csv"
    plain.write_text("t,src,dst\n1,a,b\n2,b,c\n")
    query = tmp_path / "relay.ddst"
    query.write_text(QUERY.format(window="4 s"))
    assert main(["run", str(query), "--input", str(plain), "--engine", "local"]) == 2
    err = capsys.readouterr().err
    assert "reads edge labels ('x', 'y') from the field 'label'" in err
    assert "graphcep.io.labels" in err
