"""``q.stream(streaming_df, ...)`` and one identity everywhere.

The same CollegeMsg messages give the same matches, with the same ``match_id`` and the
same ``seq`` of every edge, through the command line (``graphcep run`` on the local and
on the Spark engine, ``graphcep stream`` over a directory), the API on pandas and on an
Arrow table collected from Spark, and ``q.stream`` over a streaming DataFrame; the edges
of each match are those a brute-force search by line number finds (1,653 triangles, the
published count). Late edges, rejects, restarts and bad arguments of ``q.stream`` are
checked on small streams whose matches are worked out by hand.
"""

from __future__ import annotations

import gzip
import json
from bisect import bisect_left, bisect_right
from collections import defaultdict
from pathlib import Path

import pandas as pd
import pytest

import graphcep
from graphcep.cli import main
from tests.api.test_api import COLLEGE_TRIANGLES, DDST, TRIANGLE

pytestmark = pytest.mark.spark


def brute_force_triangles(lines: list[str], window: int) -> set[tuple[int, int, int]]:
    """The line numbers (1-based) of e1, e2, e3 of every match of :data:`TRIANGLE`:
    x1->x2 @t1, x2->x3 @t2, x3->x1 @t3, t1 < t2 < t3, t3 - t1 <= window, x's distinct."""
    events = [(int(u), int(v), int(t), n) for n, (u, v, t) in
              enumerate((line.split() for line in lines), start=1)]
    out_edges: dict[int, list[tuple[int, int, int]]] = defaultdict(list)
    pairs: dict[tuple[int, int], list[tuple[int, int]]] = defaultdict(list)
    for u, v, t, n in sorted(events, key=lambda e: (e[2], e[3])):
        out_edges[u].append((t, v, n))
        pairs[(u, v)].append((t, n))
    found = set()
    for c, a, t3, n3 in events:  # e3 = c -> a closes x1 = a, x3 = c
        for t1, b, n1 in out_edges[a] if a != c else ():
            if t1 >= t3 or t3 - t1 > window or b in (a, c):
                continue
            times = pairs.get((b, c), [])
            low = bisect_right(times, (t1, float("inf")))
            high = bisect_left(times, (t3, -1))
            found.update((n1, n2, n3) for _, n2 in times[low:high])
    return found


def json_parts(directory: Path) -> list[dict]:
    """The match records of a directory of JSON-lines parts (or of one file)."""
    files = sorted(p for p in directory.iterdir() if p.is_file() and not p.name.startswith(
        (".", "_"))) if directory.is_dir() else [directory]
    return [json.loads(line) for path in files for line in path.read_text().splitlines()]


def from_records(records: list[dict]) -> set[tuple[str, tuple[int, ...]]]:
    """match_id and the seq of each edge, from nested records."""
    return {(r["match_id"], tuple(e["seq"] for e in r["edges"])) for r in records}


def from_flat(frame: pd.DataFrame) -> set[tuple[str, tuple[int, ...]]]:
    """match_id and the seq of each edge, from the flat columns."""
    seqs = zip(frame["e1_seq"], frame["e2_seq"], frame["e3_seq"], strict=True)
    return {(m, tuple(int(s) for s in row)) for m, row in zip(frame["match_id"], seqs,
                                                              strict=True)}


@pytest.fixture(scope="module")
def college_dir(college_msg_path, tmp_path_factory):
    """CollegeMsg as one headerless file in a directory, its lines, and the query file
    (named ``triangle``, as the parsed query is)."""
    folder = tmp_path_factory.mktemp("college-stream")
    incoming = folder / "in"
    incoming.mkdir()
    with gzip.open(college_msg_path, "rt") as fh:
        text = fh.read()
    (incoming / "college.txt").write_text(text)
    query = folder / "triangle.sal"
    query.write_text(TRIANGLE)
    return incoming, text.splitlines(), query


