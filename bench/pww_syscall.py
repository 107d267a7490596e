"""The window-widening paper's case study: remote shells in a system-call trace, detection
delay against episode duration, and work and state against two fixed windows.

What is measured. ``graphcep.io.syscall_gen`` writes a trace of ``--episodes`` remote-shell
episodes (``accept fd=3 => y``, the three ``dup fd=y => 0/1/2`` in a random order,
``execve exe=/bin/sh``), the calls of each ``1`` to ``--max-delay`` time units apart
(log-uniform, the paper's range 1 to 10^5), one episode after the other, and background
calls at random free times, ``--density`` calls per time unit over the trace (the paper's
recorded Linux trace, one call per time unit, is not at hand; at density 1 the longest
episode would span 400,000 calls). It is read by the ``.syscall`` reader (one time unit is
1 s; a call is two links). The detector is ``examples/nu/remote_shell.nu`` (search mode,
no delay bound), the compiled ν engine, in a fresh engine per window.

Methods, through the same window planner and detector (:mod:`bench.pww_triangles`):

* **PWW**, ``T0`` = 1 time unit, no ``D``, ``L`` the longest episode's span in records
  rounded up to a power of two (Theorem 1 then promises every episode);
* **fixed, slowest**: one window sized for the slowest episode (the detector every ``W``
  over the last ``2W``, ``W`` the longest episode's duration: every episode lies in a
  window, Lemma 1);
* **fixed, fastest**: the same with ``W`` the shortest episode's duration.

An episode counts as found by a method when it reports the episode's own match (its nine
links: the pattern also matches an episode again at every later ``execve``, ending there;
those reports are counted apart, as "other matches"). Delay: report time (the start time of
the reporting window's last record) minus the episode's last call. The paper reports
delay proportional to duration with factor about 0.5, and a constant factor more work than
the small window with no episode missed. Work, state and the oracle checks are those of
:mod:`bench.pww_triangles`.

    python -m bench.pww_syscall [--record] [--episodes N] [--density D] [--seed S]

``--record`` rewrites the section between ``<!-- bench.pww_syscall:start -->`` and
``<!-- bench.pww_syscall:end -->`` of ``bench/RESULTS.md`` and writes
``bench/pww_syscall.png``.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import pyarrow as pa

from bench.pww_triangles import (
    ROOT,
    US,
    Injected,
    Method,
    cost_table,
    fixed,
    fmt_s,
    load_pyplot,
    median,
    record,
    round_up_pow2,
    run_method,
    save_figure,
    whole_stream,
    work_and_state,
)

PNG_FILE = ROOT / "bench" / "pww_syscall.png"
PATTERN_FILE = ROOT / "examples" / "nu" / "remote_shell.nu"
START_MARK = "<!-- bench.pww_syscall:start -->"
END_MARK = "<!-- bench.pww_syscall:end -->"


def trace(episodes: int, density: float, max_delay: int, seed: int
          ) -> tuple[pa.Table, list[dict]]:
    """The generated trace as the ``.syscall`` reader gives it, and its episodes."""
    from graphcep.io.syscall import parse_syscall
    from graphcep.io.syscall_gen import generate_syscalls

    # the episodes are drawn first, so the background's count does not change them
    calls, truth = generate_syscalls(episodes, 0, 1, max_delay, seed)
    span = calls[-1][0]
    calls, truth = generate_syscalls(episodes, int(density * span), 1, max_delay, seed)
    text = "".join(f"{t} {call}\n" for t, call in calls)
    return parse_syscall(text, "generated.syscall").edges, truth


def episodes_in(stream: pa.Table, truth: list[dict]) -> list[Injected]:
    """Each episode's links (every record at its calls' times) in the stream."""
    t = stream.column("t").to_numpy()
    seq = stream.column("seq").to_numpy()
    out = []
    for e in truth:
        times = np.array(e["times"], dtype=np.int64) * US
        seqs = tuple(sorted(int(s) for s in seq[np.isin(t, times)]))
        position = np.searchsorted(seq, [seqs[0], seqs[-1]])
        out.append(Injected(float(e["end"] - e["start"]), seqs, e["start"] * US, e["end"] * US,
                            int(position[1] - position[0] + 1)))
    return out


def points(method: Method, injected: list[Injected], at_close: bool = False
           ) -> tuple[np.ndarray, np.ndarray]:
    """(duration, delay) in time units of every episode the method found (the delay from
    the report, or from the reporting window's close)."""
    times = method.closed if at_close else method.found
    found = [(i.duration_s, (times[i.seqs] - i.last_t) / US) for i in injected
             if i.seqs in times]
    arr = np.array(found, dtype=float).reshape(-1, 2)
    return arr[:, 0], arr[:, 1]


def delay_ratios(method: Method, injected: list[Injected]) -> list[float]:
    """Delay over duration of every episode the method found."""
    x, y = points(method, injected)
    return list(y / x)


def slope(method: Method, injected: list[Injected], at_close: bool = False) -> float | None:
    """Least-squares factor of delay against duration, through the origin."""
    x, y = points(method, injected, at_close)
    return float(x @ y / (x @ x)) if len(x) else None


def decade_table(methods: list[Method], injected: list[Injected]) -> list[str]:
    """Per decade of episode duration: episodes, and per method found and median
    delay / duration."""
    lines = ["| episode duration | episodes | " + " | ".join(
        f"{m.name}: found, median delay / duration" for m in methods) + " |",
        "|" + "---|" * (2 + len(methods))]
    decades = sorted({int(np.floor(np.log10(i.duration_s))) for i in injected})
    for d in decades:
        members = [i for i in injected if int(np.floor(np.log10(i.duration_s))) == d]
        cells = []
        for m in methods:
            ratios = [(m.found[i.seqs] - i.last_t) / US / i.duration_s for i in members
                      if i.seqs in m.found]
            med = median(ratios)
            cells.append(f"{len(ratios)}/{len(members)}, "
                         f"{'-' if med is None else f'{med:.2f}'}")
        lines.append(f"| 10^{d} .. 10^{d + 1} units | {len(members)} | " + " | ".join(cells)
                     + " |")
    return lines


def plot(methods: list[Method], injected: list[Injected], path: Path) -> bool:
    plt = load_pyplot()
    if plt is None:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    for m, marker in zip(methods, "os^", strict=False):
        x, y = points(m, injected)
        left.scatter(x, np.maximum(y, 0.5), marker=marker, s=20, alpha=0.75,
                     label=f"{m.name} ({len(x)}/{len(injected)} found)")
    xs = np.array(sorted(i.duration_s for i in injected))
    left.plot(xs, xs / 2, "k:", lw=1, label="delay = duration / 2 (paper)")
    left.plot(xs, xs, "k--", lw=1, label="delay = duration")
    left.set(xscale="log", yscale="log", xlabel="episode duration (time units)",
             ylabel="detection delay (time units; 0 drawn at 0.5)",
             title="Remote-shell episodes: delay vs duration")
    left.legend(fontsize=7)
    left.grid(alpha=0.3)
    work_and_state(right, [m.name for m in methods], [m.touched for m in methods],
                   [sum(m.held_by_level) for m in methods], "records held (all levels)")
    save_figure(plt, fig, path, "bench.pww_syscall")
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pww_syscall",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--episodes", type=int, default=30)
    parser.add_argument("--density", type=float, default=0.005,
                        help="background calls per time unit (default 0.005)")
    parser.add_argument("--max-delay", type=int, default=100_000)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--record", action="store_true",
                        help="write bench/RESULTS.md and bench/pww_syscall.png")
    args = parser.parse_args(argv)
    if args.episodes < 1 or not 0 <= args.density <= 1 or args.max_delay < 1:
        parser.error("need --episodes >= 1, 0 <= --density <= 1, --max-delay >= 1")
    sys.path.insert(0, str(ROOT / "src"))  # this checkout's graphcep
    from bench.nu import machine_lines
    from graphcep.jobs import as_job
    from graphcep.lang.nu import parse_nu

    machine = machine_lines("python -m bench.pww_syscall" + (" --record" if args.record
                                                               else ""))
    started = time.perf_counter()
    stream, truth = trace(args.episodes, args.density, args.max_delay, args.seed)
    injected = episodes_in(stream, truth)
    job = as_job(parse_nu(PATTERN_FILE.read_text(), "remote_shell")).bind(0)
    longest = max(i.span for i in injected)
    keep = round_up_pow2(longest)
    durations = [i.duration_s for i in injected]
    print(f"trace: {stream.num_rows:,} links, {len(injected)} episodes of "
          f"{min(durations):,.0f} to {max(durations):,.0f} time units; longest span "
          f"{longest:,} records -> L = {keep:,}", flush=True)
    oracle = whole_stream(job, stream)
    wanted = [i.seqs for i in injected]
    assert all(w in oracle for w in wanted), "an episode is no whole-stream match"
    methods = [Method("PWW", keep, US, None),
               fixed(f"fixed {fmt_s(max(durations))} (slowest)", max(durations),
                     stream.num_rows),
               fixed(f"fixed {fmt_s(min(durations))} (fastest)", min(durations),
                     stream.num_rows)]
    for m in methods:
        run_method(m, job, stream, oracle, wanted)
        print(f"{m.name}: {len(m.found)}/{len(wanted)} episodes, {m.rows:,} reports, "
              f"{m.touched:,} records touched, {m.seconds:.1f} s", flush=True)
    elapsed = time.perf_counter() - started
    pww, small = methods[0], methods[2]
    decades = decade_table(methods, injected)
    costs = cost_table(methods, injected, small)
    factor = slope(pww, injected)
    big = methods[1]
    big_ratio = median(delay_ratios(big, injected))
    summary = [
        f"- PWW found {len(pww.found)}/{len(injected)} episodes; delay against duration: "
        f"least-squares factor {factor:.2f}, median delay / duration "
        f"{median(delay_ratios(pww, injected)):.2f} (paper: proportional, about 0.5); "
        f"from the reporting window's close (the end of its later batch): factor "
        f"{slope(pww, injected, at_close=True):.2f}",
        f"- work: {pww.touched / small.touched:.1f}x the fastest-sized window's records "
        f"touched, which found {len(small.found)}/{len(injected)}; "
        f"{pww.touched / big.touched:.1f}x the slowest-sized window's, which found "
        f"{len(big.found)}/{len(injected)} with median delay / duration "
        f"{'-' if big_ratio is None else f'{big_ratio:.2f}'}",
        f"- state: PWW holds at most {pww.peak_above_0:,} records at a level above 0 (2L = "
        f"{2 * keep:,}), {sum(pww.held_by_level):,} over all levels; the slowest-sized "
        f"window {big.peak:,}, the fastest-sized {small.peak:,}",
        "- other matches (the pattern matching an episode again at a later execve): "
        + ", ".join(f"{m.name} {m.rows - len(m.found):,}" for m in methods),
    ]
    print("\n".join([*decades, "", *costs, "", *summary]))
    png = PNG_FILE if args.record else ROOT / "bench" / "data" / "pww_syscall.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    plotted = plot(methods, injected, png)
    if args.record:
        record("\n".join([
            "## bench.pww_syscall: remote shells in a system-call trace (the window-widening "
            "paper's case study)",
            "",
            *machine,
            "",
            f"Trace: `graphcep.io.syscall_gen`, {args.episodes} episodes, inter-call delays "
            f"1 to {args.max_delay:,} time units (log-uniform), background {args.density} "
            f"calls per time unit, seed {args.seed}: {stream.num_rows:,} links; episodes "
            f"of {min(durations):,.0f} to {max(durations):,.0f} time units. Detector: "
            f"`examples/nu/remote_shell.nu`, compiled ν engine. PWW: T0 = 1 unit, no D, L = "
            f"{keep:,} (the longest episode's span, {longest:,} records, rounded up). "
            f"Fixed W: the detector every W over the last 2W. {elapsed:.0f} s in all.",
            "",
            *decades,
            "",
            *costs,
            "",
            *summary,
            "",
            "![remote shells](pww_syscall.png)" if plotted else "(plot skipped)",
        ]), START_MARK, END_MARK)
    return 0 if all(m.oracle_ok for m in methods) else 1


if __name__ == "__main__":
    raise SystemExit(main())
