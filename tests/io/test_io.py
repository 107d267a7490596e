"""Readers, exact time parsing, rejects and sinks of :mod:`graphcep.io`."""

from __future__ import annotations

import gzip
import hashlib
import io
import json
import shutil
from datetime import UTC, datetime
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.events import (
    MATCH_SCHEMA,
    Match,
    MatchedEdge,
    TimeFormatError,
    format_seconds,
    matches_to_table,
    normalize_edges,
    seconds_to_us,
)
from graphcep.io.flat_columns import integer_times, timestamp_schema
from graphcep.io.formats import (
    REJECT_SCHEMA,
    VAST_FIELDS,
    ReaderOptions,
    column_to_us,
    decimal_to_us,
    edge_schema,
    format_seconds_array,
    iso_to_us,
    parse_lines,
    parse_table,
    prepare_options,
    resolve_field,
    scalar_to_us,
)
from graphcep.io.generator import generate_netflow, write_edges
from graphcep.io.readers import FILE_INDEX_SHIFT, guess_format, iter_line_blocks, read_edges
from graphcep.io.rejects import RejectLog, reason_kind
from graphcep.io.sinks import ConsoleSink, JsonlSink, ParquetSink, make_sink, match_to_json
from tests.paths import FIXTURES

CTU = FIXTURES / "ctu13_vast_sample.csv"


def parse(lines: list[str], fmt: str, options: ReaderOptions | None = None):
    return parse_lines(pa.array(lines, pa.string()), np.arange(1, len(lines) + 1), fmt, options)


def write(path: Path, text: str | bytes) -> Path:
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return path


def us(text: str, unit: str = "s") -> int:
    values, errors = decimal_to_us(pa.array([text], pa.string()), unit)
    if errors:
        raise TimeFormatError(errors[0])
    return int(values[0])


# ---------------------------------------------------------------------------------------
# Exact time conversion
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("1312964022.93089", 1_312_964_022_930_890),
        ("9.8399999999998347", 9_840_000),
        ("0.0000025", 2),  # half-even: down to even
        ("0.0000035", 4),  # half-even: up to even
        ("0.00000250001", 3),  # above the half
        ("-0.0000025", -2),
        ("-0.0000005", 0),
        ("-1312964022.5", -1_312_964_022_500_000),
        (".5", 500_000),
        ("5.", 5_000_000),
        ("+7", 7_000_000),
        ("  12.25 ", 12_250_000),
        ("1e3", 1_000_000_000),  # exponent: exact slow path
        ("-2.5e-6", -2),
        ("1_0", 10_000_000),  # Decimal accepts digit grouping, so do we
    ],
)
def test_decimal_seconds_exact(text: str, expected: int) -> None:
    assert us(text) == expected
    assert seconds_to_us(text) == expected


@pytest.mark.parametrize("text", ["abc", "", "-", ".", "nan", "inf", "-Infinity", "1e400", "1.2.3"])
def test_decimal_seconds_rejects(text: str) -> None:
    with pytest.raises(TimeFormatError):
        us(text)


def test_time_units() -> None:
    assert us("1500", "ms") == 1_500_000
    assert us("1.0005", "ms") == 1_000  # 1000.5 us rounds half-even to 1000
    assert us("1.0015", "ms") == 1_002
    assert us("1312964022930890", "us") == 1_312_964_022_930_890
    assert us("2.5", "us") == 2
    with pytest.raises(ValueError):
        us("1", "fortnights")


decimal_strings = st.builds(
    lambda sign, whole, frac, dot: f"{sign}{whole}{'.' if dot else ''}{frac if dot else ''}",
    st.sampled_from(["", "-", "+"]),
    st.from_regex(r"\d{0,13}", fullmatch=True),
    st.from_regex(r"\d{0,14}", fullmatch=True),
    st.booleans(),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(decimal_strings, min_size=1, max_size=20))
def test_vectorized_agrees_with_seconds_to_us(texts: list[str]) -> None:
    values, errors = decimal_to_us(pa.array(texts, pa.string()))
    for i, text in enumerate(texts):
        try:
            expected = seconds_to_us(text)
        except TimeFormatError:
            assert i in errors
        else:
            assert i not in errors
            assert values[i] == expected


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=12), min_size=1, max_size=10))
def test_arbitrary_text_agrees_with_seconds_to_us(texts: list[str]) -> None:
    values, errors = decimal_to_us(pa.array(texts, pa.string()))
    for i, text in enumerate(texts):
        try:
            expected = seconds_to_us(text)
        except (TimeFormatError, ArithmeticError):
            assert i in errors
        else:
            assert i not in errors and values[i] == expected


@settings(max_examples=200, deadline=None)
@given(
    st.from_regex(r"-?\d{1,12}\.\d{20,60}", fullmatch=True),
)
def test_long_fractions_exact(text: str) -> None:
    # Beyond 28 significant digits only an exact rational reference is trustworthy.
    assert us(text) == round(Fraction(Decimal(text)) * 1_000_000)


