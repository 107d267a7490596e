"""DDST on real labelled data: the example queries over bundled slices, and io.labels.

Three slices in ``tests/fixtures/ddst`` (see the ``SOURCE-*.md`` notes there) are labelled
with :mod:`graphcep.io.labels` and run through :class:`DDSTBaselineEngine` with the example
queries of ``examples/ddst``. Each run is checked two ways, neither of them the engine:

* an *instance search* written here: a trigger is certainly reported when its edge is
  part of a plain instance of the query inside its window -- one distinct stream edge per
  query edge, endpoints mapped consistently, labels fitting, the timing order obeyed.
  Such an instance is a valid match graph on its own, so its edges are in the maximal
  one. DDST can match more (dual simulation lets a timing witness come from elsewhere in
  the match component), so the instance triggers are a subset of the reports;
* the brute-force oracle (``tests/ddst_oracle.py``), window by window: on every report
  the instance search does not explain, and on a fixed sample of the other reports and of
  silent windows -- on every window when the stream has few candidate edges.

The oracle sees only the window's *candidate* edges (labels fitting some query edge,
endpoint labels included). That is exact: any other edge can be in no edge pair, and a
vertex on no candidate edge fails the degree conditions, as every query vertex has an
edge. It keeps the oracle's enumerations small.
"""

from __future__ import annotations

import importlib.util
import random
import sys
from bisect import bisect_left
from collections.abc import Iterator
from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest

from graphcep.engines.ddst.baseline import DDSTBaselineEngine
from graphcep.events import in_stream_order, sort_stream
from graphcep.io.labels import (
    column_labels,
    constant_labels,
    merge_streams,
    port_class,
    read_vertex_labels,
    reverse_edges,
    service_labels,
    vertex_labels,
)
from graphcep.io.readers import FILE_INDEX_SHIFT, read_edges
from graphcep.lang.ddst import parse_ddst_file
from graphcep.patterns.ddst import DDSTQuery
from tests import ddst_oracle as oracle
from tests import paths

FIXTURES = paths.FIXTURES / "ddst"
EXAMPLES = paths.EXAMPLES / "ddst"
MATHOVERFLOW_KINDS = ("a2q", "c2q", "c2a")
SAMPLE = 10  # oracle windows per kind (instance-explained reports, silent windows)
ALL_WINDOWS = 60  # up to this many candidate edges, the oracle checks every window

Row = dict[str, object]


# -- the labelled streams -----------------------------------------------------------------


@cache
def mathoverflow() -> pa.Table:
    """a2q / c2q / c2a slices, each file's name as the edge label, merged in time order."""
    parts = [
        constant_labels(
            read_edges(FIXTURES / f"sx-mathoverflow-{kind}-slice.txt").edges, label=kind
        )
        for kind in MATHOVERFLOW_KINDS
    ]
    return merge_streams(parts)


@cache
def highschool() -> pa.Table:
    """Contacts with both people's classes, in both directions."""
    contacts = read_edges(FIXTURES / "highschool_2012-slice.txt").edges
    classes = read_vertex_labels(FIXTURES / "highschool_2012-classes.tsv")
    labelled = vertex_labels(contacts, classes)
    return merge_streams([labelled, reverse_edges(labelled)])


@cache
def netflow() -> pa.Table:
    """Netflows labelled protocol/port class, in stream order."""
    return sort_stream(service_labels(read_edges(FIXTURES / "ctu13_botnet-slice.csv").edges))


STREAMS = {
    "answered_then_commented": mathoverflow,
    "class_spread": highschool,
    "irc_then_mail": netflow,
}


@cache
def run_example(name: str) -> tuple[DDSTQuery, list[Row], dict[int, tuple]]:
    """The example query, its stream as rows, and the engine's reports by trigger seq."""
    query = parse_ddst_file(EXAMPLES / f"{name}.ddst")
    stream = STREAMS[name]()
    out = DDSTBaselineEngine(query).push(stream)
    return query, as_rows(stream), {r["trigger_seq"]: _pairs(r) for r in out.to_pylist()}


def as_rows(stream: pa.Table) -> list[Row]:
    """Edges as the oracle's dicts; an absent label column is all null."""
    names = ("t", "seq", "src", "dst", "label", "src_label", "dst_label")
    absent = [None] * stream.num_rows
    cols = [stream.column(n).to_pylist() if n in stream.column_names else absent for n in names]
    return [dict(zip(names, vals, strict=True)) for vals in zip(*cols, strict=True)]


def _pairs(report: Row) -> tuple[frozenset, frozenset]:
    vertices = frozenset((v["qvar"], v["vertex"], v["label"]) for v in report["vertices"])
    return vertices, frozenset((e["qedge"], e["seq"]) for e in report["edges"])


