"""``graphcep stream``: run a SAL or DDST query continuously on Spark Structured Streaming.

::

    graphcep stream QUERY.sal --source DIR --checkpoint CKPT [--output OUT/] [--lateness S]
    graphcep stream QUERY.sal --source tcp://HOST:PORT --checkpoint CKPT
    graphcep stream QUERY.sal --source generator --rate 60000 --vertices 25000 --checkpoint CKPT
    graphcep stream QUERY --source DIR --checkpoint CKPT --pww L [--pww-base T0] [--pww-max-duration D]
    graphcep stream SUBS.subs|SUBS_DIR/ --source DIR --checkpoint CKPT   # watched, see below

Without ``--source``, a program whose stream is ``VastStream("host", port)`` reads that
socket. ``--once`` processes what the source holds now, releases the reorder buffer and
exits (for files: the batch-equivalent run, restartable); otherwise the query runs until
interrupted or ``--run-for`` seconds have passed. ``--pww L`` runs the query in progressive
window widening's windows (:class:`~graphcep.runtime.widening.WidenedJob`): micro-batches
feed level 0, and the levels' batches are checkpointed with the rest. Progress (one line per micro-batch, with
the state held and the pace: matched rate, offered rate and lag where the source knows
them, :class:`~graphcep.runtime.streaming.driver.Pace`) goes to stderr; the summary to stdout
(``--summary json``: one JSON line). ``--max-records-per-batch`` caps the generator's rows
and a socket's lines per micro-batch, so a stream offered more than it can match falls
behind in batches of bounded size (and says so) instead of ever larger ones; a directory
is capped by files (``--max-files-per-trigger``). ``--run-for`` stops between
micro-batches (:class:`~graphcep.runtime.streaming.query.BatchGate`).

In the driver, the stream starts as ``Query.stream`` starts one
(:func:`~graphcep.api_stream.start_matching`): each source gives a streaming DataFrame and
turns its micro-batches into edges, as the API's source turns a user's frame into them.

``--matching`` says where the matching runs: in the driver (the operator of
:mod:`graphcep.runtime.streaming.driver`, every query and source) or in the executors
(:mod:`graphcep.runtime.streaming.cells`: cells as Spark keys -- HyperCube for SAL
queries, keyed for ν-expressions and subscriptions (:mod:`graphcep.runtime.cell_plans`) --
over a directory, Kafka or the generator); ``auto`` picks the driver on ``local[...]``, the
executors on a cluster. Both share the sources, sinks, checkpoint, progress lines and
summary.

A subscriptions file, or a directory of ``.subs`` files, is watched (read once with
``--matching executors``, whose cells hold its engines): its changes are
applied between micro-batches (:mod:`graphcep.jobs.subscription_watch`), one line on
stderr per change set (``graphcep: subscriptions: +2 -1 (s.subs, from stream position
N): ...``) or refused edit; the checkpoint accepts the edited file. A restart whose
source does not parse (or is missing) resumes with the checkpoint's subscriptions, says so
in one line, and applies the source once it parses.

``--metrics-port`` and ``--ui-port`` serve the stream's numbers while it runs
(:mod:`graphcep.monitor`): Prometheus metrics and a live page, fed by the same report of
each micro-batch as the progress lines, in both matching modes.

Files of the whole-file formats (``.seq``, ``.tes``, ``.syscall``) arriving in a directory
are read as ``graphcep run`` reads them: a plain sequence's positions and a trace's times
run on from the edges the stream read before. A socket sends lines, not files: these
formats are refused there in one line, as is a format the query does not read (a ``.tes``
file arriving for a query that does not read it is quarantined as a reject).
"""

from __future__ import annotations

import argparse
import contextlib
import hashlib
import json
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from graphcep.cli.kafka import (
    add_kafka_arguments,
    check_kafka_targets,
    has_end,
    kafka_source,
    kafka_transactions,
    part_writer,
    refuse_kafka_options,
    spark_conf,
)
from graphcep.cores import usable_cores
from graphcep.engines.base import StateBoundError
from graphcep.events import counted_noun, seconds_to_us
from graphcep.interrupts import exit_on_interrupt, signals_kept
from graphcep.io.formats import LINE_FORMATS, RECORD_FORMATS
from graphcep.io.readers import WHOLE_FILE_FORMATS
from graphcep.io.sinks import (
    SinkError,
    check_target,
    make_sink,
    refuse_files_among_parts,
    sink_format,
    writing,
)
from graphcep.io.time_text import clock_for
from graphcep.jobs.base import DeclaredSource, ReplayJob
from graphcep.lang.errors import QuerySyntaxError
from graphcep.patterns.subgraph import QueryError
from graphcep.pictures.report import REPORT_MATCHES, check_picture_targets
from graphcep.runtime.streaming.checkpoint_bytes import CheckpointDamaged
from graphcep.runtime.streaming.driver import (
    SNAPSHOT_INTERVAL_S,
    Pace,
    PartWriter,
    StreamOperator,
    print_report,
    print_warnings,
)
from graphcep.runtime.streaming.query import (
    BatchFailure,
    claim_checkpoint,
    has_finished_batches,
    system_failed,
)
from graphcep.runtime.streaming.sources import DEFAULT_MAX_RECORDS, StreamFailure
from graphcep.timing import NESTED, Phases

FORMATS = (*LINE_FORMATS, "parquet", *WHOLE_FILE_FORMATS, *RECORD_FORMATS)


#: The most HyperCube cells a stream may ask for: each cell is an engine and a share of
#: every micro-batch's routing, and far more cells than cores only add that overhead.
MAX_CELLS = 1024

#: ``--source generator``'s settings when not given.
GENERATOR_DEFAULTS = {"rate": 10_000, "vertices": 5_000, "seed": 1}

