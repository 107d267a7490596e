"""Synthetic netflow streams: SAM's random-pool generator, planted patterns, and writers.

:func:`generate_netflow` reproduces the random-pool netflow generator of the SAM project
(``RandomPoolGenerator``): each edge goes from a uniformly drawn ``node<i>`` to a
uniformly drawn *different* ``node<j>``, at ``rate`` edges per second. Unlike SAM's
``rand()`` it is reproducible from a seed (NumPy ``default_rng``) and fully vectorized.

Decisions
---------
* ``dst`` is drawn from the ``V - 1`` other vertices directly (draw in ``[0, V-1)``, add one
  when ``>= src``): the same distribution as SAM's redraw-while-equal loop, no loop.
* ``t_i = start + i / rate`` seconds for ``i = 0, 1, ...``, rounded half-even to whole
  microseconds with integer arithmetic (``rate`` is taken as the exact decimal it was
  written as: ``0.3`` is three tenths), so ``t_i * rate == i * 10**6`` exactly whenever
  ``rate`` divides ``10**6 * i``.
* ``dur`` is 1 s as in SAM. VAST attributes are filled plausibly: protocol 6/"tcp" or
  17/"udp", ports uniform in ``[0, 65535]``, payload bytes, packet counts, total bytes =
  payload + 40 per packet, ``ParseDate``/``DateTime`` printed from ``t`` (UTC).
* ``seq`` is ``1..n``: the line numbers the file will have when written without header,
  so :func:`write_vast_csv` then :func:`graphcep.io.readers.read_edges` gives the same
  table back.
* :func:`generate_planted` builds streams with ``k`` known pattern instances on their own
  vertices (``plant<j>_...``) plus optional noise edges on other vertices
  (``noise<i>``). Noise cannot complete a planted instance (no shared vertex), but noise
  edges may form patterns among themselves, so exact-recall tests should use
  ``noise_edges=0`` or only count matches on ``plant`` vertices.
"""

from __future__ import annotations

import gzip
import io
import json
import os
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from graphcep.events import US_PER_SECOND, format_seconds, normalize_edges, seconds_to_us
from graphcep.io.formats import VAST_FIELDS, format_seconds_array

#: Patterns :func:`generate_planted` can plant.
PLANTED_PATTERNS: tuple[str, ...] = ("triangle", "watering_hole", "fan_in")
_PARQUET_METADATA = {b"graphcep.time_unit": b"us"}


def _exact(value: float | int | str | Decimal | Fraction) -> Fraction:
    """A number as an exact fraction; floats mean the decimal they print as."""
    if isinstance(value, bool):
        raise TypeError("a number is needed, not a bool")
    if isinstance(value, Fraction | int):
        return Fraction(value)
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(Decimal(str(value).strip()))


def _round_half_even(num: np.ndarray, den: int) -> np.ndarray:
    """``round(num / den)`` half-even, elementwise, for non-negative int64 ``num``."""
    q, r = np.divmod(num, den)
    return q + ((2 * r > den) | ((2 * r == den) & (q % 2 == 1)))


#: 9999-12-31 23:59:59 UTC in µs: the last time a ``ParseDate`` (``%Y-...``) can show.
LAST_DATE_US = 253_402_300_799 * US_PER_SECOND


def arrival_times(n: int, rate: float | int | str | Fraction, start_us: int = 0) -> np.ndarray:
    """Exact start times ``start_us + round(i * 10**6 / rate)`` µs for ``i < n``.

    Raises
    ------
    ValueError
        When ``rate`` is not positive.
    """
    r = _exact(rate)
    if r <= 0:
        raise ValueError(f"rate must be positive, got {rate!r}")
    step = Fraction(US_PER_SECOND) / r
    a, b = step.numerator, step.denominator
    if n and start_us + Fraction((n - 1) * a, b) > LAST_DATE_US:
        raise ValueError(f"{n:,} edges at {rate} per second end past 9999-12-31, the last "
                         "date the VAST columns can write: raise the rate or lower the edges")
    i = np.arange(n, dtype=np.int64)
    if n == 0 or ((n - 1) * a < 2**62 and b < 2**61):
        offsets = _round_half_even(i * a, b)
    else:  # astronomically slow rates: exact Python integers
        offsets = np.array([round(Fraction(int(k) * a, b)) for k in i], dtype=np.int64)
    return offsets.astype(np.int64) + start_us


def _names(prefix: str, count: int) -> pa.Array:
    """``prefix0 .. prefix<count-1>`` as a string array (vectorized)."""
    numbers = pa.array(np.arange(count, dtype=np.int64)).cast(pa.string())
    return pc.binary_join_element_wise(prefix, numbers, "")


