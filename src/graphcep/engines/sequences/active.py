"""Multi-pattern evaluation over a pattern tree: active and inactive automata
(du Mouza, Rigaux, Scholl, SSDBM 2006, Section 2.4, rules 1-3), made exact.

Per sequence (one per key), each tree node's KMP_var automaton is active or not:

1. the automata of the top nodes (the root's children) are always active: each searches
   every position of the sequence with KMP_var's shifts -- or, where the node's pattern
   has two constants in a row, with a Horspool-style skip search
   (:mod:`~graphcep.engines.sequences.skip`), which tries only the windows its
   bad-symbol shifts cannot rule out and never compares the symbols it jumps over
   (``TreeEvaluator(tree, skip=False)``: KMP_var everywhere, linear in the worst case);
2. when a node's automaton completes a match at position ``l``, the automata of its sons
   become active *for alignment* ``l``: the son checks what its parent's match already
   read (only the constraints the parent does not imply: a variable of the parent the son
   fixes to a constant, or two parent variables the son makes equal) and then reads on;
3. when a son's alignment fails, that alignment dies -- a son never shifts, since the
   alignments after ``l`` are its parent's to find. A son with no live alignment is
   inactive.

Every occurrence of a node at ``l`` is an occurrence of its parent at ``l`` that ends no
later, so each node finds exactly its occurrences (by induction from the top). Where
this differs from the paper's account: a top automaton does not sleep while its sons
run (it would miss positions), and a son may run several alignments at once (its parent
may match again before the son's first alignment is decided).

**Rebuilding** (:meth:`TreeEvaluator.rebuild`): when the tree changes a node's role
(a top node demoted under a new lub, a son promoted to the top) or pattern, its
alignments are recomputed from the key's recent symbols (the last ``m - 1``, kept per
key). A son alignment re-seeded by a parent it already has is skipped, and one re-seeded
after it failed fails again on the same symbols: nothing is lost or reported twice.

Example (the sequence of Figures 3-4, ``a.c.b.c.a.d.b``)
--------------------------------------------------------
>>> from graphcep.engines.sequences.tree import PatternTree
>>> from graphcep.patterns.sequences import mark, parse_items
>>> tree = PatternTree()
>>> for sid, text in [("P1", "a"), ("P2", "a.@x.b"), ("P4", "a.@x.b.@x"),
...                   ("P5", "a.c.b.a"), ("P6", "a.c.b.b"), ("P3", "a.c")]:
...     _ = tree.insert(mark(parse_items(text)), sid)
>>> evaluator, key = TreeEvaluator(tree), KeyState()
>>> for s in "acbcadb":
...     done = evaluator.read(key, s, 8)
...     print(s, sorted(i for n in evaluator.active(key) for i in n.ids),
...           [(n.ids, l) for n, l, _ in done if n.ids])
a ['P1', 'P2', 'P3'] [(['P1'], 0)]
c ['P1', 'P2'] [(['P3'], 0)]
b ['P1', 'P4', 'P5', 'P6'] [(['P2'], 0)]
c ['P1'] [(['P4'], 0)]
a ['P1', 'P2', 'P3'] [(['P1'], 4)]
d ['P1', 'P2'] []
b ['P1', 'P4'] [(['P2'], 4)]
"""

from __future__ import annotations

from collections import deque
from typing import Any

from graphcep.engines.sequences.kmp_var import Source, State
from graphcep.engines.sequences.skip import SkipSearch, skip_search
from graphcep.engines.sequences.tree import Node, PatternTree
from graphcep.patterns.sequences import Marked

#: What a son checks and binds of its parent's match: (bind sources, equality checks).
Plan = tuple[tuple[Source, ...], tuple[tuple[Source, Source], ...]]
#: One match a node completes: the node, its start position, its bindings.
Completion = tuple[Node, int, tuple[str | None, ...]]


