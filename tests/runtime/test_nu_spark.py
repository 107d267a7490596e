"""ν-expressions on Spark: ``graphcep run`` in time shards with warm-up, ``graphcep stream``
over files in micro-batches, and a stream killed (SIGKILL) and restarted.

Oracle: the brute-force matcher of tests/nu_oracle.py, run on every stretch of one span of
the stream (a bounded pattern's match lies within its span, and a search-mode match is
decided by its own links alone), so that it stays exponential in a stretch's links only;
and the in-process run (``--engine local``) over the same files.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from graphcep.cli import main
from graphcep.events import format_seconds
from graphcep.lang.nu import parse_nu
from tests.nu_oracle import Oracle

pytestmark = pytest.mark.spark

S = 1_000_000
#: Both bounded by 3 s: a directed triangle, and a 2x2 biclique whose first link comes first.
PATTERNS = {
    "triangle": "<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 3]\n",
    "square": "<#X ~> #Y . (X ~> #Z % #W ~> Y % W ~> Z)>[0, 3]\n",
}
#: One instance of each pattern, its first link first.
INSTANCES = {
    "triangle": [("a", "b"), ("b", "c"), ("c", "a")],
    "square": [("a", "b"), ("a", "c"), ("d", "b"), ("d", "c")],
}
SHARDS = 3

Link = tuple[int, str, str]
Key = tuple[int, int, tuple[tuple[str, str], ...]]


def random_links(rng: random.Random, n: int, nodes: str = "abcde") -> list[Link]:
    """``n`` links with ties (equal times), self-loops and repeated links (the same link
    twice at the same time), in stream order."""
    links: list[Link] = []
    t = 0
    for _ in range(n):
        t += rng.choice([0, 0, S // 2, S, S, 2 * S])
        link = (t, rng.choice(nodes), rng.choice(nodes))
        links.append(link)
        if rng.random() < 0.1:
            links.append(link)
    return links


def planted(rng: random.Random, links: list[Link], instance: list[tuple[str, str]],
            start: int, shuffle: bool = False) -> list[Link]:
    """``links`` with one instance added: its first link at ``start``, its last one second
    later, the others tied with either or half-way (``shuffle``: in any order, which may
    make a near miss); each after the links of its time."""
    first, rest = instance[0], list(instance[1:])
    if shuffle:
        rng.shuffle(rest)
    offsets = [0, *sorted(rng.choice([0, S // 2, S]) for _ in rest[1:]), S]
    extra = [(start + dt, u, v) for dt, (u, v) in zip(offsets, [first, *rest], strict=True)]
    return sorted(links + extra, key=lambda link: link[0])  # stable: ties keep their order


def stream_of(name: str, seed: int, n: int = 160) -> list[Link]:
    """A random stream with instances of pattern ``name`` planted across the boundaries of
    ``SHARDS`` time shards (where a shard's warm-up must supply the match's first links)
    and at a few other places."""
    rng = random.Random(seed)
    links = random_links(rng, n)
    t_min, t_max = links[0][0], links[-1][0]
    length = -(-(t_max - t_min + 1) // SHARDS)  # graphcep.runtime.spark.replay.plan_shards
    for k in range(1, SHARDS):
        links = planted(rng, links, INSTANCES[name], t_min + k * length - S // 2)
    for _ in range(4):
        start = rng.randrange(t_min, t_max - 3 * S) // (S // 2) * (S // 2)
        links = planted(rng, links, INSTANCES[name], start, shuffle=True)
    return links


def write_links(links: list[Link], path: Path) -> Path:
    path.write_text("src,dst,t\n" + "".join(f"{u},{v},{format_seconds(t)}\n"
                                            for t, u, v in links))
    return path


def oracle_matches(name: str, links: list[Link]) -> set[Key]:
    """The brute-force matches of pattern ``name``: those of every stretch of the stream
    from one link's time to one span later whose first link is at the stretch's start,
    trying the subsequences as long as the pattern (it reads a fixed number of links)."""
    pattern = parse_nu(PATTERNS[name], name)
    span = int(pattern.span_us())
    oracle = Oracle(pattern)
    found: set[Key] = set()
    for start in sorted({t for t, _, _ in links}):
        stretch = [link for link in links if start <= link[0] <= start + span]
        found |= {m for m in oracle.matches(stretch, sizes=[len(INSTANCES[name])])
                  if m[0] == start}
    return found


def rows_of(path: Path) -> list[dict]:
    """Match records of a JSONL file, or of every part of a directory of them."""
    parts = sorted(path.glob("part-*.jsonl")) if path.is_dir() else [path]
    return [json.loads(line) for part in parts for line in part.read_text().splitlines()]


def key_of(row: dict) -> Key:
    return (round(row["first_t"] * S), round(row["last_t"] * S),
            tuple(sorted(row["bindings"].items())))


def keys_of(rows: list[dict]) -> set[Key]:
    """The rows' matches; each ``match_id`` once, and the same id always the same match."""
    ids = [row["match_id"] for row in rows]
    assert len(ids) == len(set(ids)), "a match was written twice"
    return {key_of(row) for row in rows}


