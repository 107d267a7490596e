"""Real data: SNAP CollegeMsg, 3-edge temporal queries with a one-hour window.

The expected counts come from counters written here, independently of the engine: plain
Python over per-vertex and per-pair time lists with ``bisect``.
"""

from __future__ import annotations

import gzip
from bisect import bisect_left, bisect_right
from collections import defaultdict

import pytest

from graphcep.io.readers import read_edges
from graphcep.lang.sal import parse_query
from graphcep.runtime.local import run_local

HOUR = 3600


def load(path) -> list[tuple[int, int, int]]:
    with gzip.open(path, "rt") as fh:
        return [tuple(int(x) for x in line.split()) for line in fh if line.strip()]


def count_triangles(events, window: int) -> int:
    """x1->x2 @t1, x2->x3 @t2, x3->x1 @t3; t1 < t2 < t3; t3 - t1 <= window; x's distinct."""
    out_edges: dict[int, list[tuple[int, int]]] = defaultdict(list)  # u -> [(t, v)], time order
    pair_times: dict[tuple[int, int], list[int]] = defaultdict(list)
    for u, v, t in events:
        out_edges[u].append((t, v))
        pair_times[(u, v)].append(t)
    total = 0
    for c, a, t3 in events:  # e3 = c -> a closes x1 = a, x3 = c
        if a == c:
            continue
        for t1, b in out_edges[a]:
            if t1 >= t3:
                break
            if t3 - t1 > window or b in (a, c):
                continue
            times = pair_times.get((b, c), ())
            total += max(0, bisect_left(times, t3) - bisect_right(times, t1))
    return total


def count_out_stars(events, window: int) -> int:
    """x e1 a, x e2 b, x e3 c with t1 < t2 < t3, t3 - t1 <= window, a, b, c, x distinct."""
    by_source: dict[int, list[tuple[int, int]]] = defaultdict(list)
    for u, v, t in events:
        by_source[u].append((t, v))
    total = 0
    for x, edges in by_source.items():
        for i, (t1, a) in enumerate(edges):
            if a == x:
                continue
            later = [(t, v) for t, v in edges[i + 1 :] if t1 < t <= t1 + window and v != x]
            for j, (t2, b) in enumerate(later):
                if b == a:
                    continue
                total += sum(1 for t3, c in later[j + 1 :] if t3 > t2 and c not in (a, b))
    return total


TRIANGLE = """{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e3) - starttime(e1) <= 3600;
               starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }"""
OUT_STAR = """{ x e1 a; x e2 b; x e3 c; starttime(e1) < starttime(e2);
               starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 3600; }"""


@pytest.fixture(scope="module")
def college(college_msg_path):
    result = read_edges(college_msg_path, "snap")
    assert result.edges.num_rows == 59_835
    assert result.rejects.num_rows == 0
    return result.edges, load(college_msg_path)


def test_temporal_triangles_one_hour(college):
    edges, events = college
    expected = count_triangles(events, HOUR)
    matches, _ = run_local(parse_query(TRIANGLE), edges)
    assert expected > 1_000
    assert matches.num_rows == expected


@pytest.mark.slow
def test_out_stars_one_hour(college):
    edges, events = college
    expected = count_out_stars(events, HOUR)
    matches, _ = run_local(parse_query(OUT_STAR), edges)
    assert expected > 1_000
    assert matches.num_rows == expected
