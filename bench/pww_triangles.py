"""The slow-triangle attacker: progressive window widening (PWW) around the SAL engine
against fixed windows, on triangles injected at durations from 1 s to 1 day into
S1-style background traffic.

What is measured. Directed triangles ``a -> b -> c -> a`` on three fresh hosts each are
injected, ``--per`` of each duration in :data:`DURATIONS_S` (1 s to 1 day; the middle
edge at a uniform time between the first and the last), into background netflow from
the S1 generator (``generate_netflow``: uniform source, uniform other destination, one
edge every ``1 / rate`` s, 5,000 hosts). S1 itself is 10,000 edges/s for 20 s; a day-long
span at that rate is 864 million edges, so the background here is scaled down to
``--rate`` edges/s (default 0.25) over ``--days`` days (default 2): the same generator,
the same host pool, 43,200 edges. The detector is ``examples/triangle.sal`` with its
10 s bound removed (a SAL query under PWW needs none), the compiled SAL engine, run in
every window of every method in a fresh engine (:func:`graphcep.runtime.widening.detect`).

Methods, all through the same window planner and detector:

* **PWW** with ``T0 = --base`` (1 s), ``D`` = 1 day, and ``L`` the longest injected
  triangle's span in records (first to last record in stream order, both included),
  rounded up to a power of two: Theorem 1 then promises every injected triangle.
* **fixed W** for W = 10 s and 1 day: the detector every ``W`` over the last ``2W``
  (PWW's level 0 alone with ``T0 = W``, no widening, nothing dropped): every instance
  no longer than ``W`` lies in a window (Lemma 1).
* **one stream, bounded by 1 day**: no windows at all -- graphcep's streaming engine with
  the query bounded by 1 day, fed micro-batches of ``T0``, as ``graphcep stream`` runs a
  query with a time bound (``--window``): what a user who knows the longest duration picks. It
  reads each record once and reports in the micro-batch of a match's last edge; it
  holds every record of the last day (its "peak state": the engine's edges at most).

Columns. *Found*: injected triangles reported (matched by their three edges). *Delay*:
report time (the start time of the reporting window's last record) minus the triangle's
last edge's time, the median per duration. *Records touched*: the records of every
window the detector ran on, summed (the detector's work; a window holding fewer records
than a match, three edges, starts no detector and touches nothing, in every method). *Peak state*: the most records
a level held at once (PWW: per level above 0, which Algorithm 2 bounds by ``2L``, and
all levels together; a fixed window: its two batches). Every reported instance is also
checked against an independent oracle: whether any window handed to the detector holds
all three of its edges, and the whole-stream run of the same query.

A sweep over ``L`` and ``T0`` (same stream, windows only: an injected triangle counts as
found by the first window that holds its three edges, which for a SAL query is exactly
when the detector reports it) profiles what the work is made of.

    python -m bench.pww_triangles [--record] [--rate R] [--days N] [--per K]

``--record`` rewrites the section between ``<!-- bench.pww_triangles:start -->`` and
``<!-- bench.pww_triangles:end -->`` of ``bench/RESULTS.md`` and writes
``bench/pww_triangles.png`` (delay against duration; records touched and held per
method).
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

ROOT = Path(__file__).resolve().parent.parent
RESULTS_FILE = ROOT / "bench" / "RESULTS.md"
PNG_FILE = ROOT / "bench" / "pww_triangles.png"
QUERY_FILE = ROOT / "examples" / "triangle.sal"
START_MARK = "<!-- bench.pww_triangles:start -->"
END_MARK = "<!-- bench.pww_triangles:end -->"
US = 1_000_000
DAY_S = 86_400
DURATIONS_S = (1, 10, 100, 1_000, 10_000, DAY_S)
VERTICES = 5_000  # S1's host pool
FIXED_S = (10, DAY_S)
FLOOR_S = 0.1  # a delay of 0 on the plots' log scale


# -- the stream ----------------------------------------------------------------------------


@dataclass(frozen=True)
class Injected:
    """One injected instance: its nominal duration, its records' seqs and times, and its
    span in records (first to last in stream order, both included)."""

    duration_s: float
    seqs: tuple[int, ...]
    first_t: int
    last_t: int
    span: int


def unbounded_triangle() -> Any:
    """``examples/triangle.sal`` without its time bound."""
    from graphcep.lang.sal import parse_query

    text = "\n".join(line for line in QUERY_FILE.read_text().splitlines()
                     if "starttime(e3) - starttime(e1)" not in line)
    return parse_query(text, "triangle")


def slow_triangles(rate: float, days: float, per: int, seed: int = 1
                   ) -> tuple[pa.Table, list[tuple[float, list[int], list[str]]]]:
    """Background netflow plus ``per`` triangles of each duration, each on three fresh
    hosts; the edges (``t``, ``src``, ``dst``) in any order, and per triangle its
    duration, edge times and hosts."""
    from graphcep.io.generator import generate_netflow

    span_us = int(days * DAY_S * US)
    background = generate_netflow(int(rate * days * DAY_S), VERTICES, rate, seed=seed)
    rng = np.random.default_rng(seed)
    rows_t, rows_s, rows_d, plan = [], [], [], []
    for d in DURATIONS_S:
        for i in range(per):
            d_us = int(d * US)
            t1 = int(rng.integers(0, span_us - d_us))
            t2 = t1 + int(rng.integers(1, d_us))
            hosts = [f"attacker{d}s_{i}_{x}" for x in "abc"]
            times = [t1, t2, t1 + d_us]
            for t, (s, dst) in zip(times, [(0, 1), (1, 2), (2, 0)], strict=True):
                rows_t.append(t + 1)  # off the background's whole seconds
                rows_s.append(hosts[s])
                rows_d.append(hosts[dst])
            plan.append((float(d), [t + 1 for t in times], hosts))
    injected = pa.table({"t": pa.array(rows_t, pa.int64()), "src": rows_s, "dst": rows_d})
    edges = pa.concat_tables([background.select(["t", "src", "dst"]), injected])
    return edges, plan


def numbered_stream(edges: pa.Table) -> pa.Table:
    """The edges in stream order, numbered 1..n (``seq``), as every method reads them."""
    from graphcep.events import normalize_edges, sort_stream

    table = edges.sort_by([("t", "ascending"), ("src", "ascending"), ("dst", "ascending")])
    table = table.append_column("seq", pa.array(np.arange(1, table.num_rows + 1,
                                                          dtype=np.int64)))
    return sort_stream(normalize_edges(table))


def locate(stream: pa.Table, plan: list[tuple[float, list[int], list[str]]]
           ) -> list[Injected]:
    """Each planned triangle's records in the numbered stream."""
    index = {(t, s, d): q for t, s, d, q in zip(
        stream.column("t").to_pylist(), stream.column("src").to_pylist(),
        stream.column("dst").to_pylist(), stream.column("seq").to_pylist(), strict=True)}
    out = []
    for duration, times, hosts in plan:
        pairs = [(hosts[0], hosts[1]), (hosts[1], hosts[2]), (hosts[2], hosts[0])]
        seqs = tuple(index[(t, s, d)] for t, (s, d) in zip(times, pairs, strict=True))
        out.append(Injected(duration, seqs, times[0], times[-1], seqs[-1] - seqs[0] + 1))
    return out


