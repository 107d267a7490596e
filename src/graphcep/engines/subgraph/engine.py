"""Exact incremental temporal subgraph matching (SAL queries).

Semantics (also in the README):

* query vertices bind to **distinct** stream vertices (subgraph isomorphism, Definition 4
  of the paper); ``homomorphic=True`` lets two query vertices share a stream vertex, as
  SAM does;
* the edges of a match are distinct stream edges;
* comparisons mean exactly what they say on integer microseconds (``<`` excludes equal
  times, ``<=`` includes them);
* every match is reported exactly once, by the push that delivers its last edge in stream
  order ``(t, seq)``.

How: each pushed batch is appended to a window of the edges that can still take part in a
match (those within the query's extent of the newest edge). For every new edge that can
be a match's last edge, a compiled backtracking search (:mod:`subgraph_kernel`) binds the
other query edges to *earlier* window edges; anchoring at the last edge is what makes each
match appear once. Work per push is O(window + batch) to regroup the window plus the
search itself; no Python code runs per edge. The search fills a buffer of a fixed size,
hands it out and goes on where it stopped (:meth:`SubgraphEngine.push_chunks`), so a push
whose edges complete billions of matches holds one buffer of them; :meth:`SubgraphEngine.count`
counts them with no buffer at all.

From: E. L. Goodman and D. Grunwald, "Streaming Temporal Graphs: Subgraph Matching",
IEEE Big Data 2019.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.lang.sal import parse_query
>>> q = parse_query('''{ x1 e1 x2; x2 e2 x3; x3 e3 x1;
...     starttime(e3) - starttime(e1) <= 10;
...     starttime(e1) < starttime(e2); starttime(e2) < starttime(e3); }''')
>>> engine = SubgraphEngine(q)
>>> batch = pa.table({"t": [0, 1_000_000, 2_000_000], "src": ["a", "b", "c"],
...                   "dst": ["b", "c", "a"]})
>>> matches = engine.push(batch)
>>> matches.num_rows, matches.column("bindings").to_pylist()[0]
(1, [('x1', 'a'), ('x2', 'b'), ('x3', 'c')])
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from concurrent.futures import ThreadPoolExecutor
from typing import Protocol

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.cores import usable_cores
from graphcep.engines.base import (
    MATCH_CHUNK_ROWS,
    EngineBase,
    StateBoundError,
    in_order,
    joined_chunks,
)
from graphcep.engines.subgraph.kernel import (
    build_pair_index,
    build_signatures,
    fill_layout,
    group_by,
    scratch_size,
    search,
)
from graphcep.engines.subgraph.plan import (
    MODE_ALL,
    MODE_IN,
    MODE_OUT,
    MODE_PAIR,
    ROLES,
    CompiledQuery,
    compile_query,
)
from graphcep.engines.vertex_ids import VertexIds
from graphcep.events import (
    MATCH_SCHEMA,
    MATCHED_EDGE_TYPE,
    empty_matches,
    match_ids,
    normalize_edges,
)
from graphcep.patterns.subgraph import (
    PREDICATE_COMPARISONS,
    EdgePredicate,
    QueryError,
    SubgraphQuery,
)


class VertexFeatures(Protocol):
    """What the engine needs from streaming vertex features (``x in Top1000``)."""

    def update(self, batch: pa.Table, first_position: int) -> None: ...

    def member(self, feature: str, vertices: np.ndarray, positions: np.ndarray) -> np.ndarray: ...


_EMPTY_I64 = np.empty(0, dtype=np.int64)
_SIGNATURES = -1  # the key of the pair signatures among the groupings (not a lookup mode)
_EMPTY_I32 = np.empty(0, dtype=np.int32)


def signature_words(edges: int, vertices: int) -> int:
    """64-bit words per vertex signature: about 16 bits per edge of an average vertex."""
    words = 1
    while words * 64 < 16 * edges / max(vertices, 1) and words < 64:
        words *= 2
    return words


def _row_blocks(anchors: np.ndarray, plan_args: tuple, shared: tuple, k: int,
                state_size: int, chunk_rows: int) -> Iterator[np.ndarray]:
    """Match rows anchored at ``anchors``, in blocks of at most ``chunk_rows``: the search
    stops when its buffer is full and goes on from where it stopped (:func:`search`)."""
    scratch = np.empty(state_size, dtype=np.int64)
    size = min(chunk_rows, max(1024, 2 * len(anchors)))
    start, resume = 0, False
    while start < len(anchors) or resume:
        buffer = np.empty((size, k), dtype=np.int32)
        start, rows, resume = search(anchors, start, *plan_args, *shared, buffer, scratch,
                                     resume, False)
        if rows:
            yield buffer[:rows]
        size = min(chunk_rows, size * 4)  # filled up: the next buffer is larger


def _count_rows(anchors: np.ndarray, plan_args: tuple, shared: tuple, k: int,
                state_size: int) -> int:
    """How many match rows are anchored at ``anchors``, none of them written."""
    scratch = np.empty(state_size, dtype=np.int64)
    nothing = np.empty((0, k), dtype=np.int32)
    return int(search(anchors, 0, *plan_args, *shared, nothing, scratch, False, True)[1])


def predicate_mask(edges: pa.Table, pred: EdgePredicate,
                   aliases: Mapping[str, str] | None = None) -> np.ndarray:
    """Where ``edge.field op value`` holds, as booleans, by
    :meth:`~graphcep.patterns.subgraph.EdgePredicate.operand`'s rule (the Arrow back end of
    :data:`~graphcep.patterns.subgraph.PREDICATE_COMPARISONS`). Routing (HyperCube cells) uses the
    same rule, so an edge goes only where the engine could bind it."""
    text = {f.name: pa.types.is_string(f.type) or pa.types.is_large_string(f.type)
            for f in edges.schema}
    name, value = pred.operand(text, aliases)
    compare = getattr(pc, PREDICATE_COMPARISONS[pred.op][0])
    result = compare(edges.column(name), pa.scalar(value))
    return np.asarray(pc.fill_null(result, False).to_numpy(zero_copy_only=False), dtype=bool)


def load_kernels() -> None:
    """Load the compiled kernels (from numba's cache, else compile them) by matching one
    triangle on three edges: a run's first push then starts matching at once. ``graphcep
    run`` does it while the input is read; a process loads each kernel once."""
    from graphcep.patterns.subgraph import QueryBuilder

    query = (QueryBuilder("kernels").edge("x1", "e1", "x2").edge("x2", "e2", "x3")
             .edge("x3", "e3", "x1").within("e1", "e3", 10).before("e1", "e2")
             .before("e2", "e3").build())
    SubgraphEngine(query).push(pa.table({"t": np.arange(3, dtype=np.int64) * 1_000_000,
                                         "src": ["a", "b", "c"], "dst": ["b", "c", "a"]}))


class SubgraphEngine(EngineBase):
    """Incremental exact matcher for one :class:`SubgraphQuery`.

    Parameters
    ----------
    query
        The pattern.
    homomorphic
        Allow two query vertices to bind the same stream vertex (SAM's behaviour).
    max_duration_us
        Upper bound on edge durations; needed only when constraints on *end* times are
        what bounds the query's extent.
    field_aliases
        Names predicates may use for core columns (``SourceIp`` -> ``src``).
    features
        Streaming vertex features for ``x in F`` constraints.
    max_window_edges
        State bound: pushing more edges than this into one extent raises
        :class:`StateBoundError` with a clear message instead of exhausting memory.
    threads
        Threads for the search of a large batch (default: the machine's cores; Spark
        tasks use 1, as Spark runs one task per core).
    """

    #: equal times inside a batch keep the order given (seq breaks ties across batches)
    ties_by_seq = False

    def __init__(
        self,
        query: SubgraphQuery,
        *,
        homomorphic: bool = False,
        max_duration_us: int | None = None,
        field_aliases: Mapping[str, str] | None = None,
        features: VertexFeatures | None = None,
        max_window_edges: int = 50_000_000,
        threads: int | None = None,
    ) -> None:
        super().__init__()
        self.query = query
        self.compiled: CompiledQuery = compile_query(query, max_duration_us)
        self.homomorphic = homomorphic
        self.max_duration_us = max_duration_us
        self.field_aliases = dict(field_aliases or {})
        self.features = features
        self.max_window_edges = max_window_edges
        self.threads = threads if threads is not None else usable_cores()
        if query.vertex_constraints and features is None:
            names = sorted({c.feature for c in query.vertex_constraints})
            raise QueryError(
                f"query {query.name!r} uses vertex features {names} but none are computed; "
                "run it from a SAL program that defines them (FOREACH ... GENERATE ...)"
            )
        self._ids = VertexIds()
        self._t = _EMPTY_I64
        self._end = _EMPTY_I64
        self._src = _EMPTY_I32
        self._dst = _EMPTY_I32
        self._seq = _EMPTY_I64
        self._pos = _EMPTY_I64
        self._ok = np.zeros((self.compiled.k, 0), dtype=np.uint8)
        #: whether ``_ok`` screens the edges: the query has edge predicates, or the
        #: batches came with the roles of a HyperCube cell (:data:`ROLES`)
        self._screened = bool(self.query.edge_predicates)
        self._next_position = 0

    # -- protocol ---------------------------------------------------------------------

    @property
    def extent_us(self) -> int:
        return self.compiled.extent_us

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Add a batch in stream order; return the matches whose last edge is in it."""
        return joined_chunks(self.push_chunks(batch), empty_matches)

    def push_chunks(self, batch: pa.Table | pa.RecordBatch,
                    chunk_rows: int = MATCH_CHUNK_ROWS) -> Iterator[pa.Table]:
        """Add a batch in stream order (now); the matches whose last edge is in it come
        from the iterator returned, at most ``chunk_rows`` at a time, found as they are
        taken: a batch completing billions of matches runs in bounded memory. Take every
        chunk before the next push."""
        start = self._ingest(batch)
        if start is None:
            return iter(())
        return self._match_tables(self._row_stream(start, chunk_rows))

    def count(self, batch: pa.Table | pa.RecordBatch) -> int:
        """Add a batch in stream order; how many matches its edges complete, counted by
        the search without one match row or record made (``graphcep run --count``)."""
        start = self._ingest(batch)
        if start is None:
            return 0
        if self.query.vertex_constraints:  # the features decide per match: rows needed
            found = sum(int(self._vertex_mask(rows).sum())
                        for rows in self._row_stream(start, MATCH_CHUNK_ROWS))
        else:
            found = self._count(start)
        self.matches_found += found
        return found

    def warm(self, batch: pa.Table | pa.RecordBatch) -> None:
        """Add a batch as context only: no match whose last edge is in it is looked for.

        Time-sharded replay warms a shard's engine with the edges of the preceding extent,
        whose matches belong to the previous shard.
        """
        self._ingest(batch)

    def _match_tables(self, blocks: Iterator[np.ndarray]) -> Iterator[pa.Table]:
        for rows in blocks:
            matches = self._matches_table(rows)
            if matches.num_rows:
                self.matches_found += matches.num_rows
                yield matches

    def _ingest(self, batch: pa.Table | pa.RecordBatch) -> int | None:
        """Add the batch to the window; the window position of its first edge (None for
        an empty batch)."""
        if isinstance(batch, pa.RecordBatch):
            batch = pa.Table.from_batches([batch])
        if batch.num_rows == 0:
            return None
        if "seq" not in batch.column_names:
            # no arrival numbers given: number edges in push order
            first = self._next_position if "pos" not in batch.column_names else None
            seqs = batch.column("pos") if first is None else pa.array(
                np.arange(first, first + batch.num_rows, dtype=np.int64))
            batch = batch.append_column("seq", seqs)
        batch = normalize_edges(batch)
        t = batch.column("t").to_numpy().astype(np.int64, copy=False)
        seq = batch.column("seq").to_numpy().astype(np.int64, copy=False)
        self._check_order(t, seq)
        positions = self._positions(batch)
        if self.features is not None:
            self.features.update(batch, int(positions[0]))
        self._evict(int(t[0]))
        start = len(self._t)
        self._append(batch, t, seq, positions)
        if len(self._t) > self.max_window_edges:
            held = self._most_within_extent(start)
            if held > self.max_window_edges:
                raise StateBoundError(
                    f"query {self.query.name!r} would hold {held:,} edges within its "
                    f"extent of {self.extent_us / 1e6:g} s, above max_window_edges="
                    f"{self.max_window_edges:,}; raise the bound or narrow the query's window"
                )
        self.edges_seen += batch.num_rows
        return start

    def advance(self, watermark_us: int) -> pa.Table:
        """No edge before ``watermark_us`` will come: drop what cannot match any more.

        SAL matches complete on arrival, so nothing becomes due here.
        """
        self._evict(watermark_us)
        return empty_matches()

    def state_size(self) -> dict[str, int]:
        return {"edges": int(len(self._t)), "vertices": len(self._ids), "partial_matches": 0}

    def describe(self) -> str:
        return ("each arriving edge that fits a query edge starts a search for matches "
                "ending at it, over the edges within the query's extent "
                f"({self.extent_us / 1e6:g} s)")

    def state(self) -> dict:
        return {
            "query": self.query,
            "options": {
                "homomorphic": self.homomorphic,
                "max_duration_us": self.max_duration_us,
                "field_aliases": self.field_aliases,
                "max_window_edges": self.max_window_edges,
            },
            "ids": self._ids.state(),
            "arrays": (self._t, self._end, self._src, self._dst, self._seq, self._pos, self._ok),
            "next_position": self._next_position,
            "screened": self._screened,
        }

    @classmethod
    def from_state(cls, state: dict, features: VertexFeatures | None = None) -> SubgraphEngine:
        """``features``: the vertex features, restored by their owner (not in the state)."""
        engine = cls(state["query"], features=features, **state["options"])
        engine._ids = VertexIds.from_state(state["ids"])
        (engine._t, engine._end, engine._src, engine._dst, engine._seq, engine._pos,
         engine._ok) = state["arrays"]
        engine._next_position = state["next_position"]
        engine._screened = state.get("screened", engine._screened)
        return engine

    # -- window ---------------------------------------------------------------------

    def _positions(self, batch: pa.Table) -> np.ndarray:
        if "pos" in batch.column_names:
            pos = batch.column("pos").to_numpy().astype(np.int64)
        else:
            pos = np.arange(self._next_position, self._next_position + batch.num_rows, dtype=np.int64)
        self._next_position = int(pos[-1]) + 1
        return pos

    def _evict(self, now_us: int) -> None:
        """Drop edges that start more than the extent before ``now_us``."""
        if len(self._t) == 0:
            return
        keep_from = int(np.searchsorted(self._t, now_us - self.extent_us, side="left"))
        if keep_from == 0:
            return
        self._t = self._t[keep_from:]
        self._end = self._end[keep_from:]
        self._src = self._src[keep_from:]
        self._dst = self._dst[keep_from:]
        self._seq = self._seq[keep_from:]
        self._pos = self._pos[keep_from:]
        self._ok = self._ok[:, keep_from:]

    def _most_within_extent(self, start: int) -> int:
        """The most edges within one extent ending at an edge from ``start`` on: what the
        bound is about (a push of a whole file holds it all at once, but no match spans
        more than an extent of it)."""
        t = self._t
        first = np.searchsorted(t, t[start:] - self.extent_us, side="left")
        return int((np.arange(start, len(t)) - first).max()) + 1

    def _append(self, batch: pa.Table, t: np.ndarray, seq: np.ndarray, pos: np.ndarray) -> None:
        dur = batch.column("dur").to_numpy().astype(np.int64, copy=False)
        self._t = np.concatenate([self._t, t])
        self._end = np.concatenate([self._end, t + dur])
        src, dst = self._ids.encode_many([batch.column("src"), batch.column("dst")],
                                         threads=self.threads > 1)
        self._src = np.concatenate([self._src, src])
        self._dst = np.concatenate([self._dst, dst])
        self._seq = np.concatenate([self._seq, seq])
        self._pos = np.concatenate([self._pos, pos])
        self._ok = np.concatenate([self._ok, self._eligibility(batch)], axis=1)

    def _eligibility(self, batch: pa.Table) -> np.ndarray:
        """uint8[k, n]: may batch edge i play query edge q (edge predicates)."""
        k = self.compiled.k
        ok = np.ones((k, batch.num_rows), dtype=np.uint8)
        names = self.query.edge_names
        for pred in self.query.edge_predicates:
            ok[names.index(pred.edge)] &= self._predicate_mask(batch, pred)
        if ROLES in batch.column_names:  # the roles of its cell (plan.ROLES)
            self._screened = True
            roles = batch.column(ROLES).to_numpy()
            ok &= ((roles[None, :] >> np.arange(k)[:, None]) & 1).astype(np.uint8)
        return ok

    def _predicate_mask(self, batch: pa.Table, pred: EdgePredicate) -> np.ndarray:
        return predicate_mask(batch, pred, self.field_aliases).astype(np.uint8)

    # -- search ---------------------------------------------------------------------

    def _row_stream(self, batch_start: int, chunk_rows: int) -> Iterator[np.ndarray]:
        """The match rows (``int32[m, k]``, window positions per query edge) whose last
        edge is from ``batch_start`` on, in blocks of at most ``chunk_rows``: plan by plan,
        each plan's anchors split across threads when there are many."""
        searches, shared = self._searches(batch_start)
        c = self.compiled
        state = scratch_size(len(c.vertex_vars), c.k)
        for anchors, plan_args in searches:
            slices = np.array_split(anchors, self._chunks(len(anchors)))
            producers = [_row_blocks(part, plan_args, shared, c.k, state, chunk_rows)
                         for part in slices]
            yield from producers[0] if len(producers) == 1 else in_order(producers)

    def _count(self, batch_start: int) -> int:
        """How many matches end at an edge from ``batch_start`` on (no rows written)."""
        searches, shared = self._searches(batch_start)
        c = self.compiled
        state = scratch_size(len(c.vertex_vars), c.k)
        found = 0
        for anchors, plan_args in searches:
            slices = np.array_split(anchors, self._chunks(len(anchors)))
            if len(slices) == 1:
                found += _count_rows(slices[0], plan_args, shared, c.k, state)
                continue
            with ThreadPoolExecutor(len(slices)) as pool:  # the search releases the GIL
                found += sum(pool.map(
                    lambda part, args=plan_args: _count_rows(part, args, shared, c.k, state),
                    slices))
        return found

    def _searches(self, batch_start: int) -> tuple[list[tuple[np.ndarray, tuple]], tuple]:
        """Per plan, its anchors (the new edges that may play its first query edge) and
        its arguments to :func:`search`; and the arguments every plan shares (the window
        grouped as the plans read it)."""
        c = self.compiled
        nvertices = len(self._ids)
        modes = sorted({int(m) for plan in c.plans for m in plan.mode[1:]})
        grouped, seg_base, layout = self._groupings(modes, nvertices)
        empty_off = np.zeros(1, dtype=np.int64)
        out_off = grouped[MODE_OUT][0] if MODE_OUT in grouped else empty_off
        in_off = grouped[MODE_IN][0] if MODE_IN in grouped else empty_off
        if MODE_PAIR in grouped:
            pair_off, _, table_keys, table_ids, bitset, hbits = grouped[MODE_PAIR]
            sig_out, sig_in, words = grouped[_SIGNATURES]
        else:
            pair_off = empty_off
            table_keys = np.full(2, -1, dtype=np.int64)
            table_ids = np.zeros(2, dtype=np.int32)
            bitset = sig_out = sig_in = np.zeros(1, dtype=np.uint64)
            hbits = words = 1
        arrays = (
            c.esrc, c.edst, len(c.vertex_vars), not self.homomorphic,
        )
        shared = (
            self._t, self._end, self._src, self._dst, nvertices,
            seg_base, out_off, in_off, pair_off, table_keys, table_ids, bitset, hbits,
            sig_out, sig_in, words, *layout,
        )
        searches = []
        for plan in c.plans:
            a_q = int(plan.order[0])
            if self._screened:
                anchors = np.flatnonzero(self._ok[a_q, batch_start:]) + batch_start
            else:
                anchors = np.arange(batch_start, len(self._t), dtype=np.int64)
            plan_args = (
                plan.order, plan.mode, *arrays, plan.parallel | self.homomorphic,
                plan.rng_off, plan.rng_var, plan.rng_upper, plan.rng_c,
                plan.chk_off, plan.chk_x, plan.chk_y, plan.chk_c, plan.sig_side,
            )
            searches.append((anchors, plan_args))
        return searches, shared

    def _groupings(self, modes: list[int], nvertices: int
                   ) -> tuple[dict[int, tuple], np.ndarray, tuple[np.ndarray, ...]]:
        """The window grouped for each lookup mode (``{mode: (offsets, edge order, ...)}``,
        with the pair signatures under :data:`_SIGNATURES`), the start of each mode's
        segment in the layout, and the layout: every grouping orders all the window's
        edges, so each segment's place is known before any is built, and each grouping
        fills its own segment in the thread that built it.

        The builders run in parallel threads (the compiled builders release the GIL)
        unless the engine was given one thread: a Spark task runs beside one task per
        core, and extra threads there only contend for them (measured: 16 one-task
        processes on 16 cores)."""
        src, dst = self._src, self._dst
        n = len(src)
        ok = self._ok if self._screened else self._ok[:0]  # no predicates, no roles: no mask
        total = n * len(modes)
        layout = (np.empty(total, np.int32), np.empty(total, np.int64),
                  np.empty(total, np.int64), np.empty(total, np.int32),
                  np.empty(total, np.int32), np.empty((ok.shape[0], total), np.uint8))
        seg_base = np.zeros(4, dtype=np.int64)
        seg_base[modes] = np.arange(len(modes), dtype=np.int64) * n

        def laid_out(mode: int, grouping: tuple) -> tuple:
            fill_layout(grouping[1], self._t, self._end, src, dst, ok, *layout, seg_base[mode])
            return grouping

        def pairs() -> tuple:
            keys, ids, bitset, hbits, off, idx = build_pair_index(src, dst, nvertices)
            return laid_out(MODE_PAIR, (off, idx, keys, ids, bitset, hbits))

        def signatures() -> tuple:
            words = signature_words(n, nvertices)
            return (*build_signatures(src, dst, nvertices, words), words)

        builders = {
            MODE_OUT: lambda: laid_out(MODE_OUT, group_by(src, nvertices)),
            MODE_IN: lambda: laid_out(MODE_IN, group_by(dst, nvertices)),
            MODE_PAIR: pairs,
            MODE_ALL: lambda: laid_out(MODE_ALL, (None, np.arange(n, dtype=np.int32))),
        }
        tasks = {m: builders[m] for m in modes}
        if MODE_PAIR in modes:
            tasks[_SIGNATURES] = signatures
        if len(tasks) < 2 or n < 100_000 or self.threads == 1:
            return {m: build() for m, build in tasks.items()}, seg_base, layout
        with ThreadPoolExecutor(min(len(tasks), self.threads)) as pool:
            futures = {m: pool.submit(build) for m, build in tasks.items()}
            return {m: f.result() for m, f in futures.items()}, seg_base, layout

    def _chunks(self, anchors: int) -> int:
        """Threads for a search: one per 50,000 anchors, at most ``self.threads``."""
        return max(1, min(self.threads, anchors // 50_000))

    def _matches_table(self, rows: np.ndarray) -> pa.Table:
        if self.query.vertex_constraints and len(rows):
            rows = rows[self._vertex_mask(rows)]
        m = len(rows)
        if m == 0:
            return empty_matches()
        c = self.compiled
        k = c.k
        t = self._t[rows]
        seqs = self._seq[rows]
        src_names = self._ids.names(self._src[rows].ravel())
        dst_names = self._ids.names(self._dst[rows].ravel())
        names = self.query.edge_names
        edge_struct = pa.StructArray.from_arrays(
            [
                pa.array(np.tile(np.array(names, dtype=object), m), pa.string()),
                pa.array(t.ravel()),
                pa.array(src_names, pa.string()),
                pa.array(dst_names, pa.string()),
                pa.array((self._end[rows] - t).ravel()),
                pa.array(seqs.ravel()),
            ],
            fields=list(MATCHED_EDGE_TYPE),
        )
        edges = pa.ListArray.from_arrays(pa.array(np.arange(0, m * k + 1, k, dtype=np.int32)), edge_struct)
        bindings = self._bindings(rows)
        return pa.table(
            [
                pa.array([self.query.name] * m, pa.string()),
                pa.array(match_ids(self.query.name, seqs), pa.string()),
                pa.array(t.min(axis=1)),
                pa.array(t.max(axis=1)),
                bindings,
                edges,
            ],
            schema=MATCH_SCHEMA,
        )

    def _vertex_ids_of(self, rows: np.ndarray) -> np.ndarray:
        """int[m, nvars]: stream vertex bound to each query vertex."""
        c = self.compiled
        out = np.empty((len(rows), len(c.vertex_vars)), dtype=np.int64)
        for q in range(c.k):
            out[:, c.esrc[q]] = self._src[rows[:, q]]
            out[:, c.edst[q]] = self._dst[rows[:, q]]
        return out

    def _bindings(self, rows: np.ndarray) -> pa.MapArray:
        c = self.compiled
        order = np.argsort(np.array(c.vertex_vars, dtype=object), kind="stable")
        nv = len(order)
        m = len(rows)
        vids = self._vertex_ids_of(rows)[:, order]
        keys = pa.array(np.tile(np.array(c.vertex_vars, dtype=object)[order], m), pa.string())
        items = pa.array(self._ids.names(vids.ravel()), pa.string())
        offsets = pa.array(np.arange(0, m * nv + 1, nv, dtype=np.int32))
        return pa.MapArray.from_arrays(offsets, keys, items)

    def _vertex_mask(self, rows: np.ndarray) -> np.ndarray:
        """Vertex constraints, evaluated with features as of the match's last edge."""
        c = self.compiled
        vids = self._vertex_ids_of(rows)
        last_pos = self._pos[rows].max(axis=1)
        keep = np.ones(len(rows), dtype=bool)
        for vc in self.query.vertex_constraints:
            names = self._ids.names(vids[:, c.vertex_vars.index(vc.vertex)])
            member = np.asarray(self.features.member(vc.feature, names, last_pos), dtype=bool)
            keep &= ~member if vc.negated else member
        return keep