def run_cli(args: list[str], capsys) -> tuple[dict, str]:
    """``graphcep ARGS --summary json`` in this process: its summary and its stderr."""
    status = main([*args, "--summary", "json"])
    out = capsys.readouterr()
    assert status == 0, out.err[-3000:]
    return json.loads(out.out.strip().splitlines()[-1]), out.err


def query_file(directory: Path, name: str, text: str) -> Path:
    path = directory / f"{name}.nu"
    path.write_text(text)
    return path


def write_parts(links: list[Link], directory: Path, parts: int) -> Path:
    """The stream as ``parts`` csv files, modified one second apart in stream order (a
    files source takes the oldest first: files written within one clock tick would be
    taken in any order, and later files' links would arrive late)."""
    directory.mkdir(parents=True)
    step = -(-len(links) // parts)
    now = time.time()
    for i in range(parts):
        path = write_links(links[i * step:(i + 1) * step], directory / f"links-{i:03d}.csv")
        os.utime(path, (now - 100 + i, now - 100 + i))
    return directory


# -- graphcep run ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_time_shards_equal_the_local_run_and_the_oracle(spark, tmp_path, capsys, name):
    """``graphcep run P.nu`` on Spark (the default engine) in three time shards, each
    warmed up on the pattern's 3 s span: the local run's matches, the oracle's, each once;
    some of them start in one shard and end in the next."""
    links = stream_of(name, seed=len(name))
    data = write_links(links, tmp_path / "links.csv")
    query = query_file(tmp_path, name, PATTERNS[name])
    local, _ = run_cli(["run", str(query), "--input", str(data), "--engine", "local",
                        "-o", str(tmp_path / "local.jsonl")], capsys)
    summary, _ = run_cli(["run", str(query), "--input", str(data), "--master", "local[2]",
                          "--shards", str(SHARDS), "-o", str(tmp_path / "spark.jsonl")], capsys)
    assert (summary["engine"], summary["strategy"], summary["shards"]) == (
        "spark", "shuffle", SHARDS)
    assert summary["extent_us"] == 3 * S
    on_spark = rows_of(tmp_path / "spark.jsonl")
    expected = oracle_matches(name, links)
    assert keys_of(on_spark) == keys_of(rows_of(tmp_path / "local.jsonl")) == expected
    assert summary["matches"] == local["matches"] == len(expected) >= 5
    boundaries = [links[0][0] + k * summary["shard_length_us"] for k in range(1, SHARDS)]
    assert any(first < b <= last for first, last, _ in expected for b in boundaries)


def test_an_unbounded_pattern_runs_in_one_task_and_says_so(spark, tmp_path, capsys):
    """A pattern no delay bounds (its matches may span the whole stream) cannot be cut in
    time: ``--shards 3`` runs it as one shard, with one warning line saying so, and finds
    the local run's matches."""
    data = write_links(random_links(random.Random(5), 60, "abc"), tmp_path / "links.csv")
    query = query_file(tmp_path, "open", "#X ~> #Y . Y ~> X\n")
    local, _ = run_cli(["run", str(query), "--input", str(data), "--engine", "local",
                        "-o", str(tmp_path / "local.jsonl")], capsys)
    summary, err = run_cli(["run", str(query), "--input", str(data), "--master", "local[2]",
                            "--shards", "3", "-o", str(tmp_path / "spark.jsonl")], capsys)
    assert summary["shards"] == 1 and summary["extent_us"] == 0
    assert ("graphcep: warning: --shards 3 does not apply to query 'open': it needs the "
            "whole stream in one engine, so it runs in one task\n") in err
    assert "Traceback" not in err
    assert (keys_of(rows_of(tmp_path / "spark.jsonl"))
            == keys_of(rows_of(tmp_path / "local.jsonl")))
    assert summary["matches"] == local["matches"] > 20


# -- graphcep stream ------------------------------------------------------------------------


@pytest.mark.parametrize("name", sorted(PATTERNS))
def test_stream_over_files_equals_the_batch_run(spark, tmp_path, capsys, name):
    """``graphcep stream P.nu --once`` over five files, one micro-batch each (times tied
    across files' boundaries included): the batch run's matches over the same directory,
    which are the oracle's, each once."""
    links = stream_of(name, seed=10 + len(name))
    incoming = write_parts(links, tmp_path / "in", 5)
    query = query_file(tmp_path, name, PATTERNS[name])
    batch, _ = run_cli(["run", str(query), "--input", str(incoming), "--engine", "local",
                        "-o", str(tmp_path / "batch.jsonl")], capsys)
    summary, _ = run_cli(["stream", str(query), "--source", str(incoming), "--checkpoint",
                          str(tmp_path / "ckpt"), "-o", str(tmp_path / "out") + "/",
                          "--max-files-per-trigger", "1", "--once", "--quiet",
                          "--master", "local[2]"], capsys)
    assert (summary["files"], summary["edges"], summary["late"]) == (5, len(links), 0)
    assert summary["batches"] >= 6  # five files, then the flush
    expected = oracle_matches(name, links)
    assert (keys_of(rows_of(tmp_path / "out")) == keys_of(rows_of(tmp_path / "batch.jsonl"))
            == expected)
    assert summary["matches"] == batch["matches"] == len(expected) >= 5


def run_until(command: list[str], batch: int, delay: float) -> list[int]:
    """Start ``command`` in a session of its own; ``delay`` seconds after its progress line
    for micro-batch ``batch``, SIGKILL its whole group (the JVM too). The ids of the
    micro-batches it reported."""
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True)
    watchdog = threading.Timer(180, os.killpg, (proc.pid, signal.SIGKILL))
    watchdog.start()
    seen = []
    try:
        assert proc.stderr is not None
        for line in proc.stderr:
            if line.startswith("batch "):
                seen.append(int(line.split()[1].rstrip(":")))
                if seen[-1] >= batch:
                    time.sleep(delay)
                    break
    finally:
        watchdog.cancel()
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        assert proc.stderr is not None
        proc.stderr.close()
    assert seen and seen[-1] >= batch, f"killed before micro-batch {batch} (saw {seen})"
    return seen


