"""Bad input to the local readers: every bad line or row is a counted reject with its line
number, a damaged file keeps what was read before the damage, and input that cannot be
read at all is one clear error (exit status 2 on the command line)."""

from __future__ import annotations

import gzip
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from graphcep.io.formats import InputError, ReaderOptions, SchemaError, parse_lines, quoting_problem
from graphcep.io.formats.schema import InputNote
from graphcep.io.readers import guess_format, read_edges
from graphcep.io.rejects import RejectLog, reason_kind
from tests.paths import EXAMPLES

TRIANGLE = EXAMPLES / "triangle.sal"
INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1


def write(path: Path, data: str | bytes) -> Path:
    if isinstance(data, str):
        data = data.encode()
    path.write_bytes(data)
    return path


def core(result) -> list[tuple[int, str, str, int]]:
    """(t, src, dst, seq) of every edge read."""
    table = result.edges
    return list(
        zip(
            table.column("t").to_pylist(),
            table.column("src").to_pylist(),
            table.column("dst").to_pylist(),
            table.column("seq").to_pylist(),
            strict=True,
        )
    )


def reasons(result) -> dict[int, str]:
    return {r["line"]: r["reason"] for r in result.rejects.to_pylist()}


# ---------------------------------------------------------------------------------------
# Parquet: int64 extremes, wrong schemas, not Parquet at all
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("column", "values", "good_t"),
    [
        # TimeSeconds is in seconds: INT64_MIN used to wrap to t = 0 after abs() overflowed.
        (
            "TimeSeconds",
            [INT64_MIN, 5, INT64_MAX, -4_611_686_018_426],
            [5_000_000, -4_611_686_018_426_000_000],
        ),
        # An integer t is in microseconds: INT64_MIN used to pass the range check unchanged.
        ("t", [INT64_MIN, 5, INT64_MAX, -(2**62) + 1], [5, -(2**62) + 1]),
    ],
)
def test_parquet_int64_extremes_are_out_of_range(
    tmp_path: Path, column: str, values: list[int], good_t: list[int]
) -> None:
    table = pa.table(
        {
            column: pa.array(values, pa.int64()),
            "src": ["a", "b", "c", "d"],
            "dst": ["b", "c", "d", "e"],
        }
    )
    pq.write_table(table, tmp_path / "x.parquet")
    result = read_edges(tmp_path / "x.parquet")
    assert result.edges.column("t").to_pylist() == good_t
    assert result.edges.column("seq").to_pylist() == [2, 4]
    got = reasons(result)
    assert sorted(got) == [1, 3]
    assert got[1] == f"field {column} (t): out of range: {INT64_MIN}"
    assert got[3] == f"field {column} (t): out of range: {INT64_MAX}"


def test_a_parquet_file_of_many_batches_keeps_order_and_whole_rejected_rows(
        tmp_path: Path, monkeypatch) -> None:
    """Batches of three rows, parsed side by side: the edges come in file order, each
    reject names its own row and shows it whole (the projected read leaves ``note`` out,
    the reject's text has it)."""
    from graphcep.io import readers

    monkeypatch.setattr(readers, "PARQUET_BATCH_ROWS", 3)
    times = [1, 2, INT64_MIN, 4, 5, 6, 7, INT64_MAX, 9, 10]
    pq.write_table(pa.table({"t": pa.array(times, pa.int64()),
                             "src": [f"s{i}" for i in range(10)],
                             "dst": [f"d{i}" for i in range(10)],
                             "note": [f"row {i + 1}" for i in range(10)]}),
                   tmp_path / "m.parquet")
    options = readers.parquet_projection(pq.read_schema(tmp_path / "m.parquet"),
                                         ReaderOptions(attributes=()))[1]
    result = read_edges(tmp_path / "m.parquet", options=options)
    kept = [i for i, t in enumerate(times) if t not in (INT64_MIN, INT64_MAX)]
    assert result.edges.column("t").to_pylist() == [times[i] for i in kept]
    assert result.edges.column("seq").to_pylist() == [i + 1 for i in kept]
    assert "note" not in result.edges.column_names
    assert sorted(reasons(result)) == [3, 8]
    texts = dict(zip(result.rejects.column("line").to_pylist(),
                     result.rejects.column("text").to_pylist(), strict=True))
    assert "row 3" in texts[3] and "row 8" in texts[8]


def test_parquet_far_dates_are_out_of_range(tmp_path: Path) -> None:
    # 2**31 - 1 days is about 5.9 million years: beyond 2**62 us (about 146,000 years).
    days = pa.array([1, 2**31 - 1], pa.int32()).cast(pa.date32())
    pq.write_table(
        pa.table({"t": days, "src": ["a", "b"], "dst": ["b", "c"]}), tmp_path / "d.parquet"
    )
    result = read_edges(tmp_path / "d.parquet")
    assert result.edges.column("t").to_pylist() == [86_400_000_000]
    assert reasons(result) == {2: f"field t (t): out of range: {2**31 - 1}"}


