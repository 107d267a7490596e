"""A brute-force oracle for timed ν-expressions, search and anchored mode, written from
the definitions and sharing no code with the automaton or the token game.

Every subsequence of the links (in stream order; anchored: every prefix of the stream) is
tried whole against the expression by *rewriting the expression*: ε-moves fire
allocations (write mode), releases, the choices of ``|`` and repetitions, and the ends of
delays; a link is consumed by the link at the front of the expression (both of its ends
read at once: links are atomic), or by one part of a shuffle.

Time follows the paper's construction, where a delay's clock is reset by the event
transition before it and a shuffle is the product of its parts' automata: a delay counts
from the last link *its own part of the shuffle* read before it -- from the shuffle's entry
when that part has read nothing yet, and, when the match read nothing before it, from time
0 anchored or from the delay's own first link in search mode -- to its last link. Each
part of a shuffle being rewritten carries the time of the link it read last
(:class:`Interleaved`), so an ε-move never borrows a time from a link another part read. Reading a node
follows Definition 7: a constant reads itself; a variable reads no constant of the
pattern, in write mode only a node no variable holds (then read mode), in read mode only a
node it holds. A subsequence matches when the expression can rewrite to nothing; each
match is ``(first time, last time, bindings)``, the bindings being every node each
variable held. Exponential: for streams of a dozen links.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace

from graphcep.patterns.nu import (
    Alloc,
    AnyNode,
    Concat,
    Const,
    Delay,
    Link,
    NuPattern,
    Or,
    Release,
    Repeat,
    Shuffle,
    Var,
)


@dataclass(frozen=True)
class Done:
    """The empty expression: everything matched."""


@dataclass(frozen=True)
class Running:
    """A delay being matched: when its time started (the link before it, or its own
    first link; None until known) and its last link's time (None: no link yet)."""

    body: object
    low: int
    high: int | None
    first: int | None = None
    last: int | None = None


@dataclass(frozen=True)
class Interleaved:
    """A shuffle being matched: its parts (:data:`DONE` once finished) and, per part, the
    time of the link it read last (at first the time its context had read last)."""

    parts: tuple
    lasts: tuple


@dataclass(frozen=True)
class State:
    memory: tuple  # per variable: (frozenset of nodes, write mode)
    held: tuple  # per variable: every node it held


DONE = Done()


