"""The command line's options, shared by ``run``, ``explain`` and ``stream``.

Every value is checked by its argparse type before any work (before Spark starts, before
the input is read); :func:`graphcep.jobs.options.job_options` turns the parsed options into what
:func:`graphcep.jobs.load` reads, as it turns the Python API's keyword arguments, so
each command and the API load a query the same way.
"""

from __future__ import annotations

import argparse
import math
import os
import re
import sys
from pathlib import Path
from typing import Any

from graphcep.engines.ddst.schema import REPORT_MODES
from graphcep.events import TimeFormatError, seconds_to_us
from graphcep.io.formats import ReaderOptions
from graphcep.jobs.base import ReplayJob
from graphcep.jobs.ddst import DDST_ENGINES, DEFAULT_DDST_ENGINE
from graphcep.patterns.subgraph import MAX_BOUND_US, QueryError
from graphcep.runtime.local import DEFAULT_MAX_MATCHES


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


def field_option(text: str) -> str:
    """A field name (``--key``, ``--symbol``): not empty (an empty one would silently
    mean the default field)."""
    if not text.strip():
        raise argparse.ArgumentTypeError("expected a field name, got an empty one")
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


def count_option(least: int, below: int = 2**63) -> Any:
    """An argparse type: a whole number of at least ``least`` and under ``below`` (by
    default the int64 range, which counts reach Arrow and NumPy in)."""

    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
        if value < least:
            raise argparse.ArgumentTypeError(f"expected at least {least}, got {value}")
        if value >= below:
            raise argparse.ArgumentTypeError(f"expected at most {below - 1:,}, got {value:,}")
        return value

    parse.__name__ = f"whole number >= {least}"
    return parse


def add_sal_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of SAL queries (``run``, ``explain`` and ``stream``)."""
    parser.add_argument("--query-name", metavar="NAME[,NAME...]",
                        help="which SUBGRAPH statements of the SAL program to run, "
                             "comma-separated (default: all of them, over one read of the "
                             "stream; each match names its query)")
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


def add_pww_arguments(parser: argparse.ArgumentParser, *, streaming: bool = False) -> None:
    """Progressive window widening (``run``, ``explain`` and, ``streaming``, ``stream``)."""
    where = ("micro-batches feed level 0; the levels are checkpointed" if streaming else
             "windows detected in parallel Spark tasks; in-process with --engine local")
    parser.add_argument("--pww", type=count_option(1), metavar="L",
                        help="progressive window widening: run the query in doubling "
                             "windows, for patterns of unknown duration; L is the most "
                             f"records an instance spans ({where})")
    parser.add_argument("--pww-base", type=seconds_option, metavar="SECONDS",
                        help="--pww: the base batch duration T0 (default 1)")
    parser.add_argument("--pww-max-duration", type=seconds_option, metavar="SECONDS",
                        help="--pww: the longest duration of an instance, fixing the number "
                             "of levels (default: levels are added as the stream grows)")


#: The Spark master when ``--master`` is not given: embedded, every core.
DEFAULT_MASTER = "local[*]"


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """Where Spark runs (``run``, ``stream``, ``demo``, ``motifs``). ``--master`` is None
    when not given (:func:`master_given` tells; :func:`resolve_master` sets the default),
    so that a command can refuse it where Spark does not run."""
    parser.add_argument("--master", type=master_option,
                        help="Spark master: local[*] (default, embedded), local[N] or "
                             "spark://host:7077")


def master_given(args: argparse.Namespace) -> bool:
    """Whether ``--master`` was given (before :func:`resolve_master`, or after it)."""
    return bool(getattr(args, "master_given", getattr(args, "master", None) is not None))


def resolve_master(args: argparse.Namespace) -> None:
    """``--master`` defaults to :data:`DEFAULT_MASTER`; ``args.master_given`` records
    whether it was given."""
    if hasattr(args, "master"):
        args.master_given = master_given(args)
        args.master = args.master or DEFAULT_MASTER


def add_input_arguments(parser: argparse.ArgumentParser, *,
                        time_unit_help: str | None = None) -> None:
    """How input lines are read (``run``, ``stream`` and ``motifs``, which gives its own
    ``time_unit_help``: there δ is in that unit too)."""
    parser.add_argument("--time-unit", choices=("s", "ms", "us"),
                        help=time_unit_help or "unit of numeric times in the input: s "
                                               "(default), ms or us; a Parquet file's "
                                               "integer t and dur are in its own unit, "
                                               "else us, unless this is given")
    parser.add_argument("--time-format", choices=("number", "iso", "auto"), default="number",
                        help="times in the input: number (default; seconds, or --time-unit), "
                             "iso (ISO-8601 date-times, UTC unless a zone is given) or auto "
                             "(either, line by line)")
    parser.add_argument("--header", action=argparse.BooleanOptionalAction, default=None,
                        help="csv/tsv: line 1 is (--header) or is not (--no-header) a "
                             "header (default: decided from the file's first lines)")
    parser.add_argument("--columns", type=columns_option, metavar="t=COL,src=COL,dst=COL",
                        help="csv/tsv/snap/parquet: the columns holding each edge's time, "
                             "source and destination (and dur), by header name or 0-based "
                             "position (default: columns named t, src, dst, or time, from, "
                             "to ...; without a header source, destination, time by "
                             "position)")


def reader_options(args: argparse.Namespace) -> ReaderOptions:
    """The readers' options from :func:`add_input_arguments`."""
    return ReaderOptions(time_unit=args.time_unit, time_format=args.time_format,
                         header=args.header, columns=args.columns)


