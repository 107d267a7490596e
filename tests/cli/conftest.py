"""Fixtures of the newcomer-input tests: SNAP CollegeMsg's events, their published count of
temporal triangles within one hour, and that query as a file."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.cli.test_college_msg import HOUR, count_triangles, load
from tests.paths import FIXTURES

COLLEGE = FIXTURES / "CollegeMsg.txt.gz"
TRIANGLE = """{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e3) - starttime(e1) <= 3600;
               starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }"""


@pytest.fixture(scope="session")
def events() -> list[tuple[int, int, int]]:
    """CollegeMsg as ``(src, dst, t)`` integers."""
    return load(COLLEGE)


@pytest.fixture(scope="session")
def triangles(events) -> int:
    """The plain-Python count of triangles within one hour (per-vertex time lists and
    ``bisect``), checked against the published figure."""
    count = count_triangles(events, HOUR)
    assert count == 1_653
    return count


@pytest.fixture
def query(tmp_path: Path) -> Path:
    """The triangle within one hour, as a ``.sal`` file."""
    path = tmp_path / "triangle.sal"
    path.write_text(TRIANGLE)
    return path
