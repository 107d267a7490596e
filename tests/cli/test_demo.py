"""``graphcep demo``: one line per language, checked against the planted attacks and the
commands it prints; its workdir holds what ``--workdir``'s help says."""

from __future__ import annotations

import argparse
import json
import re
import shlex

import numpy as np
import pytest

from graphcep.cli import build_parser, demo, main
from graphcep.events import US_PER_SECOND
from tests.paths import EXAMPLES


def test_the_demo_runs_the_repositorys_examples():
    names = [query.file for query in demo.demo_queries()]
    assert len(set(names)) == len(names)  # one match file each: matches/FILE.jsonl
    for query in demo.demo_queries():
        found = [path for path in EXAMPLES.rglob(query.file) if path.is_file()]
        assert len(found) == 1, query.file
        assert found[0].read_text(encoding="utf-8") == query.text, query.file


def test_the_planted_attacks_are_what_the_queries_look_for():
    table, fast, slow = demo.demo_stream(demo.MIN_EDGES)
    rows = table.select(["t", "src", "dst", "dur", "seq", "IpLayerProtocolCode",
                         "DestPort"]).to_pylist()
    by_victim: dict[str, list[dict]] = {}
    for row in rows:
        by_victim.setdefault(row["src"], []).append(row)
    for attack in (*fast, *slow):
        visit, call = by_victim[attack.victim]  # two flows, in stream order
        assert (visit["dst"], call["dst"]) == (attack.bait, attack.controller)
        assert (visit["DestPort"], call["DestPort"]) == (demo.WEB_PORT, demo.IRC_PORT)
        assert visit["IpLayerProtocolCode"] == call["IpLayerProtocolCode"] == "tcp"
        gap = call["t"] - (visit["t"] + visit["dur"])
        assert gap == attack.gap_s * US_PER_SECOND
        assert call["seq"] - visit["seq"] + 1 <= demo.PWW_RECORDS  # --pww L covers it
        if attack in fast:  # within the SAL watering hole's 20 s and the DDST's 30 s
            assert gap < 20 * US_PER_SECOND and call["t"] - visit["t"] <= 30 * US_PER_SECOND
        else:  # beyond both: only widening finds them
            assert gap >= 20 * US_PER_SECOND and call["t"] - visit["t"] > 30 * US_PER_SECOND
    assert np.all(np.diff(table.column("seq").to_numpy()) == 1)
    assert np.all(np.diff(table.column("t").to_numpy()) >= 0)


@pytest.fixture
def split_small_streams():
    """The demo runs as its users run it: Spark's shard rule untouched."""


def workdir_promise() -> list[str]:
    """The files and directories ``demo --workdir``'s help says the demo writes."""
    parser = build_parser()
    commands = next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction))
    workdir = next(a for a in commands.choices["demo"]._actions if a.dest == "workdir")
    return re.findall(r"[\w-]+/[\w.]+\.jsonl|[\w-]+\.(?:csv|parquet)|[\w-]+/", workdir.help)


@pytest.mark.spark
@pytest.mark.slow
def test_the_demo_shows_each_language_and_the_commands_give_its_results(spark, tmp_path,
                                                                        capsys):
    workdir = tmp_path / "demo"
    assert main(["demo", "--edges", str(demo.MIN_EDGES), "--workdir", str(workdir),
                 "--master", "local[2]"]) == 0
    out = capsys.readouterr().out
    blocks = re.findall(r"\n([^:\n]+): (.+)\n  (.+) \([\d.]+ s\)\n  run it yourself: (.+)\n",
                        out)
    queries = demo.demo_queries()
    assert [(lang, title) for lang, title, _, _ in blocks] == [
        (q.language, q.title) for q in queries]
    assert {q.language for q in queries} == {"SAL", "DDST", "ν-expression", "subscriptions",
                                             "window widening"}
    assert "5/5 planted watering holes" in blocks[1][2]
    assert "5/5 watering-hole victims" in blocks[2][2]
    assert "the SAL triangles, each once per hosts and end times" in blocks[3][2]
    assert "8/8 planted attacks" in blocks[5][2]
    assert re.search(r"summary: 100,016 lines read, 0 rejected; 4/4 results", out)
    assert "next steps:" in out
    # the workdir holds what --workdir's help promises
    promised = workdir_promise()
    assert promised == ["netflow.csv", "netflow-labelled.parquet", "queries/",
                        "matches/triangle.sal.jsonl"]
    assert (workdir / "netflow.csv").is_file()
    assert (workdir / "netflow-labelled.parquet").is_file()
    assert sorted(p.name for p in (workdir / "queries").iterdir()) == sorted(
        q.file for q in queries)
    assert sorted(p.name for p in (workdir / "matches").iterdir()) == sorted(
        f"{q.file}.jsonl" for q in queries)
    # each command, run in this process, gives the demo's count and its match file
    for query, (_, _, result, command) in zip(queries, blocks, strict=True):
        count = int(result.split()[0].replace(",", ""))
        written = workdir / "matches" / f"{query.file}.jsonl"
        assert len(written.read_text().splitlines()) == count, query.file
        words = shlex.split(command)[1:]
        if "--engine" not in words:
            words += ["--engine", "local"]
        assert main([*words, "-o", str(tmp_path / "m.jsonl"), "--summary", "json",
                     "--rejects", str(tmp_path / "r.jsonl")]) == 0, command
        summary = json.loads(capsys.readouterr().out.splitlines()[-1])
        assert summary["matches"] == count, command