#: The edge fields ``--columns`` places (``dur`` optional).
COLUMN_FIELDS = ("t", "src", "dst", "dur")


def columns_option(text: str) -> dict[str, str | int]:
    """``--columns t=time,src=from,dst=to[,dur=length]``: the file column holding each
    edge field, by its header name or its 0-based position.

    >>> columns_option("t=time, src=from,dst=2")
    {'t': 'time', 'src': 'from', 'dst': 2}
    """
    mapping: dict[str, str | int] = {}
    for part in text.split(","):
        field, sep, ref = (x.strip() for x in part.partition("="))
        if not sep or not field or not ref:
            raise argparse.ArgumentTypeError(
                f"expected FIELD=COLUMN pairs joined by commas (t=time,src=from,dst=to), "
                f"got {part.strip()!r}")
        if field not in COLUMN_FIELDS:
            raise argparse.ArgumentTypeError(
                f"unknown edge field {field!r}: the fields are t, src, dst and dur")
        if field in mapping:
            raise argparse.ArgumentTypeError(f"{field} is placed twice")
        mapping[field] = int(ref) if ref.isdigit() else ref
    missing = [f for f in COLUMN_FIELDS[:3] if f not in mapping]
    if missing:
        raise argparse.ArgumentTypeError(
            f"{' and '.join(missing)} not placed: name the columns of t, src and dst "
            "(and of dur, if the file has one)")
    if len(set(mapping.values())) < len(mapping):
        raise argparse.ArgumentTypeError("one column is given for two fields")
    return mapping


def add_summary_argument(parser: argparse.ArgumentParser) -> None:
    """The summary at the end (``run`` and ``stream``)."""
    parser.add_argument("--summary", choices=("text", "json"), default="text",
                        help="summary at the end: text (default) or json (one JSON line, "
                             "the last of stdout)")


def add_state_bound_argument(parser: argparse.ArgumentParser) -> None:
    """The engines' state bound (``run``, ``explain`` and ``stream``; SAL and DDST)."""
    parser.add_argument("--max-window-edges", type=int, metavar="N",
                        help="state bound: most edges an engine may hold at once (a SAL "
                             "engine: its window plus the batch being matched); past it the "
                             "run stops with exit status 3 and a message (default: SAL "
                             "50000000, DDST 1000000)")


def add_match_bound_arguments(parser: argparse.ArgumentParser) -> None:
    """How many matches a run may write, and counting them instead (``run``, ``subscribe``)."""
    parser.add_argument("--max-matches", type=count_option(1), metavar="N",
                        default=DEFAULT_MAX_MATCHES,
                        help="output bound: past N matches the run stops, the N written "
                             "stay, with exit status 3 and a message (default "
                             f"{DEFAULT_MAX_MATCHES:,}; --count counts any number)")
    parser.add_argument("--count", action="store_true",
                        help="count the matches, writing none (no match record is made: "
                             "the SAL search counts them); the summary gives the count")


def add_stream_match_bound_argument(parser: argparse.ArgumentParser) -> None:
    """How many matches a stream may write over its whole life (``stream``)."""
    parser.add_argument("--max-matches", type=count_option(1), metavar="N",
                        help="output bound over the whole stream, kept in the checkpoint: "
                             "the micro-batch that would pass N matches is not committed "
                             "and the stream stops with exit status 3 and a message "
                             "(default: no bound)")


