"""Spark's "cells" strategy (HyperCube / keyed partitioning): for any cell budget it reports
exactly the single-partition matches, each once; its JVM routing is the reference's."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow as pa
import pytest

from graphcep.hashing import vertex_hash
from graphcep.io.generator import generate_netflow
from graphcep.jobs.ddst import DDSTJob
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.lang.ddst import parse_ddst
from graphcep.lang.sal import parse_file, parse_query
from graphcep.patterns.program import Program
from graphcep.patterns.subgraph import EdgePredicate
from graphcep.runtime.hypercube import Shares, choose_shares, route
from graphcep.runtime.local import run_job

pytestmark = pytest.mark.spark

EXAMPLES = "examples"

TRIANGLE = parse_query("""{ x1 e1 x2; x2 e2 x3; x3 e3 x1; starttime(e3) - starttime(e1) <= 10;
    starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }""")
# the watering hole without its features: keyed on t, one cell per edge
STAR = parse_query("""{ t e1 b; t e2 c; starttime(e1) < starttime(e2);
    starttime(e2) - starttime(e1) <= 3; }""")
FAN_IN = parse_query("""{ y e1 x; z e2 x; w e3 x; starttime(e1) < starttime(e2);
    starttime(e2) <= starttime(e3); starttime(e3) - starttime(e1) <= 2; }""")
# split on b (and c), in the middle: an edge goes to several cells
PATH = parse_query("""{ a e1 b; b e2 c; c e3 d; starttime(e1) < starttime(e2);
    starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 4; }""")
# keyed on b, in the middle: an edge goes to one or two cells
PATH2 = parse_query("""{ a e1 b; b e2 c; starttime(e1) < starttime(e2);
    starttime(e2) - starttime(e1) <= 2; }""")
# a two-cycle with a loop on one end and a predicate: loops, eligibility and predicates
LOOPED = replace(
    parse_query("""{ a e1 b; b e2 a; a e3 a; starttime(e1) < starttime(e2);
        starttime(e2) - starttime(e1) <= 6; starttime(e3) - starttime(e1) <= 6;
        starttime(e3) >= starttime(e1); }"""),
    edge_predicates=(EdgePredicate("e1", "port", "==", 80),
                     EdgePredicate("e3", "proto", "!=", "udp")),
)

CASES = {  # name -> (query, homomorphic, swapped endpoints)
    "triangle-iso": (TRIANGLE, False, False),
    "star-iso": (STAR, False, False),
    "fan-in-hom": (FAN_IN, True, False),
    "path-iso": (PATH, False, False),
    "path2-hom-swapped": (PATH2, True, True),
    "looped-hom": (LOOPED, True, False),
}


def make_stream(n: int, vertices: int, seed: int) -> pa.Table:
    """Netflow edges, one in 20 turned into a loop, with an int ``port`` (some nulls) and a
    string ``proto``."""
    table = generate_netflow(n, vertices, 100, seed=seed).select(["t", "src", "dst", "dur", "seq"])
    rng = np.random.default_rng(seed)
    src = table.column("src").to_numpy(zero_copy_only=False)
    dst = table.column("dst").to_numpy(zero_copy_only=False)
    dst = np.where(rng.random(n) < 0.05, src, dst)
    ports = rng.choice([80, 443, 22], n)
    table = table.set_column(2, "dst", pa.array(dst, pa.string()))
    table = table.append_column("port", pa.array(ports, pa.int64(), mask=rng.random(n) < 0.05))
    return table.append_column("proto", pa.array(rng.choice(["tcp", "udp"], n), pa.string()))


@pytest.fixture(scope="module")
def stream() -> pa.Table:
    return make_stream(2_500, 50, seed=11)


@pytest.fixture(scope="module")
def shuffled_df(spark, stream):
    """The stream in three round-robin partitions: no order a cell could rely on."""
    df = spark.createDataFrame(stream).repartition(3).cache()
    df.count()
    yield df
    df.unpersist()


def make_job(case: str) -> SubgraphJob:
    query, homomorphic, swapped = CASES[case]
    job = SubgraphJob.create(Program(queries=[query]), homomorphic=homomorphic)
    return replace(job, swap_endpoints=swapped)


def keys(matches: pa.Table) -> set[tuple]:
    """(match_id, edge seqs) per match; checks that none is reported twice."""
    found = [(m, tuple(e["seq"] for e in edges))
             for m, edges in zip(matches.column("match_id").to_pylist(),
                                 matches.column("edges").to_pylist(), strict=True)]
    assert len(found) == len(set(found)), "a match was reported twice"
    return set(found)


@pytest.fixture(scope="module")
def expected(stream) -> dict[str, set[tuple]]:
    """The single-partition matches of every case."""
    return {case: keys(run_job(make_job(case), stream)[0]) for case in CASES}


def test_every_case_has_matches(expected):
    assert all(len(found) >= 20 for found in expected.values()), {
        case: len(found) for case, found in expected.items()}


@pytest.mark.parametrize("partitions", [1, 2, 4, 8])
@pytest.mark.parametrize("case", list(CASES))
def test_cells_report_exactly_the_single_partition_matches(spark, shuffled_df, expected,
                                                           case, partitions):
    from graphcep.runtime.spark import run_spark

    job = make_job(case)
    matches, stats = run_spark(spark, job, shuffled_df, strategy="cells", shards=partitions)
    assert keys(matches) == expected[case]
    assert stats.extra["strategy"] == "cells"
    assert stats.extra["cells"] == choose_shares(job.query, partitions).cells


def test_keyed_queries_use_every_cell_and_one_copy(spark, shuffled_df, stream):
    from graphcep.runtime.spark import one_cell_per_edge, route_spark

    job = make_job("star-iso")
    shares = choose_shares(STAR, 4)
    assert shares.keyed_on(STAR) == "t" and shares.cells == 4
    assert one_cell_per_edge(job, shares)
    assert one_cell_per_edge(make_job("fan-in-hom"), choose_shares(FAN_IN, 4))
    path = make_job("path2-hom-swapped")  # keyed on b, in the middle: up to two cells
    assert choose_shares(PATH2, 4).keyed_on(PATH2) == "b"
    assert not one_cell_per_edge(path, choose_shares(PATH2, 4))
    routed = route_spark(job, shares, shuffled_df).select("seq", "src", "_cell").toArrow()
    loops = pa.compute.equal(stream.column("src"), stream.column("dst"))
    assert routed.num_rows == stream.num_rows - pa.compute.sum(loops).as_py()  # no loops
    assert np.array_equal(routed.column("_cell").to_numpy(),
                          vertex_hash(routed.column("src")) % 4)


# -- routing in the JVM equals the reference ------------------------------------------


def spark_route(spark, job: SubgraphJob, shares: Shares, table: pa.Table) -> set[tuple[int, int]]:
    from graphcep.runtime.spark import route_spark

    df = spark.createDataFrame(table)
    routed = route_spark(job, shares, df).select("seq", "_cell").toArrow()
    pairs = list(zip(routed.column("_cell").to_pylist(), routed.column("seq").to_pylist(),
                     strict=True))
    assert len(pairs) == len(set(pairs)), "an edge reached a cell twice"
    return set(pairs)


def reference_route(job: SubgraphJob, shares: Shares, table: pa.Table) -> set[tuple[int, int]]:
    cells, rows = route(table, job, shares)
    seqs = table.column("seq").to_numpy()[rows]
    return set(zip(cells.tolist(), seqs.tolist(), strict=True))


@pytest.mark.parametrize(("case", "grid"), [
    ("triangle-iso", (2, 2, 2)), ("triangle-iso", (3, 1, 2)), ("path-iso", (1, 3, 2, 1)),
    ("path2-hom-swapped", (2, 2, 1)), ("path2-hom-swapped", (1, 3, 1)),
    ("looped-hom", (2, 3)), ("looped-hom", (1, 4)), ("fan-in-hom", (1, 2, 2, 2)),
    ("star-iso", (3, 2, 1)),
])
def test_spark_routing_equals_the_reference(spark, case, grid):
    job = make_job(case)
    table = make_stream(600, 20, seed=3)
    shares = Shares(job.query.vertices, grid)
    assert spark_route(spark, job, shares, table) == reference_route(job, shares, table)


def test_spark_xxhash64_is_the_vertex_hash(spark):
    from pyspark.sql import functions as F

    rng = np.random.default_rng(5)
    alphabet = list("abcxyz0123456789.:-_") + ["ü", "é", "€", "𝄞", "中"]
    values = ["", "a", "10.0.0.1", "node-" + "0123456789" * 7]
    values += ["".join(rng.choice(alphabet, int(k))) for k in rng.integers(1, 70, 200)]
    df = spark.createDataFrame(pa.table({"v": pa.array(values, pa.string())}))
    got = df.select(F.xxhash64("v").alias("h")).toArrow().column("h").to_pylist()
    assert got == vertex_hash(pa.array(values, pa.string())).tolist()


# -- what cannot be split ---------------------------------------------------------------


def test_feature_queries_and_ddst_jobs_refuse_cells(spark, shuffled_df):
    from graphcep.runtime.spark import run_spark

    featured = SubgraphJob.create(parse_file(f"{EXAMPLES}/watering_hole_full.sal"), fmt="vast")
    with pytest.raises(ValueError, match="vertex features"):
        run_spark(spark, featured, shuffled_df, strategy="cells")
    ddst = DDSTJob(parse_ddst("""QUERY relay; VERTICES A, B, C;
        EDGES ab: A -> B; bc: B -> C; ORDER ab < bc; WITHIN 4 s;"""))
    with pytest.raises(ValueError, match="DDST"):
        run_spark(spark, ddst, shuffled_df, strategy="cells")
    with pytest.raises(ValueError, match="shard_length_us"):
        run_spark(spark, make_job("star-iso"), shuffled_df, strategy="cells",
                  shard_length_us=5_000_000)


# -- when "auto" picks cells -------------------------------------------------------------


def test_auto_shuffles_keyed_queries_into_cells(spark, shuffled_df, expected):
    """Unordered input longer than two extents: a star (one cell per edge, given as a bare
    query) runs as cells, a path keyed in its middle (up to two cells per edge) as time
    shards."""
    from graphcep.runtime.spark import run_spark

    for case, strategy in [("star-iso", "cells"), ("path2-hom-swapped", "shuffle")]:
        job = STAR if case == "star-iso" else make_job(case)
        matches, stats = run_spark(spark, job, shuffled_df)
        assert stats.extra["strategy"] == strategy, case
        assert keys(matches) == expected[case]


def test_auto_keeps_time_shards_when_a_hub_skews_the_cells(spark, stream):
    from graphcep.runtime.spark import run_spark

    # node0 sends every other edge: its cell holds about 3/4 of the stream
    src = stream.column("src").to_pylist()
    hubbed = stream.set_column(1, "src", pa.array(
        ["node0" if i % 2 else v for i, v in enumerate(src)], pa.string()))
    job = make_job("star-iso")
    df = spark.createDataFrame(hubbed).repartition(3)
    matches, stats = run_spark(spark, job, df)
    assert stats.extra["strategy"] == "shuffle"
    assert keys(matches) == keys(run_job(job, hubbed)[0])


def test_choose_strategy_rule():
    from graphcep.jobs.base import Extent
    from graphcep.runtime.spark import CELL_SKEW, choose_strategy

    job = make_job("star-iso")
    unordered = [{"p": 0, "t_min": 0, "t_max": 100, "n": 50},
                 {"p": 1, "t_min": 1, "t_max": 99, "n": 50}]
    ordered = [{"p": 0, "t_min": 0, "t_max": 49, "n": 50},
               {"p": 1, "t_min": 50, "t_max": 100, "n": 50}]
    even, skewed = [50, 50], [50 * CELL_SKEW + 1, 50 * (2 - CELL_SKEW) - 1]
    assert choose_strategy(unordered, Extent(10), job, None, None, even) == "cells"
    assert choose_strategy(unordered, Extent(10), job, None, None, skewed) == "shuffle"
    assert choose_strategy(unordered, Extent(10), job, None, None, None) == "shuffle"
    assert choose_strategy(ordered, Extent(10), job, None, None, even) == "partitions"
    assert choose_strategy(unordered, Extent(60), job, None, None, even) == "single"
    assert choose_strategy(unordered, Extent(10), job, 4, None, even) == "shuffle"
