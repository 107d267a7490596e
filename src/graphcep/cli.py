"""The ``graphcep`` command.

::

    graphcep demo                                   generate netflow, run the paper's queries on Spark
    graphcep run QUERY.sal --input PATH [options]   all matches of a query over a stream
    graphcep run QUERY.ddst --input PATH [options]  the same for a DDST event pattern
    graphcep explain QUERY.sal|QUERY.ddst           parsed query, derived extent, plan
    graphcep stream QUERY.sal --source … --checkpoint DIR   continuous matching (Spark streaming)
    graphcep gen netflow --edges N ... --output F   reproducible synthetic netflow
"""

from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from graphcep.engines.base import StateBoundError
from graphcep.engines.ddst_baseline import REPORT_MODES
from graphcep.engines.difference_bounds import UnboundedQueryError, UnsatisfiableQueryError
from graphcep.engines.subgraph_plan import compile_query
from graphcep.events import format_seconds, seconds_to_us
from graphcep.io.formats import LINE_FORMATS, ReaderOptions
from graphcep.io.readers import InputError, guess_format, read_edges
from graphcep.io.rejects import RejectLog
from graphcep.io.sinks import make_sink
from graphcep.lang.ddst import parse_ddst_file
from graphcep.lang.errors import SalSyntaxError
from graphcep.lang.sal import parse_file
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.job import DDST_ENGINES, DEFAULT_DDST_ENGINE, DDSTJob, Job, ReplayJob
from graphcep.runtime.local import RunStats, run_job
from graphcep.stream_command import add_parser as add_stream_parser

