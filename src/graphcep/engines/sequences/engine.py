"""Pattern subscriptions over a keyed link stream: the tree engine and the naive one.

The stream is split by the ``key`` column (default ``src``) into one sequence per key
value, in stream order; each edge contributes the symbol in its ``symbol`` column
(default ``dst``), as text. Position ``p`` of a key is its ``p``-th edge (from 0). An
edge whose key or symbol is null belongs to no sequence. A subscription's pattern
(:mod:`graphcep.patterns.sequences`) occurs at ``l`` of a key's sequence when its items
match the symbols at ``l, l+1, ...`` (Definitions 1-2 of du Mouza, Rigaux, Scholl, SSDBM
2006); every occurrence lies inside one key's sequence.

Each occurrence is reported once, by the push holding its last edge, as a row of
:data:`SUBS_MATCH_SCHEMA`: subscription id, key, start and end positions and times, the
bindings (the subscription's own variable names) and the edges.

**Subscribing while the stream runs.** :meth:`add` and :meth:`remove` come between pushes.
A subscription added after the engine has read ``n`` edges reports exactly the
occurrences whose first edge is the ``n``-th edge of the stream or later (for each key:
those starting at or after the key's position at the time of the add). A subscription
removed reports nothing from then on; what earlier pushes reported stays reported.

:class:`SequenceEngine` evaluates all subscriptions through a pattern tree
(:mod:`~graphcep.engines.sequences.tree`, :mod:`~graphcep.engines.sequences.active`);
:class:`NaiveSequenceEngine` runs one KMP_var per subscription -- the paper's baseline,
reporting the same rows. The default engine of subscription jobs is neither:
:class:`~graphcep.engines.sequences.compiled.CompiledSequenceEngine` (one compiled trie of
all patterns) reports the same rows much faster.

Example
-------
>>> import pyarrow as pa
>>> from graphcep.patterns.sequences import SequencePattern, parse_items
>>> engine = SequenceEngine({"ping_pong": SequencePattern(parse_items("@a.@b.@a"))})
>>> edges = pa.table({"t": [0, 1, 2, 3], "src": ["h", "h", "g", "h"],
...                   "dst": ["x", "y", "x", "x"]})
>>> [(m["subscription"], m["key"], m["start"], m["end"], m["bindings"])
...  for m in engine.push(edges).to_pylist()]
[('ping_pong', 'h', 0, 2, [{'var': 'a', 'value': 'x'}, {'var': 'b', 'value': 'y'}])]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, MutableMapping
from typing import Any

import numpy as np
import pyarrow as pa

from graphcep.engines.base import EngineBase
from graphcep.engines.sequences.active import KeyState, TreeEvaluator
from graphcep.engines.sequences.kmp_var import KmpVar, State
from graphcep.engines.sequences.sharded import ShardedDict
from graphcep.engines.sequences.tree import PatternTree
from graphcep.events import VERTEX_DICTIONARY, match_ids
from graphcep.patterns.sequences import SequencePattern
from graphcep.patterns.subgraph import QueryError

#: One edge of an occurrence.
SUBS_EDGE_TYPE = pa.struct([pa.field("seq", pa.int64()), pa.field("t", pa.int64()),
                            pa.field("src", pa.string()), pa.field("dst", pa.string())])
#: A variable's binding.
SUBS_BINDING_TYPE = pa.struct([pa.field("var", pa.string()), pa.field("value", pa.string())])
#: Notifications (see the module docstring).
SUBS_MATCH_SCHEMA = pa.schema([
    pa.field("subscription", pa.string()),
    pa.field("match_id", pa.string()),
    pa.field("key", pa.string()),
    pa.field("start", pa.int64()),
    pa.field("end", pa.int64()),
    pa.field("start_t", pa.int64()),
    pa.field("end_t", pa.int64()),
    pa.field("bindings", pa.list_(SUBS_BINDING_TYPE)),
    pa.field("edges", pa.list_(SUBS_EDGE_TYPE)),
])
_NONE = SUBS_MATCH_SCHEMA.empty_table()


class KeyedSequenceEngine(EngineBase):
    """What both engines share: keys, recent edges, subscriptions, notifications."""

    def __init__(self, subscriptions: Mapping[str, SequencePattern] | None = None, *,
                 key: str = "src", symbol: str = "dst") -> None:
        super().__init__()
        self.key, self.symbol = key, symbol
        # ids -> patterns, and the edges read when each was added (sharded: an add
        # never rebuilds a large dict)
        self.patterns: MutableMapping[str, SequencePattern] = ShardedDict()
        self.added_at: MutableMapping[str, int] = ShardedDict()
        self.keys: dict[str, KeyState] = {}
        self.keep = 1  # recent edges kept per key: the longest pattern ever subscribed
        for sid, pattern in (subscriptions or {}).items():
            self.add(sid, pattern)

    # -- subscriptions --------------------------------------------------------------------

    def add(self, sid: str, pattern: SequencePattern) -> None:
        """Subscribe ``sid`` from the next edge on (module docstring)."""
        if sid in self.patterns:
            raise ValueError(f"subscription {sid!r} exists already")
        self.patterns[sid] = pattern
        self.added_at[sid] = self.edges_seen
        self.keep = max(self.keep, len(pattern))
        self._subscribe(sid, pattern)

    def remove(self, sid: str) -> None:
        """Unsubscribe ``sid``: it reports nothing from now on."""
        if sid not in self.patterns:
            raise KeyError(f"no subscription {sid!r}")
        del self.patterns[sid], self.added_at[sid]
        self._unsubscribe(sid)

    # -- protocol -------------------------------------------------------------------------

    def push(self, batch: pa.Table | pa.RecordBatch) -> pa.Table:
        """Read a batch of edges in stream order; the occurrences they complete."""
        accepted = self._accepted(batch)
        if accepted is None:
            return _NONE
        batch, t, seq = accepted
        keys = _text(batch.column(self.key), "--key", self.key)
        symbols = _text(batch.column(self.symbol), "--symbol", self.symbol)
        rows: list[dict[str, Any]] = []
        for k, s, ti, si, u, v in zip(keys, symbols, t.tolist(), seq.tolist(),
                                      batch.column("src").to_pylist(),
                                      batch.column("dst").to_pylist(), strict=True):
            arrival = self.edges_seen
            self.edges_seen += 1
            if k is None or s is None:
                continue
            state = self.keys.get(k)
            if state is None:
                state = self.keys[k] = KeyState(self.keep)
            entry = (s, si, ti, u, v, arrival)
            for ids, start, binds in self._read(state, s, entry):
                self._notify(k, state, ids, start, binds, rows)
        self.matches_found += len(rows)
        return pa.Table.from_pylist(rows, schema=SUBS_MATCH_SCHEMA) if rows else _NONE

    def advance(self, watermark_us: int) -> pa.Table:
        """Nothing expires with time: an occurrence is contiguous in its key's sequence,
        however long it takes."""
        self._watermark = max(self._watermark or watermark_us, int(watermark_us))
        return _NONE

    def state_size(self) -> dict[str, int]:
        return {"keys": len(self.keys), "subscriptions": len(self.patterns),
                "edges": sum(len(k.recent) for k in self.keys.values()),
                "partial_matches": self._partial_matches()}

    # -- what a subclass gives ------------------------------------------------------------

    def _subscribe(self, sid: str, pattern: SequencePattern) -> None:
        raise NotImplementedError

    def _unsubscribe(self, sid: str) -> None:
        raise NotImplementedError

    def _read(self, key: KeyState, symbol: str,
              entry: tuple[Any, ...]) -> Iterable[tuple[Iterable[str], int, tuple]]:
        """Read one symbol: ``(ids, start, binds)`` per node/pattern completed."""
        raise NotImplementedError

    def _partial_matches(self) -> int:
        raise NotImplementedError

    # -- notifications --------------------------------------------------------------------

    def _notify(self, key: str, state: KeyState, ids: Iterable[str], start: int,
                binds: tuple, rows: list[dict[str, Any]]) -> None:
        first = state.pos - len(state.recent)
        edges = list(state.recent)[start - first:]
        for sid in ids:
            if edges[0][5] < self.added_at[sid]:
                continue  # it started before the subscription
            names = self.patterns[sid].variables()
            mid = match_ids(sid, np.array([e[1] for e in edges]))[0]
            rows.append({
                "subscription": sid, "match_id": mid, "key": key,
                "start": start, "end": state.pos - 1,
                "start_t": edges[0][2], "end_t": edges[-1][2],
                "bindings": [{"var": n, "value": v} for n, v in zip(names, binds, strict=False)],
                "edges": [{"seq": e[1], "t": e[2], "src": e[3], "dst": e[4]} for e in edges],
            })

    def _common_state(self) -> dict[str, Any]:
        return {"key": self.key, "symbol": self.symbol, "patterns": self.patterns,
                "added_at": self.added_at, "keys": self.keys, "keep": self.keep}

    def _restore_common(self, state: dict[str, Any]) -> None:
        self.patterns, self.added_at = state["patterns"], state["added_at"]
        self.keys, self.keep = state["keys"], state["keep"]


def as_text(column: pa.ChunkedArray | pa.Array, role: str, field: str
            ) -> pa.ChunkedArray | pa.Array:
    """A column as text (the symbols patterns name), nulls kept; a :class:`QueryError`
    naming the option (``role``) and ``field`` when its values have no text (a list, a
    struct)."""
    if pa.types.is_string(column.type) or column.type == VERTEX_DICTIONARY:
        return column
    try:
        return column.cast(pa.string())
    except (pa.ArrowNotImplementedError, pa.ArrowInvalid):
        raise QueryError(f"{role} {field!r}: a field of type {column.type} has no text to "
                         "compare; name a field of text, numbers or times") from None


def _text(column: pa.ChunkedArray, role: str, field: str) -> list[str | None]:
    """A column's values as text, nulls kept as None."""
    return as_text(column, role, field).to_pylist()