# -- running a method ------------------------------------------------------------------------


@dataclass
class Method:
    """One way of windowing the stream: its name, ``L``, ``T0`` and ``D``; what it found
    and what it cost (filled in by :func:`run_method` or :func:`plan_only`)."""

    name: str
    keep: int
    base_us: int
    max_duration_us: int | None
    found: dict[tuple[int, ...], int] = field(default_factory=dict)  # seqs -> report t
    closed: dict[tuple[int, ...], int] = field(default_factory=dict)  # seqs -> close t
    rows: int = 0
    touched: int = 0
    touched_by_level: list[int] = field(default_factory=list)
    held_by_level: list[int] = field(default_factory=list)
    windows: int = 0
    seconds: float = 0.0
    oracle_ok: bool = True
    streaming: bool = False  # one engine fed micro-batches of base_us, no windows

    @property
    def peak_above_0(self) -> int:
        return max(self.held_by_level[1:], default=0)

    @property
    def peak(self) -> int:
        return max(self.held_by_level, default=0)


def fixed(name: str, window_s: float, records: int) -> Method:
    """A fixed window of ``window_s``: level 0 alone with ``T0 = window_s`` (windows of two
    batches, one every batch), nothing ever dropped (``L`` = the stream's length)."""
    base = int(window_s * US)
    return Method(name, max(1, records), base, base - 1)


