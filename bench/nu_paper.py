"""Timed ν-expressions on real link streams: the two experiments of Bertrand et al. (PETRI
NETS 2018, Sec. 4, Figs. 7-8), time against links processed.

What is measured: the cumulative wall time the ν engine takes to read a real link stream,
link after link, as a function of the number of links read, and the matches it reports on
the way. The paper's claim is that this time grows linearly with the links processed
(Fig. 7), with steeper stretches where the stream is dense (Fig. 8).

1. **DDoS squares on netflow.** The 2x2 biclique ``examples/nu/ddos_square.nu`` (sources
   A, B both reach targets S, T, the four links in any order) within 20 ms, and the same
   expression with its delay bound replaced by 10 ms in the text, on the CTU-13 scenario 1
   netflow sample in VAST layout (source and destination IPs as nodes, a flow's start
   time as the link's time). The paper used a trans-Pacific router trace (MAWI); CTU-13
   is the real netflow at hand here.
2. **Cliques among users.** The undirected 3- and 4-cliques within 10 minutes
   (``examples/nu/clique3.nu``, ``clique4.nu``: every pair exchanges a message, either
   way, any order) on SNAP's CollegeMsg and sx-mathoverflow (the paper used one month of
   Twitter France, not public).

How: each data set is read with graphcep's own readers (``read_edges``, formats ``vast``
and ``snap``) and sorted into stream order, untimed. For each (pattern, data set) the
engine comes from ``NuJob(pattern, max_tokens=...).new_engine()`` (search mode: every link
may start a match), so whichever engine the job builds is measured. A fresh engine of the
same job first reads the stream's first 100 links untimed (compilation, if any), then is
thrown away. The measured engine reads the stream (or its first ``--max-links`` links) in
pushes timed with ``time.perf_counter``: pushes start at 8 links, double while a push
takes under 50 ms and halve above 0.5 s, and never cross one of the ``--checkpoints``
points evenly spaced over the links, where time, matches and held tokens are recorded;
a point is also recorded after the push that crosses each ``--budget / --checkpoints``
timed seconds, so that a series the budget stops early still has about as many points.
A series stops
when its timed seconds exceed ``--budget`` (a last point is recorded there) or when the
engine holds more than ``--max-tokens`` tokens (the failed push is not counted).

Linearity: the R² of a least-squares line of cumulative seconds against links (1 =
perfectly linear) and the links/s over the first half of the links processed against
the last half (time at the half-way point interpolated between checkpoints; 1.0 = the
same rate throughout, above 1 = slowing down).

The plot ``bench/nu_paper.png`` (matplotlib, Agg backend; installed with pip when
missing, or else skipped) has time against links processed, one line per series (as the
paper's figures), and matches found against links processed.

    python -m bench.nu_paper [--record] [--max-links N] [--budget SECONDS]

The data are read from ``$GRAPHCEP_DATA``, else ``../shared/data`` beside the checkout;
a missing data set skips its series with a message.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import platform
import re
import subprocess
import sys
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime
from importlib import metadata
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
#: The shared data sets: ``$GRAPHCEP_DATA``, else ``../shared/data`` beside the checkout.
SHARED_DATA = Path(os.environ.get("GRAPHCEP_DATA", ROOT.parent / "shared" / "data"))
EXAMPLES = ROOT / "examples" / "nu"
RESULTS_FILE = ROOT / "bench" / "RESULTS.md"
PNG_FILE = ROOT / "bench" / "nu_paper.png"
START_MARK, END_MARK = "<!-- bench.nu_paper:start -->", "<!-- bench.nu_paper:end -->"
#: The section this one follows in RESULTS.md (when it is not there yet).
AFTER_MARK = "<!-- bench.nu:end -->"
WARM_UP_LINKS = 100
FIRST_PUSH, MAX_PUSH = 8, 65_536
FAST_PUSH_S, SLOW_PUSH_S = 0.05, 0.5

#: data set -> (file under the shared data, reader format, what the nodes and times are)
DATASETS: dict[str, tuple[str, str, str]] = {
    "CTU-13 s1 netflow": ("ctu13-scenario1-netflow-vast-format/CTU1SampleAsVast.csv", "vast",
                          "flows, source IP -> destination IP at the flow's start"),
    "CollegeMsg": ("snap-CollegeMsg/CollegeMsg.txt.gz", "snap",
                   "private messages, sender -> receiver"),
    "sx-mathoverflow": ("snap-sx-mathoverflow/sx-mathoverflow.txt.gz", "snap",
                        "answers and comments, author -> the post's author"),
}


@dataclass
class Series:
    """One (pattern, data set) run: its checkpoints and why it stopped, if it did."""

    pattern: str
    dataset: str
    stream_links: int
    engine: str = ""
    #: (links read, cumulative seconds, matches so far, tokens held)
    points: list[tuple[int, float, int, int | None]] = field(default_factory=list)
    stopped: str | None = None

    @property
    def links(self) -> int:
        return self.points[-1][0] if self.points else 0

    @property
    def seconds(self) -> float:
        return self.points[-1][1] if self.points else 0.0

    @property
    def matches(self) -> int:
        return self.points[-1][2] if self.points else 0

    def peak_tokens(self) -> int | None:
        held = [p[3] for p in self.points if p[3] is not None]
        return max(held) if held else None

    def r_squared(self) -> float | None:
        """R² of a least-squares line of seconds against links over the checkpoints."""
        import numpy as np

        if len(self.points) < 3:
            return None
        x = np.array([p[0] for p in self.points], dtype=float)
        y = np.array([p[1] for p in self.points], dtype=float)
        total = float(((y - y.mean()) ** 2).sum())
        if total == 0.0:
            return None
        slope, intercept = np.polyfit(x, y, 1)
        residual = float(((y - (slope * x + intercept)) ** 2).sum())
        return 1.0 - residual / total

    def half_rates(self) -> tuple[float, float] | None:
        """links/s over the first and over the last half of the links processed."""
        import numpy as np

        if len(self.points) < 3 or self.links < 2:
            return None
        x = [p[0] for p in self.points]
        y = [p[1] for p in self.points]
        half = self.links / 2
        at_half = float(np.interp(half, x, y))
        if at_half <= 0 or self.seconds - at_half <= 0:
            return None
        return half / at_half, half / (self.seconds - at_half)


# -- inputs ------------------------------------------------------------------------------


def load_dataset(name: str) -> Any:
    """The data set's links in stream order (core columns), or None when it is absent."""
    from graphcep.events import sort_stream
    from graphcep.io.readers import read_edges

    relative, fmt, _ = DATASETS[name]
    path = SHARED_DATA / relative
    if not path.exists():
        print(f"bench.nu_paper: {name} skipped: {path} not found (set GRAPHCEP_DATA to the "
              "folder holding the shared data sets)")
        return None
    read = read_edges(path, fmt)
    if read.rejects.num_rows:
        print(f"bench.nu_paper: {name}: {read.rejects.num_rows:,} lines rejected by the reader")
    return sort_stream(read.edges.select(["t", "src", "dst", "dur", "seq"]))


