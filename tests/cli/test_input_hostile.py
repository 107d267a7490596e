"""Inputs written as a user would write them, beyond the common mistakes: each gives the
right answer or one clear line and a non-zero exit, never a silently wrong answer.

Counts come from the plain-Python counter of :mod:`tests.cli.test_college_msg` (per-vertex
time lists and ``bisect``), which agrees with the published 1,653 triangles within one hour.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_college_msg import HOUR, count_triangles, load
from tests.cli.test_input_guesses import COLLEGE, TRIANGLE, run, summary


@pytest.fixture(scope="module")
def events() -> list[tuple[int, int, int]]:
    return load(COLLEGE)


@pytest.fixture(scope="module")
def triangles(events) -> int:
    count = count_triangles(events, HOUR)
    assert count == 1_653  # the published figure
    return count


@pytest.fixture
def query(tmp_path: Path) -> Path:
    path = tmp_path / "triangle.sal"
    path.write_text(TRIANGLE)
    return path


def test_snap_milliseconds_read_as_seconds_are_refused_naming_the_unit(
        tmp_path, query, events, capsys):
    data = tmp_path / "college_ms.txt"
    data.write_text("".join(f"{s} {d} {t * 1000}\n" for s, d, t in events))
    assert run(tmp_path, query, [str(data)]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"graphcep: {data}: times read as seconds fall in year ")
    assert "pass --time-unit ms" in line


def test_snap_milliseconds_with_their_unit_give_the_count(
        tmp_path, query, events, triangles, capsys):
    data = tmp_path / "college_ms.txt"
    data.write_text("".join(f"{s} {d} {t * 1000}\n" for s, d, t in events))
    assert run(tmp_path, query, [str(data)], "--time-unit", "ms") == 0
    assert summary(capsys.readouterr().out)["matches"] == triangles
