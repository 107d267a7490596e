"""δ-temporal motif counts: graphcep against SNAP's C++ ``temporalmotifs`` and Raphtory.

Streams: CollegeMsg, email-Eu-core (temporal) and sx-mathoverflow (``../shared/data``,
SNAP's files: ``SRC DST T`` in seconds), δ = 600, 3600, 86400 s. Methods, one at a time,
each in its own process:

1. **graphcep API** -- ``graphcep.motifs.count_motifs(table, [600, 3600, 86400])`` on the
   edge table already read (``read_edges``, timed on its own row), all δ in one call; an
   untimed first run loads the compiled kernels, then the best of ``--repeat`` runs; on
   the machine's cores (numba's default thread count) and on one
   (``NUMBA_NUM_THREADS=1``), each in its own process, with the same tables.
2. **graphcep CLI** -- the whole ``graphcep motifs -i FILE --delta 600,3600,86400
   --format json`` process (start-up, reading, counting, writing), best of ``--repeat``
   after one untimed run.
3. **SNAP, 1 thread** -- SNAP's own program (``examples/temporalmotifs``), one process per
   δ as it takes one δ, ``OMP_NUM_THREADS=1``; the time is the sum over the δ of each
   process's wall time (its reading of the file included, as graphcep's CLI row).
   Built from the public source (a checkout of ``snap-stanford/snap`` under
   ``~/.cache/graphcep-bench/snap``, cloned there when missing) with its Makefile
   (``g++``, ``make``); skipped with a message when it cannot be.
4. **SNAP, OpenMP** -- the same with ``OMP_NUM_THREADS`` = the machine's cores.
5. **Raphtory** -- ``raphtory.algorithms.global_temporal_three_node_motif_multi`` on a
   graph loaded from the same table (loading timed on its own), with its default threads
   and with one thread (against graphcep on one), in a virtual environment
   of its own (``~/.cache/graphcep-bench/raphtory-venv``, ``pip install raphtory``);
   skipped with a message when it cannot be installed.

Checks: graphcep's tables against SNAP's (1 thread): identical, or -- where equal times
meet in SNAP groups larger than 20 events, whose order SNAP's random-pivot sort draws
anew at each run -- equal two-node, star and triangle totals, with the number of cells
that differ and the number that differ between two runs of SNAP itself. Raphtory (which
orders ties by insertion) is checked on the same totals. Exit status 1 when a check
fails. Targets: identical to SNAP; >= 10x Raphtory; at least as fast as SNAP on one
thread.

    python -m bench.motifs [--record] [--streams CollegeMsg,...] [--repeat 3]
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from bench.triangles import ROOT, record

sys.path.insert(0, str(ROOT / "src"))  # this checkout's graphcep, whatever is installed

SHARED = ROOT.parent / "shared" / "data"
STREAMS = {
    "CollegeMsg": SHARED / "snap-CollegeMsg" / "CollegeMsg.txt.gz",
    "email-Eu-core": SHARED / "snap-email-Eu-core-temporal" / "email-Eu-core-temporal.txt.gz",
    "sx-mathoverflow": SHARED / "snap-sx-mathoverflow" / "sx-mathoverflow.txt.gz",
}
DELTAS = (600, 3600, 86400)
CACHE = Path(os.environ.get("GRAPHCEP_BENCH_CACHE", Path.home() / ".cache" / "graphcep-bench"))
SNAP_GIT = "https://github.com/snap-stanford/snap"
START_MARK = "<!-- bench.motifs:start -->"
END_MARK = "<!-- bench.motifs:end -->"

API_CHILD = """
import json, sys, time
from graphcep.io.readers import read_edges
from graphcep.motifs import count_motifs
path, deltas, repeat = sys.argv[1], [int(d) for d in sys.argv[2].split(",")], int(sys.argv[3])
started = time.perf_counter(); edges = read_edges(path, "snap").edges
read_s = time.perf_counter() - started
started = time.perf_counter(); counts = count_motifs(edges, deltas)
first_s = time.perf_counter() - started
best = best_cpu = float("inf")
for _ in range(repeat):
    started, cpu = time.perf_counter(), time.process_time()
    counts = count_motifs(edges, deltas)
    best = min(best, time.perf_counter() - started)
    best_cpu = min(best_cpu, time.process_time() - cpu)
print(json.dumps({"read_s": read_s, "first_s": first_s, "count_s": best, "count_cpu": best_cpu,
                  "tables": counts.tables.tolist()}))
