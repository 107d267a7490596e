"""Many detection rules over one stream: a directory of query files of every kind, read
once, one engine per rule (rules that differ only in a bound share one:
:meth:`~graphcep.jobs.base.ReplayJob.shared_form`), rules added, changed and removed while
the stream runs.

A *rule* is one query of a query file in the rules directory (``.sal``, ``.nu``,
``.regex``, ``.autom``, ``.ddst``, ``.subs``): the file's name, or ``file.sal#NAME`` for
each SUBGRAPH of a SAL program with several. Its *version* is a hash of the file's text
(and the SUBGRAPH's name): an edit makes a new version.

:class:`RulesJob` is a :class:`~graphcep.jobs.composite.CompositeJob` whose members may
be of different kinds: their matches go out in one envelope (:data:`RULE_MATCHES`) --
the rule, its version, its kind, the identity and times of the match, and the kind's own
record in the column of its record kind (``sal``: SAL and ν matches, ``ddst``, ``subs``).
The stream is read, parsed, sorted and reordered once for all rules, and each batch's
vertex names hashed once (:func:`_shared_inputs`); each engine numbers the distinct names
of the edges it reads.

Live rules (:class:`RulesEngine`, :class:`RulesWatch`)
-------------------------------------------------------
Let the watermark be τ when a change is applied (every edge before τ released, none
after). The engine keeps a shared *history*: the released edges of the last
``history_us`` of event time.

* **Added** at τ: a new engine, warmed from the history, reports exactly the matches a
  batch run of the rule over the whole stream reports whose last edge is at or after τ
  (every engine reports a match when its last edge arrives). Exact when the rule's
  extent fits the history (or the history still holds the whole stream); a rule whose
  extent does not fit is refused in one line, or with ``accept_partial`` added with a
  warning naming what it misses: the matches that began more than the history before τ.
* **Removed** at τ: reports nothing from τ on (its matches whose last edge is before τ
  were reported before).
* **Changed**: removed and added at the same τ -- the old version reports the matches
  ending before τ, the new one those ending at or after τ, none twice.
* **Broken** (a file that does not parse): one line ``file:line:col: ...``, once per
  content; the last good version of its rules keeps running, the other rules go on.

The rule set, each rule's text, version and effective point, the history and every
engine's state are the engine's snapshot: the stream's checkpoint holds them, so a
restart continues with the rules in force at the checkpoint and applies what changed
meanwhile at the checkpoint's watermark.

Example
-------
>>> import os, tempfile, pyarrow as pa
>>> rules_dir = tempfile.mkdtemp()
>>> _ = open(os.path.join(rules_dir, "pair.sal"), "w").write(
...     "{ x e1 y; y e2 x; starttime(e1) < starttime(e2); "
...     "starttime(e2) - starttime(e1) <= 5; }")
>>> _ = open(os.path.join(rules_dir, "two.nu"), "w").write("<#X ~> #Y . Y ~> X>[0, 5]")
>>> job = load(rules_dir, {})
>>> [(rule.name, rule.kind) for rule in job.rules]
[('pair.sal', 'sal'), ('two.nu', 'nu')]
>>> from graphcep.runtime.local import run_job
>>> edges = pa.table({"t": [0, 1_000_000], "src": ["a", "b"], "dst": ["b", "a"]})
>>> sorted(run_job(job, edges)[0].column("rule").to_pylist())
['pair.sal', 'two.nu']
"""

from __future__ import annotations

import hashlib
import json
import pickle
import tempfile
from collections import Counter
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from itertools import chain
from numbers import Real
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.cores import usable_cores
from graphcep.engines.base import (
    MATCH_CHUNK_ROWS,
    ChunkedPushes,
    Engine,
    SnapshotError,
    StateBoundError,
    T,
    in_order,
    joined_chunks,
)
from graphcep.engines.difference_bounds import UnboundedQueryError
from graphcep.events import encoded_vertices, format_seconds, sort_stream
from graphcep.io.sinks import SAL_MATCHES, MatchFormat
from graphcep.io.time_text import SECONDS
from graphcep.jobs.base import Extent, Instances, ReplayJob
from graphcep.jobs.composite import CompositeJob
from graphcep.lang.errors import QuerySyntaxError
from graphcep.patterns.subgraph import QueryError

__all__ = ["RULE_MATCHES", "Rule", "RulesEngine", "RulesJob", "RulesWatch", "load",
           "read_rules"]

#: Engines of its own a rules directory has none: each rule runs an engine of its kind's
#: (the registry's ``ENGINES``, each checked by the engine protocol's tests).
ENGINES: dict[str, tuple[str, str]] = {}

#: The version of :meth:`RulesEngine.snapshot`'s layout.
_SNAPSHOT_VERSION = 2
_NEVER = np.iinfo(np.int64).min
#: rule names shown in one line, at most
_SHOWN = 8
#: The most released edges the history holds unless ``--max-window-edges`` says: the
#: bound of one SAL engine's window (an edge of history costs about as much).
DEFAULT_HISTORY_EDGES = 50_000_000


def _record_formats() -> dict[str, MatchFormat]:
    """Each record kind's format: SAL and ν matches are SAL-shaped."""
    from graphcep.jobs.ddst import DDST_MATCHES
    from graphcep.jobs.sequences import SUBS_MATCHES

    return {"sal": SAL_MATCHES, "ddst": DDST_MATCHES, "subs": SUBS_MATCHES}


#: The record kind of each rule kind (the envelope's column holding its record).
RECORD_OF = {"sal": "sal", "nu": "sal", "ddst": "ddst", "subs": "subs"}


# -- rules ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Rule:
    """One query of the rules directory, with what a restart needs to rebuild it."""

    name: str
    version: str
    kind: str
    #: the file's name in the rules directory, and its text (the version's source)
    file: str
    text: str
    job: ReplayJob = field(compare=False, repr=False)


