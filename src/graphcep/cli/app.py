"""The ``graphcep`` command.

::

    graphcep demo                                   generate netflow, run each language on Spark
    graphcep run QUERY.sal --input PATH [options]   all matches of a query over a stream
    graphcep run QUERY.ddst --input PATH [options]  the same for a DDST event pattern
    graphcep subscribe SUBS --input PATH [options]  run for a subscriptions file (.subs)
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
import gc
import json
import os
import re
import sys
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import replace
from pathlib import Path
from typing import Any, NoReturn

from graphcep import timing
from graphcep.cli.draw import add_draw_parser
from graphcep.cli.motifs import add_parser as add_motifs_parser
from graphcep.cli.options import (
    CONSOLE_LIMIT,
    DEFAULT_REJECTS,
    REJECTS_HELP,
    OutputWarnings,
    add_ddst_arguments,
    add_input_arguments,
    add_match_bound_arguments,
    add_nu_arguments,
    add_pww_arguments,
    add_rules_arguments,
    add_sal_arguments,
    add_spark_arguments,
    add_state_bound_argument,
    add_subscription_arguments,
    add_summary_argument,
    console_limit,
    count_option,
    group_options,
    master_given,
    path_option,
    positive_rate,
    reader_options,
    refuse_count_outputs,
    refuse_overwriting_inputs,
    resolve_master,
    rules_in_place_of_query,
    warn_about_input,
    warn_absent_labels,
    with_examples,
)
from graphcep.cli.stream import add_parser as add_stream_parser
from graphcep.engines.base import StateBoundError
from graphcep.engines.difference_bounds import (
    UnboundedQueryError,
    UnsatisfiableQueryError,
)
from graphcep.io.formats import LINE_FORMATS, RECORD_FORMATS, ReaderOptions
from graphcep.io.readers import WHOLE_FILE_FORMATS, InputError, guess_format, read_edges
from graphcep.io.rejects import RejectLog, show_input_notes
from graphcep.io.sinks import (
    SINK_FORMATS,
    SinkError,
    check_target,
    is_directory_target,
    make_sink,
    refuse_earlier_parts,
    refuse_files_among_parts,
    writing,
)
from graphcep.io.time_text import clock_for
from graphcep.jobs.base import ReplayJob, format_refusal
from graphcep.jobs.options import job_options, pww_options
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lazy_pandas import defer_pandas
from graphcep.patterns.subgraph import QueryError
from graphcep.pictures.report import REPORT_MATCHES, check_picture_targets
from graphcep.runtime.local import BoundedOutput, RunStats, stream_job
from graphcep.runtime.spark_start import SparkStartError
from graphcep.runtime.widening import LevelStats, run_widening
from graphcep.runtime.widening.report import explain_lines, level_lines, widened_format
from graphcep.timing import NESTED, Phases, process_age

FORMATS = (*LINE_FORMATS, "parquet", *WHOLE_FILE_FORMATS, *RECORD_FORMATS)

# -- the examples that end each command's --help (run from the repository's root; flows.csv
# -- is the stream the gen example writes, demo-output/ what the demo writes) -------------

MAIN_EXAMPLES = """\
examples:
  graphcep demo                          # every language on generated netflow, on Spark
  graphcep gen netflow --edges 100000 --vertices 2000 -o flows.csv
  graphcep explain examples/triangle.sal
  graphcep run examples/triangle.sal --input flows.csv --engine local
  graphcep run examples/nu/triangle.nu --input flows.csv -o matches.jsonl
  graphcep motifs --input flows.csv --delta 10,60
"""

RUN_EXAMPLES = """\
examples:
  graphcep run examples/triangle.sal --input flows.csv                 # Spark, local[*]
  graphcep run examples/triangle.sal --input flows.csv --engine local -o matches.jsonl
  graphcep run examples/ddst/web_then_irc.ddst --input demo-output/netflow-labelled.parquet
  graphcep run examples/nu/triangle.nu --input flows.csv --engine local --summary json
  graphcep run examples/subs/probes.subs --input flows.csv --engine local --symbol DestPort
  graphcep run examples/web_then_irc_any_pace.sal --input flows.csv --engine local --pww 20000
  graphcep run examples/triangle.sal --input CollegeMsg.txt.gz --format snap --summary json
"""

SUBSCRIBE_EXAMPLES = """\
examples:
  graphcep subscribe examples/subs/figure3.subs --input examples/subs/figure3.seq
  graphcep subscribe examples/subs/probes.subs --input flows.csv --key src --symbol DestPort
  graphcep subscribe examples/subs/probes.subs --input flows.csv -o notifications.jsonl
"""

EXPLAIN_EXAMPLES = """\
examples:
  graphcep explain examples/triangle.sal
  graphcep explain examples/watering_hole.sal --max-duration 60
  graphcep explain examples/ddst/web_then_irc.ddst
  graphcep explain examples/nu/attack.nu --dot attack.dot
  graphcep explain examples/subs/probes.subs
  graphcep explain examples/web_then_irc_any_pace.sal --pww 20000 --pww-max-duration 3600
"""

GEN_EXAMPLES = """\
examples:
  graphcep gen netflow --edges 100000 --vertices 2000 -o flows.csv
  graphcep gen netflow --edges 1000000 --vertices 5000 --rate 10000 --seed 1 -o S2.parquet