@settings(max_examples=300, deadline=None)
@given(st.floats(allow_nan=False, allow_infinity=False, min_value=-4e12, max_value=4e12))
def test_float_columns_agree_with_seconds_to_us(value: float) -> None:
    values, errors = column_to_us(pa.array([value], pa.float64()), ReaderOptions())
    assert not errors
    assert values[0] == seconds_to_us(value)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.integers(min_value=-(2**62) + 1, max_value=2**62 - 1), max_size=30))
def test_format_seconds_array_matches_format_seconds(values: list[int]) -> None:
    out = format_seconds_array(np.array(values, dtype=np.int64)).to_pylist()
    assert out == [format_seconds(v) for v in values]


def test_iso_times() -> None:
    texts = [
        "2011-08-10T02:13:42Z",
        "2011-08-10 02:13:42",
        "2011-08-10T02:13:42.1234565+02:00",
        "2011-08-10T04:13",
        "2011-08-10",
        "1969-12-31T23:59:59.9999995Z",
        "2011-02-30T00:00:00",
        "yesterday",
    ]
    values, errors = iso_to_us(pa.array(texts))
    base = int(datetime(2011, 8, 10, 2, 13, 42, tzinfo=UTC).timestamp()) * 1_000_000
    assert values[0] == base
    assert values[1] == base
    assert values[2] == base - 2 * 3600 * 1_000_000 + 123_456
    assert values[3] == base + (2 * 3600 - 42) * 1_000_000
    assert values[4] == int(datetime(2011, 8, 10, tzinfo=UTC).timestamp()) * 1_000_000
    assert values[5] == 0  # rounds half-even up to the epoch
    assert set(errors) == {6, 7}


def test_scalar_to_us_bounds_without_huge_arithmetic() -> None:
    with pytest.raises(TimeFormatError, match="out of range"):
        scalar_to_us("1e999999999")
    assert scalar_to_us("1e-999999999") == 0
    assert scalar_to_us("-0e5") == 0


# ---------------------------------------------------------------------------------------
# Real sample: CTU-13 in VAST layout
# ---------------------------------------------------------------------------------------


def test_ctu13_sample_parses_completely() -> None:
    result = read_edges(CTU)
    edges = result.edges
    assert result.fmt == "vast"
    assert (edges.num_rows, result.rejects.num_rows, result.lines_read, result.skipped) == (
        2000,
        0,
        2000,
        0,
    )
    assert edges.column_names[:5] == ["t", "src", "dst", "dur", "seq"]
    assert edges.column("seq").to_pylist() == list(range(1, 2001))
    assert edges.column("Label").to_pylist() == [0] * 2000
    first = edges.slice(0, 1).to_pylist()[0]
    assert first["t"] == 1_312_964_022_930_890
    assert (first["src"], first["dst"]) == ("95.153.177.13", "147.32.84.59")
    assert first["dur"] == 1_419_550
    assert first["IpLayerProtocol"] == 6 and first["IpLayerProtocolCode"] == "tcp"
    assert (first["SourcePort"], first["DestPort"]) == (35049, 6881)
    assert (first["SrcTotalBytes"], first["DestTotalBytes"]) == (124, 120)
    assert first["ParseDate"] == "2011-08-10 02:13:42" and first["DateTime"] == "201181021342"
    row400 = edges.slice(399, 1).to_pylist()[0]  # icmp flow, port 100000 = missing
    assert row400["IpLayerProtocolCode"] == "icmp" and row400["DestPort"] == 100000
    assert row400["dur"] == 6_010_391
    last = edges.slice(1999, 1).to_pylist()[0]
    assert last["t"] == 1_312_963_841_907_466 and last["dur"] == 190
    assert (last["src"], last["dst"], last["DestPort"]) == ("147.32.84.138", "147.32.80.9", 53)
    protocols = edges.column("IpLayerProtocolCode").to_pylist()
    assert (protocols.count("udp"), protocols.count("tcp"), protocols.count("icmp")) == (
        1726,
        251,
        23,
    )
    assert min(edges.column("t").to_pylist()) == 1_312_962_413_540_761
    ips = set(edges.column("src").to_pylist()) | set(edges.column("dst").to_pylist())
    assert len(ips) == 1418


def test_ctu13_sample_same_in_small_chunks() -> None:
    whole = read_edges(CTU).edges
    chunked = read_edges(CTU, options=ReaderOptions(chunk_bytes=777)).edges
    assert chunked.equals(whole)


def test_vast_19_fields_and_header(tmp_path: Path) -> None:
    lines = CTU.read_text().splitlines()[:3]
    nineteen = [ln.split(",", 1)[1] for ln in lines]
    header = ",".join(name for name, _ in VAST_FIELDS)
    path = write(tmp_path / "flows.csv", "\n".join([header, *nineteen]) + "\n")
    result = read_edges(path)
    assert result.fmt == "vast"
    assert result.edges.num_rows == 3 and result.skipped == 1
    assert "Label" not in result.edges.column_names  # no line had one
    assert result.edges.column("seq").to_pylist() == [2, 3, 4]
    labelled = read_edges(CTU).edges.slice(0, 3).drop_columns(["Label", "seq"])
    assert result.edges.drop_columns(["seq"]).equals(labelled)


