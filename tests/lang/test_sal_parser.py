"""Tests for the SAL front end: tokenizer, parser, errors, round trip and fuzzing."""

from __future__ import annotations

import dataclasses
import pickle
from fractions import Fraction
from pathlib import Path
from typing import cast

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from graphcep.lang import QuerySyntaxError, parse_file, parse_program, parse_query, tokenize
from graphcep.lang.listings import LISTING_1, LISTING_2, LISTING_3
from graphcep.patterns.program import (
    Connection,
    FeatureDef,
    FilterDef,
    HashSpec,
    KeyedStream,
    Partition,
)
from graphcep.patterns.subgraph import (
    Comparison,
    EdgePattern,
    EdgePredicate,
    QueryError,
    SubgraphQuery,
    TemporalConstraint,
    TimeRef,
    VertexConstraint,
)
from tests.paths import EXAMPLES

S = 1_000_000  # microseconds per second

# The paper's own capitalisation and line breaks (Listing 3 as printed).
LISTING_3_PAPER_STYLE = """
WindowSize = 1000
Netflows = VastStream ("localhost", 9999);
PARTITION Netflows By SourceIp, DestIp;
HASH SourceIp WITH IpHashFunction;
HASH DestIp WITH IpHashFunction;
Top1000 = FOREACH Netflows
             GENERATE topk(DestIp, 100000, 10000, 10000);
Subgraph on Netflows with source (SourceIp)
  and target (DestIp)
{
   target e1 bait;
   target e2 controller;
   starttime(e2) > endtime(e1);
   starttime(e2) - endtime(e1) < 20;
   bait in Top1000;
   controller not in Top1000;
}
"""


def start(edge: str) -> TimeRef:
    return TimeRef(edge, "start")


def end(edge: str) -> TimeRef:
    return TimeRef(edge, "end")


def constraint_of(text: str) -> TemporalConstraint:
    """The single temporal constraint of a two-edge query with ``text`` in its block."""
    q = parse_query(f"{{ a e1 b; b e2 c; b e3 d; {text}; }}")
    assert len(q.temporal) == 1
    return q.temporal[0]


def error_of(text: str, source: str = "<query>") -> QuerySyntaxError:
    with pytest.raises(QuerySyntaxError) as info:
        parse_program(text, source)
    return info.value


def where(text: str) -> tuple[int, int]:
    err = error_of(text)
    return err.line, err.column


WATERING_HOLE_BLOCK = dict(
    edges=(EdgePattern("target", "e1", "bait"), EdgePattern("target", "e2", "controller")),
    temporal=(
        TemporalConstraint(start("e2"), end("e1"), ">", Fraction(0)),
        TemporalConstraint(start("e2"), end("e1"), "<", Fraction(20 * S)),
    ),
    vertex_constraints=(
        VertexConstraint("bait", "Top1000", False),
        VertexConstraint("controller", "Top1000", True),
    ),
)


# --------------------------------------------------------------------------- listings


def test_listing_1_triangle() -> None:
    q = parse_query(LISTING_1)
    assert q == SubgraphQuery(
        "query1",
        (
            EdgePattern("x1", "e1", "x2"),
            EdgePattern("x2", "e2", "x3"),
            EdgePattern("x3", "e3", "x1"),
        ),
        (
            TemporalConstraint(start("e3"), start("e1"), "<=", Fraction(10 * S)),
            TemporalConstraint(start("e1"), start("e2"), "<", Fraction(0)),
            TemporalConstraint(start("e2"), start("e3"), "<", Fraction(0)),
        ),
    )
    assert q.stream is None and (q.source_field, q.target_field) == ("src", "dst")


def test_listing_2_bare_block_with_undefined_feature() -> None:
    q = parse_query(LISTING_2)
    assert q == SubgraphQuery("query1", **WATERING_HOLE_BLOCK)


