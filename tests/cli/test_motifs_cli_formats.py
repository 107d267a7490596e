"""``graphcep motifs``: ISO-8601 input times, δ written in one canonical form, quoted vertex
ids in the per-vertex text, and the PNG's grid and bound.

The expected tables are those SNAP's own ``temporalmotifsmain`` wrote
(``tests/fixtures/motifs/SOURCE.md``); per-vertex counts come from the brute-force counter
of ``tests/motifs_oracle.py``.
"""

from __future__ import annotations

import csv
import datetime as dt
import json
import struct

import pytest

from graphcep.cli import main
from graphcep.io.formats import ReaderOptions
from graphcep.motifs import count_motifs
from tests.motifs_oracle import Oracle
from tests.paths import FIXTURES

EXAMPLE = FIXTURES / "motifs" / "snap-example-temporal-graph.txt"
EXPECTED = json.loads((FIXTURES / "motifs" / "snap-tables.json").read_text())["files"][
    "snap-example-temporal-graph.txt"]
ROWS = [line.split() for line in EXAMPLE.read_text().splitlines()
        if line.strip() and not line.startswith("#")]
EPOCH = 1_700_000_000  # the example's times are seconds after this instant
ZONE = dt.timezone(dt.timedelta(hours=5, minutes=30))


def _iso(seconds: int) -> str:
    return dt.datetime.fromtimestamp(EPOCH + seconds, ZONE).isoformat()


def _write_csv(path, rows) -> None:
    with open(path, "w", newline="") as f:
        writer = csv.writer(f, lineterminator="\n")
        writer.writerow(["src", "dst", "t"])
        writer.writerows(rows)


def _json(capsys) -> dict:
    return json.loads(capsys.readouterr().out)


