"""KMP_var: Knuth-Morris-Pratt for parameterized patterns (du Mouza, Rigaux, Scholl,
CIKM 2005, the building block of their SSDBM 2006 paper).

One automaton finds every position where a sequence matches a marked pattern
(:mod:`graphcep.patterns.sequences`), reading each symbol once. Its state is ``(j,
binds)``: how many items of the current alignment matched, and the symbol each variable
holds (``None`` while unbound) -- memory proportional to the variables.

On a mismatch after ``j`` items (or after a whole match) classic KMP shifts to the
longest border of the matched prefix. With variables the matched window is
``ν(P[0..j-1])``, which depends on the values bound; but which shifts are possible depends
only on the *equality type* of those values: which variables hold equal symbols, and
which hold one of the pattern's constants. The shift for ``(j, type)`` is computed once,
symbolically, and remembered: the next alignment's ``j'`` and where each of its variables
takes its value (a constant, or an old variable). Each shift moves the alignment right,
so the symbols read plus the shifts are at most twice the sequence's length: linear.

Examples
--------
>>> from graphcep.patterns.sequences import mark, parse_items
>>> kmp = KmpVar(mark(parse_items("a.@x.b.@x")))
>>> state, found = kmp.START, []
>>> for q, s in enumerate("aabab"):
...     state, done = kmp.step(state, s)
...     found += [(q - kmp.m + 1, binds) for binds in done]
>>> found
[(0, ('a',))]
"""

from __future__ import annotations

from collections.abc import Iterable

from graphcep.patterns.sequences import Marked

#: An automaton state: items matched and the symbol per variable (None: unbound).
State = tuple[int, tuple[str | None, ...]]
#: Where a variable of the shifted alignment takes its value: an old variable or a constant.
Source = tuple[str, int | str]


class KmpVar:
    """The KMP_var automaton of one marked pattern (see the module docstring).

    ``comparisons`` counts symbol comparisons (a constant, or a variable already bound,
    against a symbol read), the paper's cost measure.
    """

    def __init__(self, pattern: Marked) -> None:
        if not pattern:
            raise ValueError("KMP_var needs a pattern of at least one item")
        self.pattern = pattern
        self.m = len(pattern)
        self.nvars = len({i for i in pattern if isinstance(i, int)})
        self.constants = frozenset(i for i in pattern if isinstance(i, str))
        seen: set[int] = set()
        self._first = []  # per item: whether it is its variable's first occurrence
        for item in pattern:
            self._first.append(isinstance(item, int) and item not in seen)
            if isinstance(item, int):
                seen.add(item)
        self._bound_before = [len({i for i in pattern[:j] if isinstance(i, int)})
                              for j in range(self.m + 1)]
        self._shifts: dict[tuple[int, tuple], tuple[int, tuple[Source, ...]]] = {}
        self.START: State = (0, (None,) * self.nvars)
        self.comparisons = 0

    # -- reading ----------------------------------------------------------------------

    def extend(self, state: State, symbol: str) -> State | None:
        """The state after ``symbol`` extends the current alignment, or None when it does
        not (no shift: what a son automaton in the pattern tree does, rule 3)."""
        j, binds = state
        item = self.pattern[j]
        if isinstance(item, str):
            self.comparisons += 1
            return (j + 1, binds) if item == symbol else None
        if self._first[j]:
            return j + 1, (*binds[:item], symbol, *binds[item + 1:])
        self.comparisons += 1
        return (j + 1, binds) if binds[item] == symbol else None

    def step(self, state: State, symbol: str) -> tuple[State, list[tuple[str | None, ...]]]:
        """Read one symbol: the next state and the bindings of the match it completes (at
        most one: the alignment starting ``m - 1`` symbols back)."""
        found = []
        while True:
            moved = self.extend(state, symbol) if state[0] < self.m else None
            if moved is not None:
                if moved[0] == self.m:
                    found.append(moved[1])
                    moved = self.shift(moved)
                return moved, found
            if state[0] == 0:
                return self.START, found
            state = self.shift(state)

    def run(self, symbols: Iterable[str], state: State | None = None) -> State:
        """The state after reading ``symbols`` (matches dropped): a catch-up."""
        state = self.START if state is None else state
        for s in symbols:
            state, _ = self.step(state, s)
        return state

    # -- shifts -----------------------------------------------------------------------

    def shift(self, state: State) -> State:
        """The state of the next alignment consistent with the ``j`` symbols matched."""
        j, binds = state
        bound = self._bound_before[j]
        kinds: list[object] = []
        first_of: dict[str, int] = {}
        for v in range(bound):
            value = binds[v]
            assert value is not None
            kinds.append(value if value in self.constants else first_of.setdefault(value, v))
        key = (j, tuple(kinds))
        plan = self._shifts.get(key)
        if plan is None:
            plan = self._shifts[key] = self._plan_shift(j, key[1])
        k, sources = plan
        new = [binds[s] if kind == "v" else s for kind, s in sources]  # type: ignore[index]
        return k, (*new, *(None,) * (self.nvars - len(new)))

    def _plan_shift(self, j: int, kinds: tuple) -> tuple[int, tuple[Source, ...]]:
        """The longest proper border of the window ``P[0..j-1]`` under an equality type:
        the new ``j`` and each new variable's source (computed once per type)."""
        window: list[Source] = []
        for item in self.pattern[:j]:
            if isinstance(item, str):
                window.append(("c", item))
            else:
                kind = kinds[item]
                window.append(("c", kind) if isinstance(kind, str) else ("v", kind))
        for d in range(1, j + 1):
            sources = self._align(window[d:])
            if sources is not None:
                return j - d, sources
        raise AssertionError("the empty border always aligns")

    def _align(self, window: list[Source]) -> tuple[Source, ...] | None:
        """Each variable's source if ``P[0..len(window)-1]`` matches the symbolic window."""
        sources: dict[int, Source] = {}
        for item, w in zip(self.pattern, window, strict=False):
            if isinstance(item, str):
                if w != ("c", item):
                    return None
            elif sources.setdefault(item, w) != w:
                return None
        return tuple(sources[v] for v in range(len(sources)))
