"""Exact partition-parallel streaming: one engine per HyperCube cell, in worker processes.

The streaming operator (:mod:`graphcep.runtime.streaming.driver`) hosts one engine in the driver.
With ``cells`` it hosts a :class:`CellEngines` instead: each released batch is routed to
the cells of :func:`~graphcep.runtime.hypercube.choose_shares`'s grid (every edge to every
cell whose coordinates it agrees with), each cell's engine -- a plain
:class:`~graphcep.engines.subgraph.SubgraphEngine` -- takes its rows, and a cell reports
only the matches whose home it is (:func:`~graphcep.runtime.hypercube.home_filter`): each
match is found in exactly one cell, as in batch mode's ``cells`` strategy. The cells live
in long-running worker processes (cell ``c`` in worker ``c mod P``), so they match in
parallel on the driver's cores; routed rows go out and matches come back as Arrow IPC.

State is still the window: :meth:`CellEngines.warm` routes warm-up edges the same way, so
the operator's released-edge log rebuilds every cell after a restart, and nothing else is
checkpointed. Keyed queries (one query vertex on every query edge: the watering hole's
``target``) send each edge to one cell; cyclic ones (the triangle) copy edges, and on few
cells ``choose_shares`` may keep a single cell when copies would cost more than they save.

Examples
--------
A fan-out keyed by its hub (each edge goes to one cell):

>>> from graphcep.io.generator import generate_netflow
>>> from graphcep.lang.sal import parse_program
>>> from graphcep.jobs.subgraph import SubgraphJob
>>> job = SubgraphJob.create(parse_program(
...     "{ hub e1 a; hub e2 b; starttime(e1) < starttime(e2); starttime(e2) - starttime(e1) <= 2; }"
... )).bind(0)
>>> edges = generate_netflow(3_000, 60, 500, seed=2).select(["t", "src", "dst", "dur", "seq"])
>>> with CellEngines(job, cells=4, processes=2) as cells:
...     parallel = cells.push(edges)
>>> single = job.new_engine().push(edges)
>>> sorted(parallel.column("match_id").to_pylist()) == sorted(single.column("match_id").to_pylist())
True
"""

from __future__ import annotations

import multiprocessing
from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.cores import usable_cores
from graphcep.events import empty_matches
from graphcep.jobs.subgraph import SubgraphJob
from graphcep.patterns.subgraph import QueryError
from graphcep.runtime.hypercube import (
    Shares,
    choose_shares,
    home_filter,
    route_roles,
    with_roles,
)

_CELL = "_cell"


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return sink.getvalue().to_pybytes()


def _table(payload: bytes) -> pa.Table:
    return pa.ipc.open_stream(payload).read_all()


def _serve(conn: Any, job: SubgraphJob, shares: Shares) -> None:
    """A worker: engines for the cells it is sent, created on first use."""
    pa.set_cpu_count(1)
    engines: dict[int, Any] = {}
    while True:
        op, arg = conn.recv()
        if op == "stop":
            return
        try:
            if op in ("push", "warm"):
                reply = _run_cells(op, _table(conn.recv_bytes()), job, shares, engines)
                conn.send(("ok", None))
                conn.send_bytes(_ipc(reply))
                continue
            if op == "reset":
                engines.clear()
                conn.send(("ok", None))
            elif op == "advance":
                for engine in engines.values():
                    engine.advance(arg)
                conn.send(("ok", None))
            elif op == "size":
                sizes = [e.state_size() for e in engines.values()]
                conn.send(("ok", {k: sum(s[k] for s in sizes) for k in (sizes[0] if sizes else {})}))
        except Exception as err:  # reported in the driver, with the worker's message
            conn.send(("error", f"{type(err).__name__}: {err}"))


def _run_cells(op: str, rows: pa.Table, job: SubgraphJob, shares: Shares,
               engines: dict[int, Any]) -> pa.Table:
    """Push (or warm) each cell's rows -- contiguous, in stream order -- into its engine;
    the home matches of the pushed cells."""
    if rows.num_rows == 0:  # none of this worker's cells got an edge of the batch
        return empty_matches()
    cells = rows.column(_CELL).to_numpy()
    rows = rows.drop_columns([_CELL])
    found = []
    starts = np.flatnonzero(np.r_[True, cells[1:] != cells[:-1]])
    for start, stop in zip(starts, np.r_[starts[1:], len(cells)], strict=True):
        cell = int(cells[start])
        engine = engines.get(cell)
        if engine is None:
            engine = engines[cell] = job.new_engine(threads=1)
        part = rows.slice(int(start), int(stop - start))
        if op == "warm":
            engine.warm(part)
        else:
            found.append(home_filter(engine.push(part), shares, cell))
    found = [m for m in found if m.num_rows]
    return pa.concat_tables(found) if found else empty_matches()


@dataclass
class _Worker:
    process: Any
    conn: Any


