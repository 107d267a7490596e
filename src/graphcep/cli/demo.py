"""``graphcep demo``: every pattern language of graphcep over generated netflow, on Spark.

1. Generates a reproducible netflow stream with SAM's random-pool generator (VAST format)
   and plants attacks in it: *watering holes* -- a victim host visits a popular web site
   (the bait, TCP port 443), and shortly after that flow ends it contacts a never-seen
   controller over IRC (TCP port 6667) -- and *slow* ones, the same two flows a minute
   or so apart.
2. Writes the stream (``netflow.csv``), the same stream with service labels for DDST
   (``netflow-labelled.parquet``) and the queries it runs (``queries/``) to its workdir.
3. Runs one query of each language on embedded Spark -- SAL (the paper's temporal
   triangle and watering hole), a DDST event pattern, a timed ν-expression, pattern
   subscriptions and progressive window widening (in-process: see
   :meth:`DemoRuns.widened`) -- writes each one's matches
   (``matches/triangle.sal.jsonl``, ...) and prints one line of result and the
   ``graphcep run`` command that gives the same matches.
4. Checks each result against what it knows independently: the planted attacks, and the
   SAL triangles for the ν-expression's triangles; ends with next steps.

Decisions
---------
* The queries are the texts of files of the repository's ``examples/`` (the demo's test
  compares them), written to the workdir so that the printed commands run wherever the
  demo ran, installed or in a checkout.
* The attacks' ports make them visible to the labelled languages without touching the
  background: the planted hosts are new, so they add no triangle.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.events import US_PER_SECOND
from graphcep.io.generator import generate_netflow, write_edges
from graphcep.io.sinks import make_sink
from graphcep.lang.listings import LISTING_1

TRIANGLE_SAL = (
    "// Listing 1 of Goodman & Grunwald, \"Streaming Temporal Graphs: Subgraph Matching\"\n"
    "// (IEEE Big Data 2019): the temporal triangle query.\n" + LISTING_1)

WATERING_HOLE_SAL = """// Listing 3 of Goodman & Grunwald (IEEE Big Data 2019), the watering hole attack, with
// the top-k sized to graphcep demo's {vertices:,} hosts (Listing 3's 10,000 would hold them all).
Netflows = VastStream("localhost", 9999);
Popular = FOREACH Netflows GENERATE topk(DestIp, 100000, 10000, {vertices});
SUBGRAPH WateringHole ON Netflows WITH source(SourceIp) AND target(DestIp)
{{
    target e1 bait;
    target e2 controller;
    starttime(e2) > endtime(e1);
    starttime(e2) - endtime(e1) < 20;
    bait in Popular;
    controller not in Popular;
}}
"""

WEB_THEN_IRC_DDST = """// Netflow: a host visits a web server (tcp/web), then opens an IRC connection (tcp/irc)
// within 30 seconds -- a watering hole's victim calling its controller. Edge labels are
// protocol/port class (io.labels.service_labels).
QUERY web_then_irc;
VERTICES H, W, C;
EDGES
  visit: H -> W ["tcp/web"];
  call:  H -> C ["tcp/irc"];
ORDER visit < call;
WITHIN 30 s;
"""

TRIANGLE_NU = """// A directed triangle among three distinct hosts, all within 10 seconds:
// X -> Y, then Y -> Z, then Z -> X. #X reads a fresh host (held by no other variable).
<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]
"""

PROBES_SUBS = """# Subscriptions over each source host's sequence of destinations (graphcep run
# probes.subs --input flows.csv --key src --symbol dst) or of ports (--symbol DestPort).
# One `id: pattern` per line: constants and @variables joined by '.'; a variable binds
# one symbol per occurrence, the same variable the same symbol.
ping_pong: @a.@b.@a
back_and_forth: @a.@b.@a.@b
return_after_two: @a.@b.@c.@a
"""

WEB_THEN_IRC_SAL = """// A host visits a web server (port 443), then opens an IRC connection (port 6667),
// at any pace: no time bound, so run it with --pww L (progressive window widening).
{
    h visit w;
    h call c;
    starttime(visit) < starttime(call);
    visit.DestPort == 443;
    call.DestPort == 6667;
}
"""

VERTICES = 2_000
RATE = 1_000
ATTACKS = 5
SLOW_ATTACKS = 3
#: the fewest flows the demo generates: 100 s of them, room for the planted attacks (each
#: within 60 s of the end, none in the first tenth) and for the top-k to see the baits
MIN_EDGES = 100_000
#: the ports that make a planted flow a web visit and an IRC connection
WEB_PORT, IRC_PORT = 443, 6667
#: --pww L of the widening query: the most records an instance spans (80 s of the stream),
#: more than the slowest planted attack's
PWW_RECORDS = 80_000
#: the seconds between a slow attack's web visit and its IRC connection
SLOW_GAPS_S = (30, 60)


@dataclass(frozen=True)
class Attack:
    """A planted attack: the victim's web visit to the bait, then its IRC connection."""

    victim: str
    bait: str
    controller: str
    gap_s: int  # from the end of the visit to the start of the IRC connection


