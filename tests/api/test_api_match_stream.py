"""``q.match(streaming_df, ...)``: a streaming DataFrame of matches, computed in the executors.

Oracle: a brute-force search by line number over CollegeMsg (1,653 triangles, the published
count), and ``q.match`` on the same rows as one pandas frame: the streaming DataFrame's
rows carry the same ``match_id`` and the same ``seq`` of every edge. Late edges and rows
that cannot be edges are checked on a small stream worked out by hand.
"""

from __future__ import annotations

import gzip
import os
from pathlib import Path

import pandas as pd
import pytest

import graphcep
from tests.api.test_api import COLLEGE_TRIANGLES, DDST, TRIANGLE
from tests.api.test_api_stream import (
    FIRST,
    SECOND,
    SMALL_TRIANGLE,
    brute_force_triangles,
    from_flat,
)

pytestmark = pytest.mark.spark

SCHEMA = "sender string, receiver string, unix long"


def written_in_order(folder: Path, texts: list[str], suffix: str) -> None:
    """Files ``0.suffix``, ``1.suffix``... each older than the next (Spark's file source
    takes the oldest first, one per micro-batch under ``maxFilesPerTrigger=1``)."""
    folder.mkdir()
    for number, text in enumerate(texts):
        path = folder / f"{number}.{suffix}"
        path.write_text(text)
        os.utime(path, (1_000_000 + number, 1_000_000 + number))


def collected(matches, name: str) -> tuple[pd.DataFrame, dict]:
    """Every row of a streaming DataFrame of matches (written to Spark's memory sink until
    the source is read), and the last micro-batch's observed metrics."""
    query = (matches.writeStream.format("memory").queryName(name)
             .trigger(availableNow=True).start())
    query.awaitTermination()
    metrics = [p.observedMetrics["graphcep"].asDict() for p in query.recentProgress
               if "graphcep" in p.observedMetrics]
    frame = matches.sparkSession.table(name).toPandas()
    return frame, metrics


@pytest.mark.parametrize("cells", [1, 4])
def test_college_msg_matches_as_q_match_and_brute_force_find_them(spark, college_msg_path,
                                                                  tmp_path, cells):
    with gzip.open(college_msg_path, "rt") as fh:
        lines = fh.read().splitlines()
    # a last edge far later and on vertices of its own moves the watermark past the rest
    lines.append(f"9999990 9999991 {int(lines[-1].split()[2]) + 10**6}")
    oracle = brute_force_triangles(lines, 3600)
    assert len(oracle) == COLLEGE_TRIANGLES
    quarter = len(lines) // 4
    cuts = [lines[i * quarter:(i + 1) * quarter if i < 3 else None] for i in range(4)]
    written_in_order(tmp_path / "in", ["\n".join(c) + "\n" for c in cuts], "txt")
    q = graphcep.parse(TRIANGLE)
    events = (spark.readStream.schema(SCHEMA).option("sep", " ")
              .option("maxFilesPerTrigger", "1").csv(str(tmp_path / "in")))
    matches = q.match(events, src="sender", dst="receiver", time="unix", cells=cells)
    assert matches.isStreaming
    got, metrics = collected(matches, f"college_{cells}")
    frame = pd.DataFrame([line.split() for line in lines],
                         columns=["sender", "receiver", "unix"]).astype({"unix": "int64"})
    batch = q.match(frame, src="sender", dst="receiver", time="unix")
    assert list(got.columns) == list(batch.columns)
    assert {seqs for _, seqs in from_flat(got)} == oracle
    assert from_flat(got) == from_flat(batch)
    assert len(got) == COLLEGE_TRIANGLES  # each match once, whatever the cells
    assert sum(m["edges"] for m in metrics) == len(lines)
    assert sum(m["matches"] for m in metrics) == COLLEGE_TRIANGLES


