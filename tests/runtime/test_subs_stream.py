"""Subscriptions watched by the stream: changes applied between micro-batches, kept in the
checkpoint.

Oracle: Definitions 1-2 by brute force (``tests/sequences_oracle.py``) over each key's
sequence in stream order, with the run-time semantics applied here from the schedule of
edits alone: a subscription in force, with one pattern, from stream position ``a`` (the
edges released to the engine before the edit, counted here from the batch cuts: with no
lateness and increasing times, a batch releases every edge but its newest) to ``b``
reports exactly the occurrences whose first edge is at ``>= a`` and last edge ``< b``.
"""

from __future__ import annotations

import json
import os
import random
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.jobs.sequences import SubscriptionJob
from graphcep.jobs.subscription_watch import SubscriptionWatch
from graphcep.lang.sequences import parse_subscriptions
from graphcep.runtime.streaming.driver import StreamOperator
from tests.sequences_oracle import occurrences

S = 1_000_000
ALPHABET = "abc"
FOREVER = float("inf")

Items = tuple  # constants str, variables ("var", name)
Version = dict  # id -> Items, or None for a malformed edit


def text_of(items: Items) -> str:
    return ".".join(i if isinstance(i, str) else f"@{i[1]}" for i in items)


def random_version(rng: random.Random) -> Version:
    ids = rng.sample([f"s{k}" for k in range(6)], rng.randint(1, 5))
    return {sid: tuple(rng.choice([*ALPHABET, ("var", "x"), ("var", "y")])
                       for _ in range(rng.randint(1, 4))) for sid in sorted(ids)}


def write_version(path: Path, version: Version | None) -> None:
    """The version as a file, or as a directory of two files (ids split between them);
    ``None``: a malformed edit."""
    lines = ["s0: a..b"] if version is None else [f"{sid}: {text_of(p)}"
                                                 for sid, p in version.items()]
    if path.suffix == ".subs":
        path.write_text("\n".join(lines) + "\n")
        return
    path.mkdir(exist_ok=True)
    (path / "one.subs").write_text("\n".join(lines[::2]) + "\n")
    (path / "two.subs").write_text("\n".join(lines[1::2] or ["# none here"]) + "\n")
    if len(lines) == 1:
        (path / "two.subs").unlink()


def random_edges(rng: random.Random, n: int) -> pa.Table:
    return pa.table({"t": [i * S for i in range(n)],
                     "src": [rng.choice(["h0", "h1", "h2"]) for _ in range(n)],
                     "dst": [rng.choice(ALPHABET) for _ in range(n)],
                     "seq": list(range(1, n + 1))})


def expected(table: pa.Table, schedule: list[tuple[int, Version | None]]) -> set[tuple]:
    """The oracle (module docstring); ``schedule``: ``(position, version)`` in order, a
    ``None`` version leaving the one before in force."""
    periods, live = [], {}
    for position, version in schedule:
        if version is None:
            continue
        for sid, (items, start) in list(live.items()):
            if version.get(sid) != items:
                periods.append((sid, items, start, position))
                del live[sid]
        for sid, items in version.items():
            live.setdefault(sid, (items, position))
    periods += [(sid, items, start, FOREVER) for sid, (items, start) in live.items()]
    sequences: dict[str, list[tuple[int, str]]] = {}
    for i, (key, symbol) in enumerate(zip(table["src"].to_pylist(), table["dst"].to_pylist(),
                                          strict=True)):
        sequences.setdefault(key, []).append((i, symbol))
    found = set()
    for sid, items, a, b in periods:
        for key, seq in sequences.items():
            for start, valuation in occurrences(items, [s for _, s in seq]):
                end = start + len(items) - 1
                if a <= seq[start][0] and seq[end][0] < b:
                    binds = frozenset((v[1], value) for v, value in valuation.items())
                    found.add((sid, key, start, end, binds))
    return found


def reported(tables: dict[int, pa.Table]) -> list[tuple]:
    return [(r["subscription"], r["key"], r["start"], r["end"],
             frozenset((b["var"], b["value"]) for b in r["bindings"]))
            for _, table in sorted(tables.items()) for r in table.to_pylist()]


