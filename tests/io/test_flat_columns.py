"""Match files that load flat, with readable times.

Each flat column is checked against the nested record it repeats (``bindings``,
``edges``, ``vertices``), read back by pyarrow and pandas as users read them; the nested
records themselves are checked against the brute-force oracle in
``tests/jobs/test_composite.py``. ISO outputs are checked against the input's own text.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphcep.cli import main
from graphcep.io.flat_columns import TIMESTAMP, FlatColumns, integer_times
from graphcep.io.generator import generate_netflow
from graphcep.io.sinks import make_sink
from graphcep.jobs import as_job
from graphcep.lang.ddst import parse_ddst
from graphcep.lang.sal import parse_program
from graphcep.pictures.records import read_matches
from graphcep.runtime.local import run_job

PROGRAM = """
SUBGRAPH Tri {
    x1 e1 x2; x2 e2 x3; x3 e3 x1;
    starttime(e3) - starttime(e1) <= 10;
    starttime(e1) < starttime(e2); starttime(e2) < starttime(e3);
}
SUBGRAPH Back { a f1 b; b f2 a; starttime(f1) < starttime(f2);
                starttime(f2) - starttime(f1) <= 3; }
"""
#: each query's vertices and edges (the other query's columns are null on its rows)
OWN = {"Tri": ({"x1", "x2", "x3"}, {"e1", "e2", "e3"}), "Back": ({"a", "b"}, {"f1", "f2"})}


@pytest.fixture(scope="module")
def sal_matches() -> tuple[pa.Table, object]:
    stream = generate_netflow(300, 15, 20, seed=3, start_s=1_700_000_000)
    job = as_job(parse_program(PROGRAM))
    matches, _ = run_job(job, stream)
    assert set(matches.column("query").to_pylist()) == set(OWN)
    return matches, job


def written(job, matches: pa.Table, path: Path) -> Path:
    with make_sink(path, matches=job.output) as sink:
        sink.write(matches.slice(0, 5))
        sink.write(matches.slice(5))
    return path


def test_parquet_flat_columns_equal_the_nested_record(sal_matches, tmp_path):
    matches, job = sal_matches
    table = pq.read_table(written(job, matches, tmp_path / "m.parquet"))
    for name in ("first_t", "last_t", "e1_t", "f2_t"):
        assert table.schema.field(name).type == TIMESTAMP
    assert table.schema.field("edges").type.value_type.field("t").type == TIMESTAMP
    frame = table.to_pandas()  # as a pandas user loads it
    assert len(frame) == matches.num_rows
    for row, record in zip(frame.itertuples(index=False), matches.to_pylist(), strict=True):
        row = row._asdict()
        vertices, edges = OWN[record["query"]]
        bound = dict(record["bindings"])
        for var in {"x1", "x2", "x3", "a", "b"}:
            assert row[var] == bound[var] if var in vertices else row[var] is None
        by_var = {e["var"]: e for e in record["edges"]}
        for var in {"e1", "e2", "e3", "f1", "f2"}:
            if var not in edges:
                assert row[f"{var}_src"] is None and np.isnan(row[f"{var}_seq"])
                continue
            edge = by_var[var]
            assert row[f"{var}_t"].value // 1000 == edge["t"]  # pandas: ns since the epoch
            assert str(row[f"{var}_t"].tz) == "UTC"
            assert (row[f"{var}_src"], row[f"{var}_dst"]) == (edge["src"], edge["dst"])
            assert (row[f"{var}_dur"], row[f"{var}_seq"]) == (edge["dur"], edge["seq"])
        assert row["first_t"].value // 1000 == record["first_t"]


def test_jsonl_flat_keys_equal_the_nested_record(sal_matches, tmp_path):
    matches, job = sal_matches
    path = written(job, matches, tmp_path / "m.jsonl")
    for line in path.read_text().splitlines():
        record = json.loads(line)
        vertices, edges = OWN[record["query"]]
        for var in vertices:
            assert record[var] == record["bindings"][var]
        for var in {"x1", "x2", "x3", "a", "b"} - vertices:
            assert record[var] is None
        for edge in record["edges"]:
            assert [record[f"{edge['var']}_{k}"] for k in ("t", "src", "dst", "dur", "seq")] \
                == [edge[k] for k in ("t", "src", "dst", "dur", "seq")]
        assert all(record[f"{var}_t"] is None for var in {"e1", "e2", "e3", "f1", "f2"} - edges)


def test_draw_reads_old_and_new_match_files_alike(sal_matches, tmp_path):
    """Parquet with timestamps and flat columns, Parquet as written before (int64 µs,
    nested only) and JSONL in seconds or ISO all read back as the same rows."""
    matches, job = sal_matches
    new = written(job, matches, tmp_path / "new.parquet")
    old = tmp_path / "old.parquet"
    pq.write_table(matches.replace_schema_metadata({b"graphcep.time_unit": b"us"}), old)
    seconds = written(job, matches, tmp_path / "m.jsonl")
    from graphcep.io.time_text import ISO

    iso = written(type("J", (), {"output": job.output.with_clock(ISO)})(), matches,
                  tmp_path / "iso.jsonl")
    nested = ("query", "match_id", "first_t", "last_t", "edges")

    def rows(path: Path) -> list[tuple]:
        return [tuple(json.dumps(r[k], sort_keys=True, default=str) for k in nested)
                for r in read_matches(path)]

    assert rows(new) == rows(old) == rows(seconds) == rows(iso)
    assert [r["first_t"] for r in read_matches(iso)] == matches.column("first_t").to_pylist()


def test_ddst_flat_columns_list_each_query_vertex_and_edge(tmp_path):
    query = parse_ddst("QUERY pair; VERTICES A, B, C; EDGES x: A -> B; y: B -> C; "
                       "ORDER x < y; WITHIN 5 s")
    job = as_job(query)
    stream = generate_netflow(300, 10, 20, seed=5)
    matches, _ = run_job(job, stream)
    assert matches.num_rows > 0
    table = pq.read_table(written(job, matches, tmp_path / "d.parquet"))
    assert table.schema.field("A").type == pa.list_(pa.string())
    for row in table.to_pylist():
        for qvar in "ABC":
            assert row[qvar] == [v["vertex"] for v in row["vertices"] if v["qvar"] == qvar]
        for qedge in "xy":
            assert row[f"{qedge}_seq"] == [e["seq"] for e in row["edges"]
                                            if e["qedge"] == qedge]


def test_flat_names_stay_clear_of_the_records_own():
    flat = FlatColumns("sal", ("query", "edges", "x"), ("first",))
    names = flat.names(["query", "match_id", "first_t", "last_t", "bindings", "edges"])
    assert names == ["q_query", "q_edges", "x", "q_first_t", "first_src", "first_dst",
                     "first_dur", "first_seq"]
    assert FlatColumns("sal", ("vertices", "t", "dur", "end_t"), ()).names([]) == [
        "q_vertices", "q_t", "q_dur", "q_end_t"]


def test_integer_times_leaves_integer_tables_alone(sal_matches):
    matches, _ = sal_matches
    assert integer_times(matches) is matches


# -- ISO times through the command line ----------------------------------------------


@pytest.fixture()
def iso_input(tmp_path) -> tuple[Path, list[str]]:
    times = ["2024-03-01T10:00:00Z", "2024-03-01T10:00:01.5Z", "2024-03-01T10:00:02.25Z",
             "2024-03-01T10:00:03Z", "2024-03-01T10:00:04.000001Z"]
    ends = [("a", "b"), ("b", "c"), ("c", "a"), ("a", "b"), ("b", "c")]
    path = tmp_path / "iso.csv"
    path.write_text("t,src,dst\n" + "".join(f"{t},{s},{d}\n" for t, (s, d) in
                                            zip(times, ends, strict=True)))
    return path, times


def test_iso_times_in_jsonl_and_console_are_the_inputs(iso_input, tmp_path, capsys):
    data, times = iso_input
    query = tmp_path / "tri.sal"
    query.write_text(PROGRAM.split("SUBGRAPH Back")[0])
    out = tmp_path / "m.jsonl"
    base = ["run", str(query), "--input", str(data), "--format", "csv", "--time-format",
            "iso", "--engine", "local"]
    assert main([*base, "-o", str(out)]) == 0
    records = [json.loads(line) for line in out.read_text().splitlines()]
    assert len(records) == 3
    for record in records:  # a line's seq is its line number: the header is line 1
        for edge in record["edges"]:
            assert edge["t"] == record[f"{edge['var']}_t"] == times[edge["seq"] - 2]
        assert record["first_t"] == times[record["edges"][0]["seq"] - 2]
        assert record["last_t"] == times[record["edges"][-1]["seq"] - 2]
    capsys.readouterr()
    assert main(base) == 0
    console = capsys.readouterr().out
    for record in records:
        first, last = record["first_t"], record["last_t"]
        assert f"id={record['match_id']}  {first} .. {last}" in console
        for edge in record["edges"]:
            assert f"{edge['var']}: {edge['src']} -> {edge['dst']} @ {edge['t']}\n" in console


def test_pictures_of_an_iso_run_write_dates(iso_input, tmp_path):
    """``graphcep draw`` on an ISO JSONL file, and the timeline's axis, write dates."""
    from graphcep.io.time_text import ISO
    from graphcep.pictures.layout import lay_out
    from graphcep.pictures.records import drawing_of
    from graphcep.pictures.timelines import origin_text

    data, times = iso_input
    query = tmp_path / "tri.sal"
    query.write_text(PROGRAM.split("SUBGRAPH Back")[0])
    out = tmp_path / "m.jsonl"
    assert main(["run", str(query), "--input", str(data), "--format", "csv",
                 "--time-format", "iso", "--engine", "local", "-o", str(out)]) == 0
    row = next(read_matches(out))
    layout = lay_out(drawing_of(row))
    assert f"{times[0]} .. {times[2]}" in layout.title
    assert [e.label.splitlines()[-1] for e in layout.edges] == times[:3]
    assert origin_text(row["first_t"], ISO) == times[0]