@pytest.mark.parametrize("text", [LISTING_3, LISTING_3_PAPER_STYLE])
def test_listing_3_full_program(text: str) -> None:
    prog = parse_program(text)
    assert prog.constants == {"WindowSize": 1000}
    assert prog.connections == {"Netflows": Connection("Netflows", "vast", ("localhost", 9999))}
    assert prog.partitions == [Partition("Netflows", ("SourceIp", "DestIp"))]
    assert prog.hashes == [
        HashSpec("SourceIp", "IpHashFunction"),
        HashSpec("DestIp", "IpHashFunction"),
    ]
    assert prog.features == {
        "Top1000": FeatureDef("Top1000", "Netflows", "topk", "DestIp", (100000, 10000, 10000))
    }
    assert prog.filters == {} and prog.keyed_streams == {}
    assert prog.queries == [
        SubgraphQuery(
            "query1",
            **WATERING_HOLE_BLOCK,
            stream="Netflows",
            source_field="SourceIp",
            target_field="DestIp",
        )
    ]


def test_example_files_match_listings() -> None:
    assert parse_file(EXAMPLES / "triangle.sal").queries == [parse_query(LISTING_1)]
    assert parse_file(EXAMPLES / "watering_hole.sal").queries == [parse_query(LISTING_2)]
    assert parse_file(EXAMPLES / "watering_hole_full.sal") == parse_program(LISTING_3)


# --------------------------------------------------------------------------- tokenizer


def test_tokenizer_positions_and_comments() -> None:
    text = 'a // x\n# y\n/* multi\nline */ "s\\"t" 1.50\n  ;'
    toks = tokenize(text)
    assert [(t.kind, t.value, t.line, t.column) for t in toks] == [
        ("IDENT", "a", 1, 1),
        ("STRING", 's"t', 4, 9),
        ("NUMBER", "1.50", 4, 16),
        ("OP", ";", 5, 3),
        ("EOF", "", 5, 4),
    ]


def test_tokenizer_operators_and_dot() -> None:
    vals = [t.value for t in tokenize("e1.DestPort==80;a!=b<=c>=d<e>f=g+-(){},")]
    assert vals[:5] == ["e1", ".", "DestPort", "==", "80"]
    assert [v for v in vals if not v.isalnum() and v not in (".", "==", ";", "")] == [
        "!=",
        "<=",
        ">=",
        "<",
        ">",
        "=",
        "+",
        "-",
        "(",
        ")",
        "{",
        "}",
        ",",
    ]


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("a @", 1, 3, "unexpected character '@'"),
        ("x = 'udp'", 1, 5, "double quotes"),
        ('\n  "abc', 2, 3, "unterminated string"),
        ('"a\\qb"', 1, 3, "unknown escape"),
        ("a /* never closed", 1, 3, "unterminated block comment"),
        ("x = 10s;", 1, 5, "malformed number '10s'"),
        ("x = 1e999;", 1, 5, "out of range"),
    ],
)
def test_tokenizer_errors(text: str, line: int, column: int, fragment: str) -> None:
    with pytest.raises(QuerySyntaxError) as info:
        tokenize(text)
    assert (info.value.line, info.value.column) == (line, column)
    assert fragment in str(info.value)


# --------------------------------------------------------------------------- temporal constraints


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("starttime(e3) - starttime(e1) <= 10", (start("e3"), start("e1"), "<=", 10 * S)),
        ("starttime(e1) < starttime(e2)", (start("e1"), start("e2"), "<", 0)),
        ("starttime(e2) > endtime(e1)", (start("e2"), end("e1"), ">", 0)),
        ("starttime(e2) - endtime(e1) < 20", (start("e2"), end("e1"), "<", 20 * S)),
        ("starttime(e2) + 5 <= starttime(e3)", (start("e2"), start("e3"), "<=", -5 * S)),
        ("10 >= starttime(e3) - starttime(e1)", (start("e3"), start("e1"), "<=", 10 * S)),
        ("starttime(e1) >= 100", (start("e1"), None, ">=", 100 * S)),
        ("- starttime(e1) < 5", (start("e1"), None, ">", -5 * S)),
        ("starttime(e1) == 2", (start("e1"), None, "=", 2 * S)),
        ("endtime(e1) = starttime(e2)", (end("e1"), start("e2"), "=", 0)),
        ("-starttime(e2) + starttime(e1) > -1", (start("e1"), start("e2"), ">", -S)),
        ("starttime(e2) - (starttime(e1) + 2) <= 3", (start("e2"), start("e1"), "<=", 5 * S)),
        (
            "1 + starttime(e2) < 2 + starttime(e1) + 0.5",
            (start("e2"), start("e1"), "<", S * 3 // 2),
        ),
        ("starttime(e1) - starttime(e1) + starttime(e2) < 1", (start("e2"), None, "<", S)),
        ("StartTime(e2) - ENDTIME(e1) < 0.000001", (start("e2"), end("e1"), "<", 1)),
    ],
)
def test_temporal_normalisation(
    text: str, expected: tuple[TimeRef, TimeRef | None, str, int]
) -> None:
    plus, minus, op, bound = expected
    assert constraint_of(text) == TemporalConstraint(
        plus, minus, cast(Comparison, op), Fraction(bound)
    )


