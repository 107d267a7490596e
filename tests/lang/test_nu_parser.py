"""The ν-expression parser: the syntax table, MaTiNA's rules and the quirks fixed, errors
at line:column."""

from __future__ import annotations

import pytest

from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.nu import parse_nu, parse_nu_file, tokenize_nu
from graphcep.patterns.nu import (
    Alloc,
    AnyNode,
    Concat,
    Const,
    Delay,
    Link,
    Or,
    Release,
    Repeat,
    Shuffle,
    Var,
)

S = 1_000_000


@pytest.mark.parametrize(("text", "expr"), [
    ("a ~> b", Link(Const("a"), Const("b"))),
    ('"10.0.0.1" ~> @', Link(Const("10.0.0.1"), AnyNode())),
    ("#X ~> X!", Link(Alloc(("X",), Var("X")), Release(Var("X"), ("X",)))),
    ("#X! ~> a", Link(Release(Alloc(("X",), Var("X")), ("X",)), Const("a"))),
    ("a ~> b . c ~> d", Concat((Link(Const("a"), Const("b")), Link(Const("c"), Const("d"))))),
    ("a ~> b | c ~> d", Or((Link(Const("a"), Const("b")), Link(Const("c"), Const("d"))))),
    ("a ~> b or c ~> d", Or((Link(Const("a"), Const("b")), Link(Const("c"), Const("d"))))),
    ("a ~> b % c ~> d", Shuffle((Link(Const("a"), Const("b")), Link(Const("c"), Const("d"))))),
    ("(a ~> b)*", Repeat(Link(Const("a"), Const("b")), 0, None)),
    ("(a ~> b)+", Repeat(Link(Const("a"), Const("b")), 1, None)),
    ("(a ~> b)?", Repeat(Link(Const("a"), Const("b")), 0, 1)),
    ("<a ~> b>[0.5, 2]", Delay(Link(Const("a"), Const("b")), S // 2, 2 * S)),
    ("<a ~> b>[3]", Delay(Link(Const("a"), Const("b")), 3 * S, 3 * S)),  # exactly, as MaTiNA
    ("<a ~> b>[1, inf]", Delay(Link(Const("a"), Const("b")), S, None)),
    ("#{X, Y} X ~> Y", Alloc(("X", "Y"), Link(Var("X"), Var("Y")))),
    ("#X ~> a {X}!", Release(Link(Alloc(("X",), Var("X")), Const("a")), ("X",))),
])
def test_syntax(text, expr):
    assert parse_nu(text).expr == expr


@pytest.mark.parametrize("text", [
    "<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]",
    "a ~> #X . <(X! ~> #X)* . X! ~> b>[0, 1]",
    "(@ ~> @)* % (<#X ~> b % #Y ~> b>[0, 0.02])",
    '#{X} ((X ~> "a b")+ | @ ~> X) {X}!',
])
def test_text_parses_back_to_the_same_pattern(text):
    pattern = parse_nu(text)
    assert parse_nu(pattern.text()) == pattern


def test_precedence_is_matinas():
    """& < % < | < #{..} < {..}! < . and ~> < postfix."""
    a, b, c = (Link(Const(n), Const(n)) for n in "abc")
    assert parse_nu("a~>a | b~>b % c~>c").expr == Shuffle((Or((a, b)), c))
    assert parse_nu("a~>a . b~>b | c~>c").expr == Or((Concat((a, b)), c))
    assert parse_nu("a~>a . b~>b*").expr == Concat((a, Repeat(b, 0, None)))


def test_allocation_and_release_in_the_middle_of_a_sequence():
    """As MaTiNA: an allocation after '.' covers the rest of the sequence; a release
    closes the sequence before it, and '.' may follow."""
    a, b, c = (Link(Const(n), Var("X")) for n in "abc")
    assert parse_nu("a ~> #X . #{X} b ~> X . c ~> X").expr == Concat(
        (Link(Const("a"), Alloc(("X",), Var("X"))), Alloc(("X",), Concat((b, c)))))
    assert parse_nu("a ~> #X . b ~> X {X}! . c ~> #X").expr == Concat(
        (Release(Concat((Link(Const("a"), Alloc(("X",), Var("X"))), b)), ("X",)),
         Link(Const("c"), Alloc(("X",), Var("X")))))


def test_a_name_is_a_variable_where_the_text_allocates_or_releases_it():
    pattern = parse_nu("#X ~> a . X ~> Y . #Z ~> Y {Z}!")
    assert pattern.variables() == {"X", "Z"} and pattern.constants() == {"a", "Y"}


def test_a_variable_read_but_never_allocated_is_refused():
    """It would hold no node, so the pattern could never match: say so, where it is read."""
    with pytest.raises(QuerySyntaxError, match="'X' is read but never allocated") as err:
        parse_nu("a ~> b . X! ~> c", source="q.nu")
    assert err.value.headline.startswith("q.nu:1:10: ")


def test_deep_nesting_is_refused_in_one_line():
    with pytest.raises(QuerySyntaxError, match="nests more than 50"):
        parse_nu("(" * 200 + "a ~> b" + ")" * 200)
    with pytest.raises(QuerySyntaxError, match="repetition marks"):
        parse_nu("(a ~> b)" + "*" * 500)


def test_a_trailing_variable_is_a_variable():
    """MaTiNA's scanner misses a '#name' at the end of the text (#a.#b fails there)."""
    assert parse_nu("#a ~> #b").variables() == {"a", "b"}


def test_comments_are_slash_slash_and_hash_is_allocation():
    pattern = parse_nu("// two fresh nodes\n#X ~> #Y  // and a comment")
    assert pattern.variables() == {"X", "Y"}


@pytest.mark.parametrize(("text", "where", "what"), [
    ("a ~> b & c ~> d", "1:8", "conjunction '&' is not supported"),
    ("a ~> b and c ~> d", "1:8", "conjunction '&' is not supported"),
    ("a ~> b ~> c", "1:8", "a link joins two nodes"),
    ("(a . b) ~> c", "1:1", "each end of a link is one node"),
    ("<a ~> b>[2, 1]", "1:14", "is empty"),
    ("<a ~> b>[0.0000001]", "1:10", "not a whole number of microseconds"),
    ("<a ~> b>[x]", "1:10", "a number of seconds"),
    ("a ~>", "1:5", "a node"),
    ("a ~> b .\n  (c ~> d", "2:10", "')' closing the group"),
    ("", "1:1", "holds no expression"),
    ("a ~> b )", "1:8", "the end of the expression"),
    ('#"x" ~> b', "1:2", "cannot be allocated"),
    ("a ~> b $", "1:8", "unexpected character '$'"),
    ("#{T} ~> c", "1:6", "a node"),
    # cut short: the end of the input is shown just after the last token, not below it
    ("a ~> b .\n\n\n", "1:9", "found end of input"),
    ("a ~> b . // then a comment\n", "1:9", "found end of input"),
    # no stream vertex is empty (the readers reject one): "" could never match
    ('a ~> ""', "1:6", 'the empty name "" is no node'),
    ("#{X, Y, X} (X ~> Y)", "1:9", "'X' is named twice"),
])
def test_errors_name_line_and_column(text, where, what):
    with pytest.raises(QuerySyntaxError) as err:
        parse_nu(text, source="q.nu")
    headline = err.value.headline
    assert headline.startswith(f"q.nu:{where}: "), headline
    assert what in headline


@pytest.mark.parametrize(("bound", "column"), [
    ("[0, 1e3]", 13), ("[1e3]", 10), ("[0, 1.5E2]", 13), ("[0x10]", 10), ("[1_000]", 10),
    ("[10s]", 10), ("[1.]", 10), ("[-1, 2]", 10), ("[0, -2]", 13)])
def test_a_delay_spelt_otherwise_says_how_delays_are_written(bound, column):
    """One line naming the bound as written and what a delay's bounds may be."""
    with pytest.raises(QuerySyntaxError) as err:
        parse_nu(f"<a ~> b>{bound}", source="q.nu")
    word = bound.strip("[]").split(", ")[-1 if column == 13 else 0]
    assert err.value.headline == (
        f"q.nu:1:{column}: malformed delay '{word}': a delay's bounds are seconds, written "
        "as digits with an optional decimal part (10, 0.5, 1000), the upper one also inf; "
        "no exponent, unit or sign")


def test_a_hash_comment_is_named_as_the_likely_mistake():
    """'# a triangle' allocates a and then finds 'triangle': the message says why."""
    with pytest.raises(QuerySyntaxError) as err:
        parse_nu("# a triangle\n<#X ~> #Y . Y ~> X>[0, 1]", source="q.nu")
    assert err.value.headline == (
        "q.nu:1:5: expected an operator (. | % * + ?) or the end of the expression, found "
        "'triangle' (line 1 opens with '# ': '#' allocates in a ν-expression, a comment is "
        "written '//')")


def test_an_arrow_for_a_link_is_named():
    with pytest.raises(QuerySyntaxError) as err:
        parse_nu("#X -> #Y", source="q.nu")
    assert err.value.headline == "q.nu:1:4: a link is written '~>', not '->'"


def test_a_file_is_named_after_its_stem(tmp_path):
    path = tmp_path / "ping_pong.nu"
    path.write_text("\ufeff<#X ~> #Y . Y ~> X>[0, 5]\n")  # a byte order mark is fine
    pattern = parse_nu_file(path)
    assert pattern.name == "ping_pong" and pattern.span_us() == 5 * S


@pytest.mark.parametrize(("stem", "name"), [("port-scan", "port_scan"),
                                            ("2024 scan", "_2024_scan"), ("--", "pattern")])
def test_a_stem_that_is_no_name_is_made_one(tmp_path, stem, name):
    """Each run of characters a name cannot hold becomes one ``_``; two files no longer
    share the name ``pattern`` because both stems had a dash."""
    path = tmp_path / f"{stem}.nu"
    path.write_text("<#X ~> #Y>[0, 5]\n")
    assert parse_nu_file(path).name == name


def test_tokens():
    assert [t.value for t in tokenize_nu("#{X,Y}X~>@.<a>[1]")] == [
        "#", "{", "X", ",", "Y", "}", "X", "~>", "@", ".", "<", "a", ">", "[", "1", "]", ""]