def version_of(text: str, query: str = "") -> str:
    """A rule's version: the first 12 hex digits of the SHA-256 of its file's text (and
    its SUBGRAPH's name)."""
    return hashlib.sha256(f"{query}\0{text}".encode()).hexdigest()[:12]


def query_suffixes() -> set[str]:
    """The file suffixes read as rules: every kind's."""
    from graphcep.jobs import KINDS

    return {suffix for kind in KINDS for suffix in kind.suffixes}


def read_rules(directory: str | Path, options: Mapping[str, Any],
               known: dict[tuple[str, str], list[Rule]] | None = None
               ) -> tuple[dict[str, list[Rule]], dict[str, str], list[str]]:
    """The rules of every query file in ``directory``, by file; why each file that
    cannot be read as rules cannot (one line, ``file:line:col`` where it applies); and the
    names of the files without a query suffix (not read). ``known``: the rules of files
    read before, by name and text (a file whose text is the same is not parsed again;
    the files read now replace its content)."""
    folder = Path(directory)
    if str(directory).startswith("kafka://"):
        raise QueryError(f"--rules {directory}: a control topic holds the rules of a stream "
                         "(graphcep stream); give run a directory of query files")
    if not folder.is_dir():
        raise QueryError(f"--rules {directory}: not a directory of query files")
    suffixes = query_suffixes()
    by_file: dict[str, list[Rule]] = {}
    broken: dict[str, str] = {}
    ignored: list[str] = []
    seen: dict[tuple[str, str], list[Rule]] = {}
    for path in sorted(p for p in folder.iterdir() if p.is_file()):
        if path.name.startswith(".") or path.suffix.lower() not in suffixes:
            ignored.append(path.name)
            continue
        try:
            text = path.read_text(encoding="utf-8-sig")
            rules = (known or {}).get((path.name, text)) or rules_of_file(path, text, options)
            by_file[path.name] = seen[(path.name, text)] = rules
        except (QuerySyntaxError, QueryError, OSError, UnicodeDecodeError) as err:
            broken[path.name] = _one_line(err, path)
    if known is not None:
        known.clear()
        known.update(seen)
    return by_file, broken, ignored


def rules_of_file(path: Path, text: str, options: Mapping[str, Any]) -> list[Rule]:
    """The rules of the query file ``path`` whose text is ``text``: one, or one per
    SUBGRAPH of a SAL program with several."""
    from graphcep import jobs

    kind = jobs.kind_of(str(path))
    job = jobs.load(str(path), _options_for(kind.name, options), kind)
    members = job.members if isinstance(job, CompositeJob) else (job,)
    if len(members) == 1:
        return [Rule(path.name, version_of(text), kind.name, path.name, text, members[0])]
    return [Rule(f"{path.name}#{member.name}", version_of(text, member.name), kind.name,
                 path.name, text, member) for member in members]


def _options_for(kind_name: str, options: Mapping[str, Any]) -> dict[str, Any]:
    """The command line's options a rule of kind ``kind_name`` reads: the common ones and
    its kind's own (another kind's options are for that kind's rules)."""
    from graphcep.jobs import KINDS

    others = {option for kind in KINDS if kind.name != kind_name for option in kind.options}
    own = next(kind.options for kind in KINDS if kind.name == kind_name)
    return {key: value for key, value in options.items() if key not in others or key in own}


def _one_line(err: Exception, path: Path) -> str:
    """An error about the file ``path`` in one line that names the file."""
    line = " ".join(str(err).splitlines()[0].split()) if str(err) else type(err).__name__
    return line if path.name in line else f"{path.name}: {line}"


def load(path: str, options: Mapping[str, Any], strict: bool = True) -> RulesJob:
    """The rules directory ``path`` as one job (``--rules DIR``): refused in one line when
    a file cannot be read as rules, or when it holds none. Not ``strict`` (a stream,
    whose rules change): the rules of the files that load, none at all allowed (the
    stream's watch says which files are broken)."""
    by_file, broken, ignored = read_rules(path, options)
    if not strict:
        rules = [rule for file_rules in by_file.values() for rule in file_rules]
        return RulesJob(rules, directory=path, options=options, ignored=ignored)
    if broken:
        raise QueryError(next(iter(broken.values())) +
                         (f" (and {len(broken) - 1} more broken rule files)"
                          if len(broken) > 1 else ""))
    rules = [rule for file_rules in by_file.values() for rule in file_rules]
    if not rules:
        raise QueryError(f"--rules {path}: no query file (.sal, .nu, .ddst, .subs, ...) "
                         f"in it{_ignored_note(ignored)}")
    return RulesJob(rules, directory=path, options=options, ignored=ignored)


def _ignored_note(ignored: list[str]) -> str:
    if not ignored:
        return ""
    return f"; not read, without a query suffix: {_names(ignored)}"


def _names(names: Sequence[str]) -> str:
    shown = ", ".join(names[:_SHOWN])
    return shown + (f" and {len(names) - _SHOWN} more" if len(names) > _SHOWN else "")


def accepts(pattern: Any) -> bool:
    """Rules come from a directory only, never from a pattern object."""
    return False


def from_pattern(pattern: Any, **options: Any) -> RulesJob:  # pragma: no cover - accepts
    raise TypeError("rules are read from a directory (--rules DIR)")


# -- the envelope -----------------------------------------------------------------------


def _envelope_schema() -> pa.Schema:
    records = [pa.field(name, pa.struct(list(fmt.schema)))
               for name, fmt in _record_formats().items()]
    return pa.schema([pa.field("rule", pa.string()), pa.field("version", pa.string()),
                      pa.field("kind", pa.string()), pa.field("match_id", pa.string()),
                      pa.field("first_t", pa.int64()), pa.field("last_t", pa.int64()),
                      *records])


def _record(row: Mapping[str, Any], clock: Any) -> tuple[MatchFormat, dict[str, Any]]:
    kind = RECORD_OF[row["kind"]]
    return _record_formats()[kind].with_clock(clock), row[kind]


