"""``graphcep run/explain --pww``: progressive window widening from the command line."""

from __future__ import annotations

import json

import pytest

from graphcep.cli import main
from tests.paths import EXAMPLES

#: a temporal 2-path that no constraint bounds in time: only --pww's windows do
PATH = "{\n    x e1 y;\n    y e2 z;\n    starttime(e1) < starttime(e2);\n}\n"


@pytest.fixture
def files(tmp_path):
    query = tmp_path / "path.sal"
    query.write_text(PATH)
    edges = tmp_path / "e.csv"  # a -> b at 0 s, b -> c 50 minutes later, noise between
    edges.write_text("t,src,dst\n0,a,b\n5,q,r\n3000,b,c\n3001,m,n\n")
    return query, edges, tmp_path


def run(args: list[str], capsys) -> tuple[int, str, str]:
    status = main(args)
    out = capsys.readouterr()
    return status, out.out, out.err


def test_an_unbounded_query_runs_under_pww_and_reports_level_and_delay(files, capsys):
    query, edges, tmp = files
    out = tmp / "m.jsonl"
    status, stdout, err = run(["run", str(query), "-i", str(edges), "--pww", "4",
                               "--engine", "local", "-o", str(out), "--summary", "json",
                               "--rejects", str(tmp / "r.jsonl")], capsys)
    assert status == 0, err
    (row,) = [json.loads(line) for line in out.read_text().splitlines()]
    # 0 s and 3000 s fall in adjacent batches of 2048 s first: level 11
    assert (row["pww_level"], row["pww_report_t"], row["pww_delay"]) == (11, 3001, 1)
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["engine"] == "local" and summary["matches"] == 1
    assert [level["instances"] for level in summary["pww_levels"]] == [0] * 11 + [1]


def test_without_pww_the_same_query_is_refused_as_unbounded(files, capsys):
    query, edges, tmp = files
    status, _, err = run(["run", str(query), "-i", str(edges), "--engine", "local",
                          "--rejects", str(tmp / "r.jsonl")], capsys)
    assert status == 2 and "--pww L" in err


def test_a_duration_bound_caps_the_levels_and_misses_slower_instances(files, capsys):
    query, edges, tmp = files
    status, stdout, err = run(["run", str(query), "-i", str(edges), "--pww", "4",
                               "--engine", "local", "--pww-max-duration", "60",
                               "--summary", "json",
                               "--rejects", str(tmp / "r.jsonl")], capsys)
    assert status == 0, err
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["matches"] == 0 and len(summary["pww_levels"]) == 7  # 64 s > 60 s


def test_explain_shows_levels_durations_and_record_bounds(files, capsys):
    query, _, _ = files
    status, stdout, err = run(["explain", str(query), "--pww", "5", "--pww-base", "0.5",
                               "--pww-max-duration", "3"], capsys)
    assert status == 0, err
    assert "L = 5 records, T0 = 0.5 s, D = 3 s (4 levels)" in stdout
    assert "level 3: batches of 4 s, windows of 8 s, at most 10 records a batch" in stdout
    assert "exact:" in stdout


def test_explain_says_one_record_and_one_level_in_the_singular(files, capsys):
    """L = 1 and a D under T0: one level (T0 = 1 s is already longer than 0.5 s)."""
    query = files[2] / "edge.sal"  # one record holds an instance of one query edge
    query.write_text("{\n    x e1 y;\n}\n")
    status, stdout, err = run(["explain", str(query), "--pww", "1",
                               "--pww-max-duration", "0.5"], capsys)
    assert status == 0, err
    assert "L = 1 record, T0 = 1 s, D = 0.5 s (1 level)" in stdout
    assert "every instance of at most 1 record (and at most 0.5 s)" in stdout


def test_explain_names_a_query_whose_widening_is_not_exact_plainly(capsys):
    status, stdout, err = run(["explain", str(EXAMPLES / "ddst" / "congestion.ddst"),
                               "--pww", "3"], capsys)
    assert status == 0, err
    assert "\nnot exact: the matches of 'congestion' depend on records besides their own, " \
        in stdout


