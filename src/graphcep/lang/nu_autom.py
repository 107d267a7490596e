"""Timed ν-automata written by hand: the ``.autom`` files of MaTiNA, the paper's tool.

A file lists the states, one a line, then ``//`` on a line of its own, then the
transitions, one a line (blank lines are skipped)::

    init #S                       a state: its name, #S initial, #E final (one initial,
    wait [c <= 2]                 at least one final), then its invariant
    done #E
    //
    init wait $X alloc:X reset:c  origin, destination, label, actions, guard
    {init, wait} done b [1 < c]   {a, b}: a transition from (or to) each of them

- **labels**: a name is a constant (the event must be that node), ``$X`` a variable (an
  unknown node: in write mode, after ``alloc:X``, a fresh one, held by no variable; else
  one ``X`` holds), ``#A`` any event, ``#N`` an ε-transition (reads nothing);
- **actions**, in any order: ``alloc:X`` or ``alloc:{X, Y}`` (write mode, before the
  read), ``free:X`` (forget, after it), ``reset:c`` or ``reset:{c, d}`` (the clocks
  restart at 0). A bare name or ``{..}`` right after the label is a reset too (the older
  form of MaTiNA's own examples: ``q0 q1 a c``);
- **conditions** (a state's invariant, a transition's guard), each in brackets:
  ``[c <= 2]``, ``[1 < c]``, ``[0.5 <= c < 3]``, ``[c = 2]`` (equality); bounds in seconds,
  read exactly to the microsecond. A transition also checks its origin's invariant and
  its destination's (less the clocks it resets), as in MaTiNA.

Clocks all start at 0 at the start of the sequence (anchored) or of the attempt (search).
An ε-transition fires at the time of the event the token read last: the automaton is
the engine's (:mod:`graphcep.engines.nu.engine`), where time passes only with events.

Example
-------
>>> p = parse_autom("q0 #S\\nq1 #E [c <= 2]\\n//\\nq0 q1 $X alloc:X [1 < c]\\n", "late")
>>> p.text()
'states q0 (initial), q1 (final) [c <= 2]; clocks c; 1 transition'
>>> p.transitions[0].guard                      # 1 < c: at least 1 s and 1 µs
((0, 1000001, None),)
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from pathlib import Path

from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.nu import SECONDS_SPELLING
from graphcep.lang.tokens import name_of_file, read_source
from graphcep.patterns.nu import AnyNode, Const, NodeTerm, Var
from graphcep.patterns.nu_autom import AutomatonPattern, AutomState, AutomTransition, Condition

__all__ = ["parse_autom", "parse_autom_file"]

_TOKEN = re.compile(r"""
    (?P<space>[ \t\r]+)
  | (?P<sep>//)
  | (?P<mark>\#[SENA])
  | (?P<action>(?:alloc|free|reset):)
  | (?P<number>[0-9]+(?:\.[0-9]+)?)
  | (?P<name>[A-Za-z][A-Za-z0-9_-]*)
  | (?P<op><=|[<=,\[\]{}$])
""", re.VERBOSE)

#: A number run on into letters, digits or points (1e3, 10s, 1.5.2), or a signed one.
_MALFORMED_NUMBER = re.compile(r"(?>[0-9]+(?:\.[0-9]+)?)[A-Za-z_.][A-Za-z0-9_.+-]*"
                               r"|-[0-9][A-Za-z0-9_.+-]*")

Guard = dict[int, tuple[int, int | None]]  # clock -> (low, high) in µs


@dataclass(frozen=True)
class _Tok:
    kind: str  # sep, mark, action, number, name, op, end
    value: str
    line: int
    column: int

    def shown(self) -> str:
        return "end of line" if self.kind == "end" else repr(self.value)


def _lines(text: str, source: str) -> Iterator[list[_Tok]]:
    """The tokens of each line that has any, each list ended by an ``end`` token."""
    for number, line in enumerate(text.split("\n"), 1):
        toks, pos = [], 0
        while pos < len(line):
            m = _TOKEN.match(line, pos)
            if malformed := _MALFORMED_NUMBER.match(line, pos):
                word = malformed.group()
                raise QuerySyntaxError("a number of seconds", repr(word), number, pos + 1,
                                       source, text, f"malformed number '{word}': a "
                                       f"condition's bounds are {SECONDS_SPELLING}; no "
                                       "exponent, unit or sign")
            if m is None:
                raise QuerySyntaxError("a name, a number or one of # $ [ ] { } < <= = , //",
                                       repr(line[pos]), number, pos + 1, source, text)
            if m.lastgroup != "space":
                toks.append(_Tok(m.lastgroup or "", m.group(), number, pos + 1))
            pos = m.end()
        if toks:
            yield [*toks, _Tok("end", "", number, len(line.rstrip("\r")) + 1)]


class _Parser:
    def __init__(self, text: str, source: str) -> None:
        self.text, self.source = text, source
        self.toks: list[_Tok] = []
        self.i = 0
        self.clocks: dict[str, int] = {}

    # -- tokens ---------------------------------------------------------------------------

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        self.i += 1
        return self.toks[self.i - 1]

    def error(self, tok: _Tok, expected: str, message: str | None = None) -> QuerySyntaxError:
        return QuerySyntaxError(expected, tok.shown(), tok.line, tok.column, self.source,
                                self.text, message)

    def expect(self, kind: str, expected: str, value: str | None = None) -> _Tok:
        tok = self.take()
        if tok.kind != kind or (value is not None and tok.value != value):
            raise self.error(tok, expected)
        return tok

    def names(self, what: str) -> list[_Tok]:
        """``name`` or ``{name, name, ..}``."""
        if self.peek().value != "{":
            return [self.expect("name", what)]
        self.take()
        found = [self.expect("name", what)]
        while self.peek().value == ",":
            self.take()
            found.append(self.expect("name", what))
        self.expect("op", "',' or '}'", "}")
        return found

    # -- conditions -----------------------------------------------------------------------

    def clock(self, name: str) -> int:
        return self.clocks.setdefault(name, len(self.clocks))

    def seconds(self, tok: _Tok) -> int:
        us = Decimal(tok.value) * 1_000_000
        if us != us.to_integral_value():
            raise self.error(tok, "", f"{tok.value} s is finer than a microsecond (at most "
                                      "6 decimals)")
        return int(us)

    def conditions(self) -> Guard:
        """``[..]`` conditions, merged per clock: ``{clock: (low, high)}`` in µs."""
        guard: Guard = {}
        while self.peek().value == "[":
            self.take()
            clock, low, high = self.condition()
            old_low, old_high = guard.get(clock, (0, None))
            guard[clock] = (max(low, old_low), high if old_high is None else
                            old_high if high is None else min(high, old_high))
            self.expect("op", "']' closing the condition", "]")
        return guard

    def condition(self) -> tuple[int, int, int | None]:
        low, high = 0, None
        tok = self.take()
        if tok.kind == "number":
            strict = self.expect("op", "'<' or '<=' after the lower bound").value
            if strict not in ("<", "<="):
                raise self.error(self.toks[self.i - 1], "'<' or '<=' after the lower bound")
            low = self.seconds(tok) + (strict == "<")
            tok = self.take()
        if tok.kind != "name":
            raise self.error(tok, "a clock, or a bound then '<' or '<=' then a clock")
        clock = self.clock(tok.value)
        op = self.peek()
        if op.value in ("<", "<=", "=") and op.kind == "op":
            self.take()
            if op.value == "=" and low:
                raise self.error(op, "'<' or '<='")
            bound = self.expect("number", "a number of seconds")
            high = self.seconds(bound) - (op.value == "<")
            if op.value == "=":
                low = high
        if high is not None and low > high:
            raise self.error(tok, "", f"the condition on {tok.value!r} holds for no value")
        return clock, low, high

    # -- lines ----------------------------------------------------------------------------

    def state(self, line: list[_Tok]) -> tuple[_Tok, bool, bool, Guard]:
        self.toks, self.i = line, 0
        name = self.expect("name", "a state's name (or '//' before the transitions)")
        marks: set[str] = set()
        while self.peek().kind == "mark" and self.peek().value in ("#S", "#E"):
            mark = self.take()
            if mark.value in marks:
                raise self.error(mark, "", f"{mark.value} twice on state {name.value!r}")
            marks.add(mark.value)
        guard = self.conditions()
        if self.peek().kind != "end":
            raise self.error(self.peek(), "#S, #E, a condition '[..]' or the end of the line")
        return name, "#S" in marks, "#E" in marks, guard

    def transition(self, line: list[_Tok]) -> tuple[list[_Tok], list[_Tok], NodeTerm | None,
                                                     dict[str, list[_Tok]], Guard]:
        self.toks, self.i = line, 0
        sources = self.names("an origin state (a name or {..})")
        targets = self.names("a destination state (a name or {..})")
        tok = self.take()
        label: NodeTerm | None
        if tok.kind == "name":
            label = Const(tok.value)
        elif tok.value == "$":
            label = Var(self.expect("name", "a variable's name after '$'").value)
        elif tok.value in ("#N", "#A"):
            label = None if tok.value == "#N" else AnyNode()
        else:
            raise self.error(tok, "a label: a constant, $VARIABLE, #A (any) or #N (ε)")
        actions: dict[str, list[_Tok]] = {}
        if self.peek().kind == "name" or self.peek().value == "{":
            actions["reset:"] = self.names("a clock")  # the older form: bare clocks
        while self.peek().kind == "action":
            action = self.take()
            if action.value in actions:
                raise self.error(action, "", f"{action.value} twice on one transition")
            if action.value == "reset:" and self.peek().kind != "name" and \
                    self.peek().value != "{":
                actions[action.value] = []  # reset: with no clock resets none
                continue
            what = "a clock" if action.value == "reset:" else "a variable"
            actions[action.value] = self.names(f"{what} after {action.value}")
        guard = self.conditions()
        if self.peek().kind != "end":
            raise self.error(self.peek(), "alloc:, free:, reset:, a condition '[..]' or "
                                          "the end of the line")
        return sources, targets, label, actions, guard


def parse_autom(text: str, name: str = "pattern", source: str = "<query>"
                ) -> AutomatonPattern:
    """Parse the text of an ``.autom`` file (see the module docstring).

    Raises
    ------
    QuerySyntaxError
        At the line and column of the first problem.
    """
    p = _Parser(text, source)
    lines = list(_lines(text, source))
    split = next((i for i, line in enumerate(lines) if line[0].kind == "sep"), None)
    if split is None:
        last = lines[-1][-1] if lines else _Tok("end", "", 1, 1)
        raise p.error(last, "", "no '//' line between the states and the transitions")
    if len(lines[split]) > 2:
        raise p.error(lines[split][1], "the end of the line after '//'")
    states: dict[str, AutomState] = {}
    for line in lines[:split]:
        tok, initial, final, guard = p.state(line)
        if tok.value in states:
            raise p.error(tok, "", f"state {tok.value!r} is declared twice")
        if initial and any(s.initial for s in states.values()):
            raise p.error(tok, "", f"a second initial state, {tok.value!r} (one #S)")
        states[tok.value] = AutomState(tok.value, initial, final, _conditions(guard))
    where = lines[split][0]
    if not any(s.initial for s in states.values()):
        raise p.error(where, "", "no initial state (mark one with #S)")
    if not any(s.final for s in states.values()):
        raise p.error(where, "", "no final state (mark one or more with #E)")
    number = {state: q for q, state in enumerate(states)}
    transitions = []
    for line in lines[split + 1:]:
        sources, targets, label, actions, guard = p.transition(line)
        for tok in (*sources, *targets):
            if tok.value not in states:
                raise p.error(tok, "", f"state {tok.value!r} is not declared")
        names = {key: frozenset(t.value for t in toks) for key, toks in actions.items()}
        resets = frozenset(p.clock(t.value) for t in actions.get("reset:", ()))
        transitions += [AutomTransition(number[s.value], number[d.value], label,
                                        names.get("alloc:", frozenset()),
                                        names.get("free:", frozenset()), resets,
                                        _conditions(guard))
                        for s in sources for d in targets]
    return AutomatonPattern(name, source=source, states=tuple(states.values()),
                            transitions=tuple(transitions), clock_names=tuple(p.clocks))


def _conditions(guard: Guard) -> tuple[Condition, ...]:
    return tuple((clock, low, high) for clock, (low, high) in sorted(guard.items()))


def parse_autom_file(path: str | Path) -> AutomatonPattern:
    """Parse an ``.autom`` file (UTF-8, a leading byte order mark allowed); the pattern is
    named after the file's stem."""
    return parse_autom(read_source(path), name_of_file(path), str(path))