class Run:
    """Operators over one checkpoint, as ``graphcep stream`` runs them: the job read from
    the source at each (re)start, the source watched; matches by batch id (a re-run batch
    replaces its part, as the directory sinks do)."""

    def __init__(self, tmp_path: Path, source: Path, engine: str = "compiled") -> None:
        self.source, self.engine = source, engine
        self.checkpoint = tmp_path / "ckpt"
        self.parts: dict[int, pa.Table] = {}
        self.notes: list[str] = []
        self.op = self.start()

    def start(self) -> StreamOperator:
        from graphcep.lang.sequences import parse_subscriptions_source

        job = SubscriptionJob(parse_subscriptions_source(self.source), engine=self.engine)
        self.op = StreamOperator(job, checkpoint=self.checkpoint, watch=job.watch(self.source),
                                 on_matches=self._keep)
        return self.op

    def _keep(self, matches: pa.Table, batch_id: int) -> None:
        self.parts[batch_id] = matches

    def process(self, batch_id: int, batch: pa.Table) -> None:
        self.parts.pop(batch_id, None)
        self.notes += self.op.process(batch_id, batch).notes

    def flush(self) -> None:
        self.notes += self.op.flush().notes


def cut(table: pa.Table, rng: random.Random, batches: int) -> list[pa.Table]:
    bounds = sorted({0, table.num_rows, *rng.sample(range(1, table.num_rows), batches - 1)})
    return [table.slice(a, b - a) for a, b in zip(bounds, bounds[1:], strict=False)]


@pytest.mark.parametrize("seed", range(8))
def test_changes_between_batches_report_what_the_oracle_says(tmp_path, seed):
    """Random edits (a malformed one now and then) before each micro-batch and the flush,
    restarts from the checkpoint, and a batch re-run after a crash that followed its
    output with the file edited again in between: the rows are the oracle's, none twice."""
    rng = random.Random(seed)
    table = random_edges(rng, 160)
    batches = cut(table, rng, 8)
    source = tmp_path / ("s.subs" if seed % 2 else "subs")
    engine = ("compiled", "tree", "naive")[seed % 3]
    versions = [random_version(rng)] + [
        None if rng.random() < 0.15 else random_version(rng) for _ in batches]
    write_version(source, versions[0])
    run = Run(tmp_path, source, engine)
    schedule = []
    for batch_id, batch in enumerate(batches):
        if batch_id == 5:  # the batch ran, wrote its output, and the process died
            write_version(source, random_version(rng))
            run.process(batch_id, batch)
            run.start()
        write_version(source, versions[batch_id])
        if batch_id in (3, 6) and versions[batch_id] is not None:
            run.start()  # a restart, with the file edited while it was down
        # every edge of the batches before but the newest was released
        schedule.append((max(0, sum(b.num_rows for b in batches[:batch_id]) - 1),
                         versions[batch_id]))
        run.process(batch_id, batch)
    write_version(source, versions[-1])
    schedule.append((table.num_rows - 1, versions[-1]))
    run.flush()
    got = reported(run.parts)
    assert len(got) == len(set(got)), "an occurrence was reported twice"
    assert set(got) == expected(table, schedule)
    applied = [n for n in run.notes if re.match(r"subscriptions: \+\d+ -\d+ ", n)]
    refused = [n for n in run.notes if "keeping the" in n]
    assert applied and len(refused) <= versions.count(None)


def test_an_added_subscription_reports_from_its_position_and_a_removed_one_stops(tmp_path):
    """One key reading a, b, a, b, ...: ``ab: a.b`` added before batch 1 (3 edges released)
    reports the occurrences starting at position 4 and after, not the one at 2 in flight
    (its ``a`` was read before the add); removed before batch 3 (9 released) it reports
    nothing more, while ``ba`` carries on."""
    table = pa.table({"t": [i * S for i in range(16)], "src": ["h"] * 16,
                      "dst": ["a", "b"] * 8, "seq": list(range(1, 17))})
    source = tmp_path / "s.subs"
    source.write_text("ba: b.a\n")
    run = Run(tmp_path, source)
    run.process(0, table.slice(0, 4))     # releases positions 0..2, position 3 is held
    source.write_text("ba: b.a\nab: a.b\n")
    run.process(1, table.slice(4, 4))     # releases 3..6
    run.process(2, table.slice(8, 2))     # releases 7..8
    source.write_text("ba: b.a\n")
    run.process(3, table.slice(10, 6))    # releases 9..14
    run.flush()                           # releases 15
    rows = [r for t in run.parts.values() for r in t.to_pylist()]
    assert sorted(r["start"] for r in rows if r["subscription"] == "ab") == [4, 6]
    assert sorted(r["start"] for r in rows if r["subscription"] == "ba") == [1, 3, 5, 7, 9,
                                                                             11, 13]
    assert run.notes == ["subscriptions: +1 -0 (s.subs, from stream position 3): added ab",
                         "subscriptions: +0 -1 (s.subs, from stream position 9): removed ab"]