def test_one_identity_through_the_cli_the_api_spark_and_streaming(spark, college_dir,
                                                                  tmp_path, capsys):
    incoming, lines, query = college_dir
    data = incoming / "college.txt"
    oracle = brute_force_triangles(lines, 3600)
    assert len(oracle) == COLLEGE_TRIANGLES
    q = graphcep.load(query)
    paths = {}

    for engine in ("local", "spark"):  # graphcep run
        out = tmp_path / f"run-{engine}.jsonl"
        assert main(["run", str(query), "--input", str(data), "--format", "snap",
                     "--engine", engine, "-o", str(out)]) == 0
        paths[f"run --engine {engine}"] = from_records(json_parts(out))

    frame = pd.read_csv(data, sep=" ", names=["sender", "receiver", "unix"])
    paths["q.match(pandas)"] = from_flat(q.match(frame, src="sender", dst="receiver",
                                                 time="unix"))
    schema = "sender string, receiver string, unix long"
    batch = spark.read.schema(schema).option("sep", " ").csv(str(incoming))
    arrow = q.match(batch.toArrow(), src="sender", dst="receiver", time="unix")
    paths["q.match(Spark DataFrame.toArrow())"] = from_flat(arrow.to_pandas())

    out = tmp_path / "stream-cli"
    assert main(["stream", str(query), "--source", str(incoming), "--format", "snap",
                 "--checkpoint", str(tmp_path / "ck-cli"), "--output", f"{out}/", "--once",
                 "--quiet", "--summary", "json"]) == 0
    paths["graphcep stream DIR"] = from_records(json_parts(out))

    events = spark.readStream.schema(schema).option("sep", " ").csv(str(incoming))
    running = q.stream(events, src="sender", dst="receiver", time="unix",
                       checkpoint=tmp_path / "ck-api", output=tmp_path / "stream-api", once=True)
    assert not running.isActive and running.totals.edges == len(lines)
    paths["q.stream(streaming DataFrame)"] = from_records(json_parts(tmp_path / "stream-api"))
    capsys.readouterr()

    for name, found in paths.items():
        assert {seqs for _, seqs in found} == oracle, name
        assert found == paths["run --engine local"], name


#: Two files of messages: a triangle within 10 s (rows 1, 2, 3), then a message 14 s older
#: than the newest (row 4), a row without a receiver (row 5) and a later message (row 6).
FIRST = "sender,receiver,ts\na,b,100\nb,c,102\nc,a,104\n"
SECOND = "sender,receiver,ts\nx,y,90\nq,,105\nc,d,200\n"
SMALL_TRIANGLE = ("{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e1) < starttime(e2); "
                  "starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }")


def small_stream(spark, folder: Path):
    return (spark.readStream.schema("sender string, receiver string, ts long")
            .option("header", "true").option("maxFilesPerTrigger", "1").csv(str(folder)))


def test_late_edges_rejects_and_a_restart_are_those_of_graphcep_stream(spark, tmp_path):
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "a.csv").write_text(FIRST)
    q = graphcep.parse(SMALL_TRIANGLE)
    kwargs = {"src": "sender", "dst": "receiver", "time": "ts", "lateness": 5,
              "checkpoint": tmp_path / "ck", "output": tmp_path / "out", "once": True}
    first = q.stream(small_stream(spark, incoming), **kwargs)
    assert (first.totals.edges, first.totals.matches) == (3, 1)
    (incoming / "b.csv").write_text(SECOND)
    again = q.stream(small_stream(spark, incoming), **kwargs)  # the same checkpoint
    totals = again.totals
    assert (totals.edges, totals.late, totals.rejected, totals.matches) == (5, 1, 1, 1)
    records = json_parts(tmp_path / "out")  # the flush of the first start is replaced
    assert [[e["seq"] for e in r["edges"]] for r in records] == [[1, 2, 3]]
    late = json_parts(tmp_path / "ck" / "late")
    assert [(r["src"], r["dst"], r["seq"]) for r in late] == [("x", "y", 4)]  # 100 s behind
    rejects = json_parts(tmp_path / "ck" / "rejects")
    assert [r["line"] for r in rejects] == [5] and "receiver" in rejects[0]["reason"]
    other = graphcep.parse(SMALL_TRIANGLE.replace("<= 10", "<= 20"))
    with pytest.raises(ValueError, match=r"checkpoint .* belongs to query .* give another "
                                         r"checkpoint="):  # its state is another query's
        other.stream(small_stream(spark, incoming), **kwargs)