def window_seqs(windows: list[Any]) -> list[np.ndarray]:
    return [w.records.column("seq").to_numpy() for w in windows]


def first_holding(seqs: list[np.ndarray], reports: list[Any], wanted: list[tuple[int, ...]]
                  ) -> dict[tuple[int, ...], Any]:
    """For each wanted set of seqs (sorted), the report time of the first window (in the
    order a stream closes them) holding all of them: the independent check of what a
    detector of local matches reports."""
    out: dict[tuple[int, ...], int] = {}
    targets = [np.array(w, dtype=np.int64) for w in wanted]
    lo = np.array([w[0] for w in wanted], dtype=np.int64)
    hi = np.array([w[-1] for w in wanted], dtype=np.int64)
    for s, report in zip(seqs, reports, strict=True):
        if len(out) == len(wanted):
            break
        for i in np.flatnonzero((lo >= s[0]) & (hi <= s[-1])):
            if wanted[i] not in out and np.isin(targets[i], s, assume_unique=True).all():
                out[wanted[i]] = report
    return out


def close_time(report_t: int, batch_us: int) -> int:
    """When a stream knows a window is complete: the end of its later batch (the one
    holding its last record)."""
    return (report_t // batch_us + 1) * batch_us


def plan_only(method: Method, job: Any, stream: pa.Table, wanted: list[tuple[int, ...]]
              ) -> Method:
    """Cut ``method``'s windows (no detector): work, state, and which wanted instances a
    window holds whole, with the first such window's report time."""
    from graphcep.runtime.widening import plan_windows

    windows, planner = plan_windows(job.orient, stream, keep=method.keep,
                                    base_us=method.base_us,
                                    max_duration_us=method.max_duration_us)
    levels = len(planner.levels)
    method.touched_by_level = [0] * levels
    for w in windows:  # a window too small for a match starts no detector: no work
        if w.records.num_rows >= job.min_records:
            method.touched_by_level[w.level] += w.records.num_rows
    method.touched = sum(method.touched_by_level)
    method.windows = len(windows)
    method.held_by_level = [s.records_held for s in planner.stats()]
    times = [(w.report_t, close_time(w.report_t, method.base_us << w.level)) for w in windows]
    held = first_holding(window_seqs(windows), times, wanted)
    method.found = {k: v[0] for k, v in held.items()}
    method.closed = {k: v[1] for k, v in held.items()}
    return method


def instance_keys(matches: pa.Table) -> list[tuple[int, ...]]:
    """Each match row's records, as the sorted tuple of their seqs."""
    return [tuple(sorted(e["seq"] for e in edges))
            for edges in matches.column("edges").to_pylist()]


def run_method(method: Method, job: Any, stream: pa.Table, oracle: dict[tuple[int, ...], int],
               wanted: list[tuple[int, ...]]) -> Method:
    """Run the detector in ``method``'s windows (in-process, as ``graphcep run --pww
    --engine local`` does); check every report against the window-containment oracle
    and the whole-stream run."""
    from graphcep.runtime.widening import run_widening

    plan_only(method, job, stream, list(oracle))
    held_check = method.found
    started = time.perf_counter()
    matches, stats = run_widening(job, stream, keep=method.keep, base_us=method.base_us,
                                  max_duration_us=method.max_duration_us)
    method.seconds = time.perf_counter() - started
    method.held_by_level = [s.records_held for s in stats.levels]
    reported = dict(zip(instance_keys(matches), matches.column("pww_report_t").to_pylist(),
                        strict=True))
    # every report is a whole-stream instance, reported by the first window holding it
    method.oracle_ok = reported == held_check
    method.rows = len(reported)
    chosen = set(wanted)
    method.found = {k: v for k, v in reported.items() if k in chosen}
    method.closed = {k: v for k, v in method.closed.items() if k in chosen}
    return method


def whole_stream(job: Any, stream: pa.Table) -> dict[tuple[int, ...], tuple[int, int]]:
    """Every triangle of the stream, with its first and last edge's times: the query
    bounded by the whole stream's span, one engine over every record."""
    from graphcep.runtime.local import replay

    span = int(stream.column("t")[-1].as_py()) - int(stream.column("t")[0].as_py()) + 1
    engine = job.bounded_by(span).new_engine()
    out = {}
    for part in replay(engine, job.orient(stream)):
        out.update(zip(instance_keys(part), zip(part.column("first_t").to_pylist(),
                                                 part.column("last_t").to_pylist(),
                                                 strict=True), strict=True))
    return out


def one_stream(job: Any, stream: pa.Table, oracle: dict[tuple[int, ...], tuple[int, int]],
               wanted: list[tuple[int, ...]], within_s: float, tick_s: float) -> Method:
    """What a user who knows the longest duration ``D`` runs instead of windows: one
    streaming engine, the query bounded by ``within_s``, fed micro-batches of ``tick_s``
    (``graphcep stream`` with ``--window``). It reads each record once and reports
    a match in the micro-batch of its last edge; it holds every record of the last
    ``within_s``. Checked: it reports each whole-stream triangle no longer than
    ``within_s`` exactly once, and nothing else."""
    within_us, tick_us = int(within_s * US), int(tick_s * US)
    method = Method(f"one stream, bounded by {fmt_s(within_s)}", stream.num_rows, tick_us,
                    within_us, streaming=True)
    engine = job.bounded_by(within_us).new_engine()
    table = job.orient(stream)
    t = table.column("t").to_numpy()
    bounds = [0, *(np.flatnonzero(np.diff(t // tick_us)) + 1).tolist(), len(t)]
    reports: list[tuple[tuple[int, ...], int]] = []
    peak = 0
    for lo, hi in zip(bounds[:-1], bounds[1:], strict=True):
        started = time.perf_counter()
        out = engine.push(table.slice(lo, hi - lo))
        method.seconds += time.perf_counter() - started
        reports += [(key, int(t[hi - 1])) for key in instance_keys(out)]
        peak = max(peak, engine.state_size()["edges"])
    reported = dict(reports)
    expected = {k for k, (first, last) in oracle.items() if last - first <= within_us}
    method.oracle_ok = len(reported) == len(reports) and set(reported) == expected
    method.rows, method.windows = len(reported), len(bounds) - 1
    method.touched_by_level, method.touched = [table.num_rows], table.num_rows
    method.held_by_level = [peak]
    chosen = set(wanted)
    method.found = {k: v for k, v in reported.items() if k in chosen}
    method.closed = dict(method.found)  # a micro-batch closes with its last record
    return method


# -- figures ---------------------------------------------------------------------------------


def delays_by_duration(method: Method, injected: list[Injected], at_close: bool = False
                       ) -> dict[float, list[float]]:
    """Per nominal duration, the delay (s) of each injected instance the method found: from
    its report time, or (``at_close``) from when its window closes."""
    times = method.closed if at_close else method.found
    out: dict[float, list[float]] = {d: [] for d in sorted({i.duration_s for i in injected})}
    for inst in injected:
        if inst.seqs in times:
            out[inst.duration_s].append((times[inst.seqs] - inst.last_t) / US)
    return out


def fmt_s(seconds: float | None) -> str:
    if seconds is None or (isinstance(seconds, float) and math.isnan(seconds)):
        return "-"
    for unit, size in (("d", DAY_S), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds / size:.2f} {unit}"
    return f"{seconds:.2f} s"


def median(values: list[float]) -> float | None:
    return float(np.median(values)) if values else None


def duration_table(methods: list[Method], injected: list[Injected]) -> list[str]:
    """Per duration: how many each method found and its median delay (and over the
    duration, for PWW)."""
    head = "| duration | injected | " + " | ".join(
        f"{m.name}: found, median delay" for m in methods) + \
        " | PWW median delay / duration | the same, at window close |"
    lines = [head, "|" + "---|" * (4 + len(methods))]
    pww = methods[0]
    for d in sorted({i.duration_s for i in injected}):
        n = sum(i.duration_s == d for i in injected)
        cells = []
        for m in methods:
            ds = delays_by_duration(m, injected)[d]
            cells.append(f"{len(ds)}/{n}, {fmt_s(median(ds))}")
        ratios = [median(delays_by_duration(pww, injected, at_close)[d])
                  for at_close in (False, True)]
        lines.append(f"| {fmt_s(d)} | {n} | " + " | ".join(cells) + " | " + " | ".join(
            "-" if r is None else f"{r / d:.2f}" for r in ratios) + " |")
    return lines


def cost_table(methods: list[Method], injected: list[Injected], smallest: Method
               ) -> list[str]:
    lines = ["| method | L | T0 | levels | windows | injected found | all instances "
             "reported | records touched | x smallest fixed | peak records held "
             "(a level above 0 / any level) | detector s | oracle |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for m in methods:
        lines.append(
            f"| {m.name} | {'-' if m.streaming else f'{m.keep:,}'} | "
            f"{fmt_s(m.base_us / US)}{' batches' if m.streaming else ''} | "
            f"{'-' if m.streaming else len(m.touched_by_level)} | {m.windows:,}"
            f"{' pushes' if m.streaming else ''} | "
            f"{len(m.found)}/{len(injected)} | {m.rows:,} | {m.touched:,} | "
            f"{m.touched / smallest.touched:.1f} | "
            f"{f'{m.peak_above_0:,}' if len(m.held_by_level) > 1 else '-'} / {m.peak:,} | "
            f"{m.seconds:.1f} | "
            f"{'exact' if m.oracle_ok else 'MISMATCH'} |")
    return lines


def level_table(pww: Method, stream_records: int) -> list[str]:
    """PWW's work and state level by level: the profile of its records touched."""
    lines = ["| level | batch | records touched | / stream | records held (most) |",
             "|---|---|---|---|---|"]
    for k, (touched, held) in enumerate(zip(pww.touched_by_level, pww.held_by_level,
                                            strict=True)):
        lines.append(f"| {k} | {fmt_s((pww.base_us << k) / US)} | {touched:,} | "
                     f"{touched / stream_records:.2f} | {held:,} |")
    return lines


def sweep_table(sweep: list[Method], injected: list[Injected], smallest: Method
                ) -> list[str]:
    lines = ["| L | T0 | injected found | median delay / duration (worst duration): "
             "report / close | records touched | x smallest fixed | most held above level 0 |",
             "|---|---|---|---|---|---|---|"]
    for m in sweep:
        worst = " / ".join("-" if w is None else f"{w:.2f}" for w in (
            worst_delay_ratio(m, injected), worst_delay_ratio(m, injected, at_close=True)))
        lines.append(f"| {m.keep:,} | {fmt_s(m.base_us / US)} | {len(m.found)}/{len(injected)} "
                     f"| {worst} | {m.touched:,} | "
                     f"{m.touched / smallest.touched:.1f} | {m.peak_above_0:,} |")
    return lines


def worst_delay_ratio(method: Method, injected: list[Injected], at_close: bool = False
                      ) -> float | None:
    """The largest, over durations, of the median delay over the duration."""
    ratios = [median(ds) / d for d, ds in
              delays_by_duration(method, injected, at_close).items() if ds]
    return max(ratios) if ratios else None


def targets(pww: Method, smallest: Method, injected: list[Injected]) -> list[str]:
    worst = worst_delay_ratio(pww, injected)
    worst_close = worst_delay_ratio(pww, injected, at_close=True)
    every = len(pww.found) == len(injected)
    work = pww.touched / smallest.touched
    met = {"found": every, "delay": worst is not None and worst <= 1 and every,
           "work": work <= 4, "state": pww.peak_above_0 <= 2 * pww.keep}
    verdict = {k: "MET" if v else "MISSED" for k, v in met.items()}
    return [
        f"- every injected instance found: **{verdict['found']}** "
        f"({len(pww.found)}/{len(injected)})",
        f"- median detection delay <= 1x the duration, at every duration: "
        f"**{verdict['delay']}** (worst median delay / duration: "
        f"{'-' if worst is None else f'{worst:.2f}'}; from the reporting window's close, "
        f"the end of its later batch: {'-' if worst_close is None else f'{worst_close:.2f}'})",
        f"- total work <= 4x the smallest fixed window's: **{verdict['work']}** "
        f"({pww.touched:,} records touched, {work:.1f}x {smallest.name}'s "
        f"{smallest.touched:,})",
        f"- state per level <= 2L records: **{verdict['state']}** (most held by a level "
        f"above 0: {pww.peak_above_0:,}; 2L = {2 * pww.keep:,}; level 0 holds batches as "
        f"the stream gives them, at most {pww.held_by_level[0]:,})",
    ]


# -- the plot --------------------------------------------------------------------------------


def load_pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        print("bench.pww: matplotlib not importable, plot skipped")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(methods: list[Method], injected: list[Injected], path: Path) -> bool:
    plt = load_pyplot()
    if plt is None:
        return False
    fig, (left, right) = plt.subplots(1, 2, figsize=(11, 4.5))
    durations = np.array(sorted({i.duration_s for i in injected}))
    for m, marker in zip(methods, "os^v", strict=False):
        xs, ys = [], []
        for inst in injected:
            if inst.seqs in m.found:
                xs.append((inst.last_t - inst.first_t) / US)
                ys.append(max((m.found[inst.seqs] - inst.last_t) / US, FLOOR_S))
        left.scatter(xs, ys, marker=marker, s=18, alpha=0.7,
                     label=f"{m.name} ({len(m.found)}/{len(injected)} found)")
    left.plot(durations, durations, "k--", lw=1, label="delay = duration")
    left.plot(durations, durations / 2, "k:", lw=1, label="delay = duration / 2 (paper)")
    left.set(xscale="log", yscale="log", xlabel="triangle duration (s)",
             ylabel=f"detection delay (s; 0 drawn at {FLOOR_S})",
             title="Detection delay (each injected triangle)")
    left.legend(fontsize=7)
    left.grid(alpha=0.3)
    work_and_state(right, [m.name for m in methods], [m.touched for m in methods],
                   [sum(m.held_by_level) if m.name == "PWW" else m.peak
                    for m in methods], "records held (all levels)", fontsize=7)
    save_figure(plt, fig, path, "bench.pww")
    return True


def work_and_state(axes: Any, names: list[str], touched: list[int], held: list[int],
                   held_label: str, fontsize: int = 8) -> None:
    """The right-hand panel of the widening plots: records touched and held, per method,
    side by side on a log scale."""
    x = np.arange(len(names))
    axes.bar(x - 0.2, touched, 0.4, label="records touched (work)")
    axes.bar(x + 0.2, held, 0.4, label=held_label)
    axes.set_xticks(x, names, fontsize=fontsize, rotation=15 if fontsize < 8 else 0)
    axes.set(yscale="log", title="Work and state")
    axes.legend(fontsize=7)
    axes.grid(alpha=0.3, axis="y")


def save_figure(plt: Any, fig: Any, path: Path, bench: str) -> None:
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    print(f"{bench}: plot written to {path} ({Path(path).stat().st_size / 1024:.0f} KiB)")


def record(text: str, start: str = START_MARK, end: str = END_MARK) -> None:
    from bench.triangles import record as record_section

    record_section(text, start, end)
    print(f"bench.pww: recorded in {RESULTS_FILE}")


# -- main ------------------------------------------------------------------------------------


def round_up_pow2(n: int) -> int:
    return 1 << max(0, math.ceil(math.log2(max(1, n))))


def setup(rate: float, days: float, per: int) -> tuple[Any, pa.Table, list[Injected]]:
    from graphcep.jobs import as_job

    edges, plan = slow_triangles(rate, days, per)
    stream = numbered_stream(edges)
    job = as_job(unbounded_triangle()).bind(0)
    return job, stream, locate(stream, plan)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.pww_triangles",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--rate", type=float, default=0.25,
                        help="background edges per second (default 0.25)")
    parser.add_argument("--days", type=float, default=2.0, help="stream span (default 2)")
    parser.add_argument("--per", type=int, default=8,
                        help="triangles injected per duration (default 8)")
    parser.add_argument("--base", type=float, default=1.0, help="PWW's T0 in s (default 1)")
    parser.add_argument("--record", action="store_true",
                        help="write bench/RESULTS.md and bench/pww_triangles.png")
    args = parser.parse_args(argv)
    if args.rate <= 0 or args.days <= 1 or args.per < 1 or args.base <= 0:
        parser.error("need --rate > 0, --days > 1, --per >= 1, --base > 0")
    sys.path.insert(0, str(ROOT / "src"))  # this checkout's graphcep
    from bench.nu import machine_lines

    machine = machine_lines("python -m bench.pww_triangles" + (" --record" if args.record
                                                                 else ""))
    started = time.perf_counter()
    job, stream, injected = setup(args.rate, args.days, args.per)
    wanted = [i.seqs for i in injected]
    longest = max(i.span for i in injected)
    keep = round_up_pow2(longest)
    print(f"stream: {stream.num_rows:,} records ({len(injected)} triangles injected); "
          f"longest injected span {longest:,} records -> L = {keep:,}", flush=True)
    t0 = time.perf_counter()
    oracle = whole_stream(job, stream)
    oracle_s = time.perf_counter() - t0
    assert all(w in oracle for w in wanted), "an injected triangle is no whole-stream match"
    base = int(args.base * US)
    methods = [Method("PWW", keep, base, DAY_S * US),
               *(fixed(f"fixed {fmt_s(w)}", w, stream.num_rows) for w in FIXED_S)]
    for m in methods:
        run_method(m, job, stream, oracle, wanted)
        print(f"{m.name}: {len(m.found)}/{len(wanted)} injected, {m.touched:,} records "
              f"touched, {m.seconds:.1f} s, oracle {'exact' if m.oracle_ok else 'MISMATCH'}",
              flush=True)
    methods.append(one_stream(job, stream, oracle, wanted, DAY_S, args.base))
    print(f"{methods[-1].name}: {len(methods[-1].found)}/{len(wanted)} injected, "
          f"{methods[-1].touched:,} records touched, {methods[-1].seconds:.1f} s, oracle "
          f"{'exact' if methods[-1].oracle_ok else 'MISMATCH'}", flush=True)
    smallest = methods[1]
    sweep = [methods[0]]
    for k, b in ((keep, 16 * base), (keep // 16, base), (64, base), (3, base)):
        sweep.append(plan_only(Method("sweep", k, b, DAY_S * US), job, stream, wanted))
    elapsed = time.perf_counter() - started
    durations = duration_table(methods, injected)
    costs = cost_table(methods, injected, smallest)
    levels = level_table(methods[0], stream.num_rows)
    sweeps = sweep_table(sweep, injected, smallest)
    verdicts = targets(methods[0], smallest, injected)
    print("\n".join([*durations, "", *costs, "", *levels, "", *sweeps, "", *verdicts]))
    png = PNG_FILE if args.record else ROOT / "bench" / "data" / "pww_triangles.png"
    png.parent.mkdir(parents=True, exist_ok=True)
    plotted = plot(methods, injected, png)
    if args.record:
        record("\n".join(section(args, machine, stream, injected, keep, longest, oracle,
                                 oracle_s, elapsed, durations, costs, levels, sweeps,
                                 verdicts, plotted)))
    return 0 if all(m.oracle_ok for m in methods) else 1


def section(args: argparse.Namespace, machine: list[str], stream: pa.Table,
            injected: list[Injected], keep: int, longest: int, oracle: dict, oracle_s: float,
            elapsed: float, durations: list[str], costs: list[str], levels: list[str],
            sweeps: list[str], verdicts: list[str], plotted: bool) -> list[str]:
    return [
        "## bench.pww_triangles: the slow-triangle attacker (progressive window widening)",
        "",
        *machine,
        "",
        f"Stream: S1's generator (5,000 hosts) scaled down to {args.rate} edges/s over "
        f"{args.days:g} days ({stream.num_rows:,} records; S1's 10,000 edges/s over a day "
        f"would be 864 million), {len(injected)} directed triangles on fresh hosts injected, "
        f"{args.per} per duration. Detector: `examples/triangle.sal` without its 10 s "
        f"bound, compiled SAL engine. The whole stream holds {len(oracle):,} triangles "
        f"({oracle_s:.1f} s for one engine over it): the injected ones and those the "
        f"background forms by chance. PWW: T0 = {fmt_s(args.base)}, D = 1 day, L = "
        f"{keep:,} (the longest injected span, {longest:,} records, rounded up to a power "
        f"of two). Fixed W: the detector every W over the last 2W. \"oracle\": every "
        f"report is a whole-stream triangle, reported by the first window holding its "
        f"three edges, and nothing else. Delay: the start time of the reporting window's "
        f"last record minus the triangle's last edge's. {elapsed:.0f} s in all.",
        "",
        *durations,
        "",
        *costs,
        "",
        "Targets (PWW against the smallest fixed window, 10 s):",
        "",
        *verdicts,
        "",
        "PWW's work level by level:",
        "",
        *levels,
        "",
        "Sweep of L and T0 (windows only, no detector; found = a window holds the three "
        "edges, which is when the SAL detector reports):",
        "",
        *sweeps,
        "",
        "![slow triangles](pww_triangles.png)" if plotted else "(plot skipped)",
    ]


if __name__ == "__main__":
    raise SystemExit(main())