# -- independent checks -------------------------------------------------------------------


def fits(wanted: str | None, given: object) -> bool:
    return wanted is None or wanted == given


def fitting_edges(query: DDSTQuery, row: Row) -> list[str]:
    """The query edges a stream edge fits by its label and its endpoints' labels."""
    return [
        q.name
        for q in query.edges
        if fits(q.label, row["label"])
        and fits(query.vertex(q.src).label, row["src_label"])
        and fits(query.vertex(q.dst).label, row["dst_label"])
    ]


def candidates(query: DDSTQuery, rows: list[Row]) -> list[Row]:
    """The rows fitting some query edge, in stream order."""
    return [r for r in rows if fitting_edges(query, r)]


def window_at(query: DDSTQuery, rows: list[Row], times: list[int], k: int) -> list[Row]:
    """The time window ending at row ``k`` (rows in stream order, ``times`` their t)."""
    assert query.window.kind == "time"
    return rows[bisect_left(times, times[k] - query.window.size) : k + 1]


def ends_of(row: Row) -> tuple[tuple, tuple]:
    """The stream vertices an edge joins: ``(id, label)`` of its source and destination."""
    return (row["src"], row["src_label"]), (row["dst"], row["dst_label"])


def _extend(
    query: DDSTQuery, window: list[tuple[Row, list[str]]], chosen: dict[str, Row], ends: dict
) -> bool:
    """Backtracking: can ``chosen`` grow into an instance of the whole query?"""
    if len(chosen) == len(query.edges):
        return all(chosen[a]["t"] < chosen[b]["t"] for a, b in query.closure())
    q = next(e for e in query.edges if e.name not in chosen and (e.src in ends or e.dst in ends))
    used = {r["seq"] for r in chosen.values()}
    for row, fitting in window:
        src, dst = ends_of(row)
        if (
            q.name in fitting
            and row["seq"] not in used
            and ends.get(q.src, src) == src
            and ends.get(q.dst, dst) == dst
            and _extend(query, window, {**chosen, q.name: row}, {**ends, q.src: src, q.dst: dst})
        ):
            return True
    return False


def instance_triggers(query: DDSTQuery, rows: list[Row]) -> set[int]:
    """Seqs of the edges that complete a plain instance of the query in their window."""
    cands = candidates(query, rows)
    times = [r["t"] for r in cands]
    fitting = [fitting_edges(query, r) for r in cands]
    found = set()
    for k, row in enumerate(cands):
        lo = bisect_left(times, times[k] - query.window.size)
        window = list(zip(cands[lo : k + 1], fitting[lo : k + 1], strict=True))
        src, dst = ends_of(row)
        for q in fitting[k]:
            q_ends = {query.edge(q).src: src, query.edge(q).dst: dst}
            if (len(q_ends) == 2 or src == dst) and _extend(query, window, {q: row}, q_ends):
                found.add(row["seq"])
                break
    return found


def oracle_positions(
    query: DDSTQuery, cands: list[Row], reports: dict, explained: set[int]
) -> Iterator[int]:
    """Window positions for the oracle: every unexplained report, then samples (or all)."""
    if len(cands) <= ALL_WINDOWS:
        yield from range(len(cands))
        return
    pick = random.Random(0)
    position = {r["seq"]: k for k, r in enumerate(cands)}
    unexplained = sorted(set(reports) - explained)
    known = sorted(explained)
    silent = [k for k, r in enumerate(cands) if r["seq"] not in reports]
    yield from (position[s] for s in unexplained)
    yield from (position[s] for s in pick.sample(known, min(SAMPLE, len(known))))
    yield from pick.sample(silent, min(SAMPLE, len(silent)))


def oracle_report(query: DDSTQuery, window: list[Row]) -> tuple[frozenset, frozenset] | None:
    """What the oracle says the window's newest edge must report (None: nothing)."""
    newest = window[-1]["seq"]
    s, se = oracle.component_of(window, oracle.match_graph(query, window), newest)
    return (s, se) if se else None


# -- the example queries on real data ---------------------------------------------------


EXPECTED = {  # reports on the bundled slices; instance-explained reports
    "answered_then_commented": (40, 39),
    "class_spread": (124, 124),
    "irc_then_mail": (14, 14),
}


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_example_query_matches_real_data(name: str):
    query, rows, reports = run_example(name)
    explained = instance_triggers(query, rows)
    assert explained <= set(reports), "an instance's newest edge was not reported"
    assert (len(reports), len(explained)) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(STREAMS))
