"""ν jobs: a timed ν-expression over a link stream (Bertrand et al., PETRI NETS 2018).

:func:`load` reads a ``.nu`` file with the command line's options; :class:`NuJob` is what
the runtimes replay. A match is reported at its last link, so time shards replay it
exactly once when each shard warms up on the pattern's longest span (its outermost
delays' upper bounds). A pattern that some part leaves unbounded in time, or that runs
anchored at the stream's start, needs the whole stream in one engine.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.lang.nu import parse_nu
>>> job = NuJob(parse_nu("<#X ~> #Y . Y ~> X>[0, 5]", "ping_pong"))
>>> job.extent()
Extent(size=5000000, unit='us')
>>> edges = pa.table({"t": [0, 3_000_000, 9_000_000], "src": ["a", "b", "a"],
...                   "dst": ["b", "a", "b"]})
>>> from graphcep.runtime.local import run_job
>>> matches, _ = run_job(job, edges)
>>> [(m["first_t"], m["last_t"], m["bindings"]) for m in matches.to_pylist()]
[(0, 3000000, [('X', 'a'), ('Y', 'b')])]
"""

from __future__ import annotations

import math
import sys
from collections.abc import Hashable, Mapping
from dataclasses import dataclass, field, replace
from numbers import Real
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import Engine
from graphcep.engines.nu.automaton import compile_pattern, unallocated_reads
from graphcep.engines.nu.engine import MODES, NuEngine, match_id
from graphcep.engines.nu.tables import ineligibility
from graphcep.events import format_seconds
from graphcep.io.flat_columns import FlatColumns
from graphcep.io.sinks import SAL_MATCHES, MatchFormat
from graphcep.jobs.base import CellSplit, Extent, JobBase, renamed_matches
from graphcep.patterns.nu import (
    Delay,
    NuPattern,
    NuPatternError,
    key_variable,
    leading_delays,
)
from graphcep.patterns.nu_autom import AutomatonPattern
from graphcep.patterns.subgraph import QueryError

#: The engines this kind runs (the protocol suite runs each): ``--nu-engine`` name ->
#: (module, class). Both give the same matches; ``auto`` picks the compiled one where it
#: can run (:func:`graphcep.engines.nu.tables.ineligibility`).
ENGINES: dict[str, tuple[str, str]] = {
    "compiled": ("graphcep.engines.nu.compiled", "CompiledNuEngine"),
    "interpreted": ("graphcep.engines.nu.engine", "NuEngine"),
}
ENGINE_CHOICES = ("auto", *ENGINES)
#: The token bound unless told otherwise (``--max-tokens``), per engine: a compiled token
#: is one row of integers (about 100-300 bytes), an interpreted one a tree of Python
#: objects (about ten times that).
DEFAULT_MAX_TOKENS = {"compiled": 2_000_000, "interpreted": 200_000}

#: Options of other kinds a ν-expression has no use for, with what it does instead.
NOT_FOR = {
    "query_name": "a .nu file holds one expression, named after the file",
    "window": "a ν-expression bounds its time with delays <...>[low, high]",
    "max_duration": "a ν-expression reads link start times only",
    "homomorphic": "variables of a ν-expression hold distinct nodes (#X is fresh); use @ "
                   "or a constant where nodes may repeat",
    "signature_p": "it is a DDST option",
    "signature_seed": "it is a DDST option",
}


def load(path: str, options: Mapping[str, Any]) -> NuJob:
    """A ``.nu`` file, or an ``.autom`` file (a timed ν-automaton written by hand,
    :mod:`graphcep.lang.nu_autom`), as a job (``max_tokens``, ``anchored``); other kinds'
    options are refused, saying what a ν-expression does instead."""
    from graphcep.lang.nu import parse_nu_file
    from graphcep.lang.nu_autom import parse_autom_file

    mode = "anchored" if options.get("anchored") else "search"
    parse = parse_autom_file if str(path).lower().endswith(".autom") else parse_nu_file
    job = NuJob(parse(path), mode, options.get("max_tokens"),
                options.get("nu_engine") or "auto")
    for line in pattern_warnings(job.pattern):
        print(f"graphcep: warning: query {job.name!r}: {line}", file=sys.stderr)
    return job


