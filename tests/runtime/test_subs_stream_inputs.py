"""``graphcep stream`` over the whole-file formats, a file per micro-batch: plain sequences
(``.seq``, positions running on across files) and system-call traces (``.syscall``, times
running on) give the batch run's notifications (``graphcep subscribe``), and the
sequences' ones are the brute-force oracle's (Definitions 1-2 over each key's symbols);
what the stream cannot read is refused in one line, or quarantined per file."""

from __future__ import annotations

import json
import os
import random
from pathlib import Path

import pytest

from graphcep.cli import main
from tests.sequences_oracle import occurrences

pytestmark = pytest.mark.spark

SUBS = "back: @x.@y.@x\nab: a.b\nrun: @x.c.@x\n"
PATTERNS = {"back": (0, 1, 0), "ab": ("a", "b"), "run": (0, "c", 0)}


def notifications(path: Path) -> list[tuple]:
    files = sorted(path.glob("part-*.jsonl")) if path.is_dir() else [path]
    rows = [json.loads(line) for f in files for line in f.read_text().splitlines()]
    return sorted((r["subscription"], r["key"], r["start"], r["end"], r["start_t"], r["end_t"],
                   tuple(sorted(r["bindings"].items())), tuple(e["seq"] for e in r["edges"]))
                  for r in rows)


def stream_and_batch(tmp_path: Path, incoming: Path, capsys) -> tuple[list, list]:
    """The stream, a file per micro-batch, and the batch run over the same files. Spark
    takes files by modification time, the batch reader by name: the two agree."""
    for i, f in enumerate(sorted(incoming.iterdir())):
        os.utime(f, (1_700_000_000 + i, 1_700_000_000 + i))
    subs = tmp_path / "s.subs"
    subs.write_text(SUBS)
    assert main(["stream", str(subs), "--source", str(incoming), "--checkpoint",
                 str(tmp_path / "ck"), "-o", str(tmp_path / "out") + "/", "--once",
                 "--quiet", "--max-files-per-trigger", "1"]) == 0
    assert main(["subscribe", str(subs), "--input", str(incoming), "--engine", "local",
                 "-o", str(tmp_path / "batch.jsonl")]) == 0
    capsys.readouterr()
    assert not list((tmp_path / "ck" / "late").glob("part-*")), "edges arrived late"
    return notifications(tmp_path / "out"), notifications(tmp_path / "batch.jsonl")


@pytest.mark.slow
def test_plain_sequences_stream_as_they_run(spark, tmp_path, capsys):
    rng = random.Random(3)
    incoming = tmp_path / "in"
    incoming.mkdir()
    symbols: dict[str, list[str]] = {}
    for f in range(3):
        lines = []
        for _ in range(6):
            key = rng.choice(["h1", "h2", ""])
            line = [rng.choice("abc") for _ in range(rng.randint(1, 6))]
            symbols.setdefault(key, []).extend(line)
            lines.append((f"{key}: " if key else "") + " ".join(line))
        (incoming / f"part-{f}.seq").write_text("\n".join(lines) + "\n")
    streamed, batch = stream_and_batch(tmp_path, incoming, capsys)
    assert streamed == batch
    expected = {(sid, key, start, start + len(items) - 1)
                for sid, items in PATTERNS.items() for key, seq in symbols.items()
                for start, _ in occurrences(items, seq)}
    assert {r[:4] for r in streamed} == expected and len(expected) > 10


def test_system_call_traces_stream_as_they_run(spark, tmp_path, capsys):
    incoming = tmp_path / "in"
    incoming.mkdir()
    calls = ["read fd=3", "write fd=3", "read fd=3 => 4", "close fd=4", "read fd=4"]
    rng = random.Random(5)
    for f in range(3):
        (incoming / f"trace-{f}.syscall").write_text(
            "\n".join(rng.choice(calls) for _ in range(12)) + "\n")
    streamed, batch = stream_and_batch(tmp_path, incoming, capsys)
    assert streamed == batch and len(streamed) > 5
    assert max(r[5] for r in streamed) > 24  # the third file's calls, after 24 s


def test_what_a_subscriptions_stream_cannot_read(spark, tmp_path, capsys):
    """A time-event sequence holds events, not symbols: refused in one line with --format,
    quarantined (a reject naming the file) when a file's name says so; a socket sends
    lines, where a whole-file format needs files."""
    subs = tmp_path / "s.subs"
    subs.write_text(SUBS)
    incoming = tmp_path / "in"
    incoming.mkdir()
    base = ["stream", str(subs), "--checkpoint", str(tmp_path / "ck"), "--once", "--quiet"]
    assert main([*base, "--source", str(incoming), "--format", "tes"]) == 2
    err = capsys.readouterr().err
    assert "a time-event sequence (tes) holds events, not links" in err and err.count("\n") == 1
    assert main([*base[:-2], "--source", "tcp://localhost:9", "--format", "seq",
                 "--run-for", "1"]) == 2
    err = capsys.readouterr().err
    assert "--format seq is read a whole file at a time: give --source DIR" in err
    (incoming / "events.tes").write_text("a 1\nb 2\n")
    (incoming / "part.seq").write_text("a b a\n")
    assert main([*base, "--source", str(incoming), "-o", str(tmp_path / "out") + "/"]) == 0
    capsys.readouterr()
    rejects = [json.loads(line) for f in (tmp_path / "ck" / "rejects").glob("part-*")
               for line in f.read_text().splitlines()]
    assert [(Path(r["file"]).name, "holds events, not links" in r["reason"])
            for r in rejects] == [("events.tes", True)]
    assert [r[:4] for r in notifications(tmp_path / "out")] == [("ab", "", 0, 1), ("back", "", 0, 2)]
