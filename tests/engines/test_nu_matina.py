"""MaTiNA's own test vectors in anchored mode: graphcep accepts exactly the sequences the
paper's tool accepts, except where the tool is wrong -- each exception a named test.

Verdicts were recorded from MaTiNA's ``RegexRecognizer`` (tests/fixtures/matina/SOURCE.md);
a sequence is accepted when a token is in a final state after its last event, i.e. when
graphcep reports a match ending at the last event."""

from __future__ import annotations

import pytest

from graphcep.engines.nu.engine import NuEngine
from graphcep.io.readers import read_edges
from graphcep.io.tes import parse_tes
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.nu import parse_nu, parse_nu_file
from tests.paths import FIXTURES

VECTORS = FIXTURES / "matina"

#: (pattern, input) -> MaTiNA's verdict
MATINA = {
    ("binary_cpt", "binary_cpt"): True,
    ("copy_signals", "copy_signals"): False,
    ("multialloc", "multialloc_fail"): False,
    ("multialloc", "multialloc_succeed"): True,
    ("parsing_test", "parsing_test1"): True,
    ("parsing_test", "parsing_test2"): True,
    ("triangle", "triangle"): False,
    ("triangleShuffle", "triangleShuffle"): False,
}


def accepted(pattern: str, sequence: str) -> bool:
    """Whether graphcep, anchored, accepts the whole sequence of a fixture."""
    events = read_edges(VECTORS / f"{sequence}.tes").edges
    return accepts(parse_nu_file(VECTORS / f"{pattern}.regex"), events)


def accepts(pattern, events) -> bool:
    """Anchored, a report made while reading the last event says the whole sequence is
    accepted: push all but it, then it alone."""
    engine = NuEngine(pattern, mode="anchored")
    engine.push(events.slice(0, events.num_rows - 1))
    return engine.push(events.slice(events.num_rows - 1)).num_rows > 0


def accepts_text(pattern: str, sequence: str) -> bool:
    return accepts(parse_nu(pattern), parse_tes(sequence, "probe")[0])


#: One-line probes of MaTiNA's semantics: (pattern, sequence) -> its verdict, where
#: graphcep agrees (RegexRecognizer, same build as the fixtures' verdicts).
PROBES = {
    ("#a.(#b)", "u v"): True,
    ("<a>[3]", "2.5 a"): False,
    ("<a>[3]", "3 a"): True,
    ("a . <b.c>[0,2]", "a 0.5 b 1 c"): True,
    ("a . <b.c>[0,2]", "a 5 b 1 c"): False,
    ("<a.b>[0,2]", "5 a 1 b"): False,
    ("<a.b>[1,2]", "a 1.5 b 10"): True,
    ("(@~>@)* % <a~>b>[0,2]", "x y a b"): True,
    # the shuffle is entered at time 0: a delay that begins a part counts from there,
    # whatever the other part reads meanwhile (11 s > 2 s)
    ("(@~>@)* % <a~>b>[0,2]", "10 x y 1 a b"): False,
    ("(@~>@)* % (@~>@ . <a~>b>[0,2])", "10 x y 1 a b"): True,
    ("a", "a b"): False,
    ("#X.a", "a a"): False,
    ("#X.a", "u a"): True,
    ("#X.#X", "u u"): False,
    ("#X.#X", "u v"): True,
    ("#X.#X.X", "u v u"): True,
    ("(a~>b)%(c~>d)", "a c b d"): False,
    ("(a~>b)%(c~>d)", "a b c d"): True,
    ("(a.b)%(c.d)", "a c b d"): True,
    ("a~>b", "a 1 b"): True,
    ("<a.b.c>[0,0.5]", "0.125 a 0.125 b 0.125 c"): True,
    ("<a.b.c>[0,500]", "1 a 1 b 1 c"): True,
}


@pytest.mark.parametrize(("pattern", "sequence"), sorted(PROBES))
def test_the_same_verdict_as_matina_on_probes(pattern, sequence):
    assert accepts_text(pattern, sequence) == PROBES[(pattern, sequence)]


def test_decimal_pauses_matina_loses_to_floating_point():
    """MaTiNA rejects both (0.01 + 0.01 + 0.01 and 0.1 + 0.1 + 0.1 in doubles): graphcep's
    exact microseconds accept them, as the same pauses scaled by 8 are accepted by MaTiNA."""
    assert accepts_text("<a.b.c>[0,0.5]", "0.01 a 0.01 b 0.01 c")
    assert accepts_text("<a.b.c>[0.3]", "0.1 a 0.1 b 0.1 c")


def test_a_trailing_variable_is_read_where_matina_fails():
    """MaTiNA stops with 'b shall be a variable' on #a.#b; graphcep reads it as #a.(#b)."""
    assert accepts_text("#a.#b", "u v")


@pytest.mark.parametrize(("pattern", "sequence"), sorted(MATINA))
def test_the_same_verdict_as_matina(pattern, sequence):
    assert accepted(pattern, sequence) == MATINA[(pattern, sequence)]


def test_rectangle_ip_matina_loses_to_floating_point_drift():
    """MaTiNA rejects rectangleIP.tes (a 2x2 biclique within 1 ms, pauses of tens of µs):
    its clocks are doubles compared with zero, and the sums of decimal pauses miss. With
    the same times scaled to whole numbers MaTiNA accepts it; graphcep's times are exact
    microseconds, so it accepts the sequence as written."""
    assert accepted("rectangleIP", "rectangleIP")


@pytest.mark.parametrize("pattern", ["time_constraint", "yolo"])
def test_conjunction_is_refused_where_matina_crashes(pattern):
    """MaTiNA parses '&', drops its right operand, and crashes when it holds a delay."""
    with pytest.raises(QuerySyntaxError, match="conjunction '&' is not supported"):
        parse_nu_file(VECTORS / f"{pattern}.regex")
