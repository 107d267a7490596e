"""Pattern subscriptions: the pattern tree against independent KMP_var, in symbol
comparisons (du Mouza, Rigaux, Scholl, SSDBM 2006, Section 5, Figure 6).

What is measured: for 10, 100, 1,000 and 10,000 random parameterized patterns over
alphabets of 4, 8, 16 and 26 symbols, the number of symbol comparisons the tree engine
(:class:`graphcep.engines.sequences.engine.SequenceEngine`: top automata search with
KMP_var, or with a Horspool-style skip where a top pattern has two constants in a row, a
son runs only where its parent matched) makes reading a random sequence,
divided by the number made by one KMP_var automaton per pattern
(:class:`~graphcep.engines.sequences.engine.NaiveSequenceEngine`) on the same symbols.
The paper reports about 0.55, 0.35, 0.15 and 0.05 for 10, 100, 1,000 and 10,000
patterns, nearly independent of the alphabet; the target here is a ratio at or below
the paper's at every (count, alphabet).

What a comparison is, on both sides: a stream symbol compared with a pattern item -- a
constant, or a variable already bound (``KmpVar.comparisons``, summed over the tree's
nodes or over the naive automata) -- plus, for the tree, each check of a son against its
parent's match (``TreeEvaluator.seed_checks``: a parent variable's symbol against a
constant of the son, or two parent variables' symbols the son makes equal). Binding a
variable at its first occurrence compares nothing, on both sides. A skip search's
shift-table lookup is not a comparison (the standard measure of string matching); the
symbols it jumps over are never compared, and every window it tries is counted like
KMP_var's (:mod:`graphcep.engines.sequences.skip`).

Two shares of the tree's count are reported apart: the top nodes' searches (a KMP_var
top node compares every symbol exactly once, a skip search less where its shifts jump)
and, up to ``SLEEP_COUNTS`` patterns, the part of them made while a node
below holds a live alignment -- what the paper's rule 2 (a node asleep while its sons
run) would save, at the price of the node's own occurrences meanwhile; the engine keeps
top nodes awake, for exact notifications.

Workload (the paper does not give its generator; this one is ours): pattern lengths
uniform in 4..8 (the range Figure 7 varies from 4 up); each item a variable with
probability 0.3, which is a variable already used in the pattern with probability 0.5
(so repeated variables occur), else a constant drawn uniformly from the alphabet.
Duplicates are kept (each is its own subscription; the naive engine runs one automaton
per subscription, the tree one node per distinct pattern). The sequence is uniform over
the alphabet, one key, ``--symbols`` symbols (default 20,000); seeds fixed.

Each (count, alphabet) cell pools ``DRAWS[count]`` independent draws of patterns and
sequence (20 at 10 patterns down to 1 at 10,000): the ratio of a cell is the draws'
tree comparisons over their naive comparisons, and the lowest and highest single-draw
ratios are shown beside it. Ten random patterns make trees of very different shapes
(one draw may leave six top nodes with no constant pair, the next three with several),
so a single draw is one sample, not an estimate of the paper's per-size figure.

The naive engine is slow with many patterns (one Python KMP_var step per pattern per
symbol), so it reads only the first ``min(symbols, NAIVE_STEPS // patterns)`` symbols;
the tree engine reads ``min(symbols, TREE_STEPS // patterns)`` symbols (at least that
prefix) but its counters are read at the end of the prefix, so the ratio compares the
same symbols. Both engines' notifications on the
prefix must be identical (sorted rows without the edges); a difference aborts the run.
Throughput (symbols/s, wall clock, pushes of 1,000 symbols, notification rows built) is
measured over the symbols each engine read (the table's two "read" columns).

    python -m bench.subs_fig6 [--record] [--symbols N] [--max-draws K]

The plot ``bench/subs_fig6.png`` (matplotlib, Agg backend; skipped with a message when
missing): the ratio against the number of patterns, one line per alphabet, the paper's
points marked.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from pathlib import Path
from typing import Any

from bench.nu_paper import machine_lines

ROOT = Path(__file__).resolve().parent.parent
RESULTS_FILE = ROOT / "bench" / "RESULTS.md"
PNG_FILE = ROOT / "bench" / "subs_fig6.png"
START_MARK, END_MARK = "<!-- bench.subs_fig6:start -->", "<!-- bench.subs_fig6:end -->"

COUNTS = (10, 100, 1_000, 10_000)
ALPHABETS = (4, 8, 16, 26)
#: The paper's ratios (Section 5, text on Figure 6), per pattern count.
PAPER = {10: 0.55, 100: 0.35, 1_000: 0.15, 10_000: 0.05}
MIN_LEN, MAX_LEN, P_VAR, P_REUSE = 4, 8, 0.3, 0.5
#: Pattern-symbol steps the naive engine is given per (count, alphabet).
NAIVE_STEPS = 5_000_000
#: Pattern-symbol steps the tree engine is given (it reads at least the naive prefix).
TREE_STEPS = 50_000_000
PUSH = 1_000
SEED = 2006
#: Independent draws (pattern set and sequence) pooled per (count, alphabet). A random
#: set of ten patterns is one sample from a wide distribution of trees (per-draw ratios
#: range over 0.3-0.8 at 10 patterns), so one draw does not estimate the paper's
#: per-size figure; the spread narrows as the count grows, and so do the draws.
DRAWS = {10: 20, 100: 5, 1_000: 3, 10_000: 1}
#: Counts up to which the comparisons the paper's rule 2 would save are measured.
SLEEP_COUNTS = 100


def alphabet(size: int) -> list[str]:
    return [chr(ord("a") + i) for i in range(size)]


def random_pattern(rng: random.Random, symbols: list[str]) -> Any:
    from graphcep.patterns.sequences import SequencePattern, Var

    items: list[Any] = []
    used = 0
    for _ in range(rng.randint(MIN_LEN, MAX_LEN)):
        if rng.random() < P_VAR:
            if used and rng.random() < P_REUSE:
                items.append(Var(f"x{rng.randrange(used)}"))
            else:
                items.append(Var(f"x{used}"))
                used += 1
        else:
            items.append(rng.choice(symbols))
    return SequencePattern(tuple(items))


def tree_comparisons(engine: Any) -> int:
    nodes = engine.tree.nodes.values()
    return (sum(n.kmp.comparisons for n in nodes if n.kmp is not None)
            + engine.evaluator.seed_checks)


def top_comparisons(engine: Any) -> int:
    """The comparisons of the top nodes' searches (every position, every symbol)."""
    return sum(n.kmp.comparisons for n in engine.tree.root.children)


