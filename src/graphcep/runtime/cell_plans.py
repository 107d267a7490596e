"""The cells a job's stream splits into, whatever its kind: routing and the home cell.

A job says how its stream splits exactly (:meth:`~graphcep.jobs.base.ReplayJob.cell_split`):

- a SAL query is split by HyperCube over its vertex variables
  (:mod:`graphcep.runtime.hypercube`: a :class:`~graphcep.runtime.hypercube.Shares`
  grid, keyed when one variable is on every query edge);
- a ν-expression by the variable every link of every match reads, subscriptions by their
  key field: :class:`KeyedCells`. An edge goes to the cell ``h(value) mod cells`` of the
  value of each of the split's columns (``h``: the vertex hash,
  :func:`graphcep.hashing.vertex_hash`, the same in every process), so the key's cell
  holds every record of each match with that key; a match is reported by its key's cell
  alone (:func:`home_filter`);
- DDST patterns and anchored ν-expressions have no exact split: their jobs say why.

:func:`route` and :func:`home_filter` take either plan, so the executor mode's cells
(:mod:`graphcep.runtime.streaming.cells`) run every kind the same way.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.jobs.sequences import SubscriptionJob
>>> from graphcep.lang.sequences import parse_subscriptions
>>> job = SubscriptionJob(parse_subscriptions("back: @x.@y.@x"))
>>> plan = cell_plan(job, 4)
>>> plan
KeyedCells(cells=4, columns=('src',), home=('column', 'key'))
>>> edges = pa.table({"src": ["h", "k", "h"], "dst": ["a", "b", "a"]})
>>> cells, rows, roles = route(edges, job, plan)  # roles: -1, any link (keyed)
>>> cell = dict(zip(rows.tolist(), cells.tolist()))  # each edge once
>>> len(cell), cell[0] == cell[2]  # a key's edges together
(3, True)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.hashing import vertex_hash
from graphcep.runtime import hypercube
from graphcep.runtime.hypercube import Shares, choose_shares, keyed_copies


@dataclass(frozen=True)
class KeyedCells:
    """``cells`` cells keyed by the values of ``columns``; ``home`` reads a match's key
    (:class:`~graphcep.jobs.base.CellSplit`); ``words``: the split, in words."""

    cells: int
    columns: tuple[str, ...]
    home: tuple[str, str]
    words: str = field(default="", compare=False, repr=False)

    @property
    def expected_copies(self) -> float:
        """Expected cells an edge goes to (:func:`~graphcep.runtime.hypercube.keyed_copies`)."""
        return keyed_copies(len(self.columns), self.cells)


#: how a job's stream is split into cells: a HyperCube grid, or keyed cells
CellPlan = Shares | KeyedCells


def cell_plan(job: Any, cells: int) -> CellPlan:
    """The job's split (:meth:`~graphcep.jobs.base.ReplayJob.cell_split`) over at most
    ``cells`` cells; a :class:`~graphcep.patterns.subgraph.QueryError` saying why when
    none is exact."""
    if cells < 1:
        raise ValueError(f"cells must be at least 1, got {cells}")
    split = job.cell_split()
    if split.query is not None:
        return choose_shares(split.query, cells, roles=True)  # the cells screen roles
    return KeyedCells(cells, split.columns, split.home, split.words)


def plan_words(plan: CellPlan) -> str:
    """The plan in a few words, for the stream's summary line."""
    if isinstance(plan, Shares):
        grid = "x".join(map(str, plan.shares))
        return f"grid {grid} over {', '.join(plan.variables)}"
    return f"keyed by {', '.join(plan.columns)}"


def route(edges: pa.Table, job: Any, plan: CellPlan
          ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every (cell, row) pair, sorted by cell then row, as
    :func:`graphcep.runtime.hypercube.route_roles` gives them: row ``i`` of ``edges`` must
    be matched in that cell, playing the query edges whose bits its int64 sets (every
    bit, -1, where it may play any: keyed cells). Keyed, an edge goes to the cell of each
    of its key values."""
    if isinstance(plan, Shares):
        return hypercube.route_roles(edges, job, plan)
    n = edges.num_rows
    if n == 0:
        return np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64)
    rows = np.arange(n, dtype=np.int64)
    keys = np.unique(np.concatenate([cell_of(edges.column(c), plan.cells) * n + rows
                                     for c in plan.columns]))
    return keys // n, keys % n, np.full(len(keys), -1, np.int64)


def screens_roles(plan: CellPlan) -> bool:
    """Whether a cell's engine is told the roles of its edges (HyperCube cells of a SAL
    query, more than one): then it finds its own matches only
    (:func:`~graphcep.runtime.hypercube.route_roles`)."""
    return isinstance(plan, Shares) and plan.cells > 1


def cell_of(values: pa.Array | pa.ChunkedArray, cells: int) -> np.ndarray:
    """int64: the cell of each key value (nulls hash like the empty string)."""
    return vertex_hash(values) % cells


def home_filter(matches: pa.Table, plan: CellPlan, cell: int) -> pa.Table:
    """The matches whose home is ``cell``: what that cell reports. Keyed by one column,
    each edge lies in one cell, so a cell's matches are all its own."""
    if isinstance(plan, Shares):
        return hypercube.home_filter(matches, plan, cell)
    if plan.cells == 1 or len(plan.columns) == 1 or matches.num_rows == 0:
        return matches
    where, name = plan.home
    if where == "bindings":
        keys = pc.map_lookup(matches.column("bindings"), pa.scalar(name), "first")
    else:
        keys = matches.column(name)
    if keys.null_count:
        raise ValueError(f"a match has no key {name!r} ({where})")
    return matches.filter(pa.array(cell_of(keys, plan.cells) == cell))
