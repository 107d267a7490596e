"""Timed ν-expressions: graphcep against MaTiNA (the paper's tool) and against the SAL engine.

1. **MaTiNA side by side.** MaTiNA is built from ``../shared/anchors/matina`` (a copy under
   ``bench/data/matina``; needs ``g++``, ``flex``, ``bison``: skipped with a message when it
   cannot be built). Each pattern ``P`` runs on generated link streams written as time-event
   sequences with whole-second pauses (MaTiNA's decimal clocks drift):

   - MaTiNA, anchored, as its users search: ``(@~>@)* % P`` (its ``RegexRecognizer``,
     one process per run, its start and its reading of the file included);
   - graphcep anchored, the same expression on the same events, with the interpreted
     engine (``NuEngine(..., mode="anchored")``);
   - graphcep search mode (its default, which is ``(@~>@)* % P`` for these patterns, see
     :mod:`graphcep.engines.nu.engine`) on the plain ``P`` over the same links, with the
     engine ``NuJob(P).new_engine()`` picks (the compiled one where it can run).

   graphcep's seconds are its engine's in this process (built, then fed the whole stream,
   already in memory as Arrow), after an untimed run on the same links that compiles the
   numba code (anchored, pure Python, is warmed on 50 events). Verdicts must be equal:
   MaTiNA accepts the whole sequence iff graphcep anchored accepts it by the last event
   iff graphcep search mode reports at least one match (``(@~>@)*`` absorbs the rest).
   ``--links`` are lengths MaTiNA finishes in about a minute or less; ``--long`` are
   longer ones, where graphcep search always runs and the two anchored runs only when
   their times before say they finish within ``--long-budget`` seconds (time growing as
   links^k, 1 <= k <= 2, k from the last two runs); the ``any`` loop, with nothing to
   search, is not run there. Ratios compare links/s (graphcep / MaTiNA); where MaTiNA did
   not run, against its fastest rate on that pattern (the patterns whose tokens
   accumulate only get slower). Target: graphcep >= 1,000x MaTiNA, search against MaTiNA
   at the longest length both ran.
2. **Triangles: ν against SAL.** The directed triangle among distinct hosts within 10 s
   (``examples/nu/triangle.nu`` and ``examples/triangle.sal``) on the S1 and S2 streams
   (``bench.triangles``: 200,000 links, 10,000 links/s over 5,000 hosts; 1,000,000 links,
   60,000 links/s over 25,000 hosts), in-process, one thread, each after an untimed run
   (numba compiled): ν with the engine the job picks (compiled, with the closing join) on
   the whole streams; on S1 also the compiled game storing every token (``join=False``)
   and ν interpreted on a prefix (``--prefix``); SAL beside each.
   ν reports one match per first time, last time and bindings; SAL's matches projected so
   must be the same set. Peak tokens: the most the ν engine held at checkpoints every
   ``--checkpoint`` links (read outside the timing). Target: ν >= 250,000 links/s.

    python -m bench.nu [--record] [--links 500,1000,2000] [--long 10000,100000]
                       [--long-budget 30] [--prefix 20000] [--checkpoint 10000]
"""

from __future__ import annotations

import argparse
import math
import os
import platform
import re
import shutil
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
DATA_DIR = ROOT / "bench" / "data"
MATINA_SOURCE = Path(os.environ.get("GRAPHCEP_MATINA",
                                    ROOT.parent / "shared" / "anchors" / "matina" / "hybride"))
START_MARK, END_MARK = "<!-- bench.nu:start -->", "<!-- bench.nu:end -->"
WARM_UP_LINKS = 50
TARGET_RATIO = 1_000
TARGET_LINKS_S = 250_000

#: name -> (plain pattern P or None, what it is); MaTiNA and graphcep anchored run
#: ``(@~>@)* % P`` (``(@~>@)*`` alone where P is None), graphcep search mode runs P
PATTERNS: dict[str, tuple[str | None, str]] = {
    "any": (None, "every link (the reading loop alone; no plain pattern to search)"),
    "constant link": ("a~>b", "one link between two known hosts"),
    "fresh then back": ("(a~>#X . X~>b)",
                        "a -> fresh X, later X -> b (no time bound: tokens accumulate)"),
    "windowed": ("(@~>@ . <a~>#X . X~>b>[0,50])",
                 "the same within 50 s of the link before it"),
}