"""

DEMO_EXAMPLES = """\
examples:
  graphcep demo
  graphcep demo --workdir /tmp/demo --master "local[2]"
  graphcep demo --edges 1000000
"""


def main(argv: list[str] | None = None) -> int:
    """The ``graphcep`` command; ``argv`` defaults to the program's arguments.

    Run as the program (no ``argv``), it freezes the objects still alive when the command
    is done (:func:`gc.freeze`): the interpreter's exit then skips tracing them -- numba's
    and Spark's object graphs made that a tenth to a third of a second of a short run. A
    command that started no JVM then ends the process at once (:func:`_end_process`).
    """
    code = _main(argv)
    if argv is None:
        gc.freeze()
        _end_process(code)
    return code


def _end_process(code: int) -> None:
    """End the program now, skipping the interpreter's teardown (freeing every module,
    numba's compiled code and LLVM's state: 0.02-0.03 s of a one-second run). Safe here:
    every output file was closed by its command and the standard streams are flushed
    first. Not after Spark ran: its JVM is stopped by the interpreter's exit handlers.
    Returns (the normal exit follows) when a stream cannot be flushed."""
    if "pyspark" in sys.modules:
        return
    try:
        sys.stdout.flush()
        sys.stderr.flush()
    except (OSError, ValueError):  # a closed pipe or stream: exit the ordinary way
        return
    os._exit(code)


def _main(argv: list[str] | None) -> int:
    show_input_notes()
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
    except (QueryError, UnboundedQueryError, UnsatisfiableQueryError, SinkError,
            SparkStartError) as err:
        print(f"graphcep: {err}", file=sys.stderr)
        return 2
    except (FileNotFoundError, IsADirectoryError, InputError) as err:
        print(f"graphcep: {_os_error_line(err)}", file=sys.stderr)
        return 2
    except StateBoundError as err:  # the input is fine; the bound it needs is higher
        print(f"graphcep: {err}", file=sys.stderr)
        return 3
    except KeyboardInterrupt:
        print(f"graphcep: interrupted{_unwritten(args)}", file=sys.stderr)
        return 130
    except BrokenPipeError:  # the reader left (``graphcep run ... | head``): stop quietly
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no flush error at exit
        return 141  # as a process ended by SIGPIPE
    except OSError as err:  # the system failed a read or a write (disk full, I/O error)
        where = f" ({err.filename})" if err.filename else ""
        print(f"graphcep: {err.strerror or err}{where}", file=sys.stderr)
        return 1
    except Exception as err:
        message, code = remote_error(err)
        if message is None:
            raise
        print(f"graphcep: {message}", file=sys.stderr)
        return code


def _os_error_line(err: Exception) -> str:
    """``nope.csv: No such file or directory`` rather than Python's ``[Errno 2] ...``."""
    if isinstance(err, OSError) and err.filename is not None and err.strerror:
        return f"{err.filename}: {err.strerror}"
    return str(err)


def remote_state_bound(err: BaseException) -> str | None:
    """The message of a state bound hit inside a Spark task, else None. Spark re-raises a
    task's error on the driver as its own exception type, the task's traceback as text."""
    if not type(err).__module__.startswith(("pyspark", "py4j")):
        return None
    return StateBoundError.found_in(str(err))


def remote_error(err: BaseException) -> tuple[str | None, int]:
    """The message and exit status of graphcep's own error raised inside a Spark task (a
    state bound: 3; the query or an option refusing the input, as a key field with no
    text: 2), else ``(None, 1)``."""
    bound = remote_state_bound(err)
    if bound is not None:
        return bound, 3
    if type(err).__module__.startswith(("pyspark", "py4j")):
        match = re.search(r"graphcep\.patterns\.subgraph\.QueryError: ([^\n]+)", str(err))
        if match:
            return match.group(1).strip(), 2
    return None, 1


class OptionParser(argparse.ArgumentParser):
    """argparse with graphcep's way of reporting a wrong option: one line on stderr,
    ``graphcep: <command>: <what is wrong>``, and exit status 2 (argparse's usage block
    would bury the one line that matters; ``--help`` shows the usage)."""

    def error(self, message: str) -> NoReturn:
        command = self.prog.split(maxsplit=1)[1:]
        where = f"{command[0]}: " if command else ""
        self.exit(2, f"graphcep: {where}{message} (see {self.prog} --help)\n")

    def parse_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201
        """argparse's, with arguments no option takes refused by the command they were
        given to (its name and its ``--help`` in the line), not by ``graphcep``."""
        parsed, extra = self.parse_known_args(args, namespace)
        if extra:
            commands = next((a.choices for a in self._actions
                             if isinstance(a, argparse._SubParsersAction)), {})
            given = commands.get(getattr(parsed, "command", None), self)
            given.error(f"unrecognized arguments: {' '.join(extra)}")
        return parsed

    def parse_known_args(self, args=None, namespace=None):  # noqa: ANN001, ANN201
        """argparse's, then ``--master``'s default (:func:`resolve_master`)."""
        parsed, extra = super().parse_known_args(args, namespace)
        resolve_master(parsed)
        return parsed, extra


