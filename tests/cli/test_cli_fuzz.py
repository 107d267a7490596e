"""Seeded fuzz of ``graphcep run`` end to end: malformed lines never change the matches.

The reader fuzz (:mod:`tests.test_reader_fuzz`) holds each reader's edges and rejects to
the clean file's; this one holds what a user sees. For every line format, plain and gzip,
the command runs a query over a clean file and over the same good lines mixed with
malformed lines of every kind, in-process and on Spark. Each run must exit 0 with no
traceback, list every injected bad line (and nothing else) in its rejects file with the
line number, and report the clean file's matches -- compared by the matched edges' times
and vertices, since match ids follow line numbers, which the bad lines shift.
"""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest

from graphcep.cli import main
from tests.io.test_reader_fuzz import FORMATS, SEED, build, line_ends, write

pytestmark = [pytest.mark.spark, pytest.mark.slow]

#: Two sources sending to one target within a minute: the fuzz's good lines go from
#: ``v*`` to ``u*`` vertices one second apart, so this query matches a few hundred times.
FAN_IN = """{
    a e1 c;
    b e2 c;
    starttime(e2) - starttime(e1) <= 60;
    starttime(e1) < starttime(e2);
}
"""
#: The readers' default line limit (the command line has no option for it).
MAX_LINE = 1 << 20


def run(tmp_path: Path, name: str, query: Path, data: Path, fmt: str, engine: str,
        capsys: pytest.CaptureFixture[str]) -> tuple[set, list[dict]]:
    """Run the command; (matches as edge tuples, rejects) after checking how it ended."""
    out, rejects = tmp_path / f"{name}.matches.jsonl", tmp_path / f"{name}.rejects.jsonl"
    spark = ["--master", "local[2]"] if engine == "spark" else []
    status = main(["run", str(query), "--input", str(data), "--format", fmt,
                   "--engine", engine, "-o", str(out), "--rejects", str(rejects),
                   "--summary", "json", *spark])
    captured = capsys.readouterr()
    assert status == 0, captured.err
    assert "Traceback" not in captured.err
    summary = json.loads(captured.out.strip().splitlines()[-1])
    matches = {
        tuple((e["t"], e["src"], e["dst"]) for e in json.loads(line)["edges"])
        for line in out.read_text().splitlines()
    }
    assert summary["matches"] == len(matches)
    bad = [json.loads(line) for line in rejects.read_text().splitlines()] \
        if rejects.exists() else []
    assert summary["rejected"] == len(bad)
    return matches, bad


def past_the_line_limit(lines: list[bytes], bad: dict[int, str], keep: int = 3
                        ) -> tuple[list[bytes], dict[int, str]]:
    """The fuzz's overlong lines are made for a 2 KiB limit: the first ``keep`` are made
    longer than the command's 1 MiB, the others left out (lines renumbered)."""
    out: list[bytes] = []
    renumbered: dict[int, str] = {}
    overlong = 0
    for number, line in enumerate(lines, start=1):
        kind = bad.get(number)
        if kind == "overlong":
            overlong += 1
            if overlong > keep:
                continue
            line += b"x" * MAX_LINE
        out.append(line)
        if kind is not None:
            renumbered[len(out)] = kind
    return out, renumbered


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_malformed_lines_never_change_the_matches(tmp_path, capsys, fmt, compress, spark):
    seed = SEED + 7 * FORMATS.index(fmt)
    clean_lines, mixed_lines, bad, _ = build(fmt, seed)
    mixed_lines, bad = past_the_line_limit(mixed_lines, bad)
    suffix = ".gz" if compress else ""
    clean = write(tmp_path / f"clean.{fmt}{suffix}", b"\n".join(clean_lines) + b"\n", compress)
    mixed = write(tmp_path / f"mixed.{fmt}{suffix}",
                  line_ends(mixed_lines, random.Random(seed), bad), compress)
    query = tmp_path / "fan_in.sal"
    query.write_text(FAN_IN)

    expected, clean_rejects = run(tmp_path, "clean", query, clean, fmt, "local", capsys)
    assert clean_rejects == [] and len(expected) > 100
    runs = {engine: run(tmp_path, engine, query, mixed, fmt, engine, capsys)
            for engine in ("local", "spark")}
    for engine, (matches, rejects) in runs.items():
        assert matches == expected, engine
        lines = sorted(r["line"] for r in rejects)
        assert lines == sorted(bad), engine
        assert {r["file"] for r in rejects} == {str(mixed)}, engine
    local, on_spark = (sorted(runs[e][1], key=lambda r: r["line"]) for e in ("local", "spark"))
    assert local == on_spark
