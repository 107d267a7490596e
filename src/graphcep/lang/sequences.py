"""Subscriptions files (``.subs``): one ``id: pattern`` per line.

A pattern is constants and ``@name`` variables joined by ``.`` (du Mouza, Rigaux,
Scholl, SSDBM 2006): ``ssh_probe: 22.@x.22.@x``. A constant is a name, a run of digits
and letters (``22``, ``443``), or a ``"quoted string"`` for symbols holding other
characters (``"10.0.0.1"``). An id is a name, digits or a quoted string; ids are
distinct. ``#`` and ``//`` start comments to the end of the line (nothing here uses
``#``). Errors are :class:`~graphcep.lang.errors.QuerySyntaxError` with line:column,
naming the subscription.

A *subscriptions source* is a ``.subs`` file or a directory of them
(:func:`parse_subscriptions_source`): a directory's ``*.subs`` files are read in name
order and merged into one set, ids distinct across all of them (an error names the
second definition's ``file:line:col`` and the first one's); a directory holding no
``.subs`` file is an error. A file holding no subscription (only comments, or nothing)
is an empty set: it matches nothing, so that a running stream is paused by emptying it.

Examples
--------
>>> subs = parse_subscriptions('ssh: 22.@x.22.@x   # probe\\nweb: "10.0.0.1".@y')
>>> [(s.id, s.pattern.text()) for s in subs.subscriptions]
[('ssh', '22.@x.22.@x'), ('web', '"10.0.0.1".@y')]
>>> parse_subscriptions("a: x.@y\\na: z")
Traceback (most recent call last):
...
graphcep.lang.errors.QuerySyntaxError: <subscriptions>:2:1: subscription 'a' is defined twice (first at line 1:1)
    a: z
    ^
"""

from __future__ import annotations

import re
from dataclasses import replace
from pathlib import Path

from graphcep.lang.tokens import (
    Token,
    TokenCursor,
    _Scanner,
    just_after,
    read_source,
    scan_tokens,
)
from graphcep.patterns.sequences import (
    Item,
    SequencePattern,
    Subscription,
    SubscriptionSet,
    Var,
)

__all__ = ["parse_subscriptions", "parse_subscriptions_file", "parse_subscriptions_source",
           "parse_subscription_texts", "read_subscriptions_source", "looks_like_subscriptions"]

#: id -> ``(source, line, column)`` of its definition, shared across the files of a source
Defined = dict[str, tuple[str, int, int]]

_WORD = re.compile(r"[0-9][A-Za-z0-9_]*")
_OPERATORS = (".", "@", ":")
_ITEM = r'(?:@?[A-Za-z0-9_]+|"(?:[^"\\]|\\.)*")'
_LINE = re.compile(rf'\s*{_ITEM}\s*:\s*{_ITEM}(?:\s*\.\s*{_ITEM})*\s*')


def _scan_word(sc: _Scanner) -> None:
    m = _WORD.match(sc.text, sc.pos)
    assert m is not None
    sc.emit("NUMBER", m.group(), len(m.group()))


def _scan_operator(sc: _Scanner) -> None:
    ch = sc.text[sc.pos]
    if ch in _OPERATORS:
        sc.emit("OP", ch, 1)
        return
    after_at = sc.pos > 0 and sc.text[sc.pos - 1] == "@"
    hint = ("variable names are letters, digits and _" if after_at
            else "quote symbols holding it: \"...\"")
    sc.error("'.', '@', ':' or a symbol", repr(ch), f"unexpected character {ch!r} ({hint})",
             sc.line, sc.column)


def looks_like_subscriptions(text: str) -> bool:
    """Whether the first line that is not blank or a comment reads ``id: pattern`` (no
    other kind's text opens so): a subscriptions file with a mistake further down is
    still read as one, and its parser names the mistake.

    >>> looks_like_subscriptions("# mine\\nssh: 22.@x.22.@x"), looks_like_subscriptions("{ x1 e1 x2; }")
    (True, False)
    """
    lines = [re.sub(r"(#|//).*", "", line) for line in text.splitlines()]
    lines = [line for line in lines if line.strip()]
    return bool(lines) and _LINE.fullmatch(lines[0]) is not None


def parse_subscriptions(text: str, name: str = "subscriptions",
                        source: str = "<subscriptions>",
                        defined: Defined | None = None) -> SubscriptionSet:
    """Parse a subscriptions text (see the module docstring); ``defined`` holds the ids
    other files of the same source defined already (and gets this text's)."""
    tokens = scan_tokens(text, source, _scan_word, _scan_operator, hash_comments=True)
    parser = _Parser(text, source, tokens)
    parser.defined = {} if defined is None else defined
    return SubscriptionSet(name, parser.parse())


def parse_subscriptions_file(path: str | Path) -> SubscriptionSet:
    """Parse a ``.subs`` file; the set is named after the file's stem."""
    return parse_subscriptions(read_source(path), Path(path).stem, str(path))


