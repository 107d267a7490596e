"""Several jobs over one read of a stream: a job made of jobs.

A :class:`CompositeJob` is a :class:`~graphcep.jobs.base.ReplayJob` whose engine
(:class:`CompositeEngine`) pushes every batch to one engine per member job, each batch
oriented as that member reads it, and returns the members' matches together. The runtimes
(in-process, Spark, streaming) replay it as any other job: the input is read, sorted,
sharded and checkpointed once, and each match keeps the name of the query that found it
(its ``query`` column). Shards and checkpoints are sized for the widest member: a
member's warm-up is then longer than it needs, never shorter, so each member reports
exactly its own matches.

The members write one kind of match record (their :class:`~graphcep.io.sinks.MatchFormat`
is the same), so one sink takes them all; a SAL program's SUBGRAPH statements are the
first use (:func:`graphcep.jobs.subgraph.load`).

Example
-------
>>> import pyarrow as pa
>>> from graphcep.lang.sal import parse_program
>>> from graphcep.jobs.subgraph import SubgraphJob
>>> program = parse_program(
...     "SUBGRAPH A { x1 e1 x2; }"
...     "SUBGRAPH B { x1 e1 x2; x2 e2 x1; "
...     "starttime(e1) < starttime(e2); starttime(e2) - starttime(e1) <= 5; }")
>>> job = CompositeJob([SubgraphJob.create(program, name) for name in ("A", "B")])
>>> job.name
'A, B'
>>> edges = pa.table({"t": [0, 1_000_000], "src": ["a", "b"], "dst": ["b", "a"]})
>>> from graphcep.runtime.local import run_job
>>> sorted(run_job(job, edges)[0].column("query").to_pylist())
['A', 'A', 'B']
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any

import pyarrow as pa

from graphcep.engines.base import MATCH_CHUNK_ROWS, ChunkedPushes, Engine
from graphcep.io.sinks import MatchFormat
from graphcep.jobs.base import (
    CellSplit,
    DeclaredSource,
    Extent,
    Instances,
    QueryWatch,
    ReplayJob,
    StreamNumbering,
)
from graphcep.patterns.subgraph import QueryError, SubgraphQuery

#: The version of :meth:`CompositeEngine.snapshot`'s layout.
_SNAPSHOT_VERSION = 1


class CompositeJob:
    """Several jobs replayed over one read of the stream (module docstring).

    Parameters
    ----------
    members
        The jobs, in the order ``explain`` shows them; at least one, all writing the same
        kind of match record and counting their extents in the same unit.
    """

    def __init__(self, members: Sequence[ReplayJob]) -> None:
        if not members:
            raise QueryError("a composite job needs at least one job")
        outputs = [job.output for job in members]
        if any(output.with_flat(None) != outputs[0].with_flat(None) for output in outputs):
            raise QueryError("the jobs of one run write different kinds of match record: "
                             f"{', '.join(job.name for job in members)}")
        self.members: tuple[ReplayJob, ...] = tuple(members)
        flat = None
        for output in outputs:  # one column set: a query lacking a column has nulls there
            flat = output.flat if flat is None else flat.union(output.flat)
        #: the members' kind of record, with the union of their flat columns
        self.output: MatchFormat = outputs[0].with_flat(flat)

    def _each(self, method: str, *args: Any) -> list[Any]:
        return [getattr(job, method)(*args) for job in self.members]

    def _like(self, members: list[ReplayJob]) -> CompositeJob:
        return CompositeJob(members)

    # -- what the job is ------------------------------------------------------------------

    @property
    def name(self) -> str:
        return ", ".join(job.name for job in self.members)

    @property
    def whole_stream(self) -> bool:
        return any(job.whole_stream for job in self.members)

    @property
    def local_matches(self) -> bool:
        return all(job.local_matches for job in self.members)

    @property
    def min_records(self) -> int:
        return min(job.min_records for job in self.members)

    @property
    def reads_events(self) -> bool:
        return all(job.reads_events for job in self.members)

    @property
    def reads_symbols(self) -> bool:
        return all(job.reads_symbols for job in self.members)

    def extent(self) -> Extent:
        """The widest member's extent: every member's warm-up fits in it."""
        extents = self._each("extent")
        units = {extent.unit for extent in extents}
        if len(units) > 1:
            raise QueryError(f"the jobs {self.name} bound their state in different units "
                             f"({', '.join(sorted(units))}) and cannot share shards")
        return Extent(max(extent.size for extent in extents), units.pop())

    def partition_key(self) -> str | None:
        """The members' common partition column, if they all have the same one."""
        keys = set(self._each("partition_key"))
        return keys.pop() if len(keys) == 1 else None

    # -- binding and bounds ---------------------------------------------------------------

    def bind(self, longest_duration_us: int) -> CompositeJob:
        return self._like(self._each("bind", longest_duration_us))

    def bounded_by(self, span_us: int) -> CompositeJob:
        return self._like(self._each("bounded_by", span_us))

    def stream_numbering(self) -> StreamNumbering | None:
        if any(n is not None for n in self._each("stream_numbering")):
            raise QueryError(f"the jobs {self.name} number the whole stream each "
                             "(subscriptions' positions): run them one by one")
        return None

    def prepare(self) -> None:
        self._each("prepare")

    # -- columns --------------------------------------------------------------------------

    def needed_columns(self, available: list[str]) -> list[str]:
        wanted = {c for cols in self._each("needed_columns", available) for c in cols}
        return [c for c in available if c in wanted]

    def check_columns(self, available: list[str]) -> None:
        self._each("check_columns", available)

    def orient(self, edges: pa.Table) -> pa.Table:
        """The edges as read: each member's engine orients them its own way."""
        return edges

    # -- engines --------------------------------------------------------------------------

    def new_engine(self, threads: int | None = 1) -> CompositeEngine:
        return CompositeEngine(self.members, [job.new_engine(threads) for job in self.members])

    # -- words ----------------------------------------------------------------------------

    def describe(self) -> list[str]:
        """Each member's description, numbered, after a line naming them all."""
        count = len(self.members)
        lines = [f"{count} queries over one read of the stream: {self.name} (each match "
                 "names its query)"]
        for i, job in enumerate(self.members, 1):
            lines += ["", f"[{i}/{count}] {job.name}", *job.describe()]
        return lines

    def summary_fields(self) -> dict[str, Any]:
        merged: dict[str, Any] = {}
        for fields in self._each("summary_fields"):
            merged.update(fields)
        return merged

    def plan_dot(self) -> str:
        raise QueryError(f"--dot draws one plan; {self.name!r} are several queries: "
                         "pick one (--query-name)")

    # -- cells, labels, sources -----------------------------------------------------------

    def cell_query(self) -> SubgraphQuery:
        raise QueryError(f"{self.name!r} are several queries, which HyperCube cells do not "
                         "split together; pick one (--query-name)")

    def cell_split(self) -> CellSplit:
        return CellSplit(query=self.cell_query())  # refused: several queries

    def playable(self, edges: pa.Table) -> None:
        return None  # each member keeps its own edges (RulesEngine filters per member)

    def playable_key(self) -> None:
        return None

    def wanted_labels(self) -> dict[str, set[str]]:
        return _merged(self._each("wanted_labels"))

    def labels_present(self, edges: pa.Table) -> dict[str, set[str]]:
        return _merged(self._each("labels_present", edges))

    def absent_labels(self, present: dict[str, set[str]]) -> list[str]:
        lines = [line for lines in self._each("absent_labels", present) for line in lines]
        return list(dict.fromkeys(lines))

    def declared_source(self) -> DeclaredSource | None:
        return next((s for s in self._each("declared_source") if s is not None), None)

    def watch(self, path: str) -> QueryWatch | None:
        return None

    def instances(self, matches: pa.Table) -> Instances:
        """By the first member: the members write one kind of record, whose ``match_id``
        is salted with the query's name (no two queries share an identity)."""
        return self.members[0].instances(matches)