@pytest.mark.parametrize(
    ("columns", "message"),
    [
        (
            {"t": pa.array([True]), "src": ["a"], "dst": ["b"]},
            "column 't' (t) has type bool; expected an integer",
        ),
        (
            {"t": pa.array([b"1"]), "src": ["a"], "dst": ["b"]},
            "column 't' (t) has type binary; expected",
        ),
        (
            {"t": pa.array([[1]]), "src": ["a"], "dst": ["b"]},
            "column 't' (t) has type list<element: int64>; expected",
        ),
        (
            {"t": [1], "src": pa.array([[1]]), "dst": ["b"]},
            "column 'src' (src) has type list<element: int64>; expected a string or integer column",
        ),
        (
            {"t": [1], "src": ["a"], "dst": pa.array([{"x": 1}])},
            "column 'dst' (dst) has type struct<x: int64>; expected a string or integer column",
        ),
        (
            {"x": [1], "src": ["a"], "dst": ["b"]},
            "no column for 't': expected an integer, float, decimal, string, timestamp or date column named 't' or 'TimeSeconds'",
        ),
    ],
)
def test_parquet_wrong_schema_is_one_error_naming_file_and_column(
    tmp_path: Path, columns: dict, message: str
) -> None:
    path = tmp_path / "w.parquet"
    pq.write_table(pa.table(columns), path)
    with pytest.raises(SchemaError) as err:
        read_edges(path)
    assert str(err.value).startswith(f"{path}: {message}")
    assert isinstance(err.value, ValueError)


def test_a_projected_parquet_read_without_a_core_column_names_every_column_of_the_file(
    tmp_path: Path,
) -> None:
    """A run reads the columns its query needs only; a file lacking ``src`` is named with
    all of its columns, not the few the projection kept."""
    path = tmp_path / "w.parquet"
    columns = {"t": [1], "source": ["a"], "dst": ["b"], "bytes": [7]}
    pq.write_table(pa.table(columns), path)
    with pytest.raises(SchemaError) as err:
        read_edges(path, options=ReaderOptions(attributes=()))
    assert str(err.value).endswith(f"the columns are {list(columns)}"), str(err.value)


def test_parquet_binary_vertex_ids_are_read_and_bad_utf8_rejected(tmp_path: Path) -> None:
    table = pa.table(
        {"t": pa.array([1, 2], pa.int64()), "src": pa.array([b"a", b"\xff"]), "dst": ["b", "c"]}
    )
    pq.write_table(table, tmp_path / "b.parquet")
    result = read_edges(tmp_path / "b.parquet")
    assert core(result) == [(1, "a", "b", 1)]
    assert reasons(result) == {2: "field src (src): invalid UTF-8 (at byte 1)"}


def test_not_a_parquet_file_is_an_input_error(tmp_path: Path) -> None:
    path = write(tmp_path / "n.parquet", "t,src,dst\n1,a,b\n")
    with pytest.raises(InputError, match=r"n\.parquet: not a Parquet file"):
        read_edges(path)


def run_triangle(tmp_path: Path, path: Path) -> int:
    """``graphcep run`` of the triangle over ``path``, in-process; its exit status."""
    return main(["run", str(TRIANGLE), "--input", str(path), "--engine", "local",
                 "--rejects", str(tmp_path / "r.jsonl"), "-o", str(tmp_path / "m.jsonl")])


@pytest.mark.parametrize("kind", ["schema", "not parquet"])
def test_cli_refuses_bad_parquet_in_one_line(tmp_path: Path, capsys, kind: str) -> None:
    path = tmp_path / "bad.parquet"
    if kind == "schema":
        pq.write_table(pa.table({"t": [True], "src": ["a"], "dst": ["b"]}), path)
    else:
        write(path, b"PAR1 but not really")
    code = run_triangle(tmp_path, path)
    err = capsys.readouterr().err
    assert code == 2
    # a file that is not Parquet at all is damage, said as a damaged gzip is said
    lead = f"graphcep: {path}: " if kind == "schema" else f"graphcep: nothing could be read: {path}: "
    assert err.count("\n") == 1 and err.startswith(lead)