#: The examples that end ``graphcep stream --help``.
STREAM_EXAMPLES = """\
examples:
  graphcep stream examples/triangle.sal --source incoming/ --format vast --checkpoint ckpt/ \\
      --output matches/ --lateness 5
  graphcep stream examples/triangle.sal --source generator --rate 10000 --checkpoint ckpt/ \\
      --run-for 30
  graphcep stream examples/triangle.sal --source incoming/ --checkpoint ckpt/ --once
  graphcep stream examples/subs/probes.subs --source incoming/ --checkpoint ckpt/
"""


def add_parser(sub: Any) -> None:
    """Register the ``stream`` subcommand on the CLI's subparsers (every value is checked
    here, before Spark starts)."""
    from graphcep.cli.options import (
        CONSOLE_LIMIT,
        add_ddst_arguments,
        add_input_arguments,
        add_nu_arguments,
        add_pww_arguments,
        add_rules_arguments,
        add_sal_arguments,
        add_spark_arguments,
        add_state_bound_argument,
    add_stream_match_bound_argument,
        add_subscription_arguments,
        add_summary_argument,
        count_option,
        group_options,
        nonnegative_seconds,
        path_option,
        positive_seconds,
        seconds_option,
        with_examples,
    )
    stream = sub.add_parser("stream", help="match a query (SAL, DDST, ν-expression, "
                                           "subscriptions) continuously (Structured "
                                           "Streaming)", **with_examples(STREAM_EXAMPLES))
    stream.add_argument("query", nargs="?",
                        help="query file; a subscriptions file (.subs) or a directory of "
                             "them is watched, its changes applied between micro-batches "
                             "(or --rules)")
    add_rules_arguments(stream, live=True)
    stream.add_argument("--source", type=path_option, help="DIR (files arriving), tcp://HOST:PORT, "
                                         "kafka://BROKERS/TOPICS, or generator "
                                         "(default: the program's VastStream socket)")
    stream.add_argument("--checkpoint", required=True, type=path_option,
                        help="directory for offsets and state; restart with the same one")
    stream.add_argument("--output", "-o", default="-", type=path_option,
                        help="OUT/ (JSONL part per micro-batch), OUT.parquet/, OUT.dot/ "
                             "(Graphviz) or - (console)")
    stream.add_argument("--lateness", default="0", type=seconds_option, metavar="SECONDS",
                        help="seconds an edge may trail the newest one and still be matched "
                             "(default 0)")
    stream.add_argument("--late", type=path_option, help="directory for late edges (default CHECKPOINT/late)")
    stream.add_argument("--rejects", type=path_option, help="directory for malformed lines (default CHECKPOINT/rejects)")
    stream.add_argument("--format", "-f", choices=FORMATS, help="input format (default: from names)")
    add_input_arguments(stream)
    stream.add_argument("--trigger", type=nonnegative_seconds, default=0.0, metavar="SECONDS",
                        help="seconds between micro-batches (default 0: back to back)")
    stream.add_argument("--snapshot-interval", type=nonnegative_seconds, metavar="SECONDS",
                        help="seconds between snapshots of engines that are more than a "
                             "window (several rules, subscriptions, vertex features, "
                             "anchored or unbounded ν, a widening); "
                             "between them each micro-batch checkpoints only its edges, "
                             "which a restart replays (default "
                             f"{SNAPSHOT_INTERVAL_S:g}; 0: every micro-batch)")
    stream.add_argument("--max-files-per-trigger", type=count_option(1), metavar="N",
                        help="files source: at most N new files per micro-batch (default: "
                             "all that arrived)")
    stream.add_argument("--max-records-per-batch", type=count_option(1), metavar="N",
                        help="generator, socket and Kafka: at most N rows, lines or records per "
                             "micro-batch; "
                             "what is due beyond waits at the source, its lag on the "
                             "progress lines (default "
                             f"{DEFAULT_MAX_RECORDS:,}; a directory's files are taken whole: "
                             "--max-files-per-trigger)")
    add_kafka_arguments(stream)
    stream.add_argument("--once", action="store_true",
                        help="process what is there, release the reorder buffer, exit")
    stream.add_argument("--run-for", type=positive_seconds, metavar="SECONDS",
                        help="stop after this many seconds (default: run until interrupted)")
    stream.add_argument("--rate", type=count_option(1),
                        help=f"generator: edges per second (default {GENERATOR_DEFAULTS['rate']})")
    stream.add_argument("--vertices", type=count_option(2),
                        help="generator: vertices, at least 2 (default "
                             f"{GENERATOR_DEFAULTS['vertices']})")
    stream.add_argument("--seed", type=count_option(0),
                        help=f"generator: seed, 0 or more (default {GENERATOR_DEFAULTS['seed']})")
    add_spark_arguments(stream)
    add_sal_arguments(stream)
    add_ddst_arguments(stream)
    add_nu_arguments(stream)
    add_subscription_arguments(stream)
    add_state_bound_argument(stream)
    add_stream_match_bound_argument(stream)
    add_pww_arguments(stream, streaming=True)
    stream.add_argument("--cells", type=count_option(1, MAX_CELLS + 1), metavar="N",
                        help="match on a HyperCube grid of at most N cells (1 to "
                             f"{MAX_CELLS:,}), each an engine in a worker process or Spark "
                             "task (SAL queries without features)")
    stream.add_argument("--processes", type=count_option(1), metavar="P",
                        help="worker processes for --cells (default: one per cell, at most "
                             "the CPU count)")
    stream.add_argument("--matching", choices=("driver", "executors", "auto"), default="auto",
                        help="where the matching runs: driver (one engine, or --cells in "
                             "driver processes), executors (--cells N HyperCube cells as "
                             "Spark keys, their state in Spark's state store; SAL queries "
                             "without features over --source DIR, kafka:// or generator) or auto "
                             "(default: driver on local[...], executors on a cluster master "
                             "where the query and source allow)")
    stream.add_argument("--profile", action="store_true",
                        help="print where the time went (Spark start-up, micro-batches, "
                             "end-of-input flush) and the matching mode, on stderr; with "
                             "--summary json also as \"phases\" in the summary")
    stream.add_argument("--limit", type=count_option(0), metavar="N",
                        help=f"matches printed on the console (default {CONSOLE_LIMIT})")
    stream.add_argument("--quiet", action="store_true", help="no per-batch progress lines")
    stream.add_argument("--timeline", type=path_option, metavar="FILE.png",
                        help="plot the micro-batches: edges in the window and the buffer, "
                             "late edges, each batch's seconds")
    stream.add_argument("--report", type=path_option, metavar="FILE.html",
                        help="write one self-contained HTML page of this start: the query, "
                             "its plan, the summary, the timeline, the first matches drawn, "
                             "the rejects")
    add_summary_argument(stream)
    port = count_option(0, 65536)
    stream.add_argument("--metrics-port", type=port, metavar="PORT",
                        help="serve Prometheus metrics at http://HOST:PORT/metrics while the "
                             "stream runs (0: a free port, named on stderr)")
    stream.add_argument("--ui-port", type=port, metavar="PORT",
                        help="serve a live page at http://HOST:PORT/: the counts, each "
                             "rule's, rates and lag over time, rejects by reason, the newest "
                             "matches drawn")
    stream.add_argument("--monitor-host", metavar="HOST",
                        help="the address --metrics-port and --ui-port listen on (default "
                             "127.0.0.1: this machine only; 0.0.0.0 for every interface)")
    stream.set_defaults(handler=cmd_stream)
    group_options(stream)


