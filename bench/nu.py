"""Timed ν-expressions: graphcep against MaTiNA (the paper's tool) and against the SAL engine.

1. **MaTiNA side by side.** MaTiNA is built from ``../shared/anchors/matina`` (a copy under
   ``bench/data/matina``; needs ``g++``, ``flex``, ``bison``: skipped with a message when it
   cannot be built). Each pattern runs, anchored as MaTiNA runs it, on generated link
   streams written as time-event sequences with whole-second pauses (MaTiNA's decimal
   clocks drift), at lengths MaTiNA finishes in about a minute or less. Both tools must
   give the same verdict (is the whole sequence accepted); the table gives links/s of each
   process (MaTiNA's ``RegexRecognizer``; graphcep's engine in this process, parse
   included) and their ratio. Target: graphcep >= 1,000x MaTiNA.
2. **Triangles: ν against SAL.** The directed triangle among distinct hosts within 10 s
   (``examples/nu/triangle.nu`` and ``examples/triangle.sal``) on a prefix of the S1 stream
   (``bench.triangles``: 10,000 edges/s over 5,000 hosts), in-process, one thread: both
   count their matches (the ν engine reports one per first time, last time and bindings,
   as the SAL matches projected so) and the links/s. Target: ν >= 250,000 links/s.

    python -m bench.nu [--record] [--links 1000,2000] [--prefix 20000]
"""

from __future__ import annotations

import argparse
import os
import platform
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "bench" / "data"
MATINA_SOURCE = Path(os.environ.get("GRAPHCEP_MATINA",
                                    ROOT.parent / "shared" / "anchors" / "matina" / "hybride"))
START_MARK, END_MARK = "<!-- bench.nu:start -->", "<!-- bench.nu:end -->"

#: name -> (pattern text, what it is); all anchored, MaTiNA's way of searching
PATTERNS = {
    "any": ("(@~>@)*", "every link (the reading loop alone)"),
    "constant link": ("(@~>@)* % a~>b", "one link between two known hosts"),
    "fresh then back": ("(@~>@)* % (a~>#X . X~>b)",
                        "a -> fresh X, later X -> b (no time bound: tokens accumulate)"),
    "windowed": ("(@~>@)* % (@~>@ . <a~>#X . X~>b>[0,50])",
                 "the same within 50 s of the link before it"),
}


def build_matina() -> Path | None:
    """MaTiNA's reconnaissance folder, built once under bench/data/matina (None: cannot)."""
    target = DATA_DIR / "matina"
    recognizer = target / "reconnaissance" / "RegexRecognizer"
    if recognizer.exists():
        return target / "reconnaissance"
    missing = [tool for tool in ("g++", "flex", "bison", "make") if shutil.which(tool) is None]
    if missing or not MATINA_SOURCE.exists():
        why = f"missing {', '.join(missing)}" if missing else f"no source at {MATINA_SOURCE}"
        print(f"bench.nu: MaTiNA skipped ({why}; apt-get install -y g++ flex bison)")
        return None
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(MATINA_SOURCE, target)
    for folder in ("parser_regex2auto", "parser_file2auto", "reconnaissance"):
        done = subprocess.run(["make", "-C", str(target / folder)], capture_output=True, text=True)
        if done.returncode:
            print(f"bench.nu: MaTiNA skipped (make in {folder} failed: "
                  f"{done.stderr.strip().splitlines()[-1:]})")
            return None
    return target / "reconnaissance"


def generated_links(n: int, seed: int = 1) -> list[tuple[int, str, str]]:
    """``n`` links, one per second, over 50 hosts; a few between the patterns' a and b."""
    import random

    rng = random.Random(seed)
    links = []
    for i in range(n):
        draw = rng.random()
        if draw < 0.02:
            u, v = "a", "b"
        elif draw < 0.05:
            u, v = "a", f"n{rng.randrange(50)}"
        elif draw < 0.08:
            u, v = f"n{rng.randrange(50)}", "b"
        else:
            u, v = f"n{rng.randrange(50)}", f"n{rng.randrange(50)}"
        links.append((i, u, v))
    return links


def tes_text(links: list[tuple[int, str, str]]) -> str:
    out, previous = [], 0
    for t, u, v in links:
        out.append(f"{t - previous} {u} {v}")
        previous = t
    return "\n".join(out) + "\n"


