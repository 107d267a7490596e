"""The DDST query language and pattern objects: examples, errors with positions, round trip."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from graphcep.lang.ddst import parse_ddst, parse_ddst_file, tokenize_ddst
from graphcep.lang.errors import QuerySyntaxError
from graphcep.patterns.ddst import (
    DDSTBuilder,
    DDSTQuery,
    DDSTQueryError,
    QueryEdge,
    QueryVertex,
    Window,
    window_us,
)
from tests import paths

EXAMPLES = paths.EXAMPLES / "ddst"
MIN = 60_000_000  # microseconds per minute

BRIEF_EXAMPLE = """
// congestion spreading (the paper's road example)
VERTICES A:M, B:M, C:M, D:M;          // vertex variables with labels
EDGES
  AB: A -> B [congested];              // edge variables with an optional label
  CA: C -> A [congested];
  DC: D -> C [congested];
ORDER AB < CA, CA < DC;                // timing order
WITHIN 5 min;
"""


def built_example() -> DDSTQuery:
    return (
        DDSTBuilder()
        .vertex("A", "M").vertex("B", "M").vertex("C", "M").vertex("D", "M")
        .edge("AB", "A", "B", "congested")
        .edge("CA", "C", "A", "congested")
        .edge("DC", "D", "C", "congested")
        .before("AB", "CA").before("CA", "DC")
        .within(5, "min")
        .build()
    )  # fmt: skip


# -- what parses ----------------------------------------------------------------------------


def test_brief_example_equals_builder():
    q = parse_ddst(BRIEF_EXAMPLE)
    assert q == built_example()
    assert q.window == Window("time", 5 * MIN)
    assert q.topological_order() == ("AB", "CA", "DC")
    assert q.predecessors() == {"AB": (), "CA": ("AB",), "DC": ("CA",)}


@pytest.mark.parametrize("path", sorted(EXAMPLES.glob("*.ddst")), ids=lambda p: p.stem)
def test_example_files_parse_and_round_trip(path: Path):
    q = parse_ddst_file(path)
    assert q.name == path.stem
    assert parse_ddst(q.to_text()) == q


@pytest.mark.parametrize(("stem", "name"), [("web-then-irc", "web_then_irc"),
                                            ("Query", "query"), ("within", "query")])
def test_a_file_stem_names_the_query_as_a_name_or_query(tmp_path, stem, name):
    path = tmp_path / f"{stem}.ddst"
    path.write_text("VERTICES A; EDGES e: A -> A; WITHIN 1 s")
    assert parse_ddst_file(path).name == name


def test_example_files_exist():
    assert {p.stem for p in EXAMPLES.glob("*.ddst")} >= {"congestion", "job_market", "rumor"}
    fig1 = parse_ddst_file(EXAMPLES / "congestion.ddst")
    assert ("AB", "FE") in fig1.closure() and ("CA", "EA") not in fig1.closure()


def test_keywords_are_case_insensitive_and_comments_anywhere():
    text = """query q; /* block */ Vertices A:M, B:m; # hash comment
        edges e: A -> B [x]; f: B -> A;
        Order e < f; within 2 MIN"""
    q = parse_ddst(text)
    assert q.name == "q" and q.vertex("B").label == "m" and q.window.size == 2 * MIN


def test_labels():
    q = parse_ddst('VERTICES A:*, B, C:7, D:"major road"; EDGES a: A -> B [*]; b: B -> C; '
                   'c: C -> D ["very slow"]; d: D -> A [4]; WITHIN 1 s')  # fmt: skip
    assert [v.label for v in q.vertices] == [None, None, "7", "major road"]
    assert [e.label for e in q.edges] == [None, None, "very slow", "4"]
    assert parse_ddst(q.to_text()) == q


def test_chains_and_multiple_chains():
    q = parse_ddst("VERTICES A,B; EDGES a: A->B; b: B->A; c: A->A; d: B->B; "
                   "ORDER a < b < c, a < d; WITHIN 1 s")  # fmt: skip
    assert q.order == (("a", "b"), ("b", "c"), ("a", "d"))
    assert q.closure() == {("a", "b"), ("b", "c"), ("a", "c"), ("a", "d")}


@pytest.mark.parametrize(
    ("window", "expected"),
    [
        ("5 min", Window("time", 5 * MIN)),
        ("5min", Window("time", 5 * MIN)),
        ("1.5 s", Window("time", 1_500_000)),
        ("250 ms", Window("time", 250_000)),
        ("7 us", Window("time", 7)),
        ("2 h", Window("time", 120 * MIN)),
        ("1 day", Window("time", 1440 * MIN)),
        ("3 seconds", Window("time", 3_000_000)),
        ("0 s", Window("time", 0)),
        ("1e3 ms", Window("time", 1_000_000)),
        ("100 EDGES", Window("count", 100)),
        ("1 edge", Window("count", 1)),
    ],
)
def test_windows(window: str, expected: Window):
    q = parse_ddst(f"VERTICES A, B; EDGES e: A -> B; WITHIN {window}")
    assert q.window == expected
    assert parse_ddst(q.to_text()).window == expected


def test_tokenizer_reuses_sal_scanning():
    toks = tokenize_ddst('AB: A -> B ["x y"]; /* c */ WITHIN 5min')
    assert [(t.kind, t.value) for t in toks[:6]] == [
        ("IDENT", "AB"), ("OP", ":"), ("IDENT", "A"), ("OP", "->"), ("IDENT", "B"), ("OP", "["),
    ]  # fmt: skip
    assert toks[6].kind == "STRING" and toks[6].value == "x y"
    assert [t.value for t in toks[-3:]] == ["5", "min", ""]


# -- errors, with line and column ----------------------------------------------------------

HEAD = "VERTICES A:M, B:M, C:M;\nEDGES\n  AB: A -> B [congested];\n  CA: C -> A [congested];\n"

ERRORS = [
    # (text, line, column, words in the message)
    (HEAD + "ORDER AB < XY;\nWITHIN 5 min;", 5, 12, "unknown edge 'XY'"),
    (HEAD + "ORDER AB < CA, CA < AB;\nWITHIN 5 min;", 5, 21, "cycle: CA < AB < CA"),
    (HEAD + "ORDER AB < AB;\nWITHIN 5 min;", 5, 12, "cycle: AB < AB"),
    (HEAD + "  DC: D -> C;\nWITHIN 5 min;", 5, 7, "unknown vertex 'D'"),
    (HEAD + "  AB: B -> C;\nWITHIN 5 min;", 5, 3, "edge 'AB' is already declared at line 3:3"),
    ("VERTICES A, B, A;\nEDGES e: A -> B;\nWITHIN 1 s", 1, 16,
     "vertex 'A' is already declared at line 1:10"),
    ("VERTICES A, B;\nEDGES A: A -> B;\nWITHIN 1 s", 2, 7, "'A' is already the name of a vertex"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nORDER A < e;\nWITHIN 1 s", 3, 7, "'A' is a vertex, not an edge"),
    ("VERTICES A, B;\nEDGES e: A -> e;\nWITHIN 1 s", 2, 15, "'e' is an edge, not a vertex"),
    ("VERTICES A, order;\nEDGES e: A -> A;\nWITHIN 1 s", 1, 13, "found the keyword 'order'"),
    ("VERTICES A, B, C;\nEDGES e: A -> B;\nWITHIN 1 s", 1, 16, "vertex 'C' is on no edge"),
    ("VERTICES A, B, C, D;\nEDGES e: A -> B; f: C -> D;\nWITHIN 1 s", 1, 16,
     "vertex 'C' is not connected to 'A'"),
    ("VERTICES A, B;\nEDGES e: A -> B\nWITHIN 1 s", 3, 1, "expected ';' after the edge"),
    ("VERTICES A, B;\nEDGES e: A > B;\nWITHIN 1 s", 2, 12, "expected '->'"),
    ("VERTICES A, B;\nEDGES e: A -> B [x;\nWITHIN 1 s", 2, 19, "expected ']' closing"),
    ("VERTICES A:, B;\nEDGES e: A -> B;\nWITHIN 1 s", 1, 12, "expected a label"),
    ("VERTICES A, B;\nEDGES e A -> B;\nWITHIN 1 s", 2, 9, "expected ':' after the edge name 'e'"),
    ("VERTICES A, B;\nEDGES;\nWITHIN 1 s", 2, 6, "expected an edge 'NAME: SRC -> DST"),
    ("VERTICES A, B;\nEDGES e: A -> B;", 2, 17, "expected ORDER or WITHIN, found end of input"),
    ("VERTICES A, B;\nEDGES e: A -> B; f: B -> A;\nORDER e;\nWITHIN 1 s", 3, 8,
     "expected '<' after 'e'"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 1 s;\nORDER e < e;", 4, 1,
     "in this order"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 5;", 3, 9, "expected a unit"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 5 fortnights;", 3, 10,
     "unknown window unit 'fortnights'"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 0.5 us;", 3, 8, "whole number of microseconds"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 0 EDGES;", 3, 8,
     "expected a positive whole number of edges"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 2.5 EDGES;", 3, 8,
     "expected a positive whole number of edges"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN -5 s;", 3, 8, "expected a window size"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 1e90 h;", 3, 8, "below 2**62"),
    ("VERTICES A, B;\nEDGES e: A -> B;\nWITHIN 99999999999999999999 EDGES;", 3, 8, "below 2**62"),
    ("EDGES e: A -> B;\nWITHIN 1 s", 1, 1, "expected VERTICES"),
    ("VERTICES A, B;\nEDGES e: A -> B; @\nWITHIN 1 s", 2, 18, "unexpected character '@'"),
    ('VERTICES A:"open, B;\nEDGES e: A -> B;\nWITHIN 1 s', 1, 12, "unterminated string"),
]  # fmt: skip


@pytest.mark.parametrize(("text", "line", "column", "words"), ERRORS)
def test_errors_name_line_column_and_what_was_expected(text, line, column, words):
    with pytest.raises(QuerySyntaxError) as info:
        parse_ddst(text, "bad.ddst")
    err = info.value
    assert (err.line, err.column) == (line, column), str(err)
    assert words in err.message, err.message
    assert str(err).startswith(f"bad.ddst:{line}:{column}: ")
    assert err.expected
    caret = str(err).splitlines()[-1]
    assert caret.strip() == "^" and len(caret) - 4 == column  # four spaces of indent


def test_three_edge_cycle_is_named_in_full():
    text = HEAD + "  DC: A -> C [congested];\nORDER AB < CA, CA < DC, DC < AB;\nWITHIN 5 min;"
    with pytest.raises(QuerySyntaxError, match="cycle: DC < AB < CA < DC") as info:
        parse_ddst(text)
    assert (info.value.line, info.value.column) == (6, 30)


def test_errors_pickle_and_file_errors_name_the_file(tmp_path: Path):
    bad = tmp_path / "bad.ddst"
    bad.write_text("VERTICES A;\nEDGES e: A -> Z;\nWITHIN 1 s\n")
    with pytest.raises(QuerySyntaxError) as info:
        parse_ddst_file(bad)
    assert str(info.value).startswith(f"{bad}:2:15: unknown vertex 'Z'")
    again = pickle.loads(pickle.dumps(info.value))
    assert str(again) == str(info.value)


def test_file_name_is_the_default_query_name(tmp_path: Path):
    for name, expected in (("spread.ddst", "spread"), ("my-query.ddst", "my_query"),
                           ("order.ddst", "query")):  # fmt: skip
        path = tmp_path / name
        path.write_text("VERTICES A; EDGES e: A -> A; WITHIN 1 s")
        assert parse_ddst_file(path).name == expected
    path.write_text("QUERY named; VERTICES A; EDGES e: A -> A; WITHIN 1 s")
    assert parse_ddst_file(path).name == "named"


# -- the builder and the pattern objects ---------------------------------------------------


def base() -> DDSTBuilder:
    return DDSTBuilder("q").vertex("A").vertex("B").edge("e", "A", "B").edge("f", "B", "A")


@pytest.mark.parametrize(
    ("builder", "words"),
    [
        (lambda: base().before("e", "f").before("f", "e").within(1), "cycle: f < e < f"),
        (lambda: base().before("e", "e").within(1), "cycle: e < e"),
        (lambda: base().before("e", "x").within(1), "unknown edge 'x'"),
        (lambda: base().edge("g", "A", "Z").within(1), "unknown vertex 'Z'"),
        (lambda: base().vertex("A").within(1), "vertex name 'A' is already used"),
        (lambda: base().edge("A", "A", "B").within(1), "edge name 'A' is already used"),
        (lambda: base().vertex("C").within(1), "vertex 'C' is not connected"),
        (lambda: base().vertex("edges").within(1), "reserved word"),
        (lambda: base().vertex("1x").within(1), "not an identifier"),
        (lambda: base(), "needs a window"),
        (lambda: base().within("0.5", "us"), "whole number of microseconds"),
        (lambda: base().within(-1), "cannot be negative"),
        (lambda: base().within(1, "weeks"), "unknown time unit"),
        (lambda: base().within("abc"), "not a number"),
        (lambda: base().within_edges(0), "at least 1 edge"),
        (lambda: base().within("1e50"), "below 2"),
        (lambda: base().order("e"), "at least two edges"),
        (lambda: DDSTBuilder().within(1), "at least one vertex and one edge"),
    ],
)
def test_builder_errors(builder, words):
    with pytest.raises(DDSTQueryError, match=words):
        builder().build()


def test_builder_wildcards_and_order_chain():
    q = (
        base()
        .vertex("C", "*")
        .edge("g", "B", "C", "*")
        .order("e", "f", "g")
        .within_edges(3)
        .build()
    )
    assert q.vertex("C").label is None and q.edge("g").label is None
    assert q.order == (("e", "f"), ("f", "g"))
    assert str(q.window) == "3 EDGES"


def test_window_us_is_exact():
    assert window_us("0.1", "s") == 100_000
    assert window_us("1.000001", "s") == 1_000_001
    assert window_us(90, "min") == 5_400_000_000
    assert str(Window("time", 5_400_000_000)) == "90 min"
    assert str(Window("time", 1_000_001)) == "1000001 us"


# -- round trip of random queries ------------------------------------------------------------

NAMES = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,5}", fullmatch=True).filter(
    lambda s: s.lower() not in {"query", "vertices", "edges", "order", "within"}
)
LABELS = st.one_of(
    st.none(), NAMES, st.text(min_size=0, max_size=6), st.from_regex(r"[0-9]{1,3}", fullmatch=True)
)


@st.composite
def random_queries(draw: st.DrawFn) -> DDSTQuery:
    names = draw(st.lists(NAMES, min_size=3, max_size=8, unique=True))
    nv = draw(st.integers(1, (len(names) + 1) // 2))  # edges >= nv - 1: a spanning tree
    vnames, enames = names[:nv], names[nv:]
    vertices = tuple(QueryVertex(v, draw(LABELS)) for v in vnames)
    edges = []
    for k, e in enumerate(enames):
        a = vnames[min(k + 1, nv - 1)] if k < nv - 1 else draw(st.sampled_from(vnames))
        b = vnames[draw(st.integers(0, min(k, nv - 1)))]
        edges.append(QueryEdge(e, a, b, draw(LABELS)))
    rank = draw(st.permutations(enames))
    order = tuple((a, b) for a in enames for b in enames
                  if rank.index(a) < rank.index(b) and draw(st.booleans()))  # fmt: skip
    window = draw(st.one_of(st.builds(Window, st.just("time"), st.integers(0, 10**13)),
                            st.builds(Window, st.just("count"), st.integers(1, 10**6))))  # fmt: skip
    return DDSTQuery(draw(NAMES), vertices, tuple(edges), order, window)


@settings(max_examples=150, deadline=None)
@given(random_queries())
def test_to_text_round_trips(q: DDSTQuery):
    assert parse_ddst(q.to_text()) == q