def test_decimal_bounds_are_exact() -> None:
    c = constraint_of("starttime(e2) - starttime(e1) <= 0.1234567")
    assert c.bound_us == Fraction(1234567, 10)
    c = constraint_of("starttime(e2) - starttime(e1) <= 1e-3")
    assert c.bound_us == 1000
    c = constraint_of("starttime(e2) - starttime(e1) <= 0.1 + 0.2")
    assert c.bound_us == Fraction(3 * S, 10)


@pytest.mark.parametrize(
    ("text", "fragment"),
    [
        ("starttime(e1) + starttime(e2) < 3", "2 positive"),
        ("starttime(e1) + starttime(e1) < 3", "coefficient 2"),
        ("starttime(e1) - starttime(e1) < 3", "no edge time"),
        ("1 < 2", "no edge time"),
        ("starttime(e1) - starttime(e2) - starttime(e3) < 3", "2 negative"),
    ],
)
def test_non_difference_constraints_rejected(text: str, fragment: str) -> None:
    err = error_of(f"{{ a e1 b; b e2 c; b e3 d;\n  {text}; }}")
    assert (err.line, err.column) == (2, 3)
    assert "only differences of two edge times" in str(err)
    assert fragment in str(err)


# --------------------------------------------------------------------------- other block statements


def test_vertex_constraints_and_edge_predicates() -> None:
    q = parse_query(
        '{ a e1 b; a IN F; b Not In G; e1.DestPort == 80; e1.Proto != "udp"; '
        "e1.Bytes >= -1.5; e1.x = 2; e1.y < 3; e1.z <= 4; e1.w > 5; }"
    )
    assert q.vertex_constraints == (VertexConstraint("a", "F"), VertexConstraint("b", "G", True))
    assert q.edge_predicates == (
        EdgePredicate("e1", "DestPort", "==", 80),
        EdgePredicate("e1", "Proto", "!=", "udp"),
        EdgePredicate("e1", "Bytes", ">=", -1.5),
        EdgePredicate("e1", "x", "==", 2),
        EdgePredicate("e1", "y", "<", 3),
        EdgePredicate("e1", "z", "<=", 4),
        EdgePredicate("e1", "w", ">", 5),
    )
    assert isinstance(q.edge_predicates[0].value, int)


def test_block_statements_in_any_order() -> None:
    q = parse_query("{ starttime(e2) > starttime(e1); x in F; e1.p == 1; x e1 y; y e2 z; }")
    assert q.edge_names == ("e1", "e2")
    assert q.temporal == (TemporalConstraint(start("e2"), start("e1"), ">"),)


# --------------------------------------------------------------------------- program statements


