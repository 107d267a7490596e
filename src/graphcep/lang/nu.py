"""Parser of timed ν-expressions (``.nu`` files), in the concrete syntax of the paper's
tool (MaTiNA), with its quirks fixed.

Syntax, loosest binding first::

    e & e              conjunction: refused (an error, never ignored)
    e % e              shuffle: both, interleaved link by link
    e | e, e or e      disjunction
    #{X, Y} e          allocation of X and Y before e (e extends to the next | or %,
                       also after a '.': a . #{X} b . c allocates X over b . c)
    e {X, Y}!          release of X and Y after e (e is the sequence before it)
    e . e              concatenation
    e* e+ e?           repetitions
    n ~> n             a link between two nodes
    <e>[x, y] <e>[x]   delay: e's last link x to y seconds after the link its own
                       part (of a shuffle) read before e (exactly x for <e>[x], as in
                       MaTiNA); y may be inf, and an upper bound beyond the range of
                       times (2**61 µs) is no bound
    (e)                grouping
    n                  a node: a name, "any text", @ (any node); #X allocates X and reads
                       it, X! reads X and releases it, #X! both

A name is a **variable** when the expression allocates or releases it anywhere (``#X``,
``#{X}``, ``X!``, ``{X}!``) and a **constant** (a known node) otherwise, as in MaTiNA;
names are case-sensitive. Numbers are seconds, exact to the microsecond. ``//`` starts a
comment to the end of the line (``#`` is allocation here, not a comment).

What differs from MaTiNA's parser, on purpose: ``&`` is refused with a message (MaTiNA
parses it and then ignores it); a variable at the end of the text (``#a.#b``) is read
like any other; ``a ~> b ~> c`` is refused (a link joins two nodes; write
``a ~> b . b ~> c``); delay bounds must be whole microseconds and ``low <= high``.

Examples
--------
>>> p = parse_nu("<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]", "triangle")
>>> p.text()
'<#X ~> #Y . Y ~> #Z . Z ~> X>[0, 10]'
>>> sorted(p.variables()), p.span_us()
(['X', 'Y', 'Z'], 10000000)
>>> parse_nu("a ~> b & c ~> d")
Traceback (most recent call last):
...
graphcep.lang.errors.QuerySyntaxError: <query>:1:8: conjunction '&' is not supported: write the pattern as a shuffle (%) or a disjunction (|) of what both sides must match
    a ~> b & c ~> d
           ^
"""

from __future__ import annotations

import re
from pathlib import Path

from graphcep.events import TimeFormatError, seconds_to_fraction_us
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.tokens import (
    Token,
    TokenCursor,
    _Scanner,
    emit_number,
    name_of_file,
    read_source,
    scan_tokens,
)
from graphcep.patterns.nu import (
    Alloc,
    AnyNode,
    Concat,
    Const,
    Delay,
    Expr,
    Link,
    NuPattern,
    NuPatternError,
    Or,
    Release,
    Repeat,
    Shuffle,
    Var,
)

__all__ = ["parse_nu", "parse_nu_file", "tokenize_nu", "looks_like_nu", "NU_OPERATORS"]

#: Punctuation of ν-expressions, longest first.
NU_OPERATORS: tuple[str, ...] = ("~>", "#", "!", ".", "|", "%", "&", "*", "+", "?", "<",
                                 ">", "[", "]", "{", "}", "(", ")", ",", "@")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?")
_NUMBER_TAIL = re.compile(r"[A-Za-z0-9_.+-]*")
_NUMBER_END = re.compile(r"[A-Za-z0-9_.]")
_HASH_COMMENT = re.compile(r"\s*#\s")  # a line written as a comment in other languages
#: How a number of seconds is written in ν-expressions and ``.autom`` files, for the
#: messages refusing another spelling.
SECONDS_SPELLING = "seconds, written as digits with an optional decimal part (10, 0.5, 1000)"
DELAY_SPELLING = (f"a delay's bounds are {SECONDS_SPELLING}, the upper one also inf; no "
                  "exponent, unit or sign")


