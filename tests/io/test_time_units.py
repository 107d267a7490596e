"""Times in the wrong unit are never read silently shifted.

Property: a random stream of epoch times (1990 to 2100), written in seconds,
milliseconds, microseconds or ISO-8601, in CSV or (integers) in Parquet without
graphcep's unit metadata, read with and without its unit, is either read exactly (every
time the microseconds the stream holds) or refused in one message naming the right
``--time-unit``. Never edges at other times. The expected times are the generated ones,
not the reader's output.

Out of the property, by design: relative times (a stream starting near 0) in a finer unit
than assumed read as no epoch time in any unit, and are accepted as written
(:func:`~graphcep.io.formats.times.implausible_time_unit`); the last test pins that.
"""

from __future__ import annotations

import tempfile
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given
from hypothesis import strategies as st

from graphcep.io.formats import InputError, ReaderOptions
from graphcep.io.formats.times import EPOCH_SPAN, implausible_time_unit
from graphcep.io.readers import read_edges

MS_PER = {"s": 1000, "ms": 1, "us": 1}  # a written tick is this many ms (us: ms / 1000)


@st.composite
def epoch_streams(draw) -> list[int]:
    """Times in whole milliseconds, all inside the epoch span, in any order, ties too."""
    low_ms, high_ms = EPOCH_SPAN[0] * 1000, EPOCH_SPAN[1] * 1000 - 1
    start = draw(st.integers(low_ms, high_ms))
    span = draw(st.sampled_from([0, 1_000, 3_600_000, 86_400_000 * 365]))
    count = draw(st.integers(1, 25))
    return [min(start + draw(st.integers(0, span)), high_ms) for _ in range(count)]


