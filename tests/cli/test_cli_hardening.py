"""The command line refuses wrong queries, options and outputs in one line, before any work.

Every case here is a user's mistake: the answer is one line on stderr starting
``graphcep:`` (with ``file:line:col`` where a query text is at fault) and exit status 2,
never a traceback and never a run that computes first and fails at the end.
"""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from graphcep import jobs
from graphcep.cli import app as cli
from graphcep.cli import build_parser, main
from graphcep.engines.base import OutOfOrderError
from graphcep.engines.difference_bounds import build_bounds
from graphcep.engines.subgraph.engine import SubgraphEngine
from graphcep.engines.subgraph.plan import compile_query
from graphcep.jobs.ddst import DDST_ENGINES, DDSTJob
from graphcep.jobs.options import job_options
from graphcep.lang.ddst import parse_ddst, parse_ddst_file
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.sal import parse_file, parse_query
from graphcep.patterns.ddst import DDSTQueryError, Window
from graphcep.patterns.subgraph import QueryBuilder, QueryError
from tests.paths import ROOT

EXAMPLES = ROOT / "examples"
TRIANGLE = EXAMPLES / "triangle.sal"
CONGESTION = EXAMPLES / "ddst" / "congestion.ddst"

#: Two edges 5 s apart: one match of PAIR below (hand-checked: a=1, b=2, c=3).
PAIR_STREAM = "1 2 0\n2 3 5\n"
PAIR = "{\n  a e1 b;\n  b e2 c;\n  starttime(e2) - starttime(e1) <= 10;\n" \
       "  starttime(e1) < starttime(e2);\n}\n"


def one_line_error(capsys: pytest.CaptureFixture[str]) -> str:
    """The single line a refused command wrote on stderr."""
    err = capsys.readouterr().err
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("graphcep: ") and "Traceback" not in err
    return lines[0]


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def write(path: Path, text: str | bytes) -> Path:
    if isinstance(text, bytes):
        path.write_bytes(text)
    else:
        path.write_text(text)
    return path


@pytest.fixture
def pair_stream(tmp_path: Path) -> Path:
    return write(tmp_path / "edges.txt", PAIR_STREAM)


@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    """Fail the test if the command starts Spark: these errors must come first."""

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark started before the options were checked")

    monkeypatch.setattr("graphcep.runtime.spark.spark_session", refuse)


# -- query files ----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "line", "column"),
    [("", 1, 1), ("// only a comment\n", 2, 1), ("W = 5\nHost = \"h\";\n", 3, 1)],
    ids=["empty", "comments", "constants"],
)
def test_a_sal_file_without_a_query_is_named_at_its_end(tmp_path, capsys, text, line, column):
    query = write(tmp_path / "q.sal", text)
    assert main(["explain", str(query)]) == 2
    err = one_line_error(capsys)
    assert err.startswith(f"graphcep: {query}:{line}:{column}: ") and "no query" in err


def test_a_syntax_error_is_one_line_in_a_log_and_shows_the_caret_on_a_terminal(
    tmp_path, capsys, monkeypatch
):
    query = write(tmp_path / "q.sal", "{\n  x1 e1 x2 e2;\n}\n")
    assert main(["explain", str(query)]) == 2
    assert one_line_error(capsys).startswith(f"graphcep: {query}:2:12: ")
    monkeypatch.setattr(cli.sys.stderr, "isatty", lambda: True)
    assert main(["explain", str(query)]) == 2
    headline, line, caret = capsys.readouterr().err.rstrip("\n").split("\n")
    assert headline.startswith(f"graphcep: {query}:2:12: ")
    assert line == "      x1 e1 x2 e2;" and caret == " " * 15 + "^"