def test_case_insensitive_keywords() -> None:
    text = """
    s = csvstream("f.csv");
    k = stream s by SourceIp;
    f = ForEach k Generate TOPK(DestIp, 10, 5, 2);
    w = filter s by DestPort == 80 and Proto == "tcp";
    partition s by SourceIp;
    hash SourceIp with H;
    subgraph q1 ON w With Target(b) AND Source(a) { x E1 y; x IN f; STARTTIME(E1) >= 0; }
    """
    prog = parse_program(text)
    assert prog.connections["s"] == Connection("s", "csv", ("f.csv",))
    assert prog.keyed_streams["k"] == KeyedStream("k", "s", ("SourceIp",))
    assert prog.features["f"] == FeatureDef("f", "k", "topk", "DestIp", (10, 5, 2))
    assert prog.filters["w"] == FilterDef(
        "w",
        "s",
        (EdgePredicate("s", "DestPort", "==", 80), EdgePredicate("s", "Proto", "==", "tcp")),
    )
    q = prog.query("q1")
    assert (q.stream, q.source_field, q.target_field) == ("w", "a", "b")
    assert q.edge_names == ("E1",)
    assert q.temporal == (TemporalConstraint(start("E1"), None, ">="),)


@pytest.mark.parametrize(
    ("call", "kind", "args"),
    [
        ('VastStream("h", 1)', "vast", ("h", 1)),
        ('NetflowV5Stream("0.0.0.0", 2055)', "netflow5", ("0.0.0.0", 2055)),
        ('NetflowV5Stream("a.nf5")', "netflow5", ("a.nf5",)),
        ('SnapStream("g.txt")', "snap", ("g.txt",)),
        ('CsvStream("g.csv")', "csv", ("g.csv",)),
        ('JsonStream("g.jsonl")', "jsonl", ("g.jsonl",)),
        ('ParquetStream("g.parquet")', "parquet", ("g.parquet",)),
    ],
)
def test_connections(call: str, kind: str, args: tuple[object, ...]) -> None:
    assert parse_program(f"S = {call};").connections["S"] == Connection("S", kind, args)


def test_constants_substitution() -> None:
    text = """
    WindowSize = 1000
    Host = "localhost"
    Port = 9999;
    Half = 0.5
    Neg = -2
    Alias = WindowSize
    N = VastStream(Host, Port);
    F = FOREACH N GENERATE topk(DestIp, WindowSize, 100, 10);
    E = FOREACH N GENERATE ehsum(Bytes, Alias);
    W = FILTER N BY DestPort == Port;
    SUBGRAPH ON N {
        a e1 b; b e2 c;
        starttime(e2) - starttime(e1) <= WindowSize;
        starttime(e2) - starttime(e1) >= Half + Neg;
        e1.DestPort != Port;
    }
    """
    prog = parse_program(text)
    assert prog.constants == {
        "WindowSize": 1000,
        "Host": "localhost",
        "Port": 9999,
        "Half": 0.5,
        "Neg": -2,
        "Alias": 1000,
    }
    assert prog.connections["N"].args == ("localhost", 9999)
    assert prog.features["F"].params == (1000, 100, 10)
    assert prog.features["E"].params == (1000,)
    assert prog.filters["W"].predicates[0].value == 9999
    q = prog.queries[0]
    assert q.temporal[0].bound_us == 1000 * S
    assert q.temporal[1].bound_us == Fraction(-3 * S, 2)
    assert q.edge_predicates == (EdgePredicate("e1", "DestPort", "!=", 9999),)


def test_query_names() -> None:
    text = "{ a e1 b; }\nSUBGRAPH named { a e1 b; }\n{ a e2 b; }"
    assert [q.name for q in parse_program(text).queries] == ["query1", "named", "query3"]
    assert parse_query(text).name == "query1"


def test_empty_program_and_no_query() -> None:
    assert parse_program("// nothing\n").queries == []
    assert parse_program("").queries == []
    with pytest.raises(QuerySyntaxError) as info:
        parse_query("W = 1;\n")
    assert (info.value.line, info.value.column) == (2, 1)
    assert "expected a SUBGRAPH query" in str(info.value)


def test_feature_defined_after_use_is_an_error() -> None:
    text = 'S = CsvStream("f");\nSUBGRAPH ON S { a e1 b; a in T; }\nT = FOREACH S GENERATE ehsum(x, 5);'
    err = error_of(text)
    assert (err.line, err.column) == (2, 30)
    assert "used before its definition at line 3:1" in str(err)