def test_late_edges_and_rows_that_are_no_edges_are_counted_not_matched(spark, tmp_path):
    """The small stream of ``q.stream``'s test: a triangle (rows 1-3), an edge 14 s behind
    the newest with 5 s of lateness (row 4, late), a row without a receiver (row 5) and a
    later edge (row 6) that moves the watermark past the triangle."""
    written_in_order(tmp_path / "in", [FIRST, SECOND], "csv")
    events = (spark.readStream.schema("sender string, receiver string, ts long")
              .option("header", "true").option("maxFilesPerTrigger", "1")
              .csv(str(tmp_path / "in")))
    q = graphcep.parse(SMALL_TRIANGLE)
    got, metrics = collected(q.match(events, src="sender", dst="receiver", time="ts",
                                     lateness=5, cells=2), "small")
    assert from_flat(got) == from_flat(q.match(pd.DataFrame(
        {"sender": ["a", "b", "c"], "receiver": ["b", "c", "a"], "ts": [100, 102, 104]}),
        src="sender", dst="receiver", time="ts"))
    assert [int(s) for s in got.loc[0, ["e1_seq", "e2_seq", "e3_seq"]]] == [1, 2, 3]
    totals = {name: sum(m[name] for m in metrics) for name in metrics[0]}
    assert totals == {"edges": 5, "matches": 1, "late": 1, "rejected": 1}


def test_a_kind_the_executors_do_not_run_names_q_stream(spark, tmp_path):
    (tmp_path / "in").mkdir()
    events = spark.readStream.schema(SCHEMA).csv(str(tmp_path / "in"))
    with pytest.raises(ValueError, match=r"this ddst query is not one .*: match the stream "
                                         r"with Query.stream") as caught:
        graphcep.parse(DDST, kind="ddst").match(events, src="sender", dst="receiver",
                                                time="unix")
    assert "\n" not in str(caught.value)
    q = graphcep.parse(TRIANGLE)
    with pytest.raises(ValueError, match="Query.stream"):
        q.match(events, src="sender", dst="receiver", time="unix", pww=10)
    with pytest.raises(ValueError, match="cells=0"):
        q.match(events, src="sender", dst="receiver", time="unix", cells=0)
    with pytest.raises(ValueError, match="no column 'sendr'"):
        q.match(events, src="sendr", dst="receiver", time="unix")
    with pytest.raises(ValueError, match="apply to a streaming DataFrame"):
        q.match(pd.DataFrame({"src": ["a"], "dst": ["b"], "t": [1]}), lateness=5)


def test_a_restart_on_the_writers_checkpoint_goes_on_from_the_cells_state(spark, tmp_path):
    """The matches written to Parquet by two starts on one checkpoint, the second after
    more files arrived: a triangle whose edges span both starts is found (the cells'
    state came back from Spark's checkpoint), each match once, with the ids of
    ``q.match`` on all the rows."""
    first = "sender,receiver,ts\na,b,100\nb,c,102\n"
    second = "sender,receiver,ts\nc,a,104\nb,c,105\nc,a,107\nz,w,400\n"
    written_in_order(tmp_path / "in", [first], "csv")
    q = graphcep.parse(SMALL_TRIANGLE)

    def start() -> None:
        events = (spark.readStream.schema("sender string, receiver string, ts long")
                  .option("header", "true").option("maxFilesPerTrigger", "1")
                  .csv(str(tmp_path / "in")))
        matches = q.match(events, src="sender", dst="receiver", time="ts", cells=2)
        (matches.writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ck")).trigger(availableNow=True)
         .start().awaitTermination())

    start()
    path = tmp_path / "in" / "1.csv"
    path.write_text(second)
    os.utime(path, (1_000_001, 1_000_001))
    start()
    got = spark.read.parquet(str(tmp_path / "out")).toPandas()
    rows = [line.split(",") for text in (first, second) for line in text.splitlines()[1:]]
    frame = pd.DataFrame(rows, columns=["sender", "receiver", "ts"]).astype({"ts": "int64"})
    expected = from_flat(q.match(frame, src="sender", dst="receiver", time="ts"))
    assert {seqs for _, seqs in expected} == {(1, 2, 3), (1, 2, 5), (1, 4, 5)}
    assert from_flat(got) == expected and len(got) == len(expected)
