"""Pattern subscriptions evaluated by a compiled trie: the default subscriptions engine.

Same notifications as :class:`~graphcep.engines.sequences.engine.SequenceEngine` (the
paper's pattern tree) and :class:`~graphcep.engines.sequences.engine.NaiveSequenceEngine`
(one KMP_var per subscription), the same semantics of adding and removing while the
stream runs (module docstring of :mod:`graphcep.engines.sequences.engine`); another way
to find them.

**Why not the pattern tree.** The tree (du Mouza, Rigaux, Scholl, SSDBM 2006) minimizes
symbol *comparisons*: a son runs only where its parent matched. But its top level still
holds one KMP_var automaton per cluster of patterns -- tens to hundreds with thousands of
random patterns -- each stepped for every symbol, in Python; it reads a few hundred
symbols a second with 10,000 subscriptions. Aho-Corasick reads millions with as many
*literal* patterns, because one automaton holds them all and a symbol costs a table
look-up. Variables break Aho-Corasick's failure links (after a mismatch, what the
matched window means depends on the values bound), so graphcep keeps the one-automaton
idea and drops the failure links:

- all subscriptions are paths of one trie over *tokens* (:mod:`.trie`): a constant, a
  variable's first occurrence (any symbol), or a back-reference to the offset where the
  same variable occurred first (the same symbol). Equal patterns share a node, patterns
  sharing a prefix share its path -- the aggregation the paper's tree gets from
  ``Contain``, here for prefixes, at no cost on insertion;
- each start position of a key's sequence walks the trie depth first (the constant child
  of the next symbol by a hash look-up, the variable child, the back-references whose
  symbol agrees): the work per symbol is the number of trie nodes consistent with the
  window, not the number of patterns. Compiled with numba, one call per pushed batch,
  the batch's edges grouped by key;
- a key keeps only its last ``longest pattern - 1`` edges: the next batch's walks start
  there too, and report only windows ending on a new edge, so nothing is reported twice
  and no partial match is held across batches -- which is also why adding and removing a
  subscription is a change of the trie alone, ``O(pattern length)``, with no rebuild:
  the next batch simply walks the new trie. A subscription added at arrival ``n``
  reports a window only if its first edge arrived at ``n`` or later;
- notifications are built column by column (Arrow), not row by row.

**Why not Aho-Corasick inside.** On variable-free subscriptions alone a C
Aho-Corasick (pyahocorasick) searches faster than this trie (``bench.subs_throughput``
records both on the same subset), since its failure links read each symbol once where
the trie walks each start position. It was not taken, as a matcher or as a prefilter on
the patterns' constant parts: it matches no variables, so a prefilter would still need a
confirmation per candidate, and the constant runs of patterns with variables are short
(a few symbols: candidates at most positions); and its automaton must be rebuilt
(``make_automaton``) after every added or removed word: 30-50 ms with 10,000 words on
the machine of ``bench/RESULTS.md``, where a change here takes microseconds.

Keys and symbols are interned once (``dict`` from text to number); the interning tables
grow with the distinct keys and symbols seen. The edges a key keeps (and those of the
batch being read) sit in an edge store from which notifications take their edges; it is
compacted when it holds more than twice what the keys keep.

Choose another engine with ``--subs-engine tree`` or ``naive``
(:data:`graphcep.jobs.sequences.ENGINES`).

Example
-------
>>> import pyarrow as pa
>>> from graphcep.patterns.sequences import SequencePattern, parse_items
>>> engine = CompiledSequenceEngine({"ping_pong": SequencePattern(parse_items("@a.@b.@a"))})
>>> edges = pa.table({"t": [0, 1, 2, 3], "src": ["h", "h", "g", "h"],
...                   "dst": ["x", "y", "x", "x"]})
>>> [(m["subscription"], m["key"], m["start"], m["end"], m["bindings"])
...  for m in engine.push(edges).to_pylist()]
[('ping_pong', 'h', 0, 2, [{'var': 'a', 'value': 'x'}, {'var': 'b', 'value': 'y'}])]
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.engines.sequences import trie as kernel
from graphcep.engines.sequences.engine import (
    SUBS_BINDING_TYPE,
    SUBS_EDGE_TYPE,
    SUBS_MATCH_SCHEMA,
    KeyedSequenceEngine,
    as_text,
)
from graphcep.engines.sequences.sharded import ShardedDict
from graphcep.engines.sequences.trie_arrays import Trie
from graphcep.engines.vertex_ids import distinct_codes
from graphcep.events import decoded_vertices, ragged_match_ids
from graphcep.hashing import salt64
from graphcep.patterns.sequences import SequencePattern

_NONE = SUBS_MATCH_SCHEMA.empty_table()
_STORED = ("seq", "t", "src", "dst", "key", "symbol")


class CompiledSequenceEngine(KeyedSequenceEngine):
    """Subscriptions in one compiled trie, walked from every start position of each key's
    sequence (see the module docstring)."""

    def __init__(self, subscriptions: Mapping[str, SequencePattern] | None = None, *,
                 key: str = "src", symbol: str = "dst") -> None:
        self.trie = Trie()
        self.slots = _Slots()
        self.symbols: dict[str, int] = {}
        self.store = _EdgeStore()
        self.history = np.zeros((16, 0), dtype=np.int64)  # per key: store rows kept
        self.held = np.zeros(16, dtype=np.int64)  # per key: how many
        self.position = np.zeros(16, dtype=np.int64)  # per key: edges read
        self.serial = 0  # subscriptions added so far: orders a push's notifications
        self._out = np.empty((1024, kernel.OUT_FIELDS), dtype=np.int64)  # occurrences found
        self._out_rows = np.empty(8192, dtype=np.int64)  # and their store rows
        super().__init__(subscriptions, key=key, symbol=symbol)
        self.keys: dict[str, int] = {}  # type: ignore[assignment]  # key -> number

    # -- subscriptions --------------------------------------------------------------------

    def _subscribe(self, sid: str, pattern: SequencePattern) -> None:
        toks = kernel.tokens(pattern.marked(), self.symbols)
        if len(self.symbols) > kernel.SYMBOL_LIMIT:
            raise ValueError("more distinct symbols than the compiled engine holds (2**32)")
        slot = self.trie.add(toks, self.edges_seen)
        self.slots.set(slot, sid, pattern, self.serial)
        self.serial += 1
        if self.history.shape[1] < self.keep - 1:
            wider = np.zeros((len(self.history), self.keep - 1), dtype=np.int64)
            wider[:, :self.history.shape[1]] = self.history
            self.history = wider

    def _unsubscribe(self, sid: str) -> None:
        slot = self.slots.slot_of.pop(sid)
        self.trie.remove(slot)
        self.slots.clear(slot)

    # -- protocol -------------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Read a batch of edges in stream order; the occurrences they complete."""
        accepted = self._accepted(batch)
        if accepted is None:
            return _NONE
        batch, t, seq = accepted
        keys = as_text(batch.column(self.key), "--key", self.key).combine_chunks()
        symbols = as_text(batch.column(self.symbol), "--symbol", self.symbol).combine_chunks()
        local, key_ids = _codes(keys, self.keys)
        sym_local, sym_numbers = _codes(symbols, self.symbols)
        if len(self.symbols) > kernel.SYMBOL_LIMIT:
            raise ValueError("more distinct symbols than the compiled engine holds (2**32)")
        sym = np.append(sym_numbers, -1)[sym_local]  # a null symbol (-1) stays -1
        local[sym < 0] = -1
        self._room_for_keys(len(self.keys))
        arrival = np.arange(self.edges_seen, self.edges_seen + len(t), dtype=np.int64)
        rows = self.store.append(sym, arrival, pa.table(
            [seq, t, batch.column("src"), batch.column("dst"), keys, symbols], _STORED))
        self.edges_seen += len(t)
        while True:
            found, used = kernel.match(
                self.trie.nodes, self.trie.table, self.trie.root, self.trie.subs, self.keep,
                local, rows, key_ids, self.store.symbol, self.store.arrival, self.history,
                self.held, self.position, self._out, self._out_rows)
            if found <= len(self._out) and used <= len(self._out_rows):
                break
            self._out = np.empty((2 * found, kernel.OUT_FIELDS), dtype=np.int64)
            self._out_rows = np.empty(2 * used, dtype=np.int64)
        out = self._notifications(self._out[:found], self._out_rows[:used])
        self.store.compact(self.history, self.held, len(self.keys))
        self.matches_found += out.num_rows
        return out

    def state_size(self) -> dict[str, int]:
        return {"keys": len(self.keys), "subscriptions": len(self.patterns),
                "edges": int(self.held[:len(self.keys)].sum()), "partial_matches": 0,
                "trie_nodes": self.trie.live_nodes()}

    def describe(self) -> str:
        return (f"each edge is a symbol of its {self.key!r} sequence: every start position "
                f"of the key's last edges walks one compiled trie of the "
                f"{len(self.patterns)} subscriptions ({self.trie.live_nodes()} nodes: "
                f"constants, variables, back-references)")

    def state(self) -> dict[str, Any]:
        return {**self._common_state(), "trie": self.trie, "slots": self.slots,
                "symbols": self.symbols, "store": self.store, "history": self.history,
                "held": self.held, "position": self.position, "serial": self.serial}

    @classmethod
    def from_state(cls, state: dict[str, Any], **context: Any) -> CompiledSequenceEngine:
        engine = cls(key=state["key"], symbol=state["symbol"])
        engine._restore_common(state)
        for name in ("trie", "slots", "symbols", "store", "history", "held", "position",
                     "serial"):
            setattr(engine, name, state[name])
        return engine

    # -- helpers --------------------------------------------------------------------------

    def _room_for_keys(self, count: int) -> None:
        if count <= len(self.held):
            return
        size = max(count, 2 * len(self.held))
        self.history = _grown(self.history, size)
        self.held, self.position = _grown(self.held, size), _grown(self.position, size)

    def _notifications(self, found: np.ndarray, rows: np.ndarray) -> pa.Table:
        """The occurrences found (:func:`~graphcep.engines.sequences.trie.match`) as rows
        of :data:`SUBS_MATCH_SCHEMA`, ordered by their last edge, then by when their
        subscription was added."""
        if len(found) == 0:
            return _NONE
        self.slots.settle()
        sub, start = found[:, kernel.O_SUB], found[:, kernel.O_START]
        length, end = found[:, kernel.O_LEN], found[:, kernel.O_END]
        order = np.lexsort((self.slots.serial[sub], end))
        rows = rows[_regroup(_offsets(length), order, length)]
        sub, start, length = sub[order], start[order], length[order]
        offsets = _offsets(length)
        edges = self.store.take(rows)
        first, last = offsets[:-1], offsets[1:] - 1
        seqs = edges.column("seq").to_numpy()
        grid = np.minimum(first[:, None] + np.arange(length.max()), len(rows) - 1)
        ids = ragged_match_ids(self.slots.salt[sub], seqs[grid], length)
        t = edges.column("t")
        listed = pa.StructArray.from_arrays(
            [edges.column(c).combine_chunks() for c in ("seq", "t", "src", "dst")],
            fields=list(SUBS_EDGE_TYPE))
        columns = [
            self.slots.id_array().take(pa.array(sub)), pa.array(ids, pa.string()),
            edges.column("key").take(pa.array(first)), pa.array(start),
            pa.array(start + length - 1), t.take(pa.array(first)), t.take(pa.array(last)),
            self._bindings(sub, first, edges.column("symbol")),
            pa.ListArray.from_arrays(pa.array(offsets.astype(np.int32)), listed),
        ]
        return pa.Table.from_arrays([pa.chunked_array([c]) if not isinstance(
            c, pa.ChunkedArray) else c for c in columns], schema=SUBS_MATCH_SCHEMA)

    def _bindings(self, sub: np.ndarray, first: np.ndarray,
                  symbols: pa.ChunkedArray) -> pa.Array:
        """Each occurrence's bindings: its variables' names and the symbol at each one's
        first offset."""
        nvars = self.slots.nvars[sub]
        owner = np.repeat(np.arange(len(sub)), nvars)
        k = np.arange(len(owner)) - np.repeat(_offsets(nvars)[:-1], nvars)
        names = self.slots.names[sub[owner], k]
        values = symbols.take(pa.array(first[owner] + self.slots.offsets[sub[owner], k]))
        pairs = pa.StructArray.from_arrays(
            [self.slots.name_array().take(pa.array(names)), values.combine_chunks()],
            fields=list(SUBS_BINDING_TYPE))
        return pa.ListArray.from_arrays(pa.array(_offsets(nvars).astype(np.int32)), pairs)