def _envelope_text(row: Mapping[str, Any], number: int, clock: Any = SECONDS) -> str:
    fmt, record = _record(row, clock)
    return f"[{row['rule']} {row['version']}] {fmt.text(record, number)}"


def _envelope_json(row: Mapping[str, Any], clock: Any = SECONDS) -> str:
    fmt, record = _record(row, clock)
    head = json.dumps({"rule": row["rule"], "version": row["version"], "kind": row["kind"],
                       "match_id": row["match_id"]})
    return f"{head[:-1]}, \"match\": {fmt.json(record)}}}"


def _envelope_graph(row: Mapping[str, Any], clock: Any = SECONDS) -> Any:
    fmt, record = _record(row, clock)
    return fmt.graph(record)


#: Every rule's matches: ``rule``, ``version``, ``kind``, ``match_id``, ``first_t``,
#: ``last_t`` (µs), and the kind's record in its record kind's column (``sal``: SAL and ν
#: matches; ``ddst``; ``subs``), the others null. JSONL writes ``{"rule", "version",
#: "kind", "match_id", "match": the kind's own JSON record}``; ``match_id`` is the rule's
#: name and the identity of the match within the rule (the same wherever it is found).
RULE_MATCHES = MatchFormat(_envelope_schema(), _envelope_text, _envelope_json,
                           _envelope_graph)


def enveloped(rule: Rule, matches: pa.Table) -> pa.Table:
    """A rule's own match records in the envelope."""
    schema = RULE_MATCHES.schema
    if not matches.num_rows:
        return schema.empty_table()
    rows = matches.num_rows
    found = rule.job.instances(matches)
    record_kind = RECORD_OF[rule.kind]
    record = matches.select(_record_formats()[record_kind].schema.names)
    columns: dict[str, pa.Array] = {
        "rule": pa.array([rule.name] * rows, pa.string()),
        "version": pa.array([rule.version] * rows, pa.string()),
        "kind": pa.array([rule.kind] * rows, pa.string()),
        "match_id": pa.array([f"{rule.name}/{key}" for key in found.keys], pa.string()),
        "first_t": pa.array(found.first_t, pa.int64()),
        "last_t": pa.array(found.last_t, pa.int64()),
    }
    for name in _record_formats():
        type_ = schema.field(name).type
        columns[name] = (pa.StructArray.from_arrays(
            [c.combine_chunks() for c in record.cast(pa.schema(list(type_))).columns],
            fields=list(type_)) if name == record_kind else pa.nulls(rows, type_))
    return pa.table(columns, schema=schema)


def rule_counts(matches: pa.Table) -> dict[str, int]:
    """Matches per rule in an envelope table."""
    if not matches.num_rows:
        return {}
    counted = pc.value_counts(matches.column("rule")).to_pylist()
    return {entry["values"]: entry["counts"] for entry in counted}


class CountingSink:
    """A sink that counts the matches of each rule it writes (``counts``), then writes
    them to ``sink`` (everything else is the sink's own)."""

    def __init__(self, sink: Any, counts: Counter[str]) -> None:
        self.sink = sink
        self.counts = counts

    def write(self, table: pa.Table, *args: Any, **kwargs: Any) -> Any:
        self.counts.update(rule_counts(table))
        return self.sink.write(table, *args, **kwargs)

    def __getattr__(self, name: str) -> Any:
        return getattr(self.sink, name)


#: rules listed one a line in a summary, at most (the most matches first)
_LISTED = 20


def rule_lines(summary: Mapping[str, Mapping[str, Any]]) -> list[str]:
    """A summary's rules (``{"rule": {"kind", "version", "matches", ...}}``) one a line,
    the most matches first."""
    ranked = sorted(summary.items(), key=lambda item: (-item[1]["matches"], item[0]))
    lines = [f"matches by rule ({len(summary):,} rules):"]
    for name, facts in ranked[:_LISTED]:
        version = facts["version"] or "removed"
        since = facts.get("since_s")
        lines.append(f"  {name} ({facts['kind']}, {version}"
                     + (f", from {format_seconds(round(since * 1e6))} s" if since is not None
                        else "") + f"): {facts['matches']:,}")
    if len(ranked) > _LISTED:
        lines.append(f"  ... and {len(ranked) - _LISTED:,} more rules "
                     "(--summary json lists them all)")
    return lines


# -- the job ----------------------------------------------------------------------------


