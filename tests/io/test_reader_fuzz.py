"""Seeded fuzz of the line readers: malformed lines of every kind mixed into clean files.

For every line format, plain and gzip, a clean file of valid edges is written, then the
same good lines with a few thousand malformed lines (and harmless blank lines) put in at
random positions. Reading the mixed file must raise nothing, reject exactly the injected
bad lines with their line numbers, and give the clean file's edges -- same rows, same
order, same columns -- with ``seq`` following the good lines to their new line numbers.
A gzip cut at random offsets must give a prefix of the clean edges and one reject for
the damage.

The bad-line generators are module-level functions ``bad_<kind>(fmt, rng)`` returning
the physical lines (bytes, no line end) of one malformed record, or ``None`` where the
kind means nothing for a format; :data:`BAD_KINDS` lists them. :data:`READERS` maps a
name to a factory that, given the test's ``request`` (to fetch fixtures such as a Spark
session), returns a reader ``(path, fmt, options) -> (edges, rejects)``: every reader
is held to the same expectations on the same files.
"""

from __future__ import annotations

import gzip
import json
import random
import zlib
from collections.abc import Callable
from pathlib import Path

import pyarrow as pa
import pytest

from graphcep.io.formats import NETFLOW5_FIELDS, InputError, ReaderOptions
from graphcep.io.readers import read_edges
from graphcep.io.rejects import reason_kind

SEED = 20_261_125
GOOD_LINES = 3_000
BAD_RECORDS = 1_500
BLANK_LINES = 100
#: Small limits, so overlong lines and chunk boundaries are exercised on small files.
OPTIONS = ReaderOptions(max_line_bytes=2_048, chunk_bytes=32 << 10)
FORMATS = ("snap", "csv", "tsv", "vast", "netflow5", "jsonl")

Reader = Callable[[Path, str, ReaderOptions], tuple[pa.Table, pa.Table]]


def read_local(path: Path, fmt: str, options: ReaderOptions) -> tuple[pa.Table, pa.Table]:
    result = read_edges(path, fmt, options)
    return result.edges, result.rejects


READERS: dict[str, Callable[[pytest.FixtureRequest], Reader]] = {"local": lambda _: read_local}

# ---------------------------------------------------------------------------------------
# Good lines
# ---------------------------------------------------------------------------------------

#: Column names of a csv/tsv file's header line (``w`` is a string attribute).
TABLE_HEADER = ("src", "dst", "t", "w")
_SEPARATOR = {"snap": " ", "csv": ",", "tsv": "\t", "vast": ",", "netflow5": ","}


def good_fields(fmt: str, i: int, rng: random.Random) -> list[str]:
    """The fields of the ``i``-th good record (a JSON object's values for ``jsonl``)."""
    src, dst = f"v{rng.randrange(500)}", f"u{rng.randrange(500)}"
    t = f"{1_300_000_000 + i}.{rng.randrange(1_000_000):06d}"
    if fmt == "vast":
        return [
            t,
            "2013-04-01 07:50:16",
            "20130401075016",
            "6",
            "TCP",
            f"10.0.{rng.randrange(256)}.{rng.randrange(256)}",
            f"172.0.0.{rng.randrange(256)}",
            str(rng.randrange(65536)),
            "80",
            "0",
            "0",
            f"{rng.randrange(100)}.5",
            *(str(rng.randrange(10_000)) for _ in range(7)),
        ]
    if fmt == "netflow5":
        values = [str(rng.randrange(1_000)) for _ in NETFLOW5_FIELDS]
        values[0] = str(1_300_000_000 + i)  # unix_secs
        values[1] = str(rng.randrange(1_000_000_000))  # unix_nsecs
        values[2], values[6], values[7] = "500000", "400000", "450000"  # sysuptime, First, Last
        values[3] = values[12] = "10.0.0.1"  # exaddr, nexthop
        values[10], values[11] = src, dst
        return values
    if fmt in ("csv", "tsv"):
        return [src, dst, t, rng.choice(["x", "y z", "", "w,1" if fmt == "csv" else "w;1"])]
    return [src, dst, t]