FORMATS = (*LINE_FORMATS, "parquet")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        return args.handler(args)
    except (SalSyntaxError, QueryError, UnboundedQueryError, UnsatisfiableQueryError) as err:
        print(f"graphcep: {err}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, InputError) as err:
        print(f"graphcep: {err}", file=sys.stderr)
        return 2
    except StateBoundError as err:  # the input is fine; the bound it needs is higher
        print(f"graphcep: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print("graphcep: interrupted", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (``graphcep run ... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 141  # as a process ended by SIGPIPE
    except Exception as err:
        message = remote_state_bound(err)
        if message is None:
            raise
        print(f"graphcep: {message}", file=sys.stderr)
        return 3


_REMOTE_BOUND = re.compile(r"StateBoundError: ([^\n]+)")


def remote_state_bound(err: BaseException) -> str | None:
    """The message of a state bound hit inside a Spark task, else None. Spark re-raises a
    task's error on the driver as its own exception type, the task's traceback as text."""
    if not type(err).__module__.startswith(("pyspark", "py4j")):
        return None
    match = _REMOTE_BOUND.search(str(err))
    return match.group(1).strip() if match else None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="graphcep",
        description="Online pattern matching over streaming temporal graphs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="find every match of a SAL or DDST query in a stream")
    run.add_argument("query", help="SAL file, or DDST file (.ddst, or text starting QUERY/VERTICES)")
    run.add_argument("--input", "-i", required=True, nargs="+", help="edge file(s) or directory")
    run.add_argument("--format", "-f", choices=FORMATS, help="input format (default: from the name)")
    run.add_argument("--output", "-o", help="matches.jsonl, matches.parquet, matches.dot "
                                            "(Graphviz) or - (console, default)")
    run.add_argument("--engine", choices=("spark", "local"), default="spark",
                     help="spark (default; embedded local[*] unless --master) or in-process")
    run.add_argument("--master", default="local[*]", help="Spark master (local[*], spark://host:7077)")
    run.add_argument("--query-name", help="which SUBGRAPH of the program (default: the first)")
    run.add_argument("--window", type=str, help="extent in seconds for queries without an upper bound")
    run.add_argument("--max-duration", type=str,
                     help="longest edge duration in seconds (default: the longest in the input)")
    run.add_argument("--homomorphic", action="store_true",
                     help="let query vertices share stream vertices (SAM's behaviour)")
    run.add_argument("--time-unit", choices=("s", "ms", "us"), help="unit of numeric times (default s)")
    run.add_argument("--rejects", default="rejects.jsonl", help="where malformed lines go")
    run.add_argument("--shards", type=int, help="number of time shards (Spark)")
    run.add_argument("--limit", type=int, default=20, help="matches printed on the console")
    run.add_argument("--summary", choices=("text", "json"), default="text")
    add_ddst_arguments(run)
    add_state_bound_argument(run)
    run.set_defaults(handler=cmd_run)

    explain = sub.add_parser("explain", help="show the parsed query, its extent and plan")
    explain.add_argument("query", help="SAL or DDST file")
    add_ddst_arguments(explain)
    add_state_bound_argument(explain)
    explain.add_argument("--query-name")
    explain.add_argument("--window", type=str)
    explain.add_argument("--max-duration", type=str)
    explain.set_defaults(handler=cmd_explain)

    gen = sub.add_parser("gen", help="generate synthetic streams")
    gen_sub = gen.add_subparsers(dest="kind", required=True)
    netflow = gen_sub.add_parser("netflow", help="SAM's random-pool netflow generator")
    netflow.add_argument("--edges", type=int, required=True)
    netflow.add_argument("--vertices", type=int, required=True)
    netflow.add_argument("--rate", type=str, default="1000", help="edges per second")
    netflow.add_argument("--seed", type=int, default=0)
    netflow.add_argument("--output", "-o", required=True)
    netflow.add_argument("--format", choices=("vast", "snap", "csv", "jsonl", "parquet"))
    netflow.set_defaults(handler=cmd_gen_netflow)

    add_stream_parser(sub)

    demo = sub.add_parser("demo", help="generate netflow and run the paper's queries on Spark")
    demo.add_argument("--edges", type=int, default=200_000)
    demo.add_argument("--master", default="local[*]")
    demo.add_argument("--workdir", default="demo-output")
    demo.set_defaults(handler=cmd_demo)
    return parser


# -- run --------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    fmt = args.format or guess_format(_first_file(args.input))
    job = _make_job(args, fmt)
    options = ReaderOptions(time_unit=args.time_unit)
    rejects = RejectLog(args.rejects)
    if args.engine == "local":
        matches, stats, lines = _run_local(job, args.input, fmt, options, rejects)
    else:
        matches, stats, lines = _run_spark(job, args, fmt, options, rejects)
    with make_sink(args.output, limit=args.limit, matches=job.output) as sink:
        sink.write(matches)
    if rejects.count:
        rejects.write()
    stats.seconds = time.perf_counter() - started
    _print_summary(args, job, stats, lines, rejects)
    return 0


_COMMENT = re.compile(r"//[^\n]*|#[^\n]*|/\*.*?\*/", re.DOTALL)
#: How DDST text starts once comments are gone: its first statement, not a SAL assignment.
_DDST_START = re.compile(r"\s*(?:QUERY|VERTICES)\b(?!\s*=)", re.IGNORECASE)


def _is_ddst(path: str) -> bool:
    """A DDST query file: named ``.ddst``, or text that starts like one."""
    if Path(path).suffix.lower() == ".ddst":
        return True
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return False  # the SAL parser reports the missing file
    return bool(_DDST_START.match(_COMMENT.sub(" ", text)))


def add_state_bound_argument(parser: argparse.ArgumentParser) -> None:
    """The engines' state bound (``run``, ``explain`` and ``stream``; SAL and DDST)."""
    parser.add_argument("--max-window-edges", type=int, metavar="N",
                        help="state bound: most edges an engine may hold at once (a SAL "
                             "engine: its window plus the batch being matched); past it the "
                             "run stops with exit status 3 and a message (default: SAL "
                             "50000000, DDST 1000000)")


def add_ddst_arguments(parser: argparse.ArgumentParser) -> None:
    """The DDST engine and its options (``run``, ``explain`` and ``stream``)."""
    parser.add_argument("--ddst-engine", choices=tuple(DDST_ENGINES),
                        default=DEFAULT_DDST_ENGINE,
                        help=f"algorithm for DDST queries (default {DEFAULT_DDST_ENGINE}; all "
                             "three report the same matches)")
    parser.add_argument("--signature-p", type=int, metavar="P",
                        help="signature engine: the prime modulus of its label values "
                             "(default 997; smaller: fewer words, more verifications)")
    parser.add_argument("--signature-seed", type=int, metavar="S",
                        help="signature engine: seed of its random label values (default 0)")
    parser.add_argument("--ddst-report", choices=REPORT_MODES, default=REPORT_MODES[0],
                        help="what a report holds: the whole match component (default), or "
                             "only its pairs no earlier report held")


def state_bound(args: argparse.Namespace) -> int | None:
    """``--max-window-edges``, checked (None: the engine's default)."""
    bound = getattr(args, "max_window_edges", None)
    if bound is not None and bound < 1:
        raise QueryError("--max-window-edges must be at least 1")
    return bound


def _ddst_options(args: argparse.Namespace) -> dict[str, Any]:
    """Keyword options for the DDST engine from the command line."""
    options: dict[str, Any] = {}
    bound = state_bound(args)
    if bound is not None:
        options["max_window_edges"] = bound
    if getattr(args, "ddst_report", REPORT_MODES[0]) != REPORT_MODES[0]:
        options["report"] = args.ddst_report
    for flag, key in (("signature_p", "p"), ("signature_seed", "seed")):
        value = getattr(args, flag, None)
        if value is None:
            continue
        if args.ddst_engine != "signature":
            raise QueryError(f"--{flag.replace('_', '-')} applies to --ddst-engine signature "
                             f"only (got {args.ddst_engine})")
        options[key] = value
    return options


def _ddst_job(args: argparse.Namespace) -> DDSTJob:
    sal_only = [f"--{k.replace('_', '-')}" for k in ("query_name", "window", "max_duration")
                if getattr(args, k, None) is not None]
    if getattr(args, "homomorphic", False):
        sal_only.append("--homomorphic")
    if sal_only:
        raise QueryError(f"{', '.join(sal_only)} apply to SAL queries only; a DDST query "
                         "gives its window with WITHIN")
    job = DDSTJob(parse_ddst_file(args.query), args.ddst_engine, _ddst_options(args))
    try:
        job.new_engine()  # an option the engine rejects (p not prime) fails here, clearly
    except ValueError as err:
        raise QueryError(f"--ddst-engine {job.engine}: {err}") from None
    return job


def _make_job(args: argparse.Namespace, fmt: str) -> ReplayJob:
    if _is_ddst(args.query):
        return _ddst_job(args)
    job = Job.create(
        parse_file(args.query),
        args.query_name,
        fmt,
        window_us=_seconds(args.window),
        homomorphic=args.homomorphic,
        max_duration_us=_seconds(args.max_duration),
        max_window_edges=state_bound(args),
    )
    compile_query(job.query, job.max_duration_us if job.max_duration_us is not None else 0)
    return job


def _first_file(inputs: list[str]) -> str:
    from graphcep.io.readers import expand_paths

    return str(expand_paths(inputs)[0])


def _run_local(job: ReplayJob, inputs, fmt, options, rejects: RejectLog):
    result = read_edges(inputs, fmt, options)
    rejects.add(result.rejects)
    progress = Progress(result.edges.num_rows)
    matches, stats = run_job(job, result.edges, on_progress=progress.advance)
    progress.close()
    return matches, stats, result.lines_read


def _run_spark(job: ReplayJob, args, fmt, options, rejects: RejectLog):
    from graphcep.runtime.spark import read_edges_spark, run_spark, spark_session

    t0 = time.perf_counter()
    spark = spark_session(args.master)
    startup = time.perf_counter() - t0
    edges_df, rejects_df, lines = read_edges_spark(spark, args.input, fmt, options)
    with SparkProgress(spark):
        matches, stats = run_spark(spark, job, edges_df, shards=args.shards)
    bad = rejects_df.toArrow()
    if bad.num_rows:
        rejects.add(bad)
    stats.extra["spark_startup_seconds"] = round(startup, 3)
    return matches, stats, lines


def _print_summary(args, job: ReplayJob, stats: RunStats, lines: int,
                   rejects: RejectLog) -> None:
    summary = {
        "query": job.name,
        "engine": args.engine,
        **({"ddst_engine": job.engine} if isinstance(job, DDSTJob) else {}),
        "lines": lines,
        "edges": stats.edges,
        "rejected": rejects.count,
        "matches": stats.matches,
        "seconds": round(stats.seconds, 3),
        "edges_per_second": round(stats.edges / stats.seconds) if stats.seconds > 0 else None,
        **stats.extra,
    }
    if rejects.count:
        summary["rejects_file"] = str(args.rejects)
    if args.summary == "json":
        print(json.dumps(summary))
        return
    print(
        f"\n{summary['query']}: {stats.matches:,} matches in {stats.edges:,} edges "
        f"({rejects.count:,} rejected) in {stats.seconds:.2f} s "
        f"({summary['edges_per_second'] or 0:,} edges/s, {args.engine})"
    )
    if rejects.count:
        print(rejects.summary(args.rejects))


# -- explain ----------------------------------------------------------------------------


def cmd_explain(args: argparse.Namespace) -> int:
    if _is_ddst(args.query):
        print("\n".join(_ddst_job(args).describe()))
        return 0
    program = parse_file(args.query)
    query = program.query(args.query_name)
    window = _seconds(args.window)
    if window is not None:
        query = query.with_window(window)
    print(f"query {query.name} on stream {query.stream or '(default)'} "
          f"with source({query.source_field}) and target({query.target_field})")
    print(query.to_sal())
    max_dur = _seconds(args.max_duration)
    try:
        compiled = compile_query(query, max_dur)
    except UnboundedQueryError as err:
        print(f"\nextent: unbounded -- {err}")
        return 2
    print(f"\nextent: {format_seconds(compiled.extent_us)} s"
          + ("" if max_dur is None else f" (edge durations up to {args.max_duration} s)"))
    print("state: edges whose start lies within the extent of the newest edge")
    print("plan (one line per query edge that can arrive last):")
    for line in compiled.describe():
        print(f"  {line}")
    for name, feature in program.features.items():
        print(f"feature {name}: {feature.operator}({feature.field}, "
              f"{', '.join(map(str, feature.params))}) over {feature.stream}")
    return 0


# -- gen --------------------------------------------------------------------------------


def cmd_gen_netflow(args: argparse.Namespace) -> int:
    from graphcep.io.generator import generate_netflow, write_edges

    table = generate_netflow(args.edges, args.vertices, args.rate, args.seed)
    write_edges(table, args.output, args.format)
    print(f"wrote {table.num_rows:,} edges over {args.vertices:,} vertices to {args.output}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from graphcep.demo import run_demo

    return run_demo(args.edges, args.master, Path(args.workdir))


# -- helpers ----------------------------------------------------------------------------


def _seconds(text: str | None) -> int | None:
    return None if text is None else seconds_to_us(text)


class Progress:
    """A one-line progress bar on stderr, only when stderr is a terminal."""

    def __init__(self, total: int) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.enabled = sys.stderr.isatty() and total >= 500_000
        self.started = time.perf_counter()

    def advance(self, count: int) -> None:
        self.done += count
        if not self.enabled:
            return
        share = self.done / self.total
        rate = self.done / max(time.perf_counter() - self.started, 1e-9)
        bar = "#" * int(30 * share)
        print(f"\r[{bar:<30}] {share:6.1%} {rate:,.0f} edges/s", end="", file=sys.stderr)

    def close(self) -> None:
        if self.enabled:
            print(file=sys.stderr)


class SparkProgress:
    """Polls Spark's status tracker and draws finished/total tasks on stderr (TTY only)."""

    def __init__(self, spark) -> None:
        self.tracker = spark.sparkContext.statusTracker()
        self.enabled = sys.stderr.isatty()
        self._stop = None

    def __enter__(self):
        if not self.enabled:
            return self
        import threading

        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        while not self._stop.wait(0.5):
            done = total = 0
            for stage_id in self.tracker.getActiveStageIds():
                info = self.tracker.getStageInfo(stage_id)
                if info:
                    done += info.numCompletedTasks
                    total += info.numTasks
            if total:
                print(f"\rspark: {done}/{total} tasks", end="", file=sys.stderr)

    def __exit__(self, *exc) -> None:
        if self._stop is not None:
            self._stop.set()
            self._thread.join()
            print("\r" + " " * 40 + "\r", end="", file=sys.stderr)


if __name__ == "__main__":
    sys.exit(main())