def build_parser() -> argparse.ArgumentParser:
    parser = OptionParser(
        prog="graphcep",
        description="Online pattern matching over streaming temporal graphs. "
                    "graphcep COMMAND --help: the command's options and examples.",
        **with_examples(MAIN_EXAMPLES),
    )
    sub = parser.add_subparsers(dest="command", required=True)

    run = sub.add_parser("run", help="find every match of a query (SAL, DDST, ν-expression, "
                                     "subscriptions) in a stream",
                         **with_examples(RUN_EXAMPLES))
    run.add_argument("query", nargs="?",
                     help="query file: SAL (.sal), DDST (.ddst), timed ν-expression "
                          "(.nu), timed ν-automaton (.autom) or subscriptions (.subs); "
                          "the kind is read from the name, else from the text (or --rules)")
    add_rules_arguments(run)
    _add_io_arguments(run)
    run.add_argument("--engine", choices=("spark", "local"),
                     help="spark (default; embedded local[*] unless --master) or in-process "
                          "(local)")
    add_sal_arguments(run)
    _add_run_arguments(run)
    add_ddst_arguments(run)
    add_nu_arguments(run)
    add_subscription_arguments(run)
    add_state_bound_argument(run)
    add_pww_arguments(run)
    run.set_defaults(handler=cmd_run)
    group_options(run)

    subscribe = sub.add_parser(
        "subscribe", help="notify every occurrence of a subscriptions file's patterns",
        description="graphcep run for a subscriptions file (.subs): every occurrence of its "
                    "patterns in each key's sequence, read from a plain sequence (.seq: "
                    "symbols, optionally 'KEY: sym sym ...' lines) or from any edge file "
                    "(--key and --symbol name its fields). In-process unless --engine spark.",
        **with_examples(SUBSCRIBE_EXAMPLES))
    subscribe.add_argument("query", metavar="SUBS",
                           help="subscriptions file: one 'id: pattern' per line (.subs, or "
                                "any name whose text reads so; another kind is refused)")
    _add_io_arguments(subscribe)
    subscribe.add_argument("--engine", choices=("spark", "local"), default="local",
                           help="in-process (local, default) or spark (embedded local[*] "
                                "unless --master; partitioned by --key)")
    _add_run_arguments(subscribe)
    add_subscription_arguments(subscribe)
    add_pww_arguments(subscribe)
    subscribe.set_defaults(handler=cmd_subscribe, query_kind="subs")
    group_options(subscribe)

    explain = sub.add_parser("explain", help="show the parsed query, its extent and plan",
                             **with_examples(EXPLAIN_EXAMPLES))
    explain.add_argument("query", nargs="?",
                         help="query file: SAL (.sal), DDST (.ddst), timed ν-expression "
                              "(.nu), timed ν-automaton (.autom) or subscriptions (.subs) "
                              "(or --rules)")
    add_rules_arguments(explain)
    add_sal_arguments(explain)
    add_ddst_arguments(explain)
    add_nu_arguments(explain)
    add_subscription_arguments(explain)
    add_state_bound_argument(explain)
    add_pww_arguments(explain)
    explain.add_argument("--dot", type=path_option, metavar="FILE",
                         help="also write the plan as Graphviz DOT: a ν-expression's automaton, "
                         "a subscriptions file's pattern tree")
    explain.set_defaults(handler=cmd_explain)
    group_options(explain)

    gen = sub.add_parser("gen", help="generate synthetic streams", **with_examples(GEN_EXAMPLES))
    gen_sub = gen.add_subparsers(dest="kind", required=True)
    netflow = gen_sub.add_parser("netflow", help="SAM's random-pool netflow generator",
                                 **with_examples(GEN_EXAMPLES))
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
    add_motifs_parser(sub)

    add_draw_parser(sub)

    demo = sub.add_parser(
        "demo", help="generate netflow and run a query of each language on Spark",
        description="Generates netflow with planted attacks and runs, on Spark, the paper's "
                    "SAL triangle and watering hole, a DDST event pattern, a ν-expression, "
                    "subscriptions and window widening: one line of result each, checked "
                    "against the planted attacks, and the graphcep run command that gives it.",
        **with_examples(DEMO_EXAMPLES))
    demo.add_argument("--edges", type=count_option(1), default=200_000, metavar="N",
                      help="flows to generate (default 200000, at least 100000)")
    add_spark_arguments(demo)
    demo.add_argument("--workdir", default="demo-output", type=path_option,
                      help="directory for what the demo writes: the generated stream "
                           "(netflow.csv, and netflow-labelled.parquet for DDST), the "
                           "queries it runs (queries/) and their matches "
                           "(matches/triangle.sal.jsonl, ...); default demo-output")
    demo.set_defaults(handler=cmd_demo)
    return parser


def _add_io_arguments(parser: argparse.ArgumentParser) -> None:
    """What a run reads and writes (``run`` and ``subscribe``)."""
    parser.add_argument("--input", "-i", required=True, nargs="+", action="extend", type=path_option,
                        help="edge file(s) or directory")
    parser.add_argument("--format", "-f", choices=FORMATS,
                        help="input format (default: from the name)")
    parser.add_argument("--output", "-o", type=path_option,
                        help="matches.jsonl, matches.parquet, matches.dot (Graphviz) or - "
                             "(console, default)")
    parser.add_argument("--output-format", choices=SINK_FORMATS,
                        help="format of --output when its name does not say it (-o /dev/null "
                             "--output-format jsonl)")


