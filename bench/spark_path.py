"""The default path, timed as a user meets it: whole ``graphcep run`` processes on S2.

Run ``python -m bench.spark_path [--repeat 3] [--record]`` from the repository root. See
``bench/README.md`` ("The Spark path") for what each row is and the targets.

Every command is a fresh process of the interpreter running this module (the venv's),
importing graphcep from ``src/``; the rows run round-robin, one process at a time, so that
each round meets the same load; "best" is the fastest of ``--repeat`` rounds. Every
command must report the same number of triangles.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

from bench.nu_paper import machine_lines
from bench.triangles import DATA_DIR, QUERY_FILE, ROOT, STREAMS, record

START_MARK = "<!-- bench.spark_path:start -->"
END_MARK = "<!-- bench.spark_path:end -->"
STREAM = STREAMS["S2"]
POLARS_SCRIPT = ROOT / "bench" / "polars_triangles.py"

#: Starts a SparkSession as ``graphcep run`` does, and stops it: the JVM's start-up alone.
JVM_ALONE = ("from graphcep.runtime.spark import spark_session; "
             "spark_session('local[*]').stop()")

#: The targets: local edges/s, local against Polars, Spark against JVM + 2 x local.
LOCAL_RATE = 1_000_000
POLARS_RATIO = 1.3
SPARK_LOCAL_FACTOR = 2.0


@dataclass
class Command:
    """One command line and its timings."""

    name: str
    argv: list[str]
    counts: bool = True  # prints a triangle count (graphcep: the JSON summary's matches)
    seconds: list[float] = field(default_factory=list)
    cpu: list[float] = field(default_factory=list)  # user + system, the process's children's
    matches: set[int] = field(default_factory=set)
    failure: str = ""

    @property
    def best(self) -> float | None:
        return min(self.seconds) if self.seconds else None


def parquet_path() -> Path:
    """S2 as a Parquet file (generated once, cached under bench/data/)."""
    path = DATA_DIR / f"{STREAM.stem}.parquet"
    if not path.exists():
        from graphcep.io.generator import generate_netflow, write_edges

        DATA_DIR.mkdir(parents=True, exist_ok=True)
        table = generate_netflow(STREAM.edges, STREAM.vertices, STREAM.rate, seed=STREAM.seed)
        tmp = path.with_suffix(".tmp.parquet")
        write_edges(table, tmp, "parquet")
        tmp.replace(path)
    return path


def graphcep_argv(*args: str) -> list[str]:
    """``graphcep ARGS`` as the console script runs it, with this interpreter."""
    return [sys.executable, "-c", "import sys; from graphcep.cli import main; sys.exit(main())",
            *args]


def polars_available() -> str | None:
    """None when Polars imports in this interpreter, else why not."""
    done = subprocess.run([sys.executable, "-c", "import polars"], capture_output=True,
                          text=True, check=False)
    return None if done.returncode == 0 else (done.stderr.strip().splitlines() or ["?"])[-1]


def commands(data: Path, polars: bool) -> list[Command]:
    run = ["run", str(QUERY_FILE), "--input", str(data), "--summary", "json"]
    found = [
        Command("graphcep run tri.sal --input S2.parquet --engine local",
                graphcep_argv(*run, "--engine", "local")),
        Command("graphcep run tri.sal --input S2.parquet (Spark local[*])", graphcep_argv(*run)),
        Command("JVM start-up alone: spark_session() and stop, whole process",
                [sys.executable, "-c", JVM_ALONE], counts=False),
    ]
    if polars:
        found.insert(1, Command("Polars join_where script (start-up, read, join)",
                                [sys.executable, str(POLARS_SCRIPT), str(data)]))
    return found


def environment() -> dict[str, str]:
    """This interpreter's environment with graphcep imported from ``src/``."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(ROOT / "src"), *filter(None, [env.get("PYTHONPATH")])])
    return env


def children_cpu() -> float:
    """User + system seconds of this process's waited-for children so far."""
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def time_once(command: Command, cwd: Path) -> None:
    cpu = children_cpu()
    started = time.perf_counter()
    done = subprocess.run(command.argv, capture_output=True, text=True, check=False,
                          cwd=cwd, env=environment())
    seconds = time.perf_counter() - started
    if done.returncode != 0:
        command.failure = (done.stderr.strip().splitlines() or [f"exit {done.returncode}"])[-1]
        return
    command.seconds.append(seconds)
    command.cpu.append(children_cpu() - cpu)
    if command.counts:
        last = done.stdout.strip().splitlines()[-1]
        command.matches.add(int(json.loads(last)["matches"]) if last.startswith("{")
                            else int(last))


def profile(data: Path, engine: str, cwd: Path) -> str:
    """The ``--profile`` table of one more run (stderr, Spark's own log lines left out)."""
    args = ["run", str(QUERY_FILE), "--input", str(data), "--profile", "-o", "/dev/null",
            "--output-format", "jsonl"]
    if engine == "local":
        args += ["--engine", "local"]
    done = subprocess.run(graphcep_argv(*args), capture_output=True, text=True, check=False,
                          cwd=cwd, env=environment())
    table = done.stderr[done.stderr.find("phase "):] if "phase " in done.stderr else done.stderr
    return table.rstrip()