@pytest.mark.slow
def test_a_killed_stream_restarts_without_losing_or_repeating_a_match(spark, tmp_path,
                                                                      capsys):
    """SIGKILL ``graphcep stream triangle.nu`` twice -- just as micro-batch 1 has reported
    (Spark may not have committed it yet: the restart then runs it again) and a moment
    after micro-batch 4 -- and restart it on the same checkpoint each time; a last
    ``--once`` drains it. The parts written, all together, hold exactly the oracle's
    matches, each once (re-run micro-batches overwrite their own parts)."""
    links = stream_of("triangle", seed=31, n=200)
    incoming = write_parts(links, tmp_path / "in", 8)
    query = query_file(tmp_path, "triangle", PATTERNS["triangle"])
    out = tmp_path / "out"
    command = [sys.executable, "-m", "graphcep.cli", "stream", str(query), "--source",
               str(incoming), "--checkpoint", str(tmp_path / "ckpt"), "-o", f"{out}/",
               "--max-files-per-trigger", "1", "--master", "local[2]"]
    first = run_until(command, batch=1, delay=0)
    assert first[0] == 0 and list(out.glob("part-*.jsonl"))  # output before the kill
    second = run_until(command, batch=4, delay=0.3)
    assert 1 <= second[0] <= 2, second  # resumed from the checkpoint, not from the start
    # the drain in this process, on the tests' session (one JVM start fewer)
    summary, err = run_cli([*command[3:], "--once", "--quiet"], capsys)
    assert "Traceback" not in err
    assert (summary["files"], summary["edges"], summary["late"]) == (8, len(links), 0)
    expected = oracle_matches("triangle", links)
    assert keys_of(rows_of(out)) == expected and len(expected) >= 5
