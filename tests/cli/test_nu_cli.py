"""ν-expressions through the command line and both runtimes."""

from __future__ import annotations

import json

import pytest

from graphcep.cli import main
from graphcep.io.generator import generate_netflow, write_edges
from tests.paths import EXAMPLES

TRIANGLE = EXAMPLES / "nu" / "triangle.nu"


@pytest.fixture(scope="module")
def flows(tmp_path_factory):
    path = tmp_path_factory.mktemp("nu") / "flows.csv"
    write_edges(generate_netflow(3000, 80, 200, 4), str(path), "vast")
    return path


def run(args: list[str], capsys) -> tuple[int, str, str]:
    status = main(args)
    out = capsys.readouterr()
    return status, out.out, out.err


def matches_of(path) -> set[tuple]:
    rows = [json.loads(line) for line in path.read_text().splitlines()]
    return {(r["first_t"], r["last_t"], tuple(sorted(r["bindings"].items()))) for r in rows}


def test_run_local_writes_match_records(flows, tmp_path, capsys):
    out = tmp_path / "m.jsonl"
    status, stdout, err = run(["run", str(TRIANGLE), "--input", str(flows), "--engine",
                               "local", "-o", str(out), "--summary", "json"], capsys)
    assert status == 0, err
    summary = json.loads(stdout.strip().splitlines()[-1])
    assert summary["query"] == "triangle" and summary["mode"] == "search"
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert summary["matches"] == len(rows) > 0
    for row in rows:  # each record: three links X->Y, Y->Z, Z->X within 10 s
        x, y, z = (row["bindings"][v] for v in "XYZ")
        assert [(e["src"], e["dst"]) for e in row["edges"]] == [(x, y), (y, z), (z, x)]
        assert row["last_t"] - row["first_t"] <= 10 and len({x, y, z}) == 3


@pytest.mark.spark
def test_spark_equals_local(flows, tmp_path, capsys, spark):
    local, on_spark = tmp_path / "l.jsonl", tmp_path / "s.jsonl"
    for engine, out in (("local", local), ("spark", on_spark)):
        spark = ["--master", "local[2]", "--shards", "3"] if engine == "spark" else []
        status, _, err = run(["run", str(TRIANGLE), "--input", str(flows), "--engine",
                              engine, "-o", str(out), *spark], capsys)
        assert status == 0, err
    assert matches_of(on_spark) == matches_of(local) and matches_of(local)


def test_explain_prints_and_draws_the_automaton(tmp_path, capsys):
    dot = tmp_path / "a.dot"
    status, out, err = run(["explain", str(EXAMPLES / "nu" / "attack.nu"), "--dot", str(dot)],
                           capsys)
    assert status == 0, err
    assert "span: at most 1 s" in out and "automaton:" in out
    text = dot.read_text()
    assert text.startswith('digraph "attack" {') and "doublecircle" in text


def test_a_syntax_error_is_one_line_at_its_position(tmp_path, capsys):
    bad = tmp_path / "bad.nu"
    bad.write_text("<#X ~> #Y\n . Y ~> X & X ~> Y>[0, 1]\n")
    status, out, err = run(["explain", str(bad)], capsys)
    assert status == 2 and err.startswith(f"graphcep: {bad}:2:11: ")
    assert "conjunction" in err and "Traceback" not in err


def test_options_of_other_kinds_are_refused(capsys):
    status, _, err = run(["explain", str(TRIANGLE), "--window", "5"], capsys)
    assert status == 2 and "--window does not apply to a ν-expression" in err
    status, out, err = run(["explain", str(EXAMPLES / "triangle.sal"), "--dot", "x.dot"],
                           capsys)
    assert status == 2 and out == "" and err.count("\n") == 1  # refused before the plan
    assert ("--dot draws a ν-expression's automaton or a subscriptions file's pattern tree; "
            "'query1' is neither") in err


def test_an_unbounded_pattern_stops_at_the_token_bound(flows, tmp_path, capsys):
    query = tmp_path / "open.nu"
    query.write_text("#X ~> #Y . Y ~> X\n")
    status, _, err = run(["run", str(query), "--input", str(flows), "--engine", "local",
                          "--max-tokens", "200", "-o", str(tmp_path / "m.jsonl")], capsys)
    assert status == 3
    assert "'#X ~> #Y . Y ~> X' has no time bound" in err and "max_tokens=200" in err


def test_anchored_mode_from_the_command_line(tmp_path, capsys):
    links = tmp_path / "l.csv"
    links.write_text("src,dst,t\na,b,1\nx,y,2\nb,c,3\n")
    query = tmp_path / "q.nu"
    query.write_text("a ~> b . b ~> c\n")
    counts = {}
    for flag in ([], ["--anchored"]):
        status, out, err = run(["run", str(query), "--input", str(links), "--engine", "local",
                                "--summary", "json", *flag], capsys)
        assert status == 0, err
        counts[bool(flag)] = json.loads(out.strip().splitlines()[-1])["matches"]
    assert counts == {False: 1, True: 0}  # anchored: x->y must be read too