def validate_output(args: argparse.Namespace) -> None:
    """Check ``--output``, ``--late`` and ``--rejects`` before Spark starts: directories of
    parts (:func:`_sink`) that can be created (``-o /dev/null`` is refused in one line,
    not after start-up)."""
    kafka = check_kafka_targets(args)
    if args.output not in (None, "-") and "output" not in kafka:
        check_target(args.output, sink_format(args.output) or "jsonl", directory=True)
    from graphcep.cli.options import console_limit

    args.limit = console_limit(args, args.output)
    for role in ("late", "rejects"):
        if getattr(args, role) is not None and role not in kafka:
            check_target(getattr(args, role), "jsonl", directory=True, role=f"--{role}")
    check_picture_targets(args, None if args.output in (None, "-") else args.output)


def refuse_writing_into_source(args: argparse.Namespace, source: Any) -> None:
    """Nothing the stream writes (its checkpoint, matches, late edges, rejects, pictures)
    nor the query file may lie in the directory it watches: every file there is read as
    edges, so the stream would read its own output (or query) as input. Nor may a
    directory of parts be the checkpoint itself, nor hold it, the late edges or the
    rejects (:func:`~graphcep.io.sinks.refuse_files_among_parts`)."""
    from graphcep.runtime.streaming.sources import FileSource

    roles = {"--checkpoint": args.checkpoint, "--output": args.output, "--late": args.late,
             "--rejects": args.rejects, "--report": args.report,
             "--timeline": args.timeline, "the query file": args.query}
    checkpoint = Path(args.checkpoint).resolve()
    for role in ("--output", "--late", "--rejects"):  # parts beside Spark's own files
        if roles[role] not in (None, "-") and Path(roles[role]).resolve() == checkpoint:
            raise SinkError(f"{role} {roles[role]} is the checkpoint directory, which holds "
                            "the stream's state: name a directory of its own")
    refuse_files_among_parts(None if args.output in (None, "-") else args.output,
                             {role: roles[role] for role in ("--checkpoint", "--late",
                                                             "--rejects")})
    if not isinstance(source, FileSource):
        return
    watched = Path(source.path).resolve()
    for role, target in roles.items():
        if target in (None, "-"):
            continue
        path = Path(target).resolve()
        if path == watched or watched in path.parents:
            raise SinkError(f"{role} {target} lies in --source {args.source}, whose every "
                            "file the stream reads as edges: put it outside that directory")


def cmd_stream(args: argparse.Namespace) -> int:
    """Run the stream; failures end it with one line on stderr (2: the input, the query or
    the checkpoint; 3: a state bound; 130: interrupted), the checkpoint at the last
    finished micro-batch."""
    with signals_kept(), _watched(args) as live:
        return _stream(args, live)


@contextlib.contextmanager
def _watched(args: argparse.Namespace) -> Iterator[Any]:
    """``--metrics-port`` and ``--ui-port``: the live numbers (a
    :class:`~graphcep.monitor.live.LiveNumbers`, None without those options), served
    while the stream runs; the ports are bound first, so one in use is one line before
    any work (:mod:`graphcep.monitor.server`)."""
    ports = {option: port for option, port in (("--metrics-port", args.metrics_port),
                                               ("--ui-port", args.ui_port))
             if port is not None}
    if not ports:
        if args.monitor_host is not None:
            raise QueryError("--monitor-host says where --metrics-port and --ui-port "
                             "listen: give one of them")
        yield None
        return
    from graphcep.monitor.live import LiveNumbers
    from graphcep.monitor.server import DEFAULT_HOST, Monitor

    live = LiveNumbers(Path(args.query or args.rules or "stream").stem)
    monitor = Monitor(live, ports, args.monitor_host or DEFAULT_HOST)
    monitor.start()
    print(f"graphcep: {monitor.describe()}", file=sys.stderr, flush=True)
    try:
        yield live
    finally:
        monitor.stop()