def test_vast_parse_lines_schema_is_fixed() -> None:
    edges, rejects = parse(["garbage"], "vast")
    assert edges.schema == edge_schema("vast")
    assert rejects.schema == REJECT_SCHEMA


# ---------------------------------------------------------------------------------------
# Malformed input
# ---------------------------------------------------------------------------------------

GOOD = ["a b 1", "b c 2.5", "c a 1312964022.93089"]


def malformed_snap_file(tmp_path: Path) -> tuple[Path, dict[int, str], dict[int, str]]:
    """A snap file mixing good lines with every kind of bad one.

    Returns the path, {line: src of the good edge} and {line: expected reason kind}.
    """
    lines: list[bytes] = []
    good: dict[int, str] = {}
    bad: dict[int, str] = {}

    def add(raw: bytes, kind: str | None = None, src: str | None = None) -> None:
        lines.append(raw)
        if kind:
            bad[len(lines)] = kind
        if src:
            good[len(lines)] = src

    add(b"# a comment")
    add(b"g1 h 1", src="g1")
    add(b"x y", "missing fields")
    add(b"g2 h 2.5", src="g2")
    add(b"x y abc", "not a number")
    add(b"")
    add(b"x y nan", "not a finite number")
    add(b"x y inf", "not a finite number")
    add(b"x y 1e300", "out of range")
    add(b"\xff\xfe\x00junk \x80", "invalid UTF-8")
    add(b"g3 h 1312964022.93089", src="g3")
    add(b"x " * (1 << 20) + b"1", "line longer than max_line_bytes")
    add(b"x y 3 extra", "too many fields")
    add(b"   ")
    add(b"g4 h -7\r", src="g4")
    add(b"% other comment")
    add(b"g5 h 9.8399999999998347", src="g5")
    return write(tmp_path / "mixed.txt", b"\n".join(lines) + b"\n"), good, bad


@pytest.mark.parametrize("chunk_bytes", [8 << 20, 4096])
def test_malformed_lines_all_accounted(tmp_path: Path, chunk_bytes: int) -> None:
    path, good, bad = malformed_snap_file(tmp_path)
    result = read_edges(path, "snap", ReaderOptions(chunk_bytes=chunk_bytes))
    edges = result.edges
    assert (
        dict(zip(edges.column("seq").to_pylist(), edges.column("src").to_pylist(), strict=True))
        == good
    )
    rejects = {r["line"]: r for r in result.rejects.to_pylist()}
    assert set(rejects) == set(bad)
    for line, kind in bad.items():
        assert reason_kind(rejects[line]["reason"]) == kind, rejects[line]
        assert len(rejects[line]["text"]) <= 200
        assert rejects[line]["file"] == str(path)
    assert result.lines_read == 17
    assert result.skipped == 4  # two comments, two blank lines
    assert edges.column("t").to_pylist() == [
        1_000_000,
        2_500_000,
        1_312_964_022_930_890,
        -7_000_000,
        9_840_000,
    ]
    assert rejects[5]["reason"] == "field 3 (t): not a number: 'abc'"


def test_strict_empty_lines_are_rejects() -> None:
    edges, rejects = parse(["a b 1", "", "  "], "snap", ReaderOptions(strict_empty=True))
    assert edges.num_rows == 1
    assert rejects.to_pylist() == [
        {"line": 2, "reason": "empty line", "text": ""},
        {"line": 3, "reason": "empty line", "text": "  "},
    ]


def test_vast_malformed(tmp_path: Path) -> None:
    good = CTU.read_text().splitlines()[:2]
    fields = good[0].split(",")
    bad_time = ",".join([fields[0], "12:00", *fields[2:]])
    bad_port = ",".join([*fields[:8], "http", *fields[9:]])
    empty_src = ",".join([*fields[:6], "", *fields[7:]])
    negative_dur = ",".join([*fields[:12], "-1.5", *fields[13:]])
    text = "\n".join(
        [good[0], "1,2,3", bad_time, bad_port, empty_src, negative_dur, good[1] + ",9"]
    )
    result = read_edges(write(tmp_path / "v.csv", text), "vast")
    assert result.edges.column("seq").to_pylist() == [1]
    reasons = {r["line"]: r["reason"] for r in result.rejects.to_pylist()}
    assert reasons == {
        2: "missing fields: expected 19 or 20 fields, got 3",
        3: "field 2 (TimeSeconds): not a number: '12:00'",
        4: "field 9 (SourcePort): not an integer: 'http'",
        5: "field 7 (SourceIp): empty vertex id",
        6: "field 13 (DurationSeconds): negative duration: '-1.5'",
        7: "too many fields: expected 19 or 20 fields, got 21",
    }


def test_line_blocks_cut_overlong_lines_while_reading() -> None:
    data = b"a b 1\n" + b"z" * 50_000 + b"\nc d 2"
    blocks = list(iter_line_blocks(io.BytesIO(data), chunk_bytes=1000, max_line_bytes=100))
    lines = [x for arr, _ in blocks for x in arr.to_pylist()]
    numbers = [x for _, nums in blocks for x in nums.tolist()]
    assert lines == [b"a b 1", b"z" * 101, b"c d 2"]
    assert numbers == [1, 2, 3]