class _Slots:
    """Per subscription slot: its id, its match-id salt, when it was added, and where its
    variables first occur (for the bindings). A slot beyond the arrays waits in
    ``pending`` until the next push grows them (:meth:`settle`): a subscription change
    never copies them."""

    def __init__(self) -> None:
        self.ids: list[str | None] = []
        self.slot_of: ShardedDict[str, int] = ShardedDict()
        self.salt = np.zeros(16, dtype=np.uint64)
        self.serial = np.zeros(16, dtype=np.int64)
        self.nvars = np.zeros(16, dtype=np.int64)
        self.offsets = np.zeros((16, 1), dtype=np.int64)  # variable -> first offset
        self.names = np.zeros((16, 1), dtype=np.int64)  # variable -> name number
        self.name_of: dict[str, int] = {}
        self.pending: dict[int, tuple[int, int, list[tuple[int, int]]]] = {}
        self._ids: pa.Array | None = None
        self._names: pa.Array | None = None

    def set(self, slot: int, sid: str, pattern: SequencePattern, serial: int) -> None:
        self.ids += [None] * (slot + 1 - len(self.ids))
        self.ids[slot], self.slot_of[sid] = sid, slot
        firsts: dict[str, int] = {}
        for offset, item in enumerate(pattern.items):
            if not isinstance(item, str):
                firsts.setdefault(item.name, offset)
        variables = [(offset, self.name_of.setdefault(name, len(self.name_of)))
                     for name, offset in firsts.items()]
        entry = (salt64(sid), serial, variables)
        if slot < len(self.salt) and len(variables) <= self.offsets.shape[1]:
            self.pending.pop(slot, None)  # an earlier subscription in the slot waited
            self._write(slot, entry)
        else:
            self.pending[slot] = entry
        self._ids = None
        if len(self.name_of) != (0 if self._names is None else len(self._names)):
            self._names = None

    def _write(self, slot: int, entry: tuple[int, int, list[tuple[int, int]]]) -> None:
        self.salt[slot], self.serial[slot], variables = entry
        self.nvars[slot] = len(variables)
        for i, (offset, name) in enumerate(variables):
            self.offsets[slot, i], self.names[slot, i] = offset, name

    def settle(self) -> None:
        """Grow the arrays for the slots waiting, and write them."""
        if not self.pending:
            return
        size = len(self.salt)
        while size <= max(self.pending):
            size *= 2
        width = max(self.offsets.shape[1], *(len(e[2]) for e in self.pending.values()))
        self.salt, self.serial = _grown(self.salt, size), _grown(self.serial, size)
        self.nvars = _grown(self.nvars, size)
        pad = ((0, 0), (0, width - self.offsets.shape[1]))
        self.offsets = _grown(np.pad(self.offsets, pad), size)
        self.names = _grown(np.pad(self.names, pad), size)
        for slot, entry in self.pending.items():
            self._write(slot, entry)
        self.pending.clear()

    def clear(self, slot: int) -> None:
        self.ids[slot] = None
        self._ids = None

    def id_array(self) -> pa.Array:
        if self._ids is None:
            self._ids = pa.array(self.ids, pa.string())
        return self._ids

    def name_array(self) -> pa.Array:
        if self._names is None:
            self._names = pa.array(list(self.name_of), pa.string())
        return self._names