def _stream(args: argparse.Namespace, live: Any = None) -> int:
    from graphcep.api_stream import widened_job
    from graphcep.cli.options import rules_in_place_of_query, warn_absent_labels
    from graphcep.jobs.options import pww_options
    from graphcep.pictures.runs import KeepFirst
    from graphcep.pictures.timelines import StreamProgress
    from graphcep.runtime.spark import spark_session
    from graphcep.runtime.streaming.query import quiet_query_errors
    from graphcep.runtime.streaming.sources import FileSource, SocketSource
    from graphcep.runtime.widening.report import explain_lines

    rules_in_place_of_query(args)
    validate_output(args)
    if not (args.source or "").startswith("kafka://"):  # before a control topic is read
        refuse_kafka_options(args, args.source or "the program's VastStream")
    widening = pww_options(args)  # --pww-base without --pww: refused before the query
    exit_on_interrupt("nothing was started" + _pictures_note(args, "not written"))
    job, resumed = _load_job(args, args.format)
    source = make_source(args, job.declared_source())
    refuse_writing_into_source(args, source)
    fmt = getattr(source, "fmt", None) or args.format
    if fmt != args.format:  # field names resolve to the columns of the source's format
        job, resumed = _load_job(args, fmt)
    planned = job  # the plan the report shows: explain's, widening included
    job = widened_job(job, widening)
    _check_format(fmt, job, source)
    if args.once and args.run_for is not None:
        raise QueryError("--once stops when the directory's files are read and --run-for "
                         "after SECONDS: give one of them")
    if args.once and not isinstance(source, FileSource) and not has_end(source):
        raise QueryError(f"--once reads what a directory or Kafka topic holds now; "
                         f"{source.describe()} has no end to read to: use --run-for SECONDS")
    # subscriptions: changes applied between micro-batches, in the driver; the executors'
    # cells read the file once (the checkpoint then holds its text)
    watch = None if args.matching == "executors" else job.watch(args.query)
    if watch is not None and resumed:  # the source's trouble, said once
        for note in watch.check():
            print(f"graphcep: {note}", file=sys.stderr)
    # before Spark starts: a wrong option fails at once
    matching = matching_mode(args, job, source, watched=watch is not None)
    attrs = None
    if matching == "executors":
        try:
            attrs = _cell_attributes(job, source)
        except QueryError:
            if args.matching == "executors":
                raise
            matching = "driver"  # auto: the driver reads whatever fields arrive
    cells = _cells(args, job) if matching == "driver" else {}
    checkpoint = Path(args.checkpoint)
    claim_checkpoint(checkpoint, source.describe(), _query_identity(args, job),
                     _query_digest(args, watched=watch is not None, matching=matching))
    transactions = kafka_transactions(args, checkpoint, job.name)
    sink = _sink(args, job, transactions)
    if args.report is not None:  # the report draws the first matches
        sink = KeepFirst(sink, REPORT_MATCHES)
    if live is not None:  # the live page draws the newest
        sink = live.matches.wrap(sink)
        live.matches.clock = clock_for(getattr(args, "time_format", None))
    started = time.perf_counter()
    phases = Phases()
    with phases.phase("spark start-up"):
        spark = spark_session(args.master, conf=spark_conf(source))
    socket = isinstance(source, SocketSource)
    progress = StreamProgress(started)  # the micro-batches, for --timeline and --report
    on_report = _recording(print_warnings if args.quiet else print_report, progress, live)
    running: list[tuple[Any, str]] = []  # the matching under way, and its description

    def pictures(summary: dict[str, Any]) -> None:
        _stream_pictures(args, explain_lines(planned, widening), summary, progress, sink)

    def so_far() -> str:
        """On Ctrl-C: the summary and the pictures of the micro-batches finished."""
        if not running:
            return ""
        operator, mode = running.pop()
        summary = _print_summary(args, job, operator, time.perf_counter() - started,
                                 checkpoint, mode)
        try:
            pictures(summary)
        except Exception as err:  # a full disk, a picture that cannot be drawn
            return _pictures_note(args, f"not written ({_reason(err)})")
        return _pictures_note(args, "written from the micro-batches finished")

    exit_on_interrupt("every finished micro-batch is checkpointed, run the same command "
                      "to continue" + ("; socket lines not yet matched are lost" if socket
                                       else ""), last=so_far)
    quiet_query_errors(spark)
    if attrs is not None:
        return _stream_cells(args, job, source, spark, sink, attrs, (started, phases),
                             on_report, (pictures, running), live)
    operator = StreamOperator(
        job,
        lateness_us=seconds_to_us(args.lateness),
        checkpoint=checkpoint,
        sink=sink,
        late_sink=part_writer("late", args.late or checkpoint / "late", transactions),
        reject_sink=_counted_rejects(live, part_writer("rejects", args.rejects or checkpoint
                                                       / "rejects", transactions)),
        commit=transactions.commit if transactions is not None else None,
        # the engine runs in the driver: as many search threads as the master has cores
        threads=max(1, min(spark.sparkContext.defaultParallelism, usable_cores())),
        watch=watch,
        max_matches=args.max_matches,
        snapshot_interval=(SNAPSHOT_INTERVAL_S if args.snapshot_interval is None
                           else args.snapshot_interval),
        **cells,
    )
    mode = "driver" + (f", {cells['cells']} cells in driver processes" if cells else "")
    if live is not None:
        live.follow(operator, job.name)
    running.append((operator, mode))
    try:
        try:
            with phases.phase("micro-batches"):
                _drive(spark, operator, source, args, on_report, transactions)
        finally:
            sink.close()
        running.clear()  # from here the ordinary summary and pictures
        if operator.labels_seen:  # a DDST query over labelled edges since this start
            warn_absent_labels(job, operator.labels_seen)
        pictures(_print_summary(args, job, operator, time.perf_counter() - started,
                                checkpoint, mode, phases))
        return 0
    except (BatchFailure, StreamFailure) as failure:
        return _report_failure(failure)
    finally:
        operator.close()  # after the summary, which reads the cells' state


def _recording(on_report: Any, progress: Any, live: Any = None) -> Any:
    """``on_report``, noting each micro-batch in ``progress`` too (for the pictures) and in
    ``live`` (the monitor's numbers), if any."""

    def report(batch: Any) -> None:
        on_report(batch)
        progress.record(batch, time.perf_counter())
        if live is not None:
            live.observe(batch)

    return report