def _add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """How a run goes and reports (``run`` and ``subscribe``)."""
    add_spark_arguments(parser)
    add_input_arguments(parser)
    parser.add_argument("--rejects", default=DEFAULT_REJECTS, type=path_option,
                        help=REJECTS_HELP)
    parser.add_argument("--shards", type=count_option(1), metavar="N",
                        help="Spark: number of time shards (default: from the input's size)")
    parser.add_argument("--limit", type=count_option(0), metavar="N",
                        help=f"matches printed on the console (default {CONSOLE_LIMIT}; the "
                             "rest are counted)")
    add_summary_argument(parser)
    add_match_bound_arguments(parser)
    parser.add_argument("--draw", type=count_option(1), metavar="N",
                        help="draw the first N matches as PNG pictures in --draw-dir")
    parser.add_argument("--draw-dir", type=path_option, metavar="DIR",
                        help="--draw: directory for the pictures (default pictures/)")
    parser.add_argument("--timeline", type=path_option, metavar="FILE.png",
                        help="plot edges and matches per minute over the stream's time "
                             "(per second, 10 s, ... as its span calls for)")
    parser.add_argument("--report", type=path_option, metavar="FILE.html",
                        help="write one self-contained HTML page of the run: the query, "
                             "its plan, the summary, the timeline, the first --draw "
                             f"(default {REPORT_MATCHES}) matches drawn, the rejects")
    parser.add_argument("--profile", action="store_true",
                        help="print where the time went, phase by phase (Python start-up, "
                             "imports, Spark start-up, reading, shuffle, warm-up, matching, "
                             "writing), on stderr; with --summary json also as \"phases\" "
                             "in the summary")


# -- run --------------------------------------------------------------------------------

#: The phase of writing a run's matches and rejects (``--profile``).
WRITING = "writing matches and rejects"


def cmd_run(args: argparse.Namespace) -> int:
    started = time.perf_counter()
    defer_pandas()  # loaded only by the jobs that use it
    arrow_allocator()
    phases = Phases()
    age = process_age()
    if age is not None:  # the interpreter and the imports, before this function
        imports = started - timing.IMPORTED_AT
        phases.add("python start-up", max(age - imports, 0.0))
        phases.add("imports", imports)
    with phases.phase("options and query"):
        rules_in_place_of_query(args)
        # the output is checked before any work: a wrong name must not cost a whole run
        out_format = check_target(args.output, args.output_format)
        args.limit = console_limit(args, args.output)
        refuse_count_outputs(args)
        parts = args.output if out_format != "console" and is_directory_target(
            args.output) else None  # -o DIR/: a directory of part files
        refuse_earlier_parts(parts)
        check_target(args.rejects, "jsonl", directory=False, role="rejects")
        check_picture_targets(args, parts)
        refuse_files_among_parts(parts, {"--rejects": args.rejects})
        refuse_overwriting_inputs([*args.input, args.query],
                                  {"output": args.output, "rejects": args.rejects,
                                   "--report": args.report, "--timeline": args.timeline})
        widening = pww_options(args)
        args.engine = args.engine or "spark"
        refuse_spark_options(args)
        fmt = args.format or guess_format(_first_file(args.input))
        job = _make_job(args, fmt)
        if widening is not None:
            from graphcep.runtime.widening import refuse_short_keep

            refuse_short_keep(job, widening[0])
        refusal = format_refusal(job, fmt)
        if refusal is not None:
            raise QueryError(refusal)
        options = projected(job, args.input, fmt, reader_options(args))
    rejects = RejectLog(args.rejects)
    output = job.output.with_clock(clock_for(args.time_format))
    if widening is not None:
        output = widened_format(output)

    def opened_sink():
        return make_sink(args.output, out_format, limit=args.limit, matches=output,
                         whole=True)

    counts: Counter[str] | None = Counter() if getattr(args, "query_kind", None) == "rules" \
        else None

    def bounded(sink) -> BoundedOutput:
        """The sink behind --max-matches, keeping what the pictures draw (--rules: the
        matches of each rule counted as they are written)."""
        if counts is not None:
            from graphcep.jobs.rules import CountingSink

            sink = CountingSink(sink, counts)
        sink = OutputWarnings(sink, job)
        times_column = None
        if args.timeline is not None or args.report is not None:
            from graphcep.pictures.records import match_time_column

            times_column = match_time_column(output.schema.names)
        report = (args.draw or REPORT_MATCHES) if args.report is not None else 0
        return BoundedOutput(sink, args.max_matches, keep=max(args.draw or 0, report),
                             times_column=times_column)

    if widening is None and args.engine == "local":  # matches written as they are found
        with writing(args.output), opened_sink() as sink:
            written = bounded(sink)
            stats, lines, edges = _run_local(job, args.input, fmt, options, rejects, phases,
                                             written, args.count, counts)
        phases.add(WRITING, written.seconds)  # while matching: the chunks as they came
    elif widening is None:  # Spark: the tasks' matches written as the driver takes them
        from graphcep.interrupts import signals_kept

        with signals_kept():  # the run's Ctrl-C (exit_on_interrupt) until Spark is done
            run, lines, edges = _run_spark(job, args, fmt, options, rejects, phases)
            with writing(args.output), opened_sink() as sink:
                written = bounded(sink)
                stats = _write_spark_run(run, written, args, counts)
        phases.update(stats.phases)
        phases.add(WRITING, written.seconds)
    else:
        if args.engine == "local":
            with phases.phase("widening (reading and matching)"):
                matches, stats, lines, edges = _run_widening(job, widening, args.input, fmt,
                                                             options, rejects)
        else:
            from graphcep.interrupts import signals_kept

            with signals_kept():  # the output is written afterwards, with Python's Ctrl-C
                matches, stats, lines, edges = _spark_matches(job, args, fmt, options,
                                                              rejects, phases, widening)
        with phases.phase(WRITING), writing(args.output), opened_sink() as sink:
            written = bounded(sink)
            if not args.count:
                written.write_all(matches, stats)
        del matches
    with phases.phase(WRITING), writing(args.rejects):
        rejects.write_if_any()
    matches = written.first(output.schema)
    if args.draw:
        with phases.phase("drawing matches"):
            from graphcep.cli.draw import draw_table

            draw_table(matches, args.draw, args.draw_dir or "pictures",
                       clock_for(args.time_format))
    stats.seconds = time.perf_counter() - started
    stats.phases = phases.seconds
    if counts is not None:  # --rules: each rule's matches, written or counted
        stats.extra["rules"] = job.rule_summary(counts)
    summary = _summary(args, job, stats, lines, rejects)
    _print_summary(args, job, stats, summary, rejects)
    _run_pictures(args, job, widening, summary, edges, matches, rejects, phases,
                  written.times() if written.times_column else None)
    if args.profile:  # on stderr: stdout stays the matches and the summary
        print(phases.table(process_age() or stats.seconds), file=sys.stderr)
    if "stopped" in stats.extra:
        raise StateBoundError(
            f"more than {args.max_matches:,} matches: the run stopped at --max-matches "
            f"{args.max_matches} with {written.written:,} written; raise --max-matches, "
            "narrow the query, or count every match with --count")
    return nothing_accepted(stats.edges, rejects, args.rejects)


