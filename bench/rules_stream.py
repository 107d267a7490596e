"""``graphcep stream --rules`` as a stream: the twenty mixed rules at offered rates.

Stream: the generator source (``--source generator``: Spark's ``rate-micro-batch`` source,
one micro-batch a second) with S1's shape -- 5,000 hosts, 10,000 flows per second of event
time, seed 1 -- offered at increasing rates of wall time. Rules: the twenty of
:mod:`bench.rules` (5 of each kind), watched in their directory, in the driver's streaming
operator (:class:`~graphcep.runtime.streaming.driver.StreamOperator`, lateness 0), as
``graphcep stream --rules DIR --source generator --rate R`` runs them on ``--master``
(default ``local[2]``).

Each rate runs ``--seconds`` after a warm-up run; the rates stop rising after the first
that is not sustained. As :mod:`bench.stream_modes` measures a stream: *sustained* edges/s
after the first quarter of the run, counted when the latency stays bounded (p99 at most
2 s and at least 90 % of the rate matched: Karimov et al., ICDE 2018); the *latency* of a
match is the wall time its part was written less when its last edge's micro-batch was due
on Spark's one-second trigger grid (a match's last edge is the generator's row
``last_t * 10,000 / 10**6``). A stream's matches are not checked here:
``tests/jobs/test_rules.py`` checks every rule kind's live matches against batch runs,
and :mod:`bench.rules` each rule's count against its own run.

Target: the twenty rules sustain >= 100,000 edges/s at p99 <= 2 s.

``--checkpoints`` also runs the operator alone in this process over S1's 200,000 edges
in batches of 10,000: without a checkpoint (also with an engine per rule, as twenty rules
of twenty different queries would run: the bench's are four queries at five bounds, and
rules that differ only in a bound share one engine), with every engine snapshotted each
batch, and with each batch's edges logged (the default), then a restart replaying that
log.

Run: ``python -m bench.rules_stream [--rates 10000,20000,...] [--seconds 20]
[--checkpoints]``; prints markdown tables (bench/RESULTS.md keeps the figures).
"""

from __future__ import annotations

import argparse
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pyarrow as pa

from bench.nu import machine_lines
from bench.rules import write_rules
from bench.stream_modes import MAX_P99_S, _Latencies, _Progress, measured

HOSTS, EVENT_RATE, TARGET = 5_000, 10_000, 100_000


class _RuleLatencies(_Latencies):
    """:class:`bench.stream_modes._Latencies` for the rules' envelope: a match's last edge
    is the generator's row at its ``last_t`` (row ``i`` is at ``i / EVENT_RATE`` s)."""

    def write(self, table: pa.Table, batch_id: int | None = None) -> None:
        import time

        now = time.time()
        last = table.column("last_t").to_numpy() * EVENT_RATE // 1_000_000
        self.samples.extend((now, int(row)) for row in last)


def run_rate(spark, folder: Path, work: Path, rate: int, seconds: float) -> dict:
    """The rules at one offered rate: sustained edges/s, p50/p99 latency (s), matches."""
    from graphcep.jobs import rules
    from graphcep.runtime.streaming.driver import StreamOperator
    from graphcep.runtime.streaming.query import start_stream
    from graphcep.runtime.streaming.sources import GeneratorSource

    job = rules.load(str(folder), {}, strict=False).live(None, False)
    source = GeneratorSource(HOSTS, rate, seed=1, event_rate=EVENT_RATE)
    sink, progress = _RuleLatencies(), _Progress()
    operator = StreamOperator(job, lateness_us=0, checkpoint=work, sink=sink,
                              watch=job.watch(str(folder)))
    query = start_stream(spark, operator, source, checkpoint=work, on_report=progress,
                         trigger_seconds=source.interval())
    return {**measured(query, source, sink, progress, rate, seconds, operator),
            "matches": len(sink.samples)}


def warm_kernels(folder: Path, edges: pa.Table | None = None) -> None:
    """Run the rules once over ``edges`` (default: S1's first 10,000) in this process:
    their kernels compile (a fresh checkout has no numba cache) or load before a
    measurement, not in its first micro-batches."""
    from graphcep.io.generator import generate_netflow
    from graphcep.jobs import rules
    from graphcep.runtime.streaming.driver import StreamOperator

    if edges is None:
        edges = generate_netflow(10_000, HOSTS, EVENT_RATE, seed=1)
    job = rules.load(str(folder), {}, strict=False).live(None, False)
    StreamOperator(job, lateness_us=0, on_matches=lambda m, b: None).process(0, edges)


@contextmanager
def engine_per_rule(wanted: bool = True) -> Iterator[None]:
    """Rules loaded within it each run an engine of their own (no shared_form): what
    twenty rules of twenty different queries would cost, where the bench's are four
    queries at five bounds each (the ν and SAL ones then share two engines)."""
    from graphcep.jobs.nu import NuJob
    from graphcep.jobs.subgraph import SubgraphJob

    saved = NuJob.shared_form, SubgraphJob.shared_form
    if wanted:
        NuJob.shared_form = SubgraphJob.shared_form = lambda self: None
    try:
        yield
    finally:
        NuJob.shared_form, SubgraphJob.shared_form = saved