def _counted_rejects(live: Any, writer: Any) -> Any:
    """The rejects' writer, counting them by reason for the monitor (``live``), if any."""
    return writer if live is None else live.rejects.wrap(writer)


def _pictures_note(args: argparse.Namespace, outcome: str) -> str:
    """The end of the interrupted stream's line: its pictures, and ``outcome``."""
    drawn = [f"{option} {path}" for option, path in (("--report", args.report),
                                                    ("--timeline", args.timeline)) if path]
    if not drawn:
        return ""
    return f"; {' and '.join(drawn)} {outcome}"


def _reason(err: Exception) -> str:
    """An error in a few words: ``No space left on device: r.html``."""
    if isinstance(err, OSError) and err.strerror:
        return err.strerror + (f": {err.filename}" if err.filename else "")
    return " ".join(str(err).split()) or type(err).__name__


def _stream_pictures(args: argparse.Namespace, plan: list[str], summary: dict[str, Any],
                     progress: Any, sink: Any) -> None:
    """``--timeline`` and ``--report``, after the summary."""
    from graphcep.pictures.runs import stream_report
    from graphcep.pictures.timelines import plot_stream

    if args.timeline is not None:
        with writing(args.timeline):
            plot_stream(progress, args.timeline)
    if args.report is not None:
        with writing(args.report):
            stream_report(args.report, query=args.query, plan=plan, summary=summary,
                          progress=progress, first=sink.rows(),
                          rejects_dir=summary["rejects_dir"],
                          clock=clock_for(getattr(args, "time_format", None)))


def matching_mode(args: argparse.Namespace, job: ReplayJob, source: Any,
                  watched: bool = False) -> str:
    """``--matching`` resolved to ``driver`` or ``executors`` (``auto``: executors on a
    cluster master where the query and the source allow it, else the driver); an explicit
    ``executors`` the query or source cannot run is refused in one line."""
    refusal = _executors_refusal(args, job, source, watched)
    if args.matching == "executors":
        if refusal is not None:
            raise QueryError(f"--matching executors: {refusal}; use --matching driver")
        return "executors"
    if args.matching == "auto" and not args.master.startswith("local") and refusal is None:
        return "executors"
    return "driver"


def _executors_refusal(args: argparse.Namespace, job: ReplayJob, source: Any,
                       watched: bool) -> str | None:
    """Why the executor mode cannot run this stream (None: it can)."""
    from graphcep.runtime.streaming.kafka_source import KafkaSource
    from graphcep.runtime.streaming.sources import FileSource, GeneratorSource

    if getattr(args, "max_matches", None) is not None:
        return "--max-matches counts the stream's matches in the driver"
    if getattr(args, "pww", None) is not None:
        return "--pww runs in the driver"
    if getattr(args, "snapshot_interval", None) is not None:
        return "--snapshot-interval paces the driver's snapshots (cells store each batch)"
    if watched:
        return "a watched query (subscriptions, --rules) is applied in the driver"
    if any(str(getattr(args, role, None)).startswith("kafka://")
           for role in ("output", "late", "rejects")):
        return "a Kafka output commits one transaction per micro-batch in the driver"
    try:
        job.cell_split()  # a QueryError where no split into cells is exact
    except QueryError as err:
        return (f"the cells run a query whose stream splits into them exactly, and "
                f"{Path(args.query).name} does not ({' '.join(str(err).split())})")
    if not isinstance(source, (FileSource, GeneratorSource, KafkaSource)):
        return (f"the executors read a directory (--source DIR), Kafka or the generator, "
                f"not {source.describe()}")
    if getattr(source, "report_data_loss", False):
        return "--on-data-loss report compares each micro-batch's offsets in the driver"
    if args.processes is not None:
        return "--processes sets driver processes; in the executors each cell is a Spark task"
    return None


def _cell_attributes(job: ReplayJob, source: Any) -> Any:
    from graphcep.runtime.streaming.cells_run import attributes_for

    return attributes_for(job, source)  # type: ignore[arg-type]


def _stream_cells(args: argparse.Namespace, job: Any, source: Any, spark: Any, sink: Any,
                  attrs: Any, clock: tuple[float, Phases], on_report: Any,
                  ending: tuple[Any, list[tuple[Any, str]]], live: Any = None) -> int:
    """The stream with the matching in the executors (:mod:`~graphcep.runtime.streaming.cells`),
    started by :func:`~graphcep.api_stream.start_cells` (the cells ``Query.match`` runs on
    a streaming DataFrame): the same sources, sinks, checkpoint, progress lines and
    summary as the driver mode."""
    from graphcep.api_stream import start_cells
    from graphcep.runtime.streaming.cells_run import CellsRun
    from graphcep.runtime.streaming.kafka_source import KafkaSource
    from graphcep.runtime.streaming.query import await_query, stop_between_batches

    started, phases = clock
    checkpoint = Path(args.checkpoint)
    run = CellsRun(job, cells=args.cells, default_cells=spark.sparkContext.defaultParallelism,
                   lateness_us=seconds_to_us(args.lateness), checkpoint=checkpoint, attrs=attrs,
                   on_report=on_report, profile=args.profile, source=source,
                   sinks={"matches": sink,
                          "late": PartWriter(args.late or checkpoint / "late"),
                          "rejects": _counted_rejects(live, PartWriter(
                              args.rejects or checkpoint / "rejects"))})
    run.resume()
    if live is not None:
        live.follow(run, job.name)
    pictures, running = ending  # the pictures' drawing; Ctrl-C's summary reads ``running``
    running.append((run, run.describe()))
    try:
        try:
            with phases.phase("micro-batches"):
                query = start_cells(spark, run, source, once=args.once,
                                    trigger_seconds=args.trigger or None)
                try:
                    await_query(query, run, None if args.once else args.run_for, source)
                finally:
                    stop_between_batches(query, run)
            if run.profile is not None:  # the batches' parts, under them
                phases.update(run.profile.phases(), prefix=NESTED)
            if args.once:
                with phases.phase("end-of-input flush"):
                    run.flush(spark)
        finally:
            sink.close()
            if isinstance(source, KafkaSource):  # its offsets client
                source.close()
        running.clear()
        pictures(_print_summary(args, job, run, time.perf_counter() - started, checkpoint,
                                run.describe(), phases))
        return 0
    except (BatchFailure, StreamFailure) as failure:
        return _report_failure(failure)


