"""Spark reads a newcomer's input as the local reader does: times in the wrong unit are
refused naming the unit, headers of other names are read by them (or refused), a wholly
rejected file is told the format of its shape, and a directory's notes are skipped."""

from __future__ import annotations

import shutil
import warnings

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from graphcep.io.formats import InputError
from graphcep.io.formats.schema import InputNote
from graphcep.io.readers import read_edges
from tests.paths import FIXTURES

pytestmark = pytest.mark.spark

COLLEGE = FIXTURES / "CollegeMsg.txt.gz"
VAST_SAMPLE = FIXTURES / "ctu13_vast_sample.csv"
EPOCH_ROWS = [(1, 2, 1_082_040_961), (3, 4, 1_082_155_839), (5, 2, 1_082_414_391)]


def spark_read(spark, path, fmt=None):
    from graphcep.runtime.spark import read_edges_spark

    edges_df, rejects_df, lines = read_edges_spark(spark, path, fmt)
    return edges_df.toArrow().sort_by("seq"), rejects_df.toArrow(), lines


def test_parquet_integer_seconds_are_refused_naming_the_unit_on_spark(spark, tmp_path):
    path = tmp_path / "pd.parquet"
    pq.write_table(pa.table({"src": [s for s, _, _ in EPOCH_ROWS],
                             "dst": [d for _, d, _ in EPOCH_ROWS],
                             "t": [t for _, _, t in EPOCH_ROWS]}), path)
    with pytest.raises(InputError, match=r"pd\.parquet: times read as microseconds .* pass "
                                         r"--time-unit s "):
        spark_read(spark, path)


def test_csv_milliseconds_are_refused_naming_the_unit_on_spark(spark, tmp_path):
    path = tmp_path / "ms.csv"
    path.write_text("src,dst,t\n" + "".join(f"{s},{d},{t * 1000}\n" for s, d, t in EPOCH_ROWS))
    with pytest.raises(InputError, match=r"ms\.csv: times read as seconds .* pass --time-unit ms "):
        spark_read(spark, path)


def test_a_header_of_known_names_is_read_by_them_on_spark(spark, tmp_path):
    path = tmp_path / "h.csv"
    path.write_text("timestamp,sender,receiver\n"
                    + "".join(f"{t},{s},{d}\n" for s, d, t in EPOCH_ROWS))
    with pytest.warns(InputNote, match="--columns t=timestamp,src=sender,dst=receiver"):
        edges, rejects, _ = spark_read(spark, path)
    assert [(e["src"], e["dst"], e["t"]) for e in edges.to_pylist()] == [
        (str(s), str(d), t * 1_000_000) for s, d, t in EPOCH_ROWS]
    assert rejects.num_rows == 0


def test_vast_read_as_csv_is_told_the_format_on_spark(spark):
    edges, rejects, _ = spark_read(spark, VAST_SAMPLE, "csv")
    assert edges.num_rows == 0 and rejects.num_rows == 2000
    assert all(r.endswith("[no line of this file reads as csv: it has the shape of vast: pass "
                          "--format vast]") for r in rejects.column("reason").to_pylist())


def test_a_directory_skips_its_notes_on_spark(spark, tmp_path):
    folder = tmp_path / "snap-CollegeMsg"
    folder.mkdir()
    shutil.copy(COLLEGE, folder / COLLEGE.name)
    (folder / "SOURCE.md").write_text("# SNAP CollegeMsg\n\nhttps://snap.stanford.edu\n")
    with pytest.warns(InputNote, match=r"skipped 1 file .*SOURCE\.md"):
        edges, rejects, lines = spark_read(spark, folder)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", InputNote)
        local = read_edges(folder)
    assert (edges.num_rows, rejects.num_rows, lines) == (59_835, 0, 59_835)
    assert edges.to_pylist() == local.edges.to_pylist()
