"""``graphcep stream --matching executors`` for ν-expressions and subscriptions on Spark:
the cells' output equals the driver mode's and the kind's brute-force oracle
(tests/nu_oracle.py, tests/sequences_oracle.py) for several cell counts, and a stream
SIGKILLed and restarted on its checkpoint loses and repeats no match."""

from __future__ import annotations

import random
import sys
from pathlib import Path

import pytest

from graphcep.lang.sequences import parse_subscriptions
from tests.runtime.test_cells_kinds import NU, nu_oracle, subs_oracle
from tests.runtime.test_nu_spark import (
    S,
    keys_of,
    random_links,
    rows_of,
    run_cli,
    run_until,
    write_parts,
)

pytestmark = pytest.mark.spark

SUBS = "back: @x.@y.@x\nabc: a.@z.c\n"


def stream_args(query: Path, incoming: Path, work: Path, *extra: str) -> list[str]:
    return ["stream", str(query), "--source", str(incoming), "--checkpoint",
            str(work / "ckpt"), "-o", f"{work / 'out'}/", "--max-files-per-trigger", "1",
            "--master", "local[2]", *extra]


def nu_links(seed: int, n: int = 120) -> list[tuple[int, str, str]]:
    return random_links(random.Random(seed), n, nodes="abcdef")


def test_nu_cells_equal_the_driver_and_the_oracle(spark, tmp_path, capsys):
    text, size, _, _ = NU["ping"]
    links = nu_links(5)
    incoming = write_parts(links, tmp_path / "in", 4)
    query = tmp_path / "ping.nu"
    query.write_text(text + "\n")
    expected = nu_oracle(text, size, links)
    assert len(expected) >= 3
    driver, _ = run_cli(stream_args(query, incoming, tmp_path / "driver", "--once", "--quiet",
                                    "--matching", "driver"), capsys)
    assert keys_of(rows_of(tmp_path / "driver" / "out")) == expected
    for cells in (1, 4):
        work = tmp_path / f"cells-{cells}"
        summary, _ = run_cli(stream_args(query, incoming, work, "--once", "--quiet",
                                         "--matching", "executors", "--cells", str(cells)),
                             capsys)
        assert summary["matching"] == (f"executors, {cells} cell{'s' if cells > 1 else ''} "
                                       "(keyed by src, dst)")
        assert keys_of(rows_of(work / "out")) == expected, cells
        for total in ("edges", "late", "matches", "files", "batches"):
            assert summary[total] == driver[total], (cells, total)


def subs_rows(directory: Path) -> list[tuple]:
    return [(r["subscription"], r["key"], r["start"], r["end"]) for r in rows_of(directory)]


def test_subscription_cells_equal_the_driver_and_the_oracle(spark, tmp_path, capsys):
    """Read once (not watched) with --matching executors."""
    rng = random.Random(8)
    links = sorted(((rng.randrange(0, 60) * S, rng.choice("hkmnp"), rng.choice("abc"))
                    for _ in range(150)), key=lambda link: link[0])
    incoming = write_parts(links, tmp_path / "in", 4)
    query = tmp_path / "s.subs"
    query.write_text(SUBS)
    numbered = [{"t": t, "src": u, "dst": v, "seq": i} for i, (t, u, v) in enumerate(links)]
    want = subs_oracle(parse_subscriptions(SUBS), numbered)
    assert len(want) >= 10
    run_cli(stream_args(query, incoming, tmp_path / "driver", "--once", "--quiet",
                        "--matching", "driver"), capsys)
    assert sorted(subs_rows(tmp_path / "driver" / "out")) == sorted(want)
    work = tmp_path / "cells"
    summary, _ = run_cli(stream_args(query, incoming, work, "--once", "--quiet",
                                     "--matching", "executors", "--cells", "3"), capsys)
    assert summary["matching"] == "executors, 3 cells (keyed by src)"
    got = subs_rows(work / "out")
    assert len(got) == len(set(got)) and sorted(got) == sorted(want)


@pytest.mark.slow
def test_a_killed_nu_cells_stream_restarts_without_losing_or_repeating_a_match(
        spark, tmp_path, capsys):
    """SIGKILL the executor-mode stream of a ν-expression a moment after micro-batch 2
    and restart it on its checkpoint with ``--once``: the parts written, all together,
    hold exactly the oracle's matches, each once."""
    text, size, _, _ = NU["ping"]
    links = nu_links(17, n=160)
    incoming = write_parts(links, tmp_path / "in", 6)
    query = tmp_path / "ping.nu"
    query.write_text(text + "\n")
    args = stream_args(query, incoming, tmp_path, "--matching", "executors", "--cells", "4")
    run_until([sys.executable, "-m", "graphcep.cli", *args], batch=2, delay=0.3)
    assert list((tmp_path / "out").glob("part-*.jsonl"))  # output before the kill
    summary, err = run_cli([*args, "--once", "--quiet"], capsys)
    assert "Traceback" not in err
    assert (summary["files"], summary["edges"], summary["late"]) == (6, len(links), 0)
    rows = rows_of(tmp_path / "out")
    expected = nu_oracle(text, size, links)
    assert keys_of(rows) == expected and len(expected) >= 3  # keys_of: each match once