def _report_failure(failure: Exception) -> int:
    """One line for what stopped the stream; 3 for a state bound, else 2."""
    from graphcep.runtime.streaming.query import BatchFailure, one_line

    if not isinstance(failure, BatchFailure):
        print(f"graphcep: {failure}", file=sys.stderr)
        return 2
    cause = failure.cause
    if isinstance(cause, CheckpointDamaged):  # a restart would fail the same way
        print(f"graphcep: micro-batch {failure.batch_id}: {cause}", file=sys.stderr)
        return 2
    known = isinstance(cause, (QueryError, StateBoundError, OSError))
    reason = " ".join(str(cause).split()) if known else one_line(cause)
    if system_failed(cause):  # the file named, as the command line names it
        reason = _reason(cause)
    print(f"graphcep: micro-batch {failure.batch_id}: {reason} (not committed: the checkpoint "
          f"holds the micro-batches before it, and a restart runs it again)", file=sys.stderr)
    if isinstance(cause, StateBoundError):
        return 3
    return 1 if system_failed(cause) else 2


def _drive(spark: Any, operator: StreamOperator, source: Any, args: argparse.Namespace,
           on_report: Any, transactions: Any = None) -> None:
    """Match ``source`` with ``operator`` through :func:`~graphcep.api_stream.start_matching`
    (the start ``Query.stream`` uses): ``--once`` to the end of what is there, else until
    ``--run-for`` or an interrupt, stopping between micro-batches. ``transactions``: the
    Kafka output's, if any (a socket stream numbers its batches and lines after the last
    micro-batch it delivered)."""
    from graphcep.api_stream import start_matching
    from graphcep.runtime.streaming.kafka_source import KafkaSource
    from graphcep.runtime.streaming.query import restart_socket_checkpoint
    from graphcep.runtime.streaming.sources import SocketSource

    checkpoint = Path(args.checkpoint)
    operator.pace = Pace(getattr(source, "rate", None), getattr(source, "max_records", None))
    offset = 0
    if isinstance(source, SocketSource):
        delivered = transactions.delivered_batch() if transactions is not None else None
        # the sink delivered a batch whose state was not saved: its lines are passed over
        ahead = delivered is not None and delivered > operator.resume()
        offset, lost = restart_socket_checkpoint(
            operator, checkpoint, delivered,
            transactions.delivered_lines() if transactions is not None else None)
        if lost and ahead:
            print(f"graphcep: warning: {lost:,} lines from {source.describe()} were lost "
                  f"for later matches: micro-batch {delivered} delivered their matches, "
                  "but the last run stopped before saving its state, and a socket cannot "
                  "send them again", file=sys.stderr)
        elif lost:
            print(f"graphcep: warning: {lost:,} lines from {source.describe()} were lost: "
                  "the last run stopped in a micro-batch before matching them, and a socket "
                  "cannot send them again", file=sys.stderr)
    running = start_matching(spark, operator, source, checkpoint=checkpoint, once=args.once,
                             trigger_seconds=None if args.once else args.trigger or None,
                             on_report=on_report, batch_offset=offset,
                             pace=None if args.once else operator.pace)
    try:
        if not args.once:
            try:
                running.awaitTermination(args.run_for)
            finally:  # --run-for: after the micro-batch under way (a stop inside breaks it)
                running.stop()
    finally:  # a socket's connection, a Kafka source's offsets client
        if isinstance(source, (SocketSource, KafkaSource)):
            source.close()


def _query_identity(args: argparse.Namespace, job: ReplayJob) -> str:
    where = args.query if args.query.startswith("kafka://") else Path(args.query).resolve()
    return f"{where} ({job.name})"


def _query_digest(args: argparse.Namespace, watched: bool = False,
                  matching: str = "driver") -> str:
    """The query text and the options that change which matches it finds, or where their
    state lives (the executor mode); not the text of a ``watched`` query (subscriptions:
    edits are applied, not refused)."""
    options = {name: getattr(args, name, None) for name in (
        "query_name", "window", "max_duration", "homomorphic", "format", "time_unit",
        "time_format", "header", "ddst_engine", "signature_p", "signature_seed", "ddst_report",
        "anchored", "key", "symbol")}
    if getattr(args, "columns", None) is not None:  # absent otherwise: earlier digests stand
        options["columns"] = args.columns
    if getattr(args, "pww", None) is not None:  # absent otherwise: earlier digests stand
        options.update({name: getattr(args, name) for name in (
            "pww", "pww_base", "pww_max_duration")})
    if getattr(args, "time", "field") != "field":  # absent otherwise: earlier digests stand
        options["time"] = args.time
    if matching == "executors":  # absent otherwise: earlier digests stand
        options["matching"] = matching  # the cells' budget: CHECKPOINT/cells/grid.json
    digest = hashlib.sha256(b"watched" if watched else _query_bytes(args.query))
    digest.update(json.dumps(options, sort_keys=True, default=str).encode())
    return digest.hexdigest()


def _query_bytes(path: str) -> bytes:
    """The query's text as its checkpoint records it: the file, or a directory of
    ``.subs`` files (their names and texts)."""
    if not Path(path).is_dir():
        return Path(path).read_bytes()
    from graphcep.lang.sequences import read_subscriptions_source

    return repr(read_subscriptions_source(path)).encode()