def nothing_accepted(edges: int, rejects: RejectLog, path: Any) -> int:
    """Exit status of a run: 2, with one line on stderr, when it read input lines but
    accepted none (every one rejected: a wrong ``--format`` or ``--columns``); else 0."""
    if edges or not rejects.count:
        return 0
    print(f"graphcep: no input line was accepted: {rejects.summary(path)}", file=sys.stderr)
    return 2


def _run_pictures(args: argparse.Namespace, job: ReplayJob,
                  widening: tuple[int, int, int | None] | None, summary: dict[str, Any],
                  edges: Any, matches: Any, rejects: RejectLog, phases: Phases,
                  times: Any = None) -> None:
    """``--timeline`` and ``--report``, after the summary (``--profile`` lists them; the
    summary, printed before, does not). ``matches``: the first ones, to draw; ``times``:
    when each match was complete (µs), for the timeline."""
    if args.timeline is not None:
        from graphcep.pictures.runs import run_timeline_png

        with phases.phase("drawing the timeline"), writing(args.timeline):
            run_timeline_png(edges, times, args.timeline, clock=clock_for(args.time_format))
    if args.report is not None:
        from graphcep.pictures.runs import run_report

        with phases.phase("writing the report"), writing(args.report):
            command = "subscribe" if getattr(args, "query_kind", None) == "subs" else "run"
            run_report(args.report, query=args.query, plan=explain_lines(job, widening),
                       summary=summary, edges=edges, matches=matches,
                       rejects=rejects.table(), draw=args.draw, command=command,
                       clock=clock_for(args.time_format), match_times=times)


def refuse_spark_options(args: argparse.Namespace) -> None:
    """``--shards`` and ``--master`` say how Spark runs: with ``--engine local`` they
    would be ignored, so they are refused."""
    if args.engine != "local":
        return
    given = [flag for flag, on in (("--shards", args.shards is not None),
                                   ("--master", master_given(args))) if on]
    if given:
        verb = "applies" if len(given) == 1 else "apply"
        raise QueryError(f"{', '.join(given)} {verb} to the Spark engine; --engine local runs "
                         "in this process (leave it out to run on Spark)")


def arrow_allocator() -> None:
    """Arrow's buffers from jemalloc, unless ``ARROW_DEFAULT_MEMORY_POOL`` chooses: with
    pyarrow's default here (mimalloc) a run of S2 spent 0.3 s more in the kernel, faulting
    in pages (``/usr/bin/time``: 0.5 s of system time against 0.2 s)."""
    if os.environ.get("ARROW_DEFAULT_MEMORY_POOL"):
        return
    import pyarrow as pa

    with contextlib.suppress(NotImplementedError):  # a pyarrow built without jemalloc
        pa.set_memory_pool(pa.jemalloc_memory_pool())