def anchored_text(plain: str | None) -> str:
    return "(@~>@)*" if plain is None else f"(@~>@)* % {plain}"


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


def link_table(links: list[tuple[int, str, str]]) -> Any:
    """The same links as graphcep reads a link stream (t in microseconds)."""
    import pyarrow as pa

    return pa.table({"t": pa.array([t * 1_000_000 for t, _, _ in links], pa.int64()),
                     "src": [u for _, u, _ in links], "dst": [v for _, _, v in links],
                     "seq": pa.array(range(len(links)), pa.int64())})


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


def run_anchored(pattern: str, events: Any) -> tuple[bool, float]:
    """graphcep anchored, interpreted: is the whole sequence accepted, and the seconds."""
    from graphcep.engines.nu.engine import NuEngine
    from graphcep.lang.nu import parse_nu

    parsed = parse_nu(pattern, "bench")
    NuEngine(parsed, mode="anchored", max_tokens=10**8).push(events.slice(0, WARM_UP_LINKS))
    started = time.perf_counter()
    engine = NuEngine(parsed, mode="anchored", max_tokens=10**8)
    engine.push(events.slice(0, events.num_rows - 1))
    accepted = engine.push(events.slice(events.num_rows - 1)).num_rows > 0  # by the last event
    return accepted, time.perf_counter() - started


def run_search(plain: str, links: Any) -> tuple[bool, float, str, int]:
    """graphcep search mode on P, the engine the job picks: (some match, seconds, engine,
    matches)."""
    from graphcep.jobs.nu import NuJob
    from graphcep.lang.nu import parse_nu

    job = NuJob(parse_nu(plain, "bench"))
    job.new_engine().push(links)  # an untimed run first: compiles every numba path it takes
    started = time.perf_counter()
    found = job.new_engine().push(links).num_rows
    return found > 0, time.perf_counter() - started, job.chosen, found


def rate(n: int, seconds: float | None) -> float | None:
    return n / seconds if seconds else None


def fits(n: int, long: bool, runs: list[tuple[int, float]], budget: float) -> bool:
    """Whether to run at ``n`` links: always at a MaTiNA length; at a long one when the
    runs before (links, seconds) say it takes at most ``budget`` seconds, its time growing
    as links^k, k from the last two runs (between 1 and 2: tokens may accumulate)."""
    if not long:
        return True
    if not runs:
        return False
    n2, s2 = runs[-1]
    k = 2.0
    if len(runs) > 1 and runs[-2][1] > 0 and s2 > 0 and runs[-2][0] < n2:
        n1, s1 = runs[-2]
        k = min(2.0, max(1.0, math.log(s2 / s1) / math.log(n2 / n1)))
    return s2 * (n / n2) ** k <= budget


def show_rate(value: float | None) -> str:
    return "-" if value is None else f"{value:,.0f}"


def show_ratio(ours: float | None, theirs: float | None, mark: str = "") -> str:
    return "-" if ours is None or not theirs else f"{ours / theirs:,.1f}x{mark}"


