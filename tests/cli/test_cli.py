"""The ``graphcep`` command: run, explain, gen; summaries, rejects and query errors."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcep.cli import main
from tests.paths import EXAMPLES

TRIANGLE = EXAMPLES / "triangle.sal"


def last_json(out: str) -> dict:
    return json.loads(out.strip().splitlines()[-1])


def write_stream(path: Path, extra_lines: str = "") -> None:
    lines = ["1 2 0", "2 3 1", "3 1 2", "4 5 100", "5 6 101", "6 4 111"]
    path.write_text("\n".join(lines) + "\n" + extra_lines)


def test_explain_shows_extent_and_plan(capsys):
    assert main(["explain", str(TRIANGLE)]) == 0
    out = capsys.readouterr().out
    assert "extent: 10 s" in out
    assert "anchor e3" in out


def test_explain_a_query_bounded_through_end_times_without_max_duration(capsys):
    """The README's Listing 3 bounds e2's start through e1's end: explain works without
    --max-duration and says what it assumed (strictly under 20 s after e1's end: 20 s
    less one microsecond for edges of no duration)."""
    assert main(["explain", str(EXAMPLES / "watering_hole_full.sal")]) == 0
    out = capsys.readouterr().out
    assert ("extent: 19.999999 s for edges of no duration, more for longer ones: a run "
            "bounds durations by --max-duration, else by the longest edge of its input\n") in out
    assert "anchor e2" in out
    assert main(["explain", str(EXAMPLES / "watering_hole_full.sal"),
                 "--max-duration", "60"]) == 0
    assert "extent: 79.999999 s (edge durations up to 60 s)\n" in capsys.readouterr().out


def test_a_query_wanting_long_edges_runs_without_max_duration(tmp_path, capsys):
    """'endtime(e1) - starttime(e1) >= 5' needs edges of 5 s or more: no duration bound
    is assumed before the run takes the input's longest edge (6 s), so the one path
    a -> b (1 s, lasting 6 s), b -> c (8 s, within 20 s of its end) is found."""
    query = tmp_path / "long.sal"
    query.write_text("{ x e1 y; y e2 z; endtime(e1) - starttime(e1) >= 5; "
                     "starttime(e2) > endtime(e1); starttime(e2) - endtime(e1) < 20; }")
    stream = tmp_path / "flows.csv"
    stream.write_text("t,src,dst,dur\n1,a,b,6\n8,b,c,1\n9,c,d,1\n")
    assert main(["explain", str(query)]) == 0
    assert ("extent: set by edge durations: a run bounds durations by --max-duration, else "
            "by the longest edge of its input") in capsys.readouterr().out
    assert main(["run", str(query), "--input", str(stream), "--engine", "local",
                 "--summary", "json", "--rejects", str(tmp_path / "r.jsonl")]) == 0
    assert last_json(capsys.readouterr().out)["matches"] == 1


def test_run_local_json_summary_and_matches(tmp_path, capsys):
    stream = tmp_path / "edges.txt"
    write_stream(stream)
    out_file = tmp_path / "m.jsonl"
    code = main(["run", str(TRIANGLE), "--input", str(stream), "--engine", "local",
                 "--output", str(out_file), "--summary", "json",
                 "--rejects", str(tmp_path / "rejects.jsonl")])
    assert code == 0
    summary = last_json(capsys.readouterr().out)
    assert summary["edges"] == 6 and summary["rejected"] == 0 and summary["matches"] == 1
    assert {"seconds", "edges"} <= set(summary)
    (match,) = [json.loads(line) for line in out_file.read_text().splitlines()]
    assert match["bindings"] == {"x1": "1", "x2": "2", "x3": "3"}


def test_state_bound_stops_a_sal_run_clearly(tmp_path, capsys):
    """--max-window-edges bounds a SAL engine too: past it the run ends with exit status 3
    and the engine's message; a bound the run stays under changes nothing; 0 is refused."""
    stream = tmp_path / "edges.txt"
    write_stream(stream)
    base = ["run", str(TRIANGLE), "--input", str(stream), "--engine", "local",
            "--summary", "json", "--rejects", str(tmp_path / "rejects.jsonl")]
    assert main([*base, "--max-window-edges", "2"]) == 3
    assert "max_window_edges=2" in capsys.readouterr().err
    assert main([*base, "--max-window-edges", "6"]) == 0
    assert last_json(capsys.readouterr().out)["matches"] == 1
    assert main([*base, "--max-window-edges", "0"]) == 2
    assert "--max-window-edges must be at least 1" in capsys.readouterr().err