# ---------------------------------------------------------------------------------------
# Formats
# ---------------------------------------------------------------------------------------


def test_csv_header_mapping_and_attribute_types(tmp_path: Path) -> None:
    text = 'time,from,to,weight,note\n1.5,a,b,3,"x, y"\n2,b,c,,plain\n3,c,a,z,bad\n'
    options = ReaderOptions(
        columns={"t": "time", "src": "from", "dst": "to"}, attribute_types={"weight": "int64"}
    )
    result = read_edges(write(tmp_path / "e.csv", text), options=options)
    assert result.fmt == "csv"
    assert result.edges.to_pylist() == [
        {"t": 1_500_000, "src": "a", "dst": "b", "dur": 0, "seq": 2, "weight": 3, "note": "x, y"},
        {
            "t": 2_000_000,
            "src": "b",
            "dst": "c",
            "dur": 0,
            "seq": 3,
            "weight": None,
            "note": "plain",
        },
    ]
    assert result.rejects.column("reason").to_pylist() == ["field 4 (weight): not an integer: 'z'"]
    assert result.skipped == 1


def test_csv_defaults_and_headerless() -> None:
    with_names = parse(["src,dst,t,dur", "a,b,1,0.5"], "csv")[0]
    assert with_names.to_pylist() == [
        {"t": 1_000_000, "src": "a", "dst": "b", "dur": 500_000, "seq": 2}
    ]
    positional = parse(["a,b,1,x", "c,d,2,y", "e,f,3"], "csv")
    assert positional[0].column_names == ["t", "src", "dst", "dur", "seq", "c3"]
    assert positional[0].column("seq").to_pylist() == [1, 2]
    assert positional[1].column("reason").to_pylist() == [
        "missing fields: expected 4 fields, got 3"
    ]


def test_tsv_iso_times() -> None:
    options = ReaderOptions(time_format="iso")
    edges, rejects = parse(
        ["src\tdst\tt", "a\tb\t2011-08-10T02:13:42.5Z", "a\tb\tnope"], "tsv", options
    )
    assert edges.column("t").to_pylist() == [1_312_942_422_500_000]
    assert rejects.column("line").to_pylist() == [3]


def test_snap_column_remap_and_units() -> None:
    options = ReaderOptions(columns={"t": 0, "src": 1, "dst": 2}, time_unit="ms")
    edges, _ = parse(["1500 a b", "20 b c"], "snap", options)
    assert edges.select(["t", "src", "dst"]).to_pylist() == [
        {"t": 1_500_000, "src": "a", "dst": "b"},
        {"t": 20_000, "src": "b", "dst": "c"},
    ]


def test_snap_layout_fixed_by_first_data_line() -> None:
    edges, rejects = parse(["# header comment", "a b 1 X", "a b 2", "a b 3 Y Z"], "snap")
    assert edges.column("c3").to_pylist() == ["X", None]
    assert rejects.column("reason").to_pylist() == [
        "too many fields: expected 3 or 4 fields, got 5"
    ]


def test_chunks_agree_with_prepared_options() -> None:
    lines = ["t,src,dst,w", "1,a,b,x", "2,b,c,y", "3,c,a,z"]
    options = prepare_options("csv", lines)
    whole = parse(lines, "csv", options)[0]
    head = parse_lines(pa.array(lines[:2]), np.array([1, 2]), "csv", options)[0]
    tail = parse_lines(pa.array(lines[2:]), np.array([3, 4]), "csv", options)[0]
    assert pa.concat_tables([head, tail]).equals(whole)
    assert whole.schema == edge_schema("csv", options)


def test_jsonl(tmp_path: Path) -> None:
    text = "\n".join(
        [
            '{"t": 1312964022.93089, "src": "a", "dst": "b", "port": 80, "tag": "x"}',
            '{"t": "2.5", "src": 1, "dst": 2, "dur": 0.25}',
            '{"t": 3, "src": "a"',
            '{"t": 3, "src": "a"}',
            "[1, 2]",
            '{"t": "soon", "src": "a", "dst": "b"}',
            '{"t": 4, "src": "a", "dst": "b", "port": "eighty"}',
        ]
    )
    options = ReaderOptions(attribute_types={"port": "int64"})
    result = read_edges(write(tmp_path / "e.jsonl", text), options=options)
    assert result.edges.to_pylist() == [
        {
            "t": 1_312_964_022_930_890,
            "src": "a",
            "dst": "b",
            "dur": 0,
            "seq": 1,
            "port": 80,
            "tag": "x",
        },
        {
            "t": 2_500_000,
            "src": "1",
            "dst": "2",
            "dur": 250_000,
            "seq": 2,
            "port": None,
            "tag": None,
        },
    ]
    kinds = [reason_kind(r) for r in result.rejects.column("reason").to_pylist()]
    assert kinds == [
        "invalid JSON",
        "missing field dst",
        "not a JSON object",
        "not a number",
        "not an integer",
    ]
    assert result.rejects.column("line").to_pylist() == [3, 4, 5, 6, 7]