def test_nu_flat_columns_are_its_variables(tmp_path):
    from graphcep.jobs import load

    job = load(str(Path(__file__).parents[2] / "examples" / "nu" / "triangle.nu"), {})
    matches, _ = run_job(job, generate_netflow(200, 10, 20, seed=1))
    assert matches.num_rows > 0
    frame = pq.read_table(written(job, matches, tmp_path / "n.parquet")).to_pandas()
    assert [c for c in frame.columns if c in ("X", "Y", "Z", "e1_t")] == ["X", "Y", "Z"]
    for row in frame.itertuples(index=False):
        assert {v: getattr(row, v) for v in "XYZ"} == dict(row.bindings)


def test_window_widening_reports_iso_times_too(sal_matches):
    from graphcep.io.sinks import SAL_MATCHES
    from graphcep.io.time_text import ISO
    from graphcep.runtime.widening.report import widened_format

    matches, _ = sal_matches
    row = {**matches.to_pylist()[0], "pww_level": 1, "pww_report_t": 1_709_287_201_500_000,
           "pww_delay_us": 2_000_000}
    widened = widened_format(SAL_MATCHES.with_clock(ISO))
    record = json.loads(widened.json(row))
    assert (record["pww_report_t"], record["pww_delay"]) == ("2024-03-01T10:00:01.5Z", 2)
    assert "reported at 2024-03-01T10:00:01.5Z, delay 2s" in widened.text(row, 1)