def test_explain_says_how_spark_runs_widened_subscriptions(tmp_path, capsys):
    """Under --pww Spark runs groups of windows, not the subscriptions' key partitions."""
    query = tmp_path / "s.subs"
    query.write_text("twice: @x.@x\n")
    status, plain, _ = run(["explain", str(query)], capsys)
    assert status == 0 and "Spark: the stream is partitioned by 'src'" in plain
    status, stdout, err = run(["explain", str(query), "--pww", "3"], capsys)
    assert status == 0, err
    spark = [line for line in stdout.splitlines() if line.startswith("Spark:")]
    assert len(spark) == 1 and "windows" in spark[0] and "partitioned" not in spark[0]
    # exact, as the widening numbers each key's positions over the whole stream
    assert "exact: a match is decided by its own records and their places in the stream" \
        in stdout


@pytest.mark.parametrize(("text", "suffix", "least"), [
    (PATH, "sal", 2),  # two query edges: two distinct stream edges
    ("{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e1) < starttime(e2); "
     "starttime(e2) < starttime(e3); }", "sal", 3),
    ("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]", "nu", 3),  # three links
    ("long: a.b.c.d\nshort: a.@x.a\n", "subs", 3),  # one edge per item, the shortest
])
def test_a_pww_too_small_for_any_instance_is_refused_naming_the_least(
        files, capsys, text, suffix, least):
    _, edges, tmp = files
    query = tmp / f"q.{suffix}"
    query.write_text(text)
    (tmp / "in").mkdir(exist_ok=True)
    for command in (["explain", str(query)],
                    ["run", str(query), "-i", str(edges), "--engine", "local"],
                    ["stream", str(query), "--source", str(tmp / "in"), "--checkpoint",
                     str(tmp / "ck")]):
        status, stdout, err = run([*command, "--pww", str(least - 1)], capsys)
        assert status == 2 and stdout == "", (command, stdout)
        assert len(err.strip().splitlines()) == 1, err
        assert f"give --pww {least} or more" in err, err
    status, _, err = run(["explain", str(query), "--pww", str(least)], capsys)
    assert status == 0, err


@pytest.mark.parametrize("zero", ["0", "0.0000001"])
def test_a_zero_duration_bound_is_refused_in_one_line(files, capsys, zero):
    """``--pww-max-duration`` under 1 µs bounds nothing an instance could be (like
    ``--pww-base``): refused on every command, before any work."""
    query, edges, tmp = files
    (tmp / "in").mkdir(exist_ok=True)
    for command in (["explain", str(query)],
                    ["run", str(query), "-i", str(edges), "--engine", "local"],
                    ["stream", str(query), "--source", str(tmp / "in"), "--checkpoint",
                     str(tmp / "ck")]):
        status, stdout, err = run([*command, "--pww", "4", "--pww-max-duration", zero],
                                  capsys)
        assert status == 2 and stdout == "", (command, stdout)
        assert err.strip().splitlines() == [
            "graphcep: --pww-max-duration must be at least 1 µs (leave it out for no bound "
            "on an instance's duration)"], err
    assert not (tmp / "ck").exists()
    status, _, err = run(["explain", str(query), "--pww", "4", "--pww-max-duration",
                          "0.000001"], capsys)
    assert status == 0, err


@pytest.mark.parametrize("flag", [["--pww-base", "3"], ["--pww-max-duration", "60"]])
def test_a_widening_option_without_pww_is_named_before_the_query_needs_a_window(
        files, capsys, flag):
    """The 2-path has no time bound: without --pww its refusal would say so, but the
    option given without --pww is the mistake to name."""
    query, edges, tmp = files
    (tmp / "in").mkdir(exist_ok=True)
    for command in (["explain", str(query)],
                    ["run", str(query), "-i", str(edges), "--engine", "local"],
                    ["stream", str(query), "--source", str(tmp / "in"), "--checkpoint",
                     str(tmp / "ck")]):
        status, stdout, err = run([*command, *flag], capsys)
        assert status == 2 and stdout == "", (command, stdout)
        assert err.strip().splitlines() == [
            f"graphcep: {flag[0]} goes with --pww L (progressive window widening)"], err
