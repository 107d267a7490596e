"""The closing join: the compiled token game joins a match's last link instead of storing
the tokens that wait for it.

Why
---
A token that waits for the last link of a match is the product of a stored token ``T``
and one link ``l2``; the token game stores one such product for every pair that could
still close. On the temporal triangle ``<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]`` that is
every 2-path of the last 10 s -- a million rows on 10,000 links/s over 5,000 hosts, where
one in two hundred ever closes. The subgraph engine never builds them: it joins the
closing edge with what it stored. The compiled game does the same where the automaton's
shape allows it: the tokens before the last-but-one link (``T``, at location ``before``)
are stored and indexed by what the closing link will show of them, the links read are kept
in a history indexed by their ends, and each link ``l3`` looks up the pairs ``(T, l2)``
that it closes. Each pair is then *replayed* through the game's own steps -- ``T`` reads
``l2``, the product reads ``l3`` -- so guards, invariants, freshness and witnesses are the
game's, and the reports come out in the game's order (the products' storage order: ``l2``'s
arrival, then ``T``'s storage order).

When
----
:func:`closing_join` finds the two locations, or says None (the game then stores every
token). It needs, over the location graph with one link as one step (clocks and data
ignored, so an over-approximation):

- one location ``last`` from which every link leads to final locations that read nothing
  more, and the only location from which a link reaches a final one;
- one location ``before``, the only one from which a link reaches ``last``, and from which
  links reach ``last`` only, through one pair of event transitions; neither location
  holds start tokens, and ``last`` is read through one pair of event transitions too;
- no ε-move between ``before`` and ``last`` pends or stops a clock, nor does the link's
  second event (so a product's clocks are ``T``'s plus those the link starts, and ``T``
  can be kept as long as a product of it may live);
- one state of the variables (write mode, holding) at the source of each of the four
  event transitions (so what each end reads is known: a fresh node, or one held).

Both links are *replayed*: the conditions make the lookup find every pair the game would
close; whether a pair closes is the game's own decision. A pattern that fails them (the shuffles of the square and the cliques, the
alternation) stores every token, as before.

What the closing link shows
---------------------------
Each end of ``l2`` is a constant, a variable ``T`` holds (read mode), a variable ``l2``
binds that the closing link reads again (its value is then that end of ``l3``), or
anything. ``T`` is indexed by the variables it holds that the closing link reads.

Example
-------
>>> from graphcep.lang.nu import parse_nu
>>> from graphcep.engines.nu.automaton import compile_pattern
>>> join = closing_join(compile_pattern(parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]")), {})
>>> join.ends, join.token_keys  # l2 = (Y of T, first end of l3); T indexed by X = l3's second
(((2, 1), (3, 0)), (-1, 0))
"""

from __future__ import annotations

from dataclasses import dataclass

from graphcep.engines.nu.automaton import HOLDING, WRITING, Automaton, Transition, variable_states
from graphcep.patterns.nu import Const, Var

#: Where an end of the last-but-one link comes from: anything, a constant (its id), a
#: variable the joined token holds (its index), an end of the closing link (0 or 1).
SRC_ANY, SRC_CONST, SRC_TOKEN, SRC_CLOSING = range(4)


@dataclass(frozen=True)
class ClosingJoin:
    """Where the compiled game joins the last link (see the module docstring)."""

    before: int  # the location of the stored tokens ``T``
    last: int  # the location of the products, never stored
    ends: tuple[tuple[int, int], tuple[int, int]]  # (source, argument) per end of ``l2``
    token_keys: tuple[int, int]  # per end of ``l3``: the variable of ``T`` it equals, or -1
    starts: int  # clocks the link from ``before`` starts (a bit each)

    def column(self) -> list[int]:
        """The join as the kernel's table column (its first item 1: a join runs)."""
        return [1, self.before, self.last, *self.ends[0], *self.ends[1], *self.token_keys,
                self.starts]


#: The column of an automaton the game runs without a join.
NO_JOIN = [0] * 10


@dataclass(frozen=True)
class _Link:
    """One way of reading a link from a location: its two event transitions, the ε-moves
    taken on the way, and where it ends (not inside a link)."""

    first: Transition
    second: Transition
    moves: tuple[Transition, ...]
    target: int