def _make_job(args: argparse.Namespace, fmt: str | None) -> ReplayJob:
    """The query file as a job of its kind (:func:`graphcep.jobs.load`; ``subscribe``
    reads it as a subscriptions file)."""
    from graphcep import jobs

    kind = getattr(args, "query_kind", None)
    return jobs.load(args.query, job_options(args, fmt),
                     jobs.kind_named(kind) if kind else None)


# -- subscribe --------------------------------------------------------------------------


def cmd_subscribe(args: argparse.Namespace) -> int:
    """``graphcep run`` for a subscriptions file: a file whose name or text says it is
    another kind of query is refused; any other is read as subscriptions (whose parser
    then says what is wrong with it)."""
    from graphcep import jobs

    said = jobs.said_kind(args.query)
    if said is not None and said.name != "subs" and Path(args.query).is_file():
        raise QueryError(f"{args.query} is a {said.label}, not a subscriptions file: "
                         "graphcep subscribe runs subscriptions (use graphcep run)")
    return cmd_run(args)


def projected(job: ReplayJob, inputs: list[str], fmt: str, options: ReaderOptions
              ) -> ReaderOptions:
    """Parquet input: the options that read only the columns ``job`` reads (the core
    columns, ``seq``, the fields of its predicates, features and labels); a file's other
    columns are never decoded. Options unchanged for other formats, for ``attributes``
    given, and when a file's schema cannot be read (the read says why)."""
    if fmt != "parquet" or options.attributes is not None:
        return options
    import pyarrow as pa
    import pyarrow.parquet as pq

    from graphcep.io.readers import expand_paths

    names: dict[str, None] = {}
    for path in expand_paths(inputs, fmt=fmt):
        try:
            names.update(dict.fromkeys(pq.read_schema(path).names))
        except (pa.ArrowException, OSError):
            return options
    return replace(options, attributes=tuple(job.needed_columns(list(names))))


def _first_file(inputs: list[str]) -> str:
    from graphcep.io.readers import expand_paths

    return str(expand_paths(inputs)[0])


def _run_local(job: ReplayJob, inputs, fmt, options, rejects: RejectLog, phases: Phases,
               consume: BoundedOutput, count: bool, parts: Counter[str] | None = None):
    """Read and match in this process, each chunk of matches to ``consume`` as it is
    found (``count``: counted instead, none made, each part's count -- a rule's -- added
    to ``parts``)."""
    # The engine's kernels load in a thread while the input is read, and on while the
    # run sorts and interns the edges: nothing waits for them until the first compiled
    # call, which numba's compiler lock holds until the thread has loaded that kernel.
    with ThreadPoolExecutor(1) as pool:
        preparing = pool.submit(_timed, _prepare, job)
        with phases.phase("reading the input"):
            result = read_edges(inputs, fmt, options)
            rejects.add(result.rejects)
        beside = f"{NESTED}loading the kernels (beside the reading and the matching's start)"
        phases.add(beside, 0.0)  # listed under the reading
        progress = Progress(result.edges.num_rows, lambda: consume.written)

        def consume_shown(chunk: Any) -> None:
            consume(chunk)
            progress.draw()

        stats = stream_job(job, result.edges, consume_shown, on_progress=progress.advance,
                           count=count, parts=parts)
    phases.add(beside, preparing.result()[1])
    phases.update(stats.phases)
    progress.close()
    warn_absent_labels(job, job.labels_present(result.edges))
    warn_about_input(job, result.edges)
    return stats, result.lines_read, result.edges


def _run_widening(job: ReplayJob, widening: tuple[int, int, int | None], inputs, fmt,
                  options, rejects: RejectLog):
    """``--pww``: progressive window widening in this process."""
    keep, base_us, max_duration_us = widening
    result = read_edges(inputs, fmt, options)
    rejects.add(result.rejects)
    matches, pww = run_widening(job, result.edges, keep=keep, base_us=base_us,
                                max_duration_us=max_duration_us)
    warn_absent_labels(job, job.labels_present(result.edges))
    warn_about_input(job, result.edges)
    stats = RunStats(edges=pww.edges, matches=pww.matches, seconds=pww.seconds,
                     extra=pww.as_dict())
    return matches, stats, result.lines_read, result.edges


def labels_in_frame(job: ReplayJob, edges_df: Any) -> dict[str, set[str]]:
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


def _run_spark(job: ReplayJob, args, fmt, options, rejects: RejectLog, phases: Phases):
    """The run on Spark planned (:func:`~graphcep.runtime.spark.replay.plan_spark`), its
    matches not yet taken; the lines read and the edges."""
    run, _, lines, edges = _spark_matches(job, args, fmt, options, rejects, phases, None)
    return run, lines, edges


def _write_spark_run(run: Any, written: BoundedOutput, args: argparse.Namespace,
                     parts: Counter[str] | None = None) -> RunStats:
    """Take the planned run's matches and write them as they come, or count them
    (``--count``, each part's count -- a rule's -- added to ``parts``): the driver holds
    one task's output at a time, each task making at most one match more than
    ``--max-matches``, enough to tell that the bound was passed
    (:meth:`~graphcep.runtime.spark.replay.SparkRun.batches`)."""
    import pyarrow as pa

    from graphcep.runtime.spark.tasks import counted, counted_parts

    with SparkProgress(run.spark), run.replaying(lambda: written.seconds):
        if args.count:
            found = 0
            for batch in run.batches():
                rows = pa.Table.from_batches([batch])
                found += counted(rows)
                if parts is not None:
                    parts.update(counted_parts(rows))
        else:
            tables = (pa.Table.from_batches([b]) for b in
                      run.batches(limit=args.max_matches + 1))
            written.write_all(tables, run.stats)
            found = written.written
    stopped = run.stats.extra.get("stopped")
    stats = run.finish(found)
    if stopped is not None:
        stats.extra["stopped"] = stopped
    return stats