"""

RAPHTORY_CHILD = """
import json, sys, time
import pyarrow as pa, pyarrow.csv as csv
from raphtory import Graph, algorithms
path, deltas = sys.argv[1], [int(d) for d in sys.argv[2].split(",")]
threads = int(sys.argv[3]) or None
table = csv.read_csv(path, read_options=csv.ReadOptions(column_names=["src", "dst", "t"]),
                     parse_options=csv.ParseOptions(delimiter=" "))
started = time.perf_counter(); graph = Graph(); graph.load_edges(table, "t", "src", "dst")
load_s = time.perf_counter() - started
started, cpu = time.perf_counter(), time.process_time()
counts = algorithms.global_temporal_three_node_motif_multi(graph, deltas, threads)
print(json.dumps({"load_s": load_s, "count_s": time.perf_counter() - started,
                  "count_cpu": time.process_time() - cpu,
                  "counts": [list(map(int, c)) for c in counts]}))
"""


def plain_copy(name: str) -> Path:
    """The stream decompressed under the cache (SNAP reads plain text only)."""
    target = CACHE / "data" / f"{name}.txt"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        with gzip.open(STREAMS[name], "rb") as src, open(target.with_suffix(".part"), "wb") as dst:
            shutil.copyfileobj(src, dst)
        target.with_suffix(".part").rename(target)
    return target


def snap_program() -> tuple[Path | None, str]:
    """SNAP's ``temporalmotifsmain``, built when needed, or None and why not."""
    source = CACHE / "snap"
    binary = source / "examples" / "temporalmotifs" / "temporalmotifsmain"
    if binary.exists():
        return binary, ""
    if not (shutil.which("g++") and shutil.which("make")):
        return None, "SNAP skipped: g++ and make are needed to build it"
    if not source.exists():
        clone = subprocess.run(["git", "clone", "--depth", "1", SNAP_GIT, str(source)],
                               capture_output=True, text=True, check=False)
        if clone.returncode:
            return None, f"SNAP skipped: no source under {source} and cloning failed"
    build = subprocess.run(["make", "-C", str(binary.parent)], capture_output=True, text=True,
                           check=False)
    if build.returncode or not binary.exists():
        return None, f"SNAP skipped: its build failed ({build.stderr.strip()[-200:]})"
    return binary, ""


def raphtory_python() -> tuple[Path | None, str]:
    """A Python with raphtory installed (a venv of its own), or None and why not."""
    venv = CACHE / "raphtory-venv"
    python = venv / "bin" / "python"
    probe = [str(python), "-c", "import raphtory"]
    if python.exists() and subprocess.run(probe, capture_output=True, check=False).returncode == 0:
        return python, ""
    steps = [[sys.executable, "-m", "venv", str(venv)],
             [str(python), "-m", "pip", "install", "-q", "raphtory"]]
    for step in steps:
        if subprocess.run(step, capture_output=True, check=False).returncode:
            return None, "Raphtory skipped: `pip install raphtory` failed"
    return python, ""


def run_snap(binary: Path, path: Path, delta: int, threads: int
             ) -> tuple[float, float, np.ndarray]:
    """One SNAP process: its wall and CPU seconds and its table."""
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "counts.txt"
        env = {**os.environ, "OMP_NUM_THREADS": str(threads)}
        started, cpu = time.perf_counter(), _children_cpu()
        subprocess.run([str(binary), f"-i:{path}", f"-delta:{delta}", f"-o:{out}"], env=env,
                       capture_output=True, check=True)
        seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
        return seconds, cpu, np.loadtxt(out, dtype=np.uint64).astype(np.int64)


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_cli(path: Path, repeat: int) -> float:
    """Best wall seconds of the whole ``graphcep motifs`` process."""
    best = float("inf")
    with tempfile.TemporaryDirectory() as tmp:
        command = [sys.executable, "-m", "graphcep.cli", "motifs", "-i", str(path), "--delta",
                   ",".join(map(str, DELTAS)), "--format", "snap", "--output-format", "json",
                   "-o", str(Path(tmp) / "m.json")]
        for i in range(repeat + 1):
            started = time.perf_counter()
            subprocess.run(command, check=True, env=_env())
            if i:
                best = min(best, time.perf_counter() - started)
    return best


def _env(threads: int = 0) -> dict[str, str]:
    """This checkout's graphcep; ``threads`` > 0 sets numba's thread count."""
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    if threads:
        env["NUMBA_NUM_THREADS"] = str(threads)
    return env


def totals(tables: np.ndarray) -> dict[str, list[int]]:
    """Two-node, star and triangle totals per δ."""
    from graphcep.engines.motifs.layout import group_totals  # after the path is set

    return {k: v.tolist() for k, v in group_totals(tables).items() if k != "all"}