def tokenize_nu(text: str, source: str = "<query>") -> list[Token]:
    """Split a ν-expression into tokens (SAL's names and strings, ``//`` comments).

    Examples
    --------
    >>> [t.value for t in tokenize_nu('#X~>"10.0.0.1" // c\\n.<a>[0.5]')]
    ['#', 'X', '~>', '10.0.0.1', '.', '<', 'a', '>', '[', '0.5', ']', '']
    """
    return scan_tokens(text, source, _scan_number, _scan_operator, hash_comments=False)


def _scan_number(sc: _Scanner) -> None:
    m = _NUMBER.match(sc.text, sc.pos)
    assert m is not None
    if _NUMBER_END.match(sc.text, m.end()):  # a number is only ever a delay's bound
        word = m.group() + _NUMBER_TAIL.match(sc.text, m.end()).group()
        sc.error("a number of seconds", f"'{word}'", f"malformed delay '{word}': "
                 f"{DELAY_SPELLING}", sc.line, sc.column)
    emit_number(sc, m.group())


def _scan_operator(sc: _Scanner) -> None:
    for op in NU_OPERATORS:
        if sc.text.startswith(op, sc.pos):
            sc.emit("OP", op, len(op))
            return
    ch = sc.text[sc.pos]
    if sc.text.startswith("->", sc.pos):
        sc.error("'~>'", "'->'", "a link is written '~>', not '->'", sc.line, sc.column)
    if ch == "-" and sc.text[sc.pos + 1:sc.pos + 2].isdigit():
        word = ch + _NUMBER_TAIL.match(sc.text, sc.pos + 1).group()
        sc.error("a number of seconds", f"'{word}'", f"malformed delay '{word}': "
                 f"{DELAY_SPELLING}", sc.line, sc.column)
    sc.error("a token", repr(ch), f"unexpected character {ch!r}", sc.line, sc.column)


def looks_like_nu(text: str) -> bool:
    """Whether a query text reads as a ν-expression (it has a link ``~>``).

    >>> looks_like_nu("<#X ~> #Y>[0, 1]"), looks_like_nu("{ x1 e1 x2; }")
    (True, False)
    """
    return "~>" in re.sub(r"//[^\n]*", " ", text)


def parse_nu(text: str, name: str = "pattern", source: str = "<query>") -> NuPattern:
    """Parse a ν-expression; errors are :class:`QuerySyntaxError` with line:column."""
    try:
        tokens = tokenize_nu(text, source)
        parser = _Parser(text, source, tokens, _variables(tokens))
        expr = parser.parse()
    except QuerySyntaxError as err:
        hashed = [n for n, line in enumerate(text.split("\n"), 1)
                  if _HASH_COMMENT.match(line) and n <= err.line]
        if not hashed:
            raise
        raise QuerySyntaxError(err.expected, err.found, err.line, err.column, source, text,
                               f"{err.message} (line {hashed[0]} opens with '# ': '#' "
                               "allocates in a ν-expression, a comment is written '//')"
                               ) from None
    pattern = NuPattern(name, expr, source)
    never = _read_never_allocated(expr)
    if never:
        at = next(t for t in tokens if t.kind == "IDENT" and t.value == never)
        parser.fail("#" + never, at, f"variable {never!r} is read but never allocated (#{never} "
                    f"or #{{{never}}}): it holds no node, so the pattern cannot match")
    return pattern


def parse_nu_file(path: str | Path) -> NuPattern:
    """Parse a ``.nu`` file (UTF-8, a leading byte order mark allowed); the pattern is
    named after the file's stem."""
    return parse_nu(read_source(path), name_of_file(path), str(path))


def _variables(tokens: list[Token]) -> set[str]:
    """The names the text allocates or releases anywhere: ``#X``, ``#{X, ..}``, ``X!``,
    ``{X, ..}!`` (MaTiNA's rule; every other name is a constant)."""
    found: set[str] = set()
    for i, tok in enumerate(tokens):
        if tok.is_op("#") and tokens[i + 1].kind == "IDENT":
            found.add(tokens[i + 1].value)
        if tok.is_op("!") and i and tokens[i - 1].kind == "IDENT":
            found.add(tokens[i - 1].value)
        if tok.is_op("{"):
            j = i + 1
            while tokens[j].kind == "IDENT":
                found.add(tokens[j].value)
                j += 1 if not tokens[j + 1].is_op(",") else 2
    return found