def matina_rows(sizes: list[int], long_sizes: list[int], timeout: float,
                long_budget: float) -> tuple[list[str], list[str]]:
    """The MaTiNA table and the target lines."""
    from graphcep.io.tes import parse_tes

    folder = build_matina()
    rows = ["| pattern | links | MaTiNA s | MaTiNA links/s | anchored s | anchored links/s | "
            "anchored / MaTiNA | search engine | search s | search links/s | search / MaTiNA | "
            "search matches | verdicts |", "|---" * 13 + "|"]
    targets = []
    for name, (plain, _) in PATTERNS.items():
        pattern = anchored_text(plain)
        theirs_best: float | None = None  # MaTiNA's fastest links/s on this pattern
        runs: dict[str, list[tuple[int, float]]] = {"matina": [], "anchored": []}
        both: tuple[int, float, float] | None = None  # longest n both ran: links/s each
        longest: tuple[int, float] | None = None  # longest search run: links/s
        for n in sizes + long_sizes:
            long = n not in sizes
            if long and plain is None:
                continue  # the reading loop alone: nothing to search
            links = generated_links(n)
            tes = tes_text(links)

            theirs, theirs_s = None, None
            if folder is not None and fits(n, long, runs["matina"], long_budget):
                theirs, theirs_s = run_matina(folder, pattern, tes, timeout)
                if theirs is None:
                    theirs_s = None
                else:
                    runs["matina"].append((n, theirs_s))
                    theirs_best = max(theirs_best or 0.0, n / theirs_s)
            anchored, anchored_s = None, None
            if fits(n, long, runs["anchored"], long_budget):
                anchored, anchored_s = run_anchored(pattern, parse_tes(tes, "bench")[0])
                runs["anchored"].append((n, anchored_s))
            search, search_s, engine, found = (None, None, "-", None) if plain is None else \
                run_search(plain, link_table(links))
            theirs_rate = rate(n, theirs_s)
            against, mark = (theirs_rate, "") if theirs_rate else (theirs_best, "*")
            if search_s is not None:
                longest = (n, n / search_s)
                if theirs_rate:
                    both = (n, n / search_s, theirs_rate)
            verdicts = {"MaTiNA": theirs, "anchored": anchored, "search": search}
            given = {who: v for who, v in verdicts.items() if v is not None}
            if len(given) < 2:
                agree = "-"
            elif len(set(given.values())) == 1:
                agree = "equal" if len(given) == 3 else f"equal ({', '.join(given)})"
            else:
                agree = "DIFFER (" + ", ".join(f"{who} {v}" for who, v in given.items()) + ")"
            if folder is not None and theirs is None and not long:
                shown_theirs = "timeout"
            else:
                shown_theirs = "-" if theirs_s is None else f"{theirs_s:.2f}"
            rows.append(
                f"| {name}: `{pattern}` | {n:,} | {shown_theirs} | {show_rate(theirs_rate)} | "
                f"{'-' if anchored_s is None else f'{anchored_s:.3f}'} | "
                f"{show_rate(rate(n, anchored_s))} | "
                f"{show_ratio(rate(n, anchored_s), theirs_rate)} | {engine} | "
                f"{'-' if search_s is None else f'{search_s:.3f}'} | "
                f"{show_rate(rate(n, search_s))} | "
                f"{show_ratio(rate(n, search_s), against, mark if search_s else '')} | "
                f"{'-' if found is None else f'{found:,}'} | {agree} |")
            print(rows[-1], flush=True)
        if both is not None:
            n, ours, theirs = both
            ratio = ours / theirs
            more = "" if longest is None or longest[0] == n else \
                f"; at {longest[0]:,} links graphcep search reads {longest[1]:,.0f} links/s"
            targets.append(f"- {name}: at {n:,} links graphcep search {ours:,.0f} links/s, "
                           f"MaTiNA {theirs:,.0f} links/s: {ratio:,.0f}x -> "
                           f"{'MET' if ratio >= TARGET_RATIO else 'MISSED'}{more}")
    return rows, targets


def tokens_held(engine: Any) -> int:
    return int(engine.state_size()["tokens"])


def run_nu(new_engine: Any, compiled: bool, edges: Any, checkpoint: int
           ) -> tuple[Any, float, int]:
    """Push ``edges`` through a fresh engine (``new_engine()``) in ``checkpoint``-link
    batches: the matches, the seconds in ``push`` and the most tokens held after a batch."""
    import pyarrow as pa

    # an untimed run first: compiles every numba path the timed one takes (the interpreted
    # game, pure Python, is only warmed on a few links)
    new_engine().push(edges if compiled else edges.slice(0, 1_000))
    engine, seconds, peak, out = new_engine(), 0.0, 0, []
    for start in range(0, edges.num_rows, checkpoint):
        batch = edges.slice(start, checkpoint)
        started = time.perf_counter()
        out.append(engine.push(batch))
        seconds += time.perf_counter() - started
        peak = max(peak, tokens_held(engine))
    return pa.concat_tables(out), seconds, peak


def run_sal(query: Any, edges: Any) -> tuple[Any, float]:
    from graphcep.runtime.local import run_local

    run_local(query, edges)  # an untimed run first: compiles the numba code
    started = time.perf_counter()
    matches, _ = run_local(query, edges)
    return matches, time.perf_counter() - started


