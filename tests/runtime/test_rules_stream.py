"""``graphcep run --rules`` and ``graphcep stream --rules`` from the command line.

The oracle of each rule is the batch run of that rule alone over the whole stream
(:func:`graphcep.runtime.local.run_job`; each kind's engines are checked against brute
force in their own tests), filtered to the time the rule was in force.
"""

from __future__ import annotations

import json
import os
import pickle
import random
import re
import signal
import subprocess
import sys
import time
from collections import Counter
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.cli import main
from graphcep.io.readers import FILE_INDEX_SHIFT
from graphcep.runtime.streaming.checkpoint_bytes import decompressed
from tests.jobs.test_rules import CHANGED, NEVER, SECOND, TEXTS, batch_oracle, file_rules


def random_stream(seed: int, rows: int) -> pa.Table:
    """Edges among six hosts, three a second (ties in time), in time order."""
    rng = random.Random(seed)
    picked = []
    for i in range(rows):
        src, dst = rng.sample("abcdef", 2)
        picked.append((i // 3 * SECOND, src, dst))
    return pa.table({"t": pa.array([p[0] for p in picked], pa.int64()),
                     "src": [p[1] for p in picked], "dst": [p[2] for p in picked],
                     "seq": pa.array(range(1, rows + 1), pa.int64())})


def write_snap(table: pa.Table, path: Path) -> None:
    """``src dst t`` lines (t in seconds): line numbers are the stream's ``seq``."""
    path.write_text("".join(f"{s} {d} {t // SECOND}\n" for t, s, d in zip(
        table["t"].to_pylist(), table["src"].to_pylist(), table["dst"].to_pylist(),
        strict=True)))


def envelope_keys(rows: list[dict]) -> Counter:
    return Counter((r["rule"], r["version"], r["match_id"]) for r in rows)


def oracle_keys(folder: Path, spans: list[tuple[str, str, int, float]],
                stream: pa.Table) -> Counter:
    """(rule, version, identity) of each rule's batch matches in its span."""
    folder.mkdir(exist_ok=True)
    expected: Counter = Counter()
    for name, text, since, until in spans:
        for rule in file_rules(folder, name, text):
            expected += batch_oracle(rule, stream, since, until)
    return expected


@pytest.mark.spark
def test_run_rules_reports_each_rules_own_matches_locally_and_on_spark(spark, tmp_path,
                                                                        capsys):
    folder = tmp_path / "rules"
    folder.mkdir()
    for name in ("pair.sal", "two.sal", "back.nu", "back.ddst", "echo.subs"):
        (folder / name).write_text(TEXTS[name])
    stream = random_stream(3, 300)
    edges = tmp_path / "e.snap"
    write_snap(stream, edges)
    spans = [(name, TEXTS[name], NEVER, float("inf")) for name in sorted(TEXTS)
             if (folder / name).exists()]
    expected = oracle_keys(tmp_path / "oracle", spans, stream)
    for engine in ("local", "spark"):
        out = tmp_path / f"{engine}.jsonl"
        status = main(["run", "--rules", str(folder), "-i", str(edges), "--engine", engine,
                       "-o", str(out), "--summary", "json", "--nu-engine", "interpreted",
                       *(["--master", "local[2]"] if engine == "spark" else [])])
        assert status == 0
        rows = [json.loads(line) for line in out.read_text().splitlines()]
        assert envelope_keys(rows) == expected, engine
        summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        by_rule = Counter(rule for rule, _, _ in expected.elements())
        assert {name: facts["matches"] for name, facts in summary["rules"].items()} == {
            name: by_rule.get(name, 0) for name in summary["rules"]}
        assert set(summary["rules"]) == {"pair.sal", "two.sal#Fan", "two.sal#Path",
                                         "back.nu", "back.ddst", "echo.subs"}


@pytest.mark.spark
def test_run_rules_count_gives_each_rules_count_locally_and_on_spark(spark, tmp_path, capsys):
    """``run --rules DIR --count``: each rule's count, kind and version, as the run that
    writes the matches gives them; each rule's count is its batch matches (the oracle),
    and a file's rules add up to ``graphcep run FILE --count`` on the same input."""
    folder = tmp_path / "rules"
    folder.mkdir()
    names = ("pair.sal", "two.sal", "back.nu", "back.ddst", "echo.subs")
    for name in names:
        (folder / name).write_text(TEXTS[name])
    stream = random_stream(5, 240)
    edges = tmp_path / "e.snap"
    write_snap(stream, edges)
    by_rule = Counter(rule for rule, _, _ in oracle_keys(
        tmp_path / "oracle", [(name, TEXTS[name], NEVER, float("inf")) for name in names],
        stream).elements())
    assert len(by_rule) >= 4  # most rules match: a count of 0 for all would not pass

    def summary_of(*command: str) -> dict:
        nu = "--rules" in command or command[0].endswith(".nu")
        assert main(["run", *command, "-i", str(edges), "--summary", "json",
                     *(["--nu-engine", "interpreted"] if nu else []),
                     *(["--master", "local[2]"] if "spark" in command else [])]) == 0
        return json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    # on Spark: replayed in the driver, and in a task (--shards: the tasks' count rows)
    for engine in (["local"], ["spark"], ["spark", "--shards", "3"]):
        written = summary_of("--rules", str(folder), "--engine", *engine,
                             "-o", str(tmp_path / f"{len(engine)}{engine[0]}.jsonl"))
        counted = summary_of("--rules", str(folder), "--engine", *engine, "--count")
        assert counted["counted"] and counted["rules"] == written["rules"], engine
        assert {name: facts["matches"] for name, facts in counted["rules"].items()} == {
            name: by_rule.get(name, 0) for name in counted["rules"]}, engine
        assert counted["matches"] == by_rule.total()
        for name in names:
            alone = summary_of(str(folder / name), "--engine", *engine, "--count")
            assert alone["matches"] == sum(
                facts["matches"] for rule, facts in counted["rules"].items()
                if rule.split("#")[0] == name), (engine, name)
    assert main(["run", "--rules", str(folder), "-i", str(edges), "--engine", "local",
                 "--count", "--nu-engine", "interpreted"]) == 0
    text = capsys.readouterr().out
    assert f"matches by rule ({len(counted['rules'])} rules):" in text
    for name, facts in counted["rules"].items():
        assert f"  {name} ({facts['kind']}, {facts['version']}): {by_rule[name]:,}" in text


def test_rules_and_a_query_file_together_are_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "pair.sal").write_text(TEXTS["pair.sal"])
    (tmp_path / "e.snap").write_text("a b 0\n")
    status = main(["run", str(tmp_path / "pair.sal"), "--rules", str(tmp_path), "-i",
                   str(tmp_path / "e.snap"), "--engine", "local"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "not both" in err[0]
    status = main(["run", "-i", str(tmp_path / "e.snap"), "--engine", "local"])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "--rules DIR" in err[0]


@pytest.mark.slow
@pytest.mark.spark
def test_killed_rules_stream_with_rules_changed_while_down_loses_and_repeats_nothing(
        spark, tmp_path, capsys):
    """``graphcep stream --rules`` over files, SIGKILLed after some micro-batches; while it
    is down one rule is changed, one removed and one added; the restart applies them at
    the watermark its line names. Every rule's output is its batch matches of the time it
    was in force -- nothing of an unchanged rule lost or written twice."""
    part_rows = 40
    stream = random_stream(11, 360)
    # the seq a stream gives a file's line: the file's arrival ordinal << 40, its line number
    stream = stream.set_column(3, "seq", pa.array(
        [(i // part_rows << FILE_INDEX_SHIFT) + i % part_rows + 1
         for i in range(stream.num_rows)], pa.int64()))
    folder, incoming = tmp_path / "rules", tmp_path / "in"
    folder.mkdir()
    incoming.mkdir()
    for name in ("pair.sal", "back.ddst", "echo.subs"):
        (folder / name).write_text(TEXTS[name])

    def arrive(parts: range) -> None:
        for part in parts:
            tmp = tmp_path / f".part-{part:02d}.snap"
            write_snap(stream.slice(part * part_rows, part_rows), tmp)
            stamp = 1_700_000_000 + part
            os.utime(tmp, (stamp, stamp))
            os.replace(tmp, incoming / f"part-{part:02d}.snap")

    command = [sys.executable, "-m", "graphcep.cli", "stream", "--rules", str(folder),
               "--source", str(incoming), "--format", "snap", "--checkpoint",
               str(tmp_path / "ckpt"), "--output", str(tmp_path / "out") + "/",
               "--max-files-per-trigger", "1", "--master", "local[2]", "--history", "100",
               "--nu-engine", "interpreted"]
    arrive(range(5))
    proc = subprocess.Popen(command, start_new_session=True, stdout=subprocess.DEVNULL,
                            stderr=subprocess.DEVNULL)
    deadline = time.time() + 180
    while len(list((tmp_path / "ckpt" / "state").glob("state-*.bin"))) < 2:
        assert time.time() < deadline and proc.poll() is None, "no micro-batch finished"
        time.sleep(0.2)
    os.killpg(proc.pid, signal.SIGKILL)
    proc.wait()
    (folder / "pair.sal").write_text(CHANGED["pair.sal"])
    (folder / "back.ddst").unlink()
    (folder / "back.nu").write_text(TEXTS["back.nu"])
    arrive(range(5, 9))
    capsys.readouterr()
    # the restart snapshots the rules' engines every batch (the first run: only its first
    # batch's, then each batch's edges, which this restart replayed)
    status = main([*command[3:], "--once", "--quiet", "--max-files-per-trigger", "100",
                   "--snapshot-interval", "0"])
    err = capsys.readouterr().err
    assert status == 0, err[-2000:]
    state = tmp_path / "ckpt" / "state"
    kept = sorted(state.glob("state-*.bin"))
    named = {pickle.loads(decompressed(p.read_bytes())).engine_batch for p in kept}
    assert {int(p.stem.split("-")[1]) for p in state.glob("engine-*.bin")} == named
    assert int(kept[-1].stem.split("-")[1]) in named  # the restart's batch: a snapshot
    said = re.findall(r"graphcep: rules: changed pair\.sal version \w+ \(sal\), from event "
                      r"time ([\d.]+) s", err)
    assert len(said) == 1, err[-2000:]
    at = round(float(said[0]) * SECOND)
    # a watermark after whole files (lateness 0: the newest time read)
    ends = {int(stream["t"][min((k + 1) * part_rows, stream.num_rows) - 1].as_py())
            for k in range(9)}
    assert at in ends
    rows = [json.loads(line) for part in sorted((tmp_path / "out").glob("part-*.jsonl"))
            for line in part.read_text().splitlines()]
    expected = oracle_keys(tmp_path / "oracle", [
        ("pair.sal", TEXTS["pair.sal"], NEVER, at), ("pair.sal", CHANGED["pair.sal"], at,
                                                     float("inf")),
        ("back.ddst", TEXTS["back.ddst"], NEVER, at),
        ("echo.subs", TEXTS["echo.subs"], NEVER, float("inf")),
        ("back.nu", TEXTS["back.nu"], at, float("inf"))], stream)
    assert envelope_keys(rows) == expected
    assert len({rule for rule, _, _ in expected}) == 4


def test_history_without_rules_is_refused_in_one_line(tmp_path, capsys):
    (tmp_path / "pair.sal").write_text(TEXTS["pair.sal"])
    status = main(["stream", str(tmp_path / "pair.sal"), "--history", "10", "--source",
                   str(tmp_path), "--checkpoint", str(tmp_path / "ckpt")])
    err = capsys.readouterr().err.strip().splitlines()
    assert status == 2 and len(err) == 1 and "--history applies to --rules DIR" in err[0]


@pytest.mark.spark
def test_counting_tasks_count_each_rule(spark, tmp_path):
    """Counting tasks of a rules run in time shards send each rule's count (each rule's
    engine counts its own), which add up to each rule's batch matches."""
    from graphcep.jobs import rules
    from graphcep.runtime.spark.replay import plan_spark
    from graphcep.runtime.spark.tasks import counted, counted_parts

    folder = tmp_path / "rules"
    folder.mkdir()
    for name in ("pair.sal", "two.sal"):
        (folder / name).write_text(TEXTS[name])
    stream = random_stream(7, 300)
    by_rule = Counter(rule for rule, _, _ in oracle_keys(
        tmp_path / "oracle", [(name, TEXTS[name], NEVER, float("inf"))
                              for name in ("pair.sal", "two.sal")], stream).elements())
    run = plan_spark(spark, rules.load(str(folder), {}), stream, strategy="shuffle", shards=4,
                     count=True)
    rows = pa.Table.from_batches(list(run.batches()))
    assert run.stats.extra["strategy"] == "shuffle" and run.stats.extra["shards"] > 1
    assert counted_parts(rows) == dict(by_rule) and counted(rows) == by_rule.total() > 0