#: How deep groups, delays and repetitions may nest (deeper is refused, not a crash).
MAX_NESTING = 50


class _Parser(TokenCursor):
    def __init__(self, text: str, source: str, tokens: list[Token], variables: set[str]):
        super().__init__(text, source, tokens)
        self.variables = variables
        self.depth = 0

    def nested(self) -> None:
        """One level deeper (a group or a delay); refused past :data:`MAX_NESTING`."""
        self.depth += 1
        if self.depth > MAX_NESTING:
            self.fail("a shallower expression", message=f"the expression nests more than "
                      f"{MAX_NESTING} groups or delays deep")

    def parse(self) -> Expr:
        if self.peek().kind == "EOF":
            self.fail("a ν-expression", message="the text holds no expression")
        expr = self.conjunction()
        if self.peek().kind != "EOF":
            self.fail("an operator (. | % * + ?) or the end of the expression")
        return expr

    def conjunction(self) -> Expr:
        expr = self.shuffle()
        amp = self.peek()
        if amp.is_op("&") or amp.is_keyword("and"):
            self.fail("'%' or '|'", amp, "conjunction '&' is not supported: write the pattern "
                      "as a shuffle (%) or a disjunction (|) of what both sides must match")
        return expr

    def shuffle(self) -> Expr:
        parts = [self.disjunction()]
        while self.accept_op("%"):
            parts.append(self.disjunction())
        return parts[0] if len(parts) == 1 else Shuffle(tuple(parts))

    def disjunction(self) -> Expr:
        parts = [self.scoped()]
        while self.accept_op("|") or self.accept_kw("or"):
            parts.append(self.scoped())
        return parts[0] if len(parts) == 1 else Or(tuple(parts))

    def scoped(self) -> Expr:
        if self.peek().is_op("#") and self.peek(1).is_op("{"):
            self.next()
            names = self.names()
            return Alloc(names, self.scoped())
        expr = self.sequence()
        while self.peek().is_op("{"):
            names = self.names()
            self.expect_op("!", "'!' after the variables to release ({X, Y}!)")
            expr = Release(expr, names)
            if self.accept_op("."):  # e {X}! . f: the release closes e, then f follows
                rest = self.sequence()
                tail = rest.parts if isinstance(rest, Concat) else (rest,)
                expr = Concat((expr, *tail))
        return expr

    def names(self) -> tuple[str, ...]:
        self.expect_op("{", "'{'")
        names = [self.expect_ident("a variable name").value]
        while self.accept_op(","):
            tok = self.expect_ident("a variable name")
            if tok.value in names:
                self.fail("another variable", tok, f"{tok.value!r} is named twice")
            names.append(tok.value)
        self.expect_op("}", "'}' closing the variables")
        return tuple(names)

    def sequence(self) -> Expr:
        parts = []
        while True:
            if self.peek().is_op("#") and self.peek(1).is_op("{"):
                parts.append(self.scoped())  # #{X} e . f: the allocation covers e . f
                break
            parts.append(self.repeated())
            if not self.accept_op("."):
                break
        return parts[0] if len(parts) == 1 else Concat(tuple(parts))

    def repeated(self) -> Expr:
        expr = self.link()
        marks = 0
        while True:
            tok = self.peek()
            if tok.is_op("*", "+", "?"):
                marks += 1
                if marks > MAX_NESTING:
                    self.fail("fewer repetition marks", message=f"more than {MAX_NESTING} "
                              "repetition marks in a row")
            if tok.is_op("*"):
                expr = Repeat(expr, 0, None)
            elif tok.is_op("+"):
                expr = Repeat(expr, 1, None)
            elif tok.is_op("?"):
                expr = Repeat(expr, 0, 1)
            else:
                return expr
            self.next()

    def link(self) -> Expr:
        start = self.peek()
        src = self.atom()
        if not self.peek().is_op("~>"):
            return src
        arrow = self.next()
        dst = self.atom()
        for end, tok in ((src, start), (dst, self.toks[self.i - 1])):
            if not _is_node(end):
                self.fail("a node", tok, "each end of a link is one node (a name, a \"string\", "
                          "@, with # or ! on it)")
        if self.peek().is_op("~>"):
            self.fail("'.'", message="a link joins two nodes: write a ~> b . b ~> c for a path")
        del arrow
        return Link(src, dst)

    def atom(self) -> Expr:
        tok = self.peek()
        if tok.is_op("("):
            self.next()
            self.nested()
            expr = self.conjunction()
            self.expect_op(")", "')' closing the group")
            self.depth -= 1
            return expr
        if tok.is_op("<"):
            return self.delay()
        return self.node()

    def delay(self) -> Expr:
        self.expect_op("<", "'<'")
        self.nested()
        body = self.conjunction()
        self.depth -= 1
        self.expect_op(">", "'>' closing the delay")
        self.expect_op("[", "'[' opening the delay's interval")
        first = self.seconds()
        if self.accept_op(","):
            low, high = first, self.seconds(allow_inf=True)
        else:
            low, high = first, first  # <e>[x]: exactly x seconds, as in MaTiNA
        close = self.expect_op("]", "']' closing the delay's interval")
        if high is not None and high < low:
            self.fail("an upper bound at least the lower", close,
                      f"the delay's interval [{low / 1e6:g}, {high / 1e6:g}] s is empty")
        try:
            return Delay(body, low, high)
        except NuPatternError as err:
            self.fail("a delay", close, str(err))

    def seconds(self, allow_inf: bool = False) -> int:
        tok = self.peek()
        if allow_inf and (tok.is_keyword("inf") or tok.is_keyword("infinity")):
            self.next()
            return None
        if tok.kind != "NUMBER":
            self.fail("a number of seconds" + (" or inf" if allow_inf else ""))
        self.next()
        try:
            us = seconds_to_fraction_us(tok.value)
        except TimeFormatError as err:
            self.fail("a number of seconds", tok, str(err))
        if us.denominator != 1:
            self.fail("whole microseconds", tok, f"{tok.value} s is not a whole number of "
                      "microseconds")
        if us >= 2**61:
            if allow_inf:  # an upper bound no duration reaches is no bound (MaTiNA's 1e18)
                return None
            self.fail("a smaller bound", tok, f"{tok.value} s exceeds the range of times "
                      "(2**61 µs): no duration reaches it")
        return int(us)

    def node(self) -> Expr:
        tok = self.peek()
        if tok.is_op("@"):
            self.next()
            return AnyNode()
        if tok.is_op("#") and self.peek(1).is_op("{"):
            self.fail("a node", self.peek(1), "#{...} cannot be one end of a link")
        fresh = self.accept_op("#")
        name_tok = self.peek()
        if name_tok.kind not in ("IDENT", "STRING"):
            self.fail("a node (a name, a \"string\" or @), '(' or '<'")
        self.next()
        name = name_tok.value
        if name == "":
            self.fail("a node", name_tok, 'the empty name "" is no node (every stream '
                      "vertex has a name: the readers reject an empty one)")
        node: Expr = Var(name) if name in self.variables and name_tok.kind == "IDENT" \
            else Const(name)
        if fresh is not None:
            if not isinstance(node, Var):
                self.fail("a variable", name_tok, f"{name!r} cannot be allocated")
            node = Alloc((name,), node)
        if self.peek().is_op("!") and not self.peek(1).is_op("{"):
            bang = self.next()
            if not isinstance(name_tok, Token) or name_tok.kind != "IDENT":
                self.fail("a variable", bang, "only a variable can be released")
            node = Release(node, (name,))
        return node


def _is_node(expr: Expr) -> bool:
    if isinstance(expr, Const | Var | AnyNode):
        return True
    return isinstance(expr, Alloc | Release) and _is_node(expr.body)


def _read_never_allocated(expr: Expr) -> str | None:
    """A variable the expression reads but allocates nowhere (it can never hold a node)."""
    from graphcep.patterns.nu import walk

    allocated = {n for e in walk(expr) if isinstance(e, Alloc) for n in e.names}
    for e in walk(expr):
        if isinstance(e, Var) and e.name not in allocated:
            return e.name
    return None
