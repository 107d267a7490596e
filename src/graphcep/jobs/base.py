"""The job protocol: what the in-process, Spark and streaming runtimes replay.

A job is a query bound to everything a runtime needs to replay it, shard by shard,
without knowing which matching semantics it runs: how far back a shard must read to
warm its engine up (:class:`Extent`), which columns the engine reads, how edges are
oriented, how to build a fresh engine, how its match records look, and what to say about
it (``explain``, the run summary, warnings about the input). One module per semantics
implements it (:mod:`graphcep.jobs.subgraph`, :mod:`graphcep.jobs.ddst`);
:mod:`graphcep.jobs` loads any query file into the right one. No runtime asks which kind
of job it holds.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from numbers import Real
from typing import TYPE_CHECKING, Any, Literal, Protocol

import numpy as np
import pyarrow as pa

from graphcep.engines.base import Engine
from graphcep.io.sinks import MatchFormat
from graphcep.patterns.subgraph import QueryError

if TYPE_CHECKING:
    from graphcep.patterns.subgraph import SubgraphQuery


@dataclass(frozen=True)
class Extent:
    """How far before a shard's first edge its engine must have seen the stream, so that
    every window ending in the shard is whole: ``size`` microseconds of event time
    (``unit="us"``), or the ``size`` edges before it in stream order (``unit="edges"``,
    for count windows, whose reach in time is unknown until the stream is ranked)."""

    size: int
    unit: Literal["us", "edges"] = "us"


@dataclass(frozen=True)
class Instances:
    """What a runtime needs to tell one match (an *instance*) from another, whichever
    window or shard found it: one identity per match row, the same wherever it is found,
    and the start times (µs) of each match's first and last record."""

    keys: list[str]
    first_t: np.ndarray
    last_t: np.ndarray


@dataclass(frozen=True)
class DeclaredSource:
    """A stream the query text connects to itself (SAL's ``VastStream("host", port)``)."""

    fmt: str
    host: str
    port: int


@dataclass(frozen=True)
class CellSplit:
    """How a job's stream splits *exactly* into cells, each matched by an engine of the
    job's own on its share of the stream (:meth:`ReplayJob.cell_split`), each match
    reported by one cell.

    Either HyperCube over ``query``'s vertex variables (SAL,
    :mod:`graphcep.runtime.hypercube`), or *keyed*: an edge goes to the cell of the value
    of each of its ``columns`` (``h(value) mod cells``, the vertex hash), and the records
    of every match share one value in those columns -- the match's *key*, which ``home``
    reads back from the match: ``("bindings", X)`` the node bound to variable ``X``,
    ``("column", c)`` the match's column ``c``. The key's cell then holds all the
    records of the match, and the job's engine over that cell's edges (a subsequence of
    the stream in stream order) finds it; it is reported there alone. ``words``: the
    split in words, for ``graphcep explain``. ``fields``: the fields beyond ``t, src,
    dst, dur`` the cells' engines read (the cells carry them, their types fixed when the
    stream starts).
    """

    query: SubgraphQuery | None = None
    columns: tuple[str, ...] = ()
    home: tuple[str, str] | None = None
    words: str = ""
    fields: frozenset[str] = frozenset()


class StreamNumbering(Protocol):
    """What window widening numbers over the whole stream, before it cuts windows, for a
    job whose matches depend on where their records lie in it (a key's sequence
    positions, :mod:`graphcep.jobs.key_positions`); its state goes with the widening's."""

    def number(self, batch: pa.Table) -> pa.Table:
        """The stream's next records (in stream order) with the numbers added."""
        ...

    def window(self, job: ReplayJob, records: pa.Table
               ) -> tuple[ReplayJob, pa.Table, Callable[[pa.Table], pa.Table]]:
        """The job and records a window's detector runs, and the map of its match rows
        back to the stream's terms."""
        ...


class QueryWatch(Protocol):
    """A query file watched while a stream runs (:meth:`ReplayJob.watch`)."""

    def changes(self, engine: Engine) -> list[str]:
        """Re-read the file if it changed and apply the difference to ``engine`` (between
        micro-batches); one line per change applied or edit refused."""
        ...