def test_example_query_equals_oracle(name: str):
    query, rows, reports = run_example(name)
    cands = candidates(query, rows)
    times = [r["t"] for r in cands]
    checked = 0
    for k in oracle_positions(query, cands, reports, instance_triggers(query, rows)):
        window = window_at(query, cands, times, k)
        assert reports.get(cands[k]["seq"]) == oracle_report(query, window), f"window at {k}"
        checked += 1
    assert checked >= min(2 * SAMPLE, len(cands))


def test_reports_lie_in_their_windows_and_show_the_pattern():
    for name in STREAMS:
        query, rows, reports = run_example(name)
        by_seq = {r["seq"]: r for r in rows}
        for trigger, (vertices, edges) in reports.items():
            t_end = by_seq[trigger]["t"]
            assert all(t_end - query.window.size <= by_seq[s]["t"] <= t_end for _, s in edges)
            assert {q for q, _ in edges} == set(query.edge_names)
            assert {u for u, _, _ in vertices} == set(query.vertex_names)


def test_irc_then_mail_finds_the_botnet_host():
    _, _, reports = run_example("irc_then_mail")
    hosts = {v for vertices, _ in reports.values() for u, v, _ in vertices if u == "H"}
    assert hosts == {"147.32.84.165"}  # the Neris-infected host of the capture


def test_class_spread_crosses_from_pc_to_pc_star():
    _, _, reports = run_example("class_spread")
    for vertices, _ in reports.values():
        assert {(u, lab) for u, _, lab in vertices} == {
            ("A", "PC"), ("B", "PC"), ("C", "PC*"), ("D", "PC*")
        }  # fmt: skip


# -- the fixtures -------------------------------------------------------------------------


