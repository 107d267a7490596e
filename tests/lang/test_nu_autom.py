"""Automaton files (``.autom``, MaTiNA's format): every file of MaTiNA's test folder
parses, runs anchored on its inputs with MaTiNA's verdicts, except where the two differ
-- each difference a named test saying why; malformed files give one line at their
position.

Verdicts were recorded from MaTiNA's ``AutomRecognizer`` (``autom_verdicts.json`` says
how); a sequence is accepted when graphcep reports a match ending at its last event."""

from __future__ import annotations

import json

import pytest

from graphcep.engines.nu.automaton import compile_pattern
from graphcep.engines.nu.engine import NuEngine
from graphcep.io.readers import read_edges
from graphcep.io.tes import parse_tes
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.nu_autom import parse_autom, parse_autom_file
from tests.engines.test_nu_matina import accepts
from tests.paths import FIXTURES

VECTORS = FIXTURES / "matina"
VERDICTS = json.loads((VECTORS / "autom_verdicts.json").read_text(encoding="utf-8"))

#: (automaton, input) pairs where graphcep's verdict differs from MaTiNA's, by design
#: (named tests below)
DIFFERENT = {"arrow|arrow", "ecoutePaire|ecoutePaire", "eight|eight",
             "emptyResetClosedInterval|emptyResetClosedInterval", "epsilon|epsilon",
             "simple_relation|simple_relation", "equality_quirk|1 a",
             "float_drift|0.1 a 0.1 b 0.1 c"}


def accepted(automaton: str, sequence: str) -> bool:
    return accepts(parse_autom_file(VECTORS / f"{automaton}.autom"),
                   read_edges(VECTORS / f"{sequence}.tes").edges)


def probe(name: str, sequence: str) -> bool:
    return accepts(parse_autom(VERDICTS["probes"][name]["autom"], name),
                   parse_tes(sequence, "probe")[0])


@pytest.mark.parametrize("path", sorted(VECTORS.glob("*.autom")), ids=lambda p: p.stem)
def test_every_file_of_matina_parses_or_says_where_it_is_wrong(path):
    if path.stem == "parsing_test":  # MaTiNA crashes on it: 'state undeclared : s2'
        with pytest.raises(QuerySyntaxError) as err:
            parse_autom_file(path)
        assert err.value.headline == f"{path}:13:4: state 's2' is not declared"
        return
    pattern = parse_autom_file(path)
    automaton = compile_pattern(pattern)
    assert automaton.locations >= len(pattern.states) and pattern.name == path.stem


@pytest.mark.parametrize("key", sorted(set(VERDICTS["vectors"]) - DIFFERENT))
def test_the_same_verdict_as_matina(key):
    automaton, sequence = key.split("|")
    assert accepted(automaton, sequence) == VERDICTS["vectors"][key]


PROBES = sorted((name, seq) for name, p in VERDICTS["probes"].items() for seq in p["verdicts"]
                if f"{name}|{seq}" not in DIFFERENT)


@pytest.mark.parametrize(("name", "sequence"), PROBES)
def test_the_same_verdict_as_matina_on_probes(name, sequence):
    assert probe(name, sequence) == VERDICTS["probes"][name]["verdicts"][sequence]


def test_equality_is_equality_where_matina_reads_at_most():
    """MaTiNA's grammar reads ``[c = 2]`` as ``-2 <= c <= 2`` (its lower bound is given as
    a value, not negated), so it accepts 'a' at 1 s; graphcep's ``=`` is equality."""
    assert VERDICTS["probes"]["equality_quirk"]["verdicts"]["1 a"] is True
    assert not probe("equality_quirk", "1 a") and probe("equality_quirk", "2 a")


def test_decimal_pauses_matina_loses_to_floating_point():
    """MaTiNA rejects [c <= 0.3] after 0.1 + 0.1 + 0.1 s (0.30000000000000004 in doubles);
    graphcep's clocks are exact microseconds."""
    assert VERDICTS["probes"]["float_drift"]["verdicts"]["0.1 a 0.1 b 0.1 c"] is False
    assert probe("float_drift", "0.1 a 0.1 b 0.1 c")