class ReplayJob(Protocol):
    """What every runtime replays (see the module docstring).

    The runtimes rely on one property of every engine a job builds: a push reports
    exactly the matches *triggered* by the edges it delivers, so edges before a shard
    (its warm-up) only fill state, and a match is reported by the shard holding the edge
    that triggers it -- exactly once.
    """

    #: how matches are written, with their Arrow schema
    output: MatchFormat

    @property
    def name(self) -> str: ...

    @property
    def whole_stream(self) -> bool:
        """Whether the query needs the whole stream in one engine (no sharding)."""
        ...

    def bind(self, longest_duration_us: int) -> ReplayJob:
        """The job with bounds that default to the data's (the longest edge duration)."""
        ...

    def extent(self) -> Extent: ...

    def needed_columns(self, available: list[str]) -> list[str]: ...

    def check_columns(self, available: list[str]) -> None:
        """Refuse, with a :class:`QueryError` naming the fields, a stream that lacks fields
        the query cannot do without."""
        ...

    def orient(self, edges: pa.Table) -> pa.Table: ...

    def new_engine(self, threads: int | None = 1) -> Engine: ...

    def describe(self) -> list[str]:
        """The query, its extent and the engine's plan, in lines (``graphcep explain``)."""
        ...

    def summary_fields(self) -> dict[str, Any]:
        """Entries the run summary adds for this job (the DDST engine's name)."""
        ...

    def cell_query(self) -> SubgraphQuery:
        """The query graph HyperCube splits the job by (one cell per share of its vertex
        variables); a :class:`QueryError` saying why when the job cannot run in cells."""
        ...

    def cell_split(self) -> CellSplit:
        """How the stream splits exactly into cells (``--matching executors``); a
        :class:`QueryError` saying why when no split is exact."""
        ...

    def playable(self, edges: pa.Table) -> np.ndarray | None:
        """bool[n]: the (oriented) edges that may take part in a match -- the others change
        none and may be left out of the job's input; None: every edge may matter."""
        ...

    def playable_key(self) -> Any:
        """A hashable key: jobs with equal keys keep the same edges (:meth:`playable`), so
        several jobs over one stream filter it once; None when :meth:`playable` is."""
        ...

    def wanted_labels(self) -> dict[str, set[str]]:
        """The labels the query asks for, by kind (``edge label``, ``vertex label``)."""
        ...

    def labels_present(self, edges: pa.Table) -> dict[str, set[str]]:
        """The query's labels found in each label column of ``edges``."""
        ...

    def absent_labels(self, present: dict[str, set[str]]) -> list[str]:
        """The labels asked for that no edge carries, in words, given ``present``."""
        ...

    def declared_source(self) -> DeclaredSource | None:
        """The stream the query text connects to itself, if any."""
        ...

    def input_warnings(self, edges: Any) -> list[str]:
        """What about the input (an Arrow table, or a Spark frame of the same columns)
        would silently stop this query from matching, one line each (no prefix)."""
        ...

    def output_warnings(self, matches: pa.Table) -> list[str]:
        """What the first matches written say the user should hear while the run goes on
        (their size, say), one line each (no prefix)."""
        ...

    def watch(self, path: str) -> QueryWatch | None:
        """A watch on the query file ``path`` whose changes a stream applies between
        micro-batches (subscriptions), or None: the query is fixed when the stream starts."""
        ...

    def shared_form(self) -> tuple[Hashable, Real] | None:
        """``(key, bound)`` when the job's matches are those of any job of the same key
        with a bound at least as wide, passed through :meth:`own_matches` -- so that rules
        differing only in a bound share one engine (:class:`~graphcep.jobs.rules.
        RulesEngine`); None: the job needs an engine of its own."""
        ...

    def own_matches(self, matches: pa.Table) -> pa.Table:
        """The job's own matches among those of the engine of a job of its shared form
        with a wider bound (its records, its name, its match ids)."""
        ...

    def plan_dot(self) -> str:
        """The job's plan as Graphviz DOT (a ν-expression's automaton, a subscriptions
        file's pattern tree); a :class:`QueryError` for kinds that have none to draw."""
        ...

    @property
    def reads_events(self) -> bool:
        """Whether the job reads single events (rows with an empty ``dst``: time-event
        sequences) as well as links."""
        ...

    @property
    def reads_symbols(self) -> bool:
        """Whether the job reads a plain sequence's symbols (``.seq``: each row a key and
        a symbol, no link)."""
        ...

    def partition_key(self) -> str | None:
        """A column whose values split the stream into independent sub-streams -- every
        match lies within one value's edges -- so that a runtime may replay each value's
        edges, whatever their times, in an engine of its own (None: no such column)."""
        ...

    def instances(self, matches: pa.Table) -> Instances:
        """Each match row's identity and the times of its first and last record."""
        ...

    @property
    def local_matches(self) -> bool:
        """Whether a match is decided by its own records alone: the detector run over any
        subsequence of the stream that holds them reports it, and reports only matches of
        the stream (what makes window widening exact, :mod:`graphcep.runtime.widening`)."""
        ...

    @property
    def min_records(self) -> int:
        """The fewest records a match holds: a window with fewer reports nothing (window
        widening skips it without starting an engine)."""
        ...

    def prepare(self) -> None:
        """Load what the job's engines need before their first edge (compiled kernels):
        ``graphcep run`` calls it while the input is read."""
        ...

    def stream_numbering(self) -> StreamNumbering | None:
        """What window widening must number over the whole stream for this job's
        windows (None: a window's records say all a match needs)."""
        ...

    def bounded_by(self, span_us: int) -> ReplayJob:
        """The job over a window whose start times lie within ``span_us`` of each other:
        bounds the job leaves open may be taken from it (a SAL query without a time bound
        gets it as its window); the matches inside such a window stay the same."""
        ...