def test_netflow5() -> None:
    # unix_secs=1000000000, unix_nsecs=500, sysuptime=10000 ms, First=4000, Last=6500.
    record = "1000000000,500,10000,10.0.0.1,5,600,4000,6500,0,0,1.1.1.1,2.2.2.2,0.0.0.0,1,2,1234,80,6,0,24,8,16,64512,64513"
    wrapped = "1000000000,0,100,10.0.0.1,5,600,4294967196,50,0,0,1.1.1.1,2.2.2.2,0.0.0.0,1,2,1234,80,6,0,24,8,16,1,2"
    header = "unix_secs,unix_nsecs,sysuptime,exaddr"
    bad = "1000000000,2000000000,100,10.0.0.1,5,600,4,50,0,0,1.1.1.1,2.2.2.2,0.0.0.0,1,2,1234,80,6,0,24,8,16,1,2"
    edges, rejects = parse([header, record, wrapped, bad, "1,2,3"], "netflow5")
    rows = edges.to_pylist()
    # 1e9 s + 500 ns - 6 s = 999999994.0000005 s -> half-even at the microsecond -> ...994.000000
    assert rows[0]["t"] == 999_999_994_000_000
    assert rows[0]["dur"] == 2_500_000
    assert (rows[0]["src"], rows[0]["dst"], rows[0]["srcport"], rows[0]["dstport"]) == (
        "1.1.1.1",
        "2.2.2.2",
        1234,
        80,
    )
    # First 100 ms before the uptime counter wrapped: 200 ms ago; 150 ms long.
    assert rows[1]["t"] == 999_999_999_800_000 and rows[1]["dur"] == 150_000
    assert edges.schema == edge_schema("netflow5")
    assert [reason_kind(r) for r in rejects.column("reason").to_pylist()] == [
        "out of range",
        "missing fields",
    ]
    assert resolve_field("netflow5", "SourcePort") == "srcport"


def test_resolve_field() -> None:
    assert resolve_field("vast", "SourceIp") == "src"
    assert resolve_field("vast", "timeseconds") == "t"
    assert resolve_field("vast", "DestPort") == "DestPort"
    assert resolve_field("netflow5", "dstaddr") == "dst"
    assert resolve_field(None, "DurationSeconds") == "dur"
    assert resolve_field("snap", "SourceIp") == "SourceIp"


def test_parquet_columns_of_every_time_type(tmp_path: Path) -> None:
    stamps = pa.array(
        [1_312_964_022_930_890_500, 1_312_964_022_930_891_500, None], pa.timestamp("ns", "UTC")
    )
    table = pa.table(
        {
            "when": stamps,
            "SourceIp": ["a", "b", "c"],
            "DestIp": ["b", "", "a"],
            "bytes": [1, 2, 3],
        }
    )
    pq.write_table(table, tmp_path / "e.parquet")
    result = read_edges(tmp_path / "e.parquet", options=ReaderOptions(columns={"t": "when"}))
    assert result.fmt == "parquet"
    assert result.edges.to_pylist() == [
        {"t": 1_312_964_022_930_890, "src": "a", "dst": "b", "dur": 0, "seq": 1, "bytes": 1}
    ]
    reasons = {r["line"]: r["reason"] for r in result.rejects.to_pylist()}
    assert reasons == {
        2: "field DestIp (dst): missing or empty vertex id",
        3: "field when (t): missing value",
    }
    floats = parse_table(
        pa.table({"t": [0.1, 1312964022.93089], "src": ["a", "b"], "dst": ["b", "c"]})
    )[0]
    assert floats.column("t").to_pylist() == [100_000, 1_312_964_022_930_890]
    micro = parse_table(pa.table({"t": [5, 6], "src": ["a", "b"], "dst": ["b", "c"]}))[0]
    assert micro.column("t").to_pylist() == [5, 6]  # integer `t` is already microseconds
    secs = parse_table(
        pa.table({"time": [5], "src": ["a"], "dst": ["b"]}), ReaderOptions(columns={"t": "time"})
    )[0]
    assert secs.column("t").to_pylist() == [5_000_000]


# ---------------------------------------------------------------------------------------
# Round trips, files, gzip
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "name", ["g.csv", "g.csv.gz", "g.txt", "g.txt.gz", "g.jsonl", "g.parquet", "g.tsv"]
)
def test_round_trip_every_format(tmp_path: Path, name: str) -> None:
    table = generate_netflow(300, 20, "7.3", seed=3, start_s="1312964022.93089")
    fmt = {"g.tsv": "csv"}.get(name)
    write_edges(table, tmp_path / name, fmt)
    options = None
    if name.endswith(".jsonl"):
        options = ReaderOptions(
            attribute_types={
                n: "int64"
                for n, t in zip(table.column_names, table.schema.types, strict=True)
                if t == pa.int64()
            }
        )
    result = read_edges(tmp_path / name, "csv" if name == "g.tsv" else None, options)
    assert result.rejects.num_rows == 0
    back = result.edges
    if name.startswith("g.txt"):
        expected = table.select(["t", "src", "dst"])
        assert back.select(["t", "src", "dst"]).equals(expected)
        assert back.column("dur").to_pylist() == [0] * 300
    elif name == "g.tsv":  # a csv file under another name: header line shifts seq by one
        assert (
            back.drop_columns(["seq"])
            .select(["t", "src", "dst", "dur"])
            .equals(table.select(["t", "src", "dst", "dur"]))
        )
        assert back.column("seq").to_pylist() == list(range(2, 302))
    else:
        assert back.equals(table), name