def with_bound(text: str, old: str, new: str) -> str:
    """``text`` with its one delay bound ``[0, old]`` replaced by ``[0, new]``."""
    pattern = re.compile(r"\[\s*0\s*,\s*" + re.escape(old) + r"\s*\]")
    if len(pattern.findall(text)) != 1:
        raise ValueError(f"expected exactly one delay bound [0, {old}] in the pattern")
    return pattern.sub(f"[0, {new}]", text)


def experiments() -> list[tuple[str, Any, str]]:
    """(pattern label, parsed pattern, data set) in the order they run."""
    from graphcep.lang.nu import parse_nu, parse_nu_file

    square = EXAMPLES / "ddos_square.nu"
    square_10ms = parse_nu(with_bound(square.read_text(), "0.02", "0.01"), "ddos_square_10ms",
                           f"{square} (bound 0.01)")
    clique3, clique4 = parse_nu_file(EXAMPLES / "clique3.nu"), parse_nu_file(EXAMPLES / "clique4.nu")
    return [
        ("ddos_square, δ = 10 ms", square_10ms, "CTU-13 s1 netflow"),
        ("ddos_square, δ = 20 ms", parse_nu_file(square), "CTU-13 s1 netflow"),
        ("clique3, 10 min", clique3, "CollegeMsg"),
        ("clique4, 10 min", clique4, "CollegeMsg"),
        ("clique3, 10 min", clique3, "sx-mathoverflow"),
        ("clique4, 10 min", clique4, "sx-mathoverflow"),
    ]