def verdict(met: bool) -> str:
    return "MET" if met else "MISSED"


def targets(local: Command, polars: Command | None, spark: Command, jvm: Command) -> list[str]:
    lines = []
    if local.best is not None:
        rate = STREAM.edges / local.best
        lines.append(f"- local >= {LOCAL_RATE:,} edges/s (whole process): {rate:,.0f} edges/s "
                     f"({local.best:.2f} s): {verdict(rate >= LOCAL_RATE)}")
        if polars is not None and polars.best is not None:
            ratio = polars.best / local.best
            lines.append(f"- local >= {POLARS_RATIO}x the Polars script: {ratio:.2f}x "
                         f"({polars.best:.2f} s / {local.best:.2f} s): "
                         f"{verdict(ratio >= POLARS_RATIO)}")
        else:
            lines.append("- local >= 1.3x the Polars script: not measured (Polars missing)")
        if spark.best is not None and jvm.best is not None:
            bound = jvm.best + SPARK_LOCAL_FACTOR * local.best
            lines.append(f"- Spark local[*] <= JVM start-up + 2 x local = {jvm.best:.2f} + 2 x "
                         f"{local.best:.2f} = {bound:.2f} s: {spark.best:.2f} s: "
                         f"{verdict(spark.best <= bound)}")
    return lines or ["- (a command failed: no targets evaluated)"]


def table(rows: list[Command]) -> list[str]:
    lines = ["| command | best s | runs (s) | CPU s of the best run | edges/s | triangles |",
             "|---|---|---|---|---|---|"]
    for c in rows:
        runs = ", ".join(f"{s:.2f}" for s in c.seconds) or c.failure
        if c.best is None:
            lines.append(f"| {c.name} | - | {runs} | - | - | - |")
            continue
        cpu = c.cpu[c.seconds.index(c.best)]
        rate = f"{STREAM.edges / c.best:,.0f}" if c.counts else "-"
        count = ", ".join(f"{m:,}" for m in sorted(c.matches)) or "-"
        lines.append(f"| {c.name} | {c.best:.2f} | {runs} | {cpu:.2f} | {rate} | {count} |")
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.spark_path",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--repeat", type=int, default=3, help="rounds (best of them)")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    data = parquet_path()
    missing = polars_available()
    if missing is not None:
        print(f"Polars cannot be imported ({missing}): its row is skipped", file=sys.stderr)
    rows = commands(data, missing is None)
    load_before = os.getloadavg()
    started = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for round_ in range(args.repeat):
            for c in rows:
                time_once(c, Path(tmp))
                print(f"round {round_ + 1}: {c.name}: "
                      f"{c.seconds[-1] if c.seconds and not c.failure else c.failure}",
                      file=sys.stderr)
        profiles = {engine: profile(data, engine, Path(tmp)) for engine in ("local", "spark")}
    load_after = os.getloadavg()
    local, spark, jvm = rows[0], rows[-2], rows[-1]
    polars = next((c for c in rows if c.name.startswith("Polars")), None)
    counts = set().union(*(c.matches for c in rows if c.counts))
    failed = [c for c in rows if c.failure]
    text = "\n".join([
        "## The Spark path: whole `graphcep run` processes on S2 (triangle, W = 10 s)",
        "",
        *machine_lines(("pyspark", "polars", "pyarrow", "numpy", "numba")),
        f"- command: `python -m bench.spark_path {' '.join(argv or sys.argv[1:])}`".rstrip(),
        f"- 1-minute load average: {load_before[0]:.2f} at the start, {load_after[0]:.2f} "
        f"at the end ({time.perf_counter() - started:.0f} s in all)",
        f"- S2: {STREAM.edges:,} edges, |V| = {STREAM.vertices:,}, {STREAM.rate:,} edges/s, "
        f"seed {STREAM.seed}, as Parquet (`{data.name}`, {data.stat().st_size / 1e6:.1f} MB, "
        "all 20 columns)",
        "",
        *table(rows),
        "",
        ("Triangles: every command agrees." if len(counts) == 1 and not failed
         else f"Triangles DISAGREE or a command failed: {sorted(counts)}"),
        "",
        "Targets (wall clock, as a user waits):",
        *targets(local, polars, spark, jvm),
        "",
        "CPU s is the user + system time of the process and the children it waited for (the "
        "JVM's own threads count for Spark only where the JVM was waited for); on a loaded "
        "machine the wall clock of a 2-thread process stretches, its CPU time much less.",
        "",
        "`--profile` of one more run of each (seconds; indented rows are parts of the row "
        "above, summed over tasks where they say so):",
        "",
        "```",
        "$ graphcep run tri.sal --input S2.parquet --engine local --profile",
        profiles["local"],
        "$ graphcep run tri.sal --input S2.parquet --profile",
        profiles["spark"],
        "```",
    ])
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)
    return 1 if failed or len(counts) != 1 else 0


if __name__ == "__main__":
    sys.exit(main())
