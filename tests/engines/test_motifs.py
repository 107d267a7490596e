"""δ-temporal motif counts against SNAP's program, Raphtory's tests and a brute force.

Oracles: the tables SNAP's own ``temporalmotifsmain`` wrote for the fixtures
(``tests/fixtures/motifs/SOURCE.md``), the vectors Raphtory's unit tests assert, the
brute-force counter of :mod:`tests.motifs_oracle`, and the SAL engine's matches.
"""

from __future__ import annotations

import json

import numpy as np
import pyarrow as pa
import pytest

from graphcep.engines.motifs import count as motif_count
from graphcep.engines.motifs.layout import group_totals
from graphcep.lang.sal import parse_query
from graphcep.motifs import count_motifs, delta_to_us
from graphcep.runtime.local import run_local
from tests.motifs_oracle import Oracle
from tests.paths import FIXTURES

MOTIFS = FIXTURES / "motifs"
SNAP_TABLES = json.loads((MOTIFS / "snap-tables.json").read_text())


def _table(events: list[tuple]) -> pa.Table:
    """Edges ``(src, dst, t seconds)`` as graphcep's edge table."""
    return pa.table({"t": pa.array([int(t) * 1_000_000 for _, _, t in events], pa.int64()),
                     "src": [str(s) for s, _, _ in events],
                     "dst": [str(d) for _, d, _ in events]})


def _events(name: str) -> list[tuple[str, str, int]]:
    rows = (line.split() for line in (MOTIFS / name).read_text().splitlines())
    return [(s, d, int(t)) for s, d, t in rows]


@pytest.mark.parametrize("name", sorted(SNAP_TABLES["files"]))
def test_tables_equal_snap_program_on_published_inputs(name):
    expected = SNAP_TABLES["files"][name]
    counts = count_motifs(MOTIFS / name, list(expected), fmt="snap")  # all δ in one pass
    for i, delta in enumerate(expected):
        np.testing.assert_array_equal(counts.tables[i], expected[delta], err_msg=f"δ={delta}")


def test_tables_equal_snap_program_on_random_streams():
    for case in SNAP_TABLES["random"]:
        expected = case["tables"]
        counts = count_motifs(_table(case["events"]), list(expected))
        for i, delta in enumerate(expected):
            np.testing.assert_array_equal(counts.tables[i], expected[delta])


RAPHTORY_GLOBAL = [0, 2, 3, 8, 2, 4, 1, 5, 0, 0, 0, 0, 1, 0, 2, 0, 0, 1, 6, 0, 0, 1, 10, 2,
                   0, 1, 0, 0, 0, 0, 1, 0, 2, 3, 2, 4, 1, 2, 4, 1]

RAPHTORY_LOCAL = {  # test_local_motif, δ = 10
    "1": [0, 0, 0, 0, 1, 2, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0, 0, 0,
          0, 0, 0, 0, 1, 1, 1, 1, 1, 1, 2, 0],
    "10": [0, 0, 0, 1] + [0] * 29 + [1, 0, 1, 0, 1, 0, 1],
    "11": [0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 1, 0, 0, 0, 0, 0,
           0, 0, 0, 0, 0, 1, 1, 1, 1, 1, 0, 1, 0],
    "2": [0] * 40,
    "3": [0, 0, 0, 2] + [0] * 29 + [1, 0, 2, 0, 1, 2, 0],
    "4": [0] * 32 + [1, 0, 1, 0, 0, 1, 2, 0],
    "5": [0, 0, 0, 0, 1, 1, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 4, 0, 0, 0, 3, 0, 0, 0, 0, 0,
          0, 0, 0, 0, 1, 2, 1, 3, 0, 1, 1, 1],
    "6": [0] * 35 + [1, 0, 0, 0, 0],
    "7": [0] * 40,
    "8": [0, 0, 2, 1] + [0] * 28 + [1, 2, 1, 2, 0, 1, 0, 1],
    "9": [0, 0, 0, 1] + [0] * 18 + [1] + [0] * 9 + [1, 1, 1, 1, 1, 0, 1, 0],
}