class Oracle:
    def __init__(self, pattern: NuPattern) -> None:
        self.expr = pattern.expr
        self.names = tuple(sorted(pattern.variables()))
        self.constants = pattern.constants()

    def matches(self, links: list[tuple[int, str, str]],
                sizes: Iterable[int] | None = None) -> set[tuple]:
        """Every ``(first_t, last_t, bindings)`` of a subsequence of ``links`` (stream
        order) that the expression matches whole; ``sizes``: only subsequences of these
        lengths (an expression without choices or repetitions reads a fixed number of
        links).

        The subsequences are walked depth first, each extending one that is its prefix:
        a prefix's rewritings are worked out once for all its extensions, and a prefix
        the expression cannot read rules out every extension of it.
        """
        lengths = set(sizes if sizes is not None else range(1, len(links) + 1))
        found: set[tuple] = set()

        def extend(after: int, first: int | None, current: set, length: int) -> None:
            prev = None if first is None else links[after - 1][0]
            for i in range(after, len(links)):
                t, u, v = links[i]
                read = self._step(current, t, u, v, prev)
                if not read:
                    continue
                start = t if first is None else first
                if length + 1 in lengths:
                    found.update((start, t, b) for b in self._accepted(read))
                if length + 1 < max(lengths, default=0):
                    extend(i + 1, start, read, length + 1)

        extend(0, None, self._closure({(self.expr, self._empty())}, None), 0)
        return found

    def anchored_matches(self, links: list[tuple[int, str, str]]) -> list[tuple]:
        """Anchored mode: one attempt from time 0 reading every link; per prefix of the
        stream the expression matches whole, ``(first link's time, prefix's last time,
        bindings)`` once per distinct bindings, in stream order."""
        found: list[tuple] = []
        current = self._closure({(self.expr, self._empty())}, 0)
        prev = 0
        for t, u, v in links:
            current = self._step(current, t, u, v, prev)
            prev = t
            found += [(links[0][0], t, b) for b in sorted(self._accepted(current))]
        return found

    def whole(self, links: list[tuple[int, str, str]], anchored: bool = False) -> set[tuple]:
        """The ``(first_t, last_t, bindings)`` of reading exactly ``links``, every one,
        in order (a witness's links; anchored, the stream's prefix read from time 0)."""
        if not links:
            return set()
        prev = 0 if anchored else None
        current = self._closure({(self.expr, self._empty())}, prev)
        for t, u, v in links:
            current = self._step(current, t, u, v, prev)
            prev = t
        return {(links[0][0], links[-1][0], b) for b in self._accepted(current)}

    def _empty(self) -> State:
        return State(tuple((frozenset(), False) for _ in self.names),
                     tuple(frozenset() for _ in self.names))

    def _step(self, current: set, t: int, u: str, v: str, prev: int | None) -> set:
        """The rewritings after reading the link ``(t, u, v)``; ``prev``: the time of the
        link read before it (None: none)."""
        stepped = set()
        for expr, state in current:
            stepped |= self._consume(expr, state, t, u, v, prev)
        return self._closure(stepped, t)

    def _accepted(self, rewritten: set) -> set[tuple]:
        """The bindings of the rewritings that matched whole."""
        return {tuple((n, "|".join(sorted(held)))
                      for n, held in zip(self.names, state.held, strict=True) if held)
                for expr, state in rewritten if expr == DONE}

    # -- ε-moves ----------------------------------------------------------------------

    def _closure(self, pairs: set, prev: int | None) -> set:
        """Every rewriting by ε-moves; ``prev`` is the time of the link read last (None:
        none yet)."""
        seen, todo = set(pairs), list(pairs)
        while todo:
            expr, state = todo.pop()
            for moved in self._epsilon(expr, state, prev):
                if moved not in seen:
                    seen.add(moved)
                    todo.append(moved)
        return seen

    def _epsilon(self, expr, state: State, prev: int | None) -> list:
        """The ε-rewritings of ``expr``; ``prev``: the time of the link its part of the
        match read last, where a delay entered now starts counting (None: none yet)."""
        if isinstance(expr, Link):
            allocs, node, releases = _parts(expr.src)
            if not allocs:
                return []
            return [(Link(_rebuild((), node, releases), expr.dst), self._alloc(state, allocs))]
        if isinstance(expr, Alloc):
            return [(expr.body, self._alloc(state, expr.names))]
        if isinstance(expr, Release):
            if expr.body == DONE:
                return [(DONE, self._release(state, expr.names))]
            return [(replace(expr, body=b), s)
                    for b, s in self._epsilon(expr.body, state, prev)]
        if isinstance(expr, Or):
            return [(p, state) for p in expr.parts]
        if isinstance(expr, Concat):
            head, rest = expr.parts[0], expr.parts[1:]
            tail = rest[0] if len(rest) == 1 else Concat(rest)
            if head == DONE:
                return [(tail, state)]
            return [(Concat((h, *rest)), s) for h, s in self._epsilon(head, state, prev)]
        if isinstance(expr, Shuffle):  # entered: each part counts from here on its own
            return self._epsilon(Interleaved(expr.parts, (prev,) * len(expr.parts)), state,
                                 prev)
        if isinstance(expr, Interleaved):
            if all(part == DONE for part in expr.parts):
                return [(DONE, state)]
            return [(replace(expr, parts=expr.parts[:i] + (p,) + expr.parts[i + 1:]), s)
                    for i, (part, last) in enumerate(zip(expr.parts, expr.lasts, strict=True))
                    for p, s in self._epsilon(part, state, last)]
        if isinstance(expr, Repeat):
            out = []
            if expr.least == 0:
                out.append((DONE, state))
            if expr.most is None or expr.most > 0:
                again = Repeat(expr.body, max(expr.least - 1, 0),
                               None if expr.most is None else expr.most - 1)
                out.append((Concat((expr.body, again)) if again.most != 0 else expr.body,
                            state))
            return out
        if isinstance(expr, Delay):  # counts from its part's previous link (or its own first)
            return [(Running(expr.body, expr.low_us, expr.high_us, prev), state)]
        if isinstance(expr, Running):
            if expr.body == DONE:
                duration = 0 if expr.last is None else expr.last - expr.first
                ok = expr.low <= duration and (expr.high is None or duration <= expr.high)
                return [(DONE, state)] if ok else []
            return [(replace(expr, body=b), s)
                    for b, s in self._epsilon(expr.body, state, prev)]
        return []

    # -- reading a link ---------------------------------------------------------------

    def _consume(self, expr, state: State, t: int, u: str, v: str, prev: int | None) -> set:
        """The rewritings of ``expr`` reading the link ``(t, u, v)``; ``prev`` as in
        :meth:`_epsilon`."""
        if isinstance(expr, Link):
            # the source's allocations came before the link (an ε-move); its releases and
            # the target's allocations happen inside it; the target's releases after it
            src_allocs, src, src_releases = _parts(expr.src)
            if src_allocs:
                return set()
            dst_allocs, dst, dst_releases = _parts(expr.dst)
            after = Release(DONE, dst_releases) if dst_releases else DONE
            out = set()
            for s1 in self._read(src, state, u):
                s1 = self._alloc(self._release(s1, src_releases), dst_allocs)
                out |= {(after, s2) for s2 in self._read(dst, s1, v)}
            return out
        if isinstance(expr, Concat):
            head, rest = expr.parts[0], expr.parts[1:]
            return {(Concat((h, *rest)), s)
                    for h, s in self._consume(head, state, t, u, v, prev)}
        if isinstance(expr, Shuffle):
            return self._consume(Interleaved(expr.parts, (prev,) * len(expr.parts)), state,
                                 t, u, v, prev)
        if isinstance(expr, Interleaved):  # one part reads the link: its last is now t
            out = set()
            for i, (part, last) in enumerate(zip(expr.parts, expr.lasts, strict=True)):
                out |= {(Interleaved(expr.parts[:i] + (p,) + expr.parts[i + 1:],
                                     expr.lasts[:i] + (t,) + expr.lasts[i + 1:]), s)
                        for p, s in self._consume(part, state, t, u, v, last)}
            return out
        if isinstance(expr, Running):
            first = t if expr.first is None else expr.first
            if expr.high is not None and t - first > expr.high:
                return set()
            return {(Running(b, expr.low, expr.high, first, t), s)
                    for b, s in self._consume(expr.body, state, t, u, v, prev)}
        if isinstance(expr, Release):
            return {(replace(expr, body=b), s)
                    for b, s in self._consume(expr.body, state, t, u, v, prev)}
        return set()

    def _read(self, node_term, state: State, node: str) -> list[State]:
        """A node of the pattern reads the stream node ``node`` (Definition 7)."""
        if isinstance(node_term, Const):
            return [state] if node == node_term.name else []
        if isinstance(node_term, AnyNode):
            return [state]
        assert isinstance(node_term, Var)
        if node in self.constants:
            return []
        i = self.names.index(node_term.name)
        values, writing = state.memory[i]
        if writing and any(node in held for held, _ in state.memory):
            return []
        if not writing and node not in values:
            return []
        memory = state.memory[:i] + ((values | {node}, False),) + state.memory[i + 1:]
        held = state.held[:i] + (state.held[i] | {node},) + state.held[i + 1:]
        return [State(memory, held)]

    def _alloc(self, state: State, names) -> State:
        return State(tuple((vals, True) if n in names else (vals, w)
                           for n, (vals, w) in zip(self.names, state.memory, strict=True)),
                     state.held)

    def _release(self, state: State, names) -> State:
        return State(tuple((frozenset(), False) if n in names else m
                           for n, m in zip(self.names, state.memory, strict=True)),
                     state.held)


def _parts(end) -> tuple[tuple[str, ...], object, tuple[str, ...]]:
    """A link end as (variables allocated before it, its node, variables released after)."""
    if isinstance(end, Alloc):
        allocs, node, releases = _parts(end.body)
        return (*end.names, *allocs), node, releases
    if isinstance(end, Release):
        allocs, node, releases = _parts(end.body)
        return allocs, node, (*releases, *end.names)
    return (), end, ()


def _rebuild(allocs, node, releases):
    end = Release(node, tuple(releases)) if releases else node
    return Alloc(tuple(allocs), end) if allocs else end