def _operator_row(folder: Path, stream: pa.Table, name: str, options: dict,
                  batch: int) -> str:
    """One row of :func:`checkpoint_costs`: the operator with ``options`` over
    ``stream``, then (with a checkpoint that logs edges) a restart from it."""
    import time

    from graphcep.jobs import rules
    from graphcep.runtime.streaming.driver import StreamOperator

    edges = stream.num_rows
    job = rules.load(str(folder), {}, strict=False).live(None, False)

    def operator() -> StreamOperator:
        return StreamOperator(job, lateness_us=0, watch=job.watch(str(folder)),
                              on_matches=lambda m, b: None, **options)

    op, started = operator(), time.perf_counter()
    for number, first in enumerate(range(0, edges, batch)):
        op.process(number, stream.slice(first, batch))
    seconds = time.perf_counter() - started
    restart = "-"
    if "snapshot_interval" not in options and options:
        started = time.perf_counter()
        operator().resume()
        restart = f"{time.perf_counter() - started:.2f}"
    return (f"| {name} | {edges:,} | {edges // batch} | {seconds:.2f} | "
            f"{edges / seconds:,.0f} | {restart} |")


def checkpoint_costs(folder: Path, work: Path, edges: int = 200_000,
                     batch: int = 10_000) -> list[str]:
    """The operator alone, in this process, over S1's first ``edges`` edges in batches of
    ``batch``: without a checkpoint (also with an engine per rule: :func:`engine_per_rule`),
    snapshotting every engine each batch, and logging each batch's edges (the default);
    then a restart replaying the log. Table rows."""
    from graphcep.io.generator import generate_netflow

    stream = generate_netflow(edges, HOSTS, EVENT_RATE, seed=1).select(
        ["t", "src", "dst", "dur", "seq"])
    rows = []
    warm_kernels(folder, stream.slice(0, batch))
    for name, options in (("none", {}), ("none, an engine per rule", {}),
                          ("a snapshot every batch", {"checkpoint": work / "every",
                                                      "snapshot_interval": 0}),
                          ("the batches' edges (default)", {"checkpoint": work / "log"})):
        with engine_per_rule(name.endswith("an engine per rule")):
            rows.append(_operator_row(folder, stream, name, options, batch))
        print(rows[-1], flush=True)
    return rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.rules_stream",
                                     description=__doc__.split("\n")[0])
    parser.add_argument("--master", default="local[2]")
    parser.add_argument("--rates", default="10000,20000,30000,50000,100000")
    parser.add_argument("--seconds", type=float, default=20.0, help="per offered rate")
    parser.add_argument("--checkpoints", action="store_true",
                        help="also the operator alone in process: what its checkpoint costs")
    args = parser.parse_args(argv)
    from graphcep.runtime.spark import spark_session

    header = machine_lines("python -m bench.rules_stream " + " ".join(argv or []))
    work = Path(tempfile.mkdtemp(prefix="rules-stream-"))
    folder = work / "rules"
    folder.mkdir()
    write_rules(folder)
    costs = checkpoint_costs(folder, work) if args.checkpoints else []
    rates = [int(r) for r in args.rates.split(",") if r.strip()]  # none: --checkpoints only
    spark = spark_session(args.master, shuffle_partitions=2) if rates else None
    if rates:
        warm_kernels(folder)
        run_rate(spark, folder, work / "warm", 5_000, 8)
    rows, best = [], 0.0
    for rate in rates:
        got = run_rate(spark, folder, work / f"rate-{rate}", rate, args.seconds)
        rows.append(f"| {args.master} | {rate:,} | {got['sustained']:,.0f} | "
                    f"{'yes' if got['ok'] else 'no'} | {got['p50']:.2f} | {got['p99']:.2f} | "
                    f"{got['matches']:,} |")
        if not got["ok"]:
            break
        best = max(best, got["sustained"])
    print("\n".join(header))
    print(f"- 20 rules (5 of each kind, bench.rules), generator {HOSTS:,} hosts, "
          f"{EVENT_RATE:,} edges per event second, {args.seconds:g} s per rate\n")
    print("| master | offered edges/s | sustained edges/s | sustained? | p50 s | p99 s | "
          "matches |")
    print("|---|---:|---:|---|---:|---:|---:|")
    print("\n".join(rows))
    if costs:
        print("\nThe operator alone, in process (S1, checkpoint kinds; restart: replaying "
              "the log since the first snapshot):\n")
        print("| checkpoint | edges | batches | seconds | edges/s | restart s |")
        print("|---|---:|---:|---:|---:|---:|")
        print("\n".join(costs))
    verdict = "MET" if best >= TARGET else "NOT MET"
    print(f"\nTarget (>= {TARGET:,} edges/s at p99 <= {MAX_P99_S:g} s): {verdict} "
          f"(highest rate sustained: {best:,.0f} edges/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