def test_gzip_detected_by_magic(tmp_path: Path) -> None:
    path = tmp_path / "no_suffix"
    path.write_bytes(gzip.compress(b"a b 1\nb c 2\n"))
    assert read_edges(path).edges.num_rows == 2


def test_multiple_files_and_directories(tmp_path: Path) -> None:
    (tmp_path / "d").mkdir()
    write(tmp_path / "d" / "1.txt", "a b 1\nb c 2\n")
    write(tmp_path / "d" / "2.txt", "c a 3\nbad\n")
    result = read_edges(tmp_path / "d")
    assert result.edges.column("seq").to_pylist() == [1, 2, (1 << FILE_INDEX_SHIFT) + 1]
    assert result.rejects.column("file").to_pylist() == [str(tmp_path / "d" / "2.txt")]
    assert result.lines_read == 4


def test_guess_format(tmp_path: Path) -> None:
    assert guess_format(CTU) == "vast"
    assert guess_format(write(tmp_path / "x.csv", "a,b,1\n")) == "csv"
    assert guess_format("x.ndjson") == "jsonl"
    assert guess_format("x.parquet") == "parquet"
    assert guess_format("x.tsv.gz") == "tsv"
    assert guess_format("email.txt.gz") == "snap"


def test_empty_file(tmp_path: Path) -> None:
    result = read_edges(write(tmp_path / "e.txt", ""))
    assert (result.edges.num_rows, result.lines_read, result.skipped) == (0, 0, 0)
    assert result.edges.column_names[:5] == ["t", "src", "dst", "dur", "seq"]


# ---------------------------------------------------------------------------------------
# Rejects
# ---------------------------------------------------------------------------------------


def test_reject_log(tmp_path: Path) -> None:
    _, rejects = parse(["a b x", "a b", "a b y", "ok ok 1"], "snap")
    log = RejectLog(tmp_path / "rejects.jsonl")
    log.add(rejects, file="in.txt")
    log.add(rejects.slice(0, 0))
    assert log.count == 3
    assert (
        log.summary()
        == f"3 lines rejected: 2 × not a number, 1 × missing fields; see {tmp_path / 'rejects.jsonl'}"
    )
    written = log.write()
    rows = [json.loads(x) for x in written.read_text().splitlines()]
    assert rows[0] == {
        "file": "in.txt",
        "line": 1,
        "reason": "field 3 (t): not a number: 'x'",
        "text": "a b x",
    }
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert RejectLog().summary() == "no lines rejected"


def test_reject_log_accepts_read_results(tmp_path: Path) -> None:
    result = read_edges(write(tmp_path / "e.txt", "a b 1\na b\n"))
    log = RejectLog()
    log.add(result.rejects)
    assert log.table().column("file").to_pylist() == [str(tmp_path / "e.txt")]
    assert log.summary() == "1 line rejected: 1 × missing fields"


# ---------------------------------------------------------------------------------------
# Sinks
# ---------------------------------------------------------------------------------------


def sample_matches() -> pa.Table:
    edges = (
        MatchedEdge("e1", 12_500_000, "node3", "node9", 1_000_000, 17),
        MatchedEdge("e2", 1_312_964_022_930_890, "node9", "node4", 0, 18),
    )
    m1 = Match(
        "triangle", (("x1", "node3"), ("x2", "node9")), edges, 12_500_000, 1_312_964_022_930_890
    )
    m2 = Match("triangle", (("x1", "a"), ("x2", "b")), edges[:1], 12_500_000, 12_500_000)
    return matches_to_table([m1, m2])


def test_console_sink_limit() -> None:
    out = io.StringIO()
    with ConsoleSink(out, limit=1) as sink:
        sink.write(sample_matches())
    text = out.getvalue()
    assert "query=triangle" in text
    assert "bindings: x1=node3 x2=node9" in text
    assert "e1: node3 -> node9 @ 12.5s" in text
    assert "e2: node9 -> node4 @ 1312964022.93089s" in text
    assert "x1=a" not in text
    assert text.endswith("... and 1 more match not shown (2 in all)\n")


def test_console_counts_one_hidden_match_and_one_edge_pair_in_the_singular() -> None:
    from graphcep.io.sinks import CONSOLE_EDGE_PAIRS, format_ddst_match

    out = io.StringIO()
    with ConsoleSink(out, limit=0) as sink:
        sink.write(sample_matches().slice(0, 1))
    assert out.getvalue() == "... and 1 more match not shown (1 in all)\n"
    edges = [{"qedge": "ab", "seq": i, "t": i, "src": "a", "dst": "b", "label": None,
              "src_label": None, "dst_label": None} for i in range(CONSOLE_EDGE_PAIRS + 1)]
    row = {"query": "q", "match_id": "m", "window_start": 0, "window_end": 5, "trigger_seq": 1,
           "first_t": 0, "vertices": [], "edges": edges}
    last = format_ddst_match(row, 1).splitlines()[-1]
    assert last == "  ... and 1 more edge pair (all of them in -o FILE.jsonl|.parquet|.dot)"


