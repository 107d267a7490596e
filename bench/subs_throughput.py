"""Pattern subscriptions: wall-clock throughput with 10,000 and 100,000 subscriptions,
graphcep's engines side by side with Aho-Corasick and Python ``re``, and the latency of
subscribing and unsubscribing while 10,000 subscriptions are live.

Workload (ours; the paper gives none for wall clock). Subscriptions: length uniform in
4..12; with probability 0.7 a pattern holds one to three distinct variables (uniform),
each occurring once or twice at random places, at most half the items being variables;
the other items, and every item of the other 30 %, are constants drawn uniformly from the
alphabet (``--alphabet``, default 256 symbols, written as numbers like ports). The
stream: ``--symbols`` (default 1,000,000) edges, ``src`` uniform over ``--keys`` keys
(default 100), ``dst`` (the symbol) uniform over the alphabet; subscriptions read the
default ``--key src --symbol dst``. Into this uniform stream ``--planted`` (default
20,000) occurrences of randomly chosen subscriptions are written, each at a random place
of a random key's sequence with its variables valued at random, so that notifications
occur (a uniform stream over 256 symbols holds almost none). Seeds fixed.

Methods, per subscription count (the same stream and subscriptions):

- **graphcep** (the default engine, ``CompiledSequenceEngine``): the whole stream pushed
  in batches of ``--batch`` edges (default 10,000), notification rows built (Arrow);
  symbols/s = edges / wall seconds of the pushes (the engine built beforehand, its build
  time reported apart);
- **tree** (``SequenceEngine``, the paper's pattern tree) and **naive** (one KMP_var per
  subscription, ``NaiveSequenceEngine``): too slow for the whole stream, so each reads a
  prefix, in batches, until ``--budget`` seconds (default 20) have passed; their
  notifications must equal graphcep's on that prefix, row for row (a fresh graphcep engine
  reads the same prefix);
- **pyahocorasick** (``ahocorasick.Automaton`` over integer symbol sequences) on the
  variable-free subscriptions only, each key's sequence searched whole; its time is the
  search alone (the keys grouped and the symbols numbered beforehand, untimed); graphcep reads the same stream with the same subset, side
  by side, and their occurrences must be equal (subscription, key, start). Aho-Corasick
  returns ``(end, value)`` pairs, no notification rows: its count is what is compared;
- **re**: every pattern as one alternative of a single compiled regular expression
  (constants as characters, a variable as a named group ``(.)``, its repeats as
  ``(?P=name)``), inside a lookahead so that ``finditer`` tries every position of each
  key's sequence (symbols encoded one character each). It reports *one* alternative per
  position (the first that matches), not every subscription, so it is a lower bound on
  the work of the real task; it reads stretches of each key's sequence (16 symbols, then
  48, 192, ...) until ``--budget`` seconds; every position it reports must start a
  graphcep notification.

Latency: with the ``--live`` (default 10,000) subscriptions and the stream read (keys and
their recent edges held; measured right after graphcep's pass, after a garbage
collection), ``--changes`` (default 2,000) new subscriptions of the same
kind are added one at a time, then as many live ones removed, each timed apart in wall
clock (``perf_counter``) and in the thread's CPU time (``thread_time``: a change during
which the process was descheduled, on a shared machine, keeps its own cost); p50, p99 and
the maximum of every add and of every remove, and the garbage-collector passes that fell
inside changes. Nothing is rebuilt: a change edits the trie in place, and its arrays grow
a few rows per change (``graphcep/engines/sequences/trie_arrays.py``). The same for the
tree engine with ``--tree-changes`` (default 200) changes.

Targets (the project's): at least 1,000,000 symbols/s with 10,000 subscriptions on one
core; at least 20 times naive; identical notifications; subscribe and unsubscribe at most
1 ms *each* (the maximum over every change, not a percentile) with 10,000 live, no
rebuild.

    python -m bench.subs_throughput [--record] [--counts 10000,100000] [--symbols N]
"""