@pytest.mark.parametrize("automaton", ["arrow", "simple_relation"])
def test_epsilon_transitions_fire_at_events_not_inside_pauses(automaton):
    """MaTiNA lets an ε-transition fire at any instant of a pause (its clocks are zones):
    arrow's and simple_relation's first ε-transitions wait for 0.5 s and 1 s of a pause,
    and their sequences end with a pause that MaTiNA's invariants see. graphcep's time
    passes with events: an ε-transition fires at the time of the event read last (0 at
    the start), so these guards never hold; the same automata accept when an event comes
    where the ε-transition is to fire."""
    assert VERDICTS["vectors"][f"{automaton}|{automaton}"] is True
    assert not accepted(automaton, automaton)
    timed = {"arrow": "0.6 x 1.1 y 0.2 a", "simple_relation": "2 x a 5 y a"}[automaton]
    text = (VECTORS / f"{automaton}.autom").read_text()
    # an event the automaton does not read where MaTiNA's ε-transitions fire: a self loop
    # on each state reading any event keeps the token where it is
    states = [line.split()[0] for line in text.split("//")[0].splitlines() if line.strip()]
    loops = "".join(f"{s} {s} #A\n" for s in states)
    assert accepts(parse_autom(text.rstrip("\n") + "\n" + loops, automaton),
                   parse_tes(timed, "probe")[0])


def test_an_invariant_outlived_by_epsilon_resets_needs_events():
    """ecoutePaire keeps its token alive through a 60 s pause by resetting ``c`` with an
    ε-loop whenever ``c`` is 2 (MaTiNA: at most 2), inside the pause; graphcep has no
    event there to fire it at, so the invariant ``c <= 2`` drops the token."""
    assert VERDICTS["vectors"]["ecoutePaire|ecoutePaire"] is True
    assert not accepted("ecoutePaire", "ecoutePaire")
    assert accepts(parse_autom_file(VECTORS / "ecoutePaire.autom"),
                   parse_tes("a a 0.5 a 0.3 a", "probe")[0])


@pytest.mark.parametrize("automaton", ["eight", "emptyResetClosedInterval", "epsilon"])
def test_a_sequence_of_pauses_only_has_no_event_to_report_at(automaton):
    """These inputs hold one pause and no event: MaTiNA accepts (the initial state is
    final, or ε-transitions reach a final one within the pause). graphcep reports matches
    at events, so there is nothing to compare; the automata parse and their inputs hold
    no event."""
    assert VERDICTS["vectors"][f"{automaton}|{automaton}"] is True
    assert read_edges(VECTORS / f"{automaton}.tes").edges.num_rows == 0
    assert compile_pattern(parse_autom_file(VECTORS / f"{automaton}.autom")).finals


def test_the_older_reset_form_is_a_reset():
    """``q0 q1 a c1`` (a bare clock after the label, MaTiNA's examples) is ``reset:c1``."""
    old = parse_autom("q0 #S\nq1 #E\n//\nq0 q1 a c1 [c1 <= 2]\n")
    new = parse_autom("q0 #S\nq1 #E\n//\nq0 q1 a reset:c1 [c1 <= 2]\n")
    assert old.transitions == new.transitions
    assert old.transitions[0].reset == frozenset({0})


def test_conditions_are_exact_microseconds():
    p = parse_autom("q0 #S [c < 0.000002]\nq1 #E\n//\nq0 q1 a [0.5 < c <= 1.25] [d = 3]\n")
    assert p.states[0].invariant == ((0, 0, 1),)
    assert p.transitions[0].guard == ((0, 500_001, 1_250_000), (1, 3_000_000, 3_000_000))


def test_sets_of_states_make_one_transition_per_pair():
    p = parse_autom("a #S\nb\nc #E\n//\n{a, b} {b, c} #A alloc:{X, Y} free:Z reset:\n")
    assert [(t.source, t.target) for t in p.transitions] == [(0, 1), (0, 2), (1, 1), (1, 2)]
    assert p.transitions[0].alloc == {"X", "Y"} and p.transitions[0].free == {"Z"}
    assert p.variables() == {"X", "Y", "Z"} and p.transitions[0].reset == frozenset()


def test_search_mode_finds_the_automaton_anywhere():
    """Search mode: an attempt at every event, clocks from the attempt's first event."""
    p = parse_autom("q0 #S\nq1\nq2 #E\n//\nq0 q1 $X alloc:X reset:c\nq1 q2 $X [c <= 1]\n")
    edges = parse_tes("a 5 u 0.5 u 3 v 2 v", "probe")[0]
    found = NuEngine(p).push(edges).to_pylist()
    assert [(m["first_t"], m["last_t"]) for m in found] == [(5_000_000, 5_500_000)]


SPELLING = ("a condition's bounds are seconds, written as digits with an optional decimal "
            "part (10, 0.5, 1000); no exponent, unit or sign")
