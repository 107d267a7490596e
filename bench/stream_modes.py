"""The two streaming modes side by side on one Spark session: matching in the driver
(``StreamOperator`` in ``foreachBatch``) and in the executors (cells as Spark keys,
``runtime/spark_cells.py``), the same Parquet files as a file stream, one file per
micro-batch, the SAL temporal triangle (W = 10 s, lateness 2 s).

Generated netflow at 60k edges/s of event time; a last file holds one far edge whose
watermark releases every buffered edge in both modes (the executor mode has no end-of-
input flush yet), so both report every match. Each mode runs once to warm up (JVM,
Python workers, compilation), then ``--repeat`` timed runs on fresh checkpoints; the
best is reported, as edges per second of the whole query (start to end of its run).
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq

from bench.nu import machine_lines
from bench.triangles import record

START_MARK, END_MARK = "<!-- bench.stream_modes:start -->", "<!-- bench.stream_modes:end -->"
TRIANGLE = """{ a e1 b; b e2 c; c e3 a; starttime(e1) < starttime(e2);
 starttime(e2) < starttime(e3); starttime(e3) - starttime(e1) <= 10; }"""
LATENESS_US = 2_000_000


class _Count:
    """A sink that counts the matches written."""

    def __init__(self) -> None:
        self.rows = 0

    def write(self, table: pa.Table, batch_id: int | None = None) -> None:
        self.rows += table.num_rows


def write_files(directory: Path, edges: int, vertices: int, files: int) -> None:
    """The stream as ``files`` Parquet files (modification times in order) and the far edge."""
    from graphcep.io.generator import generate_netflow

    table = generate_netflow(edges, vertices, 60_000, seed=1).select(
        ["t", "src", "dst", "dur", "seq"])
    far = pa.table({"t": [10**12], "src": ["far1"], "dst": ["far2"], "dur": [0],
                    "seq": [edges + 1]}).cast(table.schema)
    step = -(-edges // files)
    parts = [table.slice(i * step, step) for i in range(files)] + [far]
    directory.mkdir(parents=True)
    for i, part in enumerate(parts):
        path = directory / f"part-{i:04d}.parquet"
        pq.write_table(part, path)
        os.utime(path, (1_700_000_000 + i, 1_700_000_000 + i))


def run_mode(spark, job, source: Path, checkpoint: Path, cells: int | None) -> tuple[float, int]:
    """Seconds and matches of one run: the driver mode when ``cells`` is None."""
    from graphcep.runtime.spark_cells import start_cells_stream
    from graphcep.runtime.spark_stream import FileSource, run_available_now
    from graphcep.runtime.streaming import StreamOperator

    sink = _Count()
    started = time.perf_counter()
    if cells is None:
        operator = StreamOperator(job, lateness_us=LATENESS_US, checkpoint=checkpoint, sink=sink)
        run_available_now(spark, operator, FileSource(str(source), "parquet",
                                                      max_files_per_trigger=1),
                          checkpoint=checkpoint, on_report=None)
    else:
        edges = (spark.readStream.schema("t long, src string, dst string, dur long, seq long")
                 .option("maxFilesPerTrigger", "1").parquet(str(source)))
        start_cells_stream(spark, edges, job, cells=cells, lateness_us=LATENESS_US,
                           checkpoint=str(checkpoint), sink=sink,
                           available_now=True).awaitTermination()
    return time.perf_counter() - started, sink.rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.stream_modes",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--edges", type=int, default=200_000)
    parser.add_argument("--vertices", type=int, default=3_000)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cells", default="1,8", help="comma list of executor-mode cells")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    from graphcep.jobs.subgraph import SubgraphJob
    from graphcep.lang.sal import parse_program
    from graphcep.runtime.spark import spark_session

    header = machine_lines("python -m bench.stream_modes " + " ".join(argv or sys.argv[1:]))
    work = Path(tempfile.mkdtemp(prefix="stream-modes-"))
    write_files(work / "in", args.edges, args.vertices, args.files)
    spark = spark_session(args.master, shuffle_partitions=2)
    job = SubgraphJob.create(parse_program(TRIANGLE))
    modes = [("driver", None)] + [(f"executors, {c} cells", int(c))
                                  for c in args.cells.split(",")]
    rows = []
    for name, cells in modes:
        times, matches = [], set()
        for run in range(args.repeat + 1):
            seconds, found = run_mode(spark, job, work / "in", work / f"ck-{name}-{run}", cells)
            matches.add(found)
            if run:
                times.append(seconds)
        best = min(times)
        rows.append(f"| {name} | {best:.2f} | {args.edges / best:,.0f} | "
                    f"{', '.join(map(str, sorted(matches)))} |")
        print(rows[-1], flush=True)
    load = os.getloadavg()[0]
    text = "\n".join([
        "### Streaming modes: driver against executors", "", *header,
        f"- Spark {args.master}; {args.edges:,} edges over {args.vertices:,} vertices in "
        f"{args.files} files, one per micro-batch; load average at the end {load:.2f}", "",
        "| mode | best seconds | edges/s | matches |", "|---|---|---|---|", *rows])
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
