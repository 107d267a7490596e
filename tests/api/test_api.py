"""The Python API (``graphcep.load(...).match(frame, src=, dst=, time=)``) against the
command line: the same edges give the same matches with the same ``match_id`` through
both, for every query kind; the triangle count on SNAP CollegeMsg is also checked against
the independent counter of ``tests/cli/test_college_msg.py``."""

from __future__ import annotations

import gzip
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import graphcep
from graphcep.cli import main
from graphcep.events import normalize_edges
from tests.cli.test_college_msg import HOUR, count_triangles
from tests.cli.test_college_msg import load as load_events
from tests.paths import ROOT

TRIANGLE = """SUBGRAPH triangle {
    x1 e1 x2; x2 e2 x3; x3 e3 x1;
    starttime(e3) - starttime(e1) <= 3600;
    starttime(e1) < starttime(e2); starttime(e2) < starttime(e3);
}
"""
#: The published count (SNAP CollegeMsg, directed triangles within one hour).
COLLEGE_TRIANGLES = 1_653


def cli_matches(tmp_path: Path, query: Path, data: Path, *options: str) -> list[dict]:
    """``graphcep run QUERY --input DATA --engine local -o m.jsonl``: the records."""
    out = tmp_path / f"{query.stem}-{data.stem}.jsonl"
    status = main(["run", str(query), "--input", str(data), "--engine", "local",
                   "-o", str(out), "--summary", "json", *options])
    assert status == 0
    return [json.loads(line) for line in out.read_text().splitlines()]


def ids(records) -> list[str]:
    return sorted(records)


@pytest.fixture(scope="module")
def college(college_msg_path, tmp_path_factory):
    """CollegeMsg as a frame with its own column names, the triangle query file, and
    what the command line finds in the file."""
    folder = tmp_path_factory.mktemp("college")
    query = folder / "triangle.sal"
    query.write_text(TRIANGLE)
    frame = pd.read_csv(college_msg_path, sep=" ", names=["sender", "receiver", "unix"])
    out = folder / "m.jsonl"
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(sys, "stdout", open(folder / "stdout", "w"))  # noqa: SIM115
        assert main(["run", str(query), "--input", str(college_msg_path), "--engine",
                     "local", "-o", str(out)]) == 0
        sys.stdout.close()
    records = [json.loads(line) for line in out.read_text().splitlines()]
    return frame, query, records


def test_college_msg_cli_reference_is_the_published_count(college, college_msg_path):
    _, _, records = college
    assert len(records) == COLLEGE_TRIANGLES
    assert count_triangles(load_events(college_msg_path), HOUR) == COLLEGE_TRIANGLES


def test_pandas_milliseconds_give_the_cli_matches(college):
    frame, query, records = college
    frame = frame.assign(ms=frame["unix"] * 1000).drop(columns="unix")
    m = graphcep.load(query).match(frame, src="sender", dst="receiver", time="ms",
                                   time_unit="ms")
    assert isinstance(m, pd.DataFrame)
    assert len(m) == COLLEGE_TRIANGLES
    assert ids(m["match_id"]) == ids(r["match_id"] for r in records)
    assert set(m["query"]) == {"triangle"}
    # the flat columns say what the nested records say
    by_id = {r["match_id"]: r for r in records}
    row = m.iloc[0]
    record = by_id[row["match_id"]]
    assert [row["x1"], row["x2"], row["x3"]] == [record["bindings"][v] for v in
                                                 ("x1", "x2", "x3")]
    assert [row[f"e{i}_seq"] for i in (1, 2, 3)] == [e["seq"] for e in record["edges"]]
    assert row["last_time"] == pd.Timestamp(record["last_t"], unit="s", tz="UTC")
    assert str(m["first_time"].dtype) == "datetime64[us, UTC]"


def test_pandas_datetimes_naive_as_utc_give_the_cli_matches(college):
    frame, query, records = college
    frame = frame.assign(when=pd.to_datetime(frame["unix"], unit="s")).drop(columns="unix")
    assert frame["when"].dt.tz is None
    m = graphcep.load(query).match(frame, src="sender", dst="receiver", time="when")
    assert ids(m["match_id"]) == ids(r["match_id"] for r in records)
    aware = frame.assign(when=frame["when"].dt.tz_localize("Europe/Paris").dt.tz_convert(
        "UTC"))
    again = graphcep.load(query).match(aware, src="sender", dst="receiver", time="when")
    assert ids(again["match_id"]) == ids(m["match_id"])


