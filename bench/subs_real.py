"""Pattern subscriptions on real keyed data: 1,000 subscriptions over per-source-host
destination-port sequences (CTU-13 netflow) and per-user action sequences
(sx-mathoverflow), in-process and on Spark ``local[2]``, side by side in one run.

Data (``/work/shared/data``, each with its SOURCE.md):

- **ctu13**: ``ctu13-scenario1-netflow-vast-format/CTU1SampleAsVast.csv`` read as
  ``vast`` (32,048 flows); key ``src`` (the source IP), symbol ``DestPort`` — what
  ``graphcep subscribe SUBS --input FILE --key src --symbol DestPort`` reads.
- **mathoverflow**: the three typed files of ``snap-sx-mathoverflow`` (``a2q`` answer to a
  question, ``c2q`` comment on a question, ``c2a`` comment on an answer), each read as
  ``snap``, given an ``action`` column (its type, suffixed ``_self`` when the user acts
  on a post of their own: a self-loop), merged in time order and numbered (``seq``); the
  first ``--prefix`` edges (default 200,000 of 506,550) in time order; key ``src`` (the
  acting user), symbol ``action`` (six symbols).

Subscriptions (``--subs``, default 1,000 per dataset; seeds fixed): written as the text
of a ``.subs`` file and parsed by the subscriptions parser. Length uniform in 3..8; each
pattern holds one to three distinct variables (uniform), each occurring once or twice at
random places, at most half the items being variables; every other item is a constant
drawn uniformly from the data's ``--top`` (default 32) most frequent symbols: for CTU-13
the 32 most frequent destination ports (53 and 13363 alone are 71 % of the flows), for
mathoverflow all six actions. (Drawing constants in proportion to their frequency
instead makes patterns such as ``53.53.@x.53`` that match almost every DNS-heavy
host's position: 25 notifications per flow on CTU-13, a bench of notification rows.)

Methods, per dataset (the same edges and subscriptions):

- **in-process, compiled** (the default engine): :func:`graphcep.runtime.local.run_job`,
  what ``graphcep subscribe`` runs in-process, timed after one untimed warm-up run;
- **in-process, tree** (the paper's pattern tree): the engine pushed batches of
  ``--slow-batch`` edges of the same stream order until ``--budget`` seconds (default
  20), a prefix; its notifications must equal those of the compiled engine on that
  prefix;
- **Spark local[2]**: :func:`graphcep.runtime.spark.run_spark` (what ``graphcep subscribe
  --engine spark`` runs: partitioned by the key, each partition replayed in one
  engine) over the edges as a cached Spark DataFrame; the best of ``--spark-repeat``
  timed runs after a warm-up; its notifications must equal in-process's, row for row
  (every column, edges and bindings included).

Edges/s and symbols/s are the same figure (one symbol per edge of a keyed sequence);
edges without a key or symbol would be read but belong to no sequence (none here).

    python -m bench.subs_real [--record] [--datasets ctu13,mathoverflow] [--prefix N]
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench.nu_paper import machine_lines

ROOT = Path(__file__).resolve().parent.parent
DATA = Path("/work/shared/data")
START_MARK, END_MARK = "<!-- bench.subs_real:start -->", "<!-- bench.subs_real:end -->"
MIN_LEN, MAX_LEN = 3, 8
SEED = 2006
CTU = DATA / "ctu13-scenario1-netflow-vast-format" / "CTU1SampleAsVast.csv"
MATHOVERFLOW = DATA / "snap-sx-mathoverflow"
ACTIONS = ("a2q", "c2q", "c2a")


# -- data ----------------------------------------------------------------------------------


def ctu13(_prefix: int) -> tuple[Any, str, str]:
    """The CTU-13 flows as read by the ``vast`` reader: (edges, key, symbol)."""
    from graphcep.io.readers import read_edges

    return read_edges([str(CTU)], "vast").edges, "src", "DestPort"


def mathoverflow(prefix: int) -> tuple[Any, str, str]:
    """The three typed mathoverflow files, an ``action`` column each, merged in time
    order, the first ``prefix`` edges: (edges, key, symbol)."""
    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc

    from graphcep.io.readers import read_edges

    parts = []
    for action in ACTIONS:
        edges = read_edges([str(MATHOVERFLOW / f"sx-mathoverflow-{action}.txt.gz")],
                           "snap").edges.select(["t", "src", "dst", "seq"])
        own = pc.equal(edges.column("src"), edges.column("dst"))
        symbol = pc.if_else(own, pa.scalar(f"{action}_self"), pa.scalar(action))
        parts.append(edges.append_column("action", symbol))
    merged = pa.concat_tables(parts)
    # time order; ties in file order, then line order (a stable sort of the concatenation)
    merged = merged.take(pc.sort_indices(merged, [("t", "ascending")])).slice(0, prefix)
    merged = merged.set_column(merged.column_names.index("seq"), "seq",
                               pa.array(np.arange(merged.num_rows, dtype=np.int64)))
    return merged.combine_chunks(), "src", "action"


DATASETS = {"ctu13": ctu13, "mathoverflow": mathoverflow}


# -- subscriptions -------------------------------------------------------------------------


def symbol_weights(edges: Any, symbol: str) -> tuple[list[str], list[int]]:
    """The data's symbols (as text) and their frequencies, most frequent first."""
    counts = Counter(str(v) for v in edges.column(symbol).to_pylist() if v is not None)
    ranked = counts.most_common()
    return [s for s, _ in ranked], [c for _, c in ranked]