def _dates(t_us: np.ndarray) -> tuple[pa.Array, pa.Array]:
    """VAST ``ParseDate`` and compact ``DateTime`` of each time (UTC), via unique seconds."""
    seconds = np.floor_divide(t_us, US_PER_SECOND)
    unique, inverse = np.unique(seconds, return_inverse=True)
    stamps = pa.array(unique, pa.timestamp("s"))
    parse = pc.strftime(stamps, format="%Y-%m-%d %H:%M:%S")
    compact = pc.strftime(stamps, format="%Y%m%d%H%M%S")
    index = pa.array(inverse.reshape(-1))
    return parse.take(index), compact.take(index)


def generate_netflow(
    edges: int,
    vertices: int,
    rate: float | int | str | Fraction = 1,
    seed: int = 0,
    start_s: float | int | str = 0,
) -> pa.Table:
    """SAM-style random-pool netflows as an edge table with VAST attributes.

    Parameters
    ----------
    edges
        Number of edges ``n``.
    vertices
        Pool size ``V >= 2``; vertices are ``node0 .. node<V-1>``.
    rate
        Edges per second ``R``; edge ``i`` starts at ``start_s + i / R`` (exact µs).
    seed
        Seed of :func:`numpy.random.default_rng`; same seed, same table.
    start_s
        Time of the first edge, in seconds.

    Returns
    -------
    pyarrow.Table
        Edge schema (``seq`` = 1..n) then the VAST attributes (without ``Label``).
    """
    if vertices < 2:
        raise ValueError("need at least 2 vertices for edges without self loops")
    if edges < 0:
        raise ValueError("edges must be >= 0")
    rng = np.random.default_rng(seed)
    src = rng.integers(0, vertices, size=edges)
    dst = rng.integers(0, vertices - 1, size=edges)
    dst += dst >= src  # uniform over the V-1 vertices other than src
    t = arrival_times(edges, rate, seconds_to_us(str(start_s)))
    names = _names("node", vertices)
    columns = {
        "t": pa.array(t, pa.int64()),
        "src": names.take(pa.array(src)),
        "dst": names.take(pa.array(dst)),
        "dur": pa.array(np.full(edges, US_PER_SECOND, dtype=np.int64)),
        "seq": pa.array(np.arange(1, edges + 1, dtype=np.int64)),
    }
    columns.update(_vast_attributes(rng, t))
    return pa.table(columns)


def _vast_attributes(rng: np.random.Generator, t: np.ndarray) -> dict[str, pa.Array]:
    n = len(t)
    tcp = rng.random(n) < 0.5
    ports = rng.integers(0, 65536, size=(2, n))
    packets = rng.integers(1, 64, size=(2, n))
    payload = rng.integers(0, 1461, size=(2, n)) * packets
    parse, compact = _dates(t)
    return {
        "ParseDate": parse,
        "DateTime": compact,
        "IpLayerProtocol": pa.array(np.where(tcp, 6, 17).astype(np.int64)),
        "IpLayerProtocolCode": pc.if_else(pa.array(tcp), "tcp", "udp"),
        "SourcePort": pa.array(ports[0]),
        "DestPort": pa.array(ports[1]),
        "MoreFragments": pa.array(np.zeros(n, np.int64)),
        "CountFragments": pa.array(np.zeros(n, np.int64)),
        "SrcPayloadBytes": pa.array(payload[0]),
        "DestPayloadBytes": pa.array(payload[1]),
        "SrcTotalBytes": pa.array(payload[0] + 40 * packets[0]),
        "DestTotalBytes": pa.array(payload[1] + 40 * packets[1]),
        "FirstSeenSrcPacketCount": pa.array(packets[0]),
        "FirstSeenDestPacketCount": pa.array(packets[1]),
        "RecordForceOut": pa.array(np.zeros(n, np.int64)),
    }


# ---------------------------------------------------------------------------------------
# Planted patterns
# ---------------------------------------------------------------------------------------


@dataclass
class Planted:
    """A stream with known pattern instances.

    Attributes
    ----------
    table
        Edge table in stream order (``seq`` = 1..n, ties in ``t`` broken by ``seq``).
    instances
        One tuple of ``seq`` numbers per planted instance, in pattern-edge order
        (triangle: a->b, b->c, c->a; watering hole: target->bait, target->controller;
        fan-in: leaf edges by time).
    pattern
        The pattern name.
    """

    table: pa.Table
    instances: list[tuple[int, ...]]
    pattern: str