def test_a_malformed_edit_keeps_the_set_in_force_and_says_so_once(tmp_path):
    """A syntax error, then an id defined in two files of a directory: each is one line
    naming file:line:col, said once however many batches follow; the set in force goes
    on matching, and the next good edit is applied."""
    table = pa.table({"t": [i * S for i in range(12)], "src": ["h"] * 12,
                      "dst": ["a", "b", "c"] * 4, "seq": list(range(1, 13))})
    source = tmp_path / "subs"
    source.mkdir()
    (source / "one.subs").write_text("abc: a.b.c\n")
    run = Run(tmp_path, source)
    run.process(0, table.slice(0, 2))
    (source / "one.subs").write_text("abc: a.b.c\nbad: a..c\n")
    run.process(1, table.slice(2, 3))
    run.process(2, table.slice(5, 2))
    (source / "one.subs").write_text("abc: a.b.c\n")
    (source / "two.subs").write_text("# the same id again\nabc: c\n")
    run.process(3, table.slice(7, 2))
    (source / "two.subs").write_text("ca: c.a\n")
    run.process(4, table.slice(9, 3))
    run.flush()
    assert run.notes[0] == (f"subscriptions: {source / 'one.subs'}:2:8: subscription 'bad': "
                            "expected a constant or @variable, found '.'; keeping the 1 "
                            "subscriptions in force")
    assert run.notes[1] == (f"subscriptions: {source / 'two.subs'}:2:1: subscription 'abc' "
                            f"is defined twice (first at {source / 'one.subs'}:1:1); keeping "
                            "the 1 subscriptions in force")
    assert run.notes[2:] == ["subscriptions: +1 -0 (subs, from stream position 8): added ca"]
    rows = [(r["subscription"], r["start"]) for t in run.parts.values() for r in t.to_pylist()]
    assert sorted(rows) == [("abc", 0), ("abc", 3), ("abc", 6), ("abc", 9), ("ca", 8)]


def test_a_watch_without_a_readable_source_keeps_the_set(tmp_path):
    """The file vanishing (an editor replacing it) is one line, once; it coming back is a
    change like any other."""
    path = tmp_path / "s.subs"
    path.write_text("a: a\n")
    watch = SubscriptionWatch(path)
    job = SubscriptionJob(parse_subscriptions("a: a"))
    engine = job.new_engine()
    assert watch.changes(engine) == []
    path.unlink()
    first = watch.changes(engine)
    assert len(first) == 1 and "cannot be read" in first[0] and first[0].endswith(
        "keeping the 1 subscriptions in force")
    assert watch.changes(engine) == []
    path.write_text("b: b\n")
    assert watch.changes(engine) == [
        "subscriptions: +1 -1 (s.subs, from stream position 0): added b; removed a"]


# -- the command, killed and restarted ----------------------------------------------------


def write_csv(table: pa.Table, path: Path) -> None:
    """``src,dst,t`` lines (t in seconds), written elsewhere and moved in, modified in the
    order of their names (Spark takes files by modification time)."""
    tmp = path.parent.parent / f".{path.name}"
    tmp.write_text("".join(f"{s},{d},{t // S}\n" for t, s, d in zip(
        table["t"].to_pylist(), table["src"].to_pylist(), table["dst"].to_pylist(),
        strict=True)))
    stamp = 1_700_000_000 + int(table["t"][0].as_py()) // S
    os.utime(tmp, (stamp, stamp))
    os.replace(tmp, path)


