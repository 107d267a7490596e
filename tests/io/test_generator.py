"""Synthetic netflow generator, planted patterns and edge writers."""

from __future__ import annotations

from collections import Counter
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.events import US_PER_SECOND
from graphcep.io.formats import VAST_ATTRIBUTES
from graphcep.io.generator import (
    arrival_times,
    generate_netflow,
    generate_planted,
    output_format,
    write_edges,
    write_vast_csv,
)
from graphcep.io.readers import read_edges


def test_same_seed_same_table_other_seed_other_table() -> None:
    a = generate_netflow(2000, 50, 100, seed=11)
    b = generate_netflow(2000, 50, 100, seed=11)
    c = generate_netflow(2000, 50, 100, seed=12)
    assert a.equals(b)
    assert not a.column("src").equals(c.column("src"))
    assert a.column("t").equals(c.column("t"))  # times depend on the rate only


def test_schema_and_plausible_attributes() -> None:
    table = generate_netflow(1000, 10, 5, seed=1)
    expected = ["t", "src", "dst", "dur", "seq"] + [n for n, _ in VAST_ATTRIBUTES if n != "Label"]
    assert table.column_names == expected
    assert table.column("seq").to_pylist() == list(range(1, 1001))
    assert set(table.column("dur").to_pylist()) == {US_PER_SECOND}
    rows = table.to_pylist()
    assert {(r["IpLayerProtocol"], r["IpLayerProtocolCode"]) for r in rows} == {
        (6, "tcp"),
        (17, "udp"),
    }
    for r in rows:
        assert 0 <= r["SourcePort"] <= 65535 and 0 <= r["DestPort"] <= 65535
        assert r["SrcTotalBytes"] == r["SrcPayloadBytes"] + 40 * r["FirstSeenSrcPacketCount"]
        assert r["FirstSeenDestPacketCount"] >= 1
    assert rows[0]["ParseDate"] == "1970-01-01 00:00:00" and rows[0]["DateTime"] == "19700101000000"
    assert rows[-1]["ParseDate"] == "1970-01-01 00:03:19"  # edge 999 at 199.8 s


def test_no_self_loops_and_uniform_endpoints() -> None:
    vertices, n = 20, 200_000
    table = generate_netflow(n, vertices, 1000, seed=5)
    src = np.array([int(s[4:]) for s in table.column("src").to_pylist()])
    dst = np.array([int(s[4:]) for s in table.column("dst").to_pylist()])
    assert not (src == dst).any()
    assert set(src) == set(dst) == set(range(vertices))
    for ends in (src, dst):
        counts = np.bincount(ends, minlength=vertices)
        expected = n / vertices
        chi2 = ((counts - expected) ** 2 / expected).sum()
        assert chi2 < 60  # 19 degrees of freedom: p < 1e-5 beyond this
    # Given the source, the destination is uniform over the other vertices.
    pairs = Counter(zip(src.tolist(), dst.tolist(), strict=True))
    row = np.array([pairs[(0, d)] for d in range(1, vertices)])
    assert row.min() > 0.7 * row.mean() and row.max() < 1.3 * row.mean()


@pytest.mark.parametrize("rate", [1, 4, 1000, 250_000, 1_000_000])
def test_times_exact_when_rate_divides(rate: int) -> None:
    t = generate_netflow(5000, 5, rate, seed=0).column("t").to_numpy()
    i = np.arange(5000)
    assert (t * rate == i * US_PER_SECOND).all()


@settings(max_examples=100, deadline=None)
@given(
    st.one_of(
        st.integers(min_value=1, max_value=10**7),
        st.fractions(min_value=Fraction(1, 1000), max_value=10**7),
        st.decimals(min_value="0.001", max_value="1e6", places=4).map(str),
    ),
    st.integers(min_value=0, max_value=10**6),
)
def test_arrival_times_round_half_even(rate, start: int) -> None:
    n = 50
    values = arrival_times(n, rate, start)
    exact_rate = Fraction(rate) if not isinstance(rate, str) else Fraction(rate)
    if exact_rate <= 0:
        return
    expected = [start + round(Fraction(i * US_PER_SECOND) / exact_rate) for i in range(n)]
    assert values.tolist() == expected


def test_float_rate_means_its_decimal() -> None:
    # 0.3 edges/s: edge i at i / 0.3 s = 3.333... s exactly rounded, not binary 0.3.
    assert arrival_times(4, 0.3).tolist() == [0, 3_333_333, 6_666_667, 10_000_000]
    assert arrival_times(3, 3).tolist() == [0, 333_333, 666_667]
    with pytest.raises(ValueError):
        arrival_times(3, 0)


def test_start_time_exact() -> None:
    table = generate_netflow(3, 4, 2, seed=0, start_s="1312964022.93089")
    assert table.column("t").to_pylist() == [
        1_312_964_022_930_890,
        1_312_964_023_430_890,
        1_312_964_023_930_890,
    ]


def test_vast_round_trip(tmp_path: Path) -> None:
    table = generate_netflow(5000, 300, "33.3", seed=9, start_s=-5)
    write_vast_csv(table, tmp_path / "flows.csv")
    first = (tmp_path / "flows.csv").read_text().splitlines()[0].split(",")
    assert len(first) == 19 and first[0] == "-5" and first[11] == "1"
    result = read_edges(tmp_path / "flows.csv")
    assert result.fmt == "vast" and result.rejects.num_rows == 0
    assert result.edges.equals(table)


