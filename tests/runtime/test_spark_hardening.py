"""Spark reads and matches what the local engine reads and matches, on awkward input.

Every test writes a small file whose expected edges, rejects (file, line, reason) and
match fields are known from how it was written, checks the Spark read against them, and
checks that Spark and the local engine agree field by field.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.io.readers import read_edges
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.sal import parse_program
from graphcep.runtime.local import run_job
from graphcep.runtime.streaming.driver import StreamOperator

pytestmark = pytest.mark.spark

S = 1_000_000
TRIANGLE = """{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e3) - starttime(e1) <= 5;
                starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }"""


def flows(count: int = 400, vertices: int = 10, seed: int = 7) -> list[dict]:
    """Edges 0.25 s apart with durations of 0 to 5 s (in ms steps) and two attributes."""
    rng = random.Random(seed)
    rows = []
    for i in range(count):
        src, dst = rng.sample(range(vertices), 2)
        rows.append({"t": i * 250_000, "src": f"h{src}", "dst": f"h{dst}",
                     "dur": rng.randrange(0, 5000) * 1000, "proto": rng.choice(["tcp", "udp"]),
                     "bytes": rng.randrange(1, 10**6)})
    return rows


def seconds(us: int) -> str:
    return f"{us // S}.{us % S:06d}"


def csv_lines(rows: list[dict]) -> list[str]:
    return ["t,src,dst,dur,proto,bytes"] + [
        f"{seconds(r['t'])},{r['src']},{r['dst']},{seconds(r['dur'])},{r['proto']},{r['bytes']}"
        for r in rows]


def jsonl_lines(rows: list[dict]) -> list[str]:
    return [json.dumps({"t": seconds(r["t"]), "src": r["src"], "dst": r["dst"],
                        "dur": seconds(r["dur"]), "proto": r["proto"], "bytes": str(r["bytes"])})
            for r in rows]


def vast_lines(rows: list[dict]) -> list[str]:
    """The 19 VAST 2013 MC3 fields: time, dates, protocol, endpoints, ports, ..."""
    return [
        f"{seconds(r['t'])},2013-04-01 08:00:00,20130401080000,6,{r['proto']},{r['src']},"
        f"{r['dst']},{1000 + i},80,0,0,{seconds(r['dur'])},{r['bytes']},0,{r['bytes']},0,1,1,0"
        for i, r in enumerate(rows)]


WRITERS = {"csv": csv_lines, "jsonl": jsonl_lines, "vast": vast_lines}
#: The physical line of the first data row.
FIRST_ROW = {"csv": 2, "jsonl": 1, "vast": 1}


def write_lines(path: Path, lines: list[str]) -> Path:
    path.write_text("".join(line + "\n" for line in lines))
    return path


def spark_read(spark, path, fmt: str | None = None):
    """``(edges by seq, rejects as (file, line, reason, text) sorted, lines read)``."""
    from graphcep.runtime.spark import read_edges_spark

    edges_df, rejects_df, lines = read_edges_spark(spark, path, fmt)
    return (edges_df.toArrow().sort_by("seq"), reject_rows(rejects_df.toArrow()), lines,
            edges_df)


def reject_rows(rejects: pa.Table) -> list[tuple]:
    return sorted((r["file"], r["line"], r["reason"], r["text"]) for r in rejects.to_pylist())


def records(matches: pa.Table) -> list[dict]:
    """Match rows as plain values, in match id order."""
    return sorted(matches.to_pylist(), key=lambda r: (r["match_id"], str(r["edges"])))


def assert_same_read(spark, path, fmt: str | None = None):
    """Spark's read equals the local reader's, edge for edge and reject for reject."""
    local = read_edges(path, fmt)
    edges, rejects, lines, edges_df = spark_read(spark, path, fmt)
    assert edges.to_pylist() == local.edges.to_pylist()
    assert edges.column_names == local.edges.column_names
    assert rejects == reject_rows(local.rejects)
    assert lines == local.lines_read
    return edges, rejects, lines, edges_df


# -- match records carry every column of the input ----------------------------------------


@pytest.mark.parametrize("packed", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("fmt", sorted(WRITERS))
def test_spark_match_records_carry_durations_like_local(spark, tmp_path, fmt, packed):
    from graphcep.runtime.spark import run_spark

    rows = flows()
    path = write_lines(tmp_path / f"flows.{fmt}", WRITERS[fmt](rows))
    if packed:
        path = path.rename(path.with_name(path.name + ".gz"))
        path.write_bytes(gzip.compress(path.read_bytes()))
    job = SubgraphJob.create(parse_program(TRIANGLE), fmt=fmt)
    edges, _, _, edges_df = assert_same_read(spark, path, fmt)
    spark_matches, _ = run_spark(spark, job, edges_df)
    local_matches, _ = run_job(job, read_edges(path, fmt).edges)
    assert spark_matches.num_rows > 20
    assert records(spark_matches) == records(local_matches)
    for match in spark_matches.to_pylist():
        for edge in match["edges"]:
            row = rows[edge["seq"] - FIRST_ROW[fmt]]
            assert (edge["t"], edge["src"], edge["dst"], edge["dur"]) == (
                row["t"], row["src"], row["dst"], row["dur"])
    attribute = "SrcTotalBytes" if fmt == "vast" else "bytes"
    assert edges.column(attribute).to_pylist() == [
        r["bytes"] if fmt == "vast" else str(r["bytes"]) for r in rows]


def test_stream_operator_match_records_carry_durations():
    rows = flows(120)
    table = pa.Table.from_pylist([{**r, "seq": i + 1} for i, r in enumerate(rows)])
    job = SubgraphJob.create(parse_program(TRIANGLE))
    found: list[pa.Table] = []
    operator = StreamOperator(job, on_matches=lambda matches, _: found.append(matches))
    operator.process(0, table)
    operator.flush()
    edges = [e for t in found for m in t.to_pylist() for e in m["edges"]]
    assert edges
    assert all(e["dur"] == rows[e["seq"] - 1]["dur"] for e in edges)


# -- lines: UTF-8 and line ends -----------------------------------------------------------


def test_spark_rejects_invalid_utf8_lines_as_local_does(spark, tmp_path):
    path = tmp_path / "mixed.txt"
    path.write_bytes(b"a b 1\n"
                     b"a\xff b 2\n"          # a byte that starts no UTF-8 sequence
                     b"a b 3 \xc3\n"         # a sequence cut short, at the line's end
                     b"\xe2\x82 b 4\n"       # a three-byte sequence with two bytes
                     b"a \xef\xbf\xbd 5\n"   # U+FFFD itself is valid UTF-8: an edge
                     b"c d 6\n")
    edges, rejects, lines, _ = assert_same_read(spark, path, "snap")
    assert [(e["src"], e["dst"], e["seq"]) for e in edges.to_pylist()] == [
        ("a", "b", 1), ("a", "\ufffd", 5), ("c", "d", 6)]
    assert [(file, line, reason) for file, line, reason, _ in rejects] == [
        (str(path), 2, "invalid UTF-8 (at byte 2)"),
        (str(path), 3, "invalid UTF-8 (at byte 7)"),
        (str(path), 4, "invalid UTF-8 (at byte 1)"),
    ]
    assert lines == 6


def test_spark_matches_on_a_file_with_invalid_utf8(spark, tmp_path):
    """Spark crashed where it met the bytes (vertex ids); now the line is a reject."""
    from graphcep.runtime.spark import run_spark

    rows = flows(200)
    lines = [line.encode() for line in csv_lines(rows)]
    for i in range(5, len(lines), 37):
        lines[i] = lines[i].replace(b",h", b",\xffh", 1)
    path = tmp_path / "flows.csv"
    path.write_bytes(b"\n".join(lines) + b"\n")
    _, rejects, _, edges_df = assert_same_read(spark, path, "csv")
    bad = list(range(6, len(lines) + 1, 37))
    assert [line for _, line, _, _ in rejects] == bad
    job = SubgraphJob.create(parse_program(TRIANGLE), fmt="csv")
    spark_matches, _ = run_spark(spark, job, edges_df)
    local_matches, _ = run_job(job, read_edges(path, "csv").edges)
    assert records(spark_matches) == records(local_matches)
    assert not {e["seq"] for m in spark_matches.to_pylist() for e in m["edges"]} & set(bad)


def test_a_bare_carriage_return_is_part_of_a_line_on_spark(spark, tmp_path):
    path = tmp_path / "cr.txt"
    # line ends: \n, \r\n (one end, the \r dropped); a bare \r stays inside its line
    path.write_bytes(b"a b 1\r\n"
                     b"a\rb c 2\n"
                     b"b c 3\r\n"
                     b"c d 4\rd e 5\n"
                     b"e f 6")
    edges, rejects, lines, _ = assert_same_read(spark, path, "snap")
    assert [(e["src"], e["dst"], e["t"], e["seq"]) for e in edges.to_pylist()] == [
        ("a", "b", 1 * S, 1), ("b", "c", 3 * S, 3), ("e", "f", 6 * S, 5)]
    assert [(line, reason) for _, line, reason, _ in rejects] == [
        (2, "too many fields: expected 3 fields, got 4"),
        (4, "too many fields: expected 3 fields, got 6"),
    ]
    assert lines == 5


# -- file names ----------------------------------------------------------------------------


def test_spark_rejects_name_files_as_given(spark, tmp_path, monkeypatch):
    folder = tmp_path / "in put%20s"
    folder.mkdir()
    write_lines(folder / "a b.txt", ["x y 1", "broken", "y z 2"])
    write_lines(folder / "c%41.txt", ["z x 3", "also broken"])
    (tmp_path / "link.txt").symlink_to(folder / "a b.txt")
    monkeypatch.chdir(tmp_path)
    _, rejects, _, _ = assert_same_read(spark, "in put%20s", "snap")
    assert [(f, line) for f, line, _, _ in rejects] == [
        ("in put%20s/a b.txt", 2), ("in put%20s/c%41.txt", 2)]
    edges, rejects, _, _ = assert_same_read(spark, ["link.txt", "./in put%20s/c%41.txt"], "snap")
    assert [(f, line) for f, line, _, _ in rejects] == [("in put%20s/c%41.txt", 2),
                                                        ("link.txt", 2)]
    assert edges.column("seq").to_pylist() == [1, 3, (1 << 40) + 1]


def test_spark_reads_files_with_pattern_characters_literally(spark, tmp_path):
    write_lines(tmp_path / "a[1].txt", ["x y 1", "bad"])
    write_lines(tmp_path / "a1.txt", ["p q 9"])  # what the pattern a[1].txt would match
    edges, rejects, _, _ = assert_same_read(spark, [tmp_path / "a[1].txt"], "snap")
    assert edges.column("src").to_pylist() == ["x"]
    assert [(Path(f).name, line) for f, line, _, _ in rejects] == [("a[1].txt", 2)]
    # the same file twice is refused alike (its edges would be read twice)
    from graphcep.io.formats import InputError

    for read in (lambda p: read_edges(p, "snap"), lambda p: spark_read(spark, p, "snap")):
        with pytest.raises(InputError, match="the same file given twice"):
            read([tmp_path / "a[1].txt", tmp_path / "a[1].txt"])
    # names Spark's file sources skip as hidden, even when named
    write_lines(tmp_path / "_x.txt", ["r s 1", "bad"])
    write_lines(tmp_path / ".y.txt", ["s t 2"])
    edges, rejects, count, _ = assert_same_read(spark, [tmp_path / "_x.txt",
                                                        tmp_path / ".y.txt"], "snap")
    assert edges.column("src").to_pylist() == ["r", "s"]
    assert [(Path(f).name, line) for f, line, _, _ in rejects] == [("_x.txt", 2)]
    assert count == 3


def test_each_file_has_its_own_layout_on_spark(spark, tmp_path):
    write_lines(tmp_path / "1.csv", ["src,dst,t,kind", "a,b,1,x", "b,c,2,y"])
    write_lines(tmp_path / "2.csv", ["c,d,3", "d,e,4"])
    edges, rejects, lines, _ = assert_same_read(spark, tmp_path, "csv")
    assert [(e["src"], e["dst"], e["t"], e["seq"]) for e in edges.to_pylist()] == [
        ("a", "b", 1 * S, 2), ("b", "c", 2 * S, 3),
        ("c", "d", 3 * S, (1 << 40) + 1), ("d", "e", 4 * S, (1 << 40) + 2)]
    assert edges.column("kind").to_pylist() == ["x", "y", None, None]
    assert rejects == [] and lines == 5


@pytest.mark.parametrize("files", ["vast+csv", "csv+jsonl", "jsonl+csv"])
def test_files_of_several_formats_read_like_local_on_spark(spark, tmp_path, files):
    """The first file decides the format; a later file none of whose lines reads that way
    has only hinted rejects. The local reader used to fail joining them (their reason
    columns differed in nullability); both now give the same edges and rejects."""
    rows = flows(20)
    first, second = files.split("+")
    suffix = {"vast": "csv"}  # a VAST file is told by its first line
    given = write_lines(tmp_path / f"1.{suffix.get(first, first)}", WRITERS[first](rows))
    other = write_lines(tmp_path / f"2.{suffix.get(second, second)}", WRITERS[second](rows[:3]))
    # named, not as a directory (which reads only the files named for its format)
    edges, rejects, lines, _ = assert_same_read(spark, [given, other])
    assert [e["seq"] for e in edges.to_pylist()] == list(
        range(FIRST_ROW[first], FIRST_ROW[first] + 20))
    hint = (f" [no line of this file reads as {first}: it has the shape of {second}: pass "
            f"--format {second}]")
    assert [(file, line) for file, line, _, _ in rejects] == [
        (str(other), n) for n in range(1, len(WRITERS[second](rows[:3])) + 1)]
    assert all(reason.endswith(hint) for _, _, reason, _ in rejects)
    assert lines == len(WRITERS[first](rows)) + len(WRITERS[second](rows[:3]))


def test_times_read_the_other_way_get_the_time_format_hint_on_spark(spark, tmp_path):
    """A split file's rejects get their hints in the JVM: a line whose time is an
    ISO-8601 date-time names --time-format, the others --format, as the local reader."""
    path = write_lines(tmp_path / "iso.csv", ["t,src,dst", "2024-01-01T00:00:01,a,b",
                                              "noon,b,c"])
    _, rejects, _, _ = assert_same_read(spark, path, "csv")
    assert [reason for _, _, reason, _ in rejects] == [
        "field 1 (t): not a number: '2024-01-01T00:00:01' [no line of this file reads as "
        "csv: its time reads as an ISO-8601 date-time: pass --time-format iso]",
        "field 1 (t): not a number: 'noon' [no line of this file reads as csv: is --format "
        "right?]"]


@pytest.mark.parametrize("case", ["parquet as csv", "parquet after csv", "two columns"])
def test_files_without_three_fields_are_rejected_like_local_on_spark(spark, tmp_path, case):
    """A file whose lines split into fewer than three fields (a Parquet file read as CSV,
    a 2-column CSV) failed its layout in the tasks; every line is now a reject with the
    format hint, as the local reader has it."""
    import pyarrow.parquet as pq

    parquet = tmp_path / "2.parquet"
    pq.write_table(pa.table({"t": [1.0, 2.0], "src": ["a", "b"], "dst": ["b", "c"]}), parquet)
    if case == "parquet as csv":
        path, fmt, bad = parquet, "csv", parquet
    elif case == "parquet after csv":  # named: a directory of CSV files skips it
        path, fmt, bad = [write_lines(tmp_path / "1.csv", ["a,b,1", "b,c,2"]), parquet], None, parquet
    else:
        parquet.unlink()
        path = bad = write_lines(tmp_path / "two.csv", ["a,b", "c,d"])
        fmt = None
    edges, rejects, _, _ = assert_same_read(spark, path, fmt)
    assert edges.num_rows == (2 if case == "parquet after csv" else 0)
    assert rejects and {file for file, _, _, _ in rejects} == {str(bad)}
    hint = (" [no line of this file reads as csv: is --format right?]" if case == "two columns"
            else " [no line of this file reads as csv: it has the shape of parquet: pass "
            "--format parquet]")
    assert all(reason.endswith(hint) for _, _, reason, _ in rejects)


# -- damaged gzip ----------------------------------------------------------------------------


def decodable_prefix(data: bytes) -> bytes:
    """What a gzip stream decodes to up to its damage, fed to zlib one byte at a time."""
    decoder = zlib.decompressobj(16 + zlib.MAX_WBITS)
    out = []
    for i in range(len(data)):
        try:
            out.append(decoder.decompress(data[i:i + 1]))
        except zlib.error:
            break
    return b"".join(out)


def check_damaged_read(spark, path: Path, lines: list[str], at_least: int, reason: str):
    """The edges are the file's first lines, exactly, and one reject marks the damage at
    the line after them; ``at_least`` lines must have been kept."""
    edges, rejects, count, _ = assert_same_read(spark, path, "snap")
    kept = edges.num_rows
    assert kept >= at_least
    assert [(e["src"], e["dst"], e["t"], e["seq"]) for e in edges.to_pylist()] == [
        tuple(lines[i].split()[:2]) + (int(lines[i].split()[2]) * S, i + 1) for i in range(kept)]
    assert len(rejects) == 1
    file, line, why, text = rejects[0]
    assert (file, line) == (str(path), kept + 1)
    assert why == f"damaged gzip: {reason} after line {kept}"
    assert lines[kept].startswith(text)
    assert count == kept + 1


def snap_lines(count: int) -> list[str]:
    rng = random.Random(3)
    return [f"v{rng.randrange(50)} v{rng.randrange(50)} {i}" for i in range(1, count + 1)]


def test_truncated_gzip_keeps_every_complete_line_on_spark(spark, tmp_path):
    lines = snap_lines(60_000)
    data = gzip.compress("".join(line + "\n" for line in lines).encode())
    cut = data[: len(data) * 2 // 3]
    path = tmp_path / "flows.txt.gz"
    path.write_bytes(cut)
    complete = decodable_prefix(cut).count(b"\n")
    assert 0 < complete < len(lines)
    check_damaged_read(spark, path, lines, complete, "unexpected end of data")
    edges, _, _, _ = spark_read(spark, path, "snap")
    assert edges.num_rows == complete


def test_corrupt_gzip_keeps_the_lines_before_the_damage_on_spark(spark, tmp_path):
    lines = snap_lines(60_000)
    data = bytearray(gzip.compress("".join(line + "\n" for line in lines).encode()))
    middle = len(data) // 2
    data[middle:middle + 64] = bytes(64)
    path = tmp_path / "flows.gz"
    path.write_bytes(bytes(data))
    edges, rejects, count, _ = assert_same_read(spark, path, "snap")
    # deflate may decode damaged bytes into other text before it notices: the lines
    # decoded from the bytes before the damage are exact; a reject follows what was read
    intact = decodable_prefix(bytes(data[:middle])).count(b"\n")
    assert 0 < intact < len(lines)
    assert [(e["src"], e["dst"], e["t"]) for e in edges.to_pylist()[:intact]] == [
        (*line.split()[:2], int(line.split()[2]) * S) for line in lines[:intact]]
    damage = [(line, why) for _, line, why, _ in rejects if why.startswith("damaged gzip: ")]
    others = [line for _, line, why, _ in rejects if not why.startswith("damaged gzip: ")]
    assert len(damage) == 1
    assert damage[0][0] == max([*edges.column("seq").to_pylist(), *others]) + 1 == count


def test_gzip_with_a_bad_checksum_keeps_every_line_on_spark(spark, tmp_path):
    lines = snap_lines(500)
    data = bytearray(gzip.compress("".join(line + "\n" for line in lines).encode()))
    data[-8] ^= 0xFF  # the CRC-32 of the trailer
    path = tmp_path / "flows.txt.gz"
    path.write_bytes(bytes(data))
    edges, rejects, count, _ = assert_same_read(spark, path, "snap")
    assert edges.num_rows == len(lines)
    assert [(line, why.split(":")[0]) for _, line, why, _ in rejects] == [
        (len(lines) + 1, "damaged gzip")]
    assert count == len(lines) + 1


def test_spark_reads_gzip_by_its_magic_and_plain_bytes_whatever_the_name(spark, tmp_path):
    lines = snap_lines(30)
    body = "".join(line + "\n" for line in lines).encode()
    (tmp_path / "packed.txt").write_bytes(gzip.compress(body))
    (tmp_path / "plain.txt.gz").write_bytes(body)
    (tmp_path / "plain.bz2").write_bytes(body)
    edges, rejects, count, _ = assert_same_read(spark, tmp_path, "snap")
    assert edges.num_rows == 3 * len(lines) and rejects == [] and count == 3 * len(lines)


# -- Parquet with a wrong schema --------------------------------------------------------------


PARQUET_CASES = {
    "t_bool": {"t": [True], "src": ["a"], "dst": ["b"]},
    "t_binary": {"t": pa.array([b"1"]), "src": ["a"], "dst": ["b"]},
    "t_list": {"t": [[1]], "src": ["a"], "dst": ["b"]},
    "src_struct": {"t": [1], "src": [{"a": 1}], "dst": ["b"]},
    "no_t": {"x": [1], "src": ["a"], "dst": ["b"]},
}


@pytest.mark.parametrize("case", [*sorted(PARQUET_CASES), "not_parquet"])
def test_spark_refuses_bad_parquet_as_local_does_before_any_job(spark, tmp_path, case):
    import pyarrow.parquet as pq

    from graphcep.runtime.spark import read_edges_spark

    path = tmp_path / f"{case}.parquet"
    if case == "not_parquet":
        path.write_text("t,src,dst\n1,a,b\n")
    else:
        pq.write_table(pa.table(PARQUET_CASES[case]), path)
    with pytest.raises(Exception) as local:
        read_edges(path)
    context = spark.sparkContext
    context.setJobGroup("bad-parquet", "reading a bad Parquet file")
    try:
        with pytest.raises(Exception) as remote:
            read_edges_spark(spark, path)
    finally:
        context.setLocalProperty("spark.jobGroup.id", None)
    assert type(remote.value) is type(local.value)
    assert str(remote.value) == str(local.value)
    assert "\n" not in str(remote.value)
    assert context.statusTracker().getJobIdsForGroup("bad-parquet") == []


# -- JSON attributes that only later lines have ----------------------------------------------


def test_spark_keeps_json_attributes_first_seen_after_the_head(spark, tmp_path):
    from graphcep.io.formats import ReaderOptions
    from graphcep.runtime.spark import read_edges_spark

    lines = []
    for i in range(300):
        row = {"t": i, "src": f"a{i % 4}", "dst": f"b{i % 3}"}
        if i >= 150:
            row["port"] = 1000 + i
        if i == 250:
            row["zone\u0000x"] = "west"
        lines.append(json.dumps(row))
    path = write_lines(tmp_path / "late.jsonl", lines)
    options = ReaderOptions(attribute_types={"port": "int64"})
    local = read_edges(path, "jsonl", options)
    edges_df, _, _ = read_edges_spark(spark, path, "jsonl", options)
    edges = edges_df.toArrow().sort_by("seq")
    assert edges.schema.equals(local.edges.schema)
    assert edges.to_pylist() == local.edges.to_pylist()
    assert edges.column("port").to_pylist() == [None] * 150 + list(range(1150, 1300))
    assert edges.column("zone\u0000x").to_pylist() == [None] * 250 + ["west"] + [None] * 49


def test_spark_numbers_lines_exactly_across_many_blocks(spark, tmp_path):
    """Blocks of 4 KiB: line ends (\\r\\n among them) fall on every side of a block start."""
    rng = random.Random(11)
    lines, expected = [], []
    for i in range(1, 6001):
        src, dst = f"v{rng.randrange(40)}", f"v{rng.randrange(40)}"
        kind = rng.randrange(20)
        if kind == 0:  # a bare \r inside a line: whitespace between fields to snap
            lines.append(f"{src}\r{dst} {i}".encode())
            expected.append((src, dst, i * S, i))
        elif kind == 1:
            lines.append(f"{src} {dst} {i}".encode().replace(b"v", b"\xff", 1))
        else:
            end = b"\r" if kind == 2 else b""
            lines.append(f"{src} {dst} {i}".encode() + end)
            expected.append((src, dst, i * S, i))
    path = tmp_path / "many.txt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    spark.conf.set("spark.sql.files.maxPartitionBytes", "4096")
    try:
        edges, rejects, count, edges_df = assert_same_read(spark, path, "snap")
        assert edges_df.rdd.getNumPartitions() > 10
    finally:
        spark.conf.unset("spark.sql.files.maxPartitionBytes")
    assert [(e["src"], e["dst"], e["t"], e["seq"]) for e in edges.to_pylist()] == expected
    assert count == len(lines) == len(expected) + len(rejects)


def test_spark_keeps_going_after_a_damaged_file_and_refuses_when_nothing_was_read(
        spark, tmp_path):
    from graphcep.io.formats import InputError
    from graphcep.runtime.spark import read_edges_spark

    lines = snap_lines(40)
    whole = gzip.compress("".join(line + "\n" for line in lines).encode())
    (tmp_path / "a.txt.gz").write_bytes(whole[: len(whole) // 2])
    write_lines(tmp_path / "b.txt", lines[:5])
    edges, rejects, count, _ = assert_same_read(spark, tmp_path, "snap")
    damaged = [(Path(f).name, why.split(":")[0]) for f, _, why, _ in rejects]
    assert damaged == [("a.txt.gz", "damaged gzip")]
    assert edges.column("seq").to_pylist()[-5:] == [(1 << 40) + i for i in range(1, 6)]
    broken = tmp_path / "broken.gz"
    broken.write_bytes(whole[:12])  # the gzip header and nothing decodable
    with pytest.raises(InputError) as local:
        read_edges(broken, "snap")
    with pytest.raises(InputError) as remote:
        read_edges_spark(spark, broken, "snap")
    assert str(remote.value) == str(local.value)


def test_spark_drops_a_byte_order_mark_and_hints_at_the_format_like_local(spark, tmp_path):
    path = tmp_path / "bom.txt"
    path.write_bytes(b"\xef\xbb\xbfa b 1\nb c 2\n")
    edges, _, _, _ = assert_same_read(spark, path, "snap")
    assert edges.column("src").to_pylist() == ["a", "b"]
    write_lines(tmp_path / "flows.txt", ["a,b,1", "b,c,2"])  # CSV read as SNAP: no edge
    plain = tmp_path / "flows.txt"
    _, rejects, _, _ = assert_same_read(spark, plain, "snap")
    assert len(rejects) == 2 and all("--format" in why for _, _, why, _ in rejects)


# -- the line readers' fuzz, read by Spark -------------------------------------------------


def spark_fuzz_reader(request: pytest.FixtureRequest):
    """The reader fuzz's reader interface on Spark: edges in stream order, rejects sorted."""
    from graphcep.io.readers import READ_REJECT_SCHEMA
    from graphcep.runtime.spark import read_edges_spark

    spark = request.getfixturevalue("spark")

    def read(path, fmt, options):
        edges_df, rejects_df, _ = read_edges_spark(spark, path, fmt, options)
        rejects = rejects_df.toArrow().sort_by([("file", "ascending"), ("line", "ascending")])
        return edges_df.toArrow().sort_by("seq"), rejects.cast(READ_REJECT_SCHEMA)

    return read


