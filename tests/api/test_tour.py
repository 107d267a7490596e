"""``examples/tour.py`` runs as written, and each of its paths finds what an independent
search finds: the triangles of a brute-force search by line number, the pictures of the
first three, the join counted again with pandas, and the stream's matches."""

from __future__ import annotations

import gzip
import runpy

import pytest

from tests.api.test_api import COLLEGE_TRIANGLES
from tests.api.test_api_stream import brute_force_triangles, from_flat
from tests.paths import ROOT

pytestmark = pytest.mark.spark


def test_the_tour_runs_and_every_path_finds_the_triangles(spark, college_msg_path, tmp_path,
                                                          monkeypatch, capsys):
    monkeypatch.setenv("GRAPHCEP_TOUR_DATA", str(college_msg_path))
    monkeypatch.setenv("GRAPHCEP_TOUR_OUT", str(tmp_path))
    tour = runpy.run_path(str(ROOT / "examples" / "tour.py"), run_name="__main__")
    with gzip.open(college_msg_path, "rt") as fh:
        lines = fh.read().splitlines()
    oracle = brute_force_triangles(lines, 3600)
    assert len(oracle) == COLLEGE_TRIANGLES
    triangles = tour["triangles"]
    assert {seqs for _, seqs in from_flat(triangles)} == oracle

    pictures = tour["pictures"]
    assert len(pictures) == 3 and all(p.suffix == ".png" and p.stat().st_size for p in pictures)
    assert all(m in p.name for p, m in zip(pictures, triangles["match_id"][:3], strict=True))

    rows = [line.split() for line in lines]
    sent: dict[str, int] = {}
    for sender, _, _ in rows:
        sent[sender] = sent.get(sender, 0) + 1
    opened: dict[str, int] = {}
    for n1, _, _ in oracle:
        opener = rows[n1 - 1][0]
        opened[opener] = opened.get(opener, 0) + 1
    joined = {(r["x1"], r["messages_sent"], r["triangles_opened"])
              for r in tour["openers"].collect()}
    assert joined == {(x, sent[x], count) for x, count in opened.items()}

    assert tour["running"].totals.matches == COLLEGE_TRIANGLES
    assert tour["streamed"] == set(triangles["match_id"])
    assert "the same match ids through pandas, Spark and the stream: True" in \
        capsys.readouterr().out