# --------------------------------------------------------------------------- error positions


@pytest.mark.parametrize(
    ("text", "line", "column", "fragment"),
    [
        ("{\n  x1 e1 x2 e2;\n}", 2, 12, "expected ';' after the topology line, found 'e2'"),
        ("{ a e1 b; b e1 c; }", 1, 13, "edge variable 'e1' is defined twice (first at line 1:5)"),
        ("{ a e1 b; b c e1; }", 1, 15, "'e1' is used both as an edge"),
        ("{ a e1 b; b a c; }", 1, 13, "'a' is used both as a vertex"),
        ("{ a e1 b;\n starttime(e9) < 1; }", 2, 12, "'e9' is not an edge of this query"),
        ("{ a e1 b; starttime(a) < 1; }", 1, 21, "'a' is a vertex, not an edge"),
        ("{ a e1 b; e2.Port == 1; }", 1, 11, "'e2' is not an edge"),
        ("{ a e1 b; z in F; }", 1, 11, "'z' is not a vertex"),
        ("{ a e1 b; e1 in F; }", 1, 11, "'e1' is an edge, not a vertex"),
        ("{ a e1 b;", 1, 10, "'}' closing the query block opened at line 1:1"),
        ("{ }", 1, 1, "no topology lines"),
        ("{ a e1 b; starttime(e1) != 1; }", 1, 25, "expected a comparison"),
        ("{ a e1 b; starttime(e1) < 1 < 2; }", 1, 29, "';' after the temporal constraint"),
        ("{ a e1 b; starttime(e1) < W; }", 1, 27, "unknown constant 'W'"),
        ('W = "s"\n{ a e1 b; starttime(e1) < W; }', 2, 27, "string, not a number"),
        ("{ a e1 b; e1.Port ~ 1; }", 1, 19, "unexpected character '~'"),
        ("{ a e1 b; e1.Port <> 1; }", 1, 20, "expected a number"),
        ("{ a e1 b; a not F; }", 1, 17, "'in' after 'not'"),
        ("SUBGRAPH ON Nope { a e1 b; }", 1, 13, "unknown stream 'Nope'"),
        ("W = 1;\n{ a e1 b; a in Top1000; }", 2, 16, "unknown feature 'Top1000'"),
        ("W = 1;\nW = 2;", 2, 1, "'W' is already defined at line 1:1"),
        ("Stream = 1;", 1, 1, "reserved word"),
        ("X = FooStream(1);", 1, 5, "unknown stream function 'FooStream' (known: VastStream"),
        ('X = VastStream("h");', 1, 19, 'expected VastStream("host", port), found 1 argument'),
        ('X = VastStream("h", "p");', 1, 21, 'expected VastStream("host", port)'),
        ('S = CsvStream("f");\nF = FOREACH S GENERATE topk(a, 1, 2);', 2, 36, "topk takes 4"),
        ('S = CsvStream("f");\nF = FOREACH S GENERATE ehsum(a, 1, 2);', 2, 36, "ehsum takes 2"),
        (
            'S = CsvStream("f");\nF = FOREACH S GENERATE median(a, 1);',
            2,
            24,
            "unknown feature operator 'median'",
        ),
        ('S = CsvStream("f");\nF = FOREACH S GENERATE ehsum(a, 0);', 2, 33, "positive integer"),
        ('S = CsvStream("f");\nF = FOREACH S GENERATE ehsum(a, 1.5);', 2, 33, "positive integer"),
        (
            'S = CsvStream("f");\nF = FOREACH S GENERATE ehsum(a, 2);\nG = FOREACH F GENERATE ehsum(a, 2);',
            3,
            13,
            "'F' is a feature, not a stream",
        ),
        ("a = 1 b = 2", 1, 7, "';' or a line break after the constant"),
        ("X = ;", 1, 5, "expected a number"),
        ("PARTITION", 1, 10, "a stream name after PARTITION"),
        (
            'S = CsvStream("f");\nSUBGRAPH ON S WITH source(a) AND source(b) { a e1 b; }',
            2,
            34,
            "target(FIELD)",
        ),
        (
            'S = CsvStream("f");\nF = FILTER S BY x == 1 y;',
            2,
            24,
            "AND or ';' after the filter condition",
        ),
        (
            "SUBGRAPH q { a e1 b; }\nSUBGRAPH q { a e1 b; }",
            2,
            10,
            "a query named 'q' is already defined",
        ),
        ("x1 e1 x2;", 1, 1, "expected a statement"),
        ("{ a e1 b; " + "(" * 70 + "starttime(e1)", 1, 62, "nested more than 50 deep"),
    ],
)
def test_error_positions(text: str, line: int, column: int, fragment: str) -> None:
    err = error_of(text)
    assert (err.line, err.column) == (line, column), str(err)
    assert fragment in str(err), str(err)