def test_arrow_timestamps_give_an_arrow_table_of_the_cli_matches(college):
    frame, query, records = college
    table = pa.table({"a": frame["sender"].astype(str), "b": frame["receiver"].astype(str),
                      "ts": pa.array(frame["unix"].to_numpy() * 1000, pa.timestamp("ms"))})
    m = graphcep.parse(TRIANGLE).match(table, src="a", dst="b", time="ts")
    assert isinstance(m, pa.Table)
    assert m.num_rows == COLLEGE_TRIANGLES
    assert ids(m.column("match_id").to_pylist()) == ids(r["match_id"] for r in records)
    assert m.schema.field("last_time").type == pa.timestamp("us", tz="UTC")


def test_polars_gives_polars_and_the_cli_matches(college):
    pl = pytest.importorskip("polars")
    frame, query, records = college
    lazy = pl.from_pandas(frame).with_columns(
        (pl.col("unix") * 1_000_000).cast(pl.Datetime("us")).alias("at"))
    m = graphcep.load(query).match(lazy.drop("unix"), src="sender", dst="receiver",
                                   time="at")
    assert isinstance(m, pl.DataFrame)
    assert ids(m["match_id"].to_list()) == ids(r["match_id"] for r in records)


# -- every kind against the command line --------------------------------------------------


@pytest.fixture(scope="module")
def slice_(college_msg_path, tmp_path_factory):
    """CollegeMsg's first 4,000 messages: a headerless SNAP file (seq = line number) and
    the same rows as a frame (seq = row number)."""
    folder = tmp_path_factory.mktemp("slice")
    with gzip.open(college_msg_path, "rt") as fh:
        lines = [next(fh) for _ in range(4000)]
    path = folder / "slice.txt"
    path.write_text("".join(lines))
    frame = pd.DataFrame([line.split() for line in lines], columns=["u", "v", "sec"])
    return path, frame.astype({"sec": "int64"})


def test_nu_expression_through_load_and_parse(slice_, tmp_path):
    path, frame = slice_
    text = "<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 3600]"
    query = tmp_path / "tri.nu"
    query.write_text(text)
    records = cli_matches(tmp_path, query, path)
    assert len(records) > 10
    for q in (graphcep.load(query), graphcep.parse(text, kind="nu", name="tri")):
        m = q.match(frame, src="u", dst="v", time="sec")
        assert ids(m["match_id"]) == ids(r["match_id"] for r in records)
        assert {"X", "Y", "Z"} <= set(m.columns)


def test_subscriptions_through_load(slice_, tmp_path):
    path, frame = slice_
    query = tmp_path / "probes.subs"
    query.write_text("ping_pong: @a.@b.@a\nrepeat: @a.@a\n")
    records = cli_matches(tmp_path, query, path)
    assert len(records) > 10
    m = graphcep.load(query).match(frame, src="u", dst="v", time="sec")
    assert ids(m["match_id"]) == ids(r["match_id"] for r in records)
    keyed = cli_matches(tmp_path, query, path, "--key", "dst", "--symbol", "src")
    by_dst = graphcep.load(query, key="dst", symbol="src").match(
        frame, src="u", dst="v", time="sec")
    assert ids(by_dst["match_id"]) == ids(r["match_id"] for r in keyed) != ids(m["match_id"])


DDST = """QUERY chain;
VERTICES A, B, C;
EDGES
  x: A -> B [call];
  y: B -> C [sms];
ORDER x < y;
WITHIN 1 h;
"""


def labelled_calls(tmp_path: Path) -> tuple[pd.DataFrame, Path, list[dict]]:
    """600 random calls with a label column, as a frame; the DDST chain query; and what
    ``graphcep run`` reports for the query on the calls as Parquet."""
    rng = np.random.default_rng(7)
    n = 600
    frame = pd.DataFrame({
        "caller": [f"p{i}" for i in rng.integers(0, 25, n)],
        "callee": [f"p{i}" for i in rng.integers(0, 25, n)],
        "at": pd.to_datetime(1_700_000_000 + np.sort(rng.integers(0, 86_400, n)), unit="s"),
        "label": rng.choice(["call", "sms", "mail"], n),
    })
    data = tmp_path / "calls.parquet"
    pq.write_table(pa.table({"t": frame["at"].to_numpy().astype("datetime64[us]"),
                             "src": frame["caller"], "dst": frame["callee"],
                             "label": frame["label"]}), data)
    query = tmp_path / "chain.ddst"
    query.write_text(DDST)
    records = cli_matches(tmp_path, query, data)
    assert len(records) > 10
    return frame, query, records


def test_ddst_reads_labels_from_a_frame_column(tmp_path):
    """Labels are a column of the frame, as of the Parquet file the command line reads."""
    frame, query, records = labelled_calls(tmp_path)
    m = graphcep.load(query).match(frame, src="caller", dst="callee", time="at")
    assert ids(m["match_id"]) == ids(r["match_id"] for r in records)
    assert {"A", "B", "C", "x_seq", "y_seq"} <= set(m.columns)
    with pytest.raises(ValueError, match="reads edge labels .* from the field 'label'"):
        graphcep.load(query).match(frame, src="caller", dst="callee", time="at", columns=[])