def _spark_matches(job: ReplayJob, args, fmt, options, rejects: RejectLog, phases: Phases,
                   widening: tuple[int, int, int | None] | None):
    """The job over Spark-read edges: replayed by :func:`run_spark`, or under ``--pww``
    widened with :func:`run_widening_spark` (windows cut in the driver, detected in
    parallel tasks). Files the driver reads itself (Parquet and the sequence formats) are
    read while the JVM starts, and reach Spark only when the plan needs it."""
    from graphcep.runtime.spark.reading import DRIVER_READ_FORMATS

    held = None
    with ThreadPoolExecutor(1) as pool:
        if fmt in DRIVER_READ_FORMATS and widening is None:
            held = pool.submit(_timed, _read_and_prepare, job, args.input, fmt, options)
        with phases.phase("spark start-up (JVM, session)"):
            from graphcep.interrupts import exit_on_interrupt
            from graphcep.runtime.spark import plan_spark, read_edges_spark, spark_session

            t0 = time.perf_counter()
            spark = spark_session(args.master)
            startup = time.perf_counter() - t0
        exit_on_interrupt("nothing was written")  # replaces the SparkContext's handler
        if held is not None:
            with phases.phase("reading the input (waiting for it after the start-up)"):
                result, seconds = held.result()
            phases.add(f"{NESTED}reading the input, loading the kernels (in the driver, "
                       "beside the start-up)", seconds)
    if held is None:
        with phases.phase("planning the read"):
            edges, rejects_df, lines = read_edges_spark(spark, args.input, fmt, options)
    else:
        edges, rejects_df, lines = result.edges, None, result.lines_read
        rejects.add(result.rejects)
    if widening is not None:
        with SparkProgress(spark), phases.phase("widening (windows in parallel tasks)"):
            matches, stats = _widen_on_spark(spark, job, edges, widening)
    elif (args.shards is not None and args.shards > 1 and job.whole_stream
            and job.partition_key() is None):
        # such a job runs as one shard whatever --shards says (run_spark; a keyed job's
        # --shards counts its key partitions): say so, rather than let the summary's
        # "shards": 1 be the only trace of the option
        print(f"graphcep: warning: --shards {args.shards} does not apply to query "
              f"{job.name!r}: it needs the whole stream in one engine, so it runs in one "
              "task", file=sys.stderr)
    if widening is None:  # planned here, replayed as its matches are written
        with SparkProgress(spark):
            matches = plan_spark(spark, job, edges, shards=args.shards, count=args.count)
        stats = matches.stats
    with phases.phase("label check and rejects"):
        warn_about_input(job, edges)
        if rejects_df is None:
            warn_absent_labels(job, job.labels_present(edges))
        else:
            warn_absent_labels(job, labels_in_frame(job, edges))
            bad = rejects_df.toArrow()
            if bad.num_rows:
                rejects.add(bad)
    stats.extra["spark_startup_seconds"] = round(startup, 3)
    return matches, stats, lines, edges


def _timed(work, *args) -> tuple[Any, float]:
    """``work(*args)`` and the seconds it took (it runs beside something else)."""
    started = time.perf_counter()
    result = work(*args)
    return result, time.perf_counter() - started


def _prepare(job: ReplayJob) -> None:
    """The job's kernels loaded, cache hits without numba's compiler around them
    (:func:`~graphcep.engines.kernel_cache.lean_cache_loads`)."""
    from graphcep.engines.kernel_cache import lean_cache_loads

    lean_cache_loads()
    job.prepare()


def _read_and_prepare(job: ReplayJob, inputs, fmt: str, options) -> Any:
    """:func:`read_edges`, then the job's kernels loaded (beside the JVM's start)."""
    result = read_edges(inputs, fmt, options)
    _prepare(job)
    return result


def _widen_on_spark(spark, job: ReplayJob, edges_df,
                    widening: tuple[int, int, int | None]) -> tuple[Any, RunStats]:
    from graphcep.runtime.spark.widening import run_widening_spark

    keep, base_us, max_duration_us = widening
    matches, pww = run_widening_spark(spark, job, edges_df, keep=keep, base_us=base_us,
                                      max_duration_us=max_duration_us)
    return matches, RunStats(edges=pww.edges, matches=pww.matches, seconds=pww.seconds,
                             extra=pww.as_dict())


def _summary(args, job: ReplayJob, stats: RunStats, lines: int,
             rejects: RejectLog) -> dict[str, Any]:
    """The run's summary, as ``--summary json`` prints it."""
    summary = {
        "query": job.name,
        "engine": args.engine,
        **job.summary_fields(),
        "lines": lines,
        "edges": stats.edges,
        "rejected": rejects.count,
        "matches": stats.matches,
        **({"counted": True} if args.count else {}),
        "seconds": round(stats.seconds, 3),
        "edges_per_second": round(stats.edges / stats.seconds) if stats.seconds > 0 else None,
        **stats.extra,
    }
    if args.profile:
        summary["phases"] = {name: round(sec, 3) for name, sec in stats.phases.items()}
    if rejects.count:
        summary["rejects_file"] = str(args.rejects)
    return summary