class KeyState:
    """One key's sequence: symbols read, the recent edges, the automata's states.

    ``recent`` holds ``(symbol, *edge)`` of the last edges (as many as the longest
    pattern needs); ``searching`` the top nodes' search states (absent: at the start): a
    KMP_var state, or for a skip search the position of the next window's end;
    ``alignments`` each active son's live alignments, by start position.
    """

    __slots__ = ("pos", "recent", "searching", "alignments")

    def __init__(self, keep: int = 1) -> None:
        self.pos = 0
        self.recent: deque[tuple[Any, ...]] = deque(maxlen=keep)
        self.searching: dict[Any, State | int] = {}
        self.alignments: dict[Any, dict[int, State]] = {}

    def remember(self, entry: tuple[Any, ...], keep: int) -> None:
        """Append the edge, keeping the last ``keep`` (grown when longer patterns come)."""
        if self.recent.maxlen is None or self.recent.maxlen < keep:
            self.recent = deque(self.recent, maxlen=keep)
        self.recent.append(entry)
        self.pos += 1

    def symbols_since(self, start: int) -> list[Any]:
        """The symbols from position ``start`` on (within the recent ones)."""
        first = self.pos - len(self.recent)
        return [e[0] for i, e in enumerate(self.recent) if i + first >= start]


