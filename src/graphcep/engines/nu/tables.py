"""A timed ν-automaton as the flat integer tables the compiled token game reads.

The compiled game (:mod:`graphcep.engines.nu.kernel`) keeps each token as one row of
integers -- location, first and last time, write-mode bits, clock starts, one node per
variable, the node each variable held, and the links of one witness -- so that copying,
hashing and comparing a token are loops over a short row. That needs three things of the
automaton, checked here before anything runs (:func:`ineligibility`):

- **one node per variable**: no match ever reads a fresh node into a variable that has
  already held one (the paper's memory is a *set* per variable: ``(#X)*`` without a
  release, or ``(X! ~> #X)*``, collects several). Checked by exploring every location
  with, per variable, whether it is in write mode, holds a node, has held one -- an
  over-approximation that ignores clocks, so a pattern it accepts can never collect two;
- **a bounded witness**: no loop of the automaton reads an event, so a match reads at
  most ``links`` links (the longest path, in links);
- at most 62 clocks and 62 variables (one bit each in a 64-bit word);
- guards and clock resets on ε-transitions only (as the expressions compile; an
  automaton file may put them on events).

Patterns that fail any of these (the paper's Fig. 2 path, an alternation ``(...)+``, its
Fig. 6 doubling) run in the interpreted game (:class:`graphcep.engines.nu.engine.NuEngine`),
whose results the compiled one equals wherever both run.

Example
-------
>>> from graphcep.lang.nu import parse_nu
>>> from graphcep.engines.nu.automaton import compile_pattern
>>> tables = kernel_tables(compile_pattern(parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]")))
>>> tables.links, tables.variables, tables.width
(3, ('X', 'Y', 'Z'), 30)
>>> ineligibility(compile_pattern(parse_nu("a ~> #X . (X! ~> #X)* . X! ~> b")))
'a loop of the automaton reads links, so a match has no bound on its length'
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from graphcep.engines.nu.automaton import Automaton, Transition, variable_states
from graphcep.engines.nu.closing import NO_JOIN, ClosingJoin, closing_join
from graphcep.patterns.nu import AnyNode, Const, Var

#: A clock that does not run, or a time not known yet (no link read).
NONE = -(1 << 62)
#: No upper bound (a guard without one; a token no invariant limits).
FAR = 1 << 62
KIND_CONST, KIND_ANY, KIND_VAR = 0, 1, 2
#: Fields of one witness link in a token row: time, source, target, arrival number, and
#: the labels of the two pattern events that read it.
LINK_FIELDS = 6
MAX_BITS = 62

# the order of the arrays in KernelTables.arrays (the kernel indexes the tuple with these)
(EV_PTR, EV_TARGET, EV_KIND, EV_ARG, EV_ALLOC, EV_RELEASE, EV_START,
 EP_PTR, EP_TARGET, EP_ALLOC, EP_RELEASE, EP_PEND, EP_STOP, EP_GPTR, G_CLOCK, G_LOW, G_HIGH,
 INV_PTR, INV_CLOCK, INV_HIGH, MIDDLE, FINAL, HAS_EV, SHAPE,
 NX_PTR, NX_KIND, NX_ARG, NX_FRESH, KEYS_AT, JOIN) = range(30)
# SHAPE holds: clocks, variables, witness links, constants, identity width, row width,
# and the most index keys one token may have (KEYS_AT: per location)
SH_CLOCKS, SH_VARS, SH_LINKS, SH_CONSTS, SH_IDENTITY, SH_WIDTH, SH_NEXT = range(7)
# JOIN holds the closing join (:mod:`graphcep.engines.nu.closing`): whether one runs, the
# locations of the joined tokens and of their products, the sources of the last-but-one
# link's ends, the joined token's variables the closing link's ends equal, the clocks the
# last-but-one link starts
(J_ACTIVE, J_BEFORE, J_LAST, J_FIRST_SRC, J_FIRST_ARG, J_SECOND_SRC, J_SECOND_ARG, J_KEY0,
 J_KEY1, J_STARTS) = range(10)


@dataclass(frozen=True)
class KernelTables:
    """The automaton for the compiled game: ``arrays``, its columns (in the order of the
    ``EV_*``/``EP_*``/... constants) one after another in one int64 array that begins
    with their offsets (column ``k``'s item ``i`` is ``arrays[arrays[k] + i]``), and how to
    read a token row back."""

    arrays: np.ndarray
    clocks: int
    variables: tuple[str, ...]
    constants: tuple[str, ...]  # node ids 0 .. len-1, in this order
    labels: tuple[str, ...]  # text of each event transition's label, by its number
    links: int  # the most links a match reads
    join: ClosingJoin | None = None  # where the last link is joined, not stored

    @property
    def identity(self) -> int:
        """Row fields that make a token what it is (equal tokens are one)."""
        return 4 + self.clocks + 2 * len(self.variables)

    @property
    def width(self) -> int:
        return self.identity + 1 + LINK_FIELDS * self.links


def ineligibility(automaton: Automaton) -> str | None:
    """Why the compiled game cannot run ``automaton`` (None: it can)."""
    if automaton.clocks > MAX_BITS or len(automaton.variables) > MAX_BITS:
        return f"more than {MAX_BITS} clocks or variables"
    if any(t.label is not None and (t.guard or t.pend) for t in automaton.transitions):
        return "an event transition has a guard or resets a clock (an automaton file)"
    if _longest_in_links(automaton) is None:
        return "a loop of the automaton reads links, so a match has no bound on its length"
    twice = _variable_held_twice(automaton)
    if twice is not None:
        return f"variable {twice} may hold more than one node in a match"
    return None


_REMEMBERED: dict[tuple[int, bool], tuple[Automaton, KernelTables]] = {}


def kernel_tables(automaton: Automaton, *, join: bool = True) -> KernelTables:
    """The tables of an automaton :func:`ineligibility` accepts (ValueError otherwise);
    with ``join``, the closing join where the automaton allows one. Built once per
    automaton (the last 64 are remembered; tables are only read)."""
    hit = _REMEMBERED.get((id(automaton), join))
    if hit is not None and hit[0] is automaton:
        return hit[1]
    tables = _kernel_tables(automaton, join)
    if len(_REMEMBERED) >= 64:
        _REMEMBERED.clear()
    # the automaton held: its id stays its own
    _REMEMBERED[(id(automaton), join)] = (automaton, tables)
    return tables


def _kernel_tables(automaton: Automaton, join: bool) -> KernelTables:
    why = ineligibility(automaton)
    if why is not None:
        raise ValueError(f"the compiled token game cannot run this pattern: {why}")
    variables = automaton.variables
    var_bit = {name: 1 << i for i, name in enumerate(variables)}
    constants = tuple(sorted(automaton.constants))
    const_id = {name: i for i, name in enumerate(constants)}
    out = automaton.outgoing()

    def mask(names) -> int:
        return sum(var_bit[n] for n in names)

    def clock_mask(clocks) -> int:
        return sum(1 << c for c in clocks)

    ev: list[list[int]] = [[] for _ in range(6)]  # target kind arg alloc release start
    ev_ptr, labels = [0], []
    ep: list[list[int]] = [[] for _ in range(6)]  # target alloc release pend stop gptr
    ep_ptr, guards = [0], [[], [], []]
    for q in range(automaton.locations):
        for t in out[q]:
            if t.label is not None:
                kind, arg = _label_code(t, const_id, variables)
                for column, value in zip(ev, (t.target, kind, arg, mask(t.alloc),
                                              mask(t.release), clock_mask(t.start)),
                                          strict=True):
                    column.append(value)
                labels.append(t.label.text())
            else:
                ep[5].append(len(guards[0]))
                for clock, low, high in t.guard:
                    guards[0].append(clock)
                    guards[1].append(low)
                    guards[2].append(FAR if high is None else high)
                for column, value in zip(ep[:5], (t.target, mask(t.alloc), mask(t.release),
                                                  clock_mask(t.pend), clock_mask(t.stop)),
                                         strict=True):
                    column.append(value)
        ev_ptr.append(len(ev[0]))
        ep_ptr.append(len(ep[0]))
    ep[5].append(len(guards[0]))
    inv_ptr, inv_clock, inv_high = [0], [], []
    for q in range(automaton.locations):
        for clock, high in automaton.invariants.get(q, ()):
            inv_clock.append(clock)
            inv_high.append(high)
        inv_ptr.append(len(inv_clock))
    locations = range(automaton.locations)
    links = _longest_in_links(automaton)
    assert links is not None
    links = max(links, 1)
    next_reads = _next_reads(automaton, const_id, variables)
    keys_at = [sum(next_reads[0][t + 1] - next_reads[0][t]
                   for t in range(ev_ptr[q], ev_ptr[q + 1])) for q in locations]
    shape = [automaton.clocks, len(variables), links, len(constants),
             4 + automaton.clocks + 2 * len(variables), 0, max(1, *keys_at)]
    shape[SH_WIDTH] = shape[SH_IDENTITY] + 1 + LINK_FIELDS * links
    closing = closing_join(automaton, const_id) if join else None
    columns = [ev_ptr, *ev, ep_ptr, *ep[:5], ep[5], *guards, inv_ptr, inv_clock, inv_high,
               [q in automaton.middles for q in locations],
               [q in automaton.finals for q in locations],
               [bool(ev_ptr[q + 1] - ev_ptr[q]) for q in locations], shape, *next_reads,
               keys_at, NO_JOIN if closing is None else closing.column()]
    # one flat array, the columns' offsets first: a numba function called with a tuple of
    # arrays takes a reference on each of them per call, which cost more than the work
    offsets, at = [], len(columns)
    for column in columns:
        offsets.append(at)
        at += len(column)
    flat = np.asarray(offsets + [int(x) for column in columns for x in column], dtype=np.int64)
    return KernelTables(flat, automaton.clocks, variables, constants, tuple(labels), links,
                        closing)


def _next_reads(automaton: Automaton, const_id: dict[str, int], variables: tuple[str, ...]
                ) -> list[list[int]]:
    """Per event transition (in table order), the events a link's second end may read
    after it: the labels of the event transitions its ε-moves reach (guards ignored), each
    with whether a variable it reads may be allocated on the way (then any fresh node may
    come). The index keys a stored token by both ends of the link it waits for."""
    out = automaton.outgoing()
    ptr, kind, arg, fresh = [0], [], [], []
    for q in range(automaton.locations):
        for t in out[q]:
            if t.label is None:
                continue
            reach, todo, allocated = {t.target}, [t.target], set(t.alloc)
            while todo:
                for e in out[todo.pop()]:
                    if e.label is None:
                        allocated |= e.alloc
                        if e.target not in reach:
                            reach.add(e.target)
                            todo.append(e.target)
            seen = set()
            for r in sorted(reach):
                for e in out[r]:
                    if e.label is None:
                        continue
                    code = _label_code(e, const_id, variables)
                    alloc = isinstance(e.label, Var) and bool(
                        (allocated | e.alloc) & {e.label.name})
                    if (code, alloc) not in seen:
                        seen.add((code, alloc))
                        kind.append(code[0])
                        arg.append(code[1])
                        fresh.append(alloc)
            ptr.append(len(kind))
    return [ptr, kind, arg, fresh]


def _label_code(t: Transition, const_id: dict[str, int],
                variables: tuple[str, ...]) -> tuple[int, int]:
    label = t.label
    if isinstance(label, Const):
        return KIND_CONST, const_id[label.name]
    if isinstance(label, AnyNode):
        return KIND_ANY, -1
    assert isinstance(label, Var)
    return KIND_VAR, variables.index(label.name)


def _longest_in_links(automaton: Automaton) -> int | None:
    """The most links any run of the automaton reads (None: a loop reads events).

    The strongly connected components of the location graph (Kosaraju, iteratively): a
    reading transition inside one is a loop that reads; otherwise the components form a
    DAG, and the most events ahead of a location is a longest path over it."""
    out = automaton.outgoing()
    n = automaton.locations
    order, seen = [], [False] * n
    for root in range(n):  # finishing order of a depth-first search
        if seen[root]:
            continue
        seen[root] = True
        stack = [(root, 0)]
        while stack:
            q, i = stack[-1]
            if i < len(out[q]):
                stack[-1] = (q, i + 1)
                if not seen[out[q][i].target]:
                    seen[out[q][i].target] = True
                    stack.append((out[q][i].target, 0))
            else:
                stack.pop()
                order.append(q)
    into: list[list[int]] = [[] for _ in range(n)]
    for t in automaton.transitions:
        into[t.target].append(t.source)
    component = [-1] * n
    count = 0
    for root in reversed(order):  # components in topological order of the condensation
        if component[root] >= 0:
            continue
        component[root] = count
        todo = [root]
        while todo:
            for p in into[todo.pop()]:
                if component[p] < 0:
                    component[p] = count
                    todo.append(p)
        count += 1
    members: list[list[int]] = [[] for _ in range(count)]
    for q in range(n):
        members[component[q]].append(q)
    best = [0] * count  # most events read after entering the component
    for c in reversed(range(count)):
        for q in members[c]:
            for t in out[q]:
                inside = component[t.target] == c
                if inside and t.label is not None:
                    return None
                if not inside:
                    best[c] = max(best[c], best[component[t.target]] + (t.label is not None))
    return (best[component[automaton.initial]] + 1) // 2


def _variable_held_twice(automaton: Automaton) -> str | None:
    """A variable some run reads a fresh node into after it held one (None: none)."""
    states = variable_states(automaton)
    return states if isinstance(states, str) else None