# -- ISO-8601 times ---------------------------------------------------------------------
def test_iso_times_count_as_the_same_data_with_numbers(tmp_path, capsys):
    """SNAP's example with ISO-8601 times (a +05:30 zone) gives SNAP's tables under
    --time-format iso; without it every line is a reject, and the run ends with status 2
    and the summary."""
    iso = tmp_path / "iso.csv"
    _write_csv(iso, [(s, d, _iso(int(t))) for s, d, t in ROWS])
    argv = ["motifs", "-i", str(iso), "--delta", "10,50,300", "--output-format", "json",
            "--rejects", str(tmp_path / "r.jsonl")]
    assert main([*argv, "--time-format", "iso"]) == 0
    out = _json(capsys)
    assert out["rejected_lines"] == 0
    assert [e["table"] for e in out["deltas"]] == [EXPECTED[d] for d in ("10", "50", "300")]
    assert main([*argv, "--time-format", "number"]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith(f"graphcep: motifs: no input line was accepted: {len(ROWS)} "
                                   "lines rejected")
    assert len(captured.err.splitlines()) == 1


def test_auto_times_mix_numbers_and_iso_and_delta_keeps_its_unit(tmp_path, capsys):
    """--time-format auto reads epoch seconds and ISO-8601 line by line; with --time-unit
    ms, δ is in milliseconds (and so are the plain numbers)."""
    mixed = tmp_path / "mixed.csv"
    _write_csv(mixed, [(s, d, _iso(int(t)) if i % 2 else str((EPOCH + int(t)) * 1000))
                       for i, (s, d, t) in enumerate(ROWS)])
    assert main(["motifs", "-i", str(mixed), "--delta", "50000", "--time-unit", "ms",
                 "--time-format", "auto", "--output-format", "json"]) == 0
    assert _json(capsys)["deltas"][0]["table"] == EXPECTED["50"]


def test_no_header_makes_the_header_a_reject(tmp_path, capsys):
    iso = tmp_path / "iso.csv"
    _write_csv(iso, [(s, d, _iso(int(t))) for s, d, t in ROWS])
    kept = tmp_path / "kept.jsonl"
    assert main(["motifs", "-i", str(iso), "--delta", "300", "--time-format", "iso",
                 "--no-header", "--rejects", str(kept), "--output-format", "json"]) == 0
    out = _json(capsys)
    assert out["rejected_lines"] == 1 and out["deltas"][0]["table"] == EXPECTED["300"]
    assert json.loads(kept.read_text())["line"] == 1


def test_count_motifs_takes_reader_options(tmp_path):
    iso = tmp_path / "iso.csv"
    _write_csv(iso, [(s, d, _iso(int(t))) for s, d, t in ROWS])
    counts = count_motifs(str(iso), [100], options=ReaderOptions(time_format="iso"))
    assert counts.tables[0].tolist() == EXPECTED["100"]
    ms = count_motifs(str(iso), [100_000], time_unit="ms",
                      options=ReaderOptions(time_format="iso", time_unit="ms"))
    assert ms.tables[0].tolist() == EXPECTED["100"] and ms.unit == "ms"
    with pytest.raises(ValueError, match="share one unit"):
        count_motifs(str(iso), [100], time_unit="s", options=ReaderOptions(time_unit="ms"))


# -- δ in one canonical form -------------------------------------------------------------
def test_delta_is_written_as_its_exact_decimal(tmp_path, capsys):
    """However δ is spelled, text, JSON and the PNG say the same exact decimal, and
    JSON's "delta" is a number; the tables are those of that δ (δ = 0.5 s on whole
    seconds is δ = 0)."""
    spelled = "1_0,5e1,300.000,0.50,0.00005"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", spelled]) == 0
    heads = [line for line in capsys.readouterr().out.splitlines() if line.startswith("δ")]
    assert [h.split(":")[0] for h in heads] == [
        "δ = 10 s", "δ = 50 s", "δ = 300 s", "δ = 0.5 s", "δ = 0.00005 s"]
    js = tmp_path / "m.json"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", spelled, "-o", str(js)]) == 0
    text = js.read_text()
    for number in ("10", "50", "300", "0.5", "0.00005"):
        assert f'"delta": {number}, ' in text
    out = json.loads(text)
    assert [e["delta"] for e in out["deltas"]] == [10, 50, 300, 0.5, 0.00005]
    assert [e["table"] for e in out["deltas"]] == [
        EXPECTED[d] for d in ("10", "50", "300", "0", "0")]
    png = tmp_path / "m.png"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", spelled, "-o", str(png)]) == 0
    from PIL import Image

    with Image.open(png) as image:
        assert image.info["Description"] == "δ = 10, 50, 300, 0.5, 0.00005 s"


# -- per-vertex text: ids with spaces and quotes -----------------------------------------
SMITH, HI, TAB, PLAIN, COMMA = "John Smith", 'say "hi"', "tab\there", "plain", "x,y"
EVENTS = [(SMITH, HI, 1), (HI, TAB, 2), (TAB, SMITH, 3), (SMITH, HI, 4), (HI, SMITH, 5),
          (SMITH, PLAIN, 6), (PLAIN, TAB, 7), (SMITH, TAB, 8), (TAB, SMITH, 9),
          (COMMA, PLAIN, 9), (PLAIN, COMMA, 10)]


def _vertex_lines(text: str) -> dict[tuple[str, str], list[int]]:
    """Per-vertex lines: a JSON string or a bare first field, then δ and 40 counts."""
    lines = text.split("\n")
    start = next(i for i, line in enumerate(lines) if line.startswith("per vertex")) + 1
    got = {}
    for line in filter(None, lines[start:]):
        if line.startswith('"'):
            vertex, end = json.JSONDecoder().raw_decode(line)
            rest = line[end:].split()
        else:
            vertex, *rest = line.split(" ")
        assert len(rest) == 41, line
        got[(vertex, rest[0])] = [int(x) for x in rest[1:]]
    return got


def test_per_vertex_text_quotes_ids_with_spaces_or_quotes(tmp_path, capsys):
    data = tmp_path / "names.csv"
    _write_csv(data, EVENTS)
    oracle = Oracle(EVENTS)
    assert main(["motifs", "-i", str(data), "--delta", "3,5", "--per-vertex"]) == 0
    text = capsys.readouterr().out
    assert "JSON string" in next(line for line in text.splitlines()
                                 if line.startswith("per vertex"))
    expected = {(v, str(d)): counts for d in (3, 5) for v, counts in oracle.local(d).items()}
    assert _vertex_lines(text) == expected
    quoted = [line.split(" 3 ")[0] for line in text.splitlines() if " 3 " in line]
    assert {'"John Smith"', '"say \\"hi\\""', '"tab\\there"', "plain", "x,y"} <= set(quoted)
    assert main(["motifs", "-i", str(data), "--delta", "5", "--per-vertex",
                 "--output-format", "json"]) == 0
    assert _json(capsys)["deltas"][0]["local"] == oracle.local(5)


# -- the PNG: a grid, and a bound -------------------------------------------------------
def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


def test_png_heat_maps_are_four_to_a_row(tmp_path):
    """4 δ make one row; 9 δ three rows of the same width (the last row part-empty)."""
    sizes = {}
    for n in (4, 9):
        png = tmp_path / f"m{n}.png"
        deltas = ",".join(str(10 * (i + 1)) for i in range(n))
        assert main(["motifs", "-i", str(EXAMPLE), "--delta", deltas, "-o", str(png)]) == 0
        sizes[n] = _png_size(png)
    (w4, h4), (w9, h9) = sizes[4], sizes[9]
    panel = w4 // 4
    assert w9 == w4 and h9 - h4 == 2 * panel


def test_png_of_too_many_deltas_is_refused_text_and_json_are_not(tmp_path, capsys):
    """65 δ: a PNG is refused in one line before anything is read or written; text and
    JSON take them (their tables are SNAP's where SNAP's program wrote one)."""
    deltas = [str(x) for x in range(0, 325, 5)]
    assert len(deltas) == 65
    png = tmp_path / "m.png"
    assert main(["motifs", "-i", str(tmp_path / "absent.txt"), "--delta", ",".join(deltas),
                 "-o", str(png)]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "at most 64" in err[0] and not png.exists()
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", ",".join(deltas),
                 "--output-format", "json"]) == 0
    tables = {str(e["delta"]): e["table"] for e in _json(capsys)["deltas"]}
    assert len(tables) == 65
    assert {d: tables[d] for d in EXPECTED} == EXPECTED


@pytest.mark.slow
def test_png_of_64_deltas_is_a_grid_of_16_rows(tmp_path):
    png = tmp_path / "m.png"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", ",".join(map(str, range(1, 65))),
                 "-o", str(png)]) == 0
    png4 = tmp_path / "m4.png"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "1,2,3,4", "-o", str(png4)]) == 0
    (w, h), (w4, h4) = _png_size(png), _png_size(png4)
    assert w == w4 and h - h4 == 15 * (w4 // 4)