from __future__ import annotations

import argparse
import gc
import os
import random
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from bench.nu_paper import machine_lines

ROOT = Path(__file__).resolve().parent.parent
START_MARK = "<!-- bench.subs_throughput:start -->"
END_MARK = "<!-- bench.subs_throughput:end -->"
MIN_LEN, MAX_LEN, P_VARIABLES = 4, 12, 0.7
SEED = 2006
TARGET_RATE, TARGET_NAIVE, TARGET_MS = 1_000_000, 20.0, 1.0


# -- workload ------------------------------------------------------------------------------


def random_pattern(rng: random.Random, alphabet: int) -> Any:
    from graphcep.patterns.sequences import SequencePattern, Var

    length = rng.randint(MIN_LEN, MAX_LEN)
    items: list[Any] = [str(rng.randrange(alphabet)) for _ in range(length)]
    if rng.random() < P_VARIABLES:
        names = [f"v{i}" for i in range(rng.randint(1, 3))]
        occurrences = [n for n in names for _ in range(rng.randint(1, 2))]
        places = rng.sample(range(length), min(length // 2, len(occurrences)))
        for place, name in zip(sorted(places), occurrences, strict=False):
            items[place] = Var(name)
    return SequencePattern(tuple(items))


def subscriptions(count: int, alphabet: int, seed: int = SEED) -> dict[str, Any]:
    rng = random.Random(f"{seed}-{count}-{alphabet}")
    return {f"s{i}": random_pattern(rng, alphabet) for i in range(count)}


def stream(symbols: int, keys: int, alphabet: int, patterns: dict[str, Any],
           planted: int) -> Any:
    """Uniform keys and symbols, then ``planted`` occurrences of random subscriptions
    written over them (each at a random place of a random key's sequence, its variables
    valued at random; a later one may overwrite an earlier one)."""
    import pyarrow as pa

    rng = np.random.default_rng(SEED)
    key = rng.integers(0, keys, symbols)
    sym = rng.integers(0, alphabet, symbols)
    order = np.argsort(key, kind="stable")
    cuts = np.searchsorted(key[order], np.arange(keys + 1))
    chosen = rng.integers(0, len(patterns), planted)
    hosts = rng.integers(0, keys, planted)
    items = list(patterns.values())
    for which, k in zip(chosen.tolist(), hosts.tolist(), strict=True):
        where = order[cuts[k]:cuts[k + 1]]
        p = items[which]
        if len(where) < len(p):
            continue
        at = int(rng.integers(0, len(where) - len(p) + 1))
        values = {name: int(rng.integers(0, alphabet)) for name in p.variables()}
        sym[where[at:at + len(p)]] = [int(i) if isinstance(i, str) else values[i.name]
                                      for i in p.items]
    key_text = np.array([f"h{i}" for i in range(keys)], dtype=object)
    sym_text = np.array([str(i) for i in range(alphabet)], dtype=object)
    return pa.table({"t": np.arange(symbols, dtype=np.int64), "src": key_text[key],
                     "dst": sym_text[sym], "seq": np.arange(symbols, dtype=np.int64)})


# -- measuring -----------------------------------------------------------------------------


def feed(engine: Any, edges: Any, batch: int, budget: float | None = None
         ) -> tuple[list[Any], float, int]:
    """Push ``edges`` in batches (until ``budget`` seconds when given): the outputs, the
    wall seconds spent in pushes and the edges read."""
    outs, seconds, read = [], 0.0, 0
    for lo in range(0, edges.num_rows, batch):
        part = edges.slice(lo, batch)
        t0 = time.perf_counter()
        outs.append(engine.push(part))
        seconds += time.perf_counter() - t0
        read += part.num_rows
        if budget is not None and seconds >= budget:
            break
    return outs, seconds, read


def feed_timed(engine: Any, edges: Any, batch: int) -> tuple[list[Any], float, float]:
    """:func:`feed` of every edge: the outputs, wall seconds and CPU seconds (this
    process's, which other processes on a shared machine do not inflate)."""
    cpu = time.process_time()
    outs, seconds, _ = feed(engine, edges, batch)
    return outs, seconds, time.process_time() - cpu


def rows(outs: list[Any]) -> list[dict]:
    return sorted((r for out in outs for r in out.to_pylist()), key=lambda r: r["match_id"])


def graphcep_engine(patterns: dict[str, Any], name: str = "compiled") -> tuple[Any, float]:
    from graphcep.jobs.sequences import ENGINES

    module, cls = ENGINES[name]
    engine_class = getattr(__import__(module, fromlist=[cls]), cls)
    t0 = time.perf_counter()
    engine = engine_class(patterns)
    return engine, time.perf_counter() - t0


def sampled(name: str, patterns: dict[str, Any], edges: Any, budget: float,
            batch: int) -> dict[str, Any]:
    """A slow engine on a prefix, checked against graphcep on the same prefix."""
    engine, build = graphcep_engine(patterns, name)
    outs, seconds, read = feed(engine, edges, batch, budget)
    fast, _ = graphcep_engine(patterns)
    expected, _, _ = feed(fast, edges.slice(0, read), batch)
    got, want = rows(outs), rows(expected)
    if got != want:
        raise SystemExit(f"bench.subs_throughput: {name} and graphcep differ on the first "
                         f"{read:,} symbols ({len(got):,} vs {len(want):,} notifications)")
    return {"rate": read / seconds, "read": read, "build_s": build, "matches": len(got),
            "state": engine}


def by_key(edges: Any, intern: dict[str, int]) -> dict[str, np.ndarray]:
    """Each key's symbols in stream order, numbered by ``intern`` (new ones added)."""
    import pyarrow.compute as pc

    keys = np.asarray(edges.column("src").to_numpy(zero_copy_only=False))
    encoded = pc.dictionary_encode(edges.column("dst").combine_chunks())
    numbers = np.array([intern.setdefault(s, len(intern))
                        for s in encoded.dictionary.to_pylist()], dtype=np.int64)
    syms = numbers[encoded.indices.to_numpy()]
    order = np.argsort(keys, kind="stable")
    keys, syms = keys[order], syms[order]
    cuts = np.flatnonzero(keys[1:] != keys[:-1]) + 1
    return {str(ks[0]): s for ks, s in zip(np.split(keys, cuts), np.split(syms, cuts),
                                           strict=True)}


def aho_corasick(patterns: dict[str, Any], edges: Any, batch: int) -> dict[str, Any] | str:
    """pyahocorasick on the variable-free subscriptions, beside graphcep on the same."""
    try:
        import ahocorasick
    except ImportError:
        return "pyahocorasick is not installed (pip install pyahocorasick): skipped"
    literal = {sid: p for sid, p in patterns.items() if not p.variables()}
    symbols = {s: i for i, s in enumerate(sorted({c for p in literal.values() for c in p.items}))}
    automaton = ahocorasick.Automaton(ahocorasick.STORE_ANY, ahocorasick.KEY_SEQUENCE)
    words: dict[tuple, list[str]] = {}
    for sid, p in literal.items():
        words.setdefault(tuple(symbols[c] for c in p.items), []).append(sid)
    for word, sids in words.items():
        automaton.add_word(word, (len(word), sids))
    automaton.make_automaton()
    sequences = {key: tuple(seq.tolist()) for key, seq in by_key(edges, symbols).items()}
    t0 = time.perf_counter()  # the search alone: keys grouped and symbols numbered before
    found = []
    for key, seq in sequences.items():
        for end, (length, sids) in automaton.iter(seq):
            found += [(sid, key, end - length + 1) for sid in sids]
    seconds = time.perf_counter() - t0
    engine, _ = graphcep_engine(literal)
    outs, g_seconds, _ = feed(engine, edges, batch)
    mine = sorted((r["subscription"], r["key"], r["start"]) for out in outs
                  for r in out.select(["subscription", "key", "start"]).to_pylist())
    if sorted(found) != mine:
        raise SystemExit(f"bench.subs_throughput: Aho-Corasick and graphcep differ on the "
                         f"variable-free subset ({len(found):,} vs {len(mine):,})")
    return {"patterns": len(literal), "rate": edges.num_rows / seconds,
            "graphcep_rate": edges.num_rows / g_seconds, "matches": len(found)}


def regex(patterns: dict[str, Any], edges: Any, budget: float,
          graphcep_starts: set[tuple[str, int]]) -> dict[str, Any]:
    """One alternation of every pattern, with back-references, over each key's prefix."""
    symbols: dict[str, int] = {}
    alternatives = []
    group = 0
    for p in patterns.values():
        names: dict[str, str] = {}
        parts = []
        for item in p.items:
            if isinstance(item, str):
                parts.append(re.escape(chr(0x100 + symbols.setdefault(item, len(symbols)))))
            elif item.name in names:
                parts.append(f"(?P={names[item.name]})")
            else:
                group += 1
                names[item.name] = f"g{group}"
                parts.append(f"(?P<g{group}>.)")
        alternatives.append("".join(parts))
    t0 = time.perf_counter()
    compiled = re.compile("(?=(?:" + "|".join(alternatives) + "))", re.DOTALL)
    compile_s = time.perf_counter() - t0
    texts = {k: "".join(chr(0x100 + int(s)) for s in seq)
             for k, seq in by_key(edges, symbols).items()}
    longest = max(map(len, texts.values()))
    seconds, read, found = 0.0, 0, 0
    lo, hi = 0, 16
    while seconds < budget and lo < longest:
        # each key's next stretch (16 symbols, then 48, 192, ...) until the budget is
        # spent; a lookahead sees only its stretch, so re may miss what spans two
        for key, text in texts.items():
            t0 = time.perf_counter()
            starts = [lo + m.start() for m in compiled.finditer(text[lo:hi])]
            seconds += time.perf_counter() - t0
            read, found = read + len(text[lo:hi]), found + len(starts)
            missing = [s for s in starts if (key, s) not in graphcep_starts]
            if missing:
                raise SystemExit(f"bench.subs_throughput: re finds {key} at {missing[0]}, "
                                 "where graphcep reports nothing")
            if seconds >= budget:
                break
        lo, hi = hi, 4 * hi
    return {"rate": read / seconds, "read": read, "compile_s": compile_s, "matches": found}


def latency(engine: Any, alphabet: int, changes: int) -> dict[str, float]:
    """Milliseconds per add, then per remove, of ``changes`` subscriptions: wall clock and
    this thread's CPU time (which the other processes of a shared machine do not
    inflate), and how many collections of the cyclic garbage collector fell inside."""
    rng = random.Random(f"{SEED}-changes")
    engine.add("warm-up", random_pattern(rng, alphabet))  # compiled code loaded, untimed
    engine.remove("warm-up")
    gc.collect()  # no pause for garbage of earlier steps inside the timings
    new = {f"new{i}": random_pattern(rng, alphabet) for i in range(changes)}
    passes: list[int] = []
    gc.callbacks.append(collected := lambda phase, info: passes.append(info["generation"])
                        if phase == "start" else None)
    timed: dict[str, list[tuple[float, float, int]]] = {"add": [], "remove": []}
    try:
        for op, sid, p in [*(("add", sid, p) for sid, p in new.items()),
                           *(("remove", sid, None)
                             for sid in rng.sample(sorted(engine.patterns), changes))]:
            seen = len(passes)
            c0, t0 = time.thread_time(), time.perf_counter()
            engine.add(sid, p) if op == "add" else engine.remove(sid)
            wall, cpu = time.perf_counter() - t0, time.thread_time() - c0
            timed[op].append((wall, cpu, len(passes) - seen))
    finally:
        gc.callbacks.remove(collected)
    out = {}
    for name, rows in timed.items():
        ms = np.array([(w, c) for w, c, _ in rows]) * 1e3
        inside = np.array([g for *_, g in rows])
        out |= {f"{name}_p50": float(np.percentile(ms[:, 0], 50)),
                f"{name}_p99": float(np.percentile(ms[:, 0], 99)),
                f"{name}_max": float(ms[:, 0].max()), f"{name}_cpu_max": float(ms[:, 1].max()),
                f"{name}_over": int((ms[:, 0] > TARGET_MS).sum()),
                f"{name}_cpu_over": int((ms[:, 1] > TARGET_MS).sum()),
                f"{name}_gc": int(inside.sum()),
                f"{name}_gc_over": int(((ms[:, 1] > TARGET_MS) & (inside > 0)).sum()),
                f"{name}_n": len(ms)}
    return out


# -- one count -----------------------------------------------------------------------------


def run_count(count: int, args: argparse.Namespace) -> dict[str, Any]:
    patterns = subscriptions(count, args.alphabet)
    edges = stream(args.symbols, args.keys, args.alphabet, patterns, args.planted)
    engine, build = graphcep_engine(patterns)
    feed(engine, edges.slice(0, 100), 100)  # compiled code loaded from numba's cache
    engine, build = graphcep_engine(patterns)
    outs, seconds, cpu = feed_timed(engine, edges, args.batch)
    read = edges.num_rows
    notes = [r for out in outs for r in out.select(["subscription", "key", "start"]).to_pylist()]
    result: dict[str, Any] = {
        "count": count, "variable_free": sum(not p.variables() for p in patterns.values()),
        "rate": read / seconds, "cpu_rate": read / cpu, "read": read, "build_s": build,
        "matches": len(notes), "trie_nodes": engine.trie.live_nodes()}
    print(f"{count:>7,} subscriptions: graphcep {result['rate']:,.0f} symbols/s "
          f"({result['cpu_rate']:,.0f} per CPU second; {len(notes):,} notifications, "
          f"built in {build:.1f} s)", flush=True)
    if count == args.live:
        result["latency"] = latency(engine, args.alphabet, args.changes)
        print(f"    latency: {result['latency']}", flush=True)
    del engine, outs
    for name in ("naive", "tree"):
        if name in args.skip:
            continue
        r = sampled(name, patterns, edges, args.budget, args.slow_batch)
        result[name] = {k: v for k, v in r.items() if k != "state"}
        print(f"    {name}: {r['rate']:,.1f} symbols/s over {r['read']:,} symbols "
              f"(built in {r['build_s']:.1f} s), notifications identical", flush=True)
        if name == "tree" and count == args.live:
            result["tree_latency"] = latency(r["state"], args.alphabet, args.tree_changes)
        del r
    if "aho" not in args.skip:
        result["aho"] = aho_corasick(patterns, edges, args.batch)
        print(f"    pyahocorasick: {result['aho']}", flush=True)
    if "re" not in args.skip:
        starts = {(n["key"], n["start"]) for n in notes}
        result["re"] = regex(patterns, edges, args.budget, starts)
        print(f"    re: {result['re']}", flush=True)
    return result


# -- report --------------------------------------------------------------------------------


def verdict(ok: bool) -> str:
    return "MET" if ok else "MISSED"


def rate_table(results: list[dict[str, Any]]) -> list[str]:
    lines = ["| subscriptions | method | symbols read | symbols/s | graphcep / method "
             "| notifications | notes |", "|---:|---|---:|---:|---:|---:|---|"]
    for r in results:
        n = f"{r['count']:,}"
        lines.append(f"| {n} | **graphcep** (compiled trie, default) | {r['read']:,} | "
                     f"{r['rate']:,.0f} | 1 | {r['matches']:,} | {r['cpu_rate']:,.0f} per "
                     f"CPU second; built in {r['build_s']:.1f} s; {r['trie_nodes']:,} trie "
                     "nodes |")
        for name, label in (("tree", "pattern tree (paper)"), ("naive", "naive KMP_var")):
            if name in r:
                s = r[name]
                lines.append(f"| {n} | {label} | {s['read']:,} (prefix) | {s['rate']:,.1f} | "
                             f"{r['rate'] / s['rate']:,.0f} | {s['matches']:,} | built in "
                             f"{s['build_s']:.1f} s; identical to graphcep's on the prefix |")
        aho = r.get("aho")
        if isinstance(aho, dict):
            lines.append(f"| {n} | pyahocorasick, variable-free subset ({aho['patterns']:,}) | "
                         f"all | {aho['rate']:,.0f} | {aho['graphcep_rate'] / aho['rate']:.2f} "
                         f"| {aho['matches']:,} | graphcep on the same subset: "
                         f"{aho['graphcep_rate']:,.0f} symbols/s, same occurrences; "
                         "Aho-Corasick builds no rows |")
        elif aho:
            lines.append(f"| {n} | pyahocorasick | - | - | - | - | {aho} |")
        rx = r.get("re")
        if rx:
            lines.append(f"| {n} | Python re, one alternation | {rx['read']:,} (prefix) | "
                         f"{rx['rate']:,.1f} | {r['rate'] / rx['rate']:,.0f} | "
                         f"{rx['matches']:,} positions | compiled in {rx['compile_s']:.1f} s; "
                         "one alternative per position, a lower bound on the task |")
    return lines


def latency_lines(r: dict[str, Any]) -> list[str]:
    lines = ["| engine | operation | changes | p50 ms | p99 ms | max ms | max CPU ms "
             "| over 1 ms | over 1 ms CPU | gc passes inside |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for label, key in (("graphcep (compiled)", "latency"), ("pattern tree", "tree_latency")):
        if key in r:
            lat = r[key]
            for op in ("add", "remove"):
                lines.append(f"| {label} | {op} | {lat[f'{op}_n']:,} | {lat[f'{op}_p50']:.3f} "
                             f"| {lat[f'{op}_p99']:.3f} | {lat[f'{op}_max']:.3f} | "
                             f"{lat[f'{op}_cpu_max']:.3f} | {lat[f'{op}_over']:,} | "
                             f"{lat[f'{op}_cpu_over']:,} | {lat[f'{op}_gc']:,} |")
    return lines


def targets(results: list[dict[str, Any]], live: int) -> list[str]:
    at = next((r for r in results if r["count"] == live), None)
    if at is None:
        return [f"(no run with {live:,} subscriptions: targets not checked)"]
    lines = [f"- >= 1,000,000 symbols/s with {live:,} subscriptions, one core: "
             f"**{verdict(at['rate'] >= TARGET_RATE)}** in wall clock ({at['rate']:,.0f}), "
             f"**{verdict(at['cpu_rate'] >= TARGET_RATE)}** per CPU second "
             f"({at['cpu_rate']:,.0f})"]
    if "naive" in at:
        ratio = at["rate"] / at["naive"]["rate"]
        lines.append(f"- >= 20x naive: **{verdict(ratio >= TARGET_NAIVE)}** ({ratio:,.0f}x)")
    lines.append("- identical notifications: **MET** (checked row for row against the tree "
                 "and naive engines on their prefixes, occurrence for occurrence against "
                 "Aho-Corasick on the variable-free subset; the run stops on a difference)")
    if "latency" in at:
        lat = at["latency"]
        total = lat["add_n"] + lat["remove_n"]
        wall = max(lat["add_max"], lat["remove_max"])
        cpu = max(lat["add_cpu_max"], lat["remove_cpu_max"])
        over = lat["add_over"] + lat["remove_over"]
        cpu_over = lat["add_cpu_over"] + lat["remove_cpu_over"]
        gc_over = lat["add_gc_over"] + lat["remove_gc_over"]
        lines.append(f"- subscribe and unsubscribe <= 1 ms each with {live:,} live, no rebuild "
                     f"(every one of {total:,} changes, max): **{verdict(cpu <= TARGET_MS)}** "
                     f"in CPU time (max {cpu:.3f} ms; {cpu_over} over 1 ms, {gc_over} of them "
                     f"holding a garbage-collector pass), **{verdict(wall <= TARGET_MS)}** in "
                     f"wall clock (max {wall:.3f} ms; {over} over 1 ms; p99 add / remove "
                     f"{lat['add_p99']:.3f} / {lat['remove_p99']:.3f} ms)")
    return lines


def record(text: str) -> None:
    from bench.triangles import record as record_section

    record_section(text, START_MARK, END_MARK)
    print("bench.subs_throughput: recorded in bench/RESULTS.md")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.subs_throughput",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--counts", default="10000,100000",
                        help="subscription counts, comma-separated (default 10000,100000)")
    parser.add_argument("--symbols", type=int, default=1_000_000)
    parser.add_argument("--keys", type=int, default=100)
    parser.add_argument("--alphabet", type=int, default=256)
    parser.add_argument("--planted", type=int, default=20_000,
                        help="occurrences of random subscriptions written into the stream")
    parser.add_argument("--batch", type=int, default=10_000, help="edges per push")
    parser.add_argument("--slow-batch", type=int, default=50,
                        help="edges per push for the tree and naive engines (default 50)")
    parser.add_argument("--budget", type=float, default=20.0,
                        help="seconds each sampled method reads for (default 20)")
    parser.add_argument("--live", type=int, default=10_000,
                        help="the count whose run measures latency and targets")
    parser.add_argument("--changes", type=int, default=2_000)
    parser.add_argument("--tree-changes", type=int, default=200)
    parser.add_argument("--skip", default="", help="comma-separated: naive,tree,aho,re")
    parser.add_argument("--record", action="store_true", help="write bench/RESULTS.md")
    args = parser.parse_args(argv)
    try:
        args.counts = [int(c) for c in args.counts.split(",")]
    except ValueError:
        parser.error("--counts takes integers separated by commas")
    if min([args.symbols, args.keys, args.alphabet, args.batch, *args.counts]) < 1:
        parser.error("counts, --symbols, --keys, --alphabet and --batch must be positive")
    args.skip = {s for s in args.skip.split(",") if s}
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    sys.path.insert(0, str(ROOT / "src"))
    machine = machine_lines(("numpy", "pyarrow", "numba", "pyahocorasick"))
    started = time.perf_counter()
    results = [run_count(count, args) for count in args.counts]
    load = os.getloadavg()[0]
    lines = [*rate_table(results), "", *(latency_lines(results[[r["count"] for r in results]
                                                                .index(args.live)])
                                         if args.live in args.counts else [])]
    print("\n".join(lines))
    goals = targets(results, args.live)
    print("\n".join(goals))
    if args.record:
        command = " ".join(["python -m bench.subs_throughput", *(argv if argv is not None
                                                                 else sys.argv[1:])])
        record("\n".join([
            "## bench.subs_throughput: subscriptions, wall-clock throughput and latency",
            "",
            f"Command: `{command}` ({time.perf_counter() - started:.0f} s in all).",
            "",
            *machine,
            f"- load average (1 min) at the end: {load:.2f} (the machine is shared)",
            "",
            f"Workload: subscriptions of length {MIN_LEN}..{MAX_LEN}, {P_VARIABLES:.0%} with "
            "one to three variables (each occurring once or twice, at most half the items), "
            f"constants uniform over {args.alphabet} symbols; a stream of {args.symbols:,} "
            f"edges, keys uniform over {args.keys}, symbols uniform, {args.planted:,} "
            "occurrences of random subscriptions written in. graphcep pushes "
            f"{args.batch:,} edges at a time and builds every notification row; the tree "
            f"and naive engines read a prefix for {args.budget:.0f} s in pushes of "
            f"{args.slow_batch}, their rows compared with graphcep's on it; `re` reads a "
            "prefix of each key. One process, one thread.",
            "",
            *lines,
            "",
            "Targets:",
            "",
            *goals,
        ]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