@pytest.mark.parametrize("suffix", [".sal", ".ddst"])
def test_a_query_file_that_is_not_utf8_is_named_at_the_byte(tmp_path, capsys, suffix):
    text = b"VERTICES A, B;\n  \xff EDGES" if suffix == ".ddst" else b"{ a e1 b;\n  \xff }"
    query = write(tmp_path / f"q{suffix}", text)
    assert main(["explain", str(query)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"graphcep: {query}:2:3: the file is not UTF-8 text: byte 0xff")
    assert "Traceback" not in err


@pytest.mark.parametrize("suffix", [".sal", ".nu", ".subs"])
@pytest.mark.parametrize(("mark", "encoding"), [(b"\xff\xfe", "utf-16-le"),
                                               (b"\xfe\xff", "utf-16-be")])
def test_a_query_file_in_utf16_is_named_so(tmp_path, capsys, suffix, mark, encoding):
    """A query saved as UTF-16 (with its byte order mark): one line saying so."""
    text = {".sal": TRIANGLE.read_text(), ".nu": "<#X ~> #Y>[0, 1]", ".subs": "p: a.@x"}
    query = write(tmp_path / f"q{suffix}", mark + text[suffix].encode(encoding))
    assert main(["explain", str(query)]) == 2
    assert capsys.readouterr().err == (
        f"graphcep: {query}:1:1: the file is UTF-16 text (it starts with a UTF-16 byte order "
        "mark): save it as UTF-8\n")


def test_a_byte_order_mark_is_accepted(tmp_path, capsys):
    sal = write(tmp_path / "q.sal", b"\xef\xbb\xbf" + TRIANGLE.read_bytes())
    ddst = write(tmp_path / "congestion.ddst", b"\xef\xbb\xbf" + CONGESTION.read_bytes())
    assert parse_file(sal) == parse_file(TRIANGLE)
    assert parse_ddst_file(ddst) == parse_ddst_file(CONGESTION)
    assert main(["explain", str(sal)]) == 0
    assert main(["explain", str(ddst)]) == 0
    # and a DDST text without the .ddst name is still told apart from SAL
    bare = write(tmp_path / "congestion.q", b"\xef\xbb\xbf" + CONGESTION.read_bytes())
    assert main(["explain", str(bare)]) == 0
    assert "DDST query" in capsys.readouterr().out


def test_an_unknown_query_name_is_one_line(capsys):
    assert main(["explain", str(TRIANGLE), "--query-name", "nope"]) == 2
    assert "no query named 'nope' (the program's queries: query1)" in one_line_error(capsys)


def test_a_bound_beyond_the_range_of_times_is_named(tmp_path, capsys):
    query = write(tmp_path / "q.sal", "{ a e1 b; b e2 c;\n  starttime(e2) - starttime(e1) "
                                      "<= 1e15; starttime(e1) < starttime(e2); }")
    assert main(["explain", str(query)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"graphcep: {query}:2:3: the bound 1e+15 s exceeds the range of "
                          "times")
    with pytest.raises(QueryError, match="exceeds the range of times"):
        QueryBuilder("q").edge("a", "e1", "b").edge("b", "e2", "c").within("e1", "e2", 10**13)
    # the largest bound that fits still works, and is a bound, not "no upper bound"
    ok = QueryBuilder("q").edge("a", "e1", "b").edge("b", "e2", "c") \
        .within("e1", "e2", 2_000_000_000_000).before("e1", "e2").build()
    assert compile_query(ok).extent_us == 2 * 10**18


def test_huge_negative_bounds_never_overflow_the_closure():
    """Chained bounds near the range's edge: refused in words, not an OverflowError, and a
    contradiction among them is still found."""
    q = (QueryBuilder("q").edge("a", "e1", "b").edge("b", "e2", "c").edge("c", "e3", "d")
         .constraint("e2", "<=", -2_000_000_000_000, "e1")
         .constraint("e3", "<=", -2_000_000_000_000, "e2").build())
    with pytest.raises(QueryError, match="beyond the range of times"):
        build_bounds(q)


def test_contradicting_constraints_name_the_one_that_closes_the_contradiction(tmp_path,
                                                                               capsys):
    query = write(tmp_path / "q.sal", "{ a e1 b; b e2 c;\n  starttime(e2) - starttime(e1) "
                                      "<= 5;\n  starttime(e2) - starttime(e1) >= 10; }")
    assert main(["explain", str(query)]) == 2
    err = one_line_error(capsys)
    assert err.startswith(f"graphcep: {query}:3:3: query 'query1': the temporal constraint "
                          "'starttime(e2) - starttime(e1) >= 10' contradicts the constraints "
                          "before it")


def test_a_window_that_contradicts_the_constraints_says_so(tmp_path, capsys, pair_stream):
    query = write(tmp_path / "q.sal", "{ a e1 b; b e2 c;\n  starttime(e2) - starttime(e1) "
                                      ">= 10; }")
    assert main(["explain", str(query), "--window", "5"]) == 2
    err = one_line_error(capsys)
    assert f"{query}:2:3:" in err and "contradicts the window of 5 s (--window)" in err


# -- --window and a query's own bound -------------------------------------------------


def test_window_never_changes_the_matches_of_a_query_that_bounds_itself(tmp_path, capsys,
                                                                       pair_stream):
    query = write(tmp_path / "q.sal", PAIR)
    base = ["run", str(query), "--input", str(pair_stream), "--engine", "local",
            "--summary", "json", "--rejects", str(tmp_path / "r.jsonl")]
    for extra in ([], ["--window", "10"], ["--window", "20"]):
        assert main([*base, *extra]) == 0
        assert last_json(capsys.readouterr().out)["matches"] == 1
    # narrower than the query's own 10 s: it would drop the 5 s match; refused
    assert main([*base, "--window", "3"]) == 2
    err = one_line_error(capsys)
    assert "--window 3 s is narrower than the extent query 'query1' gives itself, 10 s" in err
    assert main(["explain", str(query), "--window", "20"]) == 0
    assert "extent: 10 s (the query's own bound; --window 20 is at least as wide" \
        in capsys.readouterr().out
    unbounded = write(tmp_path / "u.sal", "{ a e1 b; b e2 c; starttime(e1) < starttime(e2); }")
    assert main(["explain", str(unbounded), "--window", "3"]) == 0
    assert "extent: 3 s (--window 3: the constraints do not bound it)" in capsys.readouterr().out


# -- features over the input's fields -------------------------------------------------

FEATURE_QUERY = """S = CsvStream("x.csv");
Top = FOREACH S GENERATE topk(NoSuchField, 1000, 100, 10);
SUBGRAPH q ON S { a e1 b; b e2 c; starttime(e2) - starttime(e1) <= 10;
  starttime(e1) < starttime(e2); a in Top; }
"""


def test_a_feature_over_a_missing_field_is_refused_before_matching(tmp_path, capsys,
                                                                   pair_stream):
    query = write(tmp_path / "f.sal", FEATURE_QUERY)
    assert main(["explain", str(query)]) == 0  # explain cannot know the input
    capsys.readouterr()
    assert main(["run", str(query), "--input", str(pair_stream), "--engine", "local",
                 "--rejects", str(tmp_path / "r.jsonl")]) == 2
    err = one_line_error(capsys)
    assert "feature 'Top' (topk(NoSuchField, ...)) counts the field 'NoSuchField', which " \
           "the stream lacks (fields: t, src, dst, dur)" in err


@pytest.mark.spark
def test_a_feature_over_a_missing_field_is_refused_on_spark(tmp_path, capsys, pair_stream,
                                                            spark):
    query = write(tmp_path / "f.sal", FEATURE_QUERY)
    assert main(["run", str(query), "--input", str(pair_stream), "--master", "local[2]",
                 "--rejects", str(tmp_path / "r.jsonl")]) == 2
    assert "counts the field 'NoSuchField', which the stream lacks" in one_line_error(capsys)


def test_in_a_feature_that_is_no_set_is_named_where_used(tmp_path, capsys):
    query = write(tmp_path / "f.sal", FEATURE_QUERY.replace(
        "topk(NoSuchField, 1000, 100, 10)", "ehsum(DestPort, 100)"))
    assert main(["explain", str(query)]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"graphcep: {query}:4:39: feature 'Top' (ehsum) gives a number per "
                          "key, not a set of vertices, so 'in Top' cannot test it")


# -- option values --------------------------------------------------------------------

RUN_OPTIONS = [
    (["--window", "abc"], "argument --window: expected seconds"),
    (["--window", "1e999"], "argument --window: expected seconds"),
    (["--window", "-1"], "argument --window: expected seconds, not negative"),
    (["--window", "3e12"], "argument --window: '3e12' s exceeds the range of times"),
    (["--max-duration", "nan"], "argument --max-duration: expected seconds"),
    (["--shards", "0"], "argument --shards: expected at least 1, got 0"),
    (["--shards", "-2"], "argument --shards: expected at least 1, got -2"),
    (["--limit", "-1"], "argument --limit: expected at least 0, got -1"),
    (["--signature-p", "0"], "argument --signature-p: expected at least 2, got 0"),
    (["--signature-p", "99999999999"],
     "argument --signature-p: expected at most 2,147,483,647, got 99,999,999,999"),
    (["--signature-seed", "-1"], "argument --signature-seed: expected at least 0, got -1"),
    (["--engine", "gpu"], "argument --engine: invalid choice: 'gpu'"),
    (["-o", "matches.txt"], "cannot tell the output format of 'matches.txt'"),
    (["-o", "/dev/null"], "cannot tell the output format of '/dev/null'"),
    (["-o", ""], "argument --output/-o: expected a path, got an empty one"),
    (["-o", "-", "--output-format", "jsonl"], "--output-format jsonl writes a file, and the "
                                              "output is the console: name it with -o FILE"),
    (["--output-format", "parquet"], "--output-format parquet writes a file, and the output "
                                     "is the console"),
    (["-o", "matches.txt", "--output-format", "console"],
     "output 'matches.txt' is a file, and --output-format console prints the matches"),
    (["--rejects", "-"], "rejects '-' is the console, which shows the matches: name a file"),
    (["-o", "m.jsonl", "--limit", "1"], "--limit 1 caps the matches printed on the console; "
                                        "-o m.jsonl gets every match"),
    (["--report", "-"], "--report '-' is the console, which shows the matches: name a file"),
    (["--rejects", " "], "argument --rejects: expected a path, got an empty one"),
    (["--input", ""], "argument --input/-i: expected a path, got an empty one"),
    (["--master", "bogus"], "argument --master: expected local, local[N], local[*], "
                            "spark://HOST:PORT, yarn or k8s://URL, got 'bogus'"),
    (["--master", "local[0]"], "argument --master: expected local"),
]


@pytest.mark.parametrize(("extra", "message"), RUN_OPTIONS,
                         ids=[" ".join(extra) for extra, _ in RUN_OPTIONS])
def test_run_options_are_checked_before_spark_starts(tmp_path, capsys, monkeypatch, no_spark,
                                                     pair_stream, extra, message):
    monkeypatch.chdir(tmp_path)
    assert main(["run", str(TRIANGLE), "--input", str(pair_stream), *extra]) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "matches.txt").exists()


def test_an_output_without_a_suffix_takes_output_format(tmp_path, capsys, pair_stream):
    query = write(tmp_path / "q.sal", PAIR)
    out = tmp_path / "matches.txt"
    base = ["run", str(query), "--input", str(pair_stream), "--engine", "local",
            "--summary", "json", "--rejects", str(tmp_path / "r.jsonl")]
    assert main([*base, "-o", str(out), "--output-format", "jsonl"]) == 0
    (match,) = [json.loads(line) for line in out.read_text().splitlines()]
    assert match["bindings"] == {"a": "1", "b": "2", "c": "3"}
    assert main([*base, "-o", "/dev/null", "--output-format", "jsonl"]) == 0
    assert last_json(capsys.readouterr().out)["matches"] == 1


def test_an_output_that_cannot_be_written_is_refused_before_reading(tmp_path, capsys,
                                                                    monkeypatch, pair_stream):
    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the input was read before the output was checked")

    monkeypatch.setattr(cli, "read_edges", never)
    blocker = write(tmp_path / "file", "x")
    for target, why in ((tmp_path, "cannot tell the output format"),
                        (blocker / "m.jsonl", "is not a directory"),
                        (blocker / "deeper" / "m.parquet", "is not a directory")):
        assert main(["run", str(TRIANGLE), "--input", str(pair_stream), "--engine", "local",
                     "-o", str(target)]) == 2
        assert why in one_line_error(capsys)
    # the rejects file is an output too: written after the run, so checked before it
    assert main(["run", str(TRIANGLE), "--input", str(pair_stream), "--engine", "local",
                 "--rejects", str(blocker / "rejects.jsonl")]) == 2
    assert one_line_error(capsys) == (f"graphcep: rejects '{blocker}/rejects.jsonl' cannot be "
                                      f"created: '{blocker}' is not a directory")


def test_a_directory_output_holding_parts_of_an_earlier_run_is_refused(tmp_path, capsys,
                                                                       pair_stream):
    import pyarrow.parquet as pq

    query = write(tmp_path / "q.sal", PAIR)
    out = tmp_path / "m.parquet"
    again = ["run", str(query), "--input", str(pair_stream), "--engine", "local",
             "--rejects", str(tmp_path / "r.jsonl"), "-o", f"{out}/"]
    assert main(again) == 0
    capsys.readouterr()
    (part,) = out.iterdir()
    before = part.read_bytes()
    assert main(again) == 2  # appending a part would hold each match twice
    assert ("already holds 1 part file of an earlier run (part-00000000.parquet)"
            in one_line_error(capsys))
    assert list(out.iterdir()) == [part] and part.read_bytes() == before
    assert pq.read_table(out).num_rows == 1  # PAIR's one match (hand-checked above)


def test_rejects_never_go_into_the_directory_of_parts(tmp_path, capsys, pair_stream):
    """Spark reads a JSONL directory as one data set: rejects there would read as matches."""
    out = tmp_path / "out.jsonl"
    assert main(["run", str(TRIANGLE), "--input", str(pair_stream), "--engine", "local",
                 "-o", f"{out}/", "--rejects", str(out / "rejects.jsonl")]) == 2
    assert "a directory of match parts" in one_line_error(capsys) and not out.exists()


def test_a_run_interrupted_while_writing_leaves_the_earlier_output(tmp_path, capsys,
                                                                   monkeypatch, pair_stream):
    from graphcep.io.sinks import JsonlSink

    def interrupted(self, table):
        written(self, table)
        raise KeyboardInterrupt

    written = JsonlSink._append
    monkeypatch.setattr(JsonlSink, "_append", interrupted)
    out = write(tmp_path / "m.jsonl", "earlier\n")
    assert main(["run", str(write(tmp_path / "q.sal", PAIR)), "--input", str(pair_stream),
                 "--engine", "local", "-o", str(out)]) == 130
    assert one_line_error(capsys) == (f"graphcep: interrupted; {out} was not written (an "
                                      "output file appears when the command ends; a file "
                                      "that was there is kept)")
    assert out.read_text() == "earlier\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["edges.txt", "m.jsonl", "q.sal"]


STREAM_OPTIONS = [
    (["--lateness", "abc"], "argument --lateness: expected seconds"),
    (["--lateness", "-1"], "argument --lateness: expected seconds, not negative"),
    (["--trigger", "-3"], "argument --trigger: expected seconds (0 or more), got '-3'"),
    (["--trigger", "inf"], "argument --trigger: expected a finite number"),
    (["--run-for", "0"], "argument --run-for: expected seconds above 0"),
    (["--cells", "0"], "argument --cells: expected at least 1, got 0"),
    (["--cells", "100000000"], "argument --cells: expected at most 1,024, got 100,000,000"),
    (["--processes", "-1"], "argument --processes: expected at least 1, got -1"),
    (["--max-files-per-trigger", "0"], "argument --max-files-per-trigger: expected at least 1"),
    (["--rate", "0"], "argument --rate: expected at least 1, got 0"),
    (["--vertices", "1"], "argument --vertices: expected at least 2, got 1"),
    (["--limit", "x"], "argument --limit: expected a whole number, got 'x'"),
    (["--seed", "-1"], "argument --seed: expected at least 0, got -1"),
    (["-o", "/dev/null"], "output '/dev/null' exists and is not a directory"),
    (["--late", "/dev/null"], "--late '/dev/null' exists and is not a directory"),
    (["--rejects", "/dev/null/r"], "--rejects '/dev/null/r' cannot be created"),
    (["--source", ""], "argument --source: expected a path, got an empty one"),
    (["--checkpoint", ""], "argument --checkpoint: expected a path, got an empty one"),
    (["--master", "bogus"], "argument --master: expected local, local[N]"),
    (["--source", "tcp://127.0.0.1:99999"], "expected tcp://HOST:PORT, a port from 1 to 65535"),
    (["--source", "tcp://127.0.0.1:5555"], "--once reads what a directory or Kafka topic "
                                           "holds now; "
                                           "tcp://127.0.0.1:5555 has no end to read to"),
    (["--source", "generator"], "has no end to read to: use --run-for SECONDS"),
    (["--rate", "5"], "--rate shapes the generator's edges (--source generator); --source "),
    (["--vertices", "9", "--seed", "2"], "--vertices, --seed shape the generator's edges"),
    (["-o", "out/", "--limit", "3"], "--limit 3 caps the matches printed on the console; "
                                     "-o out/ gets every match"),
    (["--run-for", "10"], "--once stops when the directory's files are read and --run-for "
                          "after SECONDS: give one of them"),
]


@pytest.mark.parametrize(("extra", "message"), [
    (["--shards", "4"], "--shards applies to the Spark engine; --engine local runs in this"),
    (["--master", "local[2]"], "--master applies to the Spark engine"),
    (["--master", "local[2]", "--shards", "2"], "--shards, --master apply to the Spark engine"),
])
def test_spark_options_with_the_local_engine_are_refused(tmp_path, capsys, pair_stream,
                                                         extra, message):
    assert main(["run", str(TRIANGLE), "--input", str(pair_stream), "--engine", "local",
                 *extra]) == 2
    assert message in one_line_error(capsys)


@pytest.mark.parametrize(("extra", "message"), STREAM_OPTIONS,
                         ids=[" ".join(extra) for extra, _ in STREAM_OPTIONS])
def test_stream_options_are_checked_before_spark_starts(tmp_path, capsys, no_spark, extra,
                                                        message):
    source = tmp_path / "incoming"
    source.mkdir()
    assert main(["stream", str(TRIANGLE), "--source", str(source), "--checkpoint",
                 str(tmp_path / "ckpt"), "--once", *extra]) == 2
    assert message in one_line_error(capsys)


@pytest.mark.parametrize("role", ["--checkpoint", "-o", "--late", "--rejects", "--report",
                                  "--timeline", "query"])
def test_a_stream_never_writes_into_the_directory_it_reads(tmp_path, capsys, no_spark, role):
    """Every file of the watched directory is read as edges: an output there would be
    read back as input (and the query file with it)."""
    source = tmp_path / "incoming"
    source.mkdir()
    inside = {"--checkpoint": "ckpt", "-o": "out/", "--late": "late", "--rejects": "rejects",
              "--report": "r.html", "--timeline": "t.png", "query": "q.sal"}[role]
    query = TRIANGLE
    extra = []
    if role == "query":
        query = write(source / inside, TRIANGLE.read_text())
    else:
        extra = [role, str(source / inside)]
    checkpoint = [] if role == "--checkpoint" else ["--checkpoint", str(tmp_path / "ckpt")]
    assert main(["stream", str(query), "--source", str(source), *checkpoint, "--once",
                 *extra]) == 2
    assert f"lies in --source {source}" in one_line_error(capsys)
    assert sorted(p.name for p in source.iterdir()) == (["q.sal"] if role == "query" else [])


@pytest.mark.parametrize("role", ["--late", "--rejects", "--checkpoint"])
def test_a_stream_keeps_late_edges_and_rejects_out_of_its_parts(tmp_path, capsys, no_spark,
                                                                role):
    source, out = tmp_path / "incoming", tmp_path / "out"
    source.mkdir()
    assert main(["stream", str(TRIANGLE), "--source", str(source), "--checkpoint",
                 str(tmp_path / "ckpt"), "--once", "-o", f"{out}/", role, str(out / "x")]) == 2
    assert "a directory of match parts" in one_line_error(capsys) and not out.exists()


@pytest.mark.parametrize("role", ["-o", "--late", "--rejects"])
def test_a_stream_output_is_not_its_checkpoint(tmp_path, capsys, no_spark, role):
    source, checkpoint = tmp_path / "incoming", tmp_path / "ckpt"
    source.mkdir()
    assert main(["stream", str(TRIANGLE), "--source", str(source), "--checkpoint",
                 str(checkpoint), "--once", role, str(checkpoint)]) == 2
    assert "is the checkpoint directory" in one_line_error(capsys)
    assert not checkpoint.exists()


@pytest.mark.parametrize(("extra", "message"), [
    (["--edges", "-1"], "argument --edges: expected at least 0, got -1"),
    (["--rate", "abc"], "argument --rate: expected a number, got 'abc'"),
    (["--rate", "0"], "argument --rate: expected edges per second above 0"),
    (["--rate", "nan"], "argument --rate: expected a finite number"),
    (["--vertices", "1"], "argument --vertices: expected at least 2, got 1"),
    (["--seed", "-1"], "argument --seed: expected at least 0, got -1"),
    (["--vertices", "9223372036854775807"], "argument --vertices: expected at most"),
    (["--edges", "99999999999999999999"], "argument --edges: expected at most"),
    # 10 edges at these rates end past the year 9999 (1e-300: past int64 too)
    (["--rate", "1e-300"], "end past 9999-12-31"),
    (["--rate", "1e-12"], "end past 9999-12-31"),
])
def test_gen_options_are_checked(tmp_path, capsys, extra, message):
    base = {"--edges": "10", "--vertices": "5", "--rate": "100"}
    base.update(dict(zip(extra[::2], extra[1::2], strict=True)))
    argv = ["gen", "netflow", "-o", str(tmp_path / "g.csv")]
    for flag, value in base.items():
        argv += [flag, value]
    assert main(argv) == 2
    assert message in one_line_error(capsys)
    assert not (tmp_path / "g.csv").exists()


def _options(parser: argparse.ArgumentParser, path: str):
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                yield from _options(child, f"{path} {name}")
        elif not isinstance(action, argparse._HelpAction):
            yield path, action


def test_every_option_of_every_command_has_help_text():
    missing = [f"{path} {'/'.join(action.option_strings) or action.dest}"
               for path, action in _options(build_parser(), "graphcep") if not action.help]
    assert missing == []


def test_help_is_status_0_in_process(capsys):
    assert main(["run", "--help"]) == 0
    out = capsys.readouterr().out
    for flag in ("--time-unit", "--master", "--query-name", "--homomorphic", "--summary",
                 "--output-format"):
        assert flag in out


# -- DDST on the command line ----------------------------------------------------------


def test_sal_options_on_a_ddst_query_say_what_ddst_does_instead(capsys):
    assert main(["explain", str(CONGESTION), "--homomorphic"]) == 2
    assert one_line_error(capsys) == (
        "graphcep: --homomorphic does not apply to a DDST query (DDST's dual simulation "
        "already lets query vertices share stream vertices)")
    assert main(["explain", str(CONGESTION), "--window", "3", "--query-name", "x"]) == 2
    assert one_line_error(capsys) == (
        "graphcep: --query-name, --window do not apply to a DDST query (a DDST file holds one "
        "query, named by its QUERY statement; a DDST query gives its window with WITHIN)")


def test_no_option_of_another_kind_is_silently_ignored(capsys):
    """Every kind refuses the options only other kinds read, naming whose they are."""
    nu = EXAMPLES / "nu" / "triangle.nu"
    cases = [
        (["explain", str(TRIANGLE), "--anchored", "--key", "src"],
         "--anchored, --key do not apply to a SAL program (it is an option of a ν-expression; "
         "it is an option of a subscriptions file)"),
        (["explain", str(nu), "--ddst-engine", "baseline"],
         "--ddst-engine does not apply to a ν-expression (it is an option of a DDST query)"),
        (["explain", str(nu), "--max-window-edges", "10"],
         "--max-window-edges does not apply to a ν-expression (it is an option of a SAL "
         "program)"),
        (["explain", str(CONGESTION), "--max-tokens", "5"],
         "--max-tokens does not apply to a DDST query (it is an option of a ν-expression)"),
        (["explain", str(TRIANGLE), "--pww-base", "2"],
         "--pww-base goes with --pww L (progressive window widening)"),
        (["explain", str(TRIANGLE), "--pww", "3", "--window", "20"],
         "--window bounds how long a match may last, and --pww finds matches of any "
         "duration (of at most L records): give one of them"),
        (["run", str(TRIANGLE), "--input", str(TRIANGLE), "--engine", "local", "--pww", "3",
          "--window", "20"],
         "--window bounds how long a match may last, and --pww finds matches of any "
         "duration (of at most L records): give one of them"),
        (["demo", "--edges", "5000"],  # the planted attacks need 100 s of flows
         "--edges: the demo plants its attacks in at least 100,000 flows (100 s of them), "
         "got 5,000"),
        (["demo", "--workdir", str(TRIANGLE)],  # a file where its directory would go
         f"--workdir {TRIANGLE}: a file, not a directory (the demo writes its stream and "
         "matches there)"),
    ]
    for args, message in cases:
        assert main(args) == 2, args
        assert one_line_error(capsys) == f"graphcep: {message}"


LABELLED = [
    {"t": 1, "src": "a", "dst": "b", "label": "congested", "src_label": "M", "dst_label": "M"},
    {"t": 2, "src": "c", "dst": "a", "label": "free", "src_label": "M", "dst_label": "M"},
]


def test_a_ddst_label_that_never_occurs_is_warned_about(tmp_path, capsys):
    stream = write(tmp_path / "e.jsonl", "".join(json.dumps(r) + "\n" for r in LABELLED))
    base = ["run", "--input", str(stream), "--engine", "local", "--summary", "json",
            "--rejects", str(tmp_path / "r.jsonl")]
    absent = write(tmp_path / "absent.ddst", "VERTICES A:M, B:Q;\nEDGES x: A -> B [jam];\n"
                                             "WITHIN 9 s;\n")
    assert main([base[0], str(absent), *base[1:]]) == 0
    captured = capsys.readouterr()
    assert last_json(captured.out)["matches"] == 0
    assert captured.err.strip() == (
        "graphcep: warning: query 'absent': no edge of the input carries 'jam' (edge label), "
        "'Q' (vertex label), so the query edges wanting them cannot match")
    present = write(tmp_path / "present.ddst", "VERTICES A:M, B:M;\nEDGES x: A -> B "
                                               "[congested];\nWITHIN 9 s;\n")
    assert main([base[0], str(present), *base[1:]]) == 0
    captured = capsys.readouterr()
    assert last_json(captured.out)["matches"] == 1 and captured.err == ""


def test_ddst_reports_of_giant_components_are_said_while_the_run_writes_them(
        tmp_path, capsys, monkeypatch):
    """An unlabelled back-and-forth over a few busy hosts is one giant match component,
    which every arrival reports whole: the run says so at its first matches, naming
    --ddst-report new, which writes each pair once (and is not warned about)."""
    import graphcep.jobs.ddst as ddst_job

    monkeypatch.setattr(ddst_job, "LARGE_REPORT", 20)  # a large report, at test size
    rows = [f"h{(7 * t) % 9} h{(4 * t + 1) % 9} {t}\n" for t in range(200)]  # SNAP
    stream = write(tmp_path / "e.txt", "".join(rows))
    query = write(tmp_path / "back.ddst", "VERTICES A, B; EDGES x: A -> B; y: B -> A; "
                                          "ORDER x < y; WITHIN 1000 s;")
    base = ["run", str(query), "--input", str(stream), "--engine", "local", "--summary",
            "json", "-o", str(tmp_path / "m.jsonl"), "--rejects", str(tmp_path / "r.jsonl")]
    assert main(base) == 0
    captured = capsys.readouterr()
    average = [line for line in captured.err.splitlines() if "edge pairs on average" in line]
    assert len(average) == 1 and average[0].startswith("graphcep: warning: query 'back': "
                                                       "its reports hold ")
    assert "--ddst-report new writes each pair once" in average[0]
    written = [json.loads(line) for line in (tmp_path / "m.jsonl").read_text().splitlines()]
    assert sum(len(r["edges"]) for r in written) / len(written) >= 20  # as the line says
    assert main([*base, "--ddst-report", "new"]) == 0
    assert "on average" not in capsys.readouterr().err


@pytest.mark.spark
def test_a_ddst_label_that_never_occurs_is_warned_about_on_spark(tmp_path, capsys, spark):
    stream = write(tmp_path / "e.jsonl", "".join(json.dumps(r) + "\n" for r in LABELLED))
    absent = write(tmp_path / "absent.ddst", "VERTICES A:M, B:M;\nEDGES x: A -> B [jam];\n"
                                             "WITHIN 9 s;\n")
    assert main(["run", str(absent), "--input", str(stream), "--master", "local[2]",
                 "--summary", "json", "--rejects", str(tmp_path / "r.jsonl")]) == 0
    captured = capsys.readouterr()
    assert last_json(captured.out)["matches"] == 0
    assert "graphcep: warning: query 'absent': no edge of the input carries 'jam' (edge " \
           "label), so the query edges wanting them cannot match" in captured.err


@pytest.mark.spark
def test_a_ddst_label_that_never_occurs_is_warned_about_by_a_stream(tmp_path, capsys, spark):
    incoming = tmp_path / "incoming"
    incoming.mkdir()
    write(incoming / "e.jsonl", "".join(json.dumps(r) + "\n" for r in LABELLED))
    absent = write(tmp_path / "absent.ddst", "VERTICES A:M, B:M;\nEDGES x: A -> B [jam];\n"
                                             "WITHIN 9 s;\n")
    assert main(["stream", str(absent), "--source", str(incoming), "--checkpoint",
                 str(tmp_path / "ckpt"), "--once", "--quiet", "--master", "local[2]"]) == 0
    assert capsys.readouterr().err.strip() == (
        "graphcep: warning: query 'absent': no edge of the input carries 'jam' (edge label), "
        "so the query edges wanting them cannot match")


def test_a_stream_operator_notes_only_the_query_labels_it_sees():
    from graphcep.runtime.streaming.driver import StreamOperator

    job = DDSTJob(parse_ddst("VERTICES A:M, B:Q;\nEDGES x: A -> B [congested];\n"
                             "WITHIN 9 s;\n"))
    operator = StreamOperator(job)
    rows = [{**r, "t": r["t"] * 1_000_000, "seq": n} for n, r in enumerate(LABELLED, 1)]
    operator.process(0, pa.Table.from_pylist(rows))
    # 'free' is no label of the query: not kept
    assert operator.labels_seen == {"label": {"congested"}, "src_label": {"M"},
                                    "dst_label": {"M"}}
    assert job.absent_labels(operator.labels_seen) == ["'Q' (vertex label)"]


# -- the library ------------------------------------------------------------------------


@pytest.mark.parametrize(("kind", "size", "message"), [
    ("time", -5, "a time window cannot be negative"),
    ("count", 0, "a count window needs at least 1 edge"),
    ("time", 2.5, "a window size is a whole number"),
    ("time", True, "a window size is a whole number"),
    ("days", 3, "a window is 'time' or 'count'"),
    ("time", 2**62, "below 2**62"),
])
def test_a_window_that_cannot_be_is_refused_on_construction(kind, size, message):
    with pytest.raises(DDSTQueryError, match=re.escape(message)):
        Window(kind, size)


def test_a_negative_ddst_window_in_text_is_named_at_its_position():
    with pytest.raises(QuerySyntaxError) as info:
        parse_ddst("VERTICES A, B;\nEDGES x: A -> B;\nWITHIN -5 s;")
    assert (info.value.line, info.value.column) == (3, 8)


def batch(rows: list[tuple[int, int]]) -> pa.Table:
    """Edges a->b at the given ``(t, seq)``."""
    return pa.table({"t": pa.array([t for t, _ in rows], pa.int64()),
                     "src": ["a"] * len(rows), "dst": ["b"] * len(rows),
                     "dur": pa.array([0] * len(rows), pa.int64()),
                     "seq": pa.array([s for _, s in rows], pa.int64())})


@pytest.mark.parametrize("engine", ["subgraph", *DDST_ENGINES])
def test_an_out_of_order_batch_names_the_offending_row(engine):
    def fresh():
        if engine == "subgraph":
            return SubgraphEngine(parse_query(PAIR))
        return _ddst_engine(engine)

    with pytest.raises(OutOfOrderError) as info:
        fresh().push(batch([(5, 1), (9, 2), (3, 3)]))
    assert "row 2 of the batch (t=3 µs, seq=3) comes after row 1 (t=9 µs, seq=2)" \
        in str(info.value)
    assert "-9223372036854775808" not in str(info.value)
    pushed = fresh()
    pushed.push(batch([(5, 1)]))
    with pytest.raises(OutOfOrderError) as info:
        pushed.push(batch([(4, 2)]))
    assert "row 0 of the batch (t=4 µs, seq=2) is not after the last edge pushed before it " \
           "(t=5 µs, seq=1)" in str(info.value)


def _ddst_engine(name: str):
    from graphcep.jobs.ddst import DDSTJob

    query = parse_ddst("VERTICES A, B; EDGES x: A -> B; WITHIN 9 s;")
    return DDSTJob(query, name).new_engine()


def test_the_readme_stream_examples_build_their_jobs():
    """Every ``graphcep stream examples/...`` command of the README parses and builds the
    job the stream command would build (the query, its features and extent)."""
    text = (ROOT / "README.md").read_text().replace("\\\n", " ")
    commands = re.findall(r"^graphcep stream (examples/\S+\.sal)([^\n#]*)", text, re.M)
    assert commands
    for query, rest in commands:
        args = build_parser().parse_args(["stream", query, *rest.split()])
        job = jobs.load(str(ROOT / query), job_options(args, args.format or "vast"))
        assert compile_query(job.query, job.max_duration_us).extent_us >= 0
        assert np.isfinite(job.extent().size)


@pytest.mark.parametrize(
    ("flag", "edges", "matches", "rejected"),
    # a header of its own names: read (detected, or said), or a reject under --no-header;
    # a file of data only: --header gives its first line away
    [(None, 3, 1, 0), ("--header", 3, 1, 0), ("--no-header", 3, 1, 1)],
)
def test_header_flags_decide_line_one(tmp_path, capsys, flag, edges, matches, rejected):
    named = write(tmp_path / "named.csv", "from,to,when\n1,2,10\n2,3,11\n3,1,12\n")
    args = ["run", str(TRIANGLE), "--input", str(named), "--engine", "local",
            "--summary", "json", "--rejects", str(tmp_path / "r.jsonl"), "--limit", "0"]
    assert main(args + ([flag] if flag else [])) == 0
    summary = last_json(capsys.readouterr().out)
    assert (summary["edges"], summary["matches"], summary["rejected"]) == (
        edges, matches, rejected)
    bare = write(tmp_path / "bare.csv", "1,2,10\n2,3,11\n3,1,12\n")
    args[3] = str(bare)
    assert main(args + ["--header"]) == 0
    summary = last_json(capsys.readouterr().out)
    assert (summary["edges"], summary["matches"], summary["rejected"]) == (2, 0, 0)


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("command", ["gen", "run"])
def test_a_full_disk_is_one_line_naming_the_output(tmp_path, capsys, command):
    triangle = write(tmp_path / "t.csv", "1,2,10\n2,3,11\n3,1,12\n")
    if command == "gen":
        args = ["gen", "netflow", "--edges", "100", "--vertices", "10", "-o", "/dev/full",
                "--format", "csv"]
    else:
        args = ["run", str(TRIANGLE), "--input", str(triangle), "--engine", "local",
                "-o", "/dev/full", "--output-format", "jsonl",
                "--rejects", str(tmp_path / "r.jsonl")]
    assert main(args) == 1
    assert one_line_error(capsys) == "graphcep: No space left on device (/dev/full)"


@pytest.mark.parametrize("role", ["-o", "--rejects"])
def test_an_output_naming_an_input_file_is_refused_and_the_input_kept(tmp_path, capsys, role):
    data = '{"t": 1, "src": "a", "dst": "b"}\n'
    stream = write(tmp_path / "in.jsonl", data)
    outputs = {"-o": str(tmp_path / "m.jsonl"), "--rejects": str(tmp_path / "r.jsonl"),
               role: str(tmp_path / "." / "in.jsonl")}
    assert main(["run", str(TRIANGLE), "--input", str(tmp_path), "--format", "jsonl",
                 "--engine", "local", *[x for kv in outputs.items() for x in kv]]) == 2
    assert "is an input of the run" in one_line_error(capsys)
    assert stream.read_text() == data


def test_a_default_rejects_file_left_in_the_input_directory_says_so(
        tmp_path, capsys, monkeypatch):
    """Run twice from inside the input directory: the first run's default rejects.jsonl
    is an input of the second, which says where it came from and what to pass."""
    write(tmp_path / "e.txt", "a b 1\nbad line here\n")
    monkeypatch.chdir(tmp_path)
    argv = ["run", str(TRIANGLE), "--input", ".", "--format", "snap", "--engine", "local",
            "-o", str(tmp_path.parent / f"{tmp_path.name}-m.jsonl")]
    assert main(argv) == 0
    capsys.readouterr()
    assert (tmp_path / "rejects.jsonl").is_file()
    assert main(argv) == 2
    assert one_line_error(capsys) == (
        "graphcep: rejects 'rejects.jsonl' is an input of the run (the default rejects "
        "file, left among the inputs by an earlier run from this directory: pass --rejects "
        "PATH outside them); writing it would destroy the input: name another file")


@pytest.mark.parametrize("time_format", ["iso", "auto"])
def test_time_format_reads_iso_times_and_keeps_durations_numbers(tmp_path, capsys,
                                                                 time_format):
    rows = "src,dst,t,dur\na,b,2024-01-01T00:00:01Z,1.5\nb,c,2024-01-01 00:00:02,1\n" \
           "c,a,2024-01-01T00:00:03+00:00,2\n"
    data = write(tmp_path / "iso.csv", rows)
    out = tmp_path / "m.jsonl"
    argv = ["run", str(TRIANGLE), "--input", str(data), "--engine", "local", "-o", str(out),
            "--summary", "json", "--rejects", str(tmp_path / "r.jsonl")]
    assert main(argv) == 2  # numbers by default: every line a reject, none accepted
    assert last_json(capsys.readouterr().out)["rejected"] == 3
    assert main([*argv, "--time-format", time_format]) == 0
    assert last_json(capsys.readouterr().out)["rejected"] == 0
    (match,) = [json.loads(line) for line in out.read_text().splitlines()]
    start = 1_704_067_200  # 2024-01-01T00:00:00Z
    # --time-format iso writes times as the input gave them (UTC); auto reads numbers
    # too, so it writes seconds; durations are seconds either way
    times = [f"2024-01-01T00:00:0{s}Z" for s in (1, 2, 3)] if time_format == "iso" else \
        [start + 1, start + 2, start + 3]
    assert [(e["t"], e["dur"]) for e in match["edges"]] == list(zip(times, [1.5, 1, 2],
                                                                    strict=True))


@pytest.mark.parametrize("constraints", [
    "starttime(e2) - starttime(e1) <= 5;",   # one direction bounded, no order
    "",                                       # nothing at all
    "starttime(e1) < starttime(e2);",         # an order, no bound
    "starttime(e1) < starttime(e2); starttime(e2) < starttime(e3);",
])
def test_an_unbounded_query_names_a_gap_and_each_suggested_fix_closes_it(constraints):
    """The message names two edges whose start gap nothing bounds; each constraint it
    suggests closes that gap and contradicts nothing (the query may stay unbounded for
    another pair, which the next message names)."""
    from graphcep.engines.difference_bounds import UnboundedQueryError, build_bounds

    text = "{ x e1 y; y e2 z; z e3 w; " + constraints + " }"
    with pytest.raises(UnboundedQueryError) as info:
        compile_query(parse_query(text))
    message = str(info.value)
    later, earlier = re.search(r"how much later (e\d) may start than (e\d)", message).groups()
    fixes = re.findall(r"'(starttime\([^']*;)'", message)
    assert fixes and all(f"({later})" in f and f"({earlier})" in f for f in fixes)
    for fix in fixes:
        fixed = parse_query(text.replace(" }", f" {fix} }}"))
        bounds = build_bounds(fixed)  # raises UnsatisfiableQueryError on a contradiction
        gap = bounds.start_gap(bounds.edges.index(later), bounds.edges.index(earlier))
        assert gap <= 10_000_000, fix  # at most the suggested 10 s


def test_the_program_ends_with_everything_written(tmp_path, capsys, monkeypatch):
    """Run as the program, a local command ends the process without the interpreter's
    teardown: its files, its console output (more than a pipe holds) and its status must
    be what the same command writes when it returns normally. In ``tmp_path``: the runs
    without ``--rejects`` write the default rejects file in the current directory."""
    import subprocess
    import sys

    monkeypatch.chdir(tmp_path)

    lines = ["t,src,dst", "not an edge"]
    lines += [f"{3 * i + j},v{i}_{j},v{i}_{(j + 1) % 3}" for i in range(400) for j in range(3)]
    flows = write(tmp_path / "flows.csv", "\n".join(lines) + "\n")
    timing = re.compile(r"in [0-9.]+ s \([0-9,]+ edges/s")

    def both(name: str, *options: str) -> tuple[str, str]:
        """stdout of the program, and of main() returning, with ``name`` in file names."""
        argv = ["run", str(ROOT / "examples" / "triangle.sal"), "--input", str(flows),
                "--engine", "local", *(o.replace("NAME", name) for o in options)]
        done = subprocess.run(
            [sys.executable, "-c", "import sys; from graphcep.cli import main; sys.exit(main())",
             *argv], capture_output=True, text=True,
            env={"PYTHONPATH": str(ROOT / "src"), "PATH": "/usr/bin:/bin"})
        assert done.returncode == 0, done.stderr
        assert main([o.replace(name, f"{name}-returned") for o in argv]) == 0
        printed = capsys.readouterr().out.replace(f"{name}-returned", name)
        return timing.sub("", done.stdout), timing.sub("", printed)

    program, returned = both("console", "--limit", "1000", "--rejects",
                             str(tmp_path / "NAME.rej"))
    assert program == returned and len(program) > 65_536  # more than a pipe's buffer
    program, returned = both("file", "-o", str(tmp_path / "NAME.jsonl"))
    assert program == returned
    for name in ("console.rej", "file.jsonl"):
        stem, suffix = name.split(".")
        assert (tmp_path / name).read_text() == (
            tmp_path / f"{stem}-returned.{suffix}").read_text().replace("-returned", "")
    assert len((tmp_path / "file.jsonl").read_text().splitlines()) == 400
    # the second line of the input, by the default rejects file in the current directory
    rejected = (tmp_path / "rejects.jsonl").read_text().splitlines()
    assert [(r["line"], r["text"]) for r in map(json.loads, rejected)] == [(2, "not an edge")]


@pytest.mark.parametrize("option", ["--draw", "--limit", "--pww"])
def test_a_count_past_int64_is_refused_before_the_run(tmp_path, capsys, pair_stream, option):
    """--draw 10**20 ran the whole query, then died slicing the matches (OverflowError)."""
    assert main(["run", str(TRIANGLE), "--input", str(pair_stream), "--engine", "local",
                 "-o", str(tmp_path / "m.jsonl"), option, str(10**20)]) == 2
    assert one_line_error(capsys) == (
        f"graphcep: run: argument {option}: expected at most 9,223,372,036,854,775,807, got "
        f"100,000,000,000,000,000,000 (see graphcep run --help)")
    assert not (tmp_path / "m.jsonl").exists()
