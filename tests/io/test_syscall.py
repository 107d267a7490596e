"""System-call traces (``.syscall``), their generator, and the window-widening paper's case
study: the remote-shell ν-expression over generated traces, with and without ``--pww``."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from graphcep.cli import main
from graphcep.io.readers import guess_format, read_edges
from graphcep.io.syscall import parse_syscall
from graphcep.io.syscall_gen import generate_syscalls, write_syscalls
from graphcep.io.syscall_gen import main as generate_main
from tests.paths import EXAMPLES

REMOTE_SHELL = EXAMPLES / "nu" / "remote_shell.nu"
S = 1_000_000


def rows(table) -> list[tuple[int, str, str, str]]:
    return list(zip(*(table.column(c).to_pylist() for c in ("t", "src", "dst", "label")),
                    strict=True))


def test_each_call_is_two_links_at_its_time_and_lines_without_time_count_on():
    read = parse_syscall("accept fd=5 => 6\n\n# comment\n10 dup fd=6 => 2\nexecve exe=sh\n"
                         "getpid => 42\nsync\n", "x.syscall")
    assert rows(read.edges) == [
        (1 * S, "accept", "5", "accept"), (1 * S, "5", "6", "accept"),
        (10 * S, "dup", "6", "dup"), (10 * S, "6", "2", "dup"),
        (11 * S, "execve", "sh", "execve"),
        (12 * S, "getpid", "-", "getpid"), (12 * S, "-", "42", "getpid"),
        (13 * S, "sync", "-", "sync")]
    assert read.edges.column("seq").to_pylist() == list(range(1, 9))
    assert (read.lines, read.skipped, read.rejects.num_rows, read.last) == (7, 2, 0, 13)


@pytest.mark.parametrize("line, reason", [
    ("dup fd=6 =>", "'=>' with no return value after it"),
    ("dup fd=6 => 1 2", "more than one value after '=>' (a call returns one): 2"),
    ("dup fd 6", "argument without '=' (an argument is NAME=VALUE): 'fd'"),
    ("dup fd=", "argument with an empty name or value: 'fd='"),
    ("=> 3", "no system call name"),
    ("7", "no system call name"),
    ("fd=3 => 4", "'=' in the system call's name: 'fd=3'"),
    ("4 open path=x => 3", "time not after the previous call's (5): 4"),
    ("dup fd=\ufffd => 1", "invalid UTF-8"),
])
def test_malformed_lines_are_kept_aside_with_their_line_and_reason(line, reason):
    read = parse_syscall(f"5 read fd=3 => 1\n# c\n{line}\nclose fd=3 => 0\n", "x.syscall")
    (reject,) = read.rejects.to_pylist()
    assert reject == {"file": "x.syscall", "line": 3, "reason": reason, "text": line}
    assert read.edges.column("t").to_pylist()[-1] == 6 * S  # the next call goes on


def test_malformed_calls_are_summed_up_by_kind_not_by_value():
    from graphcep.io.rejects import RejectLog

    read = parse_syscall("9 read fd=3\n4 dup fd=1\n3 dup fd=2\nopen fd 1\nopen path 2\n"
                         "a=b fd=1\nc=d\nx a= => 1\ny =b\nz => 1 2\nz => 1 2 3\n",
                         "x.syscall")
    log = RejectLog()
    log.add(read.rejects)
    assert log.kinds() == {"time not after the previous call's": 2,
                           "argument without '='": 2, "'=' in the system call's name": 2,
                           "argument with an empty name or value": 2,
                           "more than one value after '=>'": 2}


def test_the_format_is_guessed_by_extension_and_times_run_on_across_files(tmp_path):
    first, second = tmp_path / "a.syscall", tmp_path / "b.syscall"
    first.write_text("read fd=3 => 1\nread fd\n")
    second.write_text("close fd=3 => 0\n")
    assert guess_format(first) == "syscall"
    result = read_edges([first, second])
    assert result.fmt == "syscall" and result.lines_read == 3
    assert result.edges.column("t").to_pylist() == [1 * S, 1 * S, 2 * S, 2 * S]
    assert result.rejects.to_pylist()[0]["line"] == 2


def test_the_generator_is_seeded_and_its_episodes_have_delays_in_range(tmp_path):
    calls, truth = generate_syscalls(episodes=4, background=50, min_delay=3,
                                     max_delay=500, seed=7)
    assert (calls, truth) == generate_syscalls(4, 50, 3, 500, 7)
    assert len(calls) == 4 * 5 + 50 and len({t for t, _ in calls}) == len(calls)
    for episode in truth:
        gaps = [b - a for a, b in zip(episode["times"], episode["times"][1:], strict=False)]
        assert all(3 <= gap <= 500 for gap in gaps)
    out = tmp_path / "g.syscall"
    write_syscalls(calls, out)
    read = read_edges(out)
    assert read.rejects.num_rows == 0 and read.lines_read == len(calls)


def generated(tmp_path: Path, **draws) -> tuple[Path, list[dict]]:
    out = tmp_path / "trace.syscall"
    assert generate_main([str(out), *(f"--{k.replace('_', '-')}={v}"
                                      for k, v in draws.items())]) == 0
    return out, json.loads(out.with_suffix(".truth.json").read_text())["episodes"]


def matches(query: Path, trace: Path, tmp_path: Path, *extra: str) -> list[dict]:
    out = tmp_path / "m.jsonl"
    assert main(["run", str(query), "--input", str(trace), "--engine", "local",
                 "-o", str(out), "--rejects", str(tmp_path / "r.jsonl"), *extra]) == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def episodes_found(found: list[dict]) -> dict[tuple[int, str], int]:
    """Per (first time, connection), the earliest end: the pattern matches an episode
    again at every later ``execve``, each such match starting where the episode does."""
    earliest: dict[tuple[int, str], int] = {}
    for match in found:
        key = (match["first_t"], match["bindings"]["Y"])
        earliest[key] = min(earliest.get(key, match["last_t"]), match["last_t"])
    return earliest


def truth_of(truth: list[dict]) -> dict[tuple[int, str], int]:
    return {(e["start"], str(e["fd"])): e["end"] for e in truth}


def test_the_remote_shell_expression_finds_exactly_the_injected_short_episodes(tmp_path,
                                                                               capsys):
    trace, truth = generated(tmp_path, episodes=4, background=60, min_delay=1,
                             max_delay=10, seed=3)
    found = matches(REMOTE_SHELL, trace, tmp_path)
    assert episodes_found(found) == truth_of(truth)
    interpreted = matches(REMOTE_SHELL, trace, tmp_path, "--nu-engine", "interpreted")
    assert sorted(m["match_id"] for m in interpreted) == sorted(m["match_id"] for m in found)
    first = min(found, key=lambda m: m["first_t"])
    assert [e["src"] for e in first["edges"]][::2] == ["accept", "dup", "dup", "dup",
                                                     "execve"]


def test_a_delay_bound_misses_slow_episodes_that_pww_catches(tmp_path, capsys):
    trace, truth = generated(tmp_path, episodes=3, background=20, min_delay=100,
                             max_delay=100_000, seed=2)
    assert max(e["end"] - e["start"] for e in truth) > 10_000
    bounded = tmp_path / "bounded.nu"  # the same episode within 10,000 time units
    body = [line for line in REMOTE_SHELL.read_text().splitlines()
            if not line.startswith("//")]
    bounded.write_text("<" + "\n".join(body) + ">[0, 10000]\n")
    slow = {k for k, e in truth_of(truth).items() if e - k[0] > 10_000}
    assert slow and not set(episodes_found(matches(bounded, trace, tmp_path))) & slow
    found = matches(REMOTE_SHELL, trace, tmp_path, "--pww", "64")
    assert episodes_found(found) == truth_of(truth)
    # the smaller an episode's span, the lower the level that reports it
    levels = {(m["first_t"], m["last_t"]): m["pww_level"] for m in found}
    by_span = sorted(truth, key=lambda e: e["end"] - e["start"])
    assert [levels[e["start"], e["end"]] for e in by_span] == sorted(
        levels[e["start"], e["end"]] for e in by_span)


def episode_matches_by_definition(calls: list[tuple[int, str]]) -> set[tuple[int, int, str, str]]:
    """Every match of the paper's episode, brute force from its definition: ``accept fd=x
    => y``; after it ``dup fd=y => 0``, ``=> 1`` and ``=> 2`` in any order; after the
    three, any ``execve``. As (accept time, execve time, x, y)."""
    accepts, dups, execs = [], [], []
    for t, call in calls:
        name, *args = call.split()
        if name == "accept":
            accepts.append((t, args[0].split("=")[1], args[-1]))
        elif name == "dup":
            dups.append((t, args[0].split("=")[1], args[-1]))
        elif name == "execve":
            execs.append(t)
    out = set()
    for t0, x, y in accepts:
        done = [min((t for t, fd, ret in dups if fd == y and ret == r and t > t0), default=None)
                for r in "012"]
        if None not in done:
            out |= {(t0, t, x, y) for t in execs if t > max(done)}
    return out


@pytest.mark.parametrize("seed", [4, 5])
def test_the_extra_matches_at_later_execves_are_the_patterns_own(tmp_path, capsys, seed):
    """The pattern, not widening's reporting: the whole-stream run and the widened run both
    report exactly the matches of the episode's definition, and those include an episode
    again at each later execve."""
    calls, truth = generate_syscalls(episodes=4, background=40, min_delay=1,
                                     max_delay=2_000, seed=seed)
    trace = tmp_path / "t.syscall"
    write_syscalls(calls, trace)
    expected = episode_matches_by_definition(calls)
    assert {(e["start"], e["end"]) for e in truth} <= {(a, b) for a, b, _, _ in expected}
    assert len(expected) > len(truth)  # later execves end the episodes again

    def as_set(found: list[dict]) -> set[tuple[int, int, str, str]]:
        return {(round(m["first_t"]), round(m["last_t"]), m["bindings"]["X"], m["bindings"]["Y"])
                for m in found}

    whole = matches(REMOTE_SHELL, trace, tmp_path)
    assert as_set(whole) == expected and len(whole) == len(expected)
    widened = matches(REMOTE_SHELL, trace, tmp_path, "--pww", "256")
    assert as_set(widened) == expected and len(widened) == len(expected)


@pytest.mark.parametrize(("args", "message"), [
    (["--episodes", "-1"], "argument --episodes: expected 0 or more, got -1"),
    (["--min-delay", "10", "--max-delay", "1"],
     "delays must satisfy 1 <= min_delay <= max_delay, not 10, 1"),
])
def test_the_generator_refuses_bad_options_in_one_line(tmp_path, capsys, args, message):
    with pytest.raises(SystemExit) as done:
        generate_main([str(tmp_path / "t.syscall"), *args])
    assert done.value.code == 2
    assert capsys.readouterr().err == f"python -m graphcep.io.syscall_gen: {message}\n"
    assert not (tmp_path / "t.syscall").exists()
