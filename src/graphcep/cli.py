"""The ``graphcep`` command.

::

    graphcep demo                                   generate netflow, run the paper's queries on Spark
    graphcep run QUERY.sal --input PATH [options]   all matches of a query over a stream
    graphcep run QUERY.ddst --input PATH [options]  the same for a DDST event pattern
    graphcep explain QUERY.sal|QUERY.ddst           parsed query, derived extent, plan
    graphcep stream QUERY.sal --source … --checkpoint DIR   continuous matching (Spark streaming)
    graphcep gen netflow --edges N ... --output F   reproducible synthetic netflow

Decisions
---------
* Every option value is checked by its argparse type before any work (before Spark
  starts, before the input is read); a wrong one, like any wrong query, gets one line
  ``graphcep: ...`` on stderr and exit status 2 (:class:`OptionParser`). The output and
  rejects targets are checked before the run too (:func:`~graphcep.io.sinks.check_target`).
* ``--window`` is the extent of a SAL query whose constraints do not bound it. A query that
  bounds itself keeps its matches: a window at least as wide changes nothing (``explain``
  says the query's bound applies), a narrower one is refused
  (:func:`~graphcep.engines.difference_bounds.check_window`).
* ``explain`` does not know the input: a valid query explains with status 0, and ``run``
  checks the fields its features and labels read against the input's columns. A DDST
  run whose query labels no edge carries ends with a one-line warning naming them.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any, NoReturn

from graphcep.engines.base import StateBoundError
from graphcep.engines.ddst.reports import REPORT_MODES
from graphcep.engines.difference_bounds import (
    UnboundedQueryError,
    UnsatisfiableQueryError,
    check_window,
)
from graphcep.engines.subgraph.plan import compile_query
from graphcep.events import TimeFormatError, format_seconds, seconds_to_us
from graphcep.io.formats import LINE_FORMATS, ReaderOptions
from graphcep.io.readers import InputError, guess_format, read_edges
from graphcep.io.rejects import RejectLog
from graphcep.io.sinks import SINK_FORMATS, SinkError, check_target, make_sink
from graphcep.lang.ddst import parse_ddst_file
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.sal import parse_file
from graphcep.patterns.subgraph import MAX_BOUND_US, QueryError
from graphcep.runtime.job import DDST_ENGINES, DEFAULT_DDST_ENGINE, DDSTJob, Job, ReplayJob
from graphcep.runtime.local import RunStats, run_job
from graphcep.stream_command import add_parser as add_stream_parser

FORMATS = (*LINE_FORMATS, "parquet")


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except SystemExit as done:  # --help (0), or an option error already reported (2)
        return done.code if isinstance(done.code, int) else 0
    try:
        return args.handler(args)
    except QuerySyntaxError as err:
        # one line for logs and scripts; the source line and a caret for a person
        print(f"graphcep: {err if sys.stderr.isatty() else err.headline}", file=sys.stderr)
        return 2
    except (QueryError, UnboundedQueryError, UnsatisfiableQueryError, SinkError) as err:
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
    except OSError as err:  # the system failed a read or a write (disk full, I/O error)
        where = f" ({err.filename})" if err.filename else ""
        print(f"graphcep: {err.strerror or err}{where}", file=sys.stderr)
        return 1
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


class OptionParser(argparse.ArgumentParser):
    """argparse with graphcep's way of reporting a wrong option: one line on stderr,
    ``graphcep: <command>: <what is wrong>``, and exit status 2 (argparse's usage block
    would bury the one line that matters; ``--help`` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.split(maxsplit=1)[1:]
        where = f"{command[0]}: " if command else ""
        self.exit(2, f"graphcep: {where}{message} (see {self.prog} --help)\n")


def seconds_option(text: str) -> str:
    """A number of seconds that is not negative (``--window``, ``--max-duration``,
    ``--lateness``): checked exactly as it will be read, returned as given."""
    try:
        us = seconds_to_us(text)
    except TimeFormatError as err:
        raise argparse.ArgumentTypeError(f"expected seconds: {err}") from None
    if us < 0:
        raise argparse.ArgumentTypeError(f"expected seconds, not negative: {text!r}")
    if us >= MAX_BOUND_US:
        raise argparse.ArgumentTypeError(
            f"{text!r} s exceeds the range of times (int64 microseconds: under 2**61 µs, "
            "about 73,000 years)")
    return text


def positive_seconds(text: str) -> float:
    """A finite number of seconds above zero (``--run-for``)."""
    value = _finite_float(text)
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected seconds above 0, got {text!r}")
    return value


def nonnegative_seconds(text: str) -> float:
    """A finite number of seconds, zero or more (``--trigger``)."""
    value = _finite_float(text)
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected seconds (0 or more), got {text!r}")
    return value


def positive_rate(text: str) -> str:
    """A rate in edges per second above zero, kept exact as given (``gen --rate``)."""
    if _finite_float(text) <= 0:
        raise argparse.ArgumentTypeError(f"expected edges per second above 0, got {text!r}")
    return text


def _finite_float(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"expected a finite number, got {text!r}")
    return value


def path_option(text: str) -> str:
    """A path: not empty (an empty one would silently mean the current directory)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a path, got an empty one")
    if "\0" in text:
        raise argparse.ArgumentTypeError(f"a path cannot hold a NUL character: {text!r}")
    return text


#: What Spark accepts as a master URL (``--master``).
_MASTER = re.compile(r"local(\[(\*|[1-9]\d*)(,\s*\d+)?\])?|local-cluster\[[^]]+\]|"
                     r"(spark|k8s|mesos)://\S+|yarn")


def master_option(text: str) -> str:
    """A Spark master URL, checked before Spark starts (a wrong one is a JVM traceback)."""
    if not _MASTER.fullmatch(text):
        raise argparse.ArgumentTypeError(
            f"expected local, local[N], local[*], spark://HOST:PORT, yarn or k8s://URL, "
            f"got {text!r}")
    return text


def count_option(least: int, below: int | None = None) -> Any:
    """An argparse type: a whole number of at least ``least`` (and under ``below``)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected at least {least}, got {value}")
        if below is not None and value >= below:
            raise argparse.ArgumentTypeError(f"expected less than {below:,}, got {value:,}")
        return value

    parse.__name__ = f"whole number >= {least}"
    return parse


def build_parser() -> argparse.ArgumentParser:
    parser = OptionParser(
        prog="graphcep",
        description="Online pattern matching over streaming temporal graphs.",
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="find every match of a SAL or DDST query in a stream")
    run.add_argument("query", help="SAL file, or DDST file (.ddst, or text starting QUERY/VERTICES)")
    run.add_argument("--input", "-i", required=True, nargs="+", type=path_option, help="edge file(s) or directory")
    run.add_argument("--format", "-f", choices=FORMATS, help="input format (default: from the name)")
    run.add_argument("--output", "-o", type=path_option, help="matches.jsonl, matches.parquet, matches.dot "
                                            "(Graphviz) or - (console, default)")
    run.add_argument("--output-format", choices=SINK_FORMATS,
                     help="format of --output when its name does not say it (-o /dev/null "
                          "--output-format jsonl)")
    run.add_argument("--engine", choices=("spark", "local"), default="spark",
                     help="spark (default; embedded local[*] unless --master) or in-process")
    add_sal_arguments(run)
    add_spark_arguments(run)
    add_input_arguments(run)
    run.add_argument("--rejects", default="rejects.jsonl", type=path_option,
                     help="where malformed lines go, with line number and reason "
                          "(default rejects.jsonl)")
    run.add_argument("--shards", type=count_option(1), metavar="N",
                     help="Spark: number of time shards (default: from the input's size)")
    run.add_argument("--limit", type=count_option(0), default=20, metavar="N",
                     help="matches printed on the console (default 20; the rest are counted)")
    add_summary_argument(run)
    add_ddst_arguments(run)
    add_state_bound_argument(run)
    run.set_defaults(handler=cmd_run)

    explain = sub.add_parser("explain", help="show the parsed query, its extent and plan")
    explain.add_argument("query", help="SAL or DDST file")
    add_sal_arguments(explain)
    add_ddst_arguments(explain)
    add_state_bound_argument(explain)
    explain.set_defaults(handler=cmd_explain)

    gen = sub.add_parser("gen", help="generate synthetic streams")
    gen_sub = gen.add_subparsers(dest="kind", required=True)
    netflow = gen_sub.add_parser("netflow", help="SAM's random-pool netflow generator")
    netflow.add_argument("--edges", type=count_option(0, 2**40), required=True, metavar="N",
                         help="number of flows (edges) to write")
    netflow.add_argument("--vertices", type=count_option(2, 2**31), required=True,
                         metavar="N", help="number of hosts (vertices), 2 to 2**31 - 1")
    netflow.add_argument("--rate", type=positive_rate, default="1000",
                         help="edges per second of event time (default 1000)")
    netflow.add_argument("--seed", type=count_option(0), default=0,
                         help="random seed, 0 or more (default 0)")
    netflow.add_argument("--output", "-o", required=True, type=path_option,
                         help="file to write (.gz compresses a text format)")
    netflow.add_argument("--format", choices=("vast", "snap", "csv", "jsonl", "parquet"),
                         help="output format (default: from the name -- .csv is VAST, "
                              ".jsonl, .parquet, anything else snap)")
    netflow.set_defaults(handler=cmd_gen_netflow)

    add_stream_parser(sub)

    demo = sub.add_parser("demo", help="generate netflow and run the paper's queries on Spark")
    demo.add_argument("--edges", type=count_option(1), default=200_000, metavar="N",
                      help="flows to generate (default 200000)")
    add_spark_arguments(demo)
    demo.add_argument("--workdir", default="demo-output", type=path_option,
                      help="directory for the generated stream and the matches "
                           "(default demo-output)")
    demo.set_defaults(handler=cmd_demo)
    return parser


def add_sal_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of SAL queries (``run``, ``explain`` and ``stream``)."""
    parser.add_argument("--query-name", metavar="NAME",
                        help="which SUBGRAPH of the SAL program (default: the first)")
    parser.add_argument("--window", type=seconds_option, metavar="SECONDS",
                        help="extent for SAL queries whose constraints do not bound it; a "
                             "query that bounds itself keeps its own bound (a narrower "
                             "--window is refused)")
    parser.add_argument("--max-duration", type=seconds_option, metavar="SECONDS",
                        help="longest edge duration, bounding end-time constraints "
                             "(run: default the longest in the input)")
    parser.add_argument("--homomorphic", action="store_true",
                        help="let SAL query vertices share stream vertices (SAM's "
                             "behaviour; default: distinct stream vertices)")


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """Where Spark runs (``run``, ``stream``, ``demo``)."""
    parser.add_argument("--master", default="local[*]", type=master_option,
                        help="Spark master: local[*] (default, embedded), local[N] or "
                             "spark://host:7077")


def add_input_arguments(parser: argparse.ArgumentParser) -> None:
    """How input lines are read (``run`` and ``stream``)."""
    parser.add_argument("--time-unit", choices=("s", "ms", "us"),
                        help="unit of numeric times in the input: s (default), ms or us")
    parser.add_argument("--time-format", choices=("number", "iso", "auto"), default="number",
                        help="times in the input: number (default; seconds, or --time-unit), "
                             "iso (ISO-8601 date-times, UTC unless a zone is given) or auto "
                             "(either, line by line)")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="csv/tsv: line 1 is (--header) or is not (--no-header) a "
                             "header (default: decided from the file's first lines)")


def reader_options(args: argparse.Namespace) -> ReaderOptions:
    """The readers' options from :func:`add_input_arguments`."""
    return ReaderOptions(time_unit=args.time_unit, time_format=args.time_format,
                         header=args.header)


def add_summary_argument(parser: argparse.ArgumentParser) -> None:
    """The summary at the end (``run`` and ``stream``)."""
    parser.add_argument("--summary", choices=("text", "json"), default="text",
                        help="summary at the end: text (default) or json (one JSON line, "
                             "the last of stdout)")


# -- run --------------------------------------------------------------------------------


def cmd_run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    # the output is checked before any work: a wrong name must not cost a whole run
    out_format = check_target(args.output, args.output_format)
    check_target(args.rejects, "jsonl", directory=False, role="rejects")
    refuse_overwriting_inputs(args.input, {"output": args.output, "rejects": args.rejects})
    fmt = args.format or guess_format(_first_file(args.input))
    job = _make_job(args, fmt)
    options = reader_options(args)
    rejects = RejectLog(args.rejects)
    if args.engine == "local":
        matches, stats, lines = _run_local(job, args.input, fmt, options, rejects)
    else:
        matches, stats, lines = _run_spark(job, args, fmt, options, rejects)
    with writing(args.output), make_sink(args.output, out_format, limit=args.limit,
                                         matches=job.output) as sink:
        sink.write(matches)
    if rejects.count:
        with writing(args.rejects):
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
        text = Path(path).read_text(encoding="utf-8-sig", errors="replace")
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
    parser.add_argument("--signature-p", type=count_option(2, below=2**31), metavar="P",
                        help="signature engine: the prime modulus of its label values "
                             "(default 997; smaller: fewer words, more verifications)")
    parser.add_argument("--signature-seed", type=count_option(0), metavar="S",
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


#: SAL options a DDST query has no use for, with what DDST does instead.
_SAL_ONLY = {
    "query_name": "a DDST file holds one query, named by its QUERY statement",
    "window": "a DDST query gives its window with WITHIN",
    "max_duration": "a DDST window is over start times, so durations bound nothing",
    "homomorphic": "DDST's dual simulation already lets query vertices share stream vertices",
}


def _ddst_job(args: argparse.Namespace) -> DDSTJob:
    given = [key for key in _SAL_ONLY if getattr(args, key, None) not in (None, False)]
    if given:
        flags = ", ".join(f"--{key.replace('_', '-')}" for key in given)
        why = "; ".join(_SAL_ONLY[key] for key in given)
        raise QueryError(f"{flags} {'applies' if len(given) == 1 else 'apply'} to SAL "
                         f"queries only ({why})")
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


def refuse_overwriting_inputs(inputs: list[str], targets: dict[str, str | None]) -> None:
    """Refuse an output that is one of the input files: writing it would destroy what
    the run reads (``-o flows.jsonl`` for ``--input flows.jsonl``)."""
    from graphcep.io.readers import expand_paths

    targets = {role: Path(t) for role, t in targets.items() if t not in (None, "-")}
    existing = {role: t for role, t in targets.items() if t.is_file()}
    if not existing:
        return
    for path in expand_paths(inputs):
        for role, target in existing.items():
            if os.path.samefile(path, target):
                raise SinkError(f"{role} {str(target)!r} is an input of the run; writing it "
                                "would destroy the input: name another file")


def _first_file(inputs: list[str]) -> str:
    from graphcep.io.readers import expand_paths

    return str(expand_paths(inputs)[0])


def _run_local(job: ReplayJob, inputs, fmt, options, rejects: RejectLog):
    result = read_edges(inputs, fmt, options)
    rejects.add(result.rejects)
    progress = Progress(result.edges.num_rows)
    matches, stats = run_job(job, result.edges, on_progress=progress.advance)
    progress.close()
    if isinstance(job, DDSTJob):
        warn_absent_labels(job, job.labels_present(result.edges))
    return matches, stats, result.lines_read


def labels_in_frame(job: DDSTJob, edges_df: Any) -> dict[str, set[str]]:
    """The query's labels found in each label column of a Spark edge frame: one small
    aggregate (read from the frame's cache when the reader kept one)."""
    from pyspark.sql import functions as F

    wanted = sorted(set().union(*job.wanted_labels().values()))
    columns = [c for c in ("label", "src_label", "dst_label") if c in edges_df.columns]
    if not wanted or not columns:
        return {}
    text = {c: F.col(c).cast("string") for c in columns}
    row = edges_df.agg(*[F.collect_set(F.when(text[c].isin(wanted), text[c])).alias(c)
                         for c in columns]).first()
    return {c: set(row[c]) for c in columns}


def warn_absent_labels(job: DDSTJob, present: dict[str, set[str]]) -> None:
    """One line on stderr when a query label never occurs: the run's 0 matches then say
    nothing about the pattern, only about the labelling."""
    absent = job.absent_labels(present)
    if absent:
        print(f"graphcep: warning: query {job.name!r}: no edge of the input carries "
              f"{', '.join(absent)}, so the query edges wanting them cannot match",
              file=sys.stderr)


def _run_spark(job: ReplayJob, args, fmt, options, rejects: RejectLog):
    from graphcep.runtime.spark import read_edges_spark, run_spark, spark_session

    t0 = time.perf_counter()
    spark = spark_session(args.master)
    startup = time.perf_counter() - t0
    edges_df, rejects_df, lines = read_edges_spark(spark, args.input, fmt, options)
    with SparkProgress(spark):
        matches, stats = run_spark(spark, job, edges_df, shards=args.shards)
    if isinstance(job, DDSTJob):
        warn_absent_labels(job, labels_in_frame(job, edges_df))
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
    """The parsed query, its extent and plan. A valid query explains with status 0: the
    input is not known here, so its fields (features, labels) are checked by ``run``."""
    if _is_ddst(args.query):
        print("\n".join(_ddst_job(args).describe()))
        return 0
    program = parse_file(args.query)
    query = program.query(args.query_name)
    window = _seconds(args.window)
    max_dur = _seconds(args.max_duration)
    own_extent = None if window is None else check_window(query, window, max_dur)
    if window is not None:
        query = query.with_window(window)
    compiled = compile_query(query, max_dur)  # an unbounded query: one line, status 2
    print(f"query {query.name} on stream {query.stream or '(default)'} "
          f"with source({query.source_field}) and target({query.target_field})")
    print(query.to_sal())
    print(f"\nextent: {format_seconds(compiled.extent_us)} s"
          + ("" if max_dur is None else f" (edge durations up to {args.max_duration} s)")
          + _window_note(own_extent, window))
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

    try:
        table = generate_netflow(args.edges, args.vertices, args.rate, args.seed)
    except ValueError as err:  # a span of times the outputs cannot hold
        raise QueryError(f"gen netflow: {err}") from None
    with writing(args.output):
        write_edges(table, args.output, args.format)
    print(f"wrote {table.num_rows:,} edges over {args.vertices:,} vertices to {args.output}")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from graphcep.demo import run_demo

    return run_demo(args.edges, args.master, Path(args.workdir))


# -- helpers ----------------------------------------------------------------------------


@contextlib.contextmanager
def writing(target: str | None) -> Iterator[None]:
    """Name ``target`` in an :class:`OSError` raised while writing it (a full disk says
    which output it could not finish); ``main`` prints it in one line, exit status 1."""
    try:
        yield
    except OSError as err:
        if err.filename or target in (None, "-") or isinstance(err, BrokenPipeError):
            raise
        raise OSError(err.errno, err.strerror or str(err), target) from err


def _window_note(own_extent: int | None, window: int | None) -> str:
    """Which bound gives the extent: the query's own, or --window."""
    if window is None:
        return ""
    if own_extent is None:
        return f" (--window {format_seconds(window)}: the constraints do not bound it)"
    return (f" (the query's own bound; --window {format_seconds(window)} is at least as "
            "wide and changes nothing)")


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
