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
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pyarrow as pa

from graphcep.engines.base import Engine
from graphcep.engines.nu.automaton import compile_pattern
from graphcep.engines.nu.engine import MODES, NuEngine
from graphcep.engines.nu.tables import ineligibility
from graphcep.events import format_seconds
from graphcep.io.flat_columns import FlatColumns
from graphcep.io.sinks import SAL_MATCHES, MatchFormat
from graphcep.jobs.base import Extent, JobBase
from graphcep.patterns.nu import NuPattern, NuPatternError
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
    return NuJob(parse(path), mode, options.get("max_tokens"),
                 options.get("nu_engine") or "auto")


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

    def new_engine(self, threads: int | None = 1) -> Engine:
        if self.chosen == "compiled":
            from graphcep.engines.nu.compiled import CompiledNuEngine

            return CompiledNuEngine(self.pattern, max_tokens=self.token_bound)
        return NuEngine(self.pattern, mode=self.mode, max_tokens=self.token_bound)

    def summary_fields(self) -> dict[str, Any]:
        return {"mode": self.mode, "nu_engine": self.chosen}

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