def top_of(node: Any) -> Any:
    """The top node (a child of the root) above ``node``."""
    while node.parent is not None and node.parent.parent is not None:
        node = node.parent
    return node


def watch_sleep(engine: Any) -> dict[str, int]:
    """Count, from now on, the comparisons a top node's search makes while a node of its
    subtree holds a live alignment: the ones the paper's rule 2 saves by putting a node to
    sleep while its sons run (which misses the node's own occurrences meanwhile, so the
    engine keeps every top node awake). Wraps the engine's evaluator, for measuring only."""
    evaluator, counts = engine.evaluator, {"comparisons": 0}
    read = evaluator.read

    def counted(key: Any, symbol: Any, keep: int, entry: Any = None) -> Any:
        nodes = evaluator.tree.nodes
        busy = {top_of(nodes[nid]).nid for nid, live in key.alignments.items() if live}
        before = {n.nid: n.kmp.comparisons for n in evaluator.tree.root.children
                  if n.nid in busy}
        out = read(key, symbol, keep, entry)
        counts["comparisons"] += sum(nodes[nid].kmp.comparisons - c
                                     for nid, c in before.items())
        return out

    evaluator.read = counted
    return counts


def naive_comparisons(engine: Any) -> int:
    return sum(k.comparisons for k in engine.automata.values())


def edges_table(symbols: list[str], offset: int) -> Any:
    import pyarrow as pa

    n = len(symbols)
    return pa.table({"t": list(range(offset, offset + n)), "src": ["k"] * n, "dst": symbols})


