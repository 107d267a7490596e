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
       st.booleans(), st.booleans())
def test_ids_number_names_by_first_appearance_in_pieces_or_whole(
        batches, piece_rows, threads, chunked):
    with pytest.MonkeyPatch.context() as patch:  # pieces of a few rows: many pieces
        patch.setattr(vertex_ids, "PIECE_ROWS", piece_rows)
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