def refuse_count_outputs(args: argparse.Namespace) -> None:
    """``--count`` writes no match: an output, pictures or a page of matches beside it
    would be empty, so they are refused (one line, before any work)."""
    if not getattr(args, "count", False):
        return
    given = [flag for flag, on in (
        ("--output", args.output not in (None, "-")), ("--draw", bool(args.draw)),
        ("--timeline", args.timeline is not None), ("--report", args.report is not None),
    ) if on]
    if given:
        raise QueryError(f"--count makes no match records, so {', '.join(given)} would have "
                         "none: leave out --count to write them (or the other option)")


def add_ddst_arguments(parser: argparse.ArgumentParser) -> None:
    """The DDST engine and its options (``run``, ``explain`` and ``stream``)."""
    parser.add_argument("--ddst-engine", choices=tuple(DDST_ENGINES),
                        help=f"algorithm for DDST queries (default {DEFAULT_DDST_ENGINE}; all "
                             "three report the same matches)")
    parser.add_argument("--signature-p", type=count_option(2, below=2**31), metavar="P",
                        help="signature engine: the prime modulus of its label values "
                             "(default 997; smaller: fewer words, more verifications)")
    parser.add_argument("--signature-seed", type=count_option(0), metavar="S",
                        help="signature engine: seed of its random label values (default 0)")
    parser.add_argument("--ddst-report", choices=REPORT_MODES,
                        help="what a report holds: the whole match component (default), or "
                             "only its pairs no earlier report held")


def warn_about_input(job: ReplayJob, edges: Any) -> None:
    """One line on stderr per thing about the input (an Arrow table or a Spark frame)
    that the job says silently stops it from matching."""
    warnings = getattr(job, "input_warnings", None)  # a job without JobBase has none
    for line in warnings(edges) if warnings is not None else ():
        print(f"graphcep: warning: query {job.name!r}: {line}", file=sys.stderr)


class OutputWarnings:
    """A sink that says what the job finds worth a warning in the matches it writes
    (:meth:`~graphcep.jobs.base.ReplayJob.output_warnings`: a DDST run's reports of whole
    giant components), once, at the first chunk that shows it, then writes to ``sink``
    (everything else is the sink's own): the user hears it while the run goes on, not
    after hours of it."""

    def __init__(self, sink: Any, job: ReplayJob) -> None:
        self.sink = sink
        self._job: ReplayJob | None = job

    def write(self, table: Any, *args: Any, **kwargs: Any) -> Any:
        warnings = getattr(self._job, "output_warnings", None)
        lines = warnings(table) if warnings is not None and table.num_rows else []
        for line in lines:
            print(f"graphcep: warning: query {self._job.name!r}: {line}", file=sys.stderr,
                  flush=True)
        if lines:
            self._job = None  # said once
        return self.sink.write(table, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)


def warn_absent_labels(job: ReplayJob, present: dict[str, set[str]]) -> None:
    """One line on stderr when a query label never occurs: the run's 0 matches then say
    nothing about the pattern, only about the labelling."""
    absent = job.absent_labels(present)
    if absent:
        print(f"graphcep: warning: query {job.name!r}: no edge of the input carries "
              f"{', '.join(absent)}, so the query edges wanting them cannot match",
              file=sys.stderr)


