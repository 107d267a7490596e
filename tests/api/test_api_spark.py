"""``Query.match`` on a Spark DataFrame: a lazy Spark DataFrame of the matches the command
line finds, computed in the executors, nothing collected on the driver.

The reference is ``graphcep run --engine local`` on the same rows written as a file (the
records, by ``match_id``), for every query kind; the triangle count on SNAP CollegeMsg is
also the published one, checked by the independent counter of
``tests/cli/test_college_msg.py``. Laziness is checked by Spark's own job count: ``match``
runs only its small aggregate, and nothing runs until an action."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import graphcep
from graphcep.cli import main
from tests.api.test_api import (  # noqa: F401 (fixtures)
    COLLEGE_TRIANGLES,
    DDST,
    TRIANGLE,
    cli_matches,
    college,
    ids,
    labelled_calls,
    slice_,
)
from tests.cli.test_college_msg import HOUR, count_triangles
from tests.cli.test_college_msg import load as load_events

pytestmark = pytest.mark.spark


def job_sites(spark, before: set[int]) -> list[str]:
    """Where each job run since ``before`` was started (its stages' call sites)."""
    tracker = spark.sparkContext.statusTracker()
    sites = []
    for job in sorted(set(tracker.getJobIdsForGroup()) - before):
        for stage in tracker.getJobInfo(job).stageIds:
            info = tracker.getStageInfo(stage)
            if info is not None:
                sites.append(info.name)
    return sites


def jobs(spark) -> set[int]:
    return set(spark.sparkContext.statusTracker().getJobIdsForGroup())


def spark_ids(frame) -> list[str]:
    return sorted(row[0] for row in frame.select("match_id").collect())


def test_a_spark_frame_gives_a_lazy_frame_of_the_cli_matches(spark, college,  # noqa: F811
                                                             college_msg_path, tmp_path):
    frame, _, records = college
    assert count_triangles(load_events(college_msg_path), HOUR) == COLLEGE_TRIANGLES
    edges = spark.createDataFrame(frame)
    before = jobs(spark)
    m = graphcep.parse(TRIANGLE).match(edges, src="sender", dst="receiver", time="unix")
    # only the small aggregate of the checks ran (the replay plans with its statistics)
    sites = {Path(site.split(":")[0].split()[-1]).name for site in job_sites(spark, before)}
    assert sites == {"api_spark.py"}
    assert type(m).__name__ == "DataFrame" and type(m).__module__.startswith("pyspark")
    after_match = jobs(spark)
    assert m.columns[:4] == ["match_id", "query", "first_time", "last_time"]
    assert {"x1", "x2", "x3", "e1_t", "e1_src", "e1_dst", "e3_seq"} <= set(m.columns)
    assert m.columns[-1] == "record"
    assert dict(m.dtypes)["last_time"] == "timestamp"
    assert jobs(spark) == after_match  # the schema needs no job
    # the same matches, with the same identity, as the command line on the file
    assert spark_ids(m) == ids(r["match_id"] for r in records)
    assert len(records) == COLLEGE_TRIANGLES
    # flat columns, the record and the command line's record say the same
    by_id = {r["match_id"]: r for r in records}
    row = m.orderBy("match_id").first()
    record = by_id[row["match_id"]]
    assert [row["x1"], row["x2"], row["x3"]] == [record["bindings"][v]
                                                 for v in ("x1", "x2", "x3")]
    assert [row[f"e{i}_seq"] for i in (1, 2, 3)] == [e["seq"] for e in record["edges"]]
    assert row["record"]["bindings"] == record["bindings"]
    assert pd.Timestamp(row["last_time"]).timestamp() == pytest.approx(record["last_t"])


def test_matches_join_and_write_as_any_spark_frame(spark, college, tmp_path):  # noqa: F811
    frame, _, records = college
    edges = spark.createDataFrame(frame).repartition(3, "sender")  # any order, any parts
    m = graphcep.parse(TRIANGLE).match(edges, src="sender", dst="receiver", time="unix")
    users = spark.createDataFrame(pd.DataFrame({"id": sorted({str(v) for v in
                                                              frame["sender"]})})
                                  .assign(even=lambda d: d["id"].astype(int) % 2 == 0))
    joined = m.join(users, m["x1"] == users["id"]).where("even")
    expected = sum(int(r["bindings"]["x1"]) % 2 == 0 for r in records)
    assert joined.count() == expected > 0
    out = tmp_path / "triangles"
    m.write.parquet(str(out))
    written = pq.read_table(out)
    assert written.num_rows == COLLEGE_TRIANGLES
    # another order of the rows numbers them otherwise: the triangles are the same
    first_times = written.column("e1_t").cast(pa.timestamp("us")).cast(pa.int64()).to_pylist()
    found = sorted(tuple(written.column(v)[i].as_py() for v in ("x1", "x2", "x3"))
                   + (first_times[i],) for i in range(written.num_rows))
    cli = sorted((r["bindings"]["x1"], r["bindings"]["x2"], r["bindings"]["x3"],
                  round(r["edges"][0]["t"] * 1_000_000)) for r in records)
    assert found == cli


def kinds(tmp_path: Path) -> list[tuple[Path, dict, tuple[str, ...]]]:
    """A query file of each kind, its options and the command line's options."""
    nu = tmp_path / "tri.nu"
    nu.write_text("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 3600]")
    subs = tmp_path / "probes.subs"
    subs.write_text("ping_pong: @a.@b.@a\nrepeat: @a.@a\n")
    ddst = tmp_path / "pair.ddst"
    ddst.write_text("VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; WITHIN 1 h")
    pww = tmp_path / "pair.sal"
    pww.write_text("SUBGRAPH pair { a e1 b; b e2 a; starttime(e1) < starttime(e2); }")
    sal = tmp_path / "triangle.sal"
    sal.write_text(TRIANGLE)
    return [(sal, {}, ()), (nu, {}, ()), (subs, {}, ()), (ddst, {}, ()),
            (pww, {"pww": 20}, ("--pww", "20"))]


def test_every_query_kind_gives_the_cli_matches(spark, slice_, tmp_path):  # noqa: F811
    path, frame = slice_
    edges = spark.createDataFrame(frame)
    for query, options, flags in kinds(tmp_path):
        records = cli_matches(tmp_path, query, path, *flags)
        assert len(records) > 10, query
        m = graphcep.load(query).match(edges, src="u", dst="v", time="sec", **options)
        assert spark_ids(m) == ids(r["match_id"] for r in records), query
        if options:
            levels = sorted(r[0] for r in m.select("pww_level").collect())
            assert levels == sorted(r["pww_level"] for r in records)


def test_ddst_labels_and_timestamps_from_spark_columns(spark, tmp_path):
    """Labels are a column of the frame; times are Spark timestamps."""
    frame, query, records = labelled_calls(tmp_path)
    m = graphcep.load(query).match(spark.createDataFrame(frame), src="caller",
                                   dst="callee", time="at")
    assert spark_ids(m) == ids(r["match_id"] for r in records)


def test_a_label_on_no_edge_is_a_warning_on_spark(spark, tmp_path):
    """As on pandas: the labels the edges carry are found by the tasks of the one check
    aggregate, so a label the query wants on no edge is a warning when ``match`` returns."""
    import warnings

    frame, query, _ = labelled_calls(tmp_path)
    q = graphcep.load(query)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q.match(spark.createDataFrame(frame), src="caller", dst="callee", time="at")
    relabelled = frame.assign(label=frame["label"].replace("sms", "mail"))
    with pytest.warns(UserWarning, match=r"no edge carries 'sms' \(edge label\)"):
        m = q.match(spark.createDataFrame(relabelled), src="caller", dst="callee", time="at")
    assert m.count() == 0


def test_bad_columns_are_one_clear_python_error(spark):
    tri = graphcep.parse(TRIANGLE)
    frame = spark.createDataFrame(pd.DataFrame({
        "s": ["a", "b", "c"], "d": ["b", "c", "a"],
        "ms": [1_700_000_000_000, 1_700_000_010_000, 1_700_000_020_000],
        "text": ["x", "y", "z"]}))
    with pytest.raises(ValueError, match=r"no column 'src' \(src='src'.*\['s', 'd', 'ms', "):
        tri.match(frame, dst="d", time="ms")
    with pytest.raises(TypeError, match=r"column 'text' \(time=\) has type string"):
        tri.match(frame, src="s", dst="d", time="text")
    with pytest.raises(ValueError, match=r"column 'ms' \(time=\): .*time_unit='ms'"):
        tri.match(frame, src="s", dst="d", time="ms")
    with pytest.raises(ValueError, match=r"time_unit='h'"):
        tri.match(frame, src="s", dst="d", time="ms", time_unit="h")
    holes = spark.createDataFrame(pd.DataFrame({"s": ["a", None], "d": ["b", "c"],
                                                "t": [1.0, 2.0]}))
    with pytest.raises(ValueError, match=r"1 row\(s\) have no value in column 's' \(src=\)"):
        tri.match(holes, src="s", dst="d")
    endless = spark.createDataFrame(pd.DataFrame({"s": ["a", "b"], "d": ["b", "c"],
                                                  "t": [1.0, float("inf")]}))
    with pytest.raises(ValueError, match=r"^partition \d+ of the DataFrame .*1 row\(s\) "
                                         r"cannot be edges"):
        tri.match(endless, src="s", dst="d")
    assert tri.match(frame, src="s", dst="d", time="ms", time_unit="ms").count() == 1


def test_the_cli_writes_spark_matches_as_it_takes_them(spark, college, college_msg_path,  # noqa: F811
                                                       tmp_path, capsys, monkeypatch):
    """Time shards (a DataFrame of matches read back task by task), the bound and the
    count: the records, the stop and the count the local run gives."""
    from graphcep.runtime.spark import replay

    monkeypatch.setattr(replay, "MIN_SHARD_EDGES", 0)  # shards, not the driver's replay
    _, query, records = college
    out = tmp_path / "m.jsonl"
    common = ["run", str(query), "--input", str(college_msg_path), "--shards", "3"]
    assert main([*common, "-o", str(out), "--summary", "json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["strategy"] == "shuffle" and summary["matches"] == COLLEGE_TRIANGLES
    found = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["match_id"] for r in found) == ids(r["match_id"] for r in records)
    bounded = tmp_path / "few.jsonl"
    assert main([*common, "-o", str(bounded), "--max-matches", "100"]) == 3
    assert len(bounded.read_text().splitlines()) == 100
    assert "--max-matches 100" in capsys.readouterr().err
    assert main([*common, "--count", "--summary", "json"]) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["matches"] == COLLEGE_TRIANGLES and summary["counted"] is True
    sys.stdout.flush()