def test_the_query_file_is_never_overwritten(tmp_path, capsys):
    query = tmp_path / "q.nu"
    query.write_text("<#X ~> #Y . Y ~> X>[0, 5]\n")
    links = tmp_path / "l.csv"
    links.write_text("src,dst,t\na,b,1\nb,a,2\n")
    for args in (["explain", str(query), "--dot", str(query)],
                 ["run", str(query), "--input", str(links), "--engine", "local", "-o",
                  str(query), "--output-format", "jsonl"]):
        status, _, err = run(args, capsys)
        assert status == 2 and "is an input of the run" in err
    assert query.read_text() == "<#X ~> #Y . Y ~> X>[0, 5]\n"
    status, out, err = run(["explain", str(query), "--dot", str(tmp_path)], capsys)
    assert status == 2 and "is a directory" in err and out == ""  # checked before any work


def test_the_console_shows_an_event_as_one_node(tmp_path, capsys):
    """A time-event sequence's row is one event (its dst empty), not a link to ''."""
    events = tmp_path / "e.tes"
    events.write_text("a 1 b\n")
    query = tmp_path / "q.nu"
    query.write_text("a . b\n")
    status, out, err = run(["run", str(query), "--input", str(events), "--engine", "local"],
                           capsys)
    assert status == 0, err
    assert "\n  a: a @ 0s\n  b: b @ 1s\n" in out and "->" not in out


def test_explain_dot_to_the_console_is_refused(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)  # '-' was written as a file named '-'
    status, out, err = run(["explain", str(TRIANGLE), "--dot", "-"], capsys)
    assert status == 2 and out == "" and err.count("\n") == 1
    assert "--dot '-' is the console, which shows the matches: name a file" in err
    assert list(tmp_path.iterdir()) == []


def test_a_time_event_sequence_is_for_nu_expressions_only(tmp_path, capsys):
    events = tmp_path / "e.tes"
    events.write_text("a 1 b 1 c\n")
    status, _, err = run(["run", str(EXAMPLES / "triangle.sal"), "--input", str(events),
                          "--engine", "local"], capsys)
    assert status == 2 and "only ν-expressions read it" in err


def test_a_regex_file_is_a_nu_expression(tmp_path, capsys):
    """MaTiNA's ``.regex`` files are ν-expressions whatever they hold: ``a . b`` has no
    link ``~>``, and would otherwise be read as SAL and refused."""
    query, events = tmp_path / "pair.regex", tmp_path / "ab.tes"
    query.write_text("a . <b>[1]\n")
    events.write_text("a 1 b\n")
    status, out, err = run(["run", str(query), "--input", str(events), "--anchored",
                            "--engine", "local", "--summary", "json"], capsys)
    assert status == 0, err
    summary = json.loads(out.strip().splitlines()[-1])
    assert (summary["query"], summary["mode"], summary["matches"]) == ("pair", "anchored", 1)


def warnings_of(err: str) -> list[str]:
    return [line for line in err.splitlines() if line.startswith("graphcep: warning:")]


@pytest.mark.parametrize(("text", "cause"), [
    ("X ~> Y . Y ~> X\n", "its names X, Y are constants, which match only nodes of those "
                          "names: a name is a variable only where the expression allocates "
                          "or releases it (#X, X!)"),
    ("X ~> #Y . #X ~> Y\n", "variable X is read where nothing has allocated them"),
])
def test_a_pattern_that_cannot_match_as_meant_gets_one_warning(tmp_path, capsys, text, cause):
    links = tmp_path / "l.csv"
    links.write_text("src,dst,t\na,b,1\nb,a,2\nc,b,3\n")
    query = tmp_path / "q.nu"
    query.write_text(text)
    status, out, err = run(["run", str(query), "--input", str(links), "--engine", "local",
                            "--summary", "json"], capsys)
    assert status == 0, err
    assert json.loads(out.strip().splitlines()[-1])["matches"] == 0
    [line] = warnings_of(err)
    assert line.startswith(f"graphcep: warning: query 'q': {cause}")


def test_an_anchored_delay_from_time_0_on_epoch_times_gets_one_warning(tmp_path, capsys):
    """Anchored, <a ~> b>[0, 5] counts from time 0: on epoch times it has expired before
    the first link. Search mode, or times from 0, match and say nothing."""
    query = tmp_path / "q.nu"
    query.write_text("<a ~> b>[0, 5]\n")
    results = {}
    for start in (1_700_000_000, 0):
        links = tmp_path / f"l{start}.csv"
        links.write_text(f"src,dst,t\na,b,{start + 1}\n")
        for flag in ([], ["--anchored"]):
            status, out, err = run(["run", str(query), "--input", str(links), "--engine",
                                    "local", "--summary", "json", *flag], capsys)
            assert status == 0, err
            results[(start, bool(flag))] = (
                json.loads(out.strip().splitlines()[-1])["matches"], warnings_of(err))
    assert results[(0, True)] == results[(0, False)] == results[(1_700_000_000, False)] == (
        1, [])
    assert results[(1_700_000_000, True)] == (0, [
        "graphcep: warning: query 'q': anchored, the delay <a ~> b>[0, 5] that may begin the "
        "pattern counts from time 0, and the input's first link is at 1700000001 s (epoch "
        "times?): it has expired before any link; shift the times to start at 0, or run in "
        "search mode"])