def closing_join(automaton: Automaton, const_id: dict[str, int]) -> ClosingJoin | None:
    """The closing join of ``automaton`` (constant ids as the kernel numbers them), or
    None where its shape does not allow one."""
    links = _links(automaton)
    finals = automaton.finals
    out = automaton.outgoing()
    starts = _closure(out, automaton.initial)[0]
    reading = {q for q in range(automaton.locations) if _events(out, q)}
    if starts & finals:
        return None
    closing = [q for q, ways in links.items() if any(w.target in finals for w in ways)]
    if len(closing) != 1:
        return None
    last = closing[0]
    if last in finals or last in starts or not links[last] or any(
            w.target not in finals or w.target in reading for w in links[last]):
        return None
    feeding = [q for q, ways in links.items() if any(w.target == last for w in ways)]
    if len(feeding) != 1 or feeding[0] in (last, *starts) or feeding[0] in finals:
        return None
    before = feeding[0]
    if {w.target for w in links[before]} != {last}:
        return None
    pairs = {(w.first, w.second) for w in links[before]}
    closes = {(w.first, w.second) for w in links[last]}
    if len(pairs) != 1 or len(closes) != 1:
        return None
    if any(m.pend or m.stop for w in links[before] for m in w.moves):
        return None
    states = variable_states(automaton)
    if isinstance(states, str):
        return None
    (first, second), (third, fourth) = pairs.pop(), closes.pop()
    transitions = (first, second, third, fourth)
    if first.pend or second.pend or any(len(states.get(t.source, ())) != 1
                                        for t in transitions):
        return None
    modes = [next(iter(states[t.source])) for t in transitions]
    found = _sources(automaton, transitions, modes, const_id)
    if found is None:
        return None
    ends, token_keys = found
    starts_mask = sum(1 << c for c in first.start | second.start)
    return ClosingJoin(before, last, ends, token_keys, starts_mask)


def _sources(automaton: Automaton, transitions: tuple[Transition, ...], modes: list[int],
             const_id: dict[str, int]
             ) -> tuple[tuple[tuple[int, int], tuple[int, int]], tuple[int, int]] | None:
    """Where each end of the last-but-one link comes from, and which variables of the
    joined token the closing link's ends equal (None: a transition is never enabled).
    ``transitions``: the two event transitions of each link; ``modes``: the variable state
    at each one's source location."""
    index = {name: i for i, name in enumerate(automaton.variables)}
    value: dict[str, tuple[str, int]] = {
        name: ("token", i) for name, i in index.items() if modes[0] >> (3 * i) & HOLDING}
    reads: list[tuple[str, int]] = []
    for k, (t, mode) in enumerate(zip(transitions, modes, strict=True)):
        fresh = ("link", k) if k < 2 else ("closing", k - 2)
        read = _read_value(automaton, mode, t, value, fresh, const_id)
        if read is None:
            return None
        reads.append(read)
    equal: dict[tuple[str, int], int] = {}  # a value -> the closing end it must equal
    for end in (0, 1):
        if reads[2 + end] != ("closing", end):
            equal.setdefault(reads[2 + end], end)

    def source(read: tuple[str, int]) -> tuple[int, int]:
        kind, arg = read
        if kind == "const":
            return SRC_CONST, arg
        if kind == "token":
            return SRC_TOKEN, arg
        if read in equal:
            return SRC_CLOSING, equal[read]
        return SRC_ANY, 0

    keys = [-1, -1]
    for (kind, arg), end in equal.items():
        if kind == "token" and keys[end] < 0:
            keys[end] = arg
    return (source(reads[0]), source(reads[1])), (keys[0], keys[1])


def _read_value(automaton: Automaton, mode: int, t: Transition,
                value: dict[str, tuple[str, int]], fresh: tuple[str, int],
                const_id: dict[str, int]) -> tuple[str, int] | None:
    """The value event transition ``t`` reads from a location with variable state
    ``mode`` (``fresh``: the link's end, unknown yet), recording in ``value`` what a
    variable it writes holds from now on (None: never enabled)."""
    label = t.label
    if isinstance(label, Const):
        return "const", const_id[label.name]
    if not isinstance(label, Var):
        return fresh  # any node
    shift = 3 * automaton.variables.index(label.name)
    writing = mode | sum(WRITING << (3 * automaton.variables.index(n)) for n in t.alloc)
    if writing >> shift & WRITING:
        value[label.name] = fresh
        return fresh
    if not mode >> shift & HOLDING or label.name not in value:
        return None
    return value[label.name]


def _events(out: list[list[Transition]], q: int) -> list[Transition]:
    return [t for t in out[q] if t.label is not None]


def _closure(out: list[list[Transition]], q: int) -> tuple[set[int], list[Transition]]:
    """The locations ε-moves reach from ``q`` (itself included) and the moves taken."""
    reach, todo, moves = {q}, [q], []
    while todo:
        for t in out[todo.pop()]:
            if t.label is None:
                moves.append(t)
                if t.target not in reach:
                    reach.add(t.target)
                    todo.append(t.target)
    return reach, moves


def _links(automaton: Automaton) -> dict[int, list[_Link]]:
    """Per location with event transitions, the ways one link leads on from it to a
    location that matters (one that reads on or is final), as the kernel reads a link: an
    event, ε-moves, an event, ε-moves; guards ignored."""
    middles, finals = automaton.middles, automaton.finals
    out = automaton.outgoing()
    found: dict[int, list[_Link]] = {}
    for q in range(automaton.locations):
        ways: dict[tuple[Transition, Transition, int], set[Transition]] = {}
        for first in _events(out, q):
            mids, moves_u = _closure(out, first.target)
            for m in sorted(mids):
                for second in _events(out, m):
                    ends, moves_v = _closure(out, second.target)
                    for e in sorted(ends):
                        if e not in middles and (e in finals or _events(out, e)):
                            ways.setdefault((first, second, e), set()).update(
                                moves_u, moves_v)
        if ways:
            found[q] = [_Link(a, b, tuple(moves), e) for (a, b, e), moves in ways.items()]
    return found
