"""``graphcep motifs``: text, JSON and PNG output against SNAP's program; bad input exits 2.

The expected tables are those SNAP's own ``temporalmotifsmain`` wrote
(``tests/fixtures/motifs/SOURCE.md``), the per-vertex counts those Raphtory's tests assert.
"""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

from graphcep.cli import main
from tests.engines.test_motifs import RAPHTORY_LOCAL
from tests.paths import FIXTURES, ROOT

EXAMPLE = FIXTURES / "motifs" / "snap-example-temporal-graph.txt"
SNAP = json.loads((FIXTURES / "motifs" / "snap-tables.json").read_text())["files"]
EXPECTED = SNAP["snap-example-temporal-graph.txt"]
RAPHTORY_LOCAL_GRAPH = FIXTURES / "motifs" / "raphtory-local-motif-test.txt"


def test_json_tables_equal_snap_program(capsys):
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "10,50,300",
                 "--output-format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert [d["delta"] for d in out["deltas"]] == [10, 50, 300]
    for entry in out["deltas"]:
        assert entry["table"] == EXPECTED[str(entry["delta"])]
        assert entry["totals"]["all"] == int(np.sum(EXPECTED[str(entry["delta"])]))


def test_text_tables_equal_snap_program(capsys):
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "100"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [[int(x.replace(",", "")) for x in line.split()[1:]] for line in lines[2:8]]
    assert rows == EXPECTED["100"]
    assert lines[0].startswith(f"δ = 100 s: {int(np.sum(EXPECTED['100'])):,} motifs")


def test_delta_and_times_share_the_unit(capsys):
    """With ``--time-unit ms`` the file's times are milliseconds, and so is δ."""
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "50", "--time-unit", "ms",
                 "--output-format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["deltas"][0]["table"] == EXPECTED["50"]