def test_vast_writer_fills_missing_attributes_and_label(tmp_path: Path) -> None:
    plain = pa.table({"t": [1_500_000], "src": ["a"], "dst": ["b"]})
    write_vast_csv(plain, tmp_path / "p.csv")
    line = (tmp_path / "p.csv").read_text().strip().split(",")
    assert line[:3] == ["1.5", "1970-01-01 00:00:01", "19700101000001"] and line[5:7] == ["a", "b"]
    labelled = generate_netflow(10, 5, 1, seed=2).append_column("Label", pa.array([1] * 10))
    write_vast_csv(labelled, tmp_path / "l.csv")
    back = read_edges(tmp_path / "l.csv").edges
    assert back.equals(labelled)


def test_writers_reject_separators_in_names(tmp_path: Path) -> None:
    table = pa.table({"t": [0], "src": ["a b"], "dst": ["c,d"]})
    with pytest.raises(ValueError):
        write_edges(table, tmp_path / "x.txt", "snap")
    with pytest.raises(ValueError):
        write_edges(table, tmp_path / "x.csv", "vast")
    with pytest.raises(ValueError):
        write_edges(table, tmp_path / "x.bin", "excel")


def test_output_format() -> None:
    assert output_format("a.csv") == "vast"
    assert output_format("a.parquet") == "parquet"
    assert output_format("a.ndjson.gz") == "jsonl"
    assert output_format("a.txt") == "snap"


# ---------------------------------------------------------------------------------------
# Planted patterns
# ---------------------------------------------------------------------------------------


def edges_by_seq(table: pa.Table) -> dict[int, dict]:
    return {r["seq"]: r for r in table.to_pylist()}


def brute_force_triangles(table: pa.Table, window: int) -> set[tuple[int, int, int]]:
    """All (a->b, b->c, c->a) edge triples at strictly increasing times within ``window``."""
    rows = table.to_pylist()
    found = set()
    for e1 in rows:
        for e2 in rows:
            if e2["src"] != e1["dst"] or not e1["t"] < e2["t"]:
                continue
            for e3 in rows:
                if (
                    e3["src"] == e2["dst"]
                    and e3["dst"] == e1["src"]
                    and e2["t"] < e3["t"]
                    and e3["t"] - e1["t"] <= window
                    and len({e1["src"], e1["dst"], e2["dst"]}) == 3
                ):
                    found.add((e1["seq"], e2["seq"], e3["seq"]))
    return found


def test_planted_triangles_exact() -> None:
    planted = generate_planted("triangle", 6, window_s=10, seed=4)
    assert len(planted.instances) == 6
    assert brute_force_triangles(planted.table, 10 * US_PER_SECOND) == set(planted.instances)
    t = planted.table.column("t").to_numpy()
    assert (np.diff(t) >= 0).all()
    assert planted.table.column("seq").to_pylist() == list(range(1, 19))


def test_planted_triangles_with_noise_on_disjoint_vertices() -> None:
    planted = generate_planted(
        "triangle", 5, window_s=3, noise_edges=400, noise_vertices=30, seed=8
    )
    table = planted.table
    assert table.num_rows == 15 + 400
    rows = edges_by_seq(table)
    for instance in planted.instances:
        a, b, c = (rows[s] for s in instance)
        assert (a["dst"], b["dst"], c["dst"]) == (b["src"], c["src"], a["src"])
        assert a["t"] < b["t"] < c["t"] and c["t"] - a["t"] <= 3 * US_PER_SECOND
        assert all(
            v.startswith(f"{a['src'].split('_')[0]}_") for v in (a["src"], b["src"], c["src"])
        )
    plant = [r for r in rows.values() if r["src"].startswith("plant")]
    noise = [r for r in rows.values() if r["src"].startswith("noise")]
    assert len(plant) == 15 and len(noise) == 400
    assert all(r["dst"].startswith("noise") for r in noise)
    assert all(r["src"] != r["dst"] for r in noise)
    plant_table = pa.Table.from_pylist(plant)
    assert brute_force_triangles(plant_table, 3 * US_PER_SECOND) == set(planted.instances)


def test_planted_watering_holes() -> None:
    planted = generate_planted("watering_hole", 20, window_s=20, seed=3)
    rows = edges_by_seq(planted.table)
    for bait_seq, control_seq in planted.instances:
        bait, control = rows[bait_seq], rows[control_seq]
        assert bait["src"] == control["src"] and bait["dst"].endswith("_bait")
        assert control["dst"].endswith("_controller")
        assert control["t"] > bait["t"] + bait["dur"]  # starts after the bait edge ends
        assert control["t"] - bait["t"] <= 20 * US_PER_SECOND


def test_planted_fan_in() -> None:
    planted = generate_planted("fan_in", 4, window_s=5, fan=5, seed=1)
    rows = edges_by_seq(planted.table)
    for instance in planted.instances:
        edges = [rows[s] for s in instance]
        assert len({e["dst"] for e in edges}) == 1 and len({e["src"] for e in edges}) == 5
        times = [e["t"] for e in edges]
        assert times == sorted(set(times)) and times[-1] - times[0] <= 5 * US_PER_SECOND


def test_planted_reproducible_and_checked() -> None:
    a = generate_planted("triangle", 3, noise_edges=10, seed=2)
    b = generate_planted("triangle", 3, noise_edges=10, seed=2)
    assert a.table.equals(b.table) and a.instances == b.instances
    with pytest.raises(ValueError):
        generate_planted("square", 1)


@pytest.mark.parametrize("name", ["p.parquet", "p.jsonl", "p.txt", "p.csv"])
def test_planted_streams_written_and_read_back(tmp_path: Path, name: str) -> None:
    planted = generate_planted("triangle", 3, window_s="0.5", seed=6)
    write_edges(planted.table, tmp_path / name)
    back = read_edges(tmp_path / name).edges
    assert back.column("t").equals(planted.table.column("t"))
    assert back.column("src").equals(planted.table.column("src"))
    assert back.column("seq").equals(planted.table.column("seq"))