def add_nu_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of ν-expressions (``run``, ``explain`` and ``stream``)."""
    parser.add_argument("--max-tokens", type=count_option(1), metavar="N",
                        help="ν-expressions: state bound, the most tokens the engine may hold; "
                             "past it the run stops with exit status 3 naming the pattern "
                             "part no delay bounds (default 2000000 compiled, 200000 "
                             "interpreted)")
    parser.add_argument("--nu-engine", choices=("auto", "compiled", "interpreted"),
                        help="ν-expressions: the compiled token game (numba; search mode, "
                             "one node per variable, a bounded number of links per match) or "
                             "the interpreted one (every pattern and mode); both report the "
                             "same matches. Default auto: compiled where it can run")
    parser.add_argument("--anchored", action="store_true",
                        help="ν-expressions: match from the stream's first link, reading "
                             "every link (the paper's tool's semantics; default: a match "
                             "may start at any link and skip unrelated links)")


def add_subscription_arguments(parser: argparse.ArgumentParser) -> None:
    """Options of subscriptions files (``run``, ``explain`` and ``stream``)."""
    parser.add_argument("--key", metavar="FIELD", type=field_option,
                        help="subscriptions: the field splitting the stream into one "
                             "sequence per value (default src)")
    parser.add_argument("--symbol", metavar="FIELD", type=field_option,
                        help="subscriptions: the field giving each edge's symbol "
                             "(default dst)")
    parser.add_argument("--subs-engine", choices=("compiled", "tree", "naive"),
                        help="subscriptions: one compiled trie of all patterns (default), "
                             "the paper's pattern tree, or one KMP_var per subscription; "
                             "all report the same notifications")


def add_rules_arguments(parser: argparse.ArgumentParser, live: bool = False) -> None:
    """``--rules DIR`` in place of the query file (``run`` and ``stream``); ``live``: the
    options of rules that change while a stream runs."""
    parser.add_argument("--rules", metavar="DIR", type=path_option,
                        help="every query file in DIR (.sal, .nu, .ddst, .subs; each SUBGRAPH "
                             "of a SAL program a rule of its own) over one read of the "
                             "stream; each match names its rule and version"
                             + ("; the directory is watched: a file added, changed or "
                                "removed takes effect at the next micro-batch; or "
                                "kafka://BROKER/TOPIC, a control topic whose records are "
                                "the files (key: the name, value: the text, null: removed)"
                                if live else ""))
    if not live:
        return
    parser.add_argument("--history", type=seconds_option, metavar="SECONDS",
                        help="--rules: event time of released edges kept to warm a rule "
                             "added while the stream runs (default: the largest extent "
                             "among the rules at start); a rule wider is refused")
    parser.add_argument("--accept-partial", action="store_true",
                        help="--rules: add a rule wider than --history anyway, with a "
                             "warning naming the matches it misses")


def rules_in_place_of_query(args: argparse.Namespace) -> None:
    """``--rules DIR`` as the command's query (its kind ``rules``); one of the two must be
    given, not both."""
    rules = getattr(args, "rules", None)
    if rules is None:
        if args.query is None:
            raise QueryError("give a query file, or a directory of them with --rules DIR")
        for flag, given in (("--history", getattr(args, "history", None) is not None),
                            ("--accept-partial", getattr(args, "accept_partial", False))):
            if given:
                raise QueryError(f"{flag} applies to --rules DIR (rules added while the "
                                 "stream runs)")
        return
    if args.query is not None:
        raise QueryError(f"give a query file or --rules DIR, not both ({args.query} and "
                         f"--rules {rules})")
    args.query, args.query_kind = rules, "rules"


#: Where rejected lines go without --rejects (in the current directory).
DEFAULT_REJECTS = "rejects.jsonl"
#: --rejects' help, for every command that reads input.
REJECTS_HELP = ("where malformed lines go, with line number and reason (default "
                "rejects.jsonl); written when a line is rejected, and emptied when a run "
                "without rejects finds an earlier run's file there")

#: Matches the console prints when ``--limit`` does not say.
CONSOLE_LIMIT = 20


def console_limit(args: argparse.Namespace, output: str | None) -> int:
    """``--limit``: how many matches the console prints (:data:`CONSOLE_LIMIT` when not
    given). With a file or directory ``output`` the console prints none and every match
    is written, so a ``--limit`` given there is refused rather than ignored.

    Raises :class:`~graphcep.io.sinks.SinkError`."""
    from graphcep.io.sinks import SinkError

    if args.limit is None:
        return CONSOLE_LIMIT
    if output not in (None, "-"):
        raise SinkError(f"--limit {args.limit} caps the matches printed on the console; "
                        f"-o {output} gets every match (leave out one of them)")
    return args.limit


def refuse_overwriting_inputs(inputs: list[str], targets: dict[str, str | None]) -> None:
    """Refuse an output that is one of the input files (or the query file): writing it
    would destroy what the run reads (``-o flows.jsonl`` for ``--input flows.jsonl``); and
    two outputs naming one file (``-o m.jsonl --timeline m.jsonl``: one would overwrite
    the other). Raises :class:`~graphcep.io.sinks.SinkError`."""
    from graphcep.io.readers import expand_paths
    from graphcep.io.sinks import SinkError

    targets = {role: Path(t) for role, t in targets.items() if t not in (None, "-")}
    seen: dict[Path, str] = {}
    for role, target in targets.items():
        other = seen.setdefault(target.resolve(), role)
        if other != role:
            raise SinkError(f"{other} and {role} both name {str(target)!r}: one would "
                            "overwrite the other; name another file")
    existing = {role: t for role, t in targets.items() if t.is_file()}
    if not existing:
        return
    for path in expand_paths(inputs, once=False):  # the query file may be among them
        if not os.path.exists(path):  # a Kafka topic, a file missing (said where it is read)
            continue
        for role, target in existing.items():
            if os.path.samefile(path, target):
                # the rejects file's default lands in the current directory: run from
                # inside an input directory, an earlier run left it among the inputs
                earlier = (" (the default rejects file, left among the inputs by an "
                           "earlier run from this directory: pass --rejects PATH outside them)"
                           if role == "rejects" and str(target) == DEFAULT_REJECTS else "")
                raise SinkError(f"{role} {str(target)!r} is an input of the run{earlier}; "
                                "writing it would destroy the input: name another file")


# -- help: option groups and examples ---------------------------------------------------

#: How ``--help`` lists the options of ``run``, ``subscribe``, ``explain``, ``stream`` and
#: ``motifs``: by what they are about, the query kinds each in a group of its own. Keys
#: are group titles, values option destinations; a command shows the groups it has
#: options of (:func:`group_options`).
OPTION_GROUPS: dict[str, tuple[str, ...]] = {
    "input": ("input", "source", "format", "time_unit", "time_format", "header", "columns"),
    "output": ("output", "output_format", "dot", "rejects", "late", "limit", "count", "quiet",
               "summary", "draw", "draw_dir", "timeline", "report", "profile"),
    "streaming": ("checkpoint", "lateness", "trigger", "snapshot_interval",
                  "max_files_per_trigger",
                  "max_records_per_batch", "once", "run_for"),
    "watching a stream live": ("metrics_port", "ui_port", "monitor_host"),
    "Kafka (--source kafka://BROKERS/TOPICS)": ("starting_offsets", "kafka_option",
                                                "kafka_jars", "time", "on_data_loss",
                                                "broker_wait"),
    "the generator as a source (--source generator)": ("rate", "vertices", "seed"),
    "motif counts": ("delta", "per_vertex"),
    "SAL queries (.sal)": ("query_name", "window", "max_duration", "homomorphic"),
    "DDST event patterns (.ddst)": ("ddst_engine", "signature_p", "signature_seed",
                                    "ddst_report"),
    "ν-expressions (.nu, .autom)": ("nu_engine", "anchored"),
    "subscriptions (.subs)": ("key", "symbol", "subs_engine"),
    "many rules (--rules DIR)": ("rules", "history", "accept_partial"),
    "window widening (--pww, for any query kind)": ("pww", "pww_base", "pww_max_duration"),
    "Spark": ("engine", "master", "shards", "cells", "processes", "matching"),
    "state bounds (past one, the run stops with exit status 3)": ("max_window_edges",
                                                                   "max_tokens",
                                                                   "max_matches"),
}


def group_options(parser: argparse.ArgumentParser,
                  groups: dict[str, tuple[str, ...]] = OPTION_GROUPS) -> None:
    """List the parser's options in ``--help`` under the titled ``groups``, in their order.

    The options stay defined where they are (the ``add_*_arguments`` functions add them to
    every command that takes them); a group is only a heading in the help, so each
    option named in ``groups`` moves from argparse's general list to its group's (its
    ``_group_actions``: argparse has no public call that moves an option). An option no
    group names stays under "options"; a group with no option of this command is left
    out."""
    actions = {action.dest: action for action in parser._optionals._group_actions}
    for title, dests in groups.items():
        present = [actions[dest] for dest in dests if dest in actions]
        if not present:
            continue
        group = parser.add_argument_group(title)
        for action in present:
            parser._optionals._group_actions.remove(action)
            group._group_actions.append(action)


#: The heading that opens every command's examples (its ``--help`` epilog).
EXAMPLES_HEADING = "examples:"


class ExamplesHelpFormatter(argparse.HelpFormatter):
    """argparse's help, with the examples at its end printed as written (one command a
    line, aligned) and the description still wrapped to the terminal: argparse's
    RawDescriptionHelpFormatter would keep both as written."""

    def _fill_text(self, text: str, width: int, indent: str) -> str:
        if text.startswith(EXAMPLES_HEADING):
            return argparse.RawDescriptionHelpFormatter._fill_text(self, text, width, indent)
        return super()._fill_text(text, width, indent)


def with_examples(examples: str) -> dict[str, Any]:
    """The ``add_parser`` arguments that end a command's ``--help`` with ``examples``."""
    return {"epilog": examples, "formatter_class": ExamplesHelpFormatter}