# -- measuring ---------------------------------------------------------------------------


def tokens_held(engine: Any) -> int | None:
    try:
        return int(engine.state_size()["tokens"])
    except Exception:  # an engine without this figure
        return None


def run_series(series: Series, job: Any, links: Any, checkpoints: int, budget: float) -> Series:
    """Push ``links`` through ``job``'s engine, recording ``checkpoints`` points."""
    from graphcep.engines.base import StateBoundError

    n = links.num_rows
    warm = job.new_engine()
    with contextlib.suppress(StateBoundError):
        warm.push(links.slice(0, min(WARM_UP_LINKS, n)))
    del warm
    engine = job.new_engine()
    series.engine = f"{type(engine).__module__}.{type(engine).__qualname__}"
    marks = sorted({max(1, round(n * (k + 1) / checkpoints)) for k in range(checkpoints)})
    series.points.append((0, 0.0, 0, tokens_held(engine)))
    done, elapsed, matches, size = 0, 0.0, 0, FIRST_PUSH
    next_time = budget / checkpoints  # a point also every budget / checkpoints seconds
    for mark in marks:
        while done < mark and series.stopped is None:
            step = min(size, mark - done)
            chunk = links.slice(done, step)
            started = time.perf_counter()
            try:
                found = engine.push(chunk).num_rows
            except StateBoundError:
                series.stopped = (f"stopped at {done:,} links: more than {job.max_tokens:,} "
                                  "tokens held (--max-tokens)")
                break
            took = time.perf_counter() - started
            elapsed += took
            done += step
            matches += found
            if elapsed >= next_time and done < mark:
                series.points.append((done, elapsed, matches, tokens_held(engine)))
                while next_time <= elapsed:
                    next_time += budget / checkpoints
            if took < FAST_PUSH_S:
                size = min(size * 2, MAX_PUSH)
            elif took > SLOW_PUSH_S:
                size = max(size // 2, 1)
            if elapsed > budget and done < n:
                series.stopped = f"stopped at {done:,} links after budget ({budget:g} s)"
        if done > series.points[-1][0]:
            series.points.append((done, elapsed, matches, tokens_held(engine)))
        if series.stopped:
            break
    return series


# -- reporting ---------------------------------------------------------------------------


def table_rows(all_series: list[Series]) -> list[str]:
    rows = ["| pattern | data set | links processed | s | links/s | matches | tokens (max at checkpoints) | "
            "links/s 1st half / 2nd half | R² (s ~ links) | note |",
            "|---|---|---|---|---|---|---|---|---|---|"]
    for s in all_series:
        rate = f"{s.links / s.seconds:,.0f}" if s.seconds > 0 else "-"
        halves = s.half_rates()
        shown_halves = (f"{halves[0]:,.0f} / {halves[1]:,.0f} ({halves[0] / halves[1]:.2f})"
                        if halves else "-")
        r2 = s.r_squared()
        peak = s.peak_tokens()
        note = s.stopped or (f"whole stream ({s.stream_links:,} links)"
                             if s.links == s.stream_links else "--max-links reached")
        rows.append(f"| {s.pattern} | {s.dataset} | {s.links:,} | {s.seconds:.2f} | {rate} | "
                    f"{s.matches:,} | {'-' if peak is None else f'{peak:,}'} | {shown_halves} | "
                    f"{'-' if r2 is None else f'{r2:.4f}'} | {note} |")
    return rows


def load_pyplot() -> Any:
    """matplotlib's pyplot on the Agg backend; pip-installed when missing; None if that fails."""
    try:
        import matplotlib
    except ImportError:
        print("bench.nu_paper: matplotlib missing, installing it with pip ...", flush=True)
        done = subprocess.run([sys.executable, "-m", "pip", "install", "-q", "matplotlib"],
                              capture_output=True, text=True, check=False)
        if done.returncode:
            tail = (done.stderr.strip().splitlines() or ["?"])[-1]
            print(f"bench.nu_paper: plot skipped (pip install matplotlib failed: {tail})")
            return None
        import importlib

        importlib.invalidate_caches()
        try:
            import matplotlib
        except ImportError:
            print("bench.nu_paper: plot skipped (matplotlib still not importable)")
            return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(all_series: list[Series], path: Path, title: str) -> bool:
    """Time (top) and matches (bottom) against links processed, one line per series; the
    netflow squares (the paper's Fig. 7) on the left, the cliques (Fig. 8) on the right.
    False when skipped."""
    plt = load_pyplot()
    if plt is None:
        return False
    fig, axes = plt.subplots(2, 2, figsize=(12, 7.5), sharex="col")
    columns = {"squares": 0, "cliques": 1}
    for s in all_series:
        col = columns["squares" if DATASETS[s.dataset][1] == "vast" else "cliques"]
        x = [p[0] for p in s.points]
        label = f"{s.pattern} on {s.dataset}" + (" (stopped)" if s.stopped else "")
        (line,) = axes[0][col].plot(x, [p[1] for p in s.points], marker="o", markersize=3,
                                    label=label)
        axes[1][col].plot(x, [p[2] for p in s.points], marker="o", markersize=3,
                          color=line.get_color())
        if s.stopped:
            axes[0][col].plot(x[-1:], [s.seconds], marker="x", markersize=9,
                              color=line.get_color())
    for col, name in enumerate(("DDoS squares on netflow (Fig. 7)",
                                "cliques within 10 min (Fig. 8)")):
        axes[0][col].set(ylabel="cumulative time (s)", title=name)
        axes[1][col].set(xlabel="links processed", ylabel="matches found")
        most = max((s.matches for s in all_series
                    if (DATASETS[s.dataset][1] == "vast") == (col == 0)), default=0)
        axes[1][col].set_ylim(0, max(1, most) * 1.05)
        if axes[0][col].get_legend_handles_labels()[0]:
            axes[0][col].legend(fontsize=8, loc="upper left")
        else:
            axes[0][col].text(0.5, 0.5, "no data", ha="center", transform=axes[0][col].transAxes)
        for ax in (axes[0][col], axes[1][col]):
            ax.grid(alpha=0.3)
            ax.ticklabel_format(axis="x", style="plain")
    fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    print(f"bench.nu_paper: plot written to {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return True


def version(package: str) -> str:
    try:
        return f"{package} {metadata.version(package)}"
    except metadata.PackageNotFoundError:
        return f"{package} not installed"


def git(*args: str) -> str:
    try:
        return subprocess.run(["git", *args], capture_output=True, text=True, check=False,
                              cwd=ROOT).stdout.strip()
    except OSError:
        return "?"


def machine_lines(packages: tuple[str, ...] = ("pyarrow", "numpy", "matplotlib")
                  ) -> list[str]:
    """Date, machine, Python and ``packages``' versions, and graphcep's commit."""
    model = "?"
    try:
        found = re.search(r"model name\s*:\s*(.+)", Path("/proc/cpuinfo").read_text())
        model = found.group(1).strip() if found else platform.processor() or "?"
    except OSError:
        pass
    # each line is "XY path"; the output comes stripped, so split rather than slice
    dirty = [line.split(maxsplit=1)[-1] for line in git("status", "--porcelain", "src").splitlines()
             if line.strip()]
    return [
        f"- date: {datetime.now(UTC).strftime('%Y-%m-%d %H:%M UTC')}",
        f"- machine: {platform.machine()}, {model}, {os.cpu_count()} cores",
        f"- Python {platform.python_version()}; "
        + ", ".join(version(p) for p in packages),
        f"- graphcep: git {git('rev-parse', '--short', 'HEAD') or '?'} "
        + (f"+ uncommitted changes in {', '.join(dirty)}" if dirty else "(src/ clean)"),
    ]


def record(text: str) -> None:
    """Replace this benchmark's section of bench/RESULTS.md; a new one goes after the
    ``bench.nu`` section (and its notes), else at the end."""
    block = f"{START_MARK}\n{text}\n{END_MARK}"
    old = RESULTS_FILE.read_text() if RESULTS_FILE.exists() else "# Benchmark results\n"
    if START_MARK in old and END_MARK in old:
        head, rest = old.split(START_MARK, 1)
        new = head + block + rest.split(END_MARK, 1)[1]
    elif AFTER_MARK in old:
        head, rest = old.split(AFTER_MARK, 1)
        cut = rest.find("<!-- bench.")
        notes, tail = (rest, "") if cut < 0 else (rest[:cut], rest[cut:])
        new = (head + AFTER_MARK + notes.rstrip("\n") + "\n\n" + block + "\n"
               + ("\n" + tail if tail else ""))
    else:
        new = old.rstrip("\n") + "\n\n" + block + "\n"
    RESULTS_FILE.write_text(new)
    print(f"bench.nu_paper: recorded in {RESULTS_FILE}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.nu_paper",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--max-links", type=int, default=None,
                        help="links read per series at most (default: the whole stream)")
    parser.add_argument("--budget", type=float, default=60.0,
                        help="timed seconds per series before it stops (default 60)")
    parser.add_argument("--checkpoints", type=int, default=10,
                        help="points recorded per series (default 10)")
    parser.add_argument("--max-tokens", type=int, default=1_000_000,
                        help="the engine's token bound; a series stops above it")
    parser.add_argument("--record", action="store_true",
                        help="write bench/RESULTS.md and bench/nu_paper.png")
    parser.add_argument("--png", type=Path, default=None,
                        help="where the plot goes (default bench/nu_paper.png)")
    args = parser.parse_args(argv)
    if args.checkpoints < 1 or args.budget <= 0 or (args.max_links is not None
                                                     and args.max_links < 1):
        parser.error("--checkpoints, --budget and --max-links must be positive")
    sys.path.insert(0, str(ROOT / "src"))
    from graphcep.jobs.nu import NuJob

    if not SHARED_DATA.exists():
        print(f"bench.nu_paper: skipped: no data folder {SHARED_DATA} (set GRAPHCEP_DATA)")
        return 0
    machine = machine_lines()
    streams: dict[str, Any] = {}
    all_series: list[Series] = []
    for label, pattern, dataset in experiments():
        if dataset not in streams:
            streams[dataset] = load_dataset(dataset)
        links = streams[dataset]
        if links is None:
            continue
        if args.max_links is not None:
            links = links.slice(0, args.max_links)
        job = NuJob(pattern, max_tokens=args.max_tokens)
        print(f"bench.nu_paper: {label} on {dataset} ({links.num_rows:,} links) ...", flush=True)
        series = run_series(Series(label, dataset, streams[dataset].num_rows), job, links,
                            args.checkpoints, args.budget)
        all_series.append(series)
        print(table_rows([series])[-1], flush=True)
    if not all_series:
        print("bench.nu_paper: no data set found, nothing measured")
        return 0
    rows = table_rows(all_series)
    print("\n".join(rows))
    engines = sorted({s.engine for s in all_series})
    command = "python -m bench.nu_paper " + " ".join(argv if argv is not None else sys.argv[1:])
    png = args.png or (PNG_FILE if args.record else ROOT / "bench" / "data" / "nu_paper.png")
    png.parent.mkdir(parents=True, exist_ok=True)
    plotted = plot(all_series, png, f"timed ν-expressions, time against links processed "
                                    f"(budget {args.budget:g} s per series; "
                                    f"{', '.join(e.rsplit('.', 1)[-1] for e in engines)})")
    if not args.record:
        return 0
    data_lines = [f"- {name}: {what}; `{relative}` ({streams[name].num_rows:,} links, "
                  f"read as `{fmt}`)" for name, (relative, fmt, what) in DATASETS.items()
                  if streams.get(name) is not None]
    text = "\n".join([
        "## Timed ν-expressions on real link streams, the paper's Figs. 7-8 "
        "(`bench/nu_paper.py`)", "",
        f"Command: `{command.strip()}`; engine: {', '.join(f'`{e}`' for e in engines)} "
        f"(from `NuJob(...).new_engine()`, search mode, max_tokens {args.max_tokens:,}); "
        f"{args.checkpoints} checkpoints per series, {args.budget:g} timed s per series.", "",
        *data_lines, "",
        *rows, "",
        "links/s 1st half / 2nd half: the rate over the first and the last half of the links "
        "processed (ratio in brackets: 1 = linear time, above 1 = slowing down); R²: of a "
        "least-squares line of cumulative seconds against links over the checkpoints.", "",
        ("![time and matches against links processed](nu_paper.png)" if plotted else
         "(plot skipped: matplotlib unavailable)"), "",
        "Machine:", *machine])
    record(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