def test_error_message_format(tmp_path: Path) -> None:
    path = tmp_path / "query.sal"
    path.write_text("// header\n{\n    x1 e1 x2 e2;\n}\n")
    with pytest.raises(QuerySyntaxError) as info:
        parse_file(path)
    err = info.value
    assert (err.line, err.column, err.source) == (3, 14, str(path))
    assert err.expected == "';' after the topology line"
    assert err.found == "'e2'"
    lines = str(err).split("\n")
    assert lines[0] == f"{path}:3:14: expected ';' after the topology line, found 'e2'"
    assert lines[1] == "        x1 e1 x2 e2;"
    assert lines[2] == " " * 17 + "^"
    assert isinstance(err, ValueError)


def test_error_caret_follows_tabs_and_pickles() -> None:
    err = error_of("{\n\ta e1 b c;\n}")
    assert str(err).split("\n")[2] == "    \t" + " " * 7 + "^"
    clone = pickle.loads(pickle.dumps(err))
    assert str(clone) == str(err) and (clone.line, clone.column) == (err.line, err.column)


def test_end_of_input_is_described() -> None:
    err = error_of("{ a e1")
    assert err.found == "end of input"
    assert (err.line, err.column) == (1, 7)


# --------------------------------------------------------------------------- round trip


@pytest.mark.parametrize("text", [LISTING_1, LISTING_2, LISTING_3])
def test_round_trip_listings(text: str) -> None:
    q = parse_query(text)
    back = parse_query(q.to_sal())
    # to_sal() writes only the { ... } block: the header fields are not part of it.
    assert back == dataclasses.replace(q, stream=None, source_field="src", target_field="dst")


VERTICES = ("x1", "x2", "x3", "x4")
OPS = ("<", "<=", ">", ">=", "=")
PRED_OPS = ("==", "!=", "<", "<=", ">", ">=")


@st.composite
def queries(draw: st.DrawFn) -> SubgraphQuery:
    n_edges = draw(st.integers(1, 5))
    n_vertices = draw(st.integers(1, 4))
    vertex = st.sampled_from(VERTICES[:n_vertices])
    edges = tuple(EdgePattern(draw(vertex), f"e{i + 1}", draw(vertex)) for i in range(n_edges))
    names = [e.name for e in edges]
    used = sorted({v for e in edges for v in (e.src, e.dst)})
    ref = st.builds(TimeRef, st.sampled_from(names), st.sampled_from(("start", "end")))
    # Bounds with at most 13 significant digits survive to_sal()'s float formatting.
    bound = st.integers(-(10**12), 10**12).map(Fraction)
    temporal = []
    for _ in range(draw(st.integers(0, 4))):
        plus = draw(ref)
        minus = draw(st.none() | ref.filter(lambda r, p=plus: r != p))
        temporal.append(TemporalConstraint(plus, minus, draw(st.sampled_from(OPS)), draw(bound)))
    vcs = draw(
        st.lists(
            st.builds(
                VertexConstraint,
                st.sampled_from(used),
                st.sampled_from(("Top1000", "F_2")),
                st.booleans(),
            ),
            max_size=3,
        )
    )
    value = (
        st.integers(-(10**6), 10**6)
        | st.from_regex(r"[A-Za-z0-9_.: -]{0,8}", fullmatch=True)
        | st.decimals(-1000, 1000, places=3).map(float)
    )
    preds = draw(
        st.lists(
            st.builds(
                EdgePredicate,
                st.sampled_from(names),
                st.sampled_from(("DestPort", "Proto")),
                st.sampled_from(PRED_OPS),
                value,
            ),
            max_size=3,
        )
    )
    return SubgraphQuery("query1", edges, tuple(temporal), tuple(vcs), tuple(preds))