@pytest.mark.spark
def test_state_bound_hit_in_a_spark_task_is_exit_status_3(tmp_path, capsys, spark):
    """On Spark the bound is hit inside a task; the run still ends with status 3 and the
    engine's message, not Spark's traceback."""
    stream = tmp_path / "edges.txt"
    write_stream(stream)
    assert main(["run", str(TRIANGLE), "--input", str(stream), "--master", "local[2]",
                 "--max-window-edges", "2", "--rejects", str(tmp_path / "r.jsonl")]) == 3
    err = capsys.readouterr().err
    assert "max_window_edges=2; raise the bound" in err and "Traceback" not in err


def test_bad_lines_are_rejected_and_reported(tmp_path, capsys):
    stream = tmp_path / "edges.txt"
    write_stream(stream, "7 8\n7 8 abc\n7 8 nan\n9 9 inf\n")
    rejects = tmp_path / "rejects.jsonl"
    code = main(["run", str(TRIANGLE), "--input", str(stream), "--engine", "local",
                 "--summary", "json", "--rejects", str(rejects)])
    assert code == 0
    summary = last_json(capsys.readouterr().out)
    assert summary["rejected"] == 4 and summary["matches"] == 1 and summary["edges"] == 6
    records = [json.loads(line) for line in rejects.read_text().splitlines()]
    assert [r["line"] for r in records] == [7, 8, 9, 10]
    assert all(r["reason"] for r in records)


def test_query_errors_name_line_and_column(tmp_path, capsys):
    bad = tmp_path / "bad.sal"
    bad.write_text("{\n  x1 e1 x2;\n  x2 e2 x3\n  starttime(e2) < starttime(e1);\n}\n")
    stream = tmp_path / "edges.txt"
    write_stream(stream)
    assert main(["run", str(bad), "--input", str(stream), "--engine", "local"]) == 2
    err = capsys.readouterr().err
    assert f"{bad}:4:3" in err


def test_unbounded_queries_need_a_window(tmp_path, capsys):
    query = tmp_path / "path.sal"
    query.write_text("{ a e1 b; b e2 c; starttime(e1) < starttime(e2); }")
    stream = tmp_path / "edges.txt"
    write_stream(stream)
    args = ["run", str(query), "--input", str(stream), "--engine", "local", "--summary", "json",
            "--rejects", str(tmp_path / "r.jsonl")]
    assert main(args) == 2
    assert "--window" in capsys.readouterr().err
    assert main([*args, "--window", "1"]) == 0
    # 1->2->3 (0 s, 1 s), 2->3->1 (1 s, 2 s), 4->5->6 (100 s, 101 s); 5->6->4 is 10 s apart
    assert last_json(capsys.readouterr().out)["matches"] == 3


def test_gen_netflow_round_trip(tmp_path, capsys):
    out = tmp_path / "flows.csv"
    assert main(["gen", "netflow", "--edges", "1000", "--vertices", "50", "--rate", "100",
                 "--seed", "3", "--output", str(out), "--format", "vast"]) == 0
    assert len(out.read_text().splitlines()) == 1000


@pytest.mark.spark
def test_run_on_spark_equals_local(tmp_path, capsys, spark):
    out = tmp_path / "flows.csv"
    main(["gen", "netflow", "--edges", "3000", "--vertices", "30", "--rate", "100",
          "--seed", "3", "--output", str(out), "--format", "vast"])
    capsys.readouterr()
    base = ["run", str(TRIANGLE), "--input", str(out), "--summary", "json",
            "--rejects", str(tmp_path / "r.jsonl")]
    assert main([*base, "--engine", "local"]) == 0
    local = last_json(capsys.readouterr().out)
    assert main([*base, "--engine", "spark", "--master", "local[2]"]) == 0
    on_spark = last_json(capsys.readouterr().out)
    assert local["matches"] == on_spark["matches"] > 0
    assert local["edges"] == on_spark["edges"] == 3000