def rows_of(table: Any) -> list[tuple]:
    return [(r["subscription"], r["start"], r["end"],
             tuple((b["var"], b["value"]) for b in r["bindings"]))
            for r in table.select(["subscription", "start", "end", "bindings"]).to_pylist()]


def feed(engine: Any, seq: list[str], start: int, stop: int) -> tuple[list[tuple], float]:
    """Push ``seq[start:stop]`` in pushes of PUSH symbols: the rows and the seconds."""
    rows: list[tuple] = []
    seconds = 0.0
    for lo in range(start, stop, PUSH):
        batch = edges_table(seq[lo:min(stop, lo + PUSH)], lo)
        t0 = time.perf_counter()
        out = engine.push(batch)
        seconds += time.perf_counter() - t0
        rows += rows_of(out)
    return rows, seconds


def draw_seed(count: int, size: int, draw: int) -> str:
    """The seed of one draw; draw 0 keeps the seed of the single-draw records."""
    return f"{SEED}-{count}-{size}" + (f"-{draw}" if draw else "")


def run_one(count: int, size: int, n_symbols: int, draw: int = 0) -> dict[str, Any]:
    """One draw: patterns, sequence, both engines on the prefix. Only draw 0 lets the
    tree read on past the prefix, for its throughput figure."""
    from graphcep.engines.sequences.engine import NaiveSequenceEngine, SequenceEngine

    rng = random.Random(draw_seed(count, size, draw))
    symbols = alphabet(size)
    patterns = {f"p{i}": random_pattern(rng, symbols) for i in range(count)}
    seq = [rng.choice(symbols) for _ in range(n_symbols)]
    prefix = min(n_symbols, max(1, NAIVE_STEPS // count))
    longer = min(n_symbols, max(prefix, TREE_STEPS // count)) if draw == 0 else prefix

    t0 = time.perf_counter()
    tree = SequenceEngine(patterns)
    build_s = time.perf_counter() - t0
    naive = NaiveSequenceEngine(patterns)
    base_tree, base_top = tree_comparisons(tree), top_comparisons(tree)
    asleep = watch_sleep(tree) if count <= SLEEP_COUNTS else None
    tree_rows, tree_s = feed(tree, seq, 0, prefix)
    tree_cmp = tree_comparisons(tree) - base_tree
    top_cmp = top_comparisons(tree) - base_top
    naive_rows, naive_s = feed(naive, seq, 0, prefix)
    naive_cmp = naive_comparisons(naive)
    if sorted(tree_rows) != sorted(naive_rows):
        raise SystemExit(f"bench.subs_fig6: notifications differ at {count} patterns, "
                         f"alphabet {size}: tree {len(tree_rows)}, naive {len(naive_rows)}")
    _, rest_s = feed(tree, seq, prefix, longer)
    stats = tree.tree.stats()
    return {
        "count": count, "alphabet": size, "draw": draw,
        "distinct": len({id(n) for n in tree.tree.subscriptions.values()}),
        "nodes": int(stats["nodes"]), "height": int(stats["height"]),
        "top": len(tree.tree.root.children), "prefix": prefix, "tree_read": longer,
        "tree_cmp": tree_cmp, "naive_cmp": naive_cmp, "ratio": tree_cmp / max(1, naive_cmp),
        "top_cmp": top_cmp, "asleep_cmp": None if asleep is None else asleep["comparisons"],
        "matches": len(naive_rows), "build_s": build_s,
        "tree_rate": longer / max(1e-9, tree_s + rest_s), "naive_rate": prefix / naive_s,
        "paper": PAPER[count],
    }


def pooled(draws: list[dict[str, Any]]) -> dict[str, Any]:
    """One (count, alphabet) cell: the draws' comparisons summed on both sides (the
    paper's "ratio between the number of comparisons for the two solutions"), the
    per-draw spread beside it; tree shape and throughput are draw 0's."""
    first, naive = draws[0], sum(d["naive_cmp"] for d in draws)
    asleep = [d["asleep_cmp"] for d in draws]
    per_draw = [d["ratio"] for d in draws]
    return {
        **first,
        "draws": len(draws),
        "tree_cmp": sum(d["tree_cmp"] for d in draws), "naive_cmp": naive,
        "ratio": sum(d["tree_cmp"] for d in draws) / max(1, naive),
        "low": min(per_draw), "high": max(per_draw),
        "at_or_below": sum(r <= first["paper"] for r in per_draw),
        "top_share": sum(d["top_cmp"] for d in draws) / max(1, naive),
        "asleep": None if None in asleep else sum(asleep) / max(1, naive),
        "matches": sum(d["matches"] for d in draws),
    }


def table_lines(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| patterns | alphabet | draws | distinct | tree nodes (height, top) | symbols "
             "compared, each draw | tree comparisons | naive comparisons | ratio tree/naive "
             "| per draw: lowest-highest | draws at or below the paper | of which top "
             "searches | of which while a son runs | paper | target | matches | tree read "
             "| tree symbols/s | naive symbols/s |",
             "|---:|---:|---:|---:|---|---:|---:|---:|---:|---|---:|---:|---:|---:|---|"
             "---:|---:|---:|---:|"]
    for r in results:
        met = "MET" if r["ratio"] <= r["paper"] else "MISSED"
        lines.append(
            f"| {r['count']:,} | {r['alphabet']} | {r['draws']} | {r['distinct']:,} | "
            f"{r['nodes']:,} ({r['height']}, {r['top']:,}) | {r['prefix']:,} | "
            f"{r['tree_cmp']:,} | {r['naive_cmp']:,} | {r['ratio']:.3f} | "
            f"{r['low']:.3f}-{r['high']:.3f} | {r['at_or_below']} of {r['draws']} | "
            f"{r['top_share']:.3f} | "
            f"{'-' if r['asleep'] is None else format(r['asleep'], '.3f')} | "
            f"{r['paper']:.2f} | "
            f"{met} | {r['matches']:,} | {r['tree_read']:,} | {r['tree_rate']:,.0f} | "
            f"{r['naive_rate']:,.0f} |")
    return lines


def load_pyplot() -> Any:
    try:
        import matplotlib
    except ImportError:
        print("bench.subs_fig6: matplotlib not importable, plot skipped")
        return None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def plot(results: list[dict[str, Any]], path: Path) -> bool:
    plt = load_pyplot()
    if plt is None:
        return False
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for size in ALPHABETS:
        rs = [r for r in results if r["alphabet"] == size]
        if rs:
            spread = [[r["ratio"] - r["low"] for r in rs], [r["high"] - r["ratio"] for r in rs]]
            ax.errorbar([r["count"] for r in rs], [r["ratio"] for r in rs], yerr=spread,
                        marker="o",
                        capsize=3, label=f"graphcep, {size} symbols (pooled; draws' range)")
    ax.plot(list(PAPER), list(PAPER.values()), linestyle="none", marker="*", markersize=13,
            color="black", label="paper (Fig. 6)")
    ax.set(xscale="log", xlabel="patterns", ylabel="comparisons: tree / independent KMP_var",
           title="Pattern tree vs independent KMP_var (du Mouza et al. 2006, Fig. 6)")
    ax.set_ylim(0, max(0.6, *(r["high"] for r in results)) * 1.1)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=80)
    plt.close(fig)
    print(f"bench.subs_fig6: plot written to {path} ({path.stat().st_size / 1024:.0f} KiB)")
    return True


def record(text: str) -> None:
    """Replace this benchmark's section of bench/RESULTS.md, or append it at the end."""
    from bench.triangles import record as record_section

    record_section(text, START_MARK, END_MARK)
    print(f"bench.subs_fig6: recorded in {RESULTS_FILE}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.subs_fig6",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--symbols", type=int, default=20_000,
                        help="length of the random sequence (default 20,000)")
    parser.add_argument("--record", action="store_true",
                        help="write bench/RESULTS.md and bench/subs_fig6.png")
    parser.add_argument("--png", type=Path, default=None,
                        help="where the plot goes (default bench/subs_fig6.png with "
                             "--record, else none)")
    parser.add_argument("--max-draws", type=int, default=0,
                        help="at most this many draws per cell (default: "
                             + ", ".join(f"{n} at {c:,}" for c, n in DRAWS.items())
                             + " patterns)")
    args = parser.parse_args(argv)
    if args.symbols < 1:
        parser.error("--symbols must be positive")
    if args.max_draws < 0:
        parser.error("--max-draws must be positive")
    sys.path.insert(0, str(ROOT / "src"))
    machine = machine_lines(("numpy",))
    results = []
    started = time.perf_counter()
    for count in COUNTS:
        for size in ALPHABETS:
            n_draws = min(DRAWS[count], args.max_draws or DRAWS[count])
            r = pooled([run_one(count, size, args.symbols, d) for d in range(n_draws)])
            results.append(r)
            print(f"{count:>6} patterns, {size:>2} symbols: ratio {r['ratio']:.3f} "
                  f"(paper {r['paper']}; {r['draws']} draw{'s' * (r['draws'] > 1)}, {r['low']:.3f}-"
                  f"{r['high']:.3f}) over {r['prefix']:,} symbols a draw; "
                  f"tree {r['tree_rate']:,.0f}/s, naive {r['naive_rate']:,.0f}/s, "
                  f"{r['matches']:,} matches, {r['nodes']:,} nodes", flush=True)
    elapsed = time.perf_counter() - started
    lines = table_lines(results)
    print("\n".join(lines))
    met = sum(r["ratio"] <= r["paper"] for r in results)
    verdict = ("MET" if met == len(results) else "MISSED") + \
        f" ({met} of {len(results)} at or below the paper's ratio)"
    print(f"target (ratio at or below the paper's at every size): {verdict}")
    png = args.png or (PNG_FILE if args.record else None)
    plotted = plot(results, png) if png else False
    if args.record:
        text = "\n".join([
            "## bench.subs_fig6: pattern tree vs independent KMP_var (SSDBM 2006, Fig. 6)",
            "",
            f"Command: `python -m bench.subs_fig6 --record --symbols {args.symbols}"
            + (f" --max-draws {args.max_draws}" if args.max_draws else "") + "` "
            f"({elapsed:.0f} s in all).",
            "",
            *machine,
            f"- load average (1 min) at the end: {os.getloadavg()[0]:.2f} (the machine is "
            "shared: symbols/s move with it, comparison counts do not)",
            "",
            f"Patterns: length uniform in {MIN_LEN}..{MAX_LEN}, each item a variable with "
            f"probability {P_VAR} (a repeat of one already in the pattern with probability "
            f"{P_REUSE}), else a uniform constant; a uniform random sequence of "
            f"{args.symbols:,} symbols on one key. \"Symbols compared\" is the prefix both "
            f"engines read for the ratio (the naive engine gets {NAIVE_STEPS:,} "
            f"pattern-symbol steps, the tree {TREE_STEPS:,}, \"tree read\" symbols); "
            "notifications identical on the prefix in every row. Symbols/s: wall clock "
            "over the symbols each engine read, notification rows included. \"Of which top "
            "searches\": the top nodes' searches (KMP_var, or the skip search where a top "
            "pattern has two constants in a row; shift-table lookups are not comparisons), "
            "over the naive comparisons; \"of which while a son runs\" (up to "
            f"{SLEEP_COUNTS} patterns): those of them made while a node below holds a live "
            "alignment, which the paper's rule 2 (a node sleeps while its sons run) would "
            "not make, at the price of the node's own occurrences meanwhile.",
            "",
            "Draws: each cell pools independent draws (a new pattern set and a new "
            "sequence each: " + ", ".join(f"{n} at {c:,} patterns" for c, n in DRAWS.items())
            + "): its ratio is the draws' tree comparisons over their naive comparisons, "
            "the paper's \"ratio between the number of comparisons for the two "
            "solutions\"; the lowest and highest single-draw ratios and the draws at or "
            "below the paper's stand beside it. Draw 0 has the seed of the earlier "
            "single-draw records; tree shape and symbols/s are draw 0's, \"matches\" "
            "sums the draws.",
            "",
            *lines,
            "",
            f"Target (ratio at or below the paper's at every size): **{verdict}**.",
            "",
            "![ratio vs patterns](subs_fig6.png)" if plotted else "(plot skipped)",
        ])
        record(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
