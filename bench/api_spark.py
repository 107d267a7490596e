"""``q.match`` on a Spark DataFrame against ``graphcep run`` on Spark, on the same edges.

Run ``python -m bench.api_spark [--stream S0|S1|S2] [--repeat 3] [--record]`` from the repository
root. One process, one Spark session (``local[2]``, as the tests), so neither side pays the
JVM's start-up; the two rows run round-robin, so that each round meets the same load;
"best" is the fastest of ``--repeat`` rounds. The edges are the stream's as a CSV file
(``src,dst,t`` with a header, ``t`` in µs), which both read with Spark:

- ``graphcep run``: ``main(["run", tri.sal, "--input", CSV, "--time-unit", "us", "-o",
  OUT.parquet])``, the command line's whole run (reading, matching, writing the Parquet
  file through the driver).
- ``q.match``: ``q.match(spark.read.csv(CSV, ...), time_unit="us")`` then
  ``.write.parquet(OUT/)``: the lazy frame, written by Spark's own writer from the
  executors.

Both must find the same number of triangles. The target: ``q.match`` costs no more than
``graphcep run`` (within 10%).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import json
import os
import shutil
import tempfile
import time
from pathlib import Path

from bench.nu_paper import machine_lines
from bench.triangles import DATA_DIR, QUERY_FILE, STREAMS, Stream, record

START_MARK = "<!-- bench.api_spark:start -->"
END_MARK = "<!-- bench.api_spark:end -->"
TARGET = 1.10  # q.match within 10% of graphcep run

#: The benchmark's streams: S1 and S2, and S0, small enough for a loaded 2-core machine.
STREAMS = {"S0": Stream("S0", 50_000, 2_000, 2_500), **STREAMS}


def csv_path(name: str) -> Path:
    """The stream as ``src,dst,t`` CSV, ``t`` in µs (generated once, under bench/data/)."""
    stream = STREAMS[name]
    path = DATA_DIR / f"{stream.stem}.api.csv"
    if not path.exists():
        import pyarrow.csv as pcsv

        from graphcep.io.generator import generate_netflow

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        table = generate_netflow(stream.edges, stream.vertices, stream.rate, seed=stream.seed)
        tmp = path.with_suffix(".tmp")
        pcsv.write_csv(table.select(["src", "dst", "t"]), tmp)
        tmp.replace(path)
    return path


def run_cli(csv: Path, out: Path) -> int:
    """``graphcep run`` on Spark, the matches to a Parquet file; the count it reports."""
    from graphcep.cli import main

    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        status = main(["run", str(QUERY_FILE), "--input", str(csv), "--format", "csv",
                       "--header", "--time-unit", "us", "-o", str(out), "--summary",
                       "json"])
    assert status == 0, status
    return json.loads(printed.getvalue().strip().splitlines()[-1])["matches"]


def run_api(spark, csv: Path, out: Path, planning: list[float]) -> int:
    """``q.match`` on the Spark DataFrame of the same file, written by Spark; the count
    of what was written. The seconds of the ``match`` call itself (its aggregates) go to
    ``planning``."""
    import pyarrow.parquet as pq

    import graphcep

    edges = spark.read.csv(str(csv), header=True, schema="src string, dst string, t long")
    started = time.perf_counter()
    matches = graphcep.load(QUERY_FILE).match(edges, time_unit="us")
    planning.append(time.perf_counter() - started)
    matches.write.mode("overwrite").parquet(str(out))
    return pq.read_table(out, columns=["match_id"]).num_rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stream", default="S1", choices=sorted(STREAMS))
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--record", action="store_true")
    args = parser.parse_args()
    from graphcep.runtime.spark import spark_session

    csv = csv_path(args.stream)
    spark = spark_session("local[2]", app_name="bench-api-spark", shuffle_partitions=2)
    load_start = os.getloadavg()[0]
    started = time.perf_counter()
    seconds: dict[str, list[float]] = {"graphcep run": [], "q.match": []}
    counts: dict[str, set[int]] = {"graphcep run": set(), "q.match": set()}
    planning: list[float] = []
    folder = Path(tempfile.mkdtemp(prefix="bench-api-spark-"))
    try:
        run_cli(csv, folder / "warm.parquet")  # kernels and Spark's caches, both sides
        run_api(spark, csv, folder / "warm", [])
        for _ in range(args.repeat):
            for name in seconds:
                t0 = time.perf_counter()
                found = (run_cli(csv, folder / "cli.parquet") if name == "graphcep run"
                         else run_api(spark, csv, folder / "api", planning))
                seconds[name].append(time.perf_counter() - t0)
                counts[name].add(found)
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        spark.stop()
    text = report(args, csv, seconds, counts, planning, load_start,
                  time.perf_counter() - started)
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)


def report(args, csv: Path, seconds, counts, planning: list[float], load_start: float,
           total: float) -> str:
    stream = STREAMS[args.stream]
    best = {name: min(runs) for name, runs in seconds.items()}
    ratio = best["q.match"] / best["graphcep run"]
    agree = len(set().union(*counts.values())) == 1
    lines = [
        f"## q.match on a Spark DataFrame against graphcep run on Spark "
        f"({args.stream}, triangle, W = 10 s)",
        "",
        *machine_lines(("pyspark", "pyarrow", "numpy")),
        f"- command: `python -m bench.api_spark --stream {args.stream} --repeat "
        f"{args.repeat}{' --record' if args.record else ''}`",
        f"- 1-minute load average: {load_start:.2f} at the start, "
        f"{os.getloadavg()[0]:.2f} at the end ({total:.0f} s in all): the machine was "
        "shared with other work, so the figures are noisy; the rows ran round-robin",
        f"- {args.stream}: {stream.edges:,} edges, |V| = {stream.vertices:,}, as CSV "
        f"`{csv.name}` (src, dst, t in µs), read by Spark on both rows; one Spark "
        "session (`local[2]`), started before the timings",
        "",
        "| row | best s | runs (s) | triangles |",
        "|---|---|---|---|",
        *[f"| {name} | {best[name]:.2f} | {', '.join(f'{s:.2f}' for s in runs)} | "
          f"{', '.join(f'{c:,}' for c in sorted(counts[name]))} |"
          for name, runs in seconds.items()],
        "",
        f"Of q.match's runs, the `match` call itself (its aggregate: the checks and the "
        f"replay's statistics): {', '.join(f'{s:.2f}' for s in planning)} s.",
        "",
        f"Triangles: {'both rows agree' if agree else 'THE ROWS DISAGREE'}.",
        f"Target: q.match within 10% of graphcep run: {ratio:.2f}x "
        f"({'MET' if ratio <= TARGET else 'NOT MET'}).",
    ]
    return "\n".join(lines)


if __name__ == "__main__":
    main()