@pytest.mark.parametrize(("unit", "scale"), [("s", 1), ("ms", 1000)])
def test_a_parquet_file_of_plain_numbers_takes_the_unit_given(tmp_path, capsys, unit, scale):
    """SNAP's example as Parquet, integer seconds (or ms) in ``t`` and no unit of its own:
    ``--time-unit`` says what the numbers are, as for text files."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows = [line.split() for line in EXAMPLE.read_text().splitlines()
            if line.strip() and not line.startswith("#")]
    data = tmp_path / "example.parquet"
    pq.write_table(pa.table({"src": [r[0] for r in rows], "dst": [r[1] for r in rows],
                             "t": [int(r[2]) * scale for r in rows]}), data)
    assert main(["motifs", "-i", str(data), "--delta", str(50 * scale), "--time-unit", unit,
                 "--output-format", "json"]) == 0
    assert json.loads(capsys.readouterr().out)["deltas"][0]["table"] == EXPECTED["50"]


def test_per_vertex_counts_in_json_and_text(tmp_path, capsys):
    out = tmp_path / "m.json"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "300", "--per-vertex", "-o",
                 str(out)]) == 0  # json from the suffix
    local = json.loads(out.read_text())["deltas"][0]["local"]
    assert set(local) == {"0", "1", "5", "7", "8", "9"}
    assert all(len(v) == 40 for v in local.values())
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "300", "--per-vertex"]) == 0
    text = capsys.readouterr().out.splitlines()
    assert [line.split()[2:] for line in text if line.startswith("9 300 ")] == [
        [str(x) for x in local["9"]]]


@pytest.mark.spark
def test_per_vertex_counts_on_spark_equal_raphtory_and_snap(capsys, spark):
    """``--per-vertex --engine spark`` on Raphtory's local test graph: its vertices' 40
    counts are those Raphtory's test asserts, the table the one SNAP's program wrote."""
    assert main(["motifs", "-i", str(RAPHTORY_LOCAL_GRAPH), "--format", "snap", "--delta", "10",
                 "--per-vertex", "--engine", "spark", "--master", "local[2]",
                 "--output-format", "json"]) == 0
    entry = json.loads(capsys.readouterr().out)["deltas"][0]
    assert entry["table"] == SNAP["raphtory-local-motif-test.txt"]["10"]
    assert {v: entry["local"][v] for v in RAPHTORY_LOCAL} == RAPHTORY_LOCAL


def test_png_heat_map_and_lazy_matplotlib(tmp_path):
    png = tmp_path / "m.png"
    script = ("import sys; from graphcep.cli import main; "
              f"main(['motifs', '-i', {str(EXAMPLE)!r}, '--delta', '10', '-o', {str(png)!r}, "
              "'--output-format', '{}']); print('matplotlib' in sys.modules)")
    env = {"PYTHONPATH": str(ROOT / "src")}
    for fmt, imported in (("text", "False"), ("png", "True")):
        run = subprocess.run([sys.executable, "-c", script.format(fmt)], capture_output=True,
                             text=True, env=env, check=True)
        assert run.stdout.strip().splitlines()[-1] == imported
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


@pytest.mark.parametrize("args", [
    ["--delta", "10,-1"], ["--delta", "ten"], ["--delta", "10,,20"],
    ["--delta", "0.5", "--time-unit", "us"], ["--delta", "10", "--output-format", "png"],
    ["--delta", "10", "--output-format", "svg"], ["--delta", "10", "--format", "xml"],
    ["--delta", "10", "--per-vertex", "-o", "heat.png"], ["--delta", "10", "--time-format", "x"],
    ["--delta", ",".join(map(str, range(1, 66))), "-o", "heat.png"],
    ["--delta", "10", "--master", "local[2]"],
])
def test_bad_options_exit_2_in_one_line(args, capsys):
    assert main(["motifs", "-i", str(EXAMPLE), *args]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("graphcep: ")


def test_missing_input_exits_2(tmp_path, capsys):
    assert main(["motifs", "-i", str(tmp_path / "none.txt"), "--delta", "10"]) == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


@pytest.mark.parametrize(("text", "loops"), [("", 0), ("1 1 5\n2 2 6\n", 2), ("1 2 5\n", 0)])
def test_inputs_without_motifs_give_zero_tables(tmp_path, capsys, text, loops):
    path = tmp_path / "few.txt"
    path.write_text(text)
    assert main(["motifs", "-i", str(path), "--format", "snap", "--delta", "10",
                 "--output-format", "json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["self_loops_dropped"] == loops
    assert out["deltas"][0]["table"] == [[0] * 6] * 6


def test_malformed_lines_are_skipped_and_reported(tmp_path, capsys):
    path = tmp_path / "bad.txt"
    path.write_text(EXAMPLE.read_text() + "1 2\nx y z\n")
    kept = tmp_path / "kept.jsonl"
    assert main(["motifs", "-i", str(path), "--format", "snap", "--delta", "300",
                 "--output-format", "json", "--rejects", str(kept)]) == 0
    captured = capsys.readouterr()
    out = json.loads(captured.out)
    assert out["rejected_lines"] == 2
    assert out["deltas"][0]["table"] == EXPECTED["300"]
    lines = len(EXAMPLE.read_text().splitlines())
    rejects = [json.loads(line) for line in kept.read_text().splitlines()]
    assert [(r["line"], r["text"]) for r in rejects] == [(lines + 1, "1 2"),
                                                        (lines + 2, "x y z")]
    assert captured.err.count("\n") == 1
    assert captured.err.startswith("graphcep: motifs: 2 lines rejected: ")
    assert f"see {kept}" in captured.err


def test_a_damaged_gzip_is_reported_and_what_was_read_counted(tmp_path, capsys):
    import gzip

    whole = gzip.compress(EXAMPLE.read_bytes())
    path = tmp_path / "cut.txt.gz"
    path.write_bytes(whole[: len(whole) - 12])  # the stream ends early
    kept = tmp_path / "kept.jsonl"
    assert main(["motifs", "-i", str(path), "--delta", "300", "--rejects", str(kept)]) == 0
    err = capsys.readouterr().err
    assert "1 × damaged gzip" in err and err.count("\n") == 1
    assert "damaged gzip" in json.loads(kept.read_text())["reason"]


def test_the_output_suffix_chooses_the_output_format(tmp_path, capsys):
    png, js = tmp_path / "m.png", tmp_path / "m.json"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "10", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert main(["motifs", "-i", str(EXAMPLE), "--delta", "10", "-o", str(js)]) == 0
    assert json.loads(js.read_text())["deltas"][0]["table"] == EXPECTED["10"]


def test_outputs_that_would_destroy_the_input_or_land_elsewhere_are_refused(tmp_path, capsys):
    data = tmp_path / "m.txt"
    data.write_text(EXAMPLE.read_text())
    before = data.read_text()
    tes = tmp_path / "w.tes"
    tes.write_text("a 1 b 2 a\n")
    for argv in (["-i", str(data), "--format", "snap", "--delta", "3", "-o", str(data)],
                 ["-i", str(tes), "--delta", "3"],
                 ["-i", str(data), "--format", "snap", "--delta", "1e13"],
                 ["-i", str(data), "--format", "snap", "--delta", "3", "--output-format",
                  "png", "-o", "-"]):
        assert main(["motifs", *argv]) == 2, argv
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and err[0].startswith("graphcep: "), (argv, err)
    assert data.read_text() == before
    png = tmp_path / "heat.txt"  # a PNG asked for by option, whatever the name says
    assert main(["motifs", "-i", str(data), "--format", "snap", "--delta", "3",
                 "--output-format", "png", "-o", str(png)]) == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