class SequenceEngine(KeyedSequenceEngine):
    """Subscriptions evaluated through a pattern tree: top automata search, sons check
    their parent's matches (du Mouza, Rigaux, Scholl, SSDBM 2006).

    ``skip`` (default): a top node whose pattern has two constants in a row searches with a
    Horspool-style skip (:mod:`~graphcep.engines.sequences.skip`), fewer comparisons on
    most streams; ``skip=False``: KMP_var at every top node, linear in the worst case.
    """

    def __init__(self, subscriptions: Mapping[str, SequencePattern] | None = None, *,
                 key: str = "src", symbol: str = "dst", skip: bool = True) -> None:
        self.tree = PatternTree()
        self.skip = skip
        self.evaluator = TreeEvaluator(self.tree, skip=skip)
        super().__init__(subscriptions, key=key, symbol=symbol)

    def _subscribe(self, sid: str, pattern: SequencePattern) -> None:
        self._rebuild(self.tree.insert(pattern.marked(), sid))

    def _unsubscribe(self, sid: str) -> None:
        before = set(self.tree.nodes)
        rebuild = self.tree.remove(sid)
        for nid in before - set(self.tree.nodes):
            for key in self.keys.values():
                self.evaluator.forget(key, nid)
        self._rebuild(rebuild)

    def _rebuild(self, nodes: list) -> None:
        for node in nodes:
            for key in self.keys.values():
                self.evaluator.rebuild(key, node)

    def _read(self, key: KeyState, symbol: str, entry: tuple[Any, ...]):
        return [(node.ids, start, binds) for node, start, binds
                in self.evaluator.read(key, symbol, self.keep, entry) if node.ids]

    def _partial_matches(self) -> int:
        return sum(len(k.searching) + sum(map(len, k.alignments.values()))
                   for k in self.keys.values())

    def describe(self) -> str:
        stats = self.tree.stats()
        return (f"each edge is a symbol of its {self.key!r} sequence: the pattern tree's "
                f"top automata ({len(self.tree.root.children)}) search it with KMP_var"
                f"{' or a Horspool-style skip' if self.skip else ''}, a "
                f"son runs only where its parent matched ({stats['nodes']} nodes, height "
                f"{stats['height']})")

    def state(self) -> dict[str, Any]:
        return {**self._common_state(), "tree": self.tree, "skip": self.skip}

    @classmethod
    def from_state(cls, state: dict[str, Any], **context: Any) -> SequenceEngine:
        skip = state.get("skip", False)  # states saved before skip searches hold KMP_var's
        engine = cls(key=state["key"], symbol=state["symbol"], skip=skip)
        engine.tree = state["tree"]
        engine.evaluator = TreeEvaluator(engine.tree, skip=skip)
        engine._restore_common(state)
        return engine