def _increasing_offsets(rng: np.random.Generator, k: int, m: int, span: int) -> np.ndarray:
    """``k`` rows of ``m`` strictly increasing offsets in ``[0, span]`` starting at 0."""
    if m == 1:
        return np.zeros((k, 1), dtype=np.int64)
    if span < m - 1:
        raise ValueError("window too small for that many strictly increasing times")
    draws = np.sort(rng.integers(1, span - (m - 2) + 1, size=(k, m - 1)), axis=1)
    # Adding 0, 1, 2 ... to sorted draws makes them strictly increasing, still <= span.
    draws += np.arange(m - 1)
    return np.hstack([np.zeros((k, 1), dtype=np.int64), draws])


def _planted_edges(
    pattern: str, k: int, window: int, rng: np.random.Generator, fan: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(src names, dst names, offsets µs, durations µs), each shaped (k, m)."""
    j = np.arange(k)[:, None].astype(str)
    span = max(window * 9 // 10, 1)  # strictly inside the window whether it is < or <=
    if pattern == "triangle":
        roles = np.array([["a", "b"], ["b", "c"], ["c", "a"]])
        offsets = _increasing_offsets(rng, k, 3, span)
        durs = np.full((k, 3), US_PER_SECOND, dtype=np.int64)
    elif pattern == "watering_hole":
        roles = np.array([["target", "bait"], ["target", "controller"]])
        bait_dur = rng.integers(max(span // 10, 1), max(span // 2, 2), size=k)
        gap = rng.integers(1, max(span - bait_dur.max(), 2), size=k)
        offsets = np.stack([np.zeros(k, np.int64), bait_dur + gap], axis=1)
        durs = np.stack([bait_dur, np.full(k, US_PER_SECOND)], axis=1).astype(np.int64)
    elif pattern == "fan_in":
        roles = np.array([[f"leaf{i}", "hub"] for i in range(fan)])
        offsets = _increasing_offsets(rng, k, fan, span)
        durs = np.full((k, fan), US_PER_SECOND, dtype=np.int64)
    else:
        raise ValueError(f"unknown pattern {pattern!r}; use one of {', '.join(PLANTED_PATTERNS)}")
    prefix = np.char.add(np.char.add("plant", j), "_")
    src = np.char.add(prefix, roles[:, 0][None, :])
    dst = np.char.add(prefix, roles[:, 1][None, :])
    return src, dst, offsets, durs


def generate_planted(
    pattern: str,
    k: int,
    *,
    window_s: float | int | str = 10,
    gap_s: float | int | str | None = None,
    noise_edges: int = 0,
    noise_vertices: int = 100,
    fan: int = 3,
    seed: int = 0,
    start_s: float | int | str = 0,
) -> Planted:
    """A stream with ``k`` disjoint planted instances of ``pattern`` (and optional noise).

    Parameters
    ----------
    pattern
        ``"triangle"`` (a->b, b->c, c->a at strictly increasing times),
        ``"watering_hole"`` (target->bait, then target->controller starting after the bait
        edge ends) or ``"fan_in"`` (``fan`` leaves -> hub at increasing times).
    k
        Number of instances; instance ``j`` uses vertices ``plant<j>_<role>``.
    window_s
        Every instance spans at most 90 % of this (first start to last start).
    gap_s
        Time between the starts of consecutive instances (default ``2 * window_s``).
    noise_edges, noise_vertices
        Random edges among ``noise0 .. noise<V-1>`` (no self loops), spread uniformly over
        the planted time span.
    fan
        Leaves per fan-in star.
    seed
        Seed of :func:`numpy.random.default_rng`.
    start_s
        Start of the first instance, seconds.
    """
    rng = np.random.default_rng(seed)
    window = seconds_to_us(str(window_s))
    gap = 2 * window if gap_s is None else seconds_to_us(str(gap_s))
    start = seconds_to_us(str(start_s))
    src, dst, offsets, durs = _planted_edges(pattern, k, window, rng, fan)
    base = start + gap * np.arange(k, dtype=np.int64)[:, None]
    t = (base + offsets).reshape(-1)
    src, dst, durs = src.reshape(-1), dst.reshape(-1), durs.reshape(-1)
    m = offsets.shape[1] if k else 0
    origin = np.arange(len(t))  # planted edges first: ties with noise keep them first
    noise = _noise(rng, noise_edges, noise_vertices, start, start + gap * max(k, 1))
    all_t = np.concatenate([t, noise[0]])
    order = np.lexsort((np.concatenate([origin, len(t) + np.arange(noise_edges)]), all_t))
    rank = np.empty(len(order), dtype=np.int64)
    rank[order] = np.arange(1, len(order) + 1)
    table = pa.table(
        {
            "t": pa.array(all_t[order], pa.int64()),
            "src": pa.array(np.concatenate([src, noise[1]])[order].tolist(), pa.string()),
            "dst": pa.array(np.concatenate([dst, noise[2]])[order].tolist(), pa.string()),
            "dur": pa.array(np.concatenate([durs, noise[3]])[order], pa.int64()),
            "seq": pa.array(np.arange(1, len(order) + 1, dtype=np.int64)),
        }
    )
    instances = [tuple(int(s) for s in rank[i * m : (i + 1) * m]) for i in range(k)]
    return Planted(table, instances, pattern)


def _noise(
    rng: np.random.Generator, n: int, vertices: int, lo: int, hi: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """(t, src, dst, dur) of ``n`` random edges among ``noise<i>`` vertices."""
    if n and vertices < 2:
        raise ValueError("noise needs at least 2 vertices")
    t = rng.integers(lo, max(hi, lo + 1), size=n).astype(np.int64)
    a = rng.integers(0, max(vertices, 1), size=n)
    b = rng.integers(0, max(vertices - 1, 1), size=n)
    b += b >= a
    name = np.char.add("noise", np.arange(max(vertices, 1)).astype(str))
    return t, name[a], name[b], np.full(n, US_PER_SECOND, dtype=np.int64)


# ---------------------------------------------------------------------------------------
# Writers
# ---------------------------------------------------------------------------------------

_VAST_DEFAULTS = {"string": "", "int64": "0"}
#: Output formats of :func:`write_edges`.
WRITE_FORMATS: tuple[str, ...] = ("vast", "snap", "csv", "jsonl", "parquet")


def _open_text_out(path: Path) -> io.BufferedIOBase:
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix.lower() == ".gz":
        return gzip.open(path, "wb")  # type: ignore[return-value]
    return open(path, "wb")  # noqa: SIM115 -- closed by the caller's with-block


def _write_lines(lines: pa.Array, path: Path) -> None:
    """Write a string array as newline-terminated lines, straight from its data buffer."""
    terminated = pc.binary_join_element_wise(lines, "\n", "").cast(pa.large_string())
    offsets = np.frombuffer(terminated.buffers()[1], dtype=np.int64)
    start, end = offsets[terminated.offset], offsets[terminated.offset + len(terminated)]
    data = terminated.buffers()[2]
    with _open_text_out(path) as out:
        if len(terminated):
            out.write(memoryview(data)[start:end])


def _check_no(column: pa.Array, chars: str, what: str) -> None:
    pattern = "[" + "".join("\\t" if c == "\t" else "\\n" if c == "\n" else c for c in chars) + "]"
    hit = pc.any(pc.match_substring_regex(column, pattern)).as_py()
    if hit:
        raise ValueError(f"{what} values contain a separator ({chars!r}); cannot write them")


def write_vast_csv(table: pa.Table, path: str | os.PathLike) -> None:
    """Write edges as VAST 2013 MC3 CSV text (no header; ``.gz`` compresses).

    ``TimeSeconds``/``DurationSeconds`` are printed exactly from µs. Attributes missing
    from the table are written as 0 (numbers) or empty (text); a ``Label`` column without
    nulls is written first, giving the 20-field CTU variant. The reader gives the same
    table back (``seq`` = line number).
    """
    table = normalize_edges(table)
    columns = []
    for name, kind in VAST_FIELDS:
        columns.append(_vast_column_text(table, name, kind))
    label = "Label" in table.column_names and table.column("Label").null_count == 0
    if label:
        columns.insert(0, table.column("Label").combine_chunks().cast(pa.string()))
    for (name, kind), column in zip(VAST_FIELDS, columns[int(label) :], strict=True):
        if kind in ("src", "dst", "string"):
            _check_no(column, ",\n", name)
    lines = pc.binary_join_element_wise(*columns, ",") if columns else pa.array([], pa.string())
    _write_lines(lines, Path(path))


def _vast_column_text(table: pa.Table, name: str, kind: str) -> pa.Array:
    core = {"t": "t", "src": "src", "dst": "dst", "dur": "dur"}.get(kind)
    if core in ("t", "dur"):
        return format_seconds_array(table.column(core).to_numpy())
    if core is not None:
        return table.column(core).combine_chunks().cast(pa.string())
    n = table.num_rows
    if name not in table.column_names:
        if name in ("ParseDate", "DateTime"):
            parse, compact = _dates(table.column("t").to_numpy())
            return parse if name == "ParseDate" else compact
        return pa.array([_VAST_DEFAULTS[kind]] * n, pa.string())
    return pc.fill_null(table.column(name).combine_chunks().cast(pa.string()), "")


def write_snap(table: pa.Table, path: str | os.PathLike) -> None:
    """Write ``src dst t`` lines (t in exact seconds); other columns are not written."""
    table = normalize_edges(table)
    src = table.column("src").combine_chunks()
    dst = table.column("dst").combine_chunks()
    for name, column in (("src", src), ("dst", dst)):
        _check_no(column, " \t\n", name)
    t = format_seconds_array(table.column("t").to_numpy())
    lines = pc.binary_join_element_wise(src, dst, t, " ")
    _write_lines(lines, Path(path))


def write_csv(table: pa.Table, path: str | os.PathLike) -> None:
    """Write CSV with a header: ``t`` and ``dur`` in exact seconds, then the other columns."""
    table = normalize_edges(table)
    out = table.set_column(0, "t", format_seconds_array(table.column("t").to_numpy()))
    index = out.schema.get_field_index("dur")
    out = out.set_column(index, "dur", format_seconds_array(table.column("dur").to_numpy()))
    out = out.drop_columns(["seq"])
    buffer = io.BytesIO()
    pacsv.write_csv(out, buffer, pacsv.WriteOptions(quoting_style="needed"))
    with _open_text_out(Path(path)) as sink:
        sink.write(buffer.getvalue())


def write_jsonl(table: pa.Table, path: str | os.PathLike) -> None:
    """Write one JSON object per edge; ``t``/``dur`` are exact decimal seconds (numbers)."""
    table = normalize_edges(table)
    with _open_text_out(Path(path)) as out:
        for row in table.to_pylist():
            fields = [
                f'"t":{format_seconds(row["t"])}',
                f'"src":{json.dumps(row["src"])}',
                f'"dst":{json.dumps(row["dst"])}',
                f'"dur":{format_seconds(row["dur"])}',
            ]
            fields += [
                f"{json.dumps(k)}:{json.dumps(v, default=str)}"
                for k, v in row.items()
                if k not in ("t", "src", "dst", "dur", "seq")
            ]
            out.write(("{" + ",".join(fields) + "}\n").encode())


def write_parquet(table: pa.Table, path: str | os.PathLike) -> None:
    """Write the edge table as is (µs integers), tagged ``graphcep.time_unit = us``."""
    table = normalize_edges(table)
    metadata = dict(table.schema.metadata or {})
    metadata.update(_PARQUET_METADATA)
    Path(path).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(table.replace_schema_metadata(metadata), path)


_WRITERS = {
    "vast": write_vast_csv,
    "snap": write_snap,
    "csv": write_csv,
    "jsonl": write_jsonl,
    "parquet": write_parquet,
}


def output_format(path: str | os.PathLike) -> str:
    """Writer format from a file name: ``.parquet``, ``.jsonl``/``.ndjson``, ``.csv``
    (VAST), anything else snap; ``.gz`` is looked through."""
    suffixes = [s.lower() for s in Path(path).suffixes]
    if suffixes and suffixes[-1] == ".gz":
        suffixes = suffixes[:-1]
    last = suffixes[-1] if suffixes else ""
    return {".parquet": "parquet", ".jsonl": "jsonl", ".ndjson": "jsonl", ".csv": "vast"}.get(
        last, "snap"
    )


def write_edges(table: pa.Table, path: str | os.PathLike, fmt: str | None = None) -> None:
    """Write an edge table as ``vast``, ``snap``, ``csv``, ``jsonl`` or ``parquet``.

    ``fmt=None`` picks it with :func:`output_format`. Text formats are gzip-compressed
    when the path ends in ``.gz``.
    """
    fmt = fmt or output_format(path)
    try:
        writer = _WRITERS[fmt]
    except KeyError:
        raise ValueError(
            f"unknown output format {fmt!r}; use one of {', '.join(_WRITERS)}"
        ) from None
    writer(table, path)


__all__ = [
    "PLANTED_PATTERNS",
    "WRITE_FORMATS",
    "Planted",
    "arrival_times",
    "generate_netflow",
    "generate_planted",
    "output_format",
    "write_csv",
    "write_edges",
    "write_jsonl",
    "write_parquet",
    "write_snap",
    "write_vast_csv",
]