def pattern_warnings(pattern: NuPattern) -> list[str]:
    """What in the expression itself likely makes it match nothing, one line each: names
    written like variables that are all constants (nothing allocates or releases them),
    and variables read where nothing has allocated them.

    >>> from graphcep.lang.nu import parse_nu
    >>> pattern_warnings(parse_nu("X ~> Y . Y ~> X", "p"))[0][:40]
    'its names X, Y are constants, which matc'
    >>> pattern_warnings(parse_nu("X ~> #Y . #X ~> Y", "p"))[0][:40]
    'variable X is read where nothing has all'
    """
    lines = []
    capitalised = sorted(c for c in pattern.constants() if c[:1].isupper())
    if (capitalised and not pattern.variables()
            and not isinstance(pattern, AutomatonPattern)):
        lines.append(f"its names {', '.join(capitalised)} are constants, which match only "
                     "nodes of those names: a name is a variable only where the expression "
                     "allocates or releases it (#X, X!); write #X where an unknown node is "
                     "first read")
    unread = unallocated_reads(compile_pattern(pattern))
    if unread:
        lines.append(f"{'variable' if len(unread) == 1 else 'variables'} "
                     f"{', '.join(unread)} {'is' if len(unread) == 1 else 'are'} read where "
                     "nothing has allocated them (a variable reads a node only after #X "
                     "has given it one), so those reads never match")
    return lines


def accepts(pattern: Any) -> bool:
    """Whether ``pattern`` is a ν-expression (:func:`graphcep.jobs.as_job`)."""
    return isinstance(pattern, NuPattern)


def from_pattern(pattern: NuPattern, **options: Any) -> NuJob:
    """A ν-expression as a job (``mode=``, ``max_tokens=``, ``engine=``)."""
    return NuJob(pattern, **options)


