"""Vertex interning against its definition: every name gets one dense id, numbered by
first appearance (the first column's new names, then the second's), whether a long
column is encoded whole or in pieces on threads."""

from __future__ import annotations

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.engines import vertex_ids
from graphcep.engines.vertex_ids import VertexIds

names = st.lists(st.sampled_from([f"v{i}" for i in range(12)] + ["", "é", "a b"]),
                 max_size=60)


def first_appearance(batches: list[list[list[str]]]) -> dict[str, int]:
    """The id each name must get: the order names first occur, batch by batch, column by
    column within a batch."""
    order: dict[str, int] = {}
    for batch in batches:
        for column in batch:
            for name in column:
                order.setdefault(name, len(order))
    return order


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(names, names), min_size=1, max_size=4), st.integers(1, 7),
       st.booleans(), st.booleans(), st.sampled_from([0, 2, 10**9]),
       st.sampled_from([-1, 50, 10**9]))
def test_ids_number_names_by_first_appearance_in_pieces_or_whole(
        batches, piece_rows, threads, chunked, dict_ratio, intern_rows):
    with pytest.MonkeyPatch.context() as patch:  # pieces of a few rows: many pieces
        patch.setattr(vertex_ids, "PIECE_ROWS", piece_rows)
        patch.setattr(vertex_ids, "THREADED_ROWS", 0)  # threads even for a few rows
        # 0: known names looked up in the dict whenever there are any; 10**9: by Arrow
        patch.setattr(vertex_ids, "DICT_LOOKUP_RATIO", dict_ratio)
        patch.setattr(vertex_ids, "INTERN_ROWS", intern_rows)  # name by name, or Arrow
        check(batches, threads, chunked)


def check(batches, threads: bool, chunked: bool) -> None:
    ids = VertexIds()
    want = first_appearance([list(b) for b in batches])
    for src, dst in batches:
        columns = [pa.chunked_array([c[:3], c[3:]], pa.string()) if chunked
                   else pa.array(c, pa.string()) for c in (src, dst)]
        got = ids.encode_many(columns, threads=threads)
        assert [g.tolist() for g in got] == [[want[n] for n in src], [want[n] for n in dst]]
        assert [ids.names(g).tolist() for g in got] == [src, dst]
    assert len(ids) == len(want)


@pytest.mark.parametrize("dict_ratio", [0, 10**9])
@pytest.mark.parametrize("intern_rows", [-1, 10**9])
def test_a_restored_state_numbers_on_as_the_original(dict_ratio, intern_rows, monkeypatch):
    """Names added over many small pushes, saved with ``known()`` and restored, give the
    same ids as the original for old and new names (the state is the names by id)."""
    monkeypatch.setattr(vertex_ids, "DICT_LOOKUP_RATIO", dict_ratio)
    monkeypatch.setattr(vertex_ids, "INTERN_ROWS", intern_rows)
    pushes = [[f"h{i % 7}", f"n{i}"] for i in range(20)]
    ids = VertexIds()
    for push in pushes:
        ids.encode(pa.array(push))
    want = first_appearance([[p] for p in pushes])
    assert ids.known().to_pylist() == list(want)
    restored = VertexIds.from_state(ids.known())
    later = pa.array(["n3", "fresh", "h2", "fresh2"])
    assert restored.encode(later).tolist() == ids.encode(later).tolist() == \
        [want["n3"], len(want), want["h2"], len(want) + 1]
