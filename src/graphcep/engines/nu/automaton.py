"""Timed ν-expressions compiled to timed ν-automata (the paper's Section 3.3, Table 2).

Thompson's construction, location by location, with what the paper adds:

- a **link** ``n1 ~> n2`` is two event transitions through a *middle* location; a
  location is middle while one link is half read, and a shuffle never interleaves the
  other side there -- the link is atomic;
- **memory**: ``#{X} e`` is an ε-transition allocating ``X`` (write mode) into ``e``,
  ``e {X}!`` an ε-transition releasing ``X`` out of it (Table 2);
- **time**: ``<e>[x, y]`` gets a clock of its own, started where the paper's construction
  resets it. "Our time model is based on timed pattern matching [3], which implies that
  clock resets can only be on non ε-transitions" (Section 3.2, proof of Proposition 2):
  its Fig. 2 resets the delay's clock on the transition that reads the event just before
  the delay (``q1 --νX, X, ρ={c}--> q2``); and "the translation rules for the regular
  expression constructs are the classical ones" (Section 3.3), so a shuffle is the product
  of its parts' automata and a part's clock is reset by an event *that part* reads. So a
  delay counts from the last event read by its own part of the enclosing shuffles -- from
  the shuffle's entry (the last event before the shuffle) when the part has read none since
  -- and, when the match has read nothing before it, from time 0 anchored (the paper's
  initial token) or, in search mode, from ``e``'s own first event. Here the ε-transition
  into ``e`` starts the clock at the time of the event the match read last (*pends* it
  when the match has read nothing yet: the first event of ``e`` then starts it -- every
  event transition inside ``e`` carries the clocks of its enclosing delays for that), and
  the shuffle product lets a part run its clock ε-moves only where that event is the
  part's own (:func:`_shuffle`); every location of ``e`` has the invariant
  ``clock <= y``; the ε-transition out of ``e`` is guarded by ``x <= clock <= y``, run at
  the time of ``e``'s last event: the time after it never counts;
- **shuffle** ``e1 % e2``: the product of the two automata, each side moving alone,
  except that a side in a middle location blocks every move of the other: nothing, not
  even a memory operation, happens inside a link; and a side's clock ε-moves (a delay's
  start, its closing guard) only right after its own event, or at the shuffle's entry;
  a side's memory ε-moves (allocations, releases) commute with its clock ε-moves, so
  they may also wait for the other side's events (:func:`_timed_first`).

The automaton has ε-transitions left in; the token game (:mod:`graphcep.engines.nu.engine`)
follows them after every event, as the paper's ε-closure does.

Example
-------
>>> from graphcep.patterns.nu import Alloc, Const, Link, NuPattern, Var
>>> a = compile_pattern(NuPattern("p", Link(Const("a"), Alloc(("X",), Var("X")))))
>>> a.describe()[0]
'5 locations, 4 transitions (2 reading, 2 ε), 0 clocks, variables X, constants a'
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from dataclasses import dataclass, field

from graphcep.events import counted_noun
from graphcep.patterns.nu import (
    Alloc,
    AnyNode,
    Concat,
    Const,
    Delay,
    Expr,
    Link,
    Node,
    NodeTerm,
    NuPattern,
    NuPatternError,
    Or,
    Release,
    Repeat,
    Shuffle,
    Var,
)
from graphcep.patterns.nu_autom import AutomatonPattern, Condition

#: The most locations a compiled pattern may have (a shuffle of k parts multiplies them:
#: the 4-clique of examples/nu needs 14,455).
MAX_LOCATIONS = 200_000


@dataclass(frozen=True)
class Transition:
    """``source -> target``, reading ``label`` (None: an ε-transition).

    ``alloc`` and ``release`` are the paper's ν and ν̄ (allocation before the read,
    release after it); ``guard`` holds ``(clock, low, high)`` checks (high None: no bound);
    ``pend`` the clocks whose delay begins here; ``start`` the clocks of the delays
    enclosing an event transition (started by it if pending); ``stop`` the clocks whose
    delay ends here. Compiled expressions guard and pend on ε-transitions only; automaton
    files (:mod:`graphcep.lang.nu_autom`) also guard event transitions, and ``pend`` on
    one resets its clocks at the event.
    """

    source: int
    target: int
    label: NodeTerm | None = None
    alloc: frozenset[str] = frozenset()
    release: frozenset[str] = frozenset()
    guard: tuple[tuple[int, int, int | None], ...] = ()
    pend: frozenset[int] = frozenset()
    start: frozenset[int] = frozenset()
    stop: frozenset[int] = frozenset()

    def moved(self, source: int, target: int) -> Transition:
        return Transition(source, target, self.label, self.alloc, self.release, self.guard,
                          self.pend, self.start, self.stop)

    def describe(self) -> str:
        parts = []
        if self.alloc:
            parts.append("ν{" + ",".join(sorted(self.alloc)) + "}")
        parts.append("ε" if self.label is None else self.label.text())
        if self.release:
            parts.append("ν̄{" + ",".join(sorted(self.release)) + "}")
        for clock, low, high in self.guard:
            parts.append(f"c{clock}∈[{low},{'∞' if high is None else high}]µs")
        if self.pend:
            parts.append("pend " + ",".join(f"c{c}" for c in sorted(self.pend)))
        return " ".join(parts)


@dataclass
class Automaton:
    """A timed ν-automaton: locations ``0 .. locations-1``, ``initial``, ``finals``."""

    locations: int
    initial: int
    finals: frozenset[int]
    transitions: tuple[Transition, ...]
    invariants: dict[int, tuple[tuple[int, int], ...]]  # location -> (clock, high)
    middles: frozenset[int]  # locations inside a link (between its two ends)
    clocks: int
    variables: tuple[str, ...]
    constants: frozenset[str]
    origin: dict[int, str] = field(default_factory=dict)  # location -> its expression text

    def fewest_reads(self) -> int:
        """The fewest reading transitions on a path from ``initial`` to a final location
        (guards, invariants and memory ignored: a lower bound on what any accepted word
        reads); 0 when a final location is reached by ε alone, or never."""
        from collections import deque

        out = self.outgoing()
        best = [self.locations + 1] * self.locations  # more reads than any shortest path
        best[self.initial] = 0
        todo = deque([self.initial])
        while todo:  # 0-1 breadth-first search: ε costs 0, a read 1
            here = todo.popleft()
            for t in out[here]:
                cost = best[here] + (t.label is not None)
                if cost < best[t.target]:
                    best[t.target] = cost
                    (todo.append if t.label is not None else todo.appendleft)(t.target)
        reached = [best[f] for f in self.finals if best[f] <= self.locations]
        return min(reached, default=0)

    def outgoing(self) -> list[list[Transition]]:
        """Transitions by source location."""
        out: list[list[Transition]] = [[] for _ in range(self.locations)]
        for t in self.transitions:
            out[t.source].append(t)
        return out

    def describe(self) -> list[str]:
        reading = sum(t.label is not None for t in self.transitions)
        head = (f"{counted_noun(self.locations, 'location')}, "
                f"{counted_noun(len(self.transitions), 'transition')} ({reading} reading, "
                f"{len(self.transitions) - reading} ε), {counted_noun(self.clocks, 'clock')}, "
                f"variables {', '.join(self.variables) or 'none'}, constants "
                f"{', '.join(sorted(self.constants)) or 'none'}")
        lines = [head, f"initial q{self.initial}; final "
                 + ", ".join(f"q{q}" for q in sorted(self.finals))]
        for q in range(self.locations):
            inv = " ".join(f"c{c}≤{h}µs" for c, h in self.invariants.get(q, ()))
            mark = " (inside a link)" if q in self.middles else ""
            if inv or mark:
                lines.append(f"q{q}{mark}{': ' + inv if inv else ''}")
        lines += [f"q{t.source} -> q{t.target}: {t.describe()}" for t in self.transitions]
        return lines

    def to_dot(self, name: str = "pattern") -> str:
        """The automaton in Graphviz DOT."""
        def quote(text: str) -> str:
            return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'

        lines = [f"digraph {quote(name)} {{", "  rankdir=LR;", '  node [shape=circle];',
                 '  start [shape=point];', f"  start -> q{self.initial};"]
        for q in range(self.locations):
            inv = ", ".join(f"c{c}≤{h}µs" for c, h in self.invariants.get(q, ()))
            shape = "doublecircle" if q in self.finals else "circle"
            label = f"q{q}" + (f"\\n{inv}" if inv else "")
            style = ", style=dashed" if q in self.middles else ""
            lines.append(f"  q{q} [shape={shape}, label={quote(label)}{style}];")
        for t in self.transitions:
            lines.append(f"  q{t.source} -> q{t.target} [label={quote(t.describe())}];")
        lines.append("}")
        return "\n".join(lines) + "\n"


class _Builder:
    """Locations and transitions of an automaton under construction (clocks shared with
    the builders of shuffled parts)."""

    def __init__(self, clocks: list[int]) -> None:
        self.count = 0
        self.transitions: list[Transition] = []
        self.invariants: dict[int, set[tuple[int, int]]] = {}
        self.middles: set[int] = set()
        self.origin: dict[int, str] = {}
        self._clocks = clocks  # a one-element list: the next clock number

    def location(self, origin: str) -> int:
        self.count += 1
        self.origin[self.count - 1] = origin
        return self.count - 1

    def clock(self) -> int:
        self._clocks[0] += 1
        return self._clocks[0] - 1

    def add(self, t: Transition) -> None:
        self.transitions.append(t)


def compile_pattern(pattern: NuPattern) -> Automaton:
    """The timed ν-automaton of ``pattern`` (see the module docstring); a pattern read from
    an automaton file (:class:`graphcep.patterns.nu_autom.AutomatonPattern`) carries it.

    Compiled once per pattern (the last 64 are remembered): engines only read their
    automaton, and progressive window widening starts a fresh engine in every window."""
    try:
        return _compile_remembered(pattern)
    except TypeError:  # a pattern that cannot be hashed is compiled every time
        return _compile(pattern)


@functools.lru_cache(maxsize=64)
def _compile_remembered(pattern: NuPattern) -> Automaton:
    return _compile(pattern)


def _compile(pattern: NuPattern) -> Automaton:
    if isinstance(pattern, AutomatonPattern):
        return _from_file(pattern)
    clocks = [0]
    b = _Builder(clocks)
    start, end = _fragment(pattern.expr, b, ())
    # number the locations reachable from the entry in the order met (a shuffle leaves its
    # parts' own locations behind, unreachable)
    out = _reachable_out(b.transitions, start)
    number = {start: 0}
    todo = [start]
    while todo:
        for t in out.get(todo.pop(0), ()):
            if t.target not in number:
                number[t.target] = len(number)
                todo.append(t.target)
    if end not in number:
        raise NuPatternError(f"the pattern {pattern.text()!r} can never match")
    kept = [t.moved(number[t.source], number[t.target]) for t in b.transitions
            if t.source in number]
    return Automaton(
        locations=len(number),
        initial=0,
        finals=frozenset({number[end]}),
        transitions=tuple(kept),
        invariants={number[q]: tuple(sorted(v)) for q, v in b.invariants.items()
                    if v and q in number},
        middles=frozenset(number[q] for q in b.middles if q in number),
        clocks=clocks[0],
        variables=tuple(sorted(pattern.variables())),
        constants=frozenset(pattern.constants()),
        origin={number[q]: text for q, text in b.origin.items() if q in number},
    )


def _fragment(expr: Expr, b: _Builder, delays: tuple[tuple[int, int | None], ...]
              ) -> tuple[int, int]:
    """Add ``expr``'s locations and transitions to ``b``; its (entry, exit) locations.
    ``delays`` are the enclosing delays' ``(clock, high)``: every location made here gets
    their invariants, every event transition starts their clocks."""
    text = expr.text()

    def loc() -> int:
        q = b.location(text)
        b.invariants[q] = {(c, h) for c, h in delays if h is not None}
        return q

    enclosing = frozenset(c for c, _ in delays)
    if isinstance(expr, Const | Var | AnyNode | Node):
        chain = _chain(expr, b, enclosing, loc)
        return chain[0], chain[-1]
    if isinstance(expr, Link):
        first, second = _chain(expr.src, b, enclosing, loc), _chain(expr.dst, b, enclosing, loc)
        b.add(Transition(first[-1], second[0]))
        # between the two events the link is half read: middle locations
        b.middles.update(first[_event_index(expr.src) + 1:])
        b.middles.update(second[:_event_index(expr.dst) + 1])
        return first[0], second[-1]
    if isinstance(expr, Concat):
        ends = [_fragment(p, b, delays) for p in expr.parts]
        for (_, f), (s, _) in zip(ends, ends[1:], strict=False):
            b.add(Transition(f, s))
        return ends[0][0], ends[-1][1]
    if isinstance(expr, Or):
        s, f = loc(), loc()
        for part in expr.parts:
            ps, pf = _fragment(part, b, delays)
            b.add(Transition(s, ps))
            b.add(Transition(pf, f))
        return s, f
    if isinstance(expr, Repeat):
        return _repeat(expr, b, delays, loc)
    if isinstance(expr, Delay):
        clock = b.clock()
        s, f = loc(), loc()
        bs, bf = _fragment(expr.body, b, (*delays, (clock, expr.high_us)))
        b.add(Transition(s, bs, pend=frozenset({clock})))
        b.add(Transition(bf, f, guard=((clock, expr.low_us, expr.high_us),),
                         stop=frozenset({clock})))
        return s, f
    if isinstance(expr, Alloc):
        s = loc()
        bs, bf = _fragment(expr.body, b, delays)
        b.add(Transition(s, bs, alloc=frozenset(expr.names)))
        return s, bf
    if isinstance(expr, Release):
        f = loc()
        bs, bf = _fragment(expr.body, b, delays)
        b.add(Transition(bf, f, release=frozenset(expr.names)))
        return bs, f
    if isinstance(expr, Shuffle):
        result = _fragment(expr.parts[0], b, delays)
        for part in expr.parts[1:]:
            result = _shuffle(result, part, b, delays)
        return result
    raise NuPatternError(f"cannot compile {expr!r}")


def _chain(expr: Expr, b: _Builder, enclosing: frozenset[int], loc) -> list[int]:
    """One end of a link -- a node, allocated before or released after it -- as a chain
    of locations: ``[entry, ..., before the event, after the event, ..., exit]``."""
    if isinstance(expr, Const | Var | AnyNode | Node):
        node = expr.node if isinstance(expr, Node) else expr
        s, f = loc(), loc()
        b.add(Transition(s, f, node, start=enclosing))
        return [s, f]
    if isinstance(expr, Alloc):
        s = loc()
        rest = _chain(expr.body, b, enclosing, loc)
        b.add(Transition(s, rest[0], alloc=frozenset(expr.names)))
        return [s, *rest]
    if isinstance(expr, Release):
        rest = _chain(expr.body, b, enclosing, loc)
        f = loc()
        b.add(Transition(rest[-1], f, release=frozenset(expr.names)))
        return [*rest, f]
    raise NuPatternError(f"each end of a link is one node (a constant, a variable or @, with "
                         f"# or ! on it), not {expr.text()!r}")


def _event_index(expr: Expr) -> int:
    """Where the event is in :func:`_chain`'s list: the location before it."""
    return 1 + _event_index(expr.body) if isinstance(expr, Alloc) else (
        _event_index(expr.body) if isinstance(expr, Release) else 0)