def test_window_widening_gives_the_cli_matches(slice_, tmp_path, capsys):
    path, frame = slice_
    query = tmp_path / "pair.sal"
    query.write_text("SUBGRAPH pair { a e1 b; b e2 a; starttime(e1) < starttime(e2); }")
    records = cli_matches(tmp_path, query, path, "--pww", "20")
    assert len(records) > 10
    m = graphcep.load(query).match(frame, src="u", dst="v", time="sec", pww=20)
    assert ids(m["match_id"]) == ids(r["match_id"] for r in records)
    assert sorted(m["pww_level"]) == sorted(r["pww_level"] for r in records)
    capsys.readouterr()
    assert main(["explain", str(query), "--pww", "20", "--pww-base", "2"]) == 0
    assert graphcep.load(query).explain(pww=20, pww_base=2) + "\n" == capsys.readouterr().out


def test_explain_is_what_the_cli_prints(tmp_path, capsys):
    query = tmp_path / "triangle.sal"
    query.write_text(TRIANGLE)
    assert main(["explain", str(query), "--window", "7200"]) == 0
    printed = capsys.readouterr().out
    assert graphcep.load(query, window=7200).explain() + "\n" == printed


def test_an_automaton_file_explains_as_the_cli_explains_it(capsys):
    path = ROOT / "tests/fixtures/matina/arrow.autom"
    q = graphcep.load(path)
    assert q.kind == "autom"
    assert main(["explain", str(path)]) == 0
    assert q.explain() + "\n" == capsys.readouterr().out


# -- identity -----------------------------------------------------------------------------


def test_a_table_without_seq_is_numbered_from_one_as_readers_number_lines():
    edges = normalize_edges(pa.table({"t": [5, 1], "src": ["a", "b"], "dst": ["b", "c"]}))
    assert edges.column("seq").to_pylist() == [1, 2]


# -- bad input: one clear error naming the column and the fix -------------------------------


@pytest.fixture
def small():
    return pd.DataFrame({"s": ["a", "b", "c"], "d": ["b", "c", "a"],
                         "sec": [1_700_000_000, 1_700_000_010, 1_700_000_020]})


@pytest.fixture
def tri():
    return graphcep.parse(TRIANGLE)


def test_a_missing_column_is_named_with_the_argument_and_a_guess(tri, small):
    with pytest.raises(ValueError,
                       match=r"no column 'src' \(src='src'.*\['s', 'd', 'sec'\]; did you mean"):
        tri.match(small, dst="d", time="sec")
    with pytest.raises(ValueError, match=r"no column 'time' \(time='time'.*'sec'"):
        tri.match(small, src="s", dst="d", time="time")


def test_milliseconds_read_as_seconds_are_refused_naming_the_unit(tri, small):
    ms = small.assign(sec=small["sec"] * 1000)
    with pytest.raises(ValueError, match=r"column 'sec' \(time=\).*pass time_unit='ms'"):
        tri.match(ms, src="s", dst="d", time="sec")
    assert len(tri.match(ms, src="s", dst="d", time="sec", time_unit="ms")) == 1


def test_wrong_units_and_types_are_refused(tri, small):
    with pytest.raises(ValueError, match=r"time_unit='h'.*'s', 'ms' or 'us'"):
        tri.match(small, src="s", dst="d", time="sec", time_unit="h")
    dated = small.assign(sec=pd.to_datetime(small["sec"], unit="s"))
    with pytest.raises(ValueError, match=r"time_unit='ms' applies to numeric times.*'sec'"):
        tri.match(dated, src="s", dst="d", time="sec", time_unit="ms")
    with pytest.raises(TypeError, match=r"column 'sec' \(time=\) has type bool.*to_datetime"):
        tri.match(small.assign(sec=True), src="s", dst="d", time="sec")
    with pytest.raises(TypeError, match=r"column 'sec' \(time=\) has type string"):
        tri.match(small.assign(sec=small["sec"].astype(str)), src="s", dst="d", time="sec")
    with pytest.raises(TypeError, match=r"column 's' \(src=\) has type double.*astype\(str\)"):
        tri.match(small.assign(s=1.5), src="s", dst="d", time="sec")


def test_a_row_that_cannot_be_an_edge_is_named(tri, small):
    holed = small.astype({"sec": "float64"})
    holed.loc[1, "sec"] = np.nan
    with pytest.raises(ValueError, match=r"1 row\(s\) cannot be edges; the first, at "
                                         r"position 1: field sec \(t\): missing value"):
        tri.match(holed, src="s", dst="d", time="sec")


