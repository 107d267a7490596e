"""The subscriptions language: `id: pattern` lines, comments, errors at line:column."""

from __future__ import annotations

import pytest

from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.sequences import looks_like_subscriptions, parse_subscriptions
from graphcep.patterns.sequences import Var


def test_lines_comments_and_quoted_symbols():
    subs = parse_subscriptions('# header\nssh: 22.@x.22.@x  # probe\n\n'
                               '"web 1": "10.0.0.1".@y // c\n7: a')
    assert [s.id for s in subs.subscriptions] == ["ssh", "web 1", "7"]
    assert subs.subscriptions[0].pattern.items == ("22", Var("x"), "22", Var("x"))
    assert subs.subscriptions[1].pattern.items == ("10.0.0.1", Var("y"))


@pytest.mark.parametrize(("text", "line", "column", "words"), [
    ("a: x.", 1, 6, "subscription 'a': expected a constant"),
    ("ok: x\nb x", 2, 3, "subscription 'b': expected ':'"),
    ("a: @ y", 1, 6, "right after '@'"),
    ("a: x y", 1, 6, "one subscription per line"),
    ("a: x\nb: y$", 2, 5, "unexpected character '$'"),
    ("a: x\na: y", 2, 1, "defined twice (first at line 1:1)"),
    ('a: ""', 1, 4, "a constant cannot be empty (an @variable matches any symbol"),
    ("a: @\u00fc", 1, 5, "unexpected character '\u00fc' (variable names are letters"),
    ("a: x.\u00fc", 1, 6, "(quote symbols holding it"),
    # a line that ends too soon: the error is at its end, not on the next line
    ("a: x.\n", 1, 6, "found the end of the line"),
    ("a: x.\nb: y", 1, 6, "found the end of the line"),
    ("p1: a.@x.b.@\n", 1, 13, "right after '@'"),
    ("a: @\nb: y", 1, 5, "right after '@'"),
    ("b\nc: y", 1, 2, "expected ':'"),
])
def test_errors_point_at_line_and_column(text, line, column, words):
    with pytest.raises(QuerySyntaxError) as info:
        parse_subscriptions(text)
    assert (info.value.line, info.value.column) == (line, column)
    assert words in str(info.value)


@pytest.mark.parametrize(("text", "expected"), [
    ("ssh: 22.@x.22.@x", True),
    ("# c\n a : b . @c\n\n", True),
    ('ssh: 22.@x\nweb "10.0.0.1".@y', True),  # a mistake on line 2: its parser says so
    ("{ x1 e1 x2; }", False),
    ("VERTICES A, B; EDGES x: A -> B; WITHIN 5 s", False),
    ("<#X ~> #Y>[0, 1]", False),
    ("", False),
])
def test_sniffing(text, expected):
    assert looks_like_subscriptions(text) is expected
