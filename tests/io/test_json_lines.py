"""Column-built JSON lines (:mod:`graphcep.io.json_lines`) against the row-by-row writer
and against the values themselves (parsed back exactly)."""

from __future__ import annotations

import json
from decimal import Decimal

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.events import MATCH_SCHEMA, US_PER_SECOND, format_seconds
from graphcep.io.json_lines import sal_json_lines, seconds_text
from graphcep.io.sinks import JsonlSink, match_to_json

NAMES = st.text(alphabet=st.sampled_from(['a', 'b', '"', '\\', '\n', '\x01', 'é', '😀', ' ']),
                max_size=4)
TIMES = st.integers(min_value=-(10**15), max_value=10**15)


@st.composite
def matches(draw) -> list[dict]:
    rows = []
    for _ in range(draw(st.integers(0, 6))):
        variables = sorted(set(draw(st.lists(NAMES, max_size=4))))
        edges = [{"var": draw(NAMES), "t": draw(TIMES), "src": draw(NAMES),
                  "dst": draw(NAMES), "dur": draw(st.integers(0, 10**12)),
                  "seq": draw(st.integers(-(2**40), 2**40))}
                 for _ in range(draw(st.integers(0, 4)))]
        rows.append({"query": draw(NAMES), "match_id": draw(NAMES), "first_t": draw(TIMES),
                     "last_t": draw(TIMES),
                     "bindings": [(v, draw(NAMES)) for v in variables], "edges": edges})
    return rows


@settings(max_examples=300, deadline=None)
@given(matches(), st.integers(0, 3))
def test_lines_equal_the_row_writer_and_parse_back_exactly(rows, cut):
    table = pa.Table.from_pylist(rows, schema=MATCH_SCHEMA)
    table = table.slice(min(cut, table.num_rows))  # sliced tables start mid-buffer
    lines = sal_json_lines(table)
    assert lines == [match_to_json(row) for row in table.to_pylist()]
    for line, row in zip(lines, table.to_pylist(), strict=True):
        parsed = json.loads(line, parse_float=Decimal)
        assert Decimal(parsed["first_t"]) * US_PER_SECOND == row["first_t"]
        assert parsed["bindings"] == dict(row["bindings"])
        assert [(e["src"], e["dst"], Decimal(e["t"]) * US_PER_SECOND, e["seq"])
                for e in parsed["edges"]] == [(e["src"], e["dst"], e["t"], e["seq"])
                                              for e in row["edges"]]


@given(st.lists(TIMES, max_size=50))
def test_seconds_text_is_format_seconds(values):
    assert seconds_text(pa.array(values, pa.int64())).to_pylist() == [
        format_seconds(v) for v in values]


@pytest.mark.parametrize("row_change", [
    {"bindings": [("x2", "a"), ("x1", "b")]},  # keys out of order: the row writer sorts
    {"bindings": None},
    {"edges": None},
])
def test_what_the_columns_do_not_cover_is_written_row_by_row(row_change, tmp_path):
    row = {"query": "q", "match_id": "m", "first_t": 1, "last_t": 2,
           "bindings": [("x1", "a")],
           "edges": [{"var": "e1", "t": 1, "src": "a", "dst": "b", "dur": 0, "seq": 0}]}
    row.update(row_change)
    table = pa.Table.from_pylist([row], schema=MATCH_SCHEMA)
    assert sal_json_lines(table) is None
    with JsonlSink(tmp_path / "m.jsonl") as sink:
        sink.write(table)
    assert (tmp_path / "m.jsonl").read_text() == match_to_json(table.to_pylist()[0]) + "\n"


@pytest.mark.parametrize("kernel", [True, False])
@pytest.mark.parametrize("count", [1, 3])
def test_a_part_joined_from_encoded_pieces_holds_their_bytes_in_order(tmp_path, monkeypatch,
                                                                      kernel, count):
    """``write_encoded`` makes the part of one piece a hard link and copies several in the
    kernel; where neither can be had (``kernel`` False: no links, ``sendfile`` failing
    half-way) it copies through a buffer. The part is the pieces' bytes in order either
    way, and stays whole once the pieces are deleted, as the driver deletes them."""
    import os

    from graphcep.io import sinks

    if not kernel:
        def no_link(*args):
            raise OSError(18, "Invalid cross-device link")

        def half(out_fd, in_fd, offset, count):
            if offset:
                raise OSError(22, "Invalid argument")
            return real_sendfile(out_fd, in_fd, offset, max(1, count // 2))

        real_sendfile = os.sendfile
        monkeypatch.setattr(sinks.os, "link", no_link)
        monkeypatch.setattr(sinks.os, "sendfile", half)
    texts = [("".join(f'{{"piece": {p}, "line": {i}}}\n' for i in range(50_000 + p)))
             for p in range(count)]
    pieces = []
    for number, text in enumerate(texts):
        path = tmp_path / f"piece-{number}"
        path.write_text(text)
        pieces.append((str(path), text.count("\n")))
    sink = JsonlSink(tmp_path / "out", directory=True)
    assert sink.write_encoded(pieces, 7) == sum(rows for _, rows in pieces)
    for path, _ in pieces:
        os.unlink(path)
    part = next((tmp_path / "out").glob("part-*7*"))
    assert part.read_text() == "".join(texts)
    assert [p.name for p in (tmp_path / "out").iterdir()] == [part.name]  # no temporary left