@settings(max_examples=300, deadline=None)
@given(queries())
def test_round_trip_random_queries(q: SubgraphQuery) -> None:
    assert parse_query(q.to_sal()) == q


def test_round_trip_keeps_exact_decimal_bounds() -> None:
    q = parse_query("{ a e1 b; b e2 c; starttime(e2) - starttime(e1) <= 0.000015; }")
    assert q.temporal[0].bound_us == 15
    assert parse_query(q.to_sal()) == q  # str() gives '1.5e-05', which SAL accepts


# --------------------------------------------------------------------------- fuzzing

VOCAB = (
    "{", "}", "(", ")", ";", ",", ".", "=", "==", "!=", "<", "<=", ">", ">=", "+", "-",
    "x1", "e1", "e2", "x2", "in", "not", "starttime", "endtime", "SUBGRAPH", "ON", "WITH",
    "source", "target", "AND", "PARTITION", "HASH", "BY", "STREAM", "FOREACH", "GENERATE",
    "FILTER", "topk", "ehsum", "VastStream", "CsvStream", "S", "F", "W", "10", "0.5",
    "1e3", '"str"', "\n", "//c\n", "/*c*/", "Top1000", "DestPort",
)  # fmt: skip

LISTINGS = (LISTING_1, LISTING_2, LISTING_3, LISTING_3_PAPER_STYLE)


def parses_or_reports(text: str) -> None:
    try:
        parse_program(text)
    except QuerySyntaxError as err:
        assert err.line >= 1 and err.column >= 1
        str(err)
    except QueryError as err:  # pragma: no cover - would be a parser bug
        raise AssertionError(f"QueryError leaked: {err}") from err


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.text(max_size=200))
def test_fuzz_random_text(text: str) -> None:
    parses_or_reports(text)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.sampled_from(VOCAB), max_size=60))
def test_fuzz_token_soup(words: list[str]) -> None:
    parses_or_reports(" ".join(words))


@st.composite
def mutated_listing(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(LISTINGS))
    for _ in range(draw(st.integers(1, 4))):
        i = draw(st.integers(0, len(text)))
        j = draw(st.integers(i, min(len(text), i + 12)))
        insert = draw(st.sampled_from(VOCAB) | st.text(max_size=3))
        text = text[:i] + insert + text[j:]
    return text


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(mutated_listing())
def test_fuzz_mutated_listings(text: str) -> None:
    parses_or_reports(text)


@pytest.mark.parametrize(
    ("text", "column", "seconds", "written"),
    [
        ("{ a e1 b; b e2 c; starttime(e2) - starttime(e1) <= 5 min; }", 54, "300", "5 min"),
        ("{ a e1 b; b e2 c; starttime(e2) <= starttime(e1) + 2 hours; }", 54, "7200", "2 hours"),
        ("{ a e1 b; b e2 c; starttime(e2) - starttime(e1) < 1.5 ms; }", 55, "0.0015", "1.5 ms"),
        ("W = 5 min\n{ a e1 b; }", 7, "300", "5 min"),
        ("{ a e1 b; b e2 c; starttime(e2) - starttime(e1) <= 5min; }", 52, "300", ""),
        ("{ a e1 b; b e2 c; starttime(e2) - starttime(e1) <= 1d; }", 52, "86400", ""),
    ],
)
def test_a_duration_with_a_unit_says_how_durations_are_written(
    text: str, column: int, seconds: str, written: str
) -> None:
    err = error_of(text)
    assert err.column == column, str(err)
    first = str(err).split("\n")[0]
    said = f"durations are plain seconds, with no unit: write {seconds}"
    assert said + (f", not '{written}'" if written else "") in first, first