def test_a_reader_that_leaves_early_ends_the_run_quietly(tmp_path):
    """``graphcep run ... | head``: the reader closes the pipe before the matches come; the
    command stops with SIGPIPE's status (141) and no traceback."""
    import subprocess
    import sys

    stream = tmp_path / "edges.txt"
    write_stream(stream)
    proc = subprocess.Popen([sys.executable, "-m", "graphcep.cli", "run", str(TRIANGLE),
                             "--input", str(stream), "--engine", "local"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    proc.stdout.close()  # before the interpreter has even started: every write fails
    err = proc.stderr.read().decode()
    assert proc.wait(timeout=120) == 141, err
    assert "Traceback" not in err and "BrokenPipeError" not in err


def test_python_dash_m_graphcep_is_the_command():
    import subprocess
    import sys

    done = subprocess.run([sys.executable, "-m", "graphcep", "explain", str(TRIANGLE)],
                          capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("query query1 on stream (default)")


def test_profile_names_the_phases_of_a_run(tmp_path, capsys):
    """--profile prints where the time went on stderr, and lists the phases in the JSON
    summary; they add up to no more than the process's whole time."""
    data = tmp_path / "e.csv"
    data.write_text("src,dst,t\na,b,1\nb,c,2\nc,a,3\n")
    status = main(["run", str(TRIANGLE), "--input", str(data), "--engine", "local",
                   "--profile", "--summary", "json", "-o", str(tmp_path / "m.jsonl")])
    out = capsys.readouterr()
    assert status == 0
    summary = json.loads(out.out.strip().splitlines()[-1])
    phases = summary["phases"]
    assert {"options and query", "reading the input", "sorting the stream",
            "matching (engine, match records)", "writing matches and rejects"} <= set(phases)
    assert out.err.splitlines()[0].split() == ["phase", "seconds", "share"]
    assert "reading the input" in out.err and out.err.splitlines()[-1].startswith("total")


@pytest.mark.parametrize("argv", [
    ["run", "{q}", "--input", "{gone}", "--engine", "local"],
    ["run", "{gone}", "--input", "{q}", "--engine", "local"],
    ["draw", "{gone}"],
    ["motifs", "--input", "{gone}", "--delta", "1"],
])
def test_a_missing_file_is_one_line_naming_it(tmp_path, capsys, argv):
    gone = tmp_path / "gone.csv"
    argv = [a.format(q=TRIANGLE, gone=gone) for a in argv]
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert err == f"graphcep: {gone}: No such file or directory\n"


def test_two_outputs_naming_one_file_are_refused(tmp_path, capsys):
    flows = tmp_path / "flows.csv"
    flows.write_text("t,src,dst\n1,a,b\n2,b,c\n3,c,a\n")
    same = tmp_path / "same.jsonl"
    assert main(["run", str(TRIANGLE), "--input", str(flows), "--engine", "local", "-o",
                 str(same), "--rejects", str(same)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "both name" in err
    assert not same.exists()


@pytest.mark.parametrize(("option", "name", "says"), [
    ("--timeline", "t.jpg", "--timeline {}: it writes a PNG picture; name it .png"),
    ("--report", "r.txt", "--report {}: it writes an HTML page; name it .html"),
])
def test_a_picture_named_for_another_format_is_refused(tmp_path, capsys, option, name, says):
    flows = tmp_path / "flows.csv"
    flows.write_text("t,src,dst\n1,a,b\n2,b,c\n3,c,a\n")
    target = tmp_path / name
    assert main(["run", str(TRIANGLE), "--input", str(flows), "--engine", "local",
                 option, str(target)]) == 2
    assert capsys.readouterr().err == f"graphcep: {says.format(target)}\n"
    assert not target.exists()


@pytest.mark.parametrize("command", ["run", "motifs"])
def test_a_clean_rerun_leaves_no_earlier_rejects_behind(tmp_path, capsys, command):
    """A run that rejects nothing creates no rejects file, but never leaves an earlier
    run's rejects in the file it names: they would read as this run's."""
    data, rejects = tmp_path / "e.txt", tmp_path / "r.jsonl"
    args = ([command, str(TRIANGLE)] if command == "run" else [command, "--delta", "10"]) + [
        "--input", str(data), "--format", "snap", "--rejects", str(rejects)]
    if command == "run":
        args += ["--engine", "local", "-o", str(tmp_path / "m.jsonl")]
    write_stream(data)
    assert main(args) == 0 and not rejects.exists()  # nothing rejected, no file made
    write_stream(data, "x y z\n")  # one line with a time that is not a number
    assert main(args) == 0
    assert [json.loads(line)["line"] for line in rejects.read_text().splitlines()] == [7]
    write_stream(data)  # fixed: this run rejects nothing
    assert main(args) == 0
    assert rejects.read_text() == ""
    capsys.readouterr()


def test_several_input_options_add_up_and_a_file_given_twice_is_refused(tmp_path, capsys):
    """``-i a -i b`` reads both files (argparse would keep only the last); the same file
    twice, or a file and its directory, would read its edges twice: refused in one line."""
    first, second = tmp_path / "d" / "a.txt", tmp_path / "b.txt"
    first.parent.mkdir()
    first.write_text("1 2 0\n2 3 1\n")  # the triangle's first two edges
    second.write_text("3 1 2\n")  # and its last, in another file
    base = ["run", str(TRIANGLE), "--format", "snap", "--engine", "local", "--summary", "json",
            "-o", str(tmp_path / "m.jsonl")]
    assert main([*base, "-i", str(first), "-i", str(second)]) == 0
    summary = last_json(capsys.readouterr().out)
    assert (summary["edges"], summary["matches"]) == (3, 1)
    for twice in ([str(first), str(first)], [str(first.parent), str(first)],
                  [str(first), str(tmp_path / "d" / ".." / "d" / "a.txt")]):
        for command in (base, ["motifs", "--delta", "10", "--format", "snap"]):
            assert main([*command, "-i", *twice]) == 2
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and "given twice" in err, err