def run_matina(folder: Path, pattern: str, tes: str, timeout: float) -> tuple[bool | None, float]:
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "p.regex").write_text(pattern)
        (Path(tmp) / "i.tes").write_text(tes)
        started = time.perf_counter()
        try:
            done = subprocess.run([str(folder / "RegexRecognizer"), "p.regex", "i.tes"], cwd=tmp,
                                  capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            return None, timeout
        seconds = time.perf_counter() - started
    verdict = done.stdout.strip().splitlines()[-1:] if done.stdout.strip() else []
    return (verdict == ["1"]) if verdict else None, seconds


def run_graphcep(pattern: str, tes: str) -> tuple[bool, float]:
    from graphcep.engines.nu.engine import NuEngine
    from graphcep.io.tes import parse_tes
    from graphcep.lang.nu import parse_nu

    started = time.perf_counter()
    events = parse_tes(tes, "bench")[0]
    engine = NuEngine(parse_nu(pattern, "bench"), mode="anchored", max_tokens=10**8)
    engine.push(events.slice(0, events.num_rows - 1))
    accepted = engine.push(events.slice(events.num_rows - 1)).num_rows > 0  # by the last event
    return accepted, time.perf_counter() - started


def matina_rows(sizes: list[int], timeout: float) -> list[str]:
    folder = build_matina()
    rows = ["| pattern | links | MaTiNA s | MaTiNA links/s | graphcep s | graphcep links/s | "
            "ratio | verdicts |", "|---|---|---|---|---|---|---|---|"]
    for name, (pattern, _) in PATTERNS.items():
        for n in sizes:
            tes = tes_text(generated_links(n))
            ours, ours_s = run_graphcep(pattern, tes)
            if folder is None:
                theirs, theirs_s = None, float("nan")
            else:
                theirs, theirs_s = run_matina(folder, pattern, tes, timeout)
            agree = "-" if theirs is None else ("equal" if theirs == ours else
                                                 f"DIFFER (MaTiNA {theirs}, graphcep {ours})")
            ratio = "-" if theirs is None else f"{theirs_s / ours_s:,.1f}x"
            shown = "timeout" if theirs is None and folder else f"{theirs_s:.2f}"
            rows.append(f"| {name}: `{pattern}` | {n:,} | {shown} | "
                        f"{'-' if theirs is None else f'{n / theirs_s:,.0f}'} | {ours_s:.3f} | "
                        f"{n / ours_s:,.0f} | {ratio} | {agree} |")
            print(rows[-1], flush=True)
    return rows


def triangle_rows(prefix: int) -> list[str]:
    from bench.triangles import STREAMS, ensure_stream, load_table
    from graphcep.engines.nu.engine import NuEngine
    from graphcep.lang.nu import parse_nu_file
    from graphcep.lang.sal import parse_file
    from graphcep.runtime.local import run_local

    stream = STREAMS["S1"]
    ensure_stream(stream)
    edges = load_table(stream).slice(0, prefix).select(["t", "src", "dst", "dur", "seq"])
    started = time.perf_counter()
    nu = NuEngine(parse_nu_file(ROOT / "examples" / "nu" / "triangle.nu")).push(edges)
    nu_s = time.perf_counter() - started
    query = parse_file(ROOT / "examples" / "triangle.sal").query()
    started = time.perf_counter()
    sal, _ = run_local(query, edges)
    sal_s = time.perf_counter() - started
    projected = {(m["first_t"], m["last_t"], tuple(sorted(m["bindings"])))
                 for m in sal.select(["first_t", "last_t", "bindings"]).to_pylist()}
    return ["| engine | links | matches | s | links/s |", "|---|---|---|---|---|",
            f"| ν (triangle.nu) | {prefix:,} | {nu.num_rows:,} | {nu_s:.2f} | {prefix / nu_s:,.0f} |",
            f"| SAL (triangle.sal) | {prefix:,} | {sal.num_rows:,} ({len(projected):,} "
            f"distinct first/last/bindings) | {sal_s:.2f} | {prefix / sal_s:,.0f} |",
            "", f"ν / SAL speed: {sal_s / nu_s:.4f}; target ν >= 250,000 links/s: "
            f"{'met' if prefix / nu_s >= 250_000 else 'MISSED'}"]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nu", description=__doc__.split("\n")[0])
    parser.add_argument("--links", default="500,1000", help="sequence lengths for MaTiNA")
    parser.add_argument("--prefix", type=int, default=20_000, help="S1 links for the triangles")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per MaTiNA run")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    sizes = [int(x) for x in args.links.split(",") if x]
    started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M UTC")
    matina = matina_rows(sizes, args.timeout)
    triangles = triangle_rows(args.prefix)
    print("\n".join(triangles))
    text = "\n".join([
        "## Timed ν-expressions (`bench/nu.py`)", "",
        f"Run {started} on {platform.machine()} ({os.cpu_count()} cores), Python "
        f"{platform.python_version()}; `python -m bench.nu --links {args.links} --prefix "
        f"{args.prefix}`.", "",
        "### Against MaTiNA (anchored, whole-second pauses; target graphcep >= 1,000x)", "",
        *(f"- `{p}`: {what}" for p, what in PATTERNS.values()), "", *matina, "",
        "### Triangles within 10 s on an S1 prefix, ν against SAL (in-process, one thread)",
        "", *triangles])
    if args.record:
        from bench.triangles import record

        record(text, START_MARK, END_MARK)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