def projected(matches: Any) -> set[tuple]:
    """(first time, last time, nodes in variable order): X, Y, Z of the ν expression are
    x1, x2, x3 of the SAL query."""
    return {(m["first_t"], m["last_t"], tuple(node for _, node in sorted(m["bindings"])))
            for m in matches.select(["first_t", "last_t", "bindings"]).to_pylist()}


def triangle_rows(prefix: int, checkpoint: int) -> list[str]:
    """The triangle as a ν-expression against SAL on S1 and S2: the default (compiled,
    closing join) on both, and on S1 also the compiled game storing every token and the
    interpreted game on a prefix."""
    from bench.triangles import STREAMS, ensure_stream, load_table
    from graphcep.engines.nu.compiled import CompiledNuEngine
    from graphcep.jobs.nu import NuJob
    from graphcep.lang.nu import parse_nu_file
    from graphcep.lang.sal import parse_file

    pattern = parse_nu_file(ROOT / "examples" / "nu" / "triangle.nu")
    query = parse_file(ROOT / "examples" / "triangle.sal").query()
    compiled = NuJob(pattern, max_tokens=5_000_000)
    interpreted = NuJob(pattern, engine="interpreted")

    def storing() -> Any:  # the compiled game without the closing join
        return CompiledNuEngine(pattern, max_tokens=5_000_000, join=False)

    rows = ["| stream | engine | links | s | links/s | matches | peak tokens | "
            "ν matches = SAL's |", "|---|---|---|---|---|---|---|---|"]
    verdicts = []
    for name in ("S1", "S2"):
        stream = STREAMS[name]
        ensure_stream(stream)
        whole = load_table(stream).select(["t", "src", "dst", "dur", "seq"])
        part = whole.slice(0, prefix)
        sal_whole, sal_whole_s = run_sal(query, whole)
        runs = [(f"ν {compiled.chosen}, closing join (the default)", "compiled",
                 compiled.new_engine, whole, sal_whole)]
        sals = [(whole, sal_whole, sal_whole_s)]
        if name == "S1":
            sal_part, sal_part_s = run_sal(query, part)
            runs += [("ν compiled, every token stored (join off)", "storing", storing, whole,
                      sal_whole),
                     (f"ν {interpreted.chosen}", "interpreted", interpreted.new_engine, part,
                      sal_part)]
            sals.append((part, sal_part, sal_part_s))
        rates = {}
        for label, key, new_engine, edges, sal in runs:
            matches, seconds, peak = run_nu(new_engine, key != "interpreted", edges, checkpoint)
            ours = projected(matches)
            equal = ours == projected(sal) and len(ours) == matches.num_rows
            rates[key] = edges.num_rows / seconds
            rows.append(f"| {name} | {label} | {edges.num_rows:,} | {seconds:.2f} | "
                        f"{edges.num_rows / seconds:,.0f} | {matches.num_rows:,} | {peak:,} | "
                        f"{'equal' if equal else 'DIFFER'} |")
        for edges, sal, seconds in sals:
            rows.append(f"| {name} | SAL (triangle.sal) | {edges.num_rows:,} | {seconds:.2f} | "
                        f"{edges.num_rows / seconds:,.0f} | {sal.num_rows:,} "
                        f"({len(projected(sal)):,} distinct first/last/bindings) | - | - |")
        nu_rate, sal_rate = rates["compiled"], whole.num_rows / sal_whole_s
        verdicts.append(f"- {name}: ν ({compiled.chosen}) / SAL speed on the whole stream "
                        f"{nu_rate / sal_rate:.3f}; target ν >= {TARGET_LINKS_S:,} links/s: "
                        f"{nu_rate:,.0f} links/s -> "
                        f"{'MET' if nu_rate >= TARGET_LINKS_S else 'MISSED'}")
    return [*rows, "", *verdicts]