def test_a_damaged_parquet_file_among_others_is_one_reject_and_the_rest_is_read(tmp_path):
    """A directory of Parquet files with one cut short (its footer gone) reads the others
    and counts the damaged one as one reject naming why, as a damaged gzip among text
    files is: the one file does not stop the run."""
    folder = tmp_path / "pdir"
    folder.mkdir()
    good = pa.table({"t": [1, 2], "src": ["a", "b"], "dst": ["b", "c"]})
    pq.write_table(good, folder / "a.parquet")
    pq.write_table(good, folder / "c.parquet")
    whole = (folder / "a.parquet").read_bytes()
    write(folder / "b.parquet", whole[: len(whole) // 2])
    result = read_edges(folder)
    assert result.edges.num_rows == 4
    assert result.rejects.num_rows == 1
    reject = result.rejects.to_pylist()[0]
    assert reject["file"].endswith("b.parquet") and "not a Parquet file" in reject["reason"]
    code = run_triangle(tmp_path, folder)
    assert code == 0


# ---------------------------------------------------------------------------------------
# CSV quoting and header detection
# ---------------------------------------------------------------------------------------


def test_csv_malformed_quoting_is_rejected(tmp_path: Path) -> None:
    text = "\n".join(
        [
            "a,b,1",
            '1,2,"3',  # unterminated: was an edge at t = 3
            '1,"a',  # a field holding a newline: both halves are rejected ...
            'b",2,3',  # ... this one was an edge from vertex 'b"'
            '"a"x,b,4',
            'a"b,c,5',
            '"c, d","e ""f""",6',  # well-formed quoting is read as before
            '"",x,7',
        ]
    )
    result = read_edges(write(tmp_path / "q.csv", text + "\n"))
    assert core(result) == [
        (1_000_000, "a", "b", 1),
        (6_000_000, "c, d", 'e "f"', 7),
    ]
    assert reasons(result) == {
        2: "field 3: unterminated quoted field",
        3: "field 2: unterminated quoted field",
        4: "field 1: stray quote in an unquoted field",
        5: "field 1: text after the closing quote",
        6: "field 1: stray quote in an unquoted field",
        8: "field 1 (src): empty vertex id",
    }


def test_quoting_problem_with_other_delimiters() -> None:
    assert quoting_problem('a;"b;c";1', ";") is None
    assert quoting_problem('a;"b;c', ";") == "field 2: unterminated quoted field"
    assert quoting_problem('"', ",") == "field 1: unterminated quoted field"
    assert quoting_problem('"""', ",") == "field 1: unterminated quoted field"
    assert quoting_problem('""""', ",") is None


@pytest.mark.parametrize(
    ("first", "expected_reason"),
    [
        ("oops,oops,oops,oops", "too many fields: expected 3 fields, got 4"),  # spoilt all lines
        ("1,2,abc", "field 3 (t): not a number: 'abc'"),  # was taken as a header, uncounted
        ("x,x,t", "field 3 (t): not a number: 't'"),  # repeated names: no header
        ('"src,dst,t', "field 1: unterminated quoted field"),
        ("a,,3", "field 2 (dst): empty vertex id"),
    ],
)
def test_csv_bad_first_line_is_a_counted_reject(
    tmp_path: Path, first: str, expected_reason: str
) -> None:
    path = write(tmp_path / "h.csv", f"{first}\n1,2,3\n4,5,6\n")
    result = read_edges(path)
    assert core(result) == [(3_000_000, "1", "2", 2), (6_000_000, "4", "5", 3)]
    assert reasons(result) == {1: expected_reason}
    assert result.skipped == 0


def test_csv_bad_first_line_of_a_two_line_file(tmp_path: Path) -> None:
    # One data line against one bad first line: the line that reads as data sets the layout.
    result = read_edges(write(tmp_path / "h.csv", "oops,oops,oops,oops\n1,2,3\n"))
    assert core(result) == [(3_000_000, "1", "2", 2)]
    assert reasons(result) == {1: "too many fields: expected 3 fields, got 4"}


def test_csv_header_still_detected(tmp_path: Path) -> None:
    named = read_edges(write(tmp_path / "a.csv", "src,dst,t\na,b,1\nb,c,x\n"))
    assert core(named) == [(1_000_000, "a", "b", 2)]
    assert reasons(named) == {3: "field 3 (t): not a number: 'x'"}
    assert named.skipped == 1
    # Names that are not the schema's but say what they hold: read by name, said in a note;
    # the header's names in reasons.
    with pytest.warns(InputNote, match=r"--columns t=when,src=from,dst=to"):
        other = read_edges(write(tmp_path / "b.csv", "from,to,when,w\na,b,1,x\nc,d,z,y\n"))
    assert core(other) == [(1_000_000, "a", "b", 2)]
    assert reasons(other) == {3: "field 3 (when): not a number: 'z'"}
    assert other.edges.column("w").to_pylist() == ["x"]
    # A header alone in its file.
    alone = read_edges(write(tmp_path / "c.csv", "src,dst,t\n"))
    assert alone.edges.num_rows == 0 and alone.rejects.num_rows == 0 and alone.skipped == 1


def test_csv_header_option_overrides_detection(tmp_path: Path) -> None:
    path = write(tmp_path / "o.csv", "src,dst,t\na,b,1\n")
    forced_data = read_edges(path, options=ReaderOptions(header=False))
    assert core(forced_data) == [(1_000_000, "a", "b", 2)]
    assert reasons(forced_data) == {1: "field 3 (t): not a number: 't'"}
    numbers = write(tmp_path / "n.csv", "1,2,3\n4,5,6\n")
    forced_header = read_edges(numbers, options=ReaderOptions(header=True))
    assert core(forced_header) == [(6_000_000, "4", "5", 2)]
    assert forced_header.skipped == 1 and forced_header.rejects.num_rows == 0


# ---------------------------------------------------------------------------------------
# Damaged gzip, unreadable files
# ---------------------------------------------------------------------------------------


def numbered_csv(n: int) -> bytes:
    return b"".join(b"v%d,w%d,%d\n" % (i, i, i) for i in range(1, n + 1))


def test_truncated_gzip_keeps_the_lines_before_the_damage(tmp_path: Path) -> None:
    whole = gzip.compress(numbered_csv(20_000))
    path = write(tmp_path / "t.csv.gz", whole[: len(whole) // 2])
    result = read_edges(path, options=ReaderOptions(chunk_bytes=1 << 16))
    n = result.edges.num_rows
    assert 1_000 < n < 20_000
    assert core(result) == [(i * 1_000_000, f"v{i}", f"w{i}", i) for i in range(1, n + 1)]
    (damage,) = result.rejects.to_pylist()
    assert damage["file"] == str(path)
    assert damage["line"] == n + 1
    assert damage["reason"] == f"damaged gzip: unexpected end of data after line {n}"
    assert reason_kind(damage["reason"]) == "damaged gzip"
    # The unfinished line is shown, not parsed: it may have lost digits of its time.
    assert f"v{n + 1},w{n + 1},{n + 1}".startswith(damage["text"])
    assert result.lines_read == n + 1 and result.skipped == 0


def gzip_member(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def test_corrupt_gzip_is_a_reject(tmp_path: Path) -> None:
    # A second member whose deflate data starts with a reserved block type (0xff): zlib
    # fails at once, after every line of the first member.
    broken = gzip_member(numbered_csv(3_000)) + gzip_member(b"x")[:10] + b"\xff" * 32
    path = write(tmp_path / "c.csv.gz", broken)
    result = read_edges(path)
    assert core(result) == [(i * 1_000_000, f"v{i}", f"w{i}", i) for i in range(1, 3_001)]
    assert reasons(result) == {
        3_001: "damaged gzip: corrupt compressed data (Error -3 while decompressing data: "
        "invalid block type) after line 3000"
    }


def test_gzip_with_a_wrong_checksum_is_a_reject(tmp_path: Path) -> None:
    member = bytearray(gzip_member(numbered_csv(10)))
    member[-8] ^= 0xFF  # first byte of the CRC-32 in the trailer
    result = read_edges(write(tmp_path / "k.csv.gz", bytes(member)))
    assert result.edges.num_rows == 10
    (damage,) = result.rejects.to_pylist()
    assert damage["line"] == 11
    assert damage["reason"].startswith("damaged gzip: CRC check failed")
    assert damage["reason"].endswith(" after line 10")


def test_gzip_with_trailing_garbage_is_a_reject(tmp_path: Path) -> None:
    result = read_edges(write(tmp_path / "g.csv.gz", gzip_member(numbered_csv(4)) + b"junk"))
    assert result.edges.num_rows == 4
    assert reasons(result) == {5: "damaged gzip: Not a gzipped file (b'ju') after line 4"}


def test_gzip_with_nothing_readable_is_an_input_error(tmp_path: Path, capsys) -> None:
    path = write(tmp_path / "e.csv.gz", gzip.compress(numbered_csv(10))[:12])
    with pytest.raises(InputError, match="nothing could be read: .*e.csv.gz: damaged gzip"):
        read_edges(path)
    code = run_triangle(tmp_path, path)
    err = capsys.readouterr().err
    assert code == 2
    assert (
        err
        == f"graphcep: nothing could be read: {path}: damaged gzip: unexpected end of data after line 0\n"
    )


def test_one_damaged_file_among_good_ones(tmp_path: Path) -> None:
    good = write(tmp_path / "a.csv", numbered_csv(3))
    bad = write(tmp_path / "b.csv.gz", gzip.compress(numbered_csv(3))[:12])
    result = read_edges([good, bad], fmt="csv")
    assert result.edges.num_rows == 3
    assert result.rejects.select(["file", "line"]).to_pylist() == [{"file": str(bad), "line": 1}]


def test_file_named_gz_that_is_not_gzip(tmp_path: Path) -> None:
    path = write(tmp_path / "p.csv.gz", numbered_csv(2) + b"\xff\xfe,x,1\n")
    result = read_edges(path)
    assert core(result) == [(1_000_000, "v1", "w1", 1), (2_000_000, "v2", "w2", 2)]
    assert reasons(result) == {3: "invalid UTF-8 (at byte 1)"}


@pytest.mark.skipif(os.geteuid() == 0, reason="root reads any file")
def test_unreadable_file_is_a_reject(tmp_path: Path) -> None:
    good = write(tmp_path / "a.csv", numbered_csv(2))
    locked = write(tmp_path / "b.csv", numbered_csv(2))
    locked.chmod(0)
    try:
        result = read_edges([good, locked], fmt="csv")
    finally:
        locked.chmod(0o600)
    assert result.edges.num_rows == 2
    assert reasons(result) == {1: "cannot read the file: Permission denied"}


# ---------------------------------------------------------------------------------------
# Lines: JSON surrogates, carriage returns, overlong lines
# ---------------------------------------------------------------------------------------


def test_jsonl_lone_surrogates_are_rejected(tmp_path: Path) -> None:
    lines = [
        r'{"t": 1, "src": "a", "dst": "b"}',
        r'{"t": 2, "src": "\ud800", "dst": "b"}',
        r'{"t": 3, "src": "a", "dst": "b", "\udc00": 1}',
        r'{"t": 4, "src": "a", "dst": "b", "note": ["x", {"y": "\uDBFF"}]}',
        r'{"t": 5, "src": "\ud83d\ude00", "dst": "b"}',  # a surrogate pair: one character
        r'{"t": 6, "src": "\\ud800", "dst": "b"}',  # an escaped backslash: plain text
        "[" * 100_000,
    ]
    result = read_edges(write(tmp_path / "s.jsonl", "\n".join(lines) + "\n"))
    assert core(result) == [
        (1_000_000, "a", "b", 1),
        (5_000_000, "\U0001f600", "b", 5),
        (6_000_000, "\\ud800", "b", 6),
    ]
    assert reasons(result) == {
        2: "invalid JSON string: lone surrogate \\ud800",
        3: "invalid JSON string: lone surrogate \\udc00",
        4: "invalid JSON string: lone surrogate \\udbff",
        7: "invalid JSON: nested too deeply",
    }


@pytest.mark.parametrize("fmt", ["csv", "tsv", "snap", "jsonl"])
def test_a_line_ends_at_newline_only(tmp_path: Path, fmt: str) -> None:
    """``\\n`` ends a line, ``\\r\\n`` too (one ``\\r`` dropped); a bare ``\\r`` is text."""
    rows = [("1", "a", "b"), ("2", "c", "d"), ("3", "e", "f"), ("4", "g", "h")]
    if fmt == "jsonl":
        text = [f'{{"t": {t}, "src": "{s}", "dst": "{d}"}}' for t, s, d in rows]
    else:
        sep = {"csv": ",", "tsv": "\t", "snap": " "}[fmt]
        text = [sep.join(r) for r in rows]
    header = "" if fmt in ("snap", "jsonl") else sep.join(["t", "src", "dst"]) + "\n"
    data = f"{header}{text[0]}\r\n{text[1]}\r{text[2]}\n{text[3]}\r\r\n".encode()
    options = ReaderOptions(columns={"t": 0, "src": 1, "dst": 2}) if fmt == "snap" else None
    result = read_edges(write(tmp_path / f"r.{fmt}", data), fmt=fmt, options=options)
    first = 1 if header else 0
    assert result.lines_read == first + 3
    got = {e[3] - first: e[:3] for e in core(result)}
    assert got[1] == (1_000_000, "a", "b")
    assert 2 not in got and first + 2 in reasons(result)  # "2,c,d\r3,e,f" is one bad line
    # "4,g,h\r": the \r left is text -- the end of the vertex id in csv and tsv, whitespace
    # between fields to snap and JSON.
    assert got[3] == (4_000_000, "g", "h\r" if header else "h")


def test_overlong_line_reports_its_true_length(tmp_path: Path) -> None:
    long_line = b"x" * 50_000
    data = b"a,b,1\n" + long_line + b"\n" + b"c,d,2\n" + b"y" * 3_000
    options = ReaderOptions(chunk_bytes=4096, max_line_bytes=1000)
    result = read_edges(write(tmp_path / "l.csv", data), options=options)
    assert core(result) == [(1_000_000, "a", "b", 1), (2_000_000, "c", "d", 3)]
    assert reasons(result) == {
        2: "line longer than max_line_bytes (50000 > 1000 bytes)",
        4: "line longer than max_line_bytes (3000 > 1000 bytes)",
    }


def test_overlong_line_within_a_chunk_reports_its_length() -> None:
    _, rejects = parse_lines(
        pa.array([b"a b 1", b"z" * 30]), [1, 2], "snap", ReaderOptions(max_line_bytes=20)
    )
    assert rejects.column("reason").to_pylist() == [
        "line longer than max_line_bytes (30 > 20 bytes)"
    ]


# ---------------------------------------------------------------------------------------
# Format guessing and the hint when a whole file is rejected
# ---------------------------------------------------------------------------------------

VAST_LINE = (
    "1364802616,2013-04-01 07:50:16,20130401075016,6,TCP,172.10.0.4,172.0.0.1,3128,80,"
    "0,0,0,0,0,0,0,0,0,0"
)


@pytest.mark.parametrize("name", ["flows.vast", "flows.VAST", "flows.vast.gz"])
def test_vast_suffix_is_recognised(tmp_path: Path, name: str) -> None:
    data = (VAST_LINE + "\n").encode()
    path = write(tmp_path / name, gzip.compress(data) if name.endswith(".gz") else data)
    assert guess_format(path) == "vast"
    result = read_edges(path)
    assert core(result) == [(1_364_802_616_000_000, "172.10.0.4", "172.0.0.1", 1)]


def test_a_wholly_rejected_file_hints_at_the_format(tmp_path: Path) -> None:
    path = write(tmp_path / "flows.dat", f"{VAST_LINE}\n{VAST_LINE}\n")
    result = read_edges(path)
    hint = " [no line of this file reads as snap: it has the shape of vast: pass --format vast]"
    assert (
        result.rejects.column("reason").to_pylist()
        == ["missing fields: expected 3 fields, got 2" + hint] * 2
    )
    log = RejectLog()
    log.add(result.rejects)
    assert log.kinds() == {"missing fields": 2}
    assert log.summary() == (
        f"2 lines rejected: 2 × missing fields; no line of {path} reads as snap: "
        "it has the shape of vast: pass --format vast"
    )
    # One good line and the hint is gone.
    mixed = read_edges(write(tmp_path / "m.dat", f"a b 1\n{VAST_LINE}\n"))
    assert mixed.rejects.column("reason").to_pylist() == [
        "missing fields: expected 3 fields, got 2"
    ]


@pytest.mark.parametrize(("lines", "time_format", "advice"), [
    ("t,src,dst\n2024-01-01T00:00:00,a,b\n2024-01-01 00:00:01.5,b,c\n", "number",
     "its times read as ISO-8601 date-times: pass --time-format iso"),
    ("t,src,dst\n1,a,b\n2.5,b,c\n", "iso", "its times read as numbers: pass --time-format number"),
    ("t,src,dst\n2024-01-01T00:00:00,a,b\nnoon,b,c\n", "number",
     "pass --format if it is another format, or --columns to say which columns hold t, "
     "src and dst"),  # not every time reads the other way
])
def test_times_written_the_other_way_point_at_the_time_format(
        tmp_path: Path, lines: str, time_format: str, advice: str) -> None:
    """A file of the right format whose times are ISO-8601 where numbers were expected
    (the default), or the reverse, gives no edge: the summary says which option fixes
    it, not that the format may be wrong."""
    path = write(tmp_path / "flows.csv", lines)
    result = read_edges(path, options=ReaderOptions(time_format=time_format))
    assert result.edges.num_rows == 0
    log = RejectLog()
    log.add(result.rejects)
    assert log.summary().endswith(f"no line of {path} reads as csv: {advice}")


def test_each_rejected_line_names_the_option_that_reads_it() -> None:
    """The hint at the end of each reason of a file that gave no edge names
    --time-format where that line's time reads the other way, --format elsewhere."""
    from graphcep.io.rejects import add_format_hint

    reasons = ["field 1 (t): not a number: '2024-01-01T00:00:01'",
               "field 1 (t): not an ISO-8601 date-time: '1700000000.5'",
               "field 1 (t): not a number: 'noon'"]
    hinted = add_format_hint(pa.table({"reason": reasons}), "csv").column("reason").to_pylist()
    assert hinted == [
        reasons[0] + " [no line of this file reads as csv: its time reads as an ISO-8601 "
                     "date-time: pass --time-format iso]",
        reasons[1] + " [no line of this file reads as csv: its time reads as a number: pass "
                     "--time-format number]",
        reasons[2] + " [no line of this file reads as csv: is --format right?]"]
    log = RejectLog()
    log.add(pa.table({"line": [1, 2, 3], "reason": hinted, "text": ["", "", ""]}), "f.csv")
    assert log.kinds() == {"not a number": 2, "not an ISO-8601 date-time": 1}


# The files of one run read in the first file's format, each with its own layout; a file no
# line of which reads that way has only hinted rejects, which used to have another schema
# (a nullable reason) than the others' and failed the join ("Schema at index 1 was
# different").
# Each hint names the format the file's first lines have the shape of.
VAST_HINT = " [no line of this file reads as vast: it has the shape of csv: pass --format csv]"
CSV_HINT = " [no line of this file reads as csv: it has the shape of {shape}: pass --format " \
    "{shape}]"


def test_files_of_several_layouts_in_one_read(tmp_path: Path, capsys) -> None:
    flows = write(tmp_path / "flows.csv", f"{VAST_LINE}\n{VAST_LINE.replace('.0.1,', '.0.2,')}\n")
    other = write(tmp_path / "other.csv", "src,dst,t\na,b,1\nb,c,2\n")
    result = read_edges([flows, other])
    assert result.fmt == "vast"
    assert core(result) == [(1_364_802_616_000_000, "172.10.0.4", "172.0.0.1", 1),
                            (1_364_802_616_000_000, "172.10.0.4", "172.0.0.2", 2)]
    assert result.rejects.to_pylist() == [
        {"file": str(other), "line": n, "reason": "missing fields: expected 19 or 20 fields, "
         "got 3" + VAST_HINT, "text": text}
        for n, text in [(1, "src,dst,t"), (2, "a,b,1"), (3, "b,c,2")]]
    assert result.lines_read == 5
    # the command line matches what was read and counts the rest
    query = write(tmp_path / "q.sal", "{ x1 e1 x2; }")
    code = main(["run", str(query), "-i", str(flows), str(other), "--engine", "local",
                 "-o", str(tmp_path / "m.jsonl"), "--rejects", str(tmp_path / "r.jsonl"),
                 "--summary", "json"])
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert code == 0
    assert (summary["matches"], summary["edges"], summary["rejected"]) == (2, 2, 3)
    assert len((tmp_path / "r.jsonl").read_text().splitlines()) == 3


def test_a_jsonl_file_after_a_csv_one_is_rejected_with_the_hint(tmp_path: Path) -> None:
    good = write(tmp_path / "good.csv", "a,b,1\nb,c,2\n")
    other = write(tmp_path / "g.jsonl", '{"src":"a","dst":"b","t":1}\nnot json\n')
    result = read_edges([good, other])
    assert core(result) == [(1_000_000, "a", "b", 1), (2_000_000, "b", "c", 2)]
    assert result.rejects.select(["file", "line", "reason"]).to_pylist() == [
        {"file": str(other), "line": 1,
         "reason": "field 1: stray quote in an unquoted field"
         + CSV_HINT.format(shape="jsonl")},
        {"file": str(other), "line": 2,
         "reason": "missing fields: expected 3 fields, got 1" + CSV_HINT.format(shape="jsonl")}]
    # the jsonl file first: its format, and the csv file is the one without an edge
    result = read_edges([other, good])
    assert core(result) == [(1_000_000, "a", "b", 1)]
    assert result.rejects.select(["file", "line"]).to_pylist() == [
        {"file": str(other), "line": 2}, {"file": str(good), "line": 1},
        {"file": str(good), "line": 2}]
    assert all(r.endswith(" [no line of this file reads as jsonl: it has the shape of csv: "
                          "pass --format csv]")
               for r in result.rejects.column("reason").to_pylist()[1:])


def test_parquet_files_whose_attribute_types_clash_keep_every_value_as_text(
    tmp_path: Path,
) -> None:
    pq.write_table(pa.table({"t": [1.0], "src": ["a"], "dst": ["b"],
                             "port": pa.array([80], pa.int64())}), tmp_path / "1.parquet")
    pq.write_table(pa.table({"t": [2.0], "src": ["b"], "dst": ["c"], "port": ["http"]}),
                   tmp_path / "2.parquet")
    result = read_edges(tmp_path)
    assert core(result) == [(1_000_000, "a", "b", 1), (2_000_000, "b", "c", (1 << 40) + 1)]
    assert result.edges.column("port").to_pylist() == ["80", "http"]


def physical_lines(data: bytes) -> int:
    """Lines a reader meets in ``data``: pieces ended by ``\\n``, and a last unended one."""
    return data.count(b"\n") + (not data.endswith(b"\n"))


def test_a_parquet_file_read_as_csv_is_rejected_line_by_line_with_the_hint(
    tmp_path: Path, capsys
) -> None:
    # Its bytes split into fewer than three fields and line 1 was taken for a header
    # naming two columns: the layout failed ("column index 2 for 't' outside the 2
    # columns", a traceback). Now it reads as any other file in the wrong format.
    path = tmp_path / "x.parquet"
    pq.write_table(pa.table({"t": [1.0, 2.0], "src": ["a", "b"], "dst": ["b", "c"]}), path)
    lines = physical_lines(path.read_bytes())
    result = read_edges(path, "csv")
    assert result.edges.num_rows == 0 and result.lines_read == lines
    assert result.rejects.num_rows + result.skipped == lines and result.rejects.num_rows
    assert result.rejects.column("line").to_pylist()[0] == 1
    hint = CSV_HINT.format(shape="parquet")
    assert all(r.endswith(hint) for r in result.rejects.column("reason").to_pylist())
    # listed after a CSV file, whose format then decides: the CSV file's edges are read
    good = write(tmp_path / "good.csv", "a,b,1\nb,c,2\n")
    mixed = read_edges([good, path])
    assert core(mixed) == [(1_000_000, "a", "b", 1), (2_000_000, "b", "c", 2)]
    assert mixed.rejects.to_pylist() == result.rejects.to_pylist()
    query = write(tmp_path / "q.sal", "{ x1 e1 x2; }")
    # alone, no line of the input is accepted: status 2; beside the CSV file, 0
    for inputs, status in (([str(path), "--format", "csv"], 2), ([str(good), str(path)], 0)):
        code = main(["run", str(query), "-i", *inputs, "--engine", "local",
                     "-o", str(tmp_path / "m.jsonl"), "--rejects", str(tmp_path / "r.jsonl")])
        out = capsys.readouterr().out
        assert code == status
        assert (f"no line of {path} reads as csv: it has the shape of parquet: pass --format "
                "parquet") in out


@pytest.mark.parametrize("fmt", ["csv", "tsv"])
def test_a_file_of_fewer_than_three_columns_is_rejected_line_by_line(
    tmp_path: Path, fmt: str
) -> None:
    sep = "," if fmt == "csv" else "\t"
    path = write(tmp_path / f"two.{fmt}", f"a{sep}b\nc{sep}d\n")
    hint = f" [no line of this file reads as {fmt}: is --format right?]"
    # line 1 names too few columns to be a header of edges: it is data like line 2
    assert read_edges(path).rejects.to_pylist() == [
        {"file": str(path), "line": n, "reason": "missing fields: expected 3 fields, got 2" + hint,
         "text": f"{x}{sep}{y}"} for n, x, y in [(1, "a", "b"), (2, "c", "d")]]
    # --header: line 1 is the header, src, dst and t are still missing from line 2
    forced = read_edges(path, options=ReaderOptions(header=True))
    assert reasons(forced) == {2: "missing fields: expected 3 fields, got 2" + hint}
    assert forced.skipped == 1
    one = read_edges(write(tmp_path / f"one.{fmt}", "a\nb\n"))
    assert reasons(one) == {n: "missing fields: expected 3 fields, got 1" + hint for n in (1, 2)}


@pytest.mark.parametrize("fmt", ["csv", "jsonl", "snap"])
def test_byte_order_mark_opening_a_file_is_dropped(tmp_path: Path, fmt: str) -> None:
    body = {
        "csv": "src,dst,t\na,b,1\n",
        "jsonl": '{"src": "a", "dst": "b", "t": 1}\n',
        "snap": "a b 1\n",
    }[fmt]
    result = read_edges(write(tmp_path / f"b.{fmt}", b"\xef\xbb\xbf" + body.encode()))
    assert core(result)[0][:3] == (1_000_000, "a", "b")
    assert result.rejects.num_rows == 0
    # Elsewhere it is text: a line holding only a byte order mark is one odd field.
    later = read_edges(write(tmp_path / "l.txt", "a b 1\n\ufeff\n"))
    assert reasons(later) == {2: "missing fields: expected 3 fields, got 1"}


def test_snap_layout_from_most_lines_not_a_bad_first_one(tmp_path: Path) -> None:
    result = read_edges(write(tmp_path / "s.txt", "a b 1 x\nc d 2\ne f 3\n"))
    assert core(result) == [(2_000_000, "c", "d", 2), (3_000_000, "e", "f", 3)]
    assert reasons(result) == {1: "too many fields: expected 3 fields, got 4"}
    assert result.edges.column_names == ["t", "src", "dst", "dur", "seq"]


def test_csv_quoted_line_with_a_bare_carriage_return(tmp_path: Path) -> None:
    # The csv module ended the run here ("new-line character seen in unquoted field").
    data = b'"a\rb",c,1\nx\r,"y",2\n"u",v\r,3\n'
    result = read_edges(write(tmp_path / "r.csv", data))
    assert core(result) == [
        (1_000_000, "a\rb", "c", 1),
        (2_000_000, "x\r", "y", 2),
        (3_000_000, "u", "v\r", 3),
    ]
    assert result.rejects.num_rows == 0


def test_csv_header_ending_in_a_delimiter(tmp_path: Path) -> None:
    result = read_edges(write(tmp_path / "e.csv", "src,dst,t,\na,b,1,\nc,d,2,x\n"))
    assert core(result) == [(1_000_000, "a", "b", 2), (2_000_000, "c", "d", 3)]
    assert result.skipped == 1 and result.rejects.num_rows == 0


def test_unreadable_file_is_a_reject_and_alone_an_input_error(tmp_path: Path, monkeypatch) -> None:
    import graphcep.io.readers as readers

    good = write(tmp_path / "a.csv", numbered_csv(2))
    locked = write(tmp_path / "b.csv", numbered_csv(2))
    opener = readers.open_binary

    def refuse_locked(path: Path):
        if path == locked:
            raise PermissionError(13, "Permission denied", str(path))
        return opener(path)

    monkeypatch.setattr(readers, "open_binary", refuse_locked)
    result = read_edges([good, locked], fmt="csv")
    assert result.edges.num_rows == 2
    assert result.rejects.to_pylist() == [
        {
            "file": str(locked),
            "line": 1,
            "reason": "cannot read the file: Permission denied",
            "text": "",
        }
    ]
    with pytest.raises(InputError, match="nothing could be read: .*b.csv: cannot read the file"):
        read_edges(locked, fmt="csv")
