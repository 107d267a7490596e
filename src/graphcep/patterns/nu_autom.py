"""A timed ν-automaton written by hand (an ``.autom`` file) as a pattern the ν engine runs.

:class:`AutomatonPattern` is a :class:`~graphcep.patterns.nu.NuPattern` made of states
and transitions instead of an expression: the job, the engine and ``graphcep explain``
take it wherever they take a ν-expression, and the compiler
(:func:`graphcep.engines.nu.automaton.compile_pattern`) builds its automaton as written.
Times are integer microseconds; a condition is ``(clock, low, high)``, both bounds
included, ``high`` None for none.

Example
-------
>>> from graphcep.patterns.nu import Const
>>> p = AutomatonPattern("one", states=(AutomState("q0", initial=True),
...                                     AutomState("q1", final=True, invariant=((0, 0, 2_000_000),))),
...                      transitions=(AutomTransition(0, 1, Const("a"), reset=frozenset({0})),),
...                      clock_names=("c",))
>>> p.text()
'states q0 (initial), q1 (final) [c <= 2]; clocks c; 1 transition'
>>> sorted(p.constants()), p.span_us(), p.unbounded_part().text()
(['a'], inf, 'state q0')
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

from graphcep.events import counted_noun, format_seconds
from graphcep.patterns.nu import AnyNode, Const, Node, NodeTerm, NuPattern, Var

#: ``(clock, low, high)``: ``low <= clock <= high`` in µs (high None: no upper bound)
Condition = tuple[int, int, int | None]


@dataclass(frozen=True)
class AutomState:
    """A state: its name, whether it is initial or final, its invariant."""

    name: str
    initial: bool = False
    final: bool = False
    invariant: tuple[Condition, ...] = ()

    def text(self) -> str:
        return f"state {self.name}"


@dataclass(frozen=True)
class AutomTransition:
    """``source -> target`` (state numbers) reading ``label`` (None: ε), with the
    variables it allocates (before the read) and frees (after it), the clocks it resets
    and its guard."""

    source: int
    target: int
    label: NodeTerm | None = None
    alloc: frozenset[str] = frozenset()
    free: frozenset[str] = frozenset()
    reset: frozenset[int] = frozenset()
    guard: tuple[Condition, ...] = ()


@dataclass(frozen=True)
class AutomatonPattern(NuPattern):
    """A named timed ν-automaton: ``states`` (exactly one initial), ``transitions``,
    and its clocks' names (clock ``i`` is ``clock_names[i]``)."""

    expr: Node = field(default=Node(AnyNode()), compare=False)
    states: tuple[AutomState, ...] = ()
    transitions: tuple[AutomTransition, ...] = ()
    clock_names: tuple[str, ...] = ()

    def text(self) -> str:
        def state(s: AutomState) -> str:
            kind = [word for word, flag in (("initial", s.initial), ("final", s.final)) if flag]
            return (s.name + (f" ({', '.join(kind)})" if kind else "")
                    + "".join(f" [{self.condition_text(c)}]" for c in s.invariant))

        return (f"states {', '.join(map(state, self.states))}; clocks "
                f"{', '.join(self.clock_names) or 'none'}; "
                f"{counted_noun(len(self.transitions), 'transition')}")

    def condition_text(self, condition: Condition) -> str:
        clock, low, high = condition
        name = self.clock_names[clock]
        if high is not None and low == high:
            return f"{name} = {format_seconds(low)}"
        text = f"{format_seconds(low)} <= {name}" if low else name
        return text + (f" <= {format_seconds(high)}" if high is not None else "")

    def variables(self) -> set[str]:
        return {n for t in self.transitions for n in (*t.alloc, *t.free)} | \
            {t.label.name for t in self.transitions if isinstance(t.label, Var)}

    def constants(self) -> set[str]:
        return {t.label.name for t in self.transitions if isinstance(t.label, Const)}

    def span_us(self) -> float:
        """Unbounded: a hand-written automaton may reset its clocks anywhere, so nothing
        here bounds how long a match lasts (its invariants still expire tokens)."""
        return math.inf

    def unbounded_part(self) -> AutomState | None:  # type: ignore[override]
        """The first state no invariant bounds in time (where tokens may wait for ever)."""
        return next((s for s in self.states if all(h is None for _, _, h in s.invariant)),
                    self.states[0] if self.states else None)