def _repeat(expr: Repeat, b: _Builder, delays, loc) -> tuple[int, int]:
    s, f = loc(), loc()
    bs, bf = _fragment(expr.body, b, delays)
    b.add(Transition(s, bs))
    b.add(Transition(bf, f))
    if expr.least == 0:
        b.add(Transition(s, f))
    if expr.most is None:
        b.add(Transition(bf, bs))
    return s, f


#: Which side of a shuffle read the last event: neither since the shuffle's entry, the
#: left, the right (see :func:`_shuffle`).
ENTRY, LEFT, RIGHT = 0, 1, 2


def _shuffle(left: tuple[int, int], part: Expr, b: _Builder, delays) -> tuple[int, int]:
    """The product of the fragment ``left`` (already in ``b``) and ``part``, as new
    locations of ``b``: each side moves alone, and a side inside a link blocks every move
    of the other, events and memory operations alike (a link is atomic). ``left``'s own
    locations are left unreachable (pruned later).

    A side's clock operations (a delay's start, its closing guard) act at the time of the
    event that side read last -- or at the shuffle's entry when it has read none -- never
    at a later event of the other side. The engines run an ε-move at the time of the event
    the match read last, so a product location also records which side read that event
    (:data:`ENTRY`, :data:`LEFT`, :data:`RIGHT`) and a side's timed ε-moves are enabled
    only where it did or neither did. The record is kept only for a side that has timed
    ε-moves: a shuffle of parts without delays has the plain product's locations."""
    sub = _Builder(b._clocks)
    right = _fragment(part, sub, delays)
    # each side without its plain ε-moves first: the product multiplies locations
    left_out = _timed_first(_contracted(_reachable_out(b.transitions, left[0]), left[1]), b)
    right_out = _timed_first(_contracted(_reachable_out(sub.transitions, right[0]), right[1]),
                             sub)
    left_timed = any(map(_timed, (t for ts in left_out.values() for t in ts)))
    right_timed = any(map(_timed, (t for ts in right_out.values() for t in ts)))

    def kept(who: int) -> int:
        """``who`` as far as it matters: whether each side with timed moves may run them."""
        if left_timed and right_timed:
            return who
        if left_timed:
            return ENTRY if who != RIGHT else RIGHT
        if right_timed:
            return ENTRY if who != LEFT else LEFT
        return ENTRY

    pairs: dict[tuple[int, int, int], int] = {}
    todo: list[tuple[int, int, int]] = []

    def pair(p: tuple[int, int, int]) -> int:
        if p not in pairs:
            if b.count >= MAX_LOCATIONS:
                raise NuPatternError(
                    f"the shuffle {part.text()[:80]!r} needs more than {MAX_LOCATIONS:,} "
                    "locations (a shuffle multiplies the locations of its parts): shuffle "
                    "fewer parts, or write some of them in sequence")
            q = pairs[p] = b.location(f"{b.origin[p[0]]} % {sub.origin[p[1]]}")
            b.invariants[q] = b.invariants.get(p[0], set()) | sub.invariants.get(p[1], set())
            if p[0] in b.middles or p[1] in sub.middles:
                b.middles.add(q)
            todo.append(p)
        return pairs[p]

    entry = pair((left[0], right[0], ENTRY))
    moves: list[Transition] = []
    while todo:
        q1, q2, who = p = todo.pop()
        for t in left_out.get(q1, ()) if q2 not in sub.middles else ():
            if not _timed(t) or who != RIGHT:
                after = kept(who if t.label is None else LEFT)
                moves.append(t.moved(pairs[p], pair((t.target, q2, after))))
        for t in right_out.get(q2, ()) if q1 not in b.middles else ():
            if not _timed(t) or who != LEFT:
                after = kept(who if t.label is None else RIGHT)
                moves.append(t.moved(pairs[p], pair((q1, t.target, after))))
    for t in moves:
        b.add(t)
    ends = [q for (q1, q2, _), q in pairs.items() if (q1, q2) == (left[1], right[1])]
    if len(ends) == 1:
        return entry, ends[0]
    exit_ = b.location(b.origin[ends[0]])  # one exit, whichever side read last
    b.invariants[exit_] = set(b.invariants[ends[0]])
    for q in ends:
        b.add(Transition(q, exit_))
    return entry, exit_