def test_an_empty_ddst_label_is_no_label_on_the_console_and_in_pictures() -> None:
    """An empty CSV field gives an empty label: shown like none (``a``, not ``a:``; no
    ``[]`` after an edge)."""
    from graphcep.io.sinks import ddst_match_drawing, format_ddst_match

    edges = [{"qedge": "AB", "seq": 2, "t": 1_000_000, "src": "a", "dst": "b", "label": "",
              "src_label": "", "dst_label": "M"},
             {"qedge": "BC", "seq": 3, "t": 2_000_000, "src": "b", "dst": "c", "label": "x",
              "src_label": None, "dst_label": None}]
    vertices = [{"qvar": "A", "vertex": "a", "label": ""},
                {"qvar": "B", "vertex": "b", "label": "M"},
                {"qvar": "C", "vertex": "c", "label": None}]
    row = {"query": "q", "match_id": "m", "window_start": 0, "window_end": 2_000_000,
           "trigger_seq": 3, "first_t": 1_000_000, "vertices": vertices, "edges": edges}
    assert format_ddst_match(row, 1).splitlines()[1:] == [
        "  A -> a", "  B -> b:M", "  C -> c", "  AB: a -> b @ 1s  seq=2",
        "  BC: b -> c [x] @ 2s  seq=3"]
    drawing = ddst_match_drawing(row)
    assert sorted(text for text, _ in drawing.nodes.values()) == ["a", "b", "b:M", "c"]
    assert [text for _, _, text, _ in drawing.edges] == ["AB", "BC [x]"]


def test_a_match_without_bindings_says_so_on_the_console() -> None:
    """A ν-expression of constants only (a . b) binds nothing: '(none)', not a blank."""
    from graphcep.io.sinks import format_match

    row = {"query": "ab", "match_id": "m", "first_t": 0, "last_t": 1_000_000, "bindings": [],
           "edges": [{"var": "a", "t": 0, "src": "a", "dst": "", "dur": 0, "seq": 1}]}
    assert format_match(row, 1).splitlines()[1] == "  bindings: (none)"


def test_jsonl_sink_exact_numbers(tmp_path: Path) -> None:
    table = sample_matches()
    with JsonlSink(tmp_path / "m.jsonl") as sink:
        sink.write(table)
    lines = (tmp_path / "m.jsonl").read_text().splitlines()
    first = json.loads(lines[0], parse_float=Decimal)
    assert first["last_t"] == Decimal("1312964022.93089")
    assert first["edges"][0] == {
        "var": "e1",
        "t": Decimal("12.5"),
        "src": "node3",
        "dst": "node9",
        "dur": 1,
        "seq": 17,
    }
    assert first["bindings"] == {"x1": "node3", "x2": "node9"}
    assert first["match_id"] == table.column("match_id")[0].as_py()
    assert json.loads(match_to_json(table.to_pylist()[1]))["edges"][0]["t"] == 12.5


def test_parquet_sink_round_trip(tmp_path: Path) -> None:
    table = sample_matches()
    with ParquetSink(tmp_path / "m.parquet") as sink:
        sink.write(table.slice(0, 1))
        sink.write(table.slice(1, 1))
    back = pq.read_table(tmp_path / "m.parquet")
    assert back.schema.metadata[b"graphcep.time_unit"] == b"us"
    # match times are timestamps in the file; as µs again they are the table written
    assert back.schema.field("first_t").type == pa.timestamp("us", tz="UTC")
    assert integer_times(back).replace_schema_metadata(None).equals(table)


@pytest.mark.parametrize("cls, suffix", [(JsonlSink, ".jsonl"), (ParquetSink, ".parquet")])
def test_directory_sinks_replace_batches(tmp_path: Path, cls, suffix: str) -> None:
    table = sample_matches()
    target = tmp_path / "out"
    sink = cls(str(target) + "/")
    sink.write(table, batch_id=0)
    sink.write(table.slice(0, 1), batch_id=1)
    sink.write(table.slice(0, 1), batch_id=0)  # a retried batch replaces its file
    sink.write(table)  # no id: next free number
    sink.close()
    names = sorted(p.name for p in target.iterdir())
    assert names == [f"part-0000000{i}{suffix}" for i in range(3)]
    if suffix == ".jsonl":
        counts = [len((target / n).read_text().splitlines()) for n in names]
    else:
        counts = [pq.read_table(target / n).num_rows for n in names]
    assert counts == [1, 1, 2]


@pytest.mark.parametrize("suffix", [".jsonl", ".parquet", ".dot"])
def test_a_whole_file_sink_replaces_its_target_only_when_complete(tmp_path: Path,
                                                                  suffix: str) -> None:
    target = tmp_path / f"m{suffix}"
    target.write_text("earlier\n")
    with pytest.raises(KeyboardInterrupt), make_sink(target, whole=True) as sink:
        sink.write(sample_matches())  # then Ctrl-C, before the sink is closed
        raise KeyboardInterrupt
    assert target.read_text() == "earlier\n"
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    with make_sink(target, whole=True) as sink:
        sink.write(sample_matches())
        assert target.read_text() == "earlier\n"  # until it is closed
    assert [p.name for p in tmp_path.iterdir()] == [target.name]
    ids = sample_matches().column("match_id").to_pylist()
    if suffix == ".parquet":
        assert pq.read_table(target).column("match_id").to_pylist() == ids
    elif suffix == ".jsonl":
        assert [json.loads(line)["match_id"] for line in target.read_text().splitlines()] == ids
    else:
        text = target.read_text()
        assert text.startswith("digraph") and text.endswith("}\n")
        assert [i for i in ids if f"id={i}" in text] == ids