def machine_lines(command: str) -> list[str]:
    from bench.nu_paper import git, version

    model = platform.processor() or "?"
    try:
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        model = found.group(1).strip() if found else model
    except OSError:
        pass
    dirty = [line.split(maxsplit=1)[-1] for line in git("status", "--porcelain", "src").splitlines() if line.strip()]
    load = os.getloadavg()
    return [
        f"Command: `{command}`", "",
        "Machine:",
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {platform.machine()}, {model}, {os.cpu_count()} cores; load average at "
        f"the start {load[0]:.2f}, {load[1]:.2f}, {load[2]:.2f}",
        f"- Python {platform.python_version()}; "
        + ", ".join(version(p) for p in ("pyarrow", "numpy", "numba")),
        f"- graphcep: git {git('rev-parse', '--short', 'HEAD') or '?'} "
        + (f"+ uncommitted changes in {', '.join(dirty)}" if dirty else "(src/ clean)"),
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nu", description=__doc__.split("\n")[0])
    parser.add_argument("--links", default="500,1000,2000", help="sequence lengths for MaTiNA")
    parser.add_argument("--long", default="10000,100000",
                        help="longer lengths: graphcep search (the others when they fit)")
    parser.add_argument("--long-budget", type=float, default=30,
                        help="seconds a MaTiNA or anchored run may be expected to take at a "
                             "--long length")
    parser.add_argument("--prefix", type=int, default=20_000,
                        help="S1 links for the interpreted ν engine and SAL beside it")
    parser.add_argument("--checkpoint", type=int, default=10_000,
                        help="links between the triangle runs' token counts")
    parser.add_argument("--timeout", type=float, default=120, help="seconds per MaTiNA run")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    sizes = [int(x) for x in args.links.split(",") if x]
    long_sizes = [int(x) for x in args.long.split(",") if x and int(x) not in sizes]
    command = (f"python -m bench.nu --links {args.links} --long {args.long} --long-budget "
               f"{args.long_budget:g} --prefix {args.prefix} --checkpoint {args.checkpoint}"
               f"{' --record' if args.record else ''}")
    machine = machine_lines(command)
    matina, targets = matina_rows(sizes, long_sizes, args.timeout, args.long_budget)
    print("\n".join(targets))
    triangles = triangle_rows(args.prefix, args.checkpoint)
    print("\n".join(triangles))
    text = "\n".join([
        "## Timed ν-expressions (`bench/nu.py`)", "", *machine, "",
        "### Against MaTiNA (whole-second pauses; target graphcep >= 1,000x MaTiNA)", "",
        "MaTiNA and graphcep anchored (interpreted engine) run `(@~>@)* % P`, graphcep search "
        "mode (its default; the engine `NuJob(P)` picks) runs the plain `P` over the same "
        "links. MaTiNA s: its process, start and file reading included; graphcep s: the "
        "engine in this process, the stream in memory, after an untimed run (search: the "
        "same links, which compiles the numba code; anchored: the first 50 events). One "
        "timed run each. Ratios are of links/s; `*`: MaTiNA was not run at that length (its "
        f"runs before say over {args.long_budget:g} s), so against its fastest rate on the "
        "pattern above; the anchored runs are skipped so too. Verdicts: MaTiNA accepts the "
        "whole sequence, graphcep anchored accepts it by its last event, graphcep search "
        "reports a match.", "",
        *(f"- `{anchored_text(p)}`{'' if p is None else f' (search: `{p}`)'}: {what}"
          for p, what in PATTERNS.values()), "", *matina, "",
        "Target graphcep >= 1,000x MaTiNA (links/s of graphcep search against MaTiNA, "
        "at the longest length both ran):", "", *targets, "",
        "### Triangles within 10 s on S1 and S2, ν against SAL (in-process, one thread)", "",
        "ν compiled on the whole streams (max_tokens 5,000,000), with the closing join (the "
        "default) and, on S1, storing every token; ν interpreted on the first "
        f"{args.prefix:,} links of S1; SAL beside each; each after an untimed run on the same links "
        f"(ν interpreted: on 1,000); tokens counted every "
        f"{args.checkpoint:,} links outside the timing; matches compared as sets of (first "
        "time, last time, bindings).", "", *triangles])
    if args.record:
        from bench.triangles import record

        record(text, START_MARK, END_MARK)
        print(f"bench.nu: recorded in {ROOT / 'bench' / 'RESULTS.md'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