def render(fmt: str, fields: list[str]) -> bytes:
    """One record as a line; csv quotes a field holding the delimiter, or at random."""
    if fmt == "jsonl":
        src, dst, t = fields[:3]
        return json.dumps({"src": src, "dst": dst, "t": float(t)}).encode()
    if fmt == "csv":
        fields = [f'"{f}"' if "," in f else f for f in fields]
    return _SEPARATOR[fmt].join(fields).encode()


def good_line(fmt: str, i: int, rng: random.Random) -> bytes:
    line = render(fmt, good_fields(fmt, i, rng))
    if fmt == "csv" and rng.random() < 0.1:
        first, rest = line.split(b",", 1)
        line = b'"' + first + b'",' + rest  # a quoted field that needs no quotes
    return line


def header_line(fmt: str) -> bytes | None:
    return _SEPARATOR[fmt].join(TABLE_HEADER).encode() if fmt in ("csv", "tsv") else None


# ---------------------------------------------------------------------------------------
# Malformed records: bad_<kind>(fmt, rng) -> physical lines, or None
# ---------------------------------------------------------------------------------------

_TIME_INDEX = {"snap": 2, "csv": 2, "tsv": 2, "vast": 0, "netflow5": 0}
_SRC_INDEX = {"snap": 0, "csv": 0, "tsv": 0, "vast": 5, "netflow5": 10}


def _with_field(fmt: str, rng: random.Random, index: int, value: str) -> bytes:
    fields = good_fields(fmt, rng.randrange(10**6), rng)
    fields[index] = value
    return _SEPARATOR[fmt].join(fields).encode()


def _json_record(rng: random.Random, **changes: object) -> dict:
    record: dict = {"src": f"v{rng.randrange(500)}", "dst": f"u{rng.randrange(500)}", "t": 1.5}
    record.update(changes)
    return record


def bad_unterminated_quote(fmt: str, rng: random.Random) -> list[bytes]:
    if fmt == "jsonl":
        return [b'{"src": "a", "dst": "b", "t": "1']
    return [_with_field(fmt, rng, _TIME_INDEX[fmt], '"1300000000')]


def bad_embedded_newline(fmt: str, rng: random.Random) -> list[bytes]:
    """A quoted field holding a newline: two physical lines, each short of fields."""
    line = good_line(fmt, rng.randrange(10**6), rng)
    if fmt == "jsonl":
        cut = line.index(b'"dst": "') + 9
        return [line[:cut], line[cut:]]
    fields = good_fields(fmt, rng.randrange(10**6), rng)
    sep = _SEPARATOR[fmt]
    at = rng.randrange(1, len(fields) - 1)
    head, tail = fields[at][:1], fields[at][1:]
    first = sep.join([*fields[:at], f'"{head}'])
    second = sep.join([f'{tail}"', *fields[at + 1 :]])
    return [first.encode(), second.encode()]


def bad_invalid_utf8(fmt: str, rng: random.Random) -> list[bytes]:
    line = good_line(fmt, rng.randrange(10**6), rng)
    cut = rng.randrange(1, len(line))
    return [line[:cut] + rng.choice([b"\xff", b"\xc3", b"\xe2\x82", b"\x80"]) + line[cut:]]


def bad_encoded_surrogate(fmt: str, rng: random.Random) -> list[bytes]:
    """A surrogate written as UTF-8 bytes (CESU style): not UTF-8."""
    line = good_line(fmt, rng.randrange(10**6), rng)
    return [b"\xed\xa0\x80" + line]


def bad_lone_surrogate(fmt: str, rng: random.Random) -> list[bytes] | None:
    if fmt != "jsonl":
        return None
    escape = rng.choice(["\\ud800", "\\udfff", "\\uDBFF"])
    where = rng.choice(["src", "dst", "key", "nested"])
    record = _json_record(rng)
    text = json.dumps(record)
    if where in ("src", "dst"):
        text = text.replace(f'"{record[where]}"', f'"{escape}"', 1)
    elif where == "key":
        text = text[:-1] + f', "{escape}": 1}}'
    else:
        text = text[:-1] + f', "note": [1, {{"x": "a{escape}"}}]}}'
    return [text.encode()]