def _merged(dicts: list[dict[str, set[str]]]) -> dict[str, set[str]]:
    merged: dict[str, set[str]] = {}
    for found in dicts:
        for kind, names in found.items():
            merged.setdefault(kind, set()).update(names)
    return merged


class CompositeEngine:
    """One engine per member job, each pushed every batch (oriented as its job reads it);
    their matches come back member by member: in one table (:meth:`push`), or in chunks
    as each member finds them (:meth:`push_chunks`)."""

    def __init__(self, jobs: Sequence[ReplayJob], engines: Sequence[Engine]) -> None:
        self.jobs = tuple(jobs)
        self.engines = list(engines)
        self._pushes: list[ChunkedPushes] = []

    def _joined(self, tables: list[pa.Table]) -> pa.Table:
        found = [table for table in tables if table.num_rows]
        if not found:
            return tables[0] if tables else self.jobs[0].output.schema.empty_table()
        return found[0] if len(found) == 1 else pa.concat_tables(found)

    def push(self, batch: pa.Table) -> pa.Table:
        return self._joined(list(self.push_chunks(batch)))

    def push_chunks(self, batch: pa.Table,
                    chunk_rows: int = MATCH_CHUNK_ROWS) -> Iterator[pa.Table]:
        """The matches ``batch`` completes, member by member, in each member's chunks of
        about ``chunk_rows`` (:class:`~graphcep.engines.base.ChunkedPushes`): a member is
        pushed when the chunks of the one before are taken, so one push's matches are
        never all made at once. Take every chunk before the next push."""
        pushes = self._pushes_of(chunk_rows)
        return chain.from_iterable(push(job.orient(batch))
                                   for job, push in zip(self.jobs, pushes, strict=True))

    def count(self, batch: pa.Table) -> int:
        """How many matches ``batch`` completes, each member counting its own (a SAL
        search without making one match)."""
        pushes = self._pushes_of(MATCH_CHUNK_ROWS)
        return sum(push.count(job.orient(batch))
                   for job, push in zip(self.jobs, pushes, strict=True))

    def _pushes_of(self, chunk_rows: int) -> list[ChunkedPushes]:
        """The members' :class:`ChunkedPushes`, kept from push to push (they remember how
        finely to slice a batch)."""
        if not self._pushes or self._pushes[0].chunk_rows != chunk_rows:
            self._pushes = [ChunkedPushes(engine, chunk_rows) for engine in self.engines]
        return self._pushes

    def warm(self, batch: pa.Table) -> None:
        for job, engine in zip(self.jobs, self.engines, strict=True):
            engine.warm(job.orient(batch))

    def advance(self, watermark_us: int) -> pa.Table:
        return self._joined([engine.advance(watermark_us) for engine in self.engines])

    def state_size(self) -> dict[str, int]:
        """Each figure summed over the members' engines."""
        total: dict[str, int] = {}
        for engine in self.engines:
            for key, value in engine.state_size().items():
                total[key] = total.get(key, 0) + value
        return total

    def describe(self) -> str:
        return "; ".join(f"{job.name}: {engine.describe()}"
                         for job, engine in zip(self.jobs, self.engines, strict=True))

    def close(self) -> None:
        for engine in self.engines:
            close = getattr(engine, "close", None)
            if close is not None:
                close()

    # -- checkpoints ----------------------------------------------------------------------

    def snapshot(self) -> bytes:
        """Each member engine's snapshot with its vertex features (which a SAL engine's
        snapshot leaves to its owner)."""
        parts = [(engine.snapshot(), getattr(engine, "features", None))
                 for engine in self.engines]
        return pickle.dumps({"composite": _SNAPSHOT_VERSION, "engines": parts},
                            protocol=pickle.HIGHEST_PROTOCOL)

    def restore_context(self) -> dict[str, Any]:
        """What :meth:`restore` needs beyond the bytes: this engine's members, whose
        classes (and their own restore context) restore each part."""
        return {"template": self}

    @classmethod
    def restore(cls, blob: bytes, template: CompositeEngine | None = None,
                **context: Any) -> CompositeEngine:
        from graphcep.engines.base import SnapshotError

        state = pickle.loads(blob)
        if template is None or not isinstance(state, dict) or \
                state.get("composite") != _SNAPSHOT_VERSION or \
                len(state["engines"]) != len(template.engines):
            raise SnapshotError("not a snapshot of these queries' engines: start from a new "
                                "checkpoint")
        engines = []
        for (part, features), fresh in zip(state["engines"], template.engines, strict=True):
            own = dict(getattr(fresh, "restore_context", dict)())
            if features is not None:
                own["features"] = features
            engines.append(type(fresh).restore(part, **own))
        return cls(template.jobs, engines)
