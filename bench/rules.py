"""Twenty mixed rules in one ``graphcep run --rules`` against twenty ``graphcep run``.

Stream: S1's generator (200,000 flows among 5,000 hosts at 10,000 flows/s, seed 1),
written once as a VAST file. Rules (``--rules``: 5 of each kind, windows 1..5 s):

- SAL ``back{w}.sal``: a flow answered by the reverse flow within ``w`` s;
- ν ``back{w}.nu``: the same as a ν-expression, ``<#X ~> #Y . Y ~> X>[0, w]``;
- DDST ``back{w}.ddst``: the same as an event pattern within ``100 w`` edges (a count
  window: over unlabelled vertices a time window of seconds makes every host pair a
  component of the pattern, minutes of work per rule);
- subscriptions: five files of one pattern each over each source host's destinations.

Methods (each a fresh ``graphcep`` process, as a user runs them, timed from start to
exit): ``graphcep run --rules DIR -i S1 -o /dev/null --output-format jsonl`` and the
twenty ``graphcep run RULE ...`` one after the other, with ``--engine`` (default
``local``; ``spark`` runs ``local[2]``). The matches are checked: each rule's count in
the ``--rules`` summary equals its own run's.

Run: ``python -m bench.rules [--engine local|spark] [--edges N]``; prints one markdown
table row (bench/RESULTS.md keeps the figures): wall seconds and their ratio, CPU seconds
(user and system of the ``graphcep`` processes, JVMs included: on a loaded machine the
ratio to read) and theirs, and the load average at the end.
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
from pathlib import Path

SUBS = ("pp: @a.@b.@a", "same: @a.@a", "ret: @a.@b.@c.@a", "abab: @a.@b.@a.@b",
        "abb: @a.@b.@b")


def write_rules(folder: Path) -> None:
    for w in range(1, 6):
        (folder / f"back{w}.sal").write_text(
            f"{{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
            f"starttime(e2) - starttime(e1) <= {w}; }}")
        (folder / f"back{w}.nu").write_text(f"<#X ~> #Y . Y ~> X>[0, {w}]")
        (folder / f"back{w}.ddst").write_text(
            f"VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y; "
            f"WITHIN {100 * w} edges")
        (folder / f"s{w}.subs").write_text(SUBS[w - 1] + "\n")


def graphcep(args: list[str]) -> tuple[float, float, dict]:
    """Run ``graphcep ARGS --summary json``: wall seconds, CPU seconds (user and system,
    of the process and its children: what a loaded machine does not inflate) and the
    summary."""
    started, cpu = time.perf_counter(), _children_cpu()
    done = subprocess.run([sys.executable, "-m", "graphcep", *args, "--summary", "json"],
                          capture_output=True, text=True, env={**os.environ}, check=False)
    seconds, cpu = time.perf_counter() - started, _children_cpu() - cpu
    if done.returncode != 0:
        raise SystemExit(f"graphcep {' '.join(args)}: {done.stderr.strip()[-500:]}")
    return seconds, cpu, json.loads(done.stdout.strip().splitlines()[-1])


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--engine", choices=("local", "spark"), default="local")
    parser.add_argument("--edges", type=int, default=200_000)
    args = parser.parse_args()
    from graphcep.io.generator import generate_netflow, write_edges

    with tempfile.TemporaryDirectory() as tmp:
        folder, flows = Path(tmp) / "rules", Path(tmp) / "s1.csv"
        folder.mkdir()
        write_rules(folder)
        write_edges(generate_netflow(args.edges, 5_000, 10_000, seed=1), flows, "vast")
        common = ["-i", str(flows), "-o", "/dev/null", "--output-format", "jsonl",
                  "--engine", args.engine,
                  *(["--master", "local[2]"] if args.engine == "spark" else [])]
        together, together_cpu, summary = graphcep(["run", "--rules", str(folder), *common])
        apart, apart_cpu, counts = 0.0, 0.0, {}
        for path in sorted(folder.iterdir()):
            seconds, cpu, alone = graphcep(["run", str(path), *common])
            apart += seconds
            apart_cpu += cpu
            counts[path.name] = alone["matches"]
        rules = {name: facts["matches"] for name, facts in summary["rules"].items()}
        assert rules == counts, (rules, counts)
    load = os.getloadavg()[0]
    print(f"| {args.engine} | {args.edges:,} | 20 | {sum(counts.values()):,} | "
          f"{together:.1f} | {apart:.1f} | {apart / together:.2f}x | "
          f"{together_cpu:.1f} | {apart_cpu:.1f} | {apart_cpu / together_cpu:.2f}x | "
          f"{load:.1f} |")


if __name__ == "__main__":
    main()