def make_source(args: argparse.Namespace, declared: DeclaredSource | None) -> Any:
    """The source named by ``--source`` (or the one the query text declares: a SAL
    program's ``VastStream("host", port)``)."""
    from graphcep.cli.options import reader_options  # one rule for run and stream
    from graphcep.runtime.streaming.sources import FileSource, GeneratorSource, SocketSource

    options = reader_options(args)  # --time-unit, --time-format, --header and --columns
    cap = args.max_records_per_batch or DEFAULT_MAX_RECORDS
    text = args.source
    if text is None:
        if declared is None:
            raise QueryError("give --source: DIR, tcp://HOST:PORT or generator (the query "
                             "declares no stream of its own, such as a SAL program's "
                             "VastStream(\"host\", port))")
        return SocketSource(declared.host, declared.port, args.format or declared.fmt,
                            options, max_records=cap)
    given = {name: getattr(args, name) for name in GENERATOR_DEFAULTS}
    if text == "generator":
        settings = {name: GENERATOR_DEFAULTS[name] if value is None else value
                    for name, value in given.items()}
        return GeneratorSource(settings["vertices"], settings["rate"], settings["seed"],
                               max_records=cap, trigger_seconds=args.trigger or None)
    flags = [f"--{name}" for name, value in given.items() if value is not None]
    if flags:
        verb = "shapes" if len(flags) == 1 else "shape"
        raise QueryError(f"{', '.join(flags)} {verb} the generator's edges (--source "
                         f"generator); --source {text} brings its own")
    if text.startswith("kafka://"):
        return kafka_source(args, text, options, cap)
    if text.startswith("tcp://"):
        host, _, port = text[len("tcp://"):].rpartition(":")
        if not host or not port.isdigit() or not 0 < int(port) < 65536:
            raise QueryError(f"--source {text!r}: expected tcp://HOST:PORT, a port from 1 "
                             "to 65535")
        return SocketSource(host, int(port), args.format or "vast", options, max_records=cap)
    if not Path(text).is_dir():
        raise FileNotFoundError(f"--source {text!r}: no such directory (files arrive in a "
                                "directory; use tcp://HOST:PORT for a socket)")
    if args.max_records_per_batch is not None:
        raise QueryError("--max-records-per-batch: a directory's files are taken whole (a "
                         "micro-batch's files are what a restart reads again): cap them "
                         "with --max-files-per-trigger N")
    return FileSource(str(Path(text).resolve()), args.format, options, args.max_files_per_trigger)


def _load_job(args: argparse.Namespace, fmt: str | None) -> tuple[ReplayJob, bool]:
    """The query as a job, and whether it resumes without its file. A subscriptions
    source that cannot be read or parsed at a restart (a checkpoint with finished
    micro-batches) is no reason to stop: the engine resumes with the subscriptions the
    checkpoint holds (an empty set here; the engine's own come from its snapshot) and the
    watch applies the source once it parses."""
    from graphcep import jobs
    from graphcep.jobs.options import job_options
    from graphcep.jobs.sequences import with_options
    from graphcep.patterns.sequences import SubscriptionSet

    options = job_options(args, fmt)
    if getattr(args, "query_kind", None) == "rules":
        return _live_rules(args, options), False
    try:
        return jobs.load(args.query, options), False
    except (QuerySyntaxError, OSError):
        if jobs.kind_of(args.query).name != "subs" or args.pww is not None or \
                getattr(args, "matching", None) == "executors" or \
                not has_finished_batches(Path(args.checkpoint)):
            raise  # read once, not watched: widened (WidenedJob.watch), or in the cells
    return with_options(SubscriptionSet(Path(args.query).stem, ()), options), True


def _live_rules(args: argparse.Namespace, options: dict[str, Any]) -> ReplayJob:
    """The rules directory as a job whose rules change while the stream runs: the files
    that load now (the watch says, at the first micro-batch, which do not)."""
    from graphcep.jobs import rules

    if args.pww is not None:
        raise QueryError("--pww widens one query; --rules runs several: run the rule alone "
                         "to widen it")
    history = None if args.history is None else seconds_to_us(args.history)
    if args.query.startswith("kafka://"):  # a control topic: its records are the files
        from graphcep.runtime.streaming.kafka_client import (
            check_client_settings,
            client_settings,
        )
        from graphcep.runtime.streaming.kafka_source import kafka_options
        from graphcep.runtime.streaming.rules_topic import live_job

        settings = client_settings(kafka_options(args.kafka_option))
        check_client_settings(settings)  # one line where librdkafka refuses one
        return live_job(args.query, options, history, args.accept_partial, settings)
    return rules.load(args.query, options, strict=False).live(history, args.accept_partial)


def _check_format(fmt: str | None, job: ReplayJob, source: Any) -> None:
    """Refuse a format the query does not read, and a whole-file format (``tes``, ``seq``,
    ``syscall``) from anything but a directory: a sequence's positions and a trace's times
    run on from file to file, where a socket sends lines."""
    from graphcep.jobs.base import format_refusal
    from graphcep.runtime.streaming.sources import FileSource

    refusal = format_refusal(job, fmt)
    if refusal is not None:
        raise QueryError(refusal)
    if fmt in WHOLE_FILE_FORMATS and not isinstance(source, FileSource):
        raise QueryError(f"--format {fmt} is read a whole file at a time: give --source DIR "
                         f"(files arriving in a directory), not {source.describe()}")
    if fmt in RECORD_FORMATS and not isinstance(source, FileSource) \
            and not source.describe().startswith("kafka://"):
        raise QueryError(f"--format {fmt} holds binary messages, not lines: give --source "
                         f"DIR or kafka://..., not {source.describe()}")