def test_file_sink_ignores_repeated_batch(tmp_path: Path) -> None:
    with JsonlSink(tmp_path / "m.jsonl") as sink:
        sink.write(sample_matches(), batch_id=7)
        sink.write(sample_matches(), batch_id=7)
    assert len((tmp_path / "m.jsonl").read_text().splitlines()) == 2


def test_make_sink(tmp_path: Path) -> None:
    assert isinstance(make_sink("-"), ConsoleSink)
    assert isinstance(make_sink(None), ConsoleSink)
    assert isinstance(make_sink(tmp_path / "a.jsonl"), JsonlSink)
    parquet_dir = make_sink(str(tmp_path / "b.parquet") + "/")
    assert isinstance(parquet_dir, ParquetSink) and parquet_dir.directory
    with pytest.raises(ValueError):
        make_sink(tmp_path / "c.unknown")
    empty = make_sink(tmp_path / "empty.parquet")
    empty.close()
    assert pq.read_table(tmp_path / "empty.parquet").schema.remove_metadata() == \
        timestamp_schema(MATCH_SCHEMA)


def test_fixture_matches_its_source_note() -> None:
    # SOURCE-ctu13.md documents this checksum; a changed fixture must update the note.
    digest = hashlib.sha256(CTU.read_bytes()).hexdigest()
    assert digest in (FIXTURES / "SOURCE-ctu13.md").read_text()


def test_sinks_do_not_leave_temporary_files(tmp_path: Path) -> None:
    sink = JsonlSink(tmp_path / "d", directory=True)
    sink.write(sample_matches(), batch_id="a1")
    sink.close()
    assert [p.name for p in (tmp_path / "d").iterdir()] == ["part-a1.jsonl"]
    shutil.rmtree(tmp_path / "d")


@pytest.mark.parametrize("column", ["t", "src", "dst", "dur", "seq"])
def test_normalize_edges_rejects_nulls_in_core_columns(column: str) -> None:
    """A null time, vertex, duration or sequence number is named, with its first row --
    not cast to a wrong value."""
    cols = {"t": [1, 2, 3], "src": ["a", "b", "c"], "dst": ["b", "c", "a"], "dur": [0, 0, 0],
            "seq": [0, 1, 2]}  # fmt: skip
    cols[column] = [cols[column][0], None, None]
    with pytest.raises(ValueError, match=rf"2 null\(s\) in the required column '{column}' "
                                         r"\(the first at row 1\)"):
        normalize_edges(pa.table(cols))
    assert normalize_edges(pa.table({"t": [1], "src": ["a"], "dst": ["b"]})).num_rows == 1


def test_console_cuts_large_ddst_components_and_says_how_much() -> None:
    """A component of a dense stream holds thousands of pairs: the console shows the
    first CONSOLE_EDGE_PAIRS edge pairs and CONSOLE_VERTICES stream vertices per query
    vertex, and counts the rest; a small one is shown whole."""
    from graphcep.io.sinks import CONSOLE_EDGE_PAIRS, CONSOLE_VERTICES, format_ddst_match

    def row(n_edges: int) -> dict:
        edges = [{"qedge": "ab", "seq": i, "t": 1_000_000 * i, "src": f"u{i}", "dst": "hub",
                  "label": None, "src_label": None, "dst_label": None} for i in range(n_edges)]
        vertices = ([{"qvar": "A", "vertex": f"u{i}", "label": None} for i in range(n_edges)]
                    + [{"qvar": "B", "vertex": "hub", "label": "x"}])
        return {"query": "q", "match_id": "m", "window_start": 0, "window_end": 5_000_000,
                "trigger_seq": n_edges - 1, "first_t": 0, "vertices": vertices, "edges": edges}

    big = format_ddst_match(row(1000), 1).splitlines()
    assert big[0].endswith("(1001 vertex pairs, 1000 edge pairs)")
    shown = [f"u{i}" for i in range(CONSOLE_VERTICES)]
    assert big[1] == f"  A -> {', '.join(shown)}, ... ({1000 - CONSOLE_VERTICES:,} more)"
    assert big[2] == "  B -> hub:x"
    edge_lines = [line for line in big if line.startswith("  ab: ")]
    assert edge_lines[0] == "  ab: u0 -> hub @ 0s  seq=0"
    assert len(edge_lines) == CONSOLE_EDGE_PAIRS
    assert big[-1].startswith(f"  ... and {1000 - CONSOLE_EDGE_PAIRS:,} more edge pairs")
    small = format_ddst_match(row(3), 2)
    assert "more" not in small and small.count("  ab: ") == 3