class RulesJob(CompositeJob):
    """The rules of a directory over one read of the stream (module docstring).

    Parameters
    ----------
    rules
        The rules (none: a stream whose directory holds no rule that loads yet).
    directory
        The rules directory (watched while a stream runs).
    options
        The command line's options the rules were loaded with (a rule changed while the
        stream runs is loaded with them too).
    history_us
        Event time of released edges kept for rules added while the stream runs (None:
        the largest extent in µs among ``rules``).
    accept_partial
        Add a rule whose extent does not fit the history, with a warning, instead of
        refusing it.
    """

    def __init__(self, rules: Sequence[Rule], *, directory: str | Path = ".",
                 options: Mapping[str, Any] | None = None, history_us: int | None = None,
                 accept_partial: bool = False, ignored: Sequence[str] = ()) -> None:
        self.rules: tuple[Rule, ...] = tuple(rules)
        self.members = tuple(rule.job for rule in self.rules)
        self.output = RULE_MATCHES
        self.directory = Path(directory)
        self.options = dict(options or {})
        self.history_us = history_us
        self.accept_partial = accept_partial
        self.ignored = tuple(ignored)
        #: whether the rules change while a stream runs (:meth:`live`)
        self.changing = False
        #: the watch of rules read from elsewhere than ``directory`` (a Kafka control
        #: topic folded into it); None: the directory's own
        self.watch_factory: Callable[[], RulesWatch] | None = None
        #: where the rules come from, when not ``directory`` (``kafka://BROKER/TOPIC``)
        self.origin: str | None = None

    def _like(self, members: list[ReplayJob]) -> RulesJob:
        rules = [replace(rule, job=job) for rule, job in zip(self.rules, members, strict=True)]
        job = RulesJob(rules, directory=self.directory, options=self.options,
                       history_us=self.history_us, accept_partial=self.accept_partial,
                       ignored=self.ignored)
        job.changing, job.watch_factory = self.changing, self.watch_factory
        job.origin = self.origin
        return job

    def live(self, history_us: int | None, accept_partial: bool) -> RulesJob:
        """The job for a stream whose rules change: its engines keep ``history_us`` of
        released edges (None: :meth:`default_history_us`) for rules added later, and it
        keeps every field of the stream (a rule added later may read any)."""
        job = self._like(list(self.members))
        job.history_us, job.accept_partial, job.changing = history_us, accept_partial, True
        return job

    @property
    def min_records(self) -> int:
        return min((job.min_records for job in self.members), default=1)

    def partition_key(self) -> str | None:
        return super().partition_key() if self.members else None

    def needed_columns(self, available: list[str]) -> list[str]:
        return list(available) if self.changing else super().needed_columns(available)

    @property
    def name(self) -> str:
        return f"rules in {self.origin or self.directory.name or self.directory}"

    @property
    def whole_stream(self) -> bool:
        """A rule needing the whole stream, or rules bounding their state in different
        units (time and edge counts), are replayed in one engine."""
        return len(self._units()) > 1 or any(job.whole_stream for job in self.members)

    def _units(self) -> set[str]:
        """The units the rules bound their state in (a SAL query bounded only by the
        data's longest edge counts time before it is bound)."""
        units = set()
        for job in self.members:
            try:
                units.add(job.extent().unit)
            except UnboundedQueryError:
                units.add("us")
        return units

    def extent(self) -> Extent:
        """The widest rule's extent (time extents only when the units differ: such rules
        run unsharded, :attr:`whole_stream`)."""
        extents = self._each("extent")
        units = {extent.unit for extent in extents}
        unit = units.pop() if len(units) == 1 else "us"
        return Extent(max((e.size for e in extents if e.unit == unit), default=0), unit)

    def stream_numbering(self) -> None:
        if any(n is not None for n in self._each("stream_numbering")):
            raise QueryError("--pww widens one query; --rules runs several: run the rule "
                             "alone to widen it")
        return None

    def default_history_us(self) -> int:
        """The largest time extent among the rules (0 when none counts time)."""
        return max((e.size for e in self._each("extent") if e.unit == "us"), default=0)

    def new_engine(self, threads: int | None = 1) -> RulesEngine:
        history = None if not self.changing else self.history_us \
            if self.history_us is not None else self.default_history_us()
        return RulesEngine(self.rules, history, threads=threads, options=self.options,
                           accept_partial=self.accept_partial)

    def describe(self) -> list[str]:
        count = len(self.rules)
        lines = [f"{count} rules over one read of the stream, from {self.directory} (each "
                 "match names its rule and version)"]
        if self.ignored:
            lines.append(f"not read, without a query suffix: {_names(list(self.ignored))}")
        hosts: dict[Any, Rule] = {}
        for rule in sorted(self.rules, key=_widest_first):  # as RulesEngine shares them
            form = rule.job.shared_form()
            if form is not None:
                hosts.setdefault(form[0], rule)
        for i, rule in enumerate(self.rules, 1):
            lines += ["", f"[{i}/{count}] {rule.name} ({rule.kind}, version {rule.version})",
                      *rule.job.describe()]
            form = rule.job.shared_form()
            host = None if form is None else hosts[form[0]]
            if host is not None and host is not rule:
                lines.append(f"runs on the engine of {host.name} (the same query, a bound "
                             "at least as wide): its matches are those within its own bound")
        return lines

    def instances(self, matches: pa.Table) -> Instances:
        return Instances(matches.column("match_id").to_pylist(),
                         matches.column("first_t").to_numpy().astype(np.int64),
                         matches.column("last_t").to_numpy().astype(np.int64))

    def plan_dot(self) -> str:
        raise QueryError("--dot draws one plan; --rules runs several: explain one rule file")

    def input_warnings(self, edges: Any) -> list[str]:
        """The files of the directory not read (no query suffix), and what each rule
        says about the input."""
        lines = [f"not read, without a query suffix: {_names(list(self.ignored))}"
                 ] if self.ignored else []
        for rule in self.rules:
            warnings = getattr(rule.job, "input_warnings", None)
            lines += [f"{rule.name}: {line}" for line in
                      (warnings(edges) if warnings is not None else ())]
        return lines

    def rule_summary(self, counts: Mapping[str, int]) -> dict[str, dict[str, Any]]:
        """Each rule's kind, version and matches (``counts``), as the run summary has
        them."""
        return {rule.name: {"kind": rule.kind, "version": rule.version,
                            "matches": counts.get(rule.name, 0)} for rule in self.rules}

    def watch(self, path: str) -> RulesWatch:
        if self.watch_factory is not None:
            return self.watch_factory()
        return RulesWatch(self.directory, self.options)


# -- the engine -------------------------------------------------------------------------


@dataclass
class LiveRule:
    """A rule in force: its engine, and the watermark it was added at (its effective
    point; ``_NEVER``: from the stream's start).

    Rules of one shared form (:meth:`~graphcep.jobs.base.ReplayJob.shared_form`: ν
    expressions differing only in the bound around the whole expression, SAL queries
    only in the bound of their span constraint) run on one engine, built for the widest
    of them; ``reach`` is that engine's form and bound, and
    a rule that runs on an engine built for another (``borrowed``) takes its own matches
    from the engine's (``own_matches``)."""

    rule: Rule
    engine: Engine
    since: int = _NEVER
    reach: tuple[Any, Real] | None = None
    borrowed: bool = False