def _cells(args: argparse.Namespace, job: ReplayJob) -> dict[str, int]:
    """``--cells`` / ``--processes`` for the operator, checked against the query."""
    if args.cells is None:
        if args.processes is not None:
            raise QueryError("--processes goes with --cells")
        return {}
    try:
        job.cell_query()
    except QueryError as err:
        raise QueryError(f"--cells partitions SAL queries by their vertex variables: {err}"
                         ) from None
    if args.cells < 1 or (args.processes is not None and args.processes < 1):
        raise QueryError("--cells and --processes must be at least 1")
    return {"cells": args.cells, "processes": args.processes}


def _sink(args: argparse.Namespace, job: ReplayJob, transactions: Any = None) -> Any:
    """Console, a Kafka topic (:mod:`~graphcep.runtime.streaming.kafka_sink`), or a directory of one
    part per micro-batch, in the format its name gives
    (:func:`~graphcep.io.sinks.sink_format`), else JSONL."""
    matches = job.output.with_clock(clock_for(getattr(args, "time_format", None)))
    if transactions is not None and "output" in transactions.topics:
        from graphcep.runtime.streaming.kafka_sink import KafkaMatchSink

        return KafkaMatchSink(transactions, matches)
    if args.output in (None, "-"):
        return make_sink(None, limit=args.limit, matches=matches)
    fmt = sink_format(args.output) or "jsonl"
    return make_sink(args.output, fmt, directory=True, matches=matches)


def _print_summary(args: argparse.Namespace, job: ReplayJob, operator: Any,
                   seconds: float, checkpoint: Path, matching: str,
                   phases: Phases | None = None) -> dict[str, Any]:
    """The summary of a stream (``operator``: a StreamOperator, or the executor mode's
    :class:`~graphcep.runtime.streaming.cells_run.CellsRun`), returned too; ``--profile``'s
    table on stderr."""
    totals = operator.totals
    levels = _level_stats(operator)
    summary = {
        "query": job.name,
        **totals.as_dict(),
        "state": operator.state_size(),
        "seconds": round(seconds, 3),
        "late_dir": str(args.late or checkpoint / "late"),
        "rejects_dir": str(args.rejects or checkpoint / "rejects"),
        "matching": matching,
    }
    pace = getattr(operator, "pace", None)
    if pace is not None:  # records a second, offered and matched, and the lag
        summary.update(pace.as_dict())
    if getattr(operator, "partition_lag", None):  # a Kafka source: records not read yet
        summary["partition_lag"] = operator.partition_lag
    if getattr(operator, "records_lost", None):  # and those deleted before they were read
        summary["records_lost"] = operator.records_lost
    if args.profile and phases is not None:
        summary["phases"] = {name: round(sec, 3) for name, sec in phases.seconds.items()}
        print(phases.table(seconds) + f"\nmatching: {matching}", file=sys.stderr)
    if levels is not None:  # L, T0 and D, then what each level did
        summary["pww"] = job.summary_fields()["pww"]
        summary["pww_levels"] = [level.as_dict() for level in levels]
    rule_summary = getattr(operator.engine if hasattr(operator, "engine") else None,
                           "rule_summary", None)
    if rule_summary is not None:  # --rules: each rule's version, kind and matches
        summary["rules"] = rule_summary()
    if args.summary == "json":
        print(json.dumps(summary))
        return summary
    print(f"\n{summary['query']}: {counted_noun(totals.matches, 'match', 'matches')} in "
          f"{counted_noun(totals.edges, 'edge')} over "
          f"{counted_noun(totals.batches, 'micro-batch', 'micro-batches')} ({totals.late:,} late, {totals.rejected:,} "
          f"rejected) in {seconds:.1f} s; matching in the {matching}")
    if levels is not None:
        from graphcep.runtime.widening.report import level_lines

        print("\n".join(level_lines(levels)))
    if totals.late:
        print(f"late edges: {summary['late_dir']}")
    if totals.rejected:
        print(f"malformed lines: {summary['rejects_dir']}")
    if pace is not None and pace.records:
        print(pace_summary(summary))
    if totals.lost:
        print(f"socket lines lost to interrupted micro-batches: {totals.lost:,}")
    if "rules" in summary:
        from graphcep.jobs.rules import rule_lines

        print("\n".join(rule_lines(summary["rules"])))
    if "partition_lag" in summary:
        from graphcep.runtime.streaming.driver import lag_text

        print(f"records not read yet, by partition: {lag_text(summary['partition_lag'])}")
    if "records_lost" in summary:
        lost = "; ".join(f"{place} offsets {', '.join(ranges)}"
                         for place, ranges in summary["records_lost"].items())
        print(f"records deleted before they were read: {lost}")
    return summary


def pace_summary(summary: dict[str, Any]) -> str:
    """The summary's line on the pace: records a second matched, against the offered
    rate and with the lag where known.

    >>> pace_summary({"matched_rate": 1500.0, "offered_rate": 2000, "lag_s": 4.0,
    ...               "max_lag_s": 4.5, "backlog": 8000})
    'pace: 1,500 records/s matched of 2,000/s offered; lag 4.0 s at the end (8,000 records behind), at most 4.5 s'
    """
    text = f"pace: {summary['matched_rate'] or 0:,.0f} records/s matched"
    if summary.get("offered_rate"):
        text += f" of {summary['offered_rate']:,.0f}/s offered"
    if summary.get("lag_s") is not None:
        behind = (f" ({summary['backlog']:,} records behind)"
                  if summary.get("backlog") is not None else "")
        text += (f"; lag {summary['lag_s']:.1f} s at the end{behind}, at most "
                 f"{summary['max_lag_s']:.1f} s")
    return text


def _level_stats(operator: StreamOperator) -> list[Any] | None:
    """What each level of a widening did, over the whole stream (None: no widening)."""
    from graphcep.runtime.widening import Widening

    engine = operator.engine
    return engine.stats() if isinstance(engine, Widening) else None
