"""Timed ν-expressions: regular expressions over link streams with time and fresh names.

Bertrand, Klaudel, Latapy, Peschanski, "Pattern Matching in Link Streams: a Token-based
Approach" (PETRI NETS 2018), Table 1. An expression is built from

- nodes: a known node (a constant), a variable ``X`` (an unknown node held in memory) or
  ``@`` (any node);
- links ``n1 ~> n2``: one link of the stream from ``n1`` to ``n2``, atomic -- nothing
  interleaves between its two ends, not even under shuffle;
- the regular operators: concatenation ``e1 . e2``, disjunction ``e1 | e2``, shuffle
  ``e1 % e2`` (the two interleaved, link by link), ``e*``, ``e+``, ``e?``;
- time: ``<e>[x, y]``: ``e``'s last link comes ``x`` to ``y`` seconds after the link
  read just before ``e`` by ``e``'s own part of the enclosing shuffles (the link before a
  shuffle while the part has read none in it; ``e``'s own first link when the match has
  read none), in exact integer microseconds;
- memory: ``#{X, Y} e`` allocates ``X`` and ``Y`` (puts them in write mode: the next node
  each reads must be *fresh* -- no constant of the pattern and held by no variable) before
  ``e``; ``e {X, Y}!`` releases them after ``e`` (their values are forgotten). ``#X`` is
  ``#{X} X`` and ``X!`` is ``X {X}!``.

These objects are what the parser (:mod:`graphcep.lang.nu`) and Python code build; the
compiler (:mod:`graphcep.engines.nu.automaton`) turns them into a timed ν-automaton.

Examples
--------
>>> x, y, z = Var("X"), Var("Y"), Var("Z")
>>> triangle = Delay(Concat((Link(Alloc(("X",), x), Alloc(("Y",), y)),
...                          Link(y, Alloc(("Z",), z)), Link(z, x))), 0, 10_000_000)
>>> NuPattern("triangle", triangle).span_us()        # a match lasts at most 10 s
10000000
>>> sorted(NuPattern("triangle", triangle).variables())
['X', 'Y', 'Z']
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from graphcep.events import format_seconds


class NuPatternError(ValueError):
    """A ν-expression that is well formed but cannot be matched as written."""


# -- nodes ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class Const:
    """A known node: matches exactly the node named ``name``."""

    name: str

    def text(self) -> str:
        return _quote(self.name)


@dataclass(frozen=True)
class Var:
    """A variable: an unknown node held in memory (see :class:`Alloc`)."""

    name: str

    def text(self) -> str:
        return self.name


@dataclass(frozen=True)
class AnyNode:
    """``@``: any node."""

    def text(self) -> str:
        return "@"


NodeTerm = Const | Var | AnyNode


# -- expressions ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Node:
    """One end of a link on its own: one *event* (half a link). Only meaningful on event
    sequences (``.tes`` input); on a link stream two of them in a row read one link."""

    node: NodeTerm

    def text(self) -> str:
        return self.node.text()


@dataclass(frozen=True)
class Link:
    """``src ~> dst``: one link; ``src`` and ``dst`` may be wrapped in :class:`Alloc` or
    :class:`Release` (``#X ~> Y!``)."""

    src: Expr
    dst: Expr

    def text(self) -> str:
        return f"{self.src.text()} ~> {self.dst.text()}"


@dataclass(frozen=True)
class Concat:
    parts: tuple[Expr, ...]

    def text(self) -> str:
        return " . ".join(_wrap(p, Concat) for p in self.parts)


@dataclass(frozen=True)
class Or:
    parts: tuple[Expr, ...]

    def text(self) -> str:
        return " | ".join(_wrap(p, Or) for p in self.parts)


@dataclass(frozen=True)
class Shuffle:
    parts: tuple[Expr, ...]

    def text(self) -> str:
        return " % ".join(_wrap(p, Shuffle) for p in self.parts)


@dataclass(frozen=True)
class Repeat:
    """``e*`` (``least=0``), ``e+`` (``least=1``), ``e?`` (``least=0, most=1``)."""

    body: Expr
    least: int = 0
    most: int | None = None

    def text(self) -> str:
        mark = {(0, None): "*", (1, None): "+", (0, 1): "?"}[(self.least, self.most)]
        return f"{_wrap(self.body, Repeat)}{mark}"


@dataclass(frozen=True)
class Delay:
    """``<body>[low, high]``: ``body``'s last link is ``low`` to ``high`` microseconds after
    the link read before it by its own part of the enclosing shuffles (the link before the
    shuffle when that part has read none since; ``body``'s first link when the match has
    read none: time 0 anchored); ``high`` None: no upper bound."""

    body: Expr
    low_us: int
    high_us: int | None

    def __post_init__(self) -> None:
        if self.low_us < 0 or (self.high_us is not None and self.high_us < self.low_us):
            raise NuPatternError(f"delay [{self.low_us}, {self.high_us}] µs is empty or "
                                 "negative")

    def text(self) -> str:
        high = "inf" if self.high_us is None else format_seconds(self.high_us)
        return f"<{self.body.text()}>[{format_seconds(self.low_us)}, {high}]"


@dataclass(frozen=True)
class Alloc:
    """``#{X, ...} body``: the variables are put in write mode before ``body``."""

    names: tuple[str, ...]
    body: Expr

    def text(self) -> str:
        if self.names == (_variable_of(self.body),) and not isinstance(self.body, Alloc):
            return f"#{self.body.text()}"
        return f"#{{{', '.join(self.names)}}} {_wrap(self.body, Alloc)}"


@dataclass(frozen=True)
class Release:
    """``body {X, ...}!``: the variables are emptied after ``body``."""

    body: Expr
    names: tuple[str, ...]

    def text(self) -> str:
        if self.names == (_variable_of(self.body),) and not isinstance(self.body, Release):
            return f"{self.body.text()}!"
        return f"{_wrap(self.body, Release)} {{{', '.join(self.names)}}}!"


Expr = Node | Link | Concat | Or | Shuffle | Repeat | Delay | Alloc | Release | NodeTerm


def _wrap(expr: Expr, parent: type) -> str:
    atomic = _is_node(expr) or isinstance(expr, Delay) or (
        isinstance(expr, Link) and parent is not Repeat)
    return expr.text() if atomic or (type(expr) is parent and parent is not Repeat) \
        else f"({expr.text()})"


def _is_node(expr: Expr) -> bool:
    """A node, with # or ! on it: one end of a link."""
    if isinstance(expr, Const | Var | AnyNode | Node):
        return True
    return isinstance(expr, Alloc | Release) and _is_node(expr.body)


def _variable_of(expr: Expr) -> str | None:
    """The variable a node reads (through # and !), None for other expressions."""
    if isinstance(expr, Var):
        return expr.name
    if isinstance(expr, Alloc | Release):
        return _variable_of(expr.body)
    return None


def _quote(name: str) -> str:
    """A constant as the parser reads it back: a plain name, else a string with its
    backslashes and quotes escaped."""
    plain = name.replace("_", "").isalnum() and name.isascii() and name[:1].islower()
    return name if plain else '"' + name.replace("\\", "\\\\").replace('"', '\\"') + '"'


# -- the pattern ---------------------------------------------------------------------------


@dataclass(frozen=True)
class NuPattern:
    """A named timed ν-expression, with where it was written (for messages)."""

    name: str
    expr: Expr
    source: str = field(default="", compare=False)

    def text(self) -> str:
        return self.expr.text()

    def variables(self) -> set[str]:
        return {n for e in walk(self.expr) for n in _names(e)}

    def constants(self) -> set[str]:
        return {e.name for e in walk(self.expr) if isinstance(e, Const)}

    def span_us(self) -> float:
        """The longest a match can last, first link to last (``math.inf``: unbounded)."""
        return span_us(self.expr)

    def unbounded_part(self) -> Expr | None:
        """The largest sub-expression whose matches nothing bounds in time (None when the
        pattern is bounded): where tokens may wait for ever."""
        return _unbounded(self.expr)


def walk(expr: Expr):
    """Every sub-expression, ``expr`` first."""
    yield expr
    for child in children(expr):
        yield from walk(child)


def children(expr: Expr) -> tuple[Expr, ...]:
    if isinstance(expr, Concat | Or | Shuffle):
        return expr.parts
    if isinstance(expr, Link):
        return (expr.src, expr.dst)
    if isinstance(expr, Repeat | Delay | Alloc | Release):
        return (expr.body,)
    if isinstance(expr, Node):
        return (expr.node,)
    return ()


def _names(expr: Expr) -> tuple[str, ...]:
    if isinstance(expr, Var):
        return (expr.name,)
    if isinstance(expr, Alloc | Release):
        return expr.names
    return ()


def span_us(expr: Expr) -> float:
    """The longest time between the first and the last link a match of ``expr`` holds
    (``math.inf`` where nothing bounds it). A delay bounds its body, and in a
    concatenation it also bounds the wait before it (its clock runs from the previous
    link); any other part that reads links after another can wait for ever, as can the
    parts of a shuffle and the rounds of a repetition."""
    if isinstance(expr, Const | Var | AnyNode | Node | Link):
        return 0
    if isinstance(expr, Delay):
        inner = span_us(expr.body)
        return inner if expr.high_us is None else min(expr.high_us, inner)
    if isinstance(expr, Alloc | Release):
        return span_us(expr.body)
    if isinstance(expr, Or):
        return max(span_us(p) for p in expr.parts)
    if isinstance(expr, Repeat):
        if expr.most is not None and expr.most <= 1:
            return span_us(expr.body)
        return 0 if not consumes(expr.body) else math.inf
    parts = [p for p in expr.parts if consumes(p)]
    if isinstance(expr, Shuffle):
        return max((span_us(p) for p in parts), default=0) if len(parts) <= 1 else math.inf
    total = span_us(parts[0]) if parts else 0  # Concat: each later part adds its wait
    for part in parts[1:]:
        delay = _delay_of(part)
        total += math.inf if delay is None or delay.high_us is None else delay.high_us
    return total


def _delay_of(expr: Expr) -> Delay | None:
    """The delay a sequence part is (through # and !), which bounds the wait before it."""
    if isinstance(expr, Delay):
        return expr
    if isinstance(expr, Alloc | Release):
        return _delay_of(expr.body)
    return None


def consumes(expr: Expr) -> bool:
    """Whether some match of ``expr`` holds a link (or an event)."""
    return any(isinstance(e, Const | Var | AnyNode) for e in walk(expr))


def _unbounded(expr: Expr) -> Expr | None:
    if span_us(expr) != math.inf:
        return None
    for child in children(expr):
        if span_us(child) == math.inf:
            return _unbounded(child) or child
    return expr


def leading_delays(expr: Expr) -> list[Delay]:
    """The delays a match may enter before it reads any link (their clocks start where
    the match starts: at time 0 anchored), outermost first."""
    if isinstance(expr, Delay):
        return [expr, *leading_delays(expr.body)]
    if isinstance(expr, Alloc | Release | Repeat):
        return leading_delays(expr.body)
    if isinstance(expr, Or | Shuffle):  # a shuffle enters all its parts at once
        return [d for part in expr.parts for d in leading_delays(part)]
    if isinstance(expr, Concat):
        found: list[Delay] = []
        for part in expr.parts:
            found += leading_delays(part)
            if consumes_always(part):
                break
        return found
    return []


def consumes_always(expr: Expr) -> bool:
    """Whether every match of ``expr`` holds a link (or an event)."""
    if isinstance(expr, Const | Var | AnyNode | Node | Link):
        return True
    if isinstance(expr, Delay | Alloc | Release):
        return consumes_always(expr.body)
    if isinstance(expr, Repeat):
        return expr.least > 0 and consumes_always(expr.body)
    if isinstance(expr, Or):
        return all(consumes_always(p) for p in expr.parts)
    return any(consumes_always(p) for p in expr.parts)  # Concat, Shuffle



@dataclass(frozen=True)
class KeyVariable:
    """A variable that holds one node throughout every match and is an end of every link
    the match reads (:func:`key_variable`); ``ends``: where links read it, ``src``
    and/or ``dst``."""

    name: str
    ends: tuple[str, ...]


def key_variable(expr: Expr) -> KeyVariable:
    """The variable every link of every match of ``expr`` reads, holding one node: the
    first in name order that is an end of every link of the expression and that no path
    through it allocates twice (an allocation inside a repetition, or two in a row,
    could give it a second node, ``#X`` adding a fresh one to what it holds). A
    :class:`NuPatternError` saying why when there is none.

    Every match then reads the node bound to it at every link: the links of the matches
    binding it to ``v`` all touch ``v``.

    >>> from graphcep.lang.nu import parse_nu
    >>> key_variable(parse_nu("#X ~> #Y . X ~> b . Y ~> X", "p").expr)
    KeyVariable(name='X', ends=('src', 'dst'))
    >>> key_variable(parse_nu("(#X ~> a)+", "p").expr)
    Traceback (most recent call last):
    ...
    graphcep.patterns.nu.NuPatternError: no variable holds one node through every match and is an end of each of its links: X may be allocated more than once (#X inside a repetition, or twice in a row)
    """
    if any(isinstance(e, Node) for e in walk(expr)):
        raise NuPatternError("it reads bare nodes (events), one end of a link at a time")
    links = [e for e in walk(expr) if isinstance(e, Link)]
    if not links:
        raise NuPatternError("it reads no link")
    shared = set.intersection(*({_variable_of(link.src), _variable_of(link.dst)} - {None}
                                for link in links))
    head = "no variable holds one node through every match and is an end of each of its links"
    if not shared:
        raise NuPatternError(f"{head}: no variable is on every link")
    for name in sorted(shared):  # type: ignore[type-var]
        if _allocations(expr, name) <= 1:
            ends = tuple(end for end in ("src", "dst")
                         if any(_variable_of(getattr(link, end)) == name for link in links))
            return KeyVariable(name, ends)
    raise NuPatternError(f"{head}: {', '.join(sorted(shared))} may be allocated more than "  # type: ignore[arg-type]
                         "once (#X inside a repetition, or twice in a row)")


def _allocations(expr: Expr, name: str) -> float:
    """The most allocations of ``name`` a path through ``expr`` makes (``math.inf``:
    any number, inside a repetition)."""
    if isinstance(expr, Alloc):
        return (name in expr.names) + _allocations(expr.body, name)
    if isinstance(expr, Or):
        return max(_allocations(p, name) for p in expr.parts)
    if isinstance(expr, Repeat):
        inner = _allocations(expr.body, name)
        return inner if not inner or expr.most == 1 else math.inf
    return sum(_allocations(c, name) for c in children(expr))  # Concat, Shuffle, Link, ...