def _memory(t: Transition) -> bool:
    """An ε-transition that only allocates or releases variables."""
    return (t.label is None and bool(t.alloc or t.release)
            and not (t.guard or t.pend or t.stop))


def _timed_first(out: dict[int, list[Transition]], b: _Builder) -> dict[int, list[Transition]]:
    """``out`` with every memory ε-move that a clock ε-move follows also run after it.

    The product runs a side's clock ε-moves only right after that side's own event (or at
    the shuffle's entry), so a side that must hold a memory operation back while the other
    side reads -- ``<a ~> X!>[0, 0] % (#X ~> a . b)``: the release must wait until the
    right side has read ``X`` -- would otherwise lose its delay's close (or a delay's
    start) for good. The two commute: "the allocation of the variables in set ν is
    performed before checking the consistency between the input and transition label, and
    before releasing the variables in the set ν̄" (Definition 7) touches memory only, a
    guard, start or stop touches clocks only, and an ε-move reads no time of its own. So
    for ``q1 --memory--> q2 --clock--> q3`` a new location ``q'`` gets
    ``q1 --clock--> q' --memory--> q3``: the clock move at the side's own event, the memory
    move left free to wait. Until nothing new: a chain of memory moves commutes one by
    one. Locations inside a link are left alone (no ε-move of a side may wait there)."""
    out = {q: list(ts) for q, ts in out.items()}
    made: dict[tuple, int] = {}
    changed = True
    while changed:
        changed = False
        for q1 in [q for q in out if q not in b.middles]:
            for m in [t for t in out[q1] if _memory(t) and t.target not in b.middles]:
                for g in [t for t in out.get(m.target, ()) if _timed(t)]:
                    key = (q1, m.alloc, m.release, g.target, g.guard, g.pend, g.stop)
                    if key not in made:
                        q = made[key] = b.location(b.origin.get(g.target, ""))
                        b.invariants[q] = set(b.invariants.get(g.target, set()))
                        out[q1].append(g.moved(q1, q))
                        out[q] = [m.moved(q, g.target)]
                        changed = True
    return out


