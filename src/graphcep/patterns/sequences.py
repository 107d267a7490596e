"""Parameterized sequence patterns: constants and ``@x`` variables joined by ``.``.

du Mouza, Rigaux, Scholl, "On-line Aggregation and Filtering of Pattern-based Queries"
(SSDBM 2006), Section 3. A pattern is a word over constants and variables; a sequence
``S`` *matches* ``P`` at position ``l`` iff some valuation ``ν`` (each variable to one
symbol) makes ``ν(P)`` the contiguous subsequence of ``S`` starting at ``l``
(Definitions 1-2). Occurrences of one variable stand for equal symbols; different
variables may stand for equal symbols, and a variable may stand for a symbol the pattern
also names as a constant.

Two forms of a pattern are used here, both plain tuples so that the matchers compare
them fast:

- the **marked** form (:func:`mark`): variables renamed ``0, 1, ...`` (ints) in order of
  first appearance, constants kept as ``str``. It is a subscription's identity: ``a.@x``
  and ``a.@y`` are one pattern, but ``a.@x`` is not ``a`` -- on a stream a match of
  ``a.@x`` ends one symbol later and binds ``@x``, so graphcep reports it then;
- the **normal** form (:func:`normalize`): the marked form without trailing variables
  that occur once (the paper's delegate of an equivalence class). Lubs are normal; the
  empty pattern ``()`` is the tree's root (the paper draws it ``@x1``): it matches at
  every position.

``P2 ⊴ P1`` (:func:`contains`, the paper's *Contain*) holds iff ``P1`` is no longer than
``P2`` and a substitution of ``P1``'s variables by items of ``P2`` turns ``P1`` into a
prefix of ``P2``: then every match of ``P2`` at ``l`` is a match of ``P1`` at ``l``, ending
no later. (The paper states it as relaxation rules on subscripts; the substitution is the
same test, exact, one pass.)

Examples
--------
>>> show(normalize(mark(parse_items("@y.c.@x.@y.@z"))))
'@x1.c.@x2.@x1'
>>> show(lub(mark(parse_items("b.a.c.a")), mark(parse_items("b.d.c.d"))))
'b.@x1.c.@x1'
>>> contains(mark(parse_items("b.c.a.c")), mark(parse_items("b.@x.a.@x")))
True
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

#: A marked pattern: constants (``str``) and variables (``int``, numbered from 0 in order
#: of first appearance).
Marked = tuple[str | int, ...]


class SequencePatternError(ValueError):
    """A pattern that cannot be built (empty, or a malformed item)."""


@dataclass(frozen=True)
class Var:
    """A pattern variable ``@name``."""

    name: str


Item = str | Var
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_PLAIN = re.compile(r"[A-Za-z0-9_]+")


@dataclass(frozen=True)
class SequencePattern:
    """A subscription's pattern as written: its items and variable names.

    >>> p = SequencePattern(("22", Var("port"), "22", Var("port")))
    >>> p.text(), p.marked(), p.variables()
    ('22.@port.22.@port', ('22', 0, '22', 0), ('port',))
    """

    items: tuple[Item, ...]

    def __post_init__(self) -> None:
        if not self.items:
            raise SequencePatternError("a pattern holds at least one item")
        for item in self.items:
            if isinstance(item, Var) and not _NAME.fullmatch(item.name):
                raise SequencePatternError(f"bad variable name {item.name!r}")
            if isinstance(item, str) and not item:
                raise SequencePatternError("a constant is a non-empty symbol")

    def marked(self) -> Marked:
        return mark(self.items)

    def variables(self) -> tuple[str, ...]:
        """Variable names in order of first appearance (index = marked number)."""
        return tuple(dict.fromkeys(i.name for i in self.items if isinstance(i, Var)))

    def text(self) -> str:
        return ".".join(f"@{i.name}" if isinstance(i, Var) else _quote(i)
                        for i in self.items)

    def __len__(self) -> int:
        return len(self.items)


def parse_items(text: str) -> tuple[Item, ...]:
    """A quick reader for code and tests: items split on ``.``, ``@name`` a variable.
    Query files go through :mod:`graphcep.lang.sequences` (quoting, positions).

    >>> parse_items("a.@x.b")
    ('a', Var(name='x'), 'b')
    """
    return tuple(Var(p[1:]) if p.startswith("@") else p for p in text.split("."))


def mark(items: Iterable[Item | int]) -> Marked:
    """Variables renamed ``0, 1, ...`` in order of first appearance (the paper's marking).

    >>> mark(parse_items("@z.a.@x.b.@y.@z")) == mark(parse_items("@y.a.@z.b.@x.@y"))
    True
    """
    numbers: dict[object, int] = {}
    out: list[str | int] = []
    for item in items:
        if isinstance(item, str):
            out.append(item)
        else:
            out.append(numbers.setdefault(item, len(numbers)))
    return tuple(out)


def normalize(p: Sequence[Item | int]) -> Marked:
    """The normal form: marked, then trailing variables that occur once dropped (they
    match any symbol, so the pattern without them matches at the same positions).

    >>> show(normalize(mark(parse_items("b.@x.a.@y"))))
    'b.@x1.a'
    >>> normalize(mark(parse_items("@x.@y")))
    ()
    """
    out = list(mark(p))
    while out and isinstance(out[-1], int) and out.count(out[-1]) == 1:
        out.pop()
    return tuple(out)


def show(p: Marked) -> str:
    """A marked pattern as the paper writes it (``@x1`` for variable 0); ``ε`` if empty."""
    if not p:
        return "ε"
    return ".".join(f"@x{i + 1}" if isinstance(i, int) else _quote(i) for i in p)


def _quote(symbol: str) -> str:
    return symbol if _PLAIN.fullmatch(symbol) else '"' + symbol.replace("\\", "\\\\") \
        .replace('"', '\\"') + '"'


# -- refinement and lub (Section 3.2) ----------------------------------------------------


def contains(p2: Marked, p1: Marked) -> bool:
    """``p2 ⊴ p1``: every match of ``p2`` at a position is a match of ``p1`` there (the
    paper's *Contain*, one pass over ``p1``).

    >>> P0, P1, P3 = mark(parse_items("@x.@y.a")), mark(parse_items("b.@x.a")), \\
    ...     mark(parse_items("b.@x.a.@x"))
    >>> contains(P1, P0), contains(P3, P1), contains(P1, P3)
    (True, True, False)
    >>> contains(mark(parse_items("a.@x.b.@y")), mark(parse_items("a.@x.b.@x")))
    False
    """
    if len(p1) > len(p2):
        return False
    theta: dict[int, str | int] = {}
    for a, b in zip(p1, p2, strict=False):
        if isinstance(a, str):
            if a != b:
                return False
        elif theta.setdefault(a, b) != b:
            return False
    return True


def strictly_contains(p2: Marked, p1: Marked) -> bool:
    """``p2 ◁ p1``: ``p2 ⊴ p1`` and not the converse (for marked patterns: not equal)."""
    return p2 != p1 and contains(p2, p1)


def lub(p1: Marked, p2: Marked) -> Marked:
    """The least upper bound of two patterns (the paper's *Lub*): position by position, a
    constant where both hold it, else one variable per distinct pair of items; normal.

    >>> show(lub(mark(parse_items("b.a.c.a")), mark(parse_items("b.c.c"))))
    'b.@x1.c'
    >>> show(lub(mark(parse_items("b.a.d")), mark(parse_items("d.a.d"))))
    '@x1.a.d'
    """
    pairs: dict[tuple[str | int, str | int], int] = {}
    out: list[str | int] = []
    for a, b in zip(p1, p2, strict=False):
        if isinstance(a, str) and a == b:
            out.append(a)
        else:
            out.append(pairs.setdefault((a, b), len(pairs)))
    return normalize(out)


def lub_all(patterns: Iterable[Marked]) -> Marked:
    """The lub of several patterns (``lub`` is associative on the semi-lattice)."""
    it = iter(patterns)
    out = next(it)
    for p in it:
        out = lub(out, p)
    return out


# -- cost model (Section 4.1) --------------------------------------------------------------


def selectivity(p: Marked) -> int:
    """``n - k``: length less distinct variables; ``τ(P) = |Σ| ** -(n - k)``.

    >>> selectivity(mark(parse_items("a.@x.b"))), selectivity(mark(parse_items("a.@x.@x")))
    (2, 2)
    """
    return len(p) - len({i for i in p if isinstance(i, int)})


def filtering_rate(p: Marked, alphabet: int) -> float:
    """``τ(P)``, the estimated share of positions where ``P`` matches, with symbols uniform
    over an alphabet of ``alphabet`` symbols (first occurrences of variables match any).

    >>> filtering_rate(mark(parse_items("a.@x.b")), 4)
    0.0625
    """
    return float(alphabet) ** -selectivity(p)


def cost_cluster(n: int, m: int, tau: float) -> float:
    """Equation (1): comparisons for ``n`` symbols with a lub of rate ``tau`` filtering
    ``m`` patterns of length ``n``: ``(1 - τ) n + τ (n + m n)``."""
    return (1 - tau) * n + tau * (n + m * n)


def cost_multi(n: int, m: int) -> float:
    """Equation (2): ``m n``, the ``m`` patterns evaluated independently."""
    return float(m * n)


def lub_pays(lub_pattern: Marked, m: int, alphabet: int) -> bool:
    """Equation (3): whether filtering ``m`` patterns through ``lub_pattern`` saves
    comparisons, ``τ(P) < (m - 1) / m``.

    >>> lub_pays(mark(parse_items("a.@x.@y.@z.@u.@v.@w.@s")), 2, 4)
    True
    """
    return filtering_rate(lub_pattern, alphabet) < (m - 1) / m


def more_selective(l1: Marked, l2: Marked) -> bool:
    """Whether ``l1`` is preferred to ``l2``: the smaller filtering rate; on a tie, the
    prefixes of length 1, 2, ... compared the same way (a mismatch comes sooner, Section
    4.2's tie-break); ``False`` when nothing separates them.

    >>> L1, L2 = mark(parse_items("@x.a.d")), mark(parse_items("b.a"))  # the paper's tie
    >>> more_selective(L2, L1), more_selective(L1, L2)
    (True, False)
    """
    if selectivity(l1) != selectivity(l2):
        return selectivity(l1) > selectivity(l2)
    for k in range(1, min(len(l1), len(l2))):
        s1, s2 = selectivity(l1[:k]), selectivity(l2[:k])
        if s1 != s2:
            return s1 > s2
    return False


# -- subscriptions -----------------------------------------------------------------------


@dataclass(frozen=True)
class Subscription:
    """One subscriber's pattern under its id."""

    id: str
    pattern: SequencePattern


@dataclass(frozen=True)
class SubscriptionSet:
    """A named set of subscriptions, ids distinct, in file order.

    >>> subs = SubscriptionSet("s", (Subscription("ssh", SequencePattern(parse_items("22.@x.22.@x"))),))
    >>> subs.ids(), subs.longest()
    (('ssh',), 4)
    """

    name: str
    subscriptions: tuple[Subscription, ...]

    def __post_init__(self) -> None:
        ids = [s.id for s in self.subscriptions]
        if len(set(ids)) != len(ids):
            raise SequencePatternError("subscription ids must be distinct")

    def ids(self) -> tuple[str, ...]:
        return tuple(s.id for s in self.subscriptions)

    def longest(self) -> int:
        return max((len(s.pattern) for s in self.subscriptions), default=0)