def _make_fixtures():
    spec = importlib.util.spec_from_file_location("make_fixtures", FIXTURES / "make_fixtures.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    try:
        spec.loader.exec_module(module)
    finally:
        del sys.modules[spec.name]
    return module


def test_fixture_slices_are_what_the_script_cuts():
    """Each bundled slice is its own cut (every line inside the interval), at the
    line counts its SOURCE note gives."""
    make = _make_fixtures()
    counts = {s.target: n for s, n in zip(make.SLICES, (183, 235, 360, 647, 832), strict=True)}
    for s in make.SLICES:
        data = (FIXTURES / s.target).read_bytes()
        assert make.cut(FIXTURES, replace(s, source=s.target)) == data
        assert data.count(b"\n") == counts[s.target]
    assert (FIXTURES / make.CLASSES_TARGET).read_text().count("\n") == 180


def test_class_table_agrees_with_the_classes_written_in_the_contacts():
    contacts = read_edges(FIXTURES / "highschool_2012-slice.txt").edges  # i j t Ci Cj
    labelled = vertex_labels(contacts, read_vertex_labels(FIXTURES / "highschool_2012-classes.tsv"))
    assert labelled.column("src_label").equals(labelled.column("c3"))
    assert labelled.column("dst_label").equals(labelled.column("c4"))


# -- io.labels ------------------------------------------------------------------------------


def edges(n: int, **columns: list) -> pa.Table:
    return pa.table({"t": list(range(n)), "src": ["a"] * n, "dst": ["b"] * n, **columns})


def test_constant_labels_sets_overwrites_and_leaves_alone():
    t = constant_labels(edges(2, label=["x", None]), label="y", dst_label="user")
    assert t.column("label").to_pylist() == ["y", "y"]
    assert t.column("dst_label").to_pylist() == ["user", "user"]
    assert "src_label" not in t.column_names
    assert constant_labels(edges(0), label="y").column("label").type == pa.string()


def test_vertex_labels_unknown_ids_get_null_or_default():
    t = pa.table({"src": ["1", "2", "9"], "dst": ["9", "1", "2"]})
    got = vertex_labels(t, {"1": "PC", 2: "PC*"})
    assert got.column("src_label").to_pylist() == ["PC", "PC*", None]
    assert got.column("dst_label").to_pylist() == [None, "PC", "PC*"]
    filled = vertex_labels(t, pa.table({"id": [1, 2], "c": ["PC", "PC*"]}), default="?")
    assert filled.column("src_label").to_pylist() == ["PC", "PC*", "?"]
    assert vertex_labels(t, {}).column("src_label").null_count == 3
    only_dst = vertex_labels(t, {"9": "x"}, ends=("dst",))
    assert only_dst.column_names == ["src", "dst", "dst_label"]


def test_vertex_labels_duplicates():
    t = pa.table({"src": ["1"], "dst": ["2"]})
    same = vertex_labels(t, pa.table({"id": ["1", "1", "2"], "label": ["a", "a", "b"]}))
    assert same.column("src_label").to_pylist() == ["a"]
    with pytest.raises(ValueError, match="'1' is given several labels"):
        vertex_labels(t, pa.table({"id": ["1", "1"], "label": ["a", "b"]}))
    with pytest.raises(ValueError, match="several labels"):
        vertex_labels(t, pa.table({"id": ["1", "1"], "label": ["a", None]}))


def test_read_vertex_labels_with_header_and_names(tmp_path: Path):
    path = tmp_path / "people.csv"
    path.write_text("name,role,id\nann,admin,7\nbob,user,8\n")
    got = read_vertex_labels(path, delimiter=",", id_column="id", label_column="role", header=True)
    assert got.to_pylist() == [{"id": "7", "label": "admin"}, {"id": "8", "label": "user"}]


def test_column_labels():
    t = edges(4, kind=[1, 2, None, 3])
    assert column_labels(t, "kind").column("label").to_pylist() == ["1", "2", None, "3"]
    mapped = column_labels(t, "kind", {1: "a", 3: "c"}, default="other", target="src_label")
    assert mapped.column("src_label").to_pylist() == ["a", "other", "other", "c"]
    text = column_labels(edges(2, kind=["1", "2"]), "kind", {1: "a"})
    assert text.column("label").to_pylist() == ["a", None]


def test_port_class_and_service_labels():
    assert port_class(pa.array([0, 1023, 1024, 49151, 49152, 65535, 65536, -1])).to_pylist() == [
        "system", "system", "registered", "registered", "dynamic", "dynamic", "none", "none"
    ]  # fmt: skip
    flows = edges(5, prot=[6, 17, 1, 47, None], dstport=[80, 53, 0, 0, 80])
    assert service_labels(flows).column("label").to_pylist() == [
        "tcp/web", "udp/dns", "icmp", "47", None
    ]  # fmt: skip
    with pytest.raises(KeyError, match="IpLayerProtocolCode"):
        service_labels(edges(1))


def test_service_labels_on_netflow_slice():
    values, n = np.unique(netflow().column("label").to_numpy(False), return_counts=True)
    counts = dict(zip(values.tolist(), n.tolist(), strict=True))
    assert counts["tcp/mail"] > 0 and counts["tcp/irc"] > 0 and counts["udp/dns"] > 0
    assert sum(counts.values()) == 832


def test_reverse_edges_twice_is_the_identity():
    t = edges(2, src_label=["x", None], label=["l", "m"])
    back = reverse_edges(t)
    assert back.column("dst").to_pylist() == ["a", "a"]
    assert back.column("dst_label").to_pylist() == ["x", None]
    assert "src_label" not in back.column_names
    assert reverse_edges(back).select(t.column_names).equals(t)


def test_merge_ties_follow_table_order_and_seq_stays_unique():
    a = pa.table({"t": [5, 5, 1], "src": ["a1", "a2", "a0"], "dst": ["x"] * 3, "seq": [1, 2, 3]})
    b = pa.table({"t": [5, 0], "src": ["b1", "b0"], "dst": ["x"] * 2, "seq": [1, 2]})
    m = merge_streams([a, constant_labels(b, label="b")])
    assert m.column("src").to_pylist() == ["b0", "a0", "a1", "a2", "b1"]
    seq = np.asarray(m.column("seq"))
    assert len(set(seq.tolist())) == m.num_rows and in_stream_order(m)
    assert (seq >> FILE_INDEX_SHIFT).tolist() == [1, 0, 0, 0, 1]
    assert (seq & ((1 << FILE_INDEX_SHIFT) - 1)).tolist() == [2, 3, 1, 2, 1]
    assert m.column("label").to_pylist() == ["b", None, None, None, "b"]


def test_merge_rejects_bad_seq_and_nothing():
    t = pa.table({"t": [1, 2], "src": ["a", "b"], "dst": ["b", "a"]})
    with pytest.raises(ValueError, match="not unique"):
        merge_streams([t.append_column("seq", pa.array([3, 3]))])
    with pytest.raises(ValueError, match="2\\*\\*40"):
        merge_streams([t, merge_streams([t, t])])
    with pytest.raises(ValueError, match="nothing"):
        merge_streams([])
    assert merge_streams([t.slice(0, 0), t]).num_rows == 2


def test_merged_stream_feeds_the_engine_in_batches():
    query, _, reports = run_example("answered_then_commented")
    stream = mathoverflow()
    engine = DDSTBaselineEngine(query)
    got = [engine.push(stream.slice(i, 100)) for i in range(0, stream.num_rows, 100)]
    assert {s for out in got for s in out.column("trigger_seq").to_pylist()} == set(reports)