def bad_bare_cr(fmt: str, rng: random.Random) -> list[bytes]:
    """Two good records joined by a bare ``\\r``: one line, never two."""
    first = good_line(fmt, rng.randrange(10**6), rng)
    return [first + b"\r" + good_line(fmt, rng.randrange(10**6), rng)]


def bad_overlong(fmt: str, rng: random.Random) -> list[bytes]:
    size = rng.choice([OPTIONS.max_line_bytes + 1, 5_000, 100_000])
    line = good_line(fmt, rng.randrange(10**6), rng)
    return [line + b" " * (size - len(line))]


def bad_int64_extreme(fmt: str, rng: random.Random) -> list[bytes]:
    value = rng.choice(["-9223372036854775808", "9223372036854775807", "99999999999999999999"])
    if fmt == "jsonl":
        return [json.dumps(_json_record(rng)).replace("1.5", value).encode()]
    return [_with_field(fmt, rng, _TIME_INDEX[fmt], value)]


def bad_not_finite(fmt: str, rng: random.Random) -> list[bytes]:
    if fmt == "jsonl":
        value = rng.choice(["NaN", "Infinity", "-Infinity", '"nan"', '"inf"'])
        return [json.dumps(_json_record(rng)).replace("1.5", value).encode()]
    return [_with_field(fmt, rng, _TIME_INDEX[fmt], rng.choice(["nan", "inf", "-Infinity"]))]


def bad_not_a_number(fmt: str, rng: random.Random) -> list[bytes]:
    if fmt == "jsonl":
        return [json.dumps(_json_record(rng, t=rng.choice(["abc", True, [1], None]))).encode()]
    return [_with_field(fmt, rng, _TIME_INDEX[fmt], rng.choice(["abc", "1..2", "12:00", "t"]))]


def bad_missing_field(fmt: str, rng: random.Random) -> list[bytes]:
    if fmt == "jsonl":
        record = _json_record(rng)
        del record[rng.choice(["src", "dst", "t"])]
        return [json.dumps(record).encode()]
    fields = good_fields(fmt, rng.randrange(10**6), rng)
    keep = 2 if fmt == "snap" else len(fields) - 1
    return [_SEPARATOR[fmt].join(fields[:keep]).encode()]


def bad_extra_field(fmt: str, rng: random.Random) -> list[bytes]:
    if fmt == "jsonl":
        return [json.dumps(_json_record(rng)).encode() + b' {"x": 1}']
    fields = good_fields(fmt, rng.randrange(10**6), rng)
    extra = ["x", "y"] if fmt == "vast" else ["x"]  # 20 VAST fields are a labelled line
    return [_SEPARATOR[fmt].join([*fields, *extra]).encode()]


def bad_empty_vertex(fmt: str, rng: random.Random) -> list[bytes] | None:
    if fmt == "jsonl":
        return [json.dumps(_json_record(rng, src="")).encode()]
    if fmt == "snap":
        return None  # whitespace separates SNAP fields: an empty one cannot be written
    return [_with_field(fmt, rng, _SRC_INDEX[fmt], "")]


def bad_lone_bom(fmt: str, rng: random.Random) -> list[bytes]:
    """A byte order mark inside the file is text: with one letter, it is one odd field
    (at the start of the file the mark is dropped and the letter is the odd field)."""
    return [b"\xef\xbb\xbfx"]


def bad_json_shape(fmt: str, rng: random.Random) -> list[bytes] | None:
    if fmt != "jsonl":
        return None
    return [
        rng.choice(
            [
                b"[1, 2, 3]",
                b'"text"',
                b"{",
                b'{"src": {"a": 1}, "dst": "b", "t": 1}',
                b"[" * 50_000 + b"]" * 50_000,
            ]
        )[: OPTIONS.max_line_bytes]
    ]


def bad_netflow_range(fmt: str, rng: random.Random) -> list[bytes] | None:
    if fmt != "netflow5":
        return None
    index = rng.choice([1, 2, 6, 7])  # unix_nsecs, sysuptime, First, Last
    return [_with_field(fmt, rng, index, rng.choice(["-1", "4294967296", "1000000000000"]))]


