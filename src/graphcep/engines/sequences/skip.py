"""A Horspool-style skip search for parameterized patterns, run online over a stream.

Horspool's algorithm (1980) tries the alignments of a pattern of length ``m`` one
window at a time and moves by a bad-symbol shift: after the window ending at ``q``, the
next window worth trying ends at ``q + shift[S[q]]``, where ``shift[c]`` is the distance
from the window's end to the last position ``i < m - 1`` of the pattern that can hold
``c``. The symbols the shift jumps over are never compared.

With variables (:mod:`graphcep.patterns.sequences`) a variable position can hold any
symbol, so the table is conservative, and the position it is keyed on -- the *probe* --
is a constant ``r`` chosen by :func:`best_probe`, not necessarily the last item (a
variable next to the last item would make every shift 1): ``shift[c]`` is ``r - i`` for
the last ``i < r`` that is the constant ``c`` *or a variable*, ``r + 1`` when there is
none. No alignment that could match is skipped: the alignment ``d`` further
(``d < shift[c]``) puts its item ``r - d`` on the probed symbol ``c``, which that item
cannot hold. (The probe at ``m - 1`` is Horspool's own table.)

A tried window is verified probe first, then right to left: a constant, or a variable
already bound in this window, against the symbol (one comparison each, counted in the
automaton's ``comparisons`` like KMP_var's); a variable's first occurrence in that order
binds it for free, so repeats of a variable are checked on the aligned window. The
shift-table lookup is not a symbol comparison: the standard cost measure of string
matching (and the paper's) counts symbol-against-pattern comparisons only.

Online: the search's state is the stream position of the next window's end; when that
symbol arrives the window is the key's last ``m`` symbols (kept for notifications
anyway). The skip is used only where it can pay (:func:`skip_search`): a probe whose
shift is at least 2 for every symbol but the constants between it and the variable
before it, i.e. two constants in a row. Worst case, like Horspool's, ``m`` comparisons
per symbol (a periodic pattern on a periodic stream); KMP_var
(:mod:`~graphcep.engines.sequences.kmp_var`) stays linear and is what the other nodes
use, and what the tree evaluator uses everywhere when asked to.

Example
-------
>>> from graphcep.engines.sequences.kmp_var import KmpVar
>>> from graphcep.patterns.sequences import mark, parse_items
>>> skip_search(KmpVar(mark(parse_items("@x.@y.@x")))) is None  # no constant
True
>>> skip = skip_search(KmpVar(mark(parse_items("a.@x.b.c.c"))))
>>> skip.probe, skip.shift("a"), skip.shift("b"), skip.shift("c"), skip.shift("z")
(4, 3, 2, 1, 3)
>>> text, q, found = "xacaccaqbcc", 4, []
>>> while q < len(text):
...     binds = skip.verify(text[q - skip.m + 1:q + 1])
...     found += [] if binds is None else [(q - skip.m + 1, binds)]
...     q += skip.shift(text[q - skip.m + 1 + skip.probe])
>>> found
[(6, ('q',))]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from graphcep.engines.sequences.kmp_var import KmpVar
from graphcep.patterns.sequences import Marked


class SkipSearch:
    """The bad-symbol shifts and the window check of one pattern (module docstring).

    Comparisons are added to ``kmp.comparisons``: one counter per pattern, whichever
    search its node runs.
    """

    __slots__ = ("kmp", "m", "probe", "_shifts", "_default", "_order")

    def __init__(self, kmp: KmpVar, probe: int | None = None) -> None:
        self.kmp = kmp
        pattern = kmp.pattern
        self.m = len(pattern)
        self.probe = best_probe(pattern)[0] if probe is None else probe
        assert isinstance(pattern[self.probe], str), "the probe is a constant"
        last_var = _last_variable(pattern, self.probe)
        self._default = self.probe - last_var
        self._shifts: dict[Any, int] = {}
        for i in range(last_var + 1, self.probe):  # the nearest occurrence wins
            self._shifts[pattern[i]] = self.probe - i
        self._order = (self.probe, *(i for i in range(self.m - 1, -1, -1)
                                     if i != self.probe))

    def shift(self, symbol: Any) -> int:
        """How far the window moves after a window whose probe position holds
        ``symbol``."""
        return self._shifts.get(symbol, self._default)

    def verify(self, window: Sequence[Any]) -> tuple[Any, ...] | None:
        """The bindings (per variable, in order) if the pattern matches ``window`` (its
        last ``m`` symbols), else None; the probe first, then right to left, comparisons
        counted."""
        pattern, kmp = self.kmp.pattern, self.kmp
        binds: list[Any] = [None] * kmp.nvars
        bound = [False] * kmp.nvars
        offset = len(window) - self.m
        for i in self._order:
            item, symbol = pattern[i], window[offset + i]
            if isinstance(item, str):
                kmp.comparisons += 1
                if item != symbol:
                    return None
            elif bound[item]:
                kmp.comparisons += 1
                if binds[item] != symbol:
                    return None
            else:
                binds[item], bound[item] = symbol, True
        return tuple(binds)


def _last_variable(pattern: Marked, before: int) -> int:
    """The last variable position before ``before`` (``-1`` when none)."""
    return max((i for i in range(before) if isinstance(pattern[i], int)), default=-1)


def best_probe(pattern: Marked) -> tuple[int, int]:
    """The constant position with the longest shift for symbols not in the table (the
    distance to the nearest variable or the start before it; the later on ties) and that
    shift; ``(-1, 0)`` for a pattern of variables only."""
    best = (-1, 0)
    for r, item in enumerate(pattern):
        if isinstance(item, str):
            shift = r - _last_variable(pattern, r)
            if shift >= best[1]:
                best = (r, shift)
    return best


def skip_search(kmp: KmpVar) -> SkipSearch | None:
    """The skip search of ``kmp``'s pattern where it can pay (a probe whose shift is at
    least 2 for every symbol but those of the few constants before it), else None: the
    node keeps KMP_var."""
    probe, shift = best_probe(kmp.pattern)
    return SkipSearch(kmp, probe) if shift >= 2 else None