RAPHTORY_WINDOWED = {  # test_windowed_graph: before(11).after(0), δ = 10
    "1": [0] * 14 + [1] + [0] * 7 + [1] + [0] * 14 + [1, 1, 0],
    "3": [0, 0, 0, 2] + [0] * 33 + [1, 2, 0],
    "4": [0] * 37 + [1, 2, 0],
    "5": [0] * 38 + [1, 0],
    "2": [0] * 40, "6": [0] * 40, "7": [0] * 40, "8": [0] * 40,
}


def test_global_vector_equals_raphtory():
    counts = count_motifs(MOTIFS / "raphtory-global-motif-test.txt", [10], fmt="snap",
                          local=True)
    local = counts.local[:, 0].sum(axis=0)
    # stars are counted at their centre, two-node motifs at each end (as Raphtory's global
    # count sums them), triangles once: each is in three vertices' local counts
    got = np.concatenate([local[:32], local[32:] // 3])
    np.testing.assert_array_equal(got, RAPHTORY_GLOBAL)
    assert np.all(local[32:] % 3 == 0)
    assert counts.self_loops == 3


@pytest.mark.parametrize(("expected", "window"), [(RAPHTORY_LOCAL, None),
                                                  (RAPHTORY_WINDOWED, (0, 11))])
def test_local_vectors_equal_raphtory(expected, window):
    events = _events("raphtory-local-motif-test.txt")
    if window:
        events = [e for e in events if window[0] < e[2] < window[1]]
    counts = count_motifs(_table(events), [10], local=True)
    got = {v: counts.local[i, 0].tolist() for i, v in enumerate(counts.vertices)}
    assert {v: got[v] for v in expected} == expected


@pytest.mark.parametrize(("events", "index"), [
    ([(1, 2, 1), (3, 2, 2), (1, 3, 3)], 32), ([(1, 2, 1), (3, 1, 2), (2, 3, 3)], 36),
    ([(1, 2, 1), (2, 3, 2), (1, 3, 3)], 34), ([(1, 2, 1), (1, 3, 2), (2, 3, 3)], 38),
    ([(1, 2, 1), (3, 2, 2), (3, 1, 3)], 33), ([(1, 2, 1), (3, 1, 2), (3, 2, 3)], 37),
    ([(1, 2, 1), (2, 3, 2), (3, 1, 3)], 35), ([(1, 2, 1), (1, 3, 2), (3, 2, 3)], 39),
])
def test_each_triangle_lands_where_raphtory_puts_it(events, index):
    counts = count_motifs(_table(events), [3], local=True)
    expected = [0] * 40
    expected[index] = 1
    for v in ("1", "2", "3"):
        assert counts.local[counts.vertices.index(v), 0].tolist() == expected


def _random_events(rng: np.random.Generator) -> list[tuple[str, str, int]]:
    """Few vertices and times: ties, duplicate events and self-loops are common."""
    m = int(rng.integers(3, 22))
    nv = int(rng.integers(2, 6))
    events = [(str(rng.integers(nv)), str(rng.integers(nv)), int(rng.integers(8)))
              for _ in range(m)]
    events += [events[i] for i in rng.integers(0, m, int(rng.integers(0, 3)))]
    return [events[i] for i in rng.permutation(len(events))]


def assert_counts_equal_the_oracle(events: list, deltas: list) -> None:
    """Tables and per-vertex counts of ``events`` for every δ equal the brute force's."""
    counts = count_motifs(_table(events), deltas, local=True)
    oracle = Oracle(events)
    for i, delta in enumerate(deltas):
        np.testing.assert_array_equal(counts.tables[i], oracle.table(delta),
                                      err_msg=f"{events} δ={delta}")
        local = oracle.local(delta)
        for j, v in enumerate(counts.vertices):
            assert counts.local[j, i].tolist() == local[v], (events, delta, v)


def test_tables_and_local_counts_equal_brute_force():
    rng = np.random.default_rng(7)
    deltas = [0, 1, 3, 8]
    for _ in range(60):
        events = _random_events(rng)
        assert_counts_equal_the_oracle(events, deltas)


@pytest.mark.parametrize("threads", [1, 5])
def test_counts_spread_over_threads_equal_brute_force(monkeypatch, threads):
    # the counters' groups run in up to `threads` jobs, each with its own slices
    monkeypatch.setattr(motif_count, "_threads", lambda: threads)
    rng = np.random.default_rng(11 + threads)
    deltas = [0, 2, 8]
    for _ in range(15):
        nv = int(rng.integers(3, 8))
        events = [(str(rng.integers(nv)), str(rng.integers(nv)), int(rng.integers(12)))
                  for _ in range(int(rng.integers(10, 30)))]
        assert_counts_equal_the_oracle(events, deltas)


def test_text_names_are_ordered_as_text():
    events = [("b", "a", 1), ("a", "c", 1), ("c", "b", 1), ("a", "b", 2), ("x", "a", 1)]
    counts = count_motifs(_table(events), [5])
    np.testing.assert_array_equal(counts.tables[0], Oracle(events).table(5))


SAL_CELLS = {  # SAL query (strict times, distinct vertices) -> (cell, cells it also matches
    # when vertices may coincide)
    "x1 e1 x2; x2 e2 x3; x3 e3 x1;": ((1, 3), []),
    "x1 e1 x2; x3 e2 x2; x1 e3 x3;": ((0, 2), []),
    "x1 e1 x2; x1 e2 x3; x1 e3 x3;": ((3, 2), [(5, 0)]),
    "x1 e1 x2; x2 e2 x1; x1 e3 x3;": ((4, 2), [(4, 0)]),
    "x1 e1 x2; x1 e2 x2; x2 e3 x1;": ((5, 1), []),
}


@pytest.mark.parametrize("body", sorted(SAL_CELLS))
def test_cells_equal_sal_matches_on_distinct_times(body):
    """On distinct times SAL's strict order is the motif order: the isomorphic match
    count is the cell; the homomorphic one adds the cells where vertices coincide."""
    rng = np.random.default_rng(3)
    n = 300
    times = np.sort(rng.choice(20 * n, n, replace=False))
    events = [(str(rng.integers(6)), str(rng.integers(6)), int(t)) for t in times]
    events = [e for e in events if e[0] != e[1]]
    delta = 200
    query = parse_query("{ " + body + f" starttime(e3) - starttime(e1) <= {delta}; "
                      "starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }")
    table = count_motifs(_table(events), [delta]).tables[0]
    cell, merged = SAL_CELLS[body]
    iso = run_local(query, _table(events))[0].num_rows
    homo = run_local(query, _table(events), homomorphic=True)[0].num_rows
    assert iso == table[cell] > 0
    assert homo == table[cell] + sum(table[c] for c in merged)


def test_delta_is_exact_in_the_input_unit():
    assert delta_to_us("0.5") == 500_000
    assert delta_to_us(600, "ms") == 600_000
    for bad in ("-1", "x", "1e-9", "nan"):
        with pytest.raises(ValueError):
            delta_to_us(bad)
    with pytest.raises(ValueError):
        count_motifs(_table([("a", "b", 1)]), [])


def test_group_totals_equal_snap_program_on_tied_streams():
    """With many equal times SNAP's cells depend on its random pivots; its two-node,
    star and triangle totals do not, and equal ours."""
    for case in SNAP_TABLES["tied"]:
        expected = case["tables"]
        counts = count_motifs(_table(case["events"]), list(expected))
        for i, delta in enumerate(expected):
            snap = group_totals(np.array([expected[delta]]))
            for group in ("two_node", "stars", "triangles"):
                assert counts.totals[group][i] == snap[group][0], (group, delta)