@dataclass(frozen=True)
class DemoQuery:
    """One query the demo runs: its language, file name, text and input."""

    language: str
    title: str
    file: str
    text: str
    stream: str = "netflow.csv"
    options: tuple[str, ...] = ()


def demo_queries(vertices: int = VERTICES) -> list[DemoQuery]:
    """The demo's queries, in the order it runs them."""
    return [
        DemoQuery("SAL", "temporal triangle (the paper's Listing 1)", "triangle.sal",
                  TRIANGLE_SAL),
        DemoQuery("SAL", "watering hole (the paper's Listing 3)", "watering_hole_demo.sal",
                  WATERING_HOLE_SAL.format(vertices=vertices)),
        DemoQuery("DDST", "web visit, then IRC within 30 s (event pattern)",
                  "web_then_irc.ddst", WEB_THEN_IRC_DDST, stream="netflow-labelled.parquet"),
        DemoQuery("ν-expression", "triangle among fresh hosts within 10 s", "triangle.nu",
                  TRIANGLE_NU),
        DemoQuery("subscriptions", "each host's destinations: ping-pong and returns",
                  "probes.subs", PROBES_SUBS),
        DemoQuery("window widening", "web visit, then IRC, at any pace",
                  "web_then_irc_any_pace.sal", WEB_THEN_IRC_SAL,
                  options=("--pww", str(PWW_RECORDS), "--engine", "local")),
    ]


