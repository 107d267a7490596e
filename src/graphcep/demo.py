"""``graphcep demo``: the paper's two headline queries over generated netflow, on Spark.

1. Generates a reproducible netflow stream with SAM's random-pool generator (VAST format)
   and plants a few watering-hole attacks in it: a *victim* host contacts a popular site
   (the bait), and shortly after that flow ends it contacts a never-seen controller.
2. Runs the temporal-triangle query (Listing 1) and the watering-hole program
   (Listing 3, with a top-k feature sized to this stream) on embedded Spark.
3. Prints a few matches and a summary, and checks that every planted attack was found.
"""

from __future__ import annotations

import time
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import US_PER_SECOND
from graphcep.io.generator import generate_netflow, write_edges
from graphcep.io.sinks import make_sink
from graphcep.lang.listings import LISTING_1
from graphcep.lang.sal import parse_program

TRIANGLE_SAL = LISTING_1

WATERING_HOLE_SAL = """// Listing 3, with the top-k sized to the demo's {vertices} hosts
Netflows = VastStream("localhost", 9999);
Popular = FOREACH Netflows GENERATE topk(DestIp, 100000, 10000, {vertices});
SUBGRAPH WateringHole ON Netflows WITH source(SourceIp) AND target(DestIp)
{{
    target e1 bait;
    target e2 controller;
    starttime(e2) > endtime(e1);
    starttime(e2) - endtime(e1) < 20;
    bait in Popular;
    controller not in Popular;
}}
"""

VERTICES = 2_000
RATE = 1_000
ATTACKS = 5
#: the fewest flows the demo generates: 100 s of them, room for the planted attacks (each
#: within 60 s of the end, none in the first tenth) and for the top-k to see the baits
MIN_EDGES = 100_000


def demo_stream(edges: int, seed: int = 7) -> tuple[pa.Table, list[tuple[str, str, str]]]:
    """Background netflow plus planted watering holes: (table, [(victim, bait, controller)])."""
    background = generate_netflow(edges, VERTICES, RATE, seed)
    rng = np.random.default_rng(seed)
    span = int(pc.max(background.column("t")).as_py())
    rows = rng.choice(background.num_rows, 2 * ATTACKS, replace=False)
    planted = background.take(pa.array(rows))
    starts = np.sort(rng.integers(span // 10, span - 60 * US_PER_SECOND, ATTACKS))
    t, src, dst, dur, attacks = [], [], [], [], []
    for i, start in enumerate(starts):
        victim, bait, controller = f"victim{i}", f"node{rng.integers(VERTICES)}", f"c2-{i}"
        bait_dur = int(rng.integers(1, 5)) * US_PER_SECOND
        gap = int(rng.integers(1, 19)) * US_PER_SECOND
        t += [int(start), int(start) + bait_dur + gap]
        src += [victim, victim]
        dst += [bait, controller]
        dur += [bait_dur, US_PER_SECOND]
        attacks.append((victim, bait, controller))
    planted = (
        planted.set_column(0, "t", pa.array(t, pa.int64()))
        .set_column(1, "src", pa.array(src))
        .set_column(2, "dst", pa.array(dst))
        .set_column(3, "dur", pa.array(dur, pa.int64()))
    )
    table = pa.concat_tables([background, planted]).sort_by([("t", "ascending"), ("seq", "ascending")])
    table = table.set_column(4, "seq", pa.array(np.arange(1, table.num_rows + 1), pa.int64()))
    return table, attacks


def run_demo(edges: int, master: str, workdir: Path) -> int:
    from graphcep.interrupts import exit_on_interrupt
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.runtime.spark import read_edges_spark, run_spark, spark_session

    workdir.mkdir(parents=True, exist_ok=True)
    stream_path = workdir / "netflow.csv"
    table, attacks = demo_stream(edges)
    write_edges(table, stream_path, "vast")
    print(f"generated {table.num_rows:,} netflows over {VERTICES:,} hosts at {RATE:,}/s "
          f"with {ATTACKS} planted watering holes -> {stream_path}")
    started = time.perf_counter()
    spark = spark_session(master)
    exit_on_interrupt(f"the generated stream stays in {stream_path}")  # not Spark's handler
    print(f"Spark {spark.version} on {master} started in {time.perf_counter() - started:.1f} s")
    edges_df, rejects_df, lines = read_edges_spark(spark, stream_path, "vast")
    edges_df = edges_df.cache()
    programs = {
        "triangle": parse_program(TRIANGLE_SAL, "triangle.sal"),
        "watering hole": parse_program(WATERING_HOLE_SAL.format(vertices=VERTICES), "wh.sal"),
    }
    found = {}
    for title, program in programs.items():
        job = SubgraphJob.create(program, fmt="vast")
        matches, stats = run_spark(spark, job, edges_df)
        found[title] = matches
        print(f"\n== {title}: {stats.matches:,} matches in {stats.edges:,} edges, "
              f"{stats.seconds:.1f} s ({stats.edges / stats.seconds:,.0f} edges/s); first 3:")
        with make_sink("-", limit=3) as sink:
            sink.write(matches)
    hits = {
        (b["target"], b["bait"], b["controller"])
        for b in (dict(m) for m in found["watering hole"].column("bindings").to_pylist())
    }
    missed = [a for a in attacks if a not in hits]
    print(f"\nsummary: {lines:,} lines read, {rejects_df.count():,} rejected; "
          f"{found['triangle'].num_rows:,} temporal triangles; "
          f"{len(attacks) - len(missed)}/{len(attacks)} planted watering holes found, "
          f"{len(hits - set(attacks))} other watering-hole matches")
    return 0 if not missed else 1