@pytest.fixture
def fuzz(monkeypatch):
    from tests.io import test_reader_fuzz

    monkeypatch.setitem(test_reader_fuzz.READERS, "spark", spark_fuzz_reader)
    return test_reader_fuzz


@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("fmt", ["snap", "csv", "tsv", "vast", "netflow5", "jsonl"])
def test_spark_passes_the_reader_fuzz(fuzz, tmp_path, request, fmt, compress):
    fuzz.test_malformed_lines_are_rejected_and_good_ones_kept(tmp_path, request, "spark",
                                                              compress, fmt)


@pytest.mark.parametrize("fmt", ["snap", "csv", "jsonl"])
def test_spark_passes_the_reader_fuzz_on_marks_and_cut_gzip(fuzz, tmp_path, request, fmt):
    fuzz.test_byte_order_mark_at_the_start_changes_nothing(tmp_path, request, "spark", fmt)
    fuzz.test_truncated_gzip_gives_a_prefix_and_one_damage_reject(tmp_path, request, "spark",
                                                                  fmt)


# -- time-sparse input: partitions without a single edge ---------------------------------

# Two triangles 5000 s apart, a star on h, and a lone edge far from everything: every
# strategy that cuts the stream meets partitions (or shards, or cells) with no edge.
SPARSE = [("a", "b", 1), ("b", "c", 2), ("c", "a", 3), ("h", "p", 4), ("h", "q", 5),
          ("d", "e", 5000), ("e", "f", 5001), ("f", "d", 5002), ("x", "y", 9000)]