def _timed(t: Transition) -> bool:
    """An ε-transition that starts, checks or stops a clock."""
    return t.label is None and bool(t.guard or t.pend or t.stop)


def _plain(t: Transition) -> bool:
    """An ε-transition that does nothing: no memory operation, guard or clock."""
    return t.label is None and not (t.alloc or t.release or t.guard or t.pend or t.stop)


def _contracted(out: dict[int, list[Transition]], end: int) -> dict[int, list[Transition]]:
    """The same fragment with its plain ε-transitions followed ahead of time: each location
    gets the other transitions of every location its plain ε-moves reach (plain ε-moves stay
    inside one delay and one link, so they pass no invariant, guard or atomicity boundary),
    and keeps one plain ε-move to the fragment's exit where it reached it. A shuffle of
    ``k`` parts multiplies their locations, so this is what keeps a 4-clique's product
    small."""
    contracted: dict[int, list[Transition]] = {}
    for q in out:
        reach, todo = {q}, [q]
        while todo:
            for t in out.get(todo.pop(), ()):
                if _plain(t) and t.target not in reach:
                    reach.add(t.target)
                    todo.append(t.target)
        seen: set[tuple] = set()
        moves = []
        for p in sorted(reach):
            for t in out.get(p, ()):
                if _plain(t):
                    continue
                key = (t.target, t.label, t.alloc, t.release, t.guard, t.pend, t.start, t.stop)
                if key not in seen:
                    seen.add(key)
                    moves.append(t.moved(q, t.target))
        if end in reach and end != q:
            moves.append(Transition(q, end))
        contracted[q] = moves
    return contracted