def test_a_running_stream_stops_between_micro_batches_and_goes_on_where_it_stopped(
        spark, tmp_path):
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "a.csv").write_text(FIRST)
    got: list[int] = []
    q = graphcep.parse(SMALL_TRIANGLE)
    running = q.stream(small_stream(spark, incoming), src="sender", dst="receiver",
                       time="ts", checkpoint=tmp_path / "ck",
                       on_matches=lambda matches, batch: got.append(matches.num_rows))
    running.processAllAvailable()
    assert running.isActive and running.totals.edges == 3
    running.stop()
    assert running.awaitTermination(5) and sum(got) == 0  # the watermark is at 104 s
    (incoming / "b.csv").write_text(SECOND)
    again = q.stream(small_stream(spark, incoming), src="sender", dst="receiver",
                     time="ts", checkpoint=tmp_path / "ck", once=True,
                     on_matches=lambda matches, batch: got.append(matches.num_rows))
    assert sum(got) == 1 and again.totals.edges == 5


@pytest.fixture(scope="module")
def events(spark, tmp_path_factory):
    """A streaming DataFrame with a string, a timestamp and an integer column."""
    folder = tmp_path_factory.mktemp("typed")
    return spark.readStream.schema("a string, b string, when timestamp, n long, "
                                   "label string").json(str(folder))


@pytest.mark.parametrize(("options", "error", "words"), [
    ({"src": "sender"}, ValueError, "no column 'sender' (src='sender'"),
    ({"time": "whn"}, ValueError, "did you mean time='when'?"),
    ({"time": "label"}, TypeError, "column 'label' (time=) has type string"),
    ({"time_unit": "ms"}, ValueError, "leave time_unit out"),
    ({"time_unit": "min"}, ValueError, "time_unit='min'"),
    ({"dur": "a"}, TypeError, "column 'a' (dur=) has type string"),
    ({"lateness": -1}, ValueError, "lateness=-1: seconds"),
    ({"snapshot_interval": -1}, ValueError, "snapshot_interval=-1: seconds"),
    ({"output": None}, ValueError, "give output="),
])
def test_bad_arguments_are_one_clear_error_before_spark_starts(events, tmp_path, options,
                                                               error, words):
    q = graphcep.parse(SMALL_TRIANGLE)
    arguments = {"src": "a", "dst": "b", "time": "when", "checkpoint": tmp_path / "ck",
                 "output": tmp_path / "out", **options}
    with pytest.raises(error) as caught:
        q.stream(events, **arguments)
    assert words in str(caught.value) and "\n" not in str(caught.value)
    assert not (tmp_path / "ck").exists()  # nothing was started


def test_what_is_no_streaming_dataframe_is_refused(spark, tmp_path):
    q = graphcep.parse(SMALL_TRIANGLE)
    with pytest.raises(TypeError, match="batch DataFrame: match it with Query.match"):
        q.stream(spark.range(3), checkpoint=tmp_path / "ck", output=tmp_path / "out")
    with pytest.raises(TypeError, match="not a pandas.core.frame.DataFrame"):
        q.stream(pd.DataFrame({"src": []}), checkpoint=tmp_path / "ck", output=tmp_path / "o")


def test_a_field_the_query_reads_must_be_a_column(spark, tmp_path):
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "a.csv").write_text(FIRST)
    q = graphcep.parse("SUBGRAPH big { a e b; e.bytes > 100; }")
    with pytest.raises(ValueError, match="bytes"):  # at the first edges, as graphcep stream
        q.stream(small_stream(spark, incoming), src="sender", dst="receiver", time="ts",
                 checkpoint=tmp_path / "ck", output=tmp_path / "out", once=True)