def _print_summary(args, job: ReplayJob, stats: RunStats, summary: dict[str, Any],
                   rejects: RejectLog) -> None:
    from graphcep.events import counted_noun

    if args.summary == "json":
        print(json.dumps(summary))
        return
    print(
        f"\n{summary['query']}: {counted_noun(stats.matches, 'match', 'matches')} in "
        f"{counted_noun(stats.edges, 'edge')} "
        f"({rejects.count:,} rejected) in {stats.seconds:.2f} s "
        f"({summary['edges_per_second'] or 0:,} edges/s, {args.engine})"
    )
    if args.count:
        print("(matches counted, none written: --count)")
    if "stopped" in stats.extra:
        print(f"stopped at {stats.extra['stopped']}: the first {stats.matches:,} "
              "matches were written")
    if "pww_levels" in stats.extra:
        print("\n".join(level_lines([LevelStats(**level)
                                     for level in stats.extra["pww_levels"]])))
    if "rules" in summary:
        from graphcep.jobs.rules import rule_lines

        print("\n".join(rule_lines(summary["rules"])))
    if rejects.count:
        print(rejects.summary(args.rejects))


# -- explain ----------------------------------------------------------------------------


def cmd_explain(args: argparse.Namespace) -> int:
    """The parsed query, its extent and plan. A valid query explains with status 0: the
    input is not known here, so its fields (features, labels) are checked by ``run``."""
    from graphcep import jobs

    if getattr(args, "dot", None):  # checked before any work, as run checks -o
        check_target(args.dot, "dot", directory=False, role="--dot")
        refuse_overwriting_inputs([args.query], {"--dot": args.dot})
    from graphcep.api import plan_lines

    rules_in_place_of_query(args)
    widening = pww_options(args)  # --pww-base without --pww: named before the query's needs
    kind = getattr(args, "query_kind", None)
    job = jobs.load(args.query, {**job_options(args, None), "explain": True},
                    jobs.kind_named(kind) if kind else None)
    drawing = job.plan_dot() if getattr(args, "dot", None) else None  # refused before the plan
    print("\n".join(plan_lines(job, widening)))
    if drawing is not None:
        with writing(args.dot):  # parent directories created, as for -o
            Path(args.dot).parent.mkdir(parents=True, exist_ok=True)
            Path(args.dot).write_text(drawing)
        print(f"DOT written to {args.dot}")
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
    from graphcep.cli.demo import MIN_EDGES, RATE, run_demo

    if args.edges < MIN_EDGES:  # checked here: the demo module loads only for the demo
        raise QueryError(f"--edges: the demo plants its attacks in at least {MIN_EDGES:,} "
                         f"flows ({MIN_EDGES // RATE} s of them), got {args.edges:,}")
    workdir = Path(args.workdir)
    if workdir.exists() and not workdir.is_dir():
        raise QueryError(f"--workdir {args.workdir}: a file, not a directory (the demo "
                         "writes its stream and matches there)")
    return run_demo(args.edges, args.master, workdir)


# -- helpers ----------------------------------------------------------------------------


def _unwritten(args: argparse.Namespace) -> str:
    """What an interrupted ``run`` leaves of its ``--output`` file: nothing (its one file
    is written under a temporary name and renamed into place when the run ends; see
    ``io.sinks``). A directory of parts keeps the parts written; a device or pipe is
    written in place."""
    output = getattr(args, "output", None)
    if getattr(args, "command", None) not in ("run", "subscribe") or output in (None, "-") \
            or is_directory_target(output) or not Path(output).parent.is_dir() \
            or (Path(output).exists() and not Path(output).is_file()):
        return ""
    return (f"; {output} was not written (an output file appears when the command ends; "
            "a file that was there is kept)")


class Progress:
    """A one-line progress line on stderr, only when stderr is a terminal: the edges
    matched, their rate and the matches written, once the run has taken a second (a run
    whose matches are large can spend minutes in one batch: the written count moves)."""

    def __init__(self, total: int, written: Callable[[], int] = lambda: 0) -> None:
        self.total = max(total, 1)
        self.done = 0
        self.written = written
        self.enabled = sys.stderr.isatty()
        self.started = self._drawn = time.perf_counter()
        self._shown = False

    def advance(self, count: int) -> None:
        self.done += count
        self.draw()

    def draw(self) -> None:
        """Redraw the line, at most four times a second."""
        now = time.perf_counter()
        if not self.enabled or now - self.started < 1 or now - self._drawn < 0.25:
            return
        self._drawn, self._shown = now, True
        share = self.done / self.total
        rate = self.done / (now - self.started)
        bar = "#" * int(30 * share)
        print(f"\r[{bar:<30}] {share:6.1%} {rate:,.0f} edges/s, {self.written():,} matches "
              f"written", end="", file=sys.stderr)

    def close(self) -> None:
        if self._shown:
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