def _reachable_out(transitions: list[Transition], start: int) -> dict[int, list[Transition]]:
    """The transitions out of the locations reachable from ``start``."""
    out: dict[int, list[Transition]] = {}
    for t in transitions:
        out.setdefault(t.source, []).append(t)
    reach, todo = {start}, [start]
    while todo:
        for t in out.get(todo.pop(), ()):
            if t.target not in reach:
                reach.add(t.target)
                todo.append(t.target)
    return {q: ts for q, ts in out.items() if q in reach}


def _from_file(pattern: AutomatonPattern) -> Automaton:
    """The automaton of an automaton file, as written, with MaTiNA's checks: a transition
    also checks its origin's invariant and its destination's (less the clocks it resets;
    one that can never hold drops the transition). With clocks, an entry location comes
    last, its ε-transition starting them all: at 0 anchored, in search mode at the first
    event read (every event transition starts the clocks not yet running)."""
    states = pattern.states
    every = frozenset(range(len(pattern.clock_names)))
    kept = []
    for t in pattern.transitions:
        # a clock reset here reads 0 on arrival: only a lower bound above 0 matters
        if any(c in t.reset and low > 0 for c, low, _ in states[t.target].invariant):
            continue
        guard = _conjunction([*t.guard, *states[t.source].invariant,
                              *(x for x in states[t.target].invariant if x[0] not in t.reset)])
        if guard is not None:
            kept.append(Transition(t.source, t.target, t.label, t.alloc, t.free, guard,
                                   pend=t.reset,
                                   start=every if t.label is not None else frozenset()))
    initial = next(q for q, s in enumerate(states) if s.initial)
    entry = initial
    if every:
        entry = len(states)
        if all(low == 0 for _, low, _ in states[initial].invariant):  # clocks start at 0
            kept.append(Transition(entry, initial, pend=every))
    return Automaton(
        locations=len(states) + (entry != initial), initial=entry,
        finals=frozenset(q for q, s in enumerate(states) if s.final),
        transitions=tuple(kept),
        invariants={q: tuple(sorted((c, h) for c, _, h in s.invariant if h is not None))
                    for q, s in enumerate(states) if any(h is not None for *_, h in s.invariant)},
        middles=frozenset(), clocks=len(every), variables=tuple(sorted(pattern.variables())),
        constants=frozenset(pattern.constants()),
        origin={q: s.name for q, s in enumerate(states)})


