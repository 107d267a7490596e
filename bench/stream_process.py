"""The whole ``graphcep stream`` process, files in and JSONL parts out: driver against executors.

``bench.stream_modes`` measures the matching with a sink that writes nothing. A user's run
also formats every match as a JSON line and writes it; in the driver mode the driver does
that for the whole stream, in the executor mode each cell writes its matches as the sink's
own bytes and the driver only joins them (``JsonlSink.encoder``). So this bench runs the
command itself, as a user does -- a directory of Parquet files, ``--once``, ``--output
DIR/`` -- on a stream dense enough for the output to weigh, and times the process from
start to exit (Spark's start-up included) and the micro-batches alone (the summary's
``micro-batches`` phase, ``--profile``). Every mode's parts must hold the same lines (the
check that the modes agree; the matches themselves are tested against the brute-force
matcher in ``tests/``).

Run: ``python -m bench.stream_process [--edges N --vertices V --master local[2]] [--record]``
"""

from __future__ import annotations

import argparse
import hashlib
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench.nu import machine_lines
from bench.stream_modes import TRIANGLE, write_files
from bench.triangles import record

START_MARK, END_MARK = "<!-- bench.stream_process:start -->", "<!-- bench.stream_process:end -->"


def run(query: Path, source: Path, work: Path, master: str, mode: str, cells: int | None
        ) -> tuple[float, dict, str]:
    """One ``graphcep stream --once`` process: its wall seconds, its JSON summary and a
    digest of its output's lines (sorted: the modes write a part's matches in their own
    order)."""
    command = [sys.executable, "-m", "graphcep.cli", "stream", str(query), "--source",
               str(source), "--format", "parquet", "--once", "--checkpoint", str(work / "ck"),
               "--output", f"{work / 'out'}/", "--master", master, "--matching", mode,
               "--max-files-per-trigger", "1", "--summary", "json", "--quiet", "--profile"]
    if cells is not None:
        command += ["--cells", str(cells)]
    started = time.perf_counter()
    done = subprocess.run(command, capture_output=True, text=True, check=True)
    wall = time.perf_counter() - started
    summary = json.loads(done.stdout.strip().splitlines()[-1])
    lines = sorted(line for part in (work / "out").glob("part-*")
                   for line in part.read_text().splitlines())
    return wall, summary, hashlib.sha256("\n".join(lines).encode()).hexdigest()[:12]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--edges", type=int, default=300_000)
    parser.add_argument("--vertices", type=int, default=1_500)
    parser.add_argument("--files", type=int, default=10)
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--cells", default="1,2,8", help="comma list of executor-mode cells")
    parser.add_argument("--repeat", type=int, default=2)
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    header = machine_lines("python -m bench.stream_process " + " ".join(argv or sys.argv[1:]))
    work = Path(tempfile.mkdtemp(prefix="stream-process-"))
    write_files(work / "in", args.edges, args.vertices, args.files)
    query = work / "triangle.sal"
    query.write_text(TRIANGLE)
    modes = [("driver", None)] + [("executors", int(c)) for c in args.cells.split(",")]
    rows, digests = [], set()
    for mode, cells in modes:
        runs = []
        for number in range(args.repeat):
            wall, summary, digest = run(query, work / "in", work / f"{mode}-{cells}-{number}",
                                        args.master, mode, cells)
            digests.add(digest)
            runs.append((wall, summary))
        wall, summary = min(runs, key=lambda pair: pair[0])
        batches = summary["phases"]["micro-batches"]
        name = mode if cells is None else f"executors, {cells} cells"
        rows.append(f"| {name} | {wall:.1f} | {batches:.1f} | {args.edges / batches:,.0f} | "
                    f"{summary['matches']:,} | {summary['matches'] / batches:,.0f} |")
        print(rows[-1], flush=True)
    agree = "the same lines in every run" if len(digests) == 1 else \
        f"DIFFERENT outputs: {sorted(digests)}"
    text = "\n".join([
        "### The whole `graphcep stream` process: driver against executors, JSONL out", "",
        *header,
        f"- stream: the triangle over {args.edges:,} generated netflow edges, {args.vertices:,} "
        f"vertices, 60,000 edges/s of event time, {args.files} Parquet files read one per "
        f"micro-batch (`--once`), matches to `--output DIR/` (JSONL); {args.master}; best of "
        f"{args.repeat}; outputs: {agree}", "",
        "| mode | process seconds (start to exit) | micro-batches seconds | edges/s in the "
        "micro-batches | matches | matches/s written |", "|---|---|---|---|---|---|", *rows])
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
