"""The token game of timed ν-expressions, compiled: same matches as the interpreted game,
tokens in arrays, the hot loop in numba (:mod:`graphcep.engines.nu.kernel`).

It runs search mode over link streams, for the patterns :func:`graphcep.engines.nu.tables.
ineligibility` accepts (one node per variable, a bounded number of links per match) --
every pattern of ``examples/nu`` but the path and the alternation. The job picks it when
it can (:meth:`graphcep.jobs.nu.NuJob.new_engine`). A stream of single events (a
time-event sequence, rows whose ``dst`` is empty) is handed to the interpreted game whole.

The semantics -- search mode, when a delay's clock starts, deduplication, what a report
holds -- are :mod:`graphcep.engines.nu.engine`'s; only the representation differs: node
names become dense integer ids (the pattern's constants first), a token an int64 row, the
witness a fixed block of that row. Reports come out in the same order with the same
witness as the interpreted game's.

Example (the directed triangle among fresh hosts within 10 s)
------------------------------------------------------------
>>> import pyarrow as pa
>>> from graphcep.lang.nu import parse_nu
>>> engine = CompiledNuEngine(parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]", "tri"))
>>> links = pa.table({"t": [0, 1_000_000, 2_000_000, 30_000_000],
...                   "src": ["a", "b", "c", "c"], "dst": ["b", "c", "a", "a"]})
>>> [(m["first_t"], m["last_t"], m["bindings"]) for m in engine.push(links).to_pylist()]
[(0, 2000000, [('X', 'a'), ('Y', 'b'), ('Z', 'c')])]
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from graphcep.engines.base import MATCH_CHUNK_ROWS, EngineBase, joined_chunks
from graphcep.engines.nu import kernel
from graphcep.engines.nu.engine import NuEngine, Token, match_id
from graphcep.engines.nu.tables import LINK_FIELDS, NONE, kernel_tables
from graphcep.engines.vertex_ids import VertexIds
from graphcep.events import MATCH_SCHEMA, MATCHED_EDGE_TYPE, empty_matches
from graphcep.patterns.nu import NuPattern

#: Token rows allocated at first; the arrays grow fourfold when full of live tokens (a
#: small stream never pays for a large table's pages).
_FIRST_CAPACITY = 1 << 12
_GROWTH = 4


class CompiledNuEngine(EngineBase):
    """Matches of one timed ν-expression over a link stream, search mode, compiled.

    Parameters
    ----------
    pattern : NuPattern
        The expression (ValueError when the compiled game cannot run it).
    max_tokens : int
        State bound: holding more live tokens (and links kept for the closing join)
        raises :class:`StateBoundError`.
    join : bool
        Join the last link of a match where the pattern allows it
        (:mod:`graphcep.engines.nu.closing`) instead of storing the tokens that wait for
        it: the same matches, far fewer tokens.
    """

    #: 2: a time-event sequence's state is the interpreted game's, whose witnesses are
    #: one arena of shared links
    state_version = 2

    def __init__(self, pattern: NuPattern, *, max_tokens: int = 200_000,
                 join: bool = True) -> None:
        super().__init__()
        self.pattern = pattern
        self.mode = "search"
        self.max_tokens = max_tokens
        # the interpreted game gives the automaton, the start tokens, the state bound's
        # message, and runs time-event sequences
        self._interpreted = NuEngine(pattern, max_tokens=max_tokens)
        self.automaton = self._interpreted.automaton
        self.tables = kernel_tables(self.automaton, join=join)
        self._ids = VertexIds()  # node names by id, the pattern's constants first
        self._ids.encode(pa.array(self.tables.constants, pa.string()))
        self._starts = np.array([self._row(tk) for tk in self._interpreted._starts],
                                dtype=np.int64).reshape(-1, self.tables.width)
        self._events = False  # handed a time-event sequence: the interpreted game runs it
        self._now: int | None = None  # the last link's time
        self._reported: set[tuple] = set()  # reports of the time _reported_at
        self._reported_at: int | None = None
        self._allocate(_FIRST_CAPACITY)

    # -- protocol -------------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Read a batch of links in stream order; the matches they complete."""
        return joined_chunks(self.push_chunks(batch), empty_matches)

    def push_chunks(self, batch: pa.Table | pa.RecordBatch,
                    chunk_rows: int = MATCH_CHUNK_ROWS) -> Iterator[pa.Table]:
        """Read a batch of links in stream order (now, its order checked); the matches
        they complete come from the iterator returned, as the links are read: the game
        stops between two links once ``chunk_rows`` reports are made, hands them out and
        goes on when they are taken, so a chunk holds at most ``chunk_rows`` plus one
        link's reports (as many as the tokens that link closes: ``max_tokens`` bounds
        them). Take every chunk before the next push."""
        accepted = self._accepted(batch)
        if accepted is None:
            return iter(())
        batch, t, seq = accepted
        dst = batch.column("dst")
        if self._events or pc.any(pc.equal(dst, "")).as_py():
            return iter((self._push_events(batch),))
        us, vs = (ids.astype(np.int64) for ids in
                  self._ids.encode_many([batch.column("src"), dst], threads=False))
        self.edges_seen += batch.num_rows
        return self._read(t, us, vs, seq, chunk_rows)

    def advance(self, watermark_us: int) -> pa.Table:
        """No link before ``watermark_us`` will come: tokens it makes too late are gone."""
        self._watermark = max(self._watermark or watermark_us, int(watermark_us))
        if self._events:
            self._interpreted.advance(watermark_us)
        return empty_matches()

    def state_size(self) -> dict[str, int]:
        if self._events:
            return self._interpreted.state_size()
        live = self._live()
        rows = self._tok[:self._counters[kernel.N_TOKENS]][live]
        # column by column: this runs once per micro-batch
        seqs = self._witness_links(rows)[:, 3]
        if self.tables.join:  # the links the closing join may still pair
            history = self._hist[:self._counters[kernel.N_HISTORY]]
            oldest = kernel.oldest_joined(rows, self._deadline[:len(live)][live], len(rows),
                                          NONE, self.tables.arrays)
            seqs = np.concatenate([seqs, history[history[:, kernel.H_T] >= oldest,
                                                 kernel.H_SEQ]])
        return {"tokens": int(live.sum()), "partial_matches": int(live.sum()),
                "edges": _distinct(seqs)}

    def describe(self) -> str:
        bound = self._interpreted.describe().split("; ")[-1]
        join = self.tables.join
        joined = ("" if join is None else
                  f"; the last link is joined, not waited for: tokens at q{join.before} are "
                  "paired by each link with the links read since (kept while such a token "
                  f"lives), never stored at q{join.last}")
        return ("compiled token game (numba): tokens as integer rows, each link advances the "
                "tokens waiting for a link between its two nodes (indexed by both ends); "
                f"every link starts an attempt{joined}; {bound}")

    def state(self) -> dict:
        if self._events:
            return {"pattern": self.pattern, "max_tokens": self.max_tokens,
                    "events": self._interpreted.state()}
        self._sweep(self._horizon())
        n = self._counters[kernel.N_TOKENS]
        return {"pattern": self.pattern, "max_tokens": self.max_tokens,
                "join": self.tables.join is not None, "tokens": self._tok[:n].copy(), "deadlines": self._deadline[:n].copy(),
                "born": self._born[:n].copy(), "link_no": int(self._counters[kernel.LINK_NO]),
                "history": self._hist[:self._counters[kernel.N_HISTORY]].copy(),
                "names": self._ids.state(), "now": self._now,
                "reported": (self._reported_at, set(self._reported))}

    @classmethod
    def from_state(cls, state: dict) -> CompiledNuEngine:
        engine = cls(state["pattern"], max_tokens=state["max_tokens"],
                     join=state.get("join", True))
        if "events" in state:
            engine._events = True
            engine._interpreted = NuEngine.from_state(state["events"])
            return engine
        engine._ids = VertexIds.from_state(state["names"])
        engine._now = state["now"]
        engine._reported_at, reported = state["reported"]
        engine._reported = set(reported)
        tokens = state["tokens"]
        engine._allocate(max(len(engine._tok), 2 * len(tokens)))
        engine._tok[:len(tokens)] = tokens
        engine._deadline[:len(tokens)] = state["deadlines"]
        engine._born[:len(tokens)] = state["born"]
        engine._counters[kernel.N_TOKENS] = len(tokens)
        engine._counters[kernel.LINK_NO] = state["link_no"]
        history = state["history"]
        if len(history):
            engine._grow_history(_power_of_two(2 * len(history)))
            engine._hist[:len(history)] = history
            engine._counters[kernel.N_HISTORY] = len(history)
            engine._rechain_history(NONE)
        engine._rebuild()
        return engine

    # -- reading --------------------------------------------------------------------------

    def _read(self, t: np.ndarray, us: np.ndarray, vs: np.ndarray, seq: np.ndarray,
              chunk_rows: int) -> Iterator[pa.Table]:
        begin = 0
        self._counters[kernel.REPORTS_AT] = chunk_rows
        while True:
            kernel.read_links(t, us, vs, seq, begin, self.max_tokens, self.tables.arrays,
                              self._starts, self._tok, self._deadline, self._stamp, self._born,
                              self._htab, self._ent, self._chunks, self._head, self._tail,
                              self._pkeys, self._scratch, self._cand, self._pairs,
                              self._hist, self._hkeys, self._hbits,
                              self._reports, self._counters)
            found = self._drain()
            if found is not None:
                self.matches_found += found.num_rows
                yield found
            status = int(self._counters[kernel.STATUS])
            if status == kernel.DONE:
                self._now = int(t[-1])
                return
            begin = int(self._counters[kernel.RESUME])
            if status == kernel.REPORTS_READY:  # handed out: the next link is read now
                continue
            at = int(t[begin - 1]) if status == kernel.OVER_LIMIT else int(t[begin])
            self._now = max(at, self._now if self._now is not None else at)
            if status == kernel.WITNESS_FULL:
                raise AssertionError("a match read more links than the pattern's longest")
            # an undone link leaves its tokens' places in the hash table: each way out
            # below rebuilds the table
            if status == kernel.NEED_SCRATCH:
                self._scratch = np.zeros((2 * len(self._scratch), self.tables.identity),
                                         np.int64)
                self._cand = np.zeros(2 * len(self._cand), np.int64)
                self._pairs = np.zeros(2 * len(self._pairs), np.int64)
                self._rehash()
            elif status == kernel.NEED_REPORTS:
                self._reports = np.zeros((2 * len(self._reports), self.tables.width), np.int64)
                self._rehash()
            elif status == kernel.NEED_ENTRIES:
                # entries of expired tokens are unlinked but not reused: a sweep makes the
                # index anew; grow it when the live tokens' entries fill half of it
                self._sweep(max(at, self._watermark or NONE))
                needed = int(self._counters[kernel.NEEDED])
                used = int(max(self._counters[kernel.N_ENTRIES], self._counters[kernel.N_BUCKETS],
                               self._counters[kernel.N_CHUNKS]))
                while 2 * (used + needed) > len(self._ent):
                    self._grow_entries()
                self._grow_keys(int(self._counters[kernel.N_BUCKETS]) + needed)
            elif status == kernel.NEED_TOKENS:
                self._make_room(max(at, self._watermark or NONE))
            elif status == kernel.NEED_HISTORY:  # nothing of the link done yet
                n = int(self._counters[kernel.N_TOKENS])
                self._rechain_history(kernel.oldest_joined(
                    self._tok, self._deadline, n, max(at, self._watermark or NONE),
                    self.tables.arrays))
                kept = int(self._counters[kernel.N_HISTORY])
                self._check_bound(int(self._live().sum()) + kept,
                                  "tokens and links kept for the closing join")
                if 2 * kept > len(self._hist):
                    self._grow_history(_GROWTH * len(self._hist))
            else:  # over the state bound: are the live tokens?
                self._sweep(max(at, self._watermark or NONE))
                self._check_bound(int(self._counters[kernel.N_TOKENS]))
                self._check_bound(int(self._counters[kernel.N_TOKENS] +
                                      self._counters[kernel.N_HISTORY]),
                                  "tokens and links kept for the closing join")

    def _drain(self) -> pa.Table | None:
        """The reports the kernel left, as a table of match rows (the first of each first
        time, last time and bindings), built column by column (None: none new)."""
        count = int(self._counters[kernel.N_REPORTS])
        self._counters[kernel.N_REPORTS] = 0
        if not count:
            return None
        rows = self._first_reports(self._reports[:count])
        if not len(rows):
            return None
        reports = self._reports[rows]
        variables = self.tables.variables
        held0 = 4 + self.tables.clocks + len(variables)
        held = reports[:, held0:held0 + len(variables)]
        names = self._ids.names(np.arange(len(self._ids)))
        holding = held >= 0
        bindings = pa.MapArray.from_arrays(
            _offsets(holding.sum(axis=1)),
            pa.array(np.broadcast_to(np.array(variables, dtype=object), held.shape)[holding],
                     pa.string()),
            pa.array(names[held[holding]], pa.string()))
        ids = []
        for first, last, nodes in zip(reports[:, 1].tolist(), reports[:, 2].tolist(),
                                      held.tolist(), strict=True):
            pairs = tuple((v, names[n]) for v, n in zip(variables, nodes, strict=True)
                          if n >= 0)
            ids.append(match_id(self.pattern.name, first, last, pairs))
        return pa.Table.from_arrays(
            [pa.array([self.pattern.name] * len(rows), pa.string()), pa.array(ids, pa.string()),
             pa.array(reports[:, 1]), pa.array(reports[:, 2]), bindings,
             self._witnesses(reports)], schema=MATCH_SCHEMA)

    def _first_reports(self, reports: np.ndarray) -> np.ndarray:
        """The rows of ``reports`` (in time order) each first with its first time, last
        time and bindings, here and since the last link time of earlier batches."""
        nvars = len(self.tables.variables)
        held0 = 4 + self.tables.clocks + nvars
        keys = reports[:, [1, 2, *range(held0, held0 + nvars)]]
        _, rows = np.unique(keys, axis=0, return_index=True)
        rows.sort()
        seen_time = keys[rows, 1] == self._reported_at
        if seen_time.any():
            fresh = [tuple(keys[i].tolist()) not in self._reported for i in rows[seen_time]]
            rows = np.concatenate([rows[seen_time][np.array(fresh, dtype=bool)],
                                   rows[~seen_time]])
            rows.sort()
        if len(rows):
            newest = int(keys[rows[-1], 1])
            if newest != self._reported_at:
                self._reported_at, self._reported = newest, set()
            self._reported.update(tuple(keys[i].tolist()) for i in rows
                                  if keys[i, 1] == newest)
        return rows

    def _witness_links(self, rows: np.ndarray) -> np.ndarray:
        """The links of the rows' witnesses, one row of ``LINK_FIELDS`` each, row by row."""
        base, links = self.tables.identity, self.tables.links
        blocks = rows[:, base + 1:base + 1 + LINK_FIELDS * links].reshape(
            len(rows), links, LINK_FIELDS)
        return blocks[np.arange(links)[None, :] < rows[:, base][:, None]]

    def _witnesses(self, reports: np.ndarray) -> pa.Array:
        """The witness links of the reports, as the list column ``edges``."""
        counts = reports[:, self.tables.identity]
        read = self._witness_links(reports)
        labels = self.tables.labels
        pairs = read[:, 4] * len(labels) + read[:, 5]
        codes, which = np.unique(pairs, return_inverse=True)
        texts = np.array([f"{labels[c // len(labels)]}~>{labels[c % len(labels)]}"
                          for c in codes.tolist()], dtype=object)
        names = self._ids.names(np.arange(len(self._ids)))
        edges = pa.StructArray.from_arrays(
            [pa.array(texts[which], pa.string()), pa.array(read[:, 0]),
             pa.array(names[read[:, 1]], pa.string()), pa.array(names[read[:, 2]], pa.string()),
             pa.array(np.zeros(len(read), np.int64)), pa.array(read[:, 3])],
            fields=list(MATCHED_EDGE_TYPE))
        return pa.ListArray.from_arrays(_offsets(counts), edges)

    def _push_events(self, batch: pa.Table) -> pa.Table:
        if not self._events and self.edges_seen:
            raise ValueError("a stream of links went on with single events (rows whose "
                             "dst is empty): read time-event sequences on their own")
        self._events = True
        out = self._interpreted.push(batch)
        self.edges_seen += batch.num_rows
        self.matches_found += out.num_rows
        return out

    # -- arrays ---------------------------------------------------------------------------

    def _allocate(self, capacity: int) -> None:
        """Arrays for ``capacity`` tokens: uninitialized or zeroed, so that the pages a
        run never reaches are never touched (see :mod:`graphcep.engines.nu.kernel`)."""
        width = self.tables.width
        self._counters = np.zeros(16, np.int64)
        self._tok = np.empty((capacity, width), np.int64)
        self._deadline = np.empty(capacity, np.int64)
        self._stamp = np.zeros(capacity, np.int64)
        self._born = np.empty(capacity, np.int64)
        self._htab = np.zeros(_power_of_two(2 * capacity), np.int64)
        self._grow_history(capacity if self.tables.join else 0)
        self._pairs = np.zeros(1024, np.int64)
        self._ent = np.zeros((0, kernel.ENTRY_FIELDS), np.int64)
        self._pkeys = np.zeros((1024, 2), np.int64)
        self._grow_entries(2 * capacity)
        self._scratch = np.zeros((256, self.tables.identity), np.int64)
        self._cand = np.zeros(1024, np.int64)
        self._reports = np.zeros((4096, width), np.int64)

    def _grow_entries(self, size: int | None = None) -> None:
        """Room for ``size`` index entries (_GROWTH times as many as now by default), as many
        lists, and the hash table of the lists' keys; what is indexed stays."""
        kept = len(self._ent)
        size = size or _GROWTH * kept
        ent = np.empty((size, kernel.ENTRY_FIELDS), np.int64)
        ent[:kept] = self._ent
        # as many chunks as entries (a list of one token takes a chunk), allocated, not
        # touched: only the chunks used take memory
        chunks = np.empty((size if self.tables.join else 0, kernel.CHUNK_FIELDS), np.int64)
        used = int(self._counters[kernel.N_CHUNKS])
        chunks[:used] = self._chunks[:used] if used else chunks[:0]
        grown = {"_ent": ent, "_chunks": chunks}
        for name in ("_head", "_tail"):
            array = np.empty(size, np.int64)
            if kept:
                array[:kept] = getattr(self, name)
            grown[name] = array
        for name, array in grown.items():
            setattr(self, name, array)

    def _grow_keys(self, buckets: int) -> None:
        """A hash table of the lists' keys with room for ``buckets`` lists at most half
        full, keeping those listed (sized by the lists, not the entries: the tokens the
        closing join pairs share a few lists, whose keys then stay in cache)."""
        size = _power_of_two(max(4 * buckets, 1024))
        if size <= len(self._pkeys):
            return
        pkeys = np.zeros((size, 2), np.int64)
        kernel.rehash_buckets(self._pkeys, pkeys)
        self._pkeys = pkeys

    def _grow_history(self, size: int) -> None:
        """Room for ``size`` links in the closing join's history (those kept stay), its
        hash table, and a filter of 4 bits a link (a small filter stays in cache: the
        join tests it for every token it walks)."""
        kept = int(self._counters[kernel.N_HISTORY])
        hist = np.empty((size, kernel.HISTORY_FIELDS), np.int64)
        hist[:kept] = self._hist[:kept] if kept else hist[:0]
        self._hist = hist
        self._hkeys = np.zeros((_power_of_two(2 * max(size, 1)), 2), np.int64)
        self._hbits = np.zeros(_power_of_two(max(size // 16, 1)), np.int64)
        self._rechain_history(NONE)

    def _rechain_history(self, oldest: int) -> None:
        """Keep the history links from time ``oldest`` on, chained anew."""
        self._counters[kernel.N_HISTORY] = kernel.compact_history(
            self._hist, int(self._counters[kernel.N_HISTORY]), oldest, self.tables.arrays,
            self._hkeys, self._hbits)

    def _check_bound(self, held: int, what: str = "tokens") -> None:
        """Refuse to hold more than ``max_tokens`` tokens (and history links)."""
        if held > self.max_tokens:
            self._interpreted._refuse(held, what)

    def _live(self) -> np.ndarray:
        n = self._counters[kernel.N_TOKENS]
        return self._deadline[:n] >= self._horizon()

    def _horizon(self) -> int:
        marks = [m for m in (self._now, self._watermark) if m is not None]
        return max(marks) if marks else NONE

    def _make_room(self, horizon: int) -> None:
        """Room for more tokens: grow the arrays while most stored tokens live at
        ``horizon`` (rehashing only: the index refers to rows that do not move), else
        drop the dead ones."""
        n = int(self._counters[kernel.N_TOKENS])
        if 2 * int((self._deadline[:n] >= horizon).sum()) >= n:
            self._resize(_GROWTH * len(self._tok), n)
        else:
            self._sweep(horizon)

    def _sweep(self, horizon: int) -> None:
        """Drop the tokens dead at ``horizon``, compacting the rest in storage order (a
        row's place is its storage order), and rebuild the hash table and the index."""
        n = int(self._counters[kernel.N_TOKENS])
        n = kernel.compact(self._tok, self._deadline, self._born, n, horizon)
        self._counters[kernel.N_TOKENS] = n
        if self.tables.join:
            self._rechain_history(kernel.oldest_joined(self._tok, self._deadline, n, horizon,
                                                       self.tables.arrays))
        self._rebuild()

    def _resize(self, capacity: int, rehash: int) -> None:
        """Token arrays of ``capacity`` rows keeping the stored ones; the hash table
        anew, with the first ``rehash`` rows in it."""
        n = int(self._counters[kernel.N_TOKENS])
        tok, deadline, stamp, born = self._tok, self._deadline, self._stamp, self._born
        self._tok = np.empty((capacity, self.tables.width), np.int64)
        self._deadline = np.empty(capacity, np.int64)
        self._stamp = np.zeros(capacity, np.int64)
        self._born = np.empty(capacity, np.int64)
        self._tok[:n], self._deadline[:n], self._stamp[:n] = tok[:n], deadline[:n], stamp[:n]
        self._born[:n] = born[:n]
        self._htab = np.zeros(_power_of_two(2 * capacity), np.int64)
        if rehash:
            kernel.rehash(self._tok, rehash, self._since(), self.tables.arrays, self._htab)

    def _since(self) -> int:
        """No link before this time will be read (see :func:`kernel.rehash`)."""
        return NONE if self._now is None else self._now

    def _rehash(self) -> None:
        self._htab[:] = 0
        kernel.rehash(self._tok, int(self._counters[kernel.N_TOKENS]), self._since(),
                      self.tables.arrays, self._htab)

    def _rebuild(self) -> None:
        n = int(self._counters[kernel.N_TOKENS])
        while not kernel.rebuild(self._tok, n, self._since(), self._deadline, self.tables.arrays,
                                 self._htab,
                                 self._ent, self._chunks, self._head, self._tail,
                                 self._pkeys, self._counters):
            buckets = int(self._counters[kernel.N_BUCKETS])
            if 2 * (buckets + 1) > len(self._pkeys):
                self._grow_keys(buckets + 1)
            else:
                self._grow_entries()

    def _id(self, name: str) -> int:
        return int(self._ids.encode(pa.array([name], pa.string()))[0])

    def _row(self, token: Token) -> list[int]:
        """An interpreted token (nothing read yet, or one node per variable) as a row."""
        tables = self.tables

        def node(values: frozenset[str]) -> int:
            return self._id(next(iter(values))) if values else -1

        writing = sum(1 << i for i, (_, w) in enumerate(token.memory) if w)
        row = [token.loc, NONE if token.first_t is None else token.first_t,
               NONE if token.last_t is None else token.last_t, writing,
               *(NONE if c is None else c for c in token.clocks),
               *(node(values) for values, _ in token.memory),
               *(node(values) for values in token.held)]
        return row + [0] * (tables.width - len(row))


def _distinct(seqs: np.ndarray) -> int:
    """How many distinct edge numbers: marks over their range (a window's edges, numbered
    consecutively), not a sort or a hash of every token's links -- this runs each batch."""
    if not len(seqs):
        return 0
    low, high = int(seqs.min()), int(seqs.max())
    if high - low > 4 * len(seqs):  # sparse numbers (an unbounded query's old links)
        return len(np.unique(seqs))
    seen = np.zeros(high - low + 1, dtype=np.bool_)
    seen[seqs - low] = True
    return int(np.count_nonzero(seen))


def _offsets(counts: np.ndarray) -> pa.Array:
    """List offsets from the lengths of the lists."""
    return pa.array(np.concatenate([[0], np.cumsum(counts)]).astype(np.int32))


def _power_of_two(at_least: int) -> int:
    return 1 << max(0, at_least - 1).bit_length()