def demo_stream(edges: int, seed: int = 7) -> tuple[pa.Table, list[Attack], list[Attack]]:
    """Background netflow plus planted attacks: (table, watering holes, slow attacks).

    Each planted flow copies a background flow's attributes, with its protocol TCP and
    its destination port :data:`WEB_PORT` (the visit) or :data:`IRC_PORT` (the call)."""
    background = generate_netflow(edges, VERTICES, RATE, seed)
    rng = np.random.default_rng(seed)
    span = int(pc.max(background.column("t")).as_py())
    rows = rng.choice(background.num_rows, 2 * ATTACKS, replace=False)
    starts = np.sort(rng.integers(span // 10, span - 60 * US_PER_SECOND, ATTACKS))
    fast = [_attack(rng, f"victim{i}", f"c2-{i}", int(rng.integers(1, 19)))
            for i in range(ATTACKS)]
    slow_rows = rng.choice(background.num_rows, 2 * SLOW_ATTACKS, replace=False)
    slow_starts = np.sort(rng.integers(span // 10, span - (SLOW_GAPS_S[1] + 5) * US_PER_SECOND,
                                       SLOW_ATTACKS))
    slow = [_attack(rng, f"slow-victim{i}", f"slow-c2-{i}", int(rng.integers(*SLOW_GAPS_S)))
            for i in range(SLOW_ATTACKS)]
    planted = [_planted_flows(background.take(pa.array(r)), s, a, rng)
               for r, s, a in ((rows, starts, fast), (slow_rows, slow_starts, slow))]
    table = pa.concat_tables([background, *planted]).sort_by([("t", "ascending"),
                                                              ("seq", "ascending")])
    table = table.set_column(4, "seq", pa.array(np.arange(1, table.num_rows + 1), pa.int64()))
    return table, fast, slow


def _attack(rng: np.random.Generator, victim: str, controller: str, gap_s: int) -> Attack:
    return Attack(victim, f"node{rng.integers(VERTICES)}", controller, gap_s)


def _planted_flows(rows: pa.Table, starts: np.ndarray, attacks: list[Attack],
                   rng: np.random.Generator) -> pa.Table:
    """Two flows per attack over copies of background ``rows``: the visit at its start,
    the call ``gap_s`` after the visit ends."""
    t, src, dst, dur = [], [], [], []
    for start, attack in zip(starts, attacks, strict=True):
        visit_dur = int(rng.integers(1, 5)) * US_PER_SECOND
        t += [int(start), int(start) + visit_dur + attack.gap_s * US_PER_SECOND]
        src += [attack.victim, attack.victim]
        dst += [attack.bait, attack.controller]
        dur += [visit_dur, US_PER_SECOND]
    protocol = rows.schema.field("IpLayerProtocolCode").type
    return (rows.set_column(0, "t", pa.array(t, pa.int64()))
            .set_column(1, "src", pa.array(src))
            .set_column(2, "dst", pa.array(dst))
            .set_column(3, "dur", pa.array(dur, pa.int64()))
            .set_column(rows.schema.get_field_index("IpLayerProtocol"), "IpLayerProtocol",
                        pa.array([6] * len(t), rows.schema.field("IpLayerProtocol").type))
            .set_column(rows.schema.get_field_index("IpLayerProtocolCode"),
                        "IpLayerProtocolCode", pa.array(["tcp"] * len(t), protocol))
            .set_column(rows.schema.get_field_index("DestPort"), "DestPort",
                        pa.array([WEB_PORT, IRC_PORT] * len(attacks),
                                 rows.schema.field("DestPort").type)))


def run_demo(edges: int, master: str, workdir: Path) -> int:
    """The demo: 0 when every check holds, 1 when one fails (each says which)."""
    from graphcep import jobs
    from graphcep.interrupts import exit_on_interrupt
    from graphcep.runtime.spark import spark_session

    queries = demo_queries()
    paths = _write_queries(workdir, queries)
    loaded = {q.file: jobs.load(str(paths[q.file]), _job_options(q)) for q in queries}
    with ThreadPoolExecutor(1) as pool:  # numba loads (or, the first time, compiles)
        kernels = pool.submit(_load_kernels, list(loaded.values()))  # them meanwhile
        table, fast, slow = demo_stream(edges)
        write_edges(table, workdir / "netflow.csv", "vast")
        write_edges(_labelled(table), workdir / "netflow-labelled.parquet")
        print(f"generated {table.num_rows:,} netflows over {VERTICES:,} hosts at {RATE:,}/s, "
              f"with {ATTACKS} planted watering holes and {SLOW_ATTACKS} slow attacks "
              f"-> {workdir / 'netflow.csv'}")
        started = time.perf_counter()
        spark = spark_session(master)
        exit_on_interrupt(f"the generated stream stays in {workdir / 'netflow.csv'}")
        print(f"Spark {spark.version} on {master} started in "
              f"{time.perf_counter() - started:.1f} s")
        kernels.result()  # its error, if any, here
    runs = DemoRuns(spark, workdir)
    checks: dict[str, bool] = {}
    for query in queries:
        matches, seconds = runs.run(query, loaded[query.file])
        line, ok = RESULTS[query.file](matches, fast, slow, runs.results)
        if ok is not None:
            checks[query.file] = ok
        print(f"\n{query.language}: {query.title}\n  {line} ({seconds:.1f} s)\n"
              f"  run it yourself: {run_command(query, workdir)}")
    failed = [name for name, ok in checks.items() if not ok]
    lines, rejected = runs.lines_and_rejects()
    print(f"\nsummary: {lines:,} lines read, {rejected:,} rejected; "
          f"{len(checks) - len(failed)}/{len(checks)} results as planted or cross-checked"
          + (f" (not: {', '.join(failed)})" if failed else ""))
    _print_next_steps(workdir)
    return 1 if failed else 0


def _write_queries(workdir: Path, queries: list[DemoQuery]) -> dict[str, Path]:
    (workdir / "queries").mkdir(parents=True, exist_ok=True)
    (workdir / "matches").mkdir(exist_ok=True)
    paths = {q.file: workdir / "queries" / q.file for q in queries}
    for query in queries:
        paths[query.file].write_text(query.text, encoding="utf-8")
    return paths


def _job_options(query: DemoQuery) -> dict[str, Any]:
    """What ``graphcep run`` gives :func:`graphcep.jobs.load` for the query's command."""
    return {"fmt": "parquet" if query.stream.endswith(".parquet") else "vast",
            "pww": "--pww" in query.options}


def _load_kernels(loaded: list[Any]) -> None:
    from graphcep.engines.kernel_cache import lean_cache_loads

    lean_cache_loads()
    for job in loaded:
        job.prepare()


def _labelled(table: pa.Table) -> pa.Table:
    from graphcep.io.labels import service_labels

    return service_labels(table)


def run_command(query: DemoQuery, workdir: Path) -> str:
    """The ``graphcep run`` command that gives the query's matches."""
    return " ".join(["graphcep", "run", str(workdir / "queries" / query.file), "--input",
                     str(workdir / query.stream), *query.options])


class DemoRuns:
    """Runs the demo's queries on Spark over its two streams, each read once, and writes
    each one's matches to ``matches/QUERY-FILE.jsonl`` (``matches/triangle.nu.jsonl``)."""

    def __init__(self, spark: Any, workdir: Path) -> None:
        self.spark = spark
        self.workdir = workdir
        self.frames: dict[str, Any] = {}
        self.results: dict[str, pa.Table] = {}
        self.read: dict[str, tuple[int, Any]] = {}

    def frame(self, stream: str) -> Any:
        """The stream as ``graphcep run`` reads it, once: a Parquet file in the driver (an
        Arrow table), a text file as a cached Spark frame."""
        from graphcep.io.readers import read_edges
        from graphcep.runtime.spark import read_edges_spark

        if stream not in self.frames and stream.endswith(".parquet"):
            self.frames[stream] = read_edges(str(self.workdir / stream), "parquet").edges
        elif stream not in self.frames:
            edges_df, rejects_df, lines = read_edges_spark(self.spark, self.workdir / stream,
                                                           "vast")
            self.frames[stream] = edges_df.cache()
            self.read[stream] = (lines, rejects_df)
        return self.frames[stream]

    def lines_and_rejects(self, stream: str = "netflow.csv") -> tuple[int, int]:
        """The lines read from the stream and those rejected (counted at the end: the
        count reads the file once more, the matching reads the cached frame)."""
        lines, rejects_df = self.read[stream]
        return lines, rejects_df.count()

    def run(self, query: DemoQuery, job: Any) -> tuple[pa.Table, float]:
        """The query's matches and the seconds they took; written as JSONL."""
        from graphcep.runtime.spark import run_spark
        from graphcep.runtime.widening.report import widened_format

        started = time.perf_counter()
        output = job.output
        if "--pww" in query.options:
            matches = self.widened(query, job)
            output = widened_format(output)
        else:
            matches, _ = run_spark(self.spark, job, self.frame(query.stream))
        seconds = time.perf_counter() - started
        with make_sink(self.workdir / "matches" / f"{query.file}.jsonl",
                       matches=output, whole=True) as sink:
            sink.write(matches)
        self.results[query.file] = matches
        return matches, seconds

    def widened(self, query: DemoQuery, job: Any) -> pa.Table:
        """``--pww``: the windows detected in this process (``--engine local``): on Spark
        every window of every level would travel to the tasks: over 2 GB here, which Spark
        refuses to serialize."""
        from graphcep.io.readers import read_edges
        from graphcep.runtime.widening import run_widening

        edges = read_edges(str(self.workdir / query.stream), "vast").edges
        matches, _ = run_widening(job, edges, keep=PWW_RECORDS, base_us=US_PER_SECOND)
        return matches


# -- what each result says, checked against what the demo knows -------------------------

#: A query's result line, and whether it is what the demo knows independently (None: no
#: such knowledge, as for random background)
Result = tuple[str, bool | None]


def _sources(matches: pa.Table) -> set[str]:
    """The hosts a match record's first edge starts from."""
    return {edges[0]["src"] for edges in matches.column("edges").to_pylist()}


def _triangle_result(matches, fast, slow, results) -> Result:
    return f"{matches.num_rows:,} temporal triangles, each within 10 s", None


def _watering_hole_result(matches, fast, slow, results) -> Result:
    hits = {(b["target"], b["bait"], b["controller"])
            for b in (dict(m) for m in matches.column("bindings").to_pylist())}
    found = [a for a in fast if (a.victim, a.bait, a.controller) in hits]
    others = len(hits - {(a.victim, a.bait, a.controller) for a in fast})
    return (f"{matches.num_rows:,} matches: {len(found)}/{len(fast)} planted watering holes, "
            f"and {others:,} other matches (a popular host, then a rare one, within 20 s)",
            len(found) == len(fast))


def _ddst_result(matches, fast, slow, results) -> Result:
    victims = _sources(matches)
    found = [a for a in fast if a.victim in victims]
    return (f"{matches.num_rows:,} matches, from {len(victims):,} hosts: {len(found)}/"
            f"{len(fast)} watering-hole victims (the slow attacks wait longer than 30 s)",
            len(found) == len(fast))


def _nu_result(matches, fast, slow, results) -> Result:
    sal = results["triangle.sal"]

    def ends_and_hosts(table: pa.Table, names: tuple[str, str, str]) -> set[tuple]:
        return {(m["first_t"], m["last_t"], *(dict(m["bindings"])[n] for n in names))
                for m in table.select(["first_t", "last_t", "bindings"]).to_pylist()}

    same = ends_and_hosts(matches, ("X", "Y", "Z")) == ends_and_hosts(sal, ("x1", "x2", "x3"))
    said = ("the SAL triangles, each once per hosts and end times" if same else
            "NOT the SAL triangles' hosts and end times")
    return f"{matches.num_rows:,} matches: {said}", same


def _subs_result(matches, fast, slow, results) -> Result:
    counts = Counter(matches.column("subscription").to_pylist())
    ids = [line.split(":")[0] for line in PROBES_SUBS.splitlines()
           if line and not line.startswith("#")]
    return (f"{matches.num_rows:,} notifications over each host's destinations: "
            + ", ".join(f"{i} {counts[i]:,}" for i in ids), None)


def _pww_result(matches, fast, slow, results) -> Result:
    victims = _sources(matches)
    found = [a for a in (*fast, *slow) if a.victim in victims]
    gaps = [a.gap_s for a in slow]
    return (f"{matches.num_rows:,} instances, of at most {PWW_RECORDS:,} records: "
            f"{len(found)}/{len(fast) + len(slow)} planted attacks, the {len(slow)} slow ones "
            f"({min(gaps)} s to {max(gaps)} s from visit to call) among them",
            len(found) == len(fast) + len(slow))


#: How each query's matches are summed up and checked, by query file.
RESULTS: dict[str, Callable[..., Result]] = {
    "triangle.sal": _triangle_result,
    "watering_hole_demo.sal": _watering_hole_result,
    "web_then_irc.ddst": _ddst_result,
    "triangle.nu": _nu_result,
    "probes.subs": _subs_result,
    "web_then_irc_any_pace.sal": _pww_result,
}


def _print_next_steps(workdir: Path) -> None:
    matches = workdir / "matches"
    print("\nnext steps:\n"
          f"  graphcep explain {workdir / 'queries' / 'triangle.sal'}       "
          "the plan of a query\n"
          f"  graphcep draw {matches / 'triangle.sal.jsonl'} --first 3 -o {workdir / 'pictures'}"
          "   pictures of matches\n"
          f"  graphcep run {workdir / 'queries' / 'triangle.sal'} --input "
          f"{workdir / 'netflow.csv'} --report {workdir / 'report.html'}   a one-page report\n"
          "  graphcep run --help        every option, grouped by query kind\n"
          "  README.md, \"Which language for which question\": the languages, with examples")