class RulesEngine:
    """One engine per rule -- rules that differ only in a bound share one -- rules added
    and removed between pushes, and the shared history of released edges that warms a
    rule added live (module docstring)."""

    def __init__(self, rules: Sequence[Rule], history_us: int | None, *,
                 threads: int | None = 1, options: Mapping[str, Any] | None = None,
                 accept_partial: bool = False) -> None:
        #: None: no history (a batch run, whose rules never change)
        self.history_us = history_us
        self.threads = threads
        self.options = dict(options or {})
        self.accept_partial = accept_partial
        self.live: dict[str, LiveRule] = {}
        for rule in sorted(rules, key=_widest_first):  # the widest makes the shared engine
            self.live[rule.name] = self._in_force(rule)
        self.live = {rule.name: self.live[rule.name] for rule in rules}
        #: the released edges of the last ``history_us`` before the watermark
        self.history: pa.Table | None = None
        #: whether the history still holds every released edge (none dropped yet)
        self.whole_history = True
        self.watermark = int(_NEVER)
        #: matches per rule over the stream (restarts included), and in the last batch
        self.counts: dict[str, int] = {}
        self.last_counts: dict[str, int] = {}
        #: every change applied: (watermark, line)
        self.changes: list[tuple[int, str]] = []
        #: the stream's fields, once an edge was pushed (a rule added later must find its own)
        self.columns: list[str] | None = None
        #: what the watch has read of a control topic (offsets and the files they made),
        #: checkpointed with the rules; None: a watched directory
        self.control: dict[str, Any] | None = None
        #: each engine's pushes in chunks (they remember how finely to slice a batch)
        self._pushes: dict[int, ChunkedPushes] = {}

    def _in_force(self, rule: Rule, since: int = _NEVER) -> LiveRule:
        """``rule`` in force: on the engine of a rule in force of its shared form whose
        bound is the narrowest that covers its own, else on a new engine of its own
        (added to :attr:`live` by the caller)."""
        form = rule.job.shared_form()
        if form is not None:
            hosts = [live for live in self.live.values() if live.reach is not None
                     and live.reach[0] == form[0] and live.reach[1] >= form[1]]
            if hosts:
                host = min(hosts, key=lambda live: live.reach[1])
                return LiveRule(rule, host.engine, since, host.reach, borrowed=True)
        return LiveRule(rule, rule.job.new_engine(self.threads), since, form)

    def _engines(self) -> list[tuple[Engine, list[LiveRule]]]:
        """Each engine in force with the rules it runs, in the rules' order."""
        by_engine: dict[int, tuple[Engine, list[LiveRule]]] = {}
        for live in self.live.values():
            by_engine.setdefault(id(live.engine), (live.engine, []))[1].append(live)
        return list(by_engine.values())

    # -- the engine protocol ------------------------------------------------------------

    def push(self, batch: pa.Table) -> pa.Table:
        return joined_chunks(self.push_chunks(batch), RULE_MATCHES.schema.empty_table)

    def push_chunks(self, batch: pa.Table,
                    chunk_rows: int = MATCH_CHUNK_ROWS) -> Iterator[pa.Table]:
        """The matches ``batch`` completes, engine by engine, in chunks of about
        ``chunk_rows`` as each engine finds them (:class:`ChunkedPushes`), counted as
        they are taken. Take every chunk before the next push."""
        self.last_counts = {}
        self._remember(batch)
        return self._counted_chunks(batch, chunk_rows)

    def count(self, batch: pa.Table) -> int:
        """How many matches ``batch`` completes, counted by each rule's engine (a SAL
        search makes none) and added to the rules' counts."""
        self.last_counts = {}
        self._remember(batch)
        input_of = _shared_inputs(batch)

        def count(lives: list[LiveRule], pushes: ChunkedPushes
                  ) -> Iterator[tuple[LiveRule, int]]:
            edges = input_of(lives[0].rule.job)
            if len(lives) == 1 and not lives[0].borrowed:
                yield lives[0], pushes.count(edges)
                return
            for table in pushes(edges):  # a shared engine: each rule counts its own
                for live in lives:
                    yield live, _own(live, table).num_rows

        total = 0
        for live, found in self._each_engine(count, MATCH_CHUNK_ROWS):
            for counts in (self.counts, self.last_counts) if found else ():
                counts[live.rule.name] = counts.get(live.rule.name, 0) + found
            total += found
        return total

    def _counted_chunks(self, batch: pa.Table, chunk_rows: int) -> Iterator[pa.Table]:
        input_of = _shared_inputs(batch)

        def chunks(lives: list[LiveRule], pushes: ChunkedPushes
                   ) -> Iterator[tuple[LiveRule, pa.Table]]:
            for table in pushes(input_of(lives[0].rule.job)):
                for live in lives:
                    yield live, _own(live, table)

        for live, table in self._each_engine(chunks, chunk_rows):
            if table.num_rows:
                yield self._counted([enveloped(live.rule, table)], more=True)

    def _each_engine(self, work: Callable[[list[LiveRule], ChunkedPushes],
                                          Iterator[tuple[LiveRule, T]]],
                     chunk_rows: int) -> Iterator[tuple[LiveRule, T]]:
        """What ``work`` gives for each engine in force (with the rules it runs), engine
        after engine. The engines run in threads, ``threads`` of them at once (all the
        cores when None; Spark tasks ask for one): their compiled kernels release the
        GIL, so rules match in parallel while the items come out as one thread would give
        them (:func:`~graphcep.engines.base.in_order`)."""
        producers = [_naming(lives, work(lives, self._pushes_of(engine, chunk_rows)))
                     for engine, lives in self._engines()]
        width = self.threads if self.threads is not None else usable_cores()
        if width < 2 or len(producers) < 2:
            return chain.from_iterable(producers)
        return in_order(producers, width=width)

    def _pushes_of(self, engine: Engine, chunk_rows: int) -> ChunkedPushes:
        """The engine's pushes in chunks, kept while the engine and the chunk size are."""
        pushes = self._pushes.get(id(engine))
        if pushes is None or pushes.engine is not engine or pushes.chunk_rows != chunk_rows:
            pushes = self._pushes[id(engine)] = ChunkedPushes(engine, chunk_rows)
        return pushes

    def warm(self, batch: pa.Table) -> None:
        input_of = _shared_inputs(batch)
        for engine, lives in self._engines():
            engine.warm(input_of(lives[0].rule.job))
        self._remember(batch)

    def advance(self, watermark_us: int) -> pa.Table:
        tables = [enveloped(live.rule, _own(live, found))
                  for engine, lives in self._engines()
                  for found in (engine.advance(watermark_us),) for live in lives]
        self.watermark = max(self.watermark, int(watermark_us))
        self._trim()
        return self._counted(tables, more=True)

    def state_size(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for engine, _ in self._engines():
            for key, value in engine.state_size().items():
                total[key] = total.get(key, 0) + value
        total["rules"] = len(self.live)
        total["history_edges"] = 0 if self.history is None else self.history.num_rows
        return total

    def part_counts(self) -> dict[str, int]:
        """Each rule's matches so far (rules without any left out): the parts of a counting
        run's total (``graphcep run --rules DIR --count``)."""
        return {name: count for name, count in self.counts.items() if count}

    def rule_state_size(self, name: str) -> dict[str, int]:
        """What the engine of rule ``name`` holds (its ``state_size``; a shared engine's
        whole), for the live page's per-rule numbers; empty when no rule of that name is
        in force (removed)."""
        live = self.live.get(name)
        return live.engine.state_size() if live is not None else {}

    def describe(self) -> str:
        return "; ".join(
            f"{name}: {live.engine.describe()}" + (" (an engine shared by rules that differ "
                                                   "in a bound, its matches within this "
                                                   "rule's)" if live.borrowed else "")
            for name, live in self.live.items())

    def close(self) -> None:
        for engine, _ in self._engines():
            _close(engine)

    def _counted(self, tables: list[pa.Table], more: bool = False) -> pa.Table:
        found = [table for table in tables if table.num_rows]
        joined = (RULE_MATCHES.schema.empty_table() if not found
                  else found[0] if len(found) == 1 else pa.concat_tables(found))
        if not more:
            self.last_counts = {}
        for name, count in rule_counts(joined).items():
            self.counts[name] = self.counts.get(name, 0) + count
            self.last_counts[name] = self.last_counts.get(name, 0) + count
        return joined

    def rule_summary(self) -> dict[str, dict[str, Any]]:
        """Each rule's kind, version (None: removed), effective point (seconds; None: the
        stream's start) and matches since the stream's start, as the summary has them."""
        facts: dict[str, dict[str, Any]] = {}
        for name, live in self.live.items():
            facts[name] = {"kind": live.rule.kind, "version": live.rule.version,
                           "since_s": None if live.since == _NEVER else live.since / 1e6,
                           "matches": self.counts.get(name, 0)}
        for name, count in self.counts.items():
            facts.setdefault(name, {"kind": _kind_of_name(name), "version": None,
                                    "since_s": None, "matches": count})
        return facts

    def progress(self) -> str:
        """The progress line's part: the last batch's matches by rule (the most first)."""
        found = sorted(self.last_counts.items(), key=lambda item: (-item[1], item[0]))
        if not found:
            return f"{len(self.live):,} rules"
        shown = ", ".join(f"{name} {count:,}" for name, count in found[:_SHOWN])
        more = f" and {len(found) - _SHOWN:,} more" if len(found) > _SHOWN else ""
        return f"{len(self.live):,} rules, matches by rule: {shown}{more}"

    # -- the history --------------------------------------------------------------------

    def _remember(self, batch: pa.Table) -> None:
        if self.columns is None and batch.num_rows:
            self.columns = batch.column_names
        if self.history_us is None or not batch.num_rows:
            return
        self.history = batch if self.history is None else pa.concat_tables(
            [self.history, batch.select(self.history.column_names)],
            promote_options="permissive")

    def _trim(self) -> None:
        """Drop the released edges older than the history (time before the watermark)."""
        if self.history is None or self.history_us is None or self.watermark == _NEVER:
            return
        keep = pc.greater_equal(self.history.column("t"), self.watermark - self.history_us)
        kept = int(pc.sum(keep).as_py() or 0)
        if kept < self.history.num_rows:
            self.history = self.history.filter(keep)
            self.whole_history = False
        bound = self.options.get("max_window_edges") or DEFAULT_HISTORY_EDGES
        if kept > bound:
            raise StateBoundError(
                f"the rules' history would hold {kept:,} released edges (the last "
                f"{format_seconds(self.history_us)} s, --history), above {bound:,}: lower "
                "--history, or raise --max-window-edges")

    def misses(self, rule: Rule) -> str | None:
        """What a rule added now would miss, in words (None: nothing, its extent fits the
        history)."""
        if self.whole_history or self.watermark == _NEVER:
            return None
        history_us = self.history_us or 0
        job = rule.job
        extent = job.extent()
        if job.whole_stream:
            return ("its matches may span the whole stream (whole-stream state), of which "
                    f"the history holds the last {format_seconds(history_us)} s")
        if extent.unit == "edges":
            held = 0 if self.history is None else self.history.num_rows
            if held >= extent.size:
                return None
            return (f"its window holds {extent.size:,} edges and the history {held:,}: "
                    "its matches that began before the history")
        if extent.size <= history_us:
            return None
        return (f"its extent is {format_seconds(extent.size)} s and the history "
                f"{format_seconds(history_us)} s (--history): its matches that began "
                f"more than {format_seconds(history_us)} s before the watermark")

    # -- live changes -------------------------------------------------------------------

    def add(self, rule: Rule) -> tuple[bool, str | None]:
        """Add ``rule`` at the watermark, warmed from the history: whether it was added,
        and the refusal (or, with ``accept_partial``, the warning) in words (None: added,
        exact)."""
        if self.columns is not None:
            try:
                rule.job.check_columns(self.columns)
            except QueryError as err:
                return False, f"refused: {' '.join(str(err).split())}"
        missing = self.misses(rule)
        if missing is not None and not self.accept_partial:
            return False, f"refused: {missing} (raise --history, or --accept-partial)"
        live = self._in_force(rule, self.watermark)
        if not live.borrowed:
            self._warm_up(live)
        # a shared engine has read the stream since its own rule came: it reports the
        # matches ending from now on, the new rule's among them
        self.live[rule.name] = live
        return True, None if missing is None else f"warning: it misses {missing}"

    def _warm_up(self, live: LiveRule) -> None:
        """Fill a new engine from the history, reporting nothing."""
        job, engine = live.rule.job, live.engine
        if self.history is not None and self.history.num_rows:
            warm = self.history
            extent = job.extent()
            if extent.unit == "us" and not job.whole_stream:
                warm = warm.filter(pc.greater_equal(warm.column("t"),
                                                    self.watermark - extent.size))
            engine.warm(_shared_inputs(sort_stream(warm))(job))
        if self.watermark != _NEVER:
            engine.advance(self.watermark)  # decided by the warm-up alone: not reported

    def remove(self, name: str) -> None:
        """Remove rule ``name``; its engine goes with the last rule it runs."""
        self._release(self.live.pop(name).engine)

    def change(self, name: str, rule: Rule) -> tuple[bool, str | None]:
        """Replace rule ``name`` by ``rule`` (:meth:`add`'s answer); refused, the running
        version stays."""
        old = self.live.pop(name)
        added, said = self.add(rule)
        if added:
            self._release(old.engine)
        else:
            self.live[name] = old
        return added, said

    def _release(self, engine: Engine) -> None:
        """Close ``engine`` unless a rule in force still runs on it."""
        if all(live.engine is not engine for live in self.live.values()):
            self._pushes.pop(id(engine), None)
            _close(engine)

    # -- checkpoints ----------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """The rules (name, kind, file, text, effective point, engine), each engine's
        snapshot with its vertex features, the history and the counters."""
        engines = self._engines()
        number = {id(engine): n for n, (engine, _) in enumerate(engines)}
        rules = [(live.rule.name, live.rule.version, live.rule.kind, live.rule.file,
                  live.rule.text, live.since, number[id(live.engine)],
                  None if live.reach is None else live.reach[1], live.borrowed)
                 for live in self.live.values()]
        parts = [(engine.snapshot(), getattr(engine, "features", None))
                 for engine, _ in engines]
        history = None if self.history is None else _ipc_bytes(self.history)
        return pickle.dumps({"rules": _SNAPSHOT_VERSION, "live": rules, "engines": parts,
                             "history": history, "whole_history": self.whole_history,
                             "watermark": self.watermark, "history_us": self.history_us,
                             "counts": self.counts, "changes": self.changes,
                             "columns": self.columns, "control": self.control},
                            protocol=pickle.HIGHEST_PROTOCOL)

    def restore_context(self) -> dict[str, Any]:
        return {"template": self}

    @classmethod
    def restore(cls, blob: bytes, template: RulesEngine | None = None,
                **context: Any) -> RulesEngine:
        """The engine of ``blob``, its rules rebuilt from their texts in the checkpoint
        (with ``template``'s options): the rules in force then, whatever the directory
        holds now."""
        state = pickle.loads(blob)
        if template is None or not isinstance(state, dict) or \
                state.get("rules") != _SNAPSHOT_VERSION:
            raise SnapshotError("not a snapshot of a rules directory's engines: start from a "
                                "new checkpoint")
        # this start's --history: what the checkpoint's history holds is trimmed to it
        engine = cls([], template.history_us, threads=template.threads,
                     options=template.options, accept_partial=template.accept_partial)
        now = {(name, live.rule.version): live.rule for name, live in template.live.items()}
        restored: dict[int, Engine] = {}
        for name, version, _kind, file, text, since, number, bound, borrowed in state["live"]:
            rule = now.get((name, version)) or _rebuilt(name, file, text, template.options)
            if number not in restored:
                part, features = state["engines"][number]
                blank = rule.job.new_engine(template.threads)
                own = dict(getattr(blank, "restore_context", dict)())
                if features is not None:
                    own["features"] = features
                restored[number] = type(blank).restore(part, **own)
            form = rule.job.shared_form()
            reach = None if form is None or bound is None else (form[0], bound)
            engine.live[name] = LiveRule(rule, restored[number], since, reach, borrowed)
        if state["history"] is not None:
            engine.history = pa.ipc.open_stream(state["history"]).read_all()
        engine.whole_history = state["whole_history"]
        engine.watermark = state["watermark"]
        engine.counts = dict(state["counts"])
        engine.changes = list(state["changes"])
        engine.columns = state["columns"]
        engine.control = state.get("control")
        return engine


def _shared_inputs(batch: pa.Table) -> Callable[[Any], pa.Table]:
    """Each rule's input from ``batch``: the fields it reads (``job.needed_columns``),
    oriented as its query reads edges, and only the edges that may play one of its query
    edges where the others change no match (``job.playable``) -- filtered once for all the
    rules that keep the same edges of the same fields (equal ``job.playable_key``: the
    same predicates), as cells drop them. The vertex names are hashed once for all the
    rules (:func:`~graphcep.events.encoded_vertices`): each engine numbers the batch's
    distinct names, not each row's."""
    batch = encoded_vertices(batch)
    kept: dict[Any, pa.Table] = {}

    def input_of(job: Any) -> pa.Table:
        fields = job.needed_columns(batch.column_names)
        key = job.playable_key()
        if key is None:
            return job.orient(batch.select(fields))
        key = (key, tuple(fields))
        if key not in kept:
            oriented = job.orient(batch.select(fields))
            kept[key] = oriented.filter(job.playable(oriented))
        return kept[key]
    return input_of


def _naming(lives: list[LiveRule], items: Iterator[T]) -> Iterator[T]:
    """``items``; a state bound their engine hits says which rules it runs (the query
    names in the message may be a program's default, the same for many files)."""
    try:
        yield from items
    except StateBoundError as err:
        names = [live.rule.name for live in lives]
        raise StateBoundError(f"{'rule' if len(names) == 1 else 'rules'} "
                              f"{_names(names)}: {err}") from None


def _own(live: LiveRule, matches: pa.Table) -> pa.Table:
    """A rule's own matches among its engine's (all of them: its own engine)."""
    if not live.borrowed or not matches.num_rows:
        return matches
    return live.rule.job.own_matches(matches)


def _close(engine: Engine) -> None:
    close = getattr(engine, "close", None)
    if close is not None:
        close()


def _widest_first(rule: Rule) -> Real:
    """Rules of a shared form widest first (the others in their order)."""
    form = rule.job.shared_form()
    return 0 if form is None else -form[1]


def _kind_of_name(name: str) -> str:
    """The kind of a removed rule, from its file's name."""
    from graphcep import jobs

    return jobs.kind_of(name.split("#")[0]).name


def _rebuilt(name: str, file: str, text: str, options: Mapping[str, Any]) -> Rule:
    """The rule ``name`` of the file ``file`` as it read ``text`` (a checkpoint's)."""
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / file
        path.write_text(text, encoding="utf-8")
        try:
            rules = rules_of_file(path, text, options)
        except (QuerySyntaxError, QueryError) as err:
            raise SnapshotError(f"the checkpoint's rule {name} no longer loads "
                                f"({_one_line(err, path)}): start from a new checkpoint"
                                ) from None
    return next(rule for rule in rules if rule.name == name)


def _ipc_bytes(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


# -- the watch --------------------------------------------------------------------------


class RulesWatch:
    """The rules directory, re-read before each micro-batch; what changed applied to the
    :class:`RulesEngine` at its watermark (module docstring)."""

    def __init__(self, directory: str | Path, options: Mapping[str, Any]) -> None:
        self.directory = Path(directory)
        self.options = dict(options)
        self._digest: str | None = None
        #: the broken files' lines, said once per content
        self._said: dict[str, str] = {}
        self._ignored: list[str] = []
        #: the rules of the files as last read, by name and text (parsed once)
        self._known: dict[tuple[str, str], list[Rule]] = {}
        #: the engine the directory was last applied to: another one (restored from a
        #: checkpoint to re-run a micro-batch) gets the directory applied whatever it holds
        self._applied_to: RulesEngine | None = None

    def check(self) -> list[str]:
        """Nothing to say before the first batch: broken files are said when applied."""
        return []

    def changes(self, engine: RulesEngine) -> list[str]:
        """Re-read the directory if any file changed and bring ``engine`` to its rules;
        one line per change applied, rule refused or file broken."""
        digest = self._content_digest()
        if digest == self._digest and engine is self._applied_to:
            return []
        self._digest, self._applied_to = digest, engine
        try:
            by_file, broken, ignored = read_rules(self.directory, self.options,
                                                  self._known)
        except QueryError as err:  # the directory itself is gone
            return [f"rules: {err}; keeping the {len(engine.live):,} rules in force"]
        notes = self._broken_notes(broken, engine)
        if ignored and ignored != self._ignored:
            notes.append(f"rules: not read, without a query suffix: {_names(ignored)}")
        self._ignored = ignored
        wanted = {rule.name: rule for rules in by_file.values() for rule in rules}
        for name, live in list(engine.live.items()):
            if live.rule.file in broken:
                wanted.setdefault(name, live.rule)  # the last good version runs on
        return notes + self._apply(engine, wanted)

    def _apply(self, engine: RulesEngine, wanted: dict[str, Rule]) -> list[str]:
        at = ("the stream's start" if engine.watermark == _NEVER
              else f"event time {format_seconds(engine.watermark)} s")
        notes = []
        for name in [n for n in engine.live if n not in wanted]:
            engine.remove(name)
            notes.append(f"rules: removed {name} (nothing from {at} on)")
        for name, rule in wanted.items():
            live = engine.live.get(name)
            if live is not None and live.rule.version == rule.version:
                continue
            what = "changed" if live is not None else "added"
            added, said = engine.change(name, rule) if live is not None else engine.add(rule)
            if not added:
                notes.append(f"rules: {name} version {rule.version} {said}"
                             + ("; the running version stays" if live is not None else ""))
                continue
            notes.append(f"rules: {what} {name} version {rule.version} ({rule.kind}), from "
                         f"{at}" + (f"; {said}" if said else ""))
        engine.changes += [(engine.watermark, note) for note in notes]
        return notes

    def _broken_notes(self, broken: dict[str, str], engine: RulesEngine) -> list[str]:
        notes = []
        for file, reason in broken.items():
            if self._said.get(file) == reason:
                continue
            running = [n for n, live in engine.live.items() if live.rule.file == file]
            keep = (f"; keeping {_names(running)} as last read" if running
                    else "; not running")
            notes.append(f"rules: {reason}{keep}")
        self._said = dict(broken)
        return notes

    def _content_digest(self) -> str:
        digest = hashlib.sha256()
        try:
            paths = sorted(p for p in self.directory.iterdir() if p.is_file())
        except OSError as err:
            return f"unreadable: {err}"
        for path in paths:
            digest.update(path.name.encode() + b"\0")
            try:
                digest.update(path.read_bytes())
            except OSError as err:
                digest.update(str(err).encode())
            digest.update(b"\0")
        return digest.hexdigest()