@dataclass(frozen=True)
class NuJob(JobBase):
    """A ν-expression and how to run it (``mode``: search or anchored)."""

    pattern: NuPattern
    mode: str = "search"
    max_tokens: int | None = None  # None: the engine's default (DEFAULT_MAX_TOKENS)
    engine: str = "auto"
    #: the engine ``engine`` comes to for this pattern and mode (set on creation)
    chosen: str = field(init=False, default="interpreted", compare=False)
    #: the fewest records a match holds: half the fewest events on a path to a final
    #: location, rounded up (a link is two events, its ends; an event of a time-event
    #: sequence one); window widening skips windows with fewer (set on creation)
    min_records: int = field(init=False, default=1, compare=False)

    @property
    def output(self) -> MatchFormat:
        """SAL-shaped match records, with a flat column per variable (a match's links are
        a path of any length: they stay in ``edges``)."""
        return SAL_MATCHES.with_flat(FlatColumns("sal", tuple(sorted(
            self.pattern.variables())), ()))

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise QueryError(f"mode must be one of {', '.join(MODES)}, got {self.mode!r}")
        if self.max_tokens is not None and self.max_tokens < 1:
            raise QueryError("max_tokens must be at least 1")
        if self.engine not in ENGINE_CHOICES:
            raise QueryError(f"unknown ν engine {self.engine!r}: choose one of "
                             f"{', '.join(ENGINE_CHOICES)}")
        try:
            automaton = compile_pattern(self.pattern)
        except NuPatternError as err:
            raise QueryError(f"pattern {self.pattern.name!r}: {err}") from None
        why = self._not_compiled(automaton)
        if self.engine == "compiled" and why is not None:
            raise QueryError(f"pattern {self.pattern.name!r}: the compiled engine cannot run "
                             f"it ({why}); use --nu-engine interpreted")
        object.__setattr__(self, "chosen", "compiled" if why is None and
                           self.engine != "interpreted" else "interpreted")
        object.__setattr__(self, "min_records", max(1, -(-automaton.fewest_reads() // 2)))

    def _not_compiled(self, automaton) -> str | None:
        """Why the compiled engine cannot run this job (None: it can)."""
        if self.mode != "search":
            return "it runs search mode only"
        return ineligibility(automaton)

    @property
    def token_bound(self) -> int:
        return self.max_tokens or DEFAULT_MAX_TOKENS[self.chosen]

    @property
    def name(self) -> str:
        return self.pattern.name

    @property
    def whole_stream(self) -> bool:
        # unbounded: a match may span the whole stream; anchored: one attempt from the start
        return self.mode == "anchored" or self.pattern.span_us() == math.inf

    @property
    def local_matches(self) -> bool:
        # search mode skips links that are not part of a match; anchored reads them all
        return self.mode == "search"

    def bind(self, longest_duration_us: int) -> NuJob:
        return self  # links are read at their start times

    def extent(self) -> Extent:
        span = self.pattern.span_us()
        return Extent(0 if span == math.inf else int(span))

    def needed_columns(self, available: list[str]) -> list[str]:
        return [c for c in available if c in ("t", "src", "dst", "seq", "dur")]

    def check_columns(self, available: list[str]) -> None:
        return None  # links need only the core columns every reader gives

    def orient(self, edges: pa.Table) -> pa.Table:
        return edges  # a link is read from src to dst

    def shared_form(self) -> tuple[Hashable, Real] | None:
        """Expressions that differ only in the upper bound of a delay around the whole
        expression share one engine (search mode): such a delay bounds a match's span,
        first link to last, so the matches of ``<e>[low, w]`` are those of ``<e>[low, W]``
        (``W >= w``) that span at most ``w``.

        Exact token by token, witnesses included: a token's identity holds the time the
        whole-pattern clock started, and no step resets that clock, so the wider engine's
        tokens are the narrower one's plus tokens whose clock has passed ``w`` -- as has
        that of every token they make. The narrower tokens are therefore made in the same
        order, deduplicated alike (a token equal to one the narrower engine dropped is
        past ``w`` too), and each match is first found at the same link through the same
        witness. Anchored mode counts the delay from time 0 (not the span): no sharing."""
        expr = getattr(self.pattern, "expr", None)
        if self.mode != "search" or not isinstance(expr, Delay) or expr.high_us is None:
            return None
        return ("nu", self.chosen, self.max_tokens, replace(expr, high_us=None)), expr.high_us

    def own_matches(self, matches: pa.Table) -> pa.Table:
        """The matches spanning at most this expression's bound, named after it."""
        span = pc.subtract(matches.column("last_t"), matches.column("first_t"))
        mine = matches.filter(pc.less_equal(span, self.pattern.expr.high_us))
        if not mine.num_rows:
            return mine
        name = self.pattern.name
        ids = [match_id(name, first, last, tuple(map(tuple, bindings)))
               for first, last, bindings in zip(mine.column("first_t").to_pylist(),
                                                mine.column("last_t").to_pylist(),
                                                mine.column("bindings").to_pylist(),
                                                strict=True)]
        return renamed_matches(mine, name, ids)

    def new_engine(self, threads: int | None = 1) -> Engine:
        if self.chosen == "compiled":
            from graphcep.engines.nu.compiled import CompiledNuEngine

            return CompiledNuEngine(self.pattern, max_tokens=self.token_bound)
        return NuEngine(self.pattern, mode=self.mode, max_tokens=self.token_bound)

    def summary_fields(self) -> dict[str, Any]:
        return {"mode": self.mode, "nu_engine": self.chosen}

    def cell_split(self) -> CellSplit:
        """Keyed by a variable every link of every match reads, holding one node
        (:func:`~graphcep.patterns.nu.key_variable`): an edge goes to the cells of its
        ends that may play it, a match is reported by the cell of its node.

        Exact in search mode: a match is decided by its own links (freshness compares a
        node with the nodes the match's variables hold, the paper's Definition 7, not
        with the stream before it; a delay counts between the match's links), so the
        engine over a cell's edges -- a subsequence of the stream holding every link that
        touches the cell's nodes -- finds each match binding the variable to one of
        them, and only matches of the stream. Anchored mode is one attempt from the
        stream's start reading every link: no subsequence will do."""
        if self.mode != "search":
            raise QueryError(f"{self.name!r} runs anchored: one attempt from the stream's "
                             "start reads every link, which no cell sees")
        if isinstance(self.pattern, AutomatonPattern):
            raise QueryError(f"{self.name!r} is a hand-written automaton: its variables "
                             "are not analysed for one on every link")
        try:
            key = key_variable(self.pattern.expr)
        except NuPatternError as err:
            raise QueryError(f"{self.name!r}: {err}") from None
        ends = ("the cells of its source and its target" if len(key.ends) > 1
                else f"the cell of its {'source' if key.ends == ('src',) else 'target'}")
        return CellSplit(columns=key.ends, home=("bindings", key.name),
                         words=f"keyed by variable {key.name}, an end of every link of every "
                               f"match, holding one node: an edge goes to {ends}, a match "
                               f"to the cell of its {key.name} node")

    def input_warnings(self, edges: Any) -> list[str]:
        """Anchored, a delay the pattern may begin with counts from time 0: when the
        input's first link comes after its upper bound (epoch times, say), it expired
        before any link, and the run says so rather than report nothing."""
        bounded = [d for d in leading_delays(self.pattern.expr) if d.high_us is not None]
        if self.mode != "anchored" or not bounded:
            return []
        if isinstance(edges, pa.Table):
            first = pc.min(edges.column("t")).as_py() if edges.num_rows else None
        else:  # a Spark frame
            first = edges.agg({"t": "min"}).first()[0]
        tightest = min(bounded, key=lambda d: d.high_us)
        if first is None or first <= tightest.high_us:
            return []
        return [f"anchored, the delay {tightest.text()} that may begin the pattern counts "
                f"from time 0, and the input's first link is at {format_seconds(first)} s "
                "(epoch times?): it has expired before any link; shift the times to start "
                "at 0, or run in search mode"]

    @property
    def reads_events(self) -> bool:
        return True  # bare nodes of a pattern read the events of a time-event sequence

    def plan_dot(self) -> str:
        """The compiled automaton in Graphviz DOT (``graphcep explain --dot``)."""
        return compile_pattern(self.pattern).to_dot(self.pattern.name)

    def describe(self) -> list[str]:
        """The expression, its variables and constants, its span, the automaton."""
        p = self.pattern
        automaton = compile_pattern(p)
        span = p.span_us()
        unbounded = p.unbounded_part()
        lines = [
            f"{'timed ν-automaton' if isinstance(p, AutomatonPattern) else 'ν-expression'} "
            f"{p.name} ({self.mode} mode, {self.chosen} engine)",
            p.text(),
            "",
            f"variables (fresh unknown nodes): {', '.join(sorted(p.variables())) or 'none'}; "
            f"constants (known nodes): {', '.join(sorted(p.constants())) or 'none'}",
            (f"span: at most {format_seconds(int(span))} s from a match's first link to its "
             f"last; Spark shards warm up on it" if span != math.inf else
             f"span: unbounded -- {unbounded.text()!r} has no delay bounding it, so waiting "
             f"tokens never expire (the run stops at {self.token_bound:,} tokens) and "
             "Spark runs it in one task"),
            f"plan: {self.new_engine().describe()}",
            "",
            "automaton: " + automaton.describe()[0],
            *automaton.describe()[1:],
        ]
        return lines