def _conjunction(conditions: list[Condition]) -> tuple[Condition, ...] | None:
    """The conditions merged per clock (None: no value satisfies them)."""
    bounds: dict[int, tuple[int, int | None]] = {}
    for clock, low, high in conditions:
        old_low, old_high = bounds.get(clock, (0, None))
        bounds[clock] = (max(low, old_low), high if old_high is None else
                         old_high if high is None else min(high, old_high))
    merged = []
    for clock, (low, high) in sorted(bounds.items()):
        if high is not None and low > high:
            return None
        if low or high is not None:
            merged.append((clock, low, high))
    return tuple(merged)


def event_transitions(automaton: Automaton) -> Iterator[Transition]:
    return (t for t in automaton.transitions if t.label is not None)


#: Bits per variable of :func:`variable_states`: in write mode, holding a node, has held one.
WRITING, HOLDING, HELD = 1, 2, 4


def variable_states(automaton: Automaton) -> dict[int, set[int]] | str:
    """Per location, the variable states runs reach it with (three bits per variable,
    in the order of ``automaton.variables``: :data:`WRITING`, :data:`HOLDING`,
    :data:`HELD`), clocks ignored -- an over-approximation; or the name of a variable some
    run reads a fresh node into after it held one."""
    out = automaton.outgoing()
    seen = {(automaton.initial, 0)}
    todo = [(automaton.initial, 0)]
    while todo:
        q, state = todo.pop()
        for t in out[q]:
            after = variable_step(automaton, state, t)
            if isinstance(after, str):
                return after
            if after is not None and (t.target, after) not in seen:
                seen.add((t.target, after))
                todo.append((t.target, after))
    found: dict[int, set[int]] = {}
    for q, state in seen:
        found.setdefault(q, set()).add(state)
    return found