BAD_KINDS: dict[str, Callable[[str, random.Random], list[bytes] | None]] = {
    name.removeprefix("bad_"): func
    for name, func in sorted(globals().items())
    if name.startswith("bad_") and callable(func)
}

#: Lines that are neither edges nor rejects (skipped).
BLANKS = (b"", b"   ", b"\t", b" \r")

# ---------------------------------------------------------------------------------------
# Files
# ---------------------------------------------------------------------------------------


def build(fmt: str, seed: int) -> tuple[list[bytes], list[bytes], dict[int, str], dict[int, int]]:
    """(clean lines, mixed lines, bad line number -> kind, good clean line -> mixed line).

    Line numbers are 1-based; a csv/tsv header stays line 1 of both files."""
    rng = random.Random(seed)
    header = header_line(fmt)
    goods = [good_line(fmt, i, rng) for i in range(GOOD_LINES)]
    items: list[tuple[str, list[bytes]]] = [("good", [g]) for g in goods]
    kinds = [k for k in BAD_KINDS if BAD_KINDS[k](fmt, random.Random(0)) is not None]
    for n in range(BAD_RECORDS):
        kind = kinds[n % len(kinds)]
        items.append((kind, BAD_KINDS[kind](fmt, rng) or []))
    items.extend(("blank", [rng.choice(BLANKS)]) for _ in range(BLANK_LINES))
    # Shuffle the extra items among the good ones, keeping the good ones in order.
    extra = items[GOOD_LINES:]
    rng.shuffle(extra)
    slots = sorted(rng.sample(range(len(items)), len(extra)))
    order: list[tuple[str, list[bytes]]] = []
    good_iter, extra_iter = iter(items[:GOOD_LINES]), iter(extra)
    slot_set = set(slots)
    for position in range(len(items)):
        order.append(next(extra_iter) if position in slot_set else next(good_iter))
    clean = ([header] if header else []) + goods
    mixed = [header] if header else []
    bad: dict[int, str] = {}
    moved: dict[int, int] = {}
    clean_line = len(clean) - len(goods)
    for kind, lines in order:
        if kind == "good":
            clean_line += 1
            moved[clean_line] = len(mixed) + 1
        for line in lines:
            mixed.append(line)
            if kind not in ("good", "blank"):
                bad[len(mixed)] = kind
    return clean, mixed, bad, moved


def line_ends(lines: list[bytes], rng: random.Random, bad: dict[int, str]) -> bytes:
    """Join lines with ``\\n``, or ``\\r\\n`` at random for lines that are not bad."""
    out = []
    for number, line in enumerate(lines, start=1):
        crlf = number not in bad and rng.random() < 0.2
        out.append(line + (b"\r\n" if crlf else b"\n"))
    return b"".join(out)


def write(path: Path, data: bytes, compress: bool) -> Path:
    path.write_bytes(gzip.compress(data, mtime=0) if compress else data)
    return path


#: Reject kind expected for each bad kind ("" = any reason).
EXPECTED_KIND = {
    "invalid_utf8": "invalid UTF-8",
    "encoded_surrogate": "invalid UTF-8",
    "lone_surrogate": "invalid JSON string",
    "overlong": "line longer than max_line_bytes",
}

# ---------------------------------------------------------------------------------------
# Tests
# ---------------------------------------------------------------------------------------