def test_epoch_milliseconds_read_as_seconds_stop_the_stream_naming_the_unit(spark, tmp_path):
    incoming = tmp_path / "in"
    incoming.mkdir()
    (incoming / "a.csv").write_text("sender,receiver,ts\na,b,1082040961000\n")
    with pytest.raises(ValueError, match=r"micro-batch 0: column 'ts' .*time_unit='ms'"):
        graphcep.parse(SMALL_TRIANGLE).stream(
            small_stream(spark, incoming), src="sender", dst="receiver", time="ts",
            checkpoint=tmp_path / "ck", output=tmp_path / "out", once=True)


def test_window_widening_reports_what_graphcep_stream_pww_and_the_batch_run_report(
        spark, tmp_path, capsys):
    from tests.runtime.test_widening_spark import slow_stream
    from tests.runtime.test_widening_stream import (
        TRIANGLE_SAL,
        batch_run,
        instance_keys,
        jsonl,
        write_files,
    )

    query = tmp_path / "triangle.sal"
    query.write_text(TRIANGLE_SAL)
    incoming = tmp_path / "in"
    write_files(slow_stream(3), incoming, 6)
    expected = batch_run(tmp_path, query, incoming)  # graphcep run --pww 3
    arriving = (spark.readStream.schema("t decimal(20,6), src string, dst string")
                .option("header", "true").option("maxFilesPerTrigger", "1").csv(str(incoming)))
    running = graphcep.load(query).stream(arriving, pww=3, checkpoint=tmp_path / "ck",
                                          output=tmp_path / "out", once=True)
    assert len(expected) > 10 and instance_keys(jsonl(tmp_path / "out")) == expected
    assert running.totals.matches == len(expected)
    capsys.readouterr()




@pytest.mark.parametrize(("name", "text"), [
    ("tri.nu", "<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 3600]"),
    ("probes.subs", "ping_pong: @a.@b.@a\nrepeat: @a.@a\n"),
    ("chain.ddst", DDST),
])
def test_every_query_kind_streams_the_matches_of_the_cli_and_of_q_match(
        spark, college_msg_path, tmp_path, capsys, name, text):
    """CollegeMsg's first 4,000 messages (labelled call, sms or mail by line number for the
    DDST query) as a CSV file with a header: the stream finds the matches ``graphcep run``
    finds in the file, with the ids ``q.match`` gives the same rows."""
    with gzip.open(college_msg_path, "rt") as fh:
        rows = [next(fh).split() for _ in range(4000)]
    labels = ("call", "sms", "mail")
    incoming = tmp_path / "in"
    incoming.mkdir()
    data = incoming / "messages.csv"
    data.write_text("src,dst,t,label\n" + "".join(
        f"{u},{v},{t},{labels[i % 3]}\n" for i, (u, v, t) in enumerate(rows)))
    query = tmp_path / name
    query.write_text(text)
    out = tmp_path / "cli.jsonl"
    assert main(["run", str(query), "--input", str(data), "--format", "csv", "--engine",
                 "local", "-o", str(out)]) == 0
    cli = json_parts(out)
    frame = pd.read_csv(data, dtype={"src": str, "dst": str})
    q = graphcep.load(query)
    expected = sorted(q.match(frame, time="t")["match_id"])
    arriving = (spark.readStream.schema("src string, dst string, t long, label string")
                .option("header", "true").csv(str(incoming)))
    running = q.stream(arriving, checkpoint=tmp_path / "ck", output=tmp_path / "out",
                       once=True)
    streamed = sorted(r["match_id"] for r in json_parts(tmp_path / "out"))
    capsys.readouterr()
    assert len(cli) > 10 and len(streamed) == len(cli) == running.totals.matches
    assert streamed == expected