@pytest.mark.slow
@pytest.mark.spark
def test_killed_stream_with_an_edit_in_between_loses_and_repeats_nothing(spark, tmp_path,
                                                                        capsys):
    """``graphcep stream`` over files, SIGKILLed after some micro-batches; restarted with
    ``--once`` while the subscriptions file is broken (it resumes with the checkpoint's
    subscriptions and says so in one line); the file then fixed with an edit and the
    stream restarted again: the output is the oracle's for the edit applied at the
    position the second restart's line names -- nothing lost, nothing twice. The restarts
    run in this process, on the tests' session (two JVM starts fewer)."""
    from graphcep.cli import main

    rng = random.Random(7)
    table = random_edges(rng, 400)
    incoming = tmp_path / "in"
    incoming.mkdir()
    source = tmp_path / "s.subs"
    before = {"s0": ("a", ("var", "x"), "a"), "s1": ("b", "c")}
    after = {"s0": ("a", ("var", "x"), "a"), "s2": (("var", "y"), ("var", "y"))}
    write_version(source, before)
    command = [sys.executable, "-m", "graphcep.cli", "stream", str(source), "--source",
               str(incoming), "--format", "csv", "--checkpoint", str(tmp_path / "ckpt"),
               "--output", str(tmp_path / "out") + "/", "--max-files-per-trigger", "1",
               "--master", "local[2]"]

    def arrive(parts: range) -> None:
        for part in parts:
            write_csv(table.slice(part * 50, 50), incoming / f"flows-{part:02d}.csv")

    arrive(range(4))
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 120
    while len(list((tmp_path / "ckpt" / "state").glob("state-*.bin"))) < 2:
        assert time.time() < deadline and proc.poll() is None, "no micro-batch finished"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    write_version(source, None)  # broken while the stream is down
    arrive(range(4, 6))
    # the restarts take what has arrived in one micro-batch (the killed run's batch first)
    once = [*command[3:], "--once", "--quiet", "--max-files-per-trigger", "100"]
    capsys.readouterr()
    status, broken = main(once), capsys.readouterr().err
    assert status == 0, broken[-2000:]
    said = [line for line in broken.splitlines() if "subscriptions" in line]
    assert len(said) == 1 and said[0].startswith(f"graphcep: subscriptions: {source}:1:7: ") and \
        said[0].endswith("resuming with the checkpoint's subscriptions until it parses"), said
    write_version(source, after)
    arrive(range(6, 8))
    status, done = main(once), capsys.readouterr().err
    assert status == 0, done[-2000:]
    lines = re.findall(r"graphcep: subscriptions: \+1 -1 \(s\.subs, from stream position "
                       r"([\d,]+)\): added s2; removed s1", done)
    assert len(lines) == 1, done[-2000:]
    position = int(lines[0].replace(",", ""))
    assert 6 * 50 - 1 <= position < table.num_rows  # after every edge of the broken run
    rows = [json.loads(line) for part in sorted((tmp_path / "out").glob("part-*.jsonl"))
            for line in part.read_text().splitlines()]
    got = [(r["subscription"], r["key"], r["start"], r["end"], frozenset(r["bindings"].items()))
           for r in rows]
    assert len(got) == len(set(got)), "an occurrence was written twice"
    assert set(got) == expected(table, [(0, before), (position, after)])
    assert not list((tmp_path / "ckpt" / "late").glob("part-*")), "edges arrived late"


def test_a_directory_is_a_subscriptions_query(tmp_path):
    """``graphcep run``/``stream`` read a directory as its ``.subs`` files merged; one without
    any is refused in one line."""
    from graphcep import jobs

    (tmp_path / "b.subs").write_text("y: b\n")
    (tmp_path / "a.subs").write_text("x: a.@v\n")
    (tmp_path / "notes.txt").write_text("not read\n")
    job = jobs.load(str(tmp_path), {})
    assert jobs.kind_of(str(tmp_path)).name == "subs"
    assert [(s.id, s.pattern.text()) for s in job.subscriptions.subscriptions] == [
        ("x", "a.@v"), ("y", "b")]
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(FileNotFoundError, match="the directory holds no .subs file"):
        jobs.load(str(empty), {})


def test_a_first_start_with_a_broken_source_stops(tmp_path, capsys):
    """Only a restart has subscriptions to fall back on (its checkpoint's): a first start
    whose source does not parse, or is missing, stops in one line, exit 2."""
    from graphcep.cli import main

    (tmp_path / "in").mkdir()
    (tmp_path / "s.subs").write_text("s0: a..b\n")
    for query in ("s.subs", "gone.subs"):
        assert main(["stream", str(tmp_path / query), "--source", str(tmp_path / "in"),
                     "--checkpoint", str(tmp_path / "ckpt"), "--once"]) == 2
        err = capsys.readouterr().err
        assert err.count("\n") == 1 and query in err and "Traceback" not in err