STAR = """{ t e1 b; t e2 c; starttime(e1) < starttime(e2);
            starttime(e2) - starttime(e1) <= 3; }"""
RELAY = """QUERY relay; VERTICES A, B, C; EDGES ab: A -> B; bc: B -> C;
           ORDER ab < bc; WITHIN 3 EDGES;"""


def sparse_edges() -> pa.Table:
    return pa.table({
        "t": pa.array([t * S for _, _, t in SPARSE], pa.int64()),
        "src": [s for s, _, _ in SPARSE], "dst": [d for _, d, _ in SPARSE],
        "dur": pa.array([0] * len(SPARSE), pa.int64()),
        "seq": pa.array(range(1, len(SPARSE) + 1), pa.int64()),
    })


def match_seqs(matches: pa.Table) -> list[tuple]:
    return sorted(tuple(sorted(e["seq"] for e in m)) for m in matches.column("edges").to_pylist())


def test_spark_replays_time_sparse_input_with_empty_partitions_like_local(spark):
    """An empty partition hands a task no Arrow batch at all; each strategy's task used to
    build its table with ``pa.Table.from_batches`` and failed on it ("Must pass schema")."""
    from graphcep.jobs.ddst import DDSTJob
    from graphcep.lang.ddst import parse_ddst
    from graphcep.runtime.local import replay_job
    from graphcep.runtime.spark import run_spark

    edges = sparse_edges()
    triangle, star = (SubgraphJob.create(parse_program(q)) for q in (TRIANGLE, STAR))
    expected = {"triangle": run_job(triangle, edges)[0], "star": run_job(star, edges)[0]}
    # by hand: the two triangles, and h's two edges 1 s apart
    assert match_seqs(expected["triangle"]) == [(1, 2, 3), (6, 7, 8)]
    assert match_seqs(expected["star"]) == [(4, 5)]

    unordered = spark.createDataFrame(edges).repartition(3).cache()
    # the stream in order, cut into more slices than it has edges: some are empty
    ordered = spark.createDataFrame(
        spark.sparkContext.parallelize(edges.to_pylist(), 16),
        "t long, src string, dst string, dur long, seq long").cache()
    assert ordered.rdd.glom().map(len).collect().count(0) > 0
    runs = [("triangle", unordered, {}, "shuffle"),
            ("triangle", unordered, {"shards": 8}, "shuffle"),
            ("triangle", ordered, {"strategy": "partitions"}, "partitions"),
            ("star", unordered, {"strategy": "cells", "shards": 8}, "cells"),
            ("star", ordered, {"strategy": "partitions"}, "partitions")]
    for name, df, options, strategy in runs:
        matches, stats = run_spark(spark, triangle if name == "triangle" else star, df,
                                   **options)
        assert stats.extra["strategy"] == strategy, (name, options)
        assert records(matches) == records(expected[name]), (name, options)
        if strategy == "cells":
            assert stats.extra["cells"] > 1  # a grid, not the single engine

    # a count window is cut by edge rank into range partitions, most of them empty
    relay = DDSTJob(parse_ddst(RELAY))
    wanted = replay_job(DDSTJob(parse_ddst(RELAY), "baseline"), edges)
    assert wanted.num_rows > 0
    matches, stats = run_spark(spark, relay, unordered, shards=8)
    assert stats.extra["strategy"] == "shuffle"
    assert match_seqs(matches) == match_seqs(wanted)
    unordered.unpersist()
    ordered.unpersist()