class TreeEvaluator:
    """Reads each key's symbols through a :class:`PatternTree` (module docstring)."""

    def __init__(self, tree: PatternTree, *, skip: bool = True) -> None:
        self.tree = tree
        self.skip = skip
        self._skips: dict[int, tuple[Any, SkipSearch | None]] = {}
        self._plans: dict[tuple[Marked, Marked], Plan] = {}
        self.seed_checks = 0  # comparisons made checking a son against its parent's match

    def read(self, key: KeyState, symbol: Any, keep: int,
             entry: tuple[Any, ...] | None = None) -> list[Completion]:
        """Read one symbol of ``key``'s sequence; the matches it completes, every node's."""
        key.remember(entry if entry is not None else (symbol,), keep)
        q = key.pos - 1
        pending: list[Completion] = []
        for node in self.tree.root.children:
            skip = self._skip(node)
            if skip is not None:
                pending += self._try_window(key, node, skip)
                continue
            state = key.searching.get(node.nid) or node.kmp.START
            state, done = node.kmp.step(state, symbol)
            if state[0]:
                key.searching[node.nid] = state
            else:
                key.searching.pop(node.nid, None)
            pending += [(node, q - node.m + 1, binds) for binds in done]
        touched: dict[int, set[int]] = {}
        for nid, live in list(key.alignments.items()):
            node = self.tree.nodes[nid]
            touched[nid] = set(live)
            kept = {}
            for start, state in live.items():
                moved = node.kmp.extend(state, symbol)
                if moved is None:
                    continue  # rule 3
                if moved[0] == node.m:
                    pending.append((node, start, moved[1]))
                else:
                    kept[start] = moved
            self._store(key, nid, kept)
        return self._propagate(key, pending, touched)

    def _skip(self, node: Node) -> SkipSearch | None:
        """The node's skip search, if it searches with one (module docstring)."""
        if not self.skip:
            return None
        hit = self._skips.get(node.nid)
        if hit is None or hit[0] is not node.kmp:
            hit = self._skips[node.nid] = (node.kmp, skip_search(node.kmp))
        return hit[1]

    def _try_window(self, key: KeyState, node: Node, skip: SkipSearch) -> list[Completion]:
        """A top node's skip search at the symbol just read: nothing unless its next
        window ends here; else that window's match, if any, and the next window's end."""
        q = key.pos - 1
        end = key.searching.get(node.nid)
        if end is None:  # a search starting here, as KMP_var's START does
            end = key.searching[node.nid] = q + node.m - 1
        if q < end:
            return []
        window = key.symbols_since(q - node.m + 1)
        assert len(window) == node.m, "the recent symbols hold every window"
        key.searching[node.nid] = q + skip.shift(window[skip.probe])
        binds = skip.verify(window)
        return [] if binds is None else [(node, q - node.m + 1, binds)]

    def _propagate(self, key: KeyState, pending: list[Completion],
                   touched: dict[int, set[int]]) -> list[Completion]:
        """Rule 2, down the tree: each completion activates the sons at its alignment."""
        done: list[Completion] = []
        while pending:
            node, start, binds = pending.pop()
            done.append((node, start, binds))
            for son in node.children:
                live = key.alignments.get(son.nid, {})
                if start in live or start in touched.get(son.nid, ()):
                    continue
                state = self._seed(node, son, binds)
                if state is None:
                    continue
                if state[0] == son.m:
                    pending.append((son, start, state[1]))
                else:
                    key.alignments.setdefault(son.nid, {})[start] = state
        done.reverse()
        return done

    def _seed(self, parent: Node, son: Node, binds: tuple[str | None, ...]) -> State | None:
        """The son's state at its parent's match, or None where the son fails there."""
        plan = self._plans.get((parent.pattern, son.pattern))
        if plan is None:
            plan = self._plans[(parent.pattern, son.pattern)] = _plan(parent.pattern,
                                                                       son.pattern)
        sources, checks = plan
        for a, b in checks:
            self.seed_checks += 1
            if _value(a, binds) != _value(b, binds):
                return None
        values = [_value(s, binds) for s in sources]
        return parent.m, (*values, *(None,) * (son.kmp.nvars - len(values)))

    def _store(self, key: KeyState, nid: int, live: dict[int, State]) -> None:
        if live:
            key.alignments[nid] = live
        else:
            key.alignments.pop(nid, None)

    def active(self, key: KeyState) -> list[Node]:
        """The nodes whose automata are active for ``key``: top nodes, and sons with a live
        alignment."""
        return [*self.tree.root.children, *(self.tree.nodes[n] for n in key.alignments)]

    def rebuild(self, key: KeyState, node: Node) -> None:
        """Recompute ``node``'s state for ``key`` from the recent symbols (module doc)."""
        key.searching.pop(node.nid, None)
        key.alignments.pop(node.nid, None)
        if node.nid not in self.tree.nodes:
            return
        assert node.kmp is not None
        first = max(0, key.pos - node.m + 1, key.pos - len(key.recent))
        if node.is_top():
            if self._skip(node) is not None:
                key.searching[node.nid] = first + node.m - 1  # the first window's end
                return
            state = node.kmp.run(key.symbols_since(first))
            if state[0]:
                key.searching[node.nid] = state
            return
        live = {}
        for start in range(first, key.pos):
            state: State | None = node.kmp.START
            for s in key.symbols_since(start):
                state = node.kmp.extend(state, s)
                if state is None:
                    break
            if state is not None:
                live[start] = state
        self._store(key, node.nid, live)

    def forget(self, key: KeyState, nid: int) -> None:
        """Drop a deleted node's state."""
        self._skips.pop(nid, None)
        key.searching.pop(nid, None)
        key.alignments.pop(nid, None)


def _value(source: Source, binds: tuple[str | None, ...]) -> Any:
    kind, ref = source
    return binds[ref] if kind == "v" else ref  # type: ignore[index]


def _plan(parent: Marked, son: Marked) -> Plan:
    """What the son adds to its parent over the parent's length: the source of each son
    variable bound there, and the equalities the parent does not imply."""
    sources: dict[int, Source] = {}
    checks: set[tuple[Source, Source]] = set()
    for p, s in zip(parent, son, strict=False):
        here: Source = ("c", p) if isinstance(p, str) else ("v", p)
        if isinstance(s, str):
            if here != ("c", s):
                checks.add((here, ("c", s)))
        elif sources.setdefault(s, here) != here:
            checks.add((sources[s], here))
    return tuple(sources[v] for v in range(len(sources))), tuple(sorted(checks, key=repr))