class NaiveSequenceEngine(KeyedSequenceEngine):
    """Each subscription searched by its own KMP_var automaton (the paper's baseline)."""

    def __init__(self, subscriptions: Mapping[str, SequencePattern] | None = None, *,
                 key: str = "src", symbol: str = "dst") -> None:
        self.automata: dict[str, KmpVar] = {}
        super().__init__(subscriptions, key=key, symbol=symbol)

    def _subscribe(self, sid: str, pattern: SequencePattern) -> None:
        self.automata[sid] = KmpVar(pattern.marked())

    def _unsubscribe(self, sid: str) -> None:
        del self.automata[sid]
        for key in self.keys.values():
            key.searching.pop(sid, None)

    def _read(self, key: KeyState, symbol: str, entry: tuple[Any, ...]):
        key.remember(entry, self.keep)
        found = []
        for sid, kmp in self.automata.items():
            state: State = key.searching.get(sid) or kmp.START
            state, done = kmp.step(state, symbol)
            if state[0]:
                key.searching[sid] = state
            else:
                key.searching.pop(sid, None)
            found += [((sid,), key.pos - kmp.m, binds) for binds in done]
        return found

    def _partial_matches(self) -> int:
        return sum(len(k.searching) for k in self.keys.values())

    def describe(self) -> str:
        return (f"each edge is a symbol of its {self.key!r} sequence, read by one KMP_var "
                f"automaton per subscription ({len(self.automata)})")

    def state(self) -> dict[str, Any]:
        return {**self._common_state(), "automata": self.automata}

    @classmethod
    def from_state(cls, state: dict[str, Any], **context: Any) -> NaiveSequenceEngine:
        engine = cls(key=state["key"], symbol=state["symbol"])
        engine.automata = state["automata"]
        engine._restore_common(state)
        return engine