def quoted(symbol: str) -> str:
    return symbol if symbol.replace("_", "").isalnum() else '"' + symbol + '"'


def subscriptions_text(count: int, symbols: list[str], seed: str) -> str:
    """``count`` subscriptions over ``symbols`` (the constants drawn uniformly from
    them) as the text of a ``.subs`` file (module docstring)."""
    rng = random.Random(seed)
    lines = []
    for i in range(count):
        length = rng.randint(MIN_LEN, MAX_LEN)
        items = [quoted(s) for s in rng.choices(symbols, k=length)]
        names = [f"v{j}" for j in range(rng.randint(1, 3))]
        occurrences = [n for n in names for _ in range(rng.randint(1, 2))]
        places = rng.sample(range(length), min(length // 2, len(occurrences)))
        for place, name in zip(sorted(places), occurrences, strict=False):
            items[place] = "@" + name
        lines.append(f"s{i}: {'.'.join(items)}")
    return "\n".join(lines) + "\n"


# -- runs ----------------------------------------------------------------------------------


def sorted_rows(table: Any) -> list[dict]:
    return sorted(table.to_pylist(), key=lambda r: r["match_id"])


def in_process(job: Any, edges: Any) -> tuple[Any, float]:
    """``run_job`` of the whole stream (after an untimed warm-up run): matches, seconds."""
    from graphcep.runtime.local import run_job

    run_job(job, edges.slice(0, 1000))
    t0 = time.perf_counter()
    matches, _ = run_job(job, edges)
    return matches, time.perf_counter() - t0


def tree_prefix(job: Any, edges: Any, budget: float, batch: int) -> dict[str, Any]:
    """The pattern-tree engine on a prefix of the stream, checked against compiled."""
    from dataclasses import replace

    import pyarrow as pa

    from graphcep.events import normalize_edges, sort_stream
    from graphcep.runtime.local import run_job

    ordered = sort_stream(normalize_edges(job.orient(edges)))
    engine = replace(job, engine="tree").new_engine()
    outs, seconds, read = [], 0.0, 0
    for lo in range(0, ordered.num_rows, batch):
        part = ordered.slice(lo, batch)
        t0 = time.perf_counter()
        outs.append(engine.push(part))
        seconds += time.perf_counter() - t0
        read += part.num_rows
        if seconds >= budget:
            break
    got = sorted_rows(pa.concat_tables(outs))
    want = sorted_rows(run_job(job, ordered.slice(0, read))[0])
    if got != want:
        raise SystemExit(f"bench.subs_real: tree and compiled differ on the first {read:,} "
                         f"edges ({len(got):,} vs {len(want):,} notifications)")
    return {"read": read, "seconds": seconds, "matches": len(got)}


def on_spark(spark: Any, job: Any, edges: Any, repeat: int) -> tuple[Any, float, int]:
    """``run_spark`` over the edges as a cached DataFrame: matches, best seconds of
    ``repeat`` timed runs after a warm-up, partitions."""
    from graphcep.runtime.spark import run_spark

    needed = job.needed_columns(edges.column_names)  # what a projected read gives
    frame = spark.createDataFrame(edges.select(needed).to_pandas()).cache()
    frame.count()
    matches, _ = run_spark(spark, job, frame)
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        matches, _ = run_spark(spark, job, frame)
        best = min(best, time.perf_counter() - t0)
    partitions = frame.rdd.getNumPartitions()
    frame.unpersist()
    return matches, best, partitions


def run_dataset(name: str, args: argparse.Namespace, spark: Any) -> dict[str, Any]:
    from graphcep.jobs.sequences import SubscriptionJob
    from graphcep.lang.sequences import parse_subscriptions

    edges, key, symbol = DATASETS[name](args.prefix)
    symbols, weights = symbol_weights(edges, symbol)
    text = subscriptions_text(args.subs, symbols[:args.top], f"{SEED}-{name}")
    job = SubscriptionJob(parse_subscriptions(text), key=key, symbol=symbol)
    keys = edges.column(key).unique()
    result: dict[str, Any] = {
        "name": name, "edges": edges.num_rows, "keys": len(keys), "symbols": len(symbols),
        "key": key, "symbol": symbol,
        "top": list(zip(symbols[:5], weights[:5], strict=False)),
        "subs": args.subs, "example": text.splitlines()[:3]}
    matches, seconds = in_process(job, edges)
    result |= {"local_s": seconds, "matches": matches.num_rows}
    print(f"{name}: {edges.num_rows:,} edges, {len(keys):,} keys, {len(symbols):,} symbols; "
          f"in-process {edges.num_rows / seconds:,.0f} edges/s, {matches.num_rows:,} "
          "notifications", flush=True)
    if "tree" not in args.skip:
        result["tree"] = tree_prefix(job, edges, args.budget, args.slow_batch)
        print(f"    tree: {result['tree']}", flush=True)
    if spark is not None:
        spark_matches, spark_s, parts = on_spark(spark, job, edges, args.spark_repeat)
        if sorted_rows(spark_matches) != sorted_rows(matches):
            raise SystemExit(f"bench.subs_real: Spark and in-process differ on {name} "
                             f"({spark_matches.num_rows:,} vs {matches.num_rows:,})")
        result |= {"spark_s": spark_s, "partitions": parts}
        print(f"    spark local[2]: {edges.num_rows / spark_s:,.0f} edges/s, identical",
              flush=True)
    return result


# -- report --------------------------------------------------------------------------------


def table(results: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    lines = ["| data | edges (= symbols) | keys | distinct symbols | method | edges read | "
             "seconds | edges/s | notifications | notifications/s | notes |",
             "|---|---:|---:|---:|---|---:|---:|---:|---:|---:|---|"]
    for r in results:
        head = f"| {r['name']} | {r['edges']:,} | {r['keys']:,} | {r['symbols']:,} |"
        lines.append(f"{head} in-process, compiled (default) | {r['edges']:,} | "
                     f"{r['local_s']:.2f} | {r['edges'] / r['local_s']:,.0f} | "
                     f"{r['matches']:,} | {r['matches'] / r['local_s']:,.0f} | `run_job`, one thread |")
        if "tree" in r:
            t = r["tree"]
            part = "all" if t["read"] == r["edges"] else "prefix"
            lines.append(f"{head} in-process, pattern tree (paper) | {t['read']:,} ({part}) "
                         f"| {t['seconds']:.2f} | {t['read'] / t['seconds']:,.0f} | "
                         f"{t['matches']:,} | {t['matches'] / t['seconds']:,.0f} | identical to compiled on "
                         "the prefix |")
        if "spark_s" in r:
            lines.append(f"{head} Spark local[2], compiled | {r['edges']:,} | "
                         f"{r['spark_s']:.2f} | {r['edges'] / r['spark_s']:,.0f} | "
                         f"{r['matches']:,} | {r['matches'] / r['spark_s']:,.0f} | `run_spark`, best of "
                         f"{args.spark_repeat} timed runs after a warm-up, "
                         f"{r['partitions']} input partitions; identical to in-process, "
                         "row for row |")
    return lines


def workload(results: list[dict[str, Any]], args: argparse.Namespace) -> list[str]:
    lines = []
    for r in results:
        top = ", ".join(f"{s} ({c:,})" for s, c in r["top"])
        lines.append(f"- {r['name']}: key `{r['key']}`, symbol `{r['symbol']}`; most "
                     f"frequent symbols {top}; first subscriptions: "
                     + "; ".join(f"`{e}`" for e in r["example"]))
    return lines


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.subs_real",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--datasets", default="ctu13,mathoverflow")
    parser.add_argument("--subs", type=int, default=1000, help="subscriptions per dataset")
    parser.add_argument("--top", type=int, default=32,
                        help="constants drawn from this many most frequent symbols")
    parser.add_argument("--prefix", type=int, default=200_000,
                        help="mathoverflow: edges read, in time order (default 200,000)")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds the tree engine reads for (default 20)")
    parser.add_argument("--slow-batch", type=int, default=200)
    parser.add_argument("--spark-repeat", type=int, default=2)
    parser.add_argument("--skip", default="", help="comma-separated: tree,spark")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    args.skip = {s for s in args.skip.split(",") if s}
    names = [d for d in args.datasets.split(",") if d]
    unknown = [d for d in names if d not in DATASETS]
    if unknown or min(args.subs, args.prefix, args.top) < 1:
        parser.error(f"datasets are {', '.join(DATASETS)}; --subs, --prefix and --top "
                     "must be positive")
    sys.path.insert(0, str(ROOT / "src"))
    machine = machine_lines(("numpy", "pyarrow", "numba", "pyspark"))
    started = time.perf_counter()
    spark = None
    if "spark" not in args.skip:
        from graphcep.runtime.spark import spark_session

        spark = spark_session("local[2]")
    results = [run_dataset(name, args, spark) for name in names]
    if spark is not None:
        spark.stop()
    load = os.getloadavg()[0]
    lines = table(results, args)
    print("\n".join(lines))
    if args.record:
        from bench.triangles import record

        command = " ".join(["python -m bench.subs_real",
                            *(argv if argv is not None else sys.argv[1:])])
        record("\n".join([
            "## bench.subs_real: subscriptions on real keyed data, in-process and Spark",
            "",
            f"Command: `{command}` ({time.perf_counter() - started:.0f} s in all).", "",
            *machine,
            f"- load average (1 min) at the end: {load:.2f} (the machine is shared)", "",
            f"Data: CTU-13 scenario 1 netflows (all {results[0]['edges']:,} flows when "
            "ctu13 runs), per source IP the sequence of destination ports; sx-mathoverflow, "
            f"the first {args.prefix:,} interactions in time order, per user the sequence "
            "of actions (a2q, c2q, c2a, each `_self` on the user's own post). "
            f"{args.subs:,} subscriptions per dataset, length {MIN_LEN}..{MAX_LEN}, one to "
            "three variables (each once or twice, at most half the items), constants drawn "
            f"uniformly from the data's {args.top} most frequent symbols. The tree reads a "
            f"prefix for {args.budget:.0f} s in pushes of {args.slow_batch}.", "",
            *workload(results, args), "",
            *lines,
        ]), START_MARK, END_MARK)
        print("bench.subs_real: recorded in bench/RESULTS.md")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