def written(ms: int, unit: str) -> str:
    """A time in ``unit`` as a user's file holds it."""
    if unit == "s":
        return f"{ms // 1000}.{ms % 1000:03d}"
    if unit == "ms":
        return str(ms)
    if unit == "us":
        return str(ms * 1000)
    stamp = datetime.fromtimestamp(ms // 1000, UTC).strftime("%Y-%m-%dT%H:%M:%S")
    return f"{stamp}.{ms % 1000:03d}Z"


def check(path: Path, written_unit: str, given_unit: str | None, expected_us: list[int],
          fmt: str | None = None, time_format: str = "number") -> None:
    """The read is exact, or refused naming ``written_unit``; rejected lines only when
    the times are ISO-8601 read as numbers (and they are named so)."""
    options = ReaderOptions(time_unit=given_unit, time_format=time_format)
    try:
        read = read_edges(path, fmt, options)
    except InputError as err:
        assert given_unit is None, "a unit the user gave is never second-guessed"
        assert f"pass --time-unit {written_unit} " in str(err)
        return
    if written_unit == "iso" and time_format == "number":
        assert read.edges.num_rows == 0
        reasons = read.rejects.column("reason").to_pylist()
        assert all(r.endswith("pass --time-format iso]") for r in reasons)
        return
    assert read.rejects.num_rows == 0
    assert read.edges.column("t").to_pylist() == expected_us


def json_time(text: str) -> str:
    """A time as JSON lines hold it: a number, an ISO-8601 date-time as a string."""
    return f'"{text}"' if "T" in text else text


@given(epoch_streams(), st.sampled_from(["s", "ms", "us", "iso"]), st.booleans(),
       st.sampled_from(["csv", "jsonl"]))
def test_text_times_are_read_exactly_or_refused_naming_their_unit(
        times, unit, unit_given, fmt):
    if fmt == "csv":
        text = "src,dst,t\n" + "".join(f"v{i},w{i},{written(ms, unit)}\n"
                                       for i, ms in enumerate(times))
    else:
        text = "".join(f'{{"src": "v{i}", "dst": "w{i}", "t": {json_time(written(ms, unit))}}}\n'
                       for i, ms in enumerate(times))
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / f"x.{fmt}"
        path.write_text(text)
        given_unit = unit if unit_given and unit != "iso" else None
        expected = [ms * 1000 for ms in times]
        if unit == "iso":
            for time_format in ("number", "auto", "iso")[fmt == "jsonl":]:  # JSON: auto
                check(path, unit, None, expected, time_format=time_format)
            return
        check(path, unit, given_unit, expected)
        if given_unit is None and unit != "s":  # read as seconds: never silently
            with pytest.raises(InputError, match=f"pass --time-unit {unit} "):
                read_edges(path)


#: a VAST line (the CTU-13 sample's first, its leading Label kept) with its time and hosts
#: left open
VAST_LINE = ("0,{t},2011-08-10 02:13:42,201181021342,6,tcp,{src},{dst},35049,6881,0,0,"
             "1.419550,0,0,124,120,2,2,0")


@given(epoch_streams(), st.sampled_from(["s", "ms", "us"]), st.booleans(), st.booleans())
def test_vast_times_are_seconds_unless_the_unit_given_says_otherwise(
        times, unit, unit_given, labelled):
    """The VAST layout's TimeSeconds, after a leading Label or first: read as seconds, as
    the format says, or in the unit given; epoch milliseconds or microseconds there are
    refused naming their unit, never read as a time past the year 9999."""
    lines = [VAST_LINE.format(t=written(ms, unit), src=f"10.0.0.{i % 250}",
                              dst=f"10.0.1.{i % 250}") for i, ms in enumerate(times)]
    if not labelled:
        lines = [line.split(",", 1)[1] for line in lines]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.csv"
        path.write_text("\n".join(lines) + "\n")
        check(path, unit, unit if unit_given else None, [ms * 1000 for ms in times], "vast")
        if not unit_given and unit != "s":  # read as seconds: never silently
            with pytest.raises(InputError, match=f"pass --time-unit {unit} "):
                read_edges(path, "vast")


@given(epoch_streams(), st.sampled_from(["s", "ms", "us"]), st.booleans(),
       st.sampled_from(["t", "TimeSeconds"]))
def test_parquet_integer_times_are_read_exactly_or_refused_naming_their_unit(
        times, unit, unit_given, column):
    """pandas writes integers without a unit: a column ``t`` is assumed microseconds (the
    edge schema), another name seconds; a wrong assumption is refused."""
    ticks = {"s": [ms // 1000 for ms in times], "ms": times, "us": [ms * 1000 for ms in times]}
    table = pa.table({"src": [f"v{i}" for i in range(len(times))],
                      "dst": [f"w{i}" for i in range(len(times))],
                      column: pa.array(ticks[unit], pa.int64())})
    expected = {"s": [ms // 1000 * 1_000_000 for ms in times], "ms": [ms * 1000 for ms in times],
                "us": [ms * 1000 for ms in times]}[unit]
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "x.parquet"
        pq.write_table(table, path)
        check(path, unit, unit if unit_given else None, expected)


def test_the_check_names_the_one_plausible_unit():
    """The pure function the readers share: each misreading named, nothing else flagged."""
    ms = np.array([1_082_040_961_000, 1_098_777_142_000])
    assert "pass --time-unit ms " in implausible_time_unit(ms, "s")
    assert "pass --time-unit us " in implausible_time_unit(ms * 1000, "s")
    assert "pass --time-unit s " in implausible_time_unit(ms // 1000, "us")
    assert "pass --time-unit ms " in implausible_time_unit(ms, "us")
    assert "write them in microseconds" in implausible_time_unit(ms * 1_000_000, "s")
    for right, unit in ((ms // 1000, "s"), (ms, "ms"), (ms * 1000, "us")):
        assert implausible_time_unit(right, unit) is None
    # relative times, synthetic streams from 0, SNAP's seconds since an experiment began
    for relative in ([0, 10_000_000], [20, 100_000], [0], [-5, 5]):
        for unit in ("s", "ms", "us"):
            assert implausible_time_unit(np.array(relative), unit) is None
    assert implausible_time_unit(np.array([], np.int64), "s") is None


def test_relative_times_in_a_finer_unit_are_beyond_what_can_be_told(tmp_path):
    """0..10**7 ms read as seconds are plausible seconds too: read as written (the
    documented limit of the check; --time-unit says otherwise)."""
    path = tmp_path / "rel.csv"
    path.write_text("src,dst,t\na,b,0\nb,c,10000000\n")
    assert read_edges(path).edges.column("t").to_pylist() == [0, 10_000_000 * 1_000_000]