def variable_step(automaton: Automaton, state: int, transition: Transition, *,
                  sets: bool = False) -> int | str | None:
    """The variable state after ``transition`` (None: never enabled; a variable's name:
    it reads a fresh node into that variable after it held one -- unless ``sets``, where
    the variable then holds a set of nodes and the read goes on)."""
    index = {name: i for i, name in enumerate(automaton.variables)}
    for name in transition.alloc:
        state |= WRITING << (3 * index[name])
    label = transition.label
    if isinstance(label, Var):
        shift = 3 * index[label.name]
        if state >> shift & WRITING:
            if state >> shift & HELD and not sets:
                return label.name
            state = (state & ~(WRITING << shift)) | ((HOLDING | HELD) << shift)
        elif not state >> shift & HOLDING:
            return None  # never enabled: reads a node the variable does not hold
    for name in transition.release:
        state &= ~((WRITING | HOLDING) << (3 * index[name]))
    return state


def unallocated_reads(automaton: Automaton) -> list[str]:
    """The variables some reachable transition reads where no run has allocated them
    (nor left them holding a node): that transition can never be taken. Clocks ignored,
    as in :func:`variable_states`."""
    out = automaton.outgoing()
    seen = {(automaton.initial, 0)}
    todo = [(automaton.initial, 0)]
    at: dict[int, set[int]] = {}
    while todo:
        q, state = todo.pop()
        at.setdefault(q, set()).add(state)
        for t in out[q]:
            after = variable_step(automaton, state, t, sets=True)
            if after is not None and (t.target, after) not in seen:
                seen.add((t.target, after))
                todo.append((t.target, after))
    never = {t.label.name for t in event_transitions(automaton)
             if isinstance(t.label, Var) and t.source in at
             and all(variable_step(automaton, s, t, sets=True) is None for s in at[t.source])}
    return sorted(never)