def test_a_column_shadowing_an_edge_field_is_refused(tri, small):
    with pytest.raises(ValueError, match=r"column 't' has the name of the edges' start times"):
        tri.match(small.assign(t=0), src="s", dst="d", time="sec")
    assert len(tri.match(small.assign(t=0), src="s", dst="d", time="sec", columns=[])) == 1


def test_what_is_no_frame_is_refused(tri):
    with pytest.raises(TypeError, match="pass a pandas DataFrame, a Polars DataFrame or a "
                                        "pyarrow Table"):
        tri.match({"src": ["a"]})
    with pytest.raises(TypeError, match=r"unknown query option\(s\) \['windw'\]"):
        graphcep.parse(TRIANGLE, windw=3)
    with pytest.raises(ValueError, match="kind='cypher'"):
        graphcep.parse("MATCH (a)", kind="cypher")


def test_other_spark_objects_are_refused_naming_what_to_pass(tri):
    """Told by its class's module, as every frame is (no Spark session needed); Spark
    DataFrames themselves: tests/api/test_api_spark.py."""
    spark_row = type("Row", (), {"__module__": "pyspark.sql.types"})()
    with pytest.raises(TypeError, match="pass a Spark DataFrame"):
        tri.match(spark_row)


def test_query_errors_name_the_api_arguments_not_the_command_line_options(small):
    pair = graphcep.parse("SUBGRAPH pair { a e1 b; b e2 a; starttime(e1) < starttime(e2); }")
    with pytest.raises(ValueError, match=r"give a window \(window=SECONDS\) or run it in "
                                         r"widening windows \(pww=L\)"):
        pair.match(small, src="s", dst="d", time="sec")
    with pytest.raises(ValueError, match=r"^window= does not apply to a DDST query"):
        graphcep.parse("VERTICES A, B; EDGES x: A -> B; WITHIN 5 s", kind="ddst", window=3)
    assert len(pair.match(small, src="s", dst="d", time="sec", pww=3)) == 0


def test_a_query_error_names_the_text_not_a_temporary_file():
    with pytest.raises(ValueError, match=r"^<query text>:1:"):
        graphcep.parse("SUBGRAPH q { x e1 }")


def test_a_field_the_query_reads_must_be_a_column(small):
    q = graphcep.parse("SUBGRAPH big { a e b; e.bytes > 100; }")
    with pytest.raises(ValueError, match="bytes"):
        q.match(small, src="s", dst="d", time="sec")
    m = q.match(small.assign(bytes=[50, 500, 5000]), src="s", dst="d", time="sec")
    assert sorted(m["e_seq"]) == [2, 3]


def test_same_type_out_even_when_nothing_matches(tri, small):
    one = small.iloc[:1]
    assert isinstance(tri.match(one, src="s", dst="d", time="sec"), pd.DataFrame)
    table = pa.Table.from_pandas(one, preserve_index=False)
    out = tri.match(table, src="s", dst="d", time="sec")
    assert isinstance(out, pa.Table) and out.num_rows == 0 and "x1" in out.column_names


def test_import_graphcep_stays_cheap():
    code = ("import sys, graphcep; "
            "print(sorted(m for m in sys.modules if m.split('.')[0] in ('pandas', 'polars') "
            "or m == 'graphcep.api'))")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          check=True)
    assert done.stdout.strip() == "[]"


def test_the_readme_example_runs_as_written(monkeypatch, capsys):
    """The first example of the README's "Python API" section, run from the checkout."""
    section = (ROOT / "README.md").read_text().split("### Python API\n", 1)[1]
    code = section.split("```python\n", 1)[1].split("```", 1)[0]
    monkeypatch.chdir(ROOT)
    scope: dict = {}
    exec(compile(code, "README.md", "exec"), scope)  # noqa: S102
    printed = capsys.readouterr().out
    assert printed.startswith("query triangle")  # the plan
    assert f"\n{COLLEGE_TRIANGLES}\n" in printed
    assert isinstance(scope["m"], pd.DataFrame) and len(scope["m"]) == COLLEGE_TRIANGLES


def test_a_label_on_no_edge_is_a_warning(tmp_path):
    """The chain wants ``sms`` on its second link: with every sms relabelled as mail no
    edge carries it, and the 0 matches come with a warning naming the label, as the
    command line's; with the labels as they are, no warning."""
    import warnings

    frame, query, _ = labelled_calls(tmp_path)
    q = graphcep.load(query)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        q.match(frame, src="caller", dst="callee", time="at")
    relabelled = frame.assign(label=frame["label"].replace("sms", "mail"))
    with pytest.warns(UserWarning, match=r"no edge carries 'sms' \(edge label\)"):
        m = q.match(relabelled, src="caller", dst="callee", time="at")
    assert len(m) == 0