def without_seq(table: pa.Table) -> pa.Table:
    return table.drop_columns(["seq"])


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("compress", [False, True], ids=["plain", "gz"])
@pytest.mark.parametrize("fmt", FORMATS)
def test_malformed_lines_are_rejected_and_good_ones_kept(
    tmp_path: Path, request: pytest.FixtureRequest, reader: str, compress: bool, fmt: str
) -> None:
    seed = SEED + FORMATS.index(fmt)
    clean_lines, mixed_lines, bad, moved = build(fmt, seed)
    suffix = ".gz" if compress else ""
    clean_path = write(tmp_path / f"clean.{fmt}{suffix}", b"\n".join(clean_lines) + b"\n", compress)
    mixed_data = line_ends(mixed_lines, random.Random(seed), bad)
    mixed_path = write(tmp_path / f"mixed.{fmt}{suffix}", mixed_data, compress)
    read = READERS[reader](request)

    applicable = {k for k, make in BAD_KINDS.items() if make(fmt, random.Random(0)) is not None}
    assert set(bad.values()) == applicable and len(bad) >= BAD_RECORDS

    clean_edges, clean_rejects = read(clean_path, fmt, OPTIONS)
    assert clean_rejects.num_rows == 0
    assert clean_edges.num_rows == GOOD_LINES
    edges, rejects = read(mixed_path, fmt, OPTIONS)

    rows = rejects.to_pylist()
    got = {r["line"]: r for r in rows}
    assert len(got) == len(rows), "a line rejected twice"
    assert sorted(got) == sorted(bad), (
        f"not rejected: {sorted(set(bad) - set(got))[:5]}, "
        f"rejected but good: {[got[n] for n in sorted(set(got) - set(bad))[:3]]}"
    )
    for number, kind in bad.items():
        assert got[number]["file"] == str(mixed_path)
        expected = EXPECTED_KIND.get(kind, "")
        assert reason_kind(got[number]["reason"]).startswith(expected), (kind, got[number])
        if kind == "overlong":
            size = len(mixed_lines[number - 1])
            assert f"({size} > {OPTIONS.max_line_bytes} bytes)" in got[number]["reason"]

    assert edges.schema == clean_edges.schema
    assert without_seq(edges).equals(without_seq(clean_edges))
    clean_seq = clean_edges.column("seq").to_pylist()
    assert edges.column("seq").to_pylist() == [moved[s] for s in clean_seq]


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_byte_order_mark_at_the_start_changes_nothing(
    tmp_path: Path, request: pytest.FixtureRequest, reader: str, fmt: str
) -> None:
    read = READERS[reader](request)
    clean_lines, _, _, _ = build(fmt, SEED)
    data = b"\n".join(clean_lines[:200]) + b"\n"
    plain, _ = read(write(tmp_path / f"a.{fmt}", data, False), fmt, OPTIONS)
    marked, rejects = read(
        write(tmp_path / f"b.{fmt}", b"\xef\xbb\xbf" + data, False), fmt, OPTIONS
    )
    assert rejects.num_rows == 0
    assert marked.equals(plain)


def decompressible(data: bytes) -> bytes:
    """Everything zlib can decompress from the start of a gzip member, however it ends."""
    return zlib.decompressobj(wbits=31).decompress(data)


@pytest.mark.parametrize("reader", sorted(READERS))
@pytest.mark.parametrize("fmt", FORMATS)
def test_truncated_gzip_gives_a_prefix_and_one_damage_reject(
    tmp_path: Path, request: pytest.FixtureRequest, reader: str, fmt: str
) -> None:
    read = READERS[reader](request)
    rng = random.Random(SEED + 100 + FORMATS.index(fmt))
    clean_lines, _, _, _ = build(fmt, SEED)
    data = b"\n".join(clean_lines) + b"\n"
    whole = gzip.compress(data, mtime=0)
    clean, _ = read(write(tmp_path / f"c.{fmt}.gz", data, True), fmt, OPTIONS)
    header = 1 if header_line(fmt) else 0
    for offset in sorted(rng.sample(range(2, len(whole)), 12)):
        path = tmp_path / f"t{offset}.{fmt}.gz"
        path.write_bytes(whole[:offset])
        # The oracle: the whole lines among the bytes that can be decompressed.
        lines = decompressible(whole[:offset]).count(b"\n")
        if lines == 0:
            with pytest.raises(InputError, match="damaged gzip: .* after line 0"):
                read(path, fmt, OPTIONS)
            continue
        edges, rejects = read(path, fmt, OPTIONS)
        assert edges.equals(clean.slice(0, lines - header)), offset
        assert rejects.to_pylist() == [
            {
                "file": str(path),
                "line": lines + 1,
                "reason": f"damaged gzip: unexpected end of data after line {lines}",
                "text": rejects.column("text")[0].as_py(),
            }
        ], offset
        assert data.split(b"\n")[lines].startswith(rejects.column("text")[0].as_py().encode())