class JobBase:
    """Defaults for the parts of :class:`ReplayJob` most semantics leave as they are: no
    labels to look for, nothing to add to the summary, no cells, no declared source."""

    def summary_fields(self) -> dict[str, Any]:
        return {}

    def cell_query(self) -> SubgraphQuery:
        raise QueryError(f"a {type(self).__name__} is not split by vertex variables")

    def cell_split(self) -> CellSplit:
        return CellSplit(query=self.cell_query())  # HyperCube, where the kind has a query

    def playable(self, edges: pa.Table) -> np.ndarray | None:
        return None

    def playable_key(self) -> Any:
        return None

    def wanted_labels(self) -> dict[str, set[str]]:
        return {}

    def labels_present(self, edges: pa.Table) -> dict[str, set[str]]:
        return {}

    def absent_labels(self, present: dict[str, set[str]]) -> list[str]:
        return []

    def declared_source(self) -> DeclaredSource | None:
        return None

    def input_warnings(self, edges: Any) -> list[str]:
        return []

    def output_warnings(self, matches: pa.Table) -> list[str]:
        return []

    def watch(self, path: str) -> QueryWatch | None:
        return None

    def shared_form(self) -> tuple[Hashable, Real] | None:
        return None

    def own_matches(self, matches: pa.Table) -> pa.Table:
        return matches

    def partition_key(self) -> str | None:
        return None

    @property
    def reads_events(self) -> bool:
        return False

    @property
    def reads_symbols(self) -> bool:
        return False

    def instances(self, matches: pa.Table) -> Instances:
        """From the ``match_id``, ``first_t`` and ``last_t`` columns: each kind's
        ``match_id`` hashes what makes a match the same match wherever it is found."""
        return Instances(matches.column("match_id").to_pylist(),
                         matches.column("first_t").to_numpy().astype(np.int64),
                         matches.column("last_t").to_numpy().astype(np.int64))

    @property
    def local_matches(self) -> bool:
        return False

    def bounded_by(self, span_us: int) -> Any:
        return self

    @property
    def min_records(self) -> int:
        return 1

    def prepare(self) -> None:
        return None

    def stream_numbering(self) -> StreamNumbering | None:
        return None

    def plan_dot(self) -> str:
        raise QueryError(f"--dot draws a ν-expression's automaton or a subscriptions file's "
                         f"pattern tree; {self.name!r} is neither")


def renamed_matches(matches: pa.Table, name: str, ids: list[str] | np.ndarray) -> pa.Table:
    """SAL-shaped match records named after query ``name``, with match ids ``ids``: what
    a rule takes of an engine it shares (``ReplayJob.own_matches``)."""
    names = matches.schema.names
    return (matches.set_column(names.index("query"), "query",
                               pa.array([name] * matches.num_rows, pa.string()))
            .set_column(names.index("match_id"), "match_id", pa.array(ids, pa.string())))


def cell_query_or_none(job: ReplayJob) -> SubgraphQuery | None:
    """:meth:`ReplayJob.cell_query`, or None where the job cannot run in cells."""
    try:
        return job.cell_query()
    except QueryError:
        return None


def format_refusal(job: ReplayJob, fmt: str | None) -> str | None:
    """Why ``job`` does not read input of format ``fmt``, in one line (None: it does):
    a time-event sequence holds events and a plain sequence symbols, not links."""
    if fmt == "tes" and not job.reads_events:
        return (f"a time-event sequence (tes) holds events, not links: only ν-expressions "
                f"read it, and {job.name!r} is not one")
    if fmt == "seq" and not job.reads_symbols:
        return (f"a plain sequence (seq) holds symbols, not links: only subscriptions files "
                f"read it, and {job.name!r} is not one")
    return None