class _EdgeStore:
    """The edges the keys keep and the batch being read: per row its interned symbol and
    arrival number (NumPy, for the kernel) and ``seq, t, src, dst, key, symbol`` (Arrow,
    for notifications), in pieces appended per push."""

    def __init__(self) -> None:
        self.symbol = np.zeros(1024, dtype=np.int64)
        self.arrival = np.zeros(1024, dtype=np.int64)
        self.size = 0
        self.pieces: list[pa.Table] = []
        self.starts: list[int] = []

    def append(self, symbol: np.ndarray, arrival: np.ndarray, table: pa.Table) -> np.ndarray:
        """Store a batch's rows; their row numbers."""
        n = len(symbol)
        if self.size + n > len(self.symbol):
            size = max(self.size + n, 2 * len(self.symbol))
            self.symbol, self.arrival = _grown(self.symbol, size), _grown(self.arrival, size)
        self.symbol[self.size:self.size + n] = symbol
        self.arrival[self.size:self.size + n] = arrival
        self.pieces.append(table)
        self.starts.append(self.size)
        self.size += n
        return np.arange(self.size - n, self.size, dtype=np.int64)

    def take(self, rows: np.ndarray) -> pa.Table:
        """The rows ``rows`` (any order, repeats allowed), vertex names as strings (a
        piece may hold them dictionary-encoded, another as strings)."""
        piece = np.searchsorted(np.array(self.starts), rows, side="right") - 1
        if len(self.pieces) == 1 or (len(rows) and piece.min() == piece.max()):
            p = int(piece[0]) if len(rows) else 0
            return decoded_vertices(self.pieces[p].take(pa.array(rows - self.starts[p])))
        order = np.argsort(piece, kind="stable")
        parts = []
        for p in np.unique(piece):
            chosen = rows[order][piece[order] == p]
            parts.append(decoded_vertices(
                self.pieces[p].take(pa.array(chosen - self.starts[p]))))
        back = np.empty(len(rows), dtype=np.int64)
        back[order] = np.arange(len(rows))
        return pa.concat_tables(parts).take(pa.array(back))

    def compact(self, history: np.ndarray, held: np.ndarray, keys: int) -> None:
        """Keep only the rows ``history`` refers to, once the store holds more than twice
        as many (and at least a batch's worth)."""
        kept = int(held[:keys].sum())
        if self.size <= max(2 * kept, 65_536) and len(self.pieces) <= 64:
            return
        used = np.arange(history.shape[1])[None, :] < held[:keys, None]
        live = history[:keys][used]
        table = self.take(live) if len(live) else self.pieces[0].slice(0, 0)
        self.symbol[:len(live)] = self.symbol[live]
        self.arrival[:len(live)] = self.arrival[live]
        history[:keys][used] = np.arange(len(live))
        self.pieces, self.starts, self.size = [table.combine_chunks()], [0], len(live)


def _codes(column: pa.Array, intern: dict[str, int]) -> tuple[np.ndarray, np.ndarray]:
    """Per row, its value's number among the column's distinct values (-1: null), and
    per distinct value its number in ``intern`` (new values numbered on)."""
    local, names = distinct_codes(column)
    values = names.to_pylist()
    numbers = list(map(intern.get, values))
    if None in numbers:
        numbers = [intern.setdefault(v, len(intern)) for v in values]
    return local, np.array(numbers, dtype=np.int64)


def _offsets(lengths: np.ndarray) -> np.ndarray:
    out = np.zeros(len(lengths) + 1, dtype=np.int64)
    np.cumsum(lengths, out=out[1:])
    return out


def _regroup(offsets: np.ndarray, order: np.ndarray, length: np.ndarray) -> np.ndarray:
    """Indices gathering ragged runs (``offsets``/``length``) in the order ``order``."""
    lens = length[order]
    return np.repeat(offsets[:-1][order] - _offsets(lens)[:-1], lens) + np.arange(lens.sum())


def _grown(a: np.ndarray, size: int) -> np.ndarray:
    out = np.zeros((size, *a.shape[1:]), dtype=a.dtype)
    out[:len(a)] = a
    return out