BAD = {
    "q0 #S\nq1 #E\n": (2, 6, "no '//' line between the states and the transitions"),
    "q0 #S\nq1\n//\nq0 q1 a\n": (3, 1, "no final state (mark one or more with #E)"),
    "q0\nq1 #E\n//\n": (3, 1, "no initial state (mark one with #S)"),
    "q0 #S\nq1 #S #E\n//\n": (2, 1, "a second initial state, 'q1' (one #S)"),
    "q0 #S #E\nq0\n//\n": (2, 1, "state 'q0' is declared twice"),
    "q0 #S #E\n//\nq0 q9 a\n": (3, 4, "state 'q9' is not declared"),
    "q0 #S #E\n//\nq0 q0 $ alloc:X\n": (3, 9, "expected a variable's name after '$', found "
                                              "'alloc:'"),
    "q0 #S #E\n//\nq0 q0 a [c >= 1]\n": (3, 12, "expected a name, a number or one of # $ [ ] "
                                                "{ } < <= = , //, found '>'"),
    "q0 #S #E\n//\nq0 q0 a [c <= 0.0000001]\n": (3, 15, "0.0000001 s is finer than a "
                                                        "microsecond (at most 6 decimals)"),
    "q0 #S #E\n//\nq0 q0 a [2 < c < 1]\n": (3, 14, "the condition on 'c' holds for no value"),
    "q0 #S #E\n//\nq0 q0 a [c <= 1\n": (3, 16, "expected ']' closing the condition, found "
                                               "end of line"),
    "q0 #S #E\n//\nq0 q0 a alloc:X alloc:Y\n": (3, 17, "alloc: twice on one transition"),
    "q0 #S #E\n//\nq0 {q0, q0 a\n": (3, 12, "expected ',' or '}', found 'a'"),
    "q0 #S #S\n//\n": (1, 7, "#S twice on state 'q0'"),
    "q0 #S #E\n// x\n": (2, 4, "expected the end of the line after '//', found 'x'"),
    "q0 #S #E\n//\nq0 q0 a [c <= 1e3]\n": (3, 15, "malformed number '1e3': " + SPELLING),
    "q0 #S #E\n//\nq0 q0 a [c <= 10s]\n": (3, 15, "malformed number '10s': " + SPELLING),
    "q0 #S #E\n//\nq0 q0 a [c <= 1.5.2]\n": (3, 15, "malformed number '1.5.2': " + SPELLING),
    "q0 #S [c <= -1] #E\n//\n": (1, 13, "malformed number '-1': " + SPELLING),
}


@pytest.mark.parametrize("text", sorted(BAD))
def test_malformed_files_say_where_in_one_line(text, tmp_path):
    path = tmp_path / "bad.autom"
    path.write_text(text)
    line, column, message = BAD[text]
    with pytest.raises(QuerySyntaxError) as err:
        parse_autom_file(path)
    assert err.value.headline == f"{path}:{line}:{column}: {message}"


def test_the_command_line_runs_and_explains_an_automaton_file(tmp_path, capsys):
    from graphcep.cli import main

    status = main(["run", str(VECTORS / "yolo.autom"), "--input", str(VECTORS / "yolo.tes"),
                   "--anchored", "--engine", "local", "--summary", "json"])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert json.loads(out.out.strip().splitlines()[-1])["matches"] == 1
    dot = tmp_path / "yolo.dot"
    status = main(["explain", str(VECTORS / "yolo.autom"), "--dot", str(dot)])
    out = capsys.readouterr()
    assert status == 0, out.err
    assert "states s20 (initial), s0," in out.out and "automaton:" in out.out
    assert dot.read_text().startswith('digraph "yolo" {')


def test_the_command_line_says_where_a_file_is_wrong_in_one_line(capsys):
    from graphcep.cli import main

    status = main(["explain", str(VECTORS / "parsing_test.autom")])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    assert err.startswith(f"graphcep: {VECTORS / 'parsing_test.autom'}:13:4: state 's2' is "
                          "not declared")


def test_explain_counts_one_transition_and_one_clock_in_the_singular(tmp_path, capsys):
    from graphcep.cli import main

    path = tmp_path / "one.autom"
    path.write_text("q0 #S\nq1 #E\n//\nq0 q1 a [c <= 1]\n")
    assert main(["explain", str(path)]) == 0
    out = capsys.readouterr().out
    assert "states q0 (initial), q1 (final); clocks c; 1 transition\n" in out
    assert ", 1 clock, variables none" in out
