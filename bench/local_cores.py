"""The default local engine on 1 to N cores: whole ``graphcep run`` processes, pinned.

Run ``python -m bench.local_cores [--cores 1,2,4,8,16] [--edges 1000000,8000000]
[--repeat 3] [--out FILE] [--record | --record-from FILE]`` from the repository root.

Each row is one ``graphcep run examples/triangle.sal --input S.parquet --engine local``
process pinned to the first ``n`` cores with ``taskset`` (the engine sizes its threads
from the affinity mask, :func:`graphcep.cores.usable_cores`), timed as a whole, best of
``--repeat`` rounds; the cores' rows run round-robin so that each round meets the same
load. Streams: S2 (1M edges, |V| = 25,000, 60,000 edges/s; the Parquet file of
``bench.spark_path``) and longer streams of the same parameters
(:func:`bench.scaling.generate_stream`, written as Parquet with the core columns). Every
row of a stream must report the same number of triangles. No Spark and no Java: the
bench runs where only Python, NumPy, pyarrow and numba are installed.

``--out`` writes the section to a file (a machine that cannot commit writes it there);
``--record-from FILE`` puts such a file into ``bench/RESULTS.md``.
"""

from __future__ import annotations

import argparse
import shutil
import sys
import time
from pathlib import Path

from bench.nu_paper import machine_lines
from bench.spark_path import Command, graphcep_argv, parquet_path, time_once
from bench.triangles import DATA_DIR, QUERY_FILE, ROOT, record

START_MARK = "<!-- bench.local_cores:start -->"
END_MARK = "<!-- bench.local_cores:end -->"


def stream_file(edges: int) -> Path:
    """S2 itself for 1M edges, else a Parquet file of ``edges`` edges of S2's parameters."""
    if edges == 1_000_000:
        return parquet_path()
    path = DATA_DIR / f"S2-long-e{edges}.parquet"
    if not path.exists():
        import pyarrow.parquet as pq

        from bench.scaling import generate_stream

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp.parquet")
        pq.write_table(generate_stream(edges), tmp)
        tmp.replace(path)
    return path


def pinned(cores: int, data: Path) -> Command:
    argv = graphcep_argv("run", str(QUERY_FILE), "--input", str(data), "--engine", "local",
                         "--summary", "json")
    return Command(f"{cores}", ["taskset", "-c", f"0-{cores - 1}", *argv])


def stream_rows(edges: int, cores: list[int], repeat: int) -> list[str]:
    data = stream_file(edges)
    commands = [pinned(n, data) for n in cores]
    time_once(commands[-1], ROOT)  # warm-up: numba's cache and the file in the page cache
    for _ in range(repeat):
        for command in commands:
            time_once(command, ROOT)
    one = commands[0].best
    rows = []
    for n, command in zip(cores, commands, strict=True):
        if command.failure or command.best is None:
            rows.append(f"| {edges:,} | {n} | failed: {command.failure} | | | | | |")
            continue
        best = command.best
        cpu = command.cpu[command.seconds.index(best)]
        runs = ", ".join(f"{s:.2f}" for s in command.seconds)
        speedup = one / best if one else float("nan")
        rows.append(f"| {edges:,} | {n} | {best:.2f} | {runs} | {cpu:.2f} | "
                    f"{edges / best:,.0f} | {speedup:.2f}x | "
                    f"{', '.join(map(str, sorted(command.matches)))} |")
    agree = {frozenset(c.matches) for c in commands if c.matches}
    if len(agree) > 1:
        rows.append(f"| {edges:,} | | **triangle counts differ between rows** | | | | | |")
    return rows


def section(args: argparse.Namespace, rows: list[str], seconds: float) -> str:
    head = [
        "## The default local engine on 1 to N cores (`bench/local_cores.py`)",
        "",
        f"Command: `python -m bench.local_cores {' '.join(args.argv)}` ({seconds:.0f} s in all)",
        "",
        *machine_lines(("pyarrow", "numpy", "numba")),
        "",
        "Each row: one whole `graphcep run tri.sal --input S.parquet --engine local` process "
        "pinned to the first n cores (`taskset`), best of the rounds; CPU s is user + "
        "system of the best round; speedup against n = 1.",
        "",
        "| edges | cores | best s | runs (s) | CPU s | edges/s | speedup | triangles |",
        "|---:|---:|---:|---|---:|---:|---:|---:|",
    ]
    return "\n".join([*head, *rows])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.local_cores", description=__doc__)
    parser.add_argument("--cores", default="1,2,4,8,16")
    parser.add_argument("--edges", default="1000000,8000000")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--out", type=Path, help="write the section to this file")
    parser.add_argument("--record", action="store_true", help="write it into RESULTS.md")
    parser.add_argument("--record-from", type=Path,
                        help="put a section written by --out into RESULTS.md, and stop")
    args = parser.parse_args(argv)
    args.argv = list(sys.argv[1:] if argv is None else argv)
    if args.record_from is not None:
        record(args.record_from.read_text().strip(), START_MARK, END_MARK)
        return 0
    if shutil.which("taskset") is None:
        print("bench.local_cores: skipped: taskset (util-linux) is not installed")
        return 0
    from graphcep.cores import usable_cores

    have = usable_cores()
    cores = [n for n in (int(c) for c in args.cores.split(",")) if 1 <= n <= have]
    started = time.perf_counter()
    rows = []
    for edges in (int(e) for e in args.edges.split(",")):
        rows += stream_rows(edges, cores, args.repeat)
        print("\n".join(rows[-len(cores):]), flush=True)
    text = section(args, rows, time.perf_counter() - started)
    print(text)
    if args.out is not None:
        args.out.write_text(text + "\n")
    if args.record:
        record(text, START_MARK, END_MARK)
    return 0


if __name__ == "__main__":
    sys.exit(main())