def read_subscriptions_source(path: str | Path) -> list[tuple[str, str]]:
    """``(file name, text)`` of a subscriptions source: the file, or a directory's
    ``*.subs`` files in name order (an ``OSError`` when there is none); the suffix in any
    case (``.SUBS``), as a query file's kind is told.

    >>> import tempfile, os
    >>> d = tempfile.mkdtemp()
    >>> _ = open(os.path.join(d, "b.subs"), "w").write("y: b")
    >>> _ = open(os.path.join(d, "a.subs"), "w").write("x: a")
    >>> [os.path.basename(name) for name, _ in read_subscriptions_source(d)]
    ['a.subs', 'b.subs']
    """
    path = Path(path)
    if not path.is_dir():
        return [(str(path), read_source(path))]
    files = sorted(p for p in path.iterdir() if p.suffix.lower() == ".subs" and p.is_file())
    if not files:
        raise FileNotFoundError(f"{path}: the directory holds no .subs file")
    return [(str(p), read_source(p)) for p in files]


def parse_subscription_texts(texts: list[tuple[str, str]], name: str) -> SubscriptionSet:
    """The subscriptions of several ``(file name, text)`` merged into one set named
    ``name``, ids distinct across the files.

    >>> parse_subscription_texts([("a.subs", "x: a"), ("b.subs", "y: b\\nx: c")], "d")
    Traceback (most recent call last):
    ...
    graphcep.lang.errors.QuerySyntaxError: b.subs:2:1: subscription 'x' is defined twice (first at a.subs:1:1)
        x: c
        ^
    """
    defined: Defined = {}
    subs = [s for source, text in texts
            for s in parse_subscriptions(text, name, source, defined).subscriptions]
    return SubscriptionSet(name, tuple(subs))


def parse_subscriptions_source(path: str | Path) -> SubscriptionSet:
    """Parse a subscriptions source (a ``.subs`` file or a directory of them, see the
    module docstring); the set is named after the file's stem or the directory's name."""
    return parse_subscription_texts(read_subscriptions_source(path), Path(path).stem)


class _Parser(TokenCursor):
    defined: Defined

    def parse(self) -> tuple[Subscription, ...]:
        subs = []
        while self.peek().kind != "EOF":
            id_tok = self.peek()
            if id_tok.kind not in ("IDENT", "NUMBER", "STRING"):
                self.fail("a subscription id")
            self.next()
            self._define(id_tok)
            colon = self.peek()
            if not colon.is_op(":") or colon.line != id_tok.line:
                self.fail("':' after the id", colon if colon.line == id_tok.line else
                          self._line_end(),
                          f"subscription {id_tok.value!r}: expected ':' after the id, found "
                          f"{colon.describe() if colon.line == id_tok.line else 'end of line'}")
            self.next()
            subs.append(Subscription(id_tok.value, self._pattern(id_tok)))
        return tuple(subs)

    def _define(self, id_tok: Token) -> None:
        """Record the id's place; an id defined before (here or in another file of the
        source) is an error naming both places."""
        first = self.defined.get(id_tok.value)
        if first is not None:
            source, line, column = first
            where = "line " if source == self.source else f"{source}:"
            self.fail("a new id", id_tok, f"subscription {id_tok.value!r} is defined twice "
                      f"(first at {where}{line}:{column})")
        self.defined[id_tok.value] = (self.source, id_tok.line, id_tok.column)

    def _pattern(self, id_tok: Token) -> SequencePattern:
        items = [self._item(id_tok)]
        while self.peek().is_op(".") and self.peek().line == id_tok.line:
            self.next()
            items.append(self._item(id_tok))
        after = self.peek()
        if after.kind != "EOF" and after.line == id_tok.line:
            self.fail("'.' or the end of the line", after,
                      f"subscription {id_tok.value!r}: expected '.' or the end of the line, "
                      f"found {after.describe()} (one subscription per line)")
        return SequencePattern(tuple(items))

    def _line_end(self) -> Token:
        """Where a line ends that ends too soon: just after its last token (the next token,
        on a later line, is not where the error is)."""
        last = self.toks[self.i - 1]
        line, column = just_after(last)
        return replace(last, kind="EOF", value="", text="", line=line, column=column)

    def _item(self, id_tok: Token) -> Item:
        tok = self.peek()
        what = f"subscription {id_tok.value!r}: expected"
        if tok.line != id_tok.line or tok.kind == "EOF":
            self.fail("a pattern item", self._line_end(), f"{what} a constant or @variable, "
                      "found the end of the line")
        self.next()
        if tok.is_op("@"):
            name = self.peek()
            if name.kind != "IDENT" or name.line != tok.line or name.column != tok.column + 1:
                where = name if name.line == tok.line and name.kind != "EOF" else self._line_end()
                self.fail("a variable name", where, f"{what} a variable name right after '@'")
            self.next()
            return Var(name.value)
        if tok.kind in ("IDENT", "NUMBER"):
            return tok.value
        if tok.kind == "STRING" and tok.value:
            return tok.value
        if tok.kind == "STRING":  # "": data may hold empty symbols, a variable binds them
            self.fail("a pattern item", tok, f"subscription {id_tok.value!r}: a constant "
                      "cannot be empty (an @variable matches any symbol, the empty one too)")
        self.fail("a pattern item", tok, f"{what} a constant or @variable, found "
                  f"{tok.describe()}")