def raphtory_totals(counts: list[list[int]]) -> dict[str, list[int]]:
    """The same totals from Raphtory's 40 counts (its two-node counts come once per end)."""
    return {"two_node": [sum(c[24:32]) // 2 for c in counts],
            "stars": [sum(c[:24]) for c in counts], "triangles": [sum(c[32:]) for c in counts]}


def bench_stream(name: str, repeat: int, snap: Path | None, raphtory: Path | None) -> dict:
    """Every method on one stream; the row values and the checks."""
    path = plain_copy(name)
    with open(path, "rb") as lines:
        row: dict = {"stream": name, "events": sum(1 for _ in lines)}
    for threads, key in ((0, "api"), (1, "api1")):
        api = subprocess.run([sys.executable, "-c", API_CHILD, str(path),
                              ",".join(map(str, DELTAS)), str(repeat)], capture_output=True,
                             text=True, check=True, env=_env(threads))
        found = json.loads(api.stdout)
        row.update({f"{key}_s": found["count_s"], f"{key}_cpu": found["count_cpu"],
                    f"{key}_tables": np.array(found["tables"])})
    ours = row["api_tables"]
    row.update(read_s=found["read_s"], first_s=found["first_s"], cli_s=run_cli(path, repeat),
               totals=totals(ours), threads_equal=bool((row["api1_tables"] == ours).all()))
    if snap is not None:
        for threads, key in ((1, "snap1"), (os.cpu_count() or 1, "snapn")):
            runs = [run_snap(snap, path, d, threads) for d in DELTAS]
            row[f"{key}_s"] = sum(s for s, _, _ in runs)
            row[f"{key}_cpu"] = sum(c for _, c, _ in runs)
            row[f"{key}_tables"] = np.array([t for _, _, t in runs])
        again = np.array([run_snap(snap, path, d, 1)[2] for d in DELTAS])
        row["snap_self_diff"] = int((again != row["snap1_tables"]).sum())
        row["snap_diff"] = int((ours != row["snap1_tables"]).sum())
        row["snap_totals_equal"] = totals(row["snap1_tables"]) == row["totals"]
    if raphtory is not None:
        for threads, key in ((0, "raphtory"), (1, "raphtory1")):
            run = subprocess.run([str(raphtory), "-c", RAPHTORY_CHILD, str(path),
                                  ",".join(map(str, DELTAS)), str(threads)], capture_output=True,
                                 text=True, check=True)
            found = json.loads(run.stdout)
            row.update({f"{key}_s": found["count_s"], f"{key}_load_s": found["load_s"],
                        f"{key}_cpu": found["count_cpu"],
                        f"{key}_totals_equal": raphtory_totals(found["counts"]) == row["totals"]})
    return row


def report(rows: list[dict], notes: list[str]) -> tuple[str, bool]:
    """The Markdown block and whether every check passed."""
    lines = ["| stream | events | graphcep API s | graphcep API 1 thread s | read s "
             f"| graphcep CLI s | SNAP 1 thread s | SNAP {os.cpu_count()} threads s | Raphtory s "
             "| Raphtory 1 thread s | API 1t vs SNAP 1t | CLI vs SNAP 1t | API vs Raphtory "
             "| API 1t vs Raphtory 1t | tables vs SNAP |", "|" + "---|" * 15]
    ok = True
    for r in rows:
        def cell(key: str, r: dict = r) -> str:
            return f"{r[key]:.3f}" if key in r else "skipped"

        def ratio(key: str, mine: str, r: dict = r) -> str:
            return f"{r[key] / r[mine]:.1f}x" if key in r else "-"

        if "snap_diff" in r:
            same = "identical" if r["snap_diff"] == 0 else (
                f"totals equal, {r['snap_diff']} cells differ (SNAP vs SNAP: "
                f"{r['snap_self_diff']})")
            ok &= r["snap_totals_equal"] and (r["snap_diff"] == 0 or r["snap_self_diff"] > 0)
        else:
            same = "-"
        same += "; 1 thread " + ("identical" if r["threads_equal"] else "DIFFERS")
        ok &= r["threads_equal"]
        if "raphtory_totals_equal" in r:
            equal = r["raphtory_totals_equal"] and r["raphtory1_totals_equal"]
            same += "; Raphtory totals " + ("equal" if equal else "DIFFER")
            ok &= equal
        lines.append(f"| {r['stream']} | {r['events']:,} | {r['api_s']:.3f} | {r['api1_s']:.3f} "
                     f"| {r['read_s']:.3f} | {r['cli_s']:.3f} | {cell('snap1_s')} "
                     f"| {cell('snapn_s')} | {cell('raphtory_s')} | {cell('raphtory1_s')} "
                     f"| {ratio('snap1_s', 'api1_s')} | {ratio('snap1_s', 'cli_s')} "
                     f"| {ratio('raphtory_s', 'api_s')} | {ratio('raphtory1_s', 'api1_s')} "
                     f"| {same} |")
    lines += ["", "CPU seconds (user + system, all threads; the shared machine's load "
              "stretches wall times, far less CPU times):", "",
              "| stream | graphcep API | graphcep API 1 thread | SNAP 1 thread | Raphtory "
              "| Raphtory 1 thread | SNAP 1t / API 1t | Raphtory / API "
              "| Raphtory 1t / API 1t |", "|" + "---|" * 9]
    for r in rows:
        def cpu(key: str, r: dict = r) -> str:
            return f"{r[key]:.3f}" if key in r else "skipped"

        def over(key: str, mine: str, r: dict = r) -> str:
            return f"{r[key] / r[mine]:.1f}x" if key in r else "-"

        lines.append(f"| {r['stream']} | {r['api_cpu']:.3f} | {r['api1_cpu']:.3f} "
                     f"| {cpu('snap1_cpu')} | {cpu('raphtory_cpu')} | {cpu('raphtory1_cpu')} "
                     f"| {over('snap1_cpu', 'api1_cpu')} | {over('raphtory_cpu', 'api_cpu')} "
                     f"| {over('raphtory1_cpu', 'api1_cpu')} |")
    lines += ["", targets(rows), "", "Group totals per δ (600, 3600, 86400 s):", ""]
    for r in rows:
        lines.append(f"- {r['stream']}: " + "; ".join(f"{k} {v}" for k, v in r["totals"].items()))
    return "\n".join(lines + [""] + [f"- {n}" for n in notes]), ok


def targets(rows: list[dict]) -> str:
    """One line on the three targets, from the rows."""
    def span(key: str, mine: str) -> str:
        ratios = [r[key] / r[mine] for r in rows if key in r]
        return f"{min(ratios):.1f}x to {max(ratios):.1f}x" if ratios else "not measured"

    same = [r["stream"] for r in rows if r.get("snap_diff") == 0]
    return ("Targets: identical tables -- identical on " + (", ".join(same) or "no stream")
            + "; elsewhere equal two-node, star and triangle totals, where SNAP's own cells "
            f"change from run to run (ties); >= 10x Raphtory -- API {span('raphtory_s', 'api_s')} "
            f"wall (both on every core), {span('raphtory1_s', 'api1_s')} wall (both on one "
            f"thread), {span('raphtory_cpu', 'api_cpu')} CPU; at least SNAP's "
            f"speed on one thread -- API {span('snap1_s', 'api1_s')} wall (one thread), "
            f"{span('snap1_cpu', 'api1_cpu')} CPU, whole CLI process "
            f"{span('snap1_s', 'cli_s')} (all δ in one call against one SNAP process per δ).")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.motifs",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--streams", default=",".join(STREAMS), help="comma list of streams")
    parser.add_argument("--repeat", type=int, default=3, help="timed graphcep runs (best of)")
    parser.add_argument("--skip", default="", help="comma list of snap,raphtory")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    from bench.nu import machine_lines

    command = "python -m bench.motifs" + (" --record" if args.record else "")
    machine = machine_lines(command)
    skip = set(args.skip.split(","))
    snap, why_snap = (None, "SNAP skipped (--skip)") if "snap" in skip else snap_program()
    raphtory, why_raphtory = ((None, "Raphtory skipped (--skip)") if "raphtory" in skip
                              else raphtory_python())
    notes = [n for n in (why_snap, why_raphtory) if n]
    for message in notes:
        print(message, file=sys.stderr)
    rows = []
    for name in args.streams.split(","):
        rows.append(bench_stream(name, args.repeat, snap, raphtory))
        print(json.dumps({k: v for k, v in rows[-1].items() if not k.endswith("tables")}),
              file=sys.stderr)
    table, ok = report(rows, notes)
    text = "\n".join(["## δ-temporal motif counts (`bench/motifs.py`)", "", *machine,
                      f"- 1-minute load average at the end: {os.getloadavg()[0]:.2f}", "",
                      table])
    print(text)
    if args.record:
        record(text, START_MARK, END_MARK)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