class CellEngines:
    """The engine protocol over a HyperCube grid of engines in ``processes`` workers.

    Parameters
    ----------
    job : SubgraphJob
        A SAL job without vertex features (a feature counts over the whole stream, which no
        cell sees), bound (:meth:`SubgraphJob.bind`).
    cells : int
        Cell budget for :func:`~graphcep.runtime.hypercube.choose_shares`.
    processes : int, optional
        Worker processes (default: as many as cells, at most the CPU count).

    Edges come in already oriented, as the streaming operator releases them. Matches come
    back sorted by match id (cells finish in any order).
    """

    def __init__(self, job: SubgraphJob, cells: int, processes: int | None = None) -> None:
        try:
            query = job.cell_query()
        except QueryError as err:
            raise ValueError(f"cells cannot run this job: {err}") from None
        self.job = job
        self.shares = choose_shares(query, cells, roles=True)
        count = processes or min(self.shares.cells, usable_cores())
        self.processes = max(1, min(count, self.shares.cells))
        ctx = multiprocessing.get_context("spawn")
        self._workers: list[_Worker] = []
        for _ in range(self.processes):
            parent, child = ctx.Pipe()
            process = ctx.Process(target=_serve, args=(child, job, self.shares), daemon=True)
            process.start()
            child.close()
            self._workers.append(_Worker(process, parent))
        self.edges_seen = 0
        self.matches_found = 0

    # -- engine protocol ------------------------------------------------------------------

    def push(self, batch: pa.Table) -> pa.Table:
        """Route a batch (stream order) to the cells; their home matches, by match id."""
        matches = self._scatter("push", batch)
        self.edges_seen += batch.num_rows
        self.matches_found += matches.num_rows
        return matches

    def warm(self, batch: pa.Table) -> None:
        """Route context edges to the cells without searching (a shard's warm-up)."""
        self._scatter("warm", batch)

    def advance(self, watermark_us: int) -> pa.Table:
        """Let every cell drop what no later edge can match (matches complete on arrival)."""
        self._broadcast("advance", int(watermark_us))
        return empty_matches()

    def reset(self) -> None:
        """Drop every cell's state (a fresh engine), keeping the workers."""
        self._broadcast("reset", None)
        self.edges_seen = self.matches_found = 0

    def state_size(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for sizes in self._broadcast("size", None):
            for key, value in sizes.items():
                total[key] = total.get(key, 0) + value
        return {**total, "cells": self.shares.cells}

    # -- lifecycle -------------------------------------------------------------------------

    def close(self) -> None:
        for w in self._workers:
            if w.process.is_alive():
                w.conn.send(("stop", None))
        for w in self._workers:
            w.process.join(timeout=10)
            if w.process.is_alive():
                w.process.kill()
        self._workers = []

    def __enter__(self) -> CellEngines:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __del__(self) -> None:
        if getattr(self, "_workers", None):
            self.close()

    # -- internals -------------------------------------------------------------------------

    def _scatter(self, op: str, batch: pa.Table) -> pa.Table:
        """Send each worker its cells' rows, then gather (the workers run meanwhile)."""
        if batch.num_rows == 0:
            return empty_matches()
        try:
            return self._exchange(op, batch)
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise RuntimeError(self._dead_workers()) from None

    def _dead_workers(self) -> str:
        dead = [f"worker {i} (exit code {w.process.exitcode})"
                for i, w in enumerate(self._workers) if not w.process.is_alive()]
        return "cell workers stopped: " + (", ".join(dead) or "a pipe closed")

    def _exchange(self, op: str, batch: pa.Table) -> pa.Table:
        # route() orients what it is given; these edges are oriented already, and
        # orienting is its own inverse
        cells, rows, roles = route_roles(self.job.orient(batch), self.job, self.shares)
        owner = cells % self.processes
        for index, w in enumerate(self._workers):
            mine = owner == index
            part = batch.take(pa.array(rows[mine])).append_column(_CELL, pa.array(cells[mine]))
            if self.shares.cells > 1:  # each cell's engine finds its own matches only
                part = with_roles(part, roles[mine])
            w.conn.send((op, None))
            w.conn.send_bytes(_ipc(part))
        found = []
        for w in self._workers:
            self._reply(w)
            found.append(_table(w.conn.recv_bytes()))
        found = [m for m in found if m.num_rows]
        if not found:
            return empty_matches()
        matches = pa.concat_tables(found)
        return matches.take(pc.sort_indices(matches, [("match_id", "ascending")]))

    def _broadcast(self, op: str, arg: Any) -> list[Any]:
        """Send every worker ``(op, arg)``; their replies, in worker order."""
        try:
            for w in self._workers:
                w.conn.send((op, arg))
            return [self._reply(w) for w in self._workers]
        except (BrokenPipeError, ConnectionResetError, EOFError):
            raise RuntimeError(self._dead_workers()) from None

    @staticmethod
    def _reply(w: _Worker) -> Any:
        status, value = w.conn.recv()
        if status == "error":
            raise RuntimeError(f"cell worker failed: {value}")
        return value
