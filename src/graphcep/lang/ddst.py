r"""Parser for DDST event pattern queries ("Event pattern matching over graph streams",
Definitions 1-2).

Turns DDST text into a :class:`~graphcep.patterns.ddst.DDSTQuery`. Every error --
malformed text as well as a semantic mistake such as an unknown name or a cyclic timing
order -- is a :class:`~graphcep.lang.errors.QuerySyntaxError` with a 1-based line and column,
what was expected and what was found.

Example (the paper's Fig. 1: a congested road followed by two chains of congested roads,
within 5 minutes)
-------------------------------------------------------------------------------------
>>> q = parse_ddst('''
... // congestion spreading (Fig. 1 of the paper)
... VERTICES A:M, B:M, C:M, D:M, E:M, F:M;
... EDGES
...   AB: A -> B [congested];
...   CA: C -> A [congested];
...   DC: D -> C [congested];
...   EA: E -> A [congested];
...   FE: F -> E [congested];
... ORDER AB < CA < DC, AB < EA < FE;
... WITHIN 5 min;
... ''')
>>> q.name, q.edge_names, q.window.size
('query', ('AB', 'CA', 'DC', 'EA', 'FE'), 300000000)
>>> q.order
(('AB', 'CA'), ('CA', 'DC'), ('AB', 'EA'), ('EA', 'FE'))
>>> parse_ddst("VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y < x; WITHIN 9 s;")
Traceback (most recent call last):
  ...
graphcep.lang.errors.QuerySyntaxError: <query>:1:58: the timing order has a cycle: y < x < y
    VERTICES A, B; EDGES x: A -> B; y: B -> A; ORDER x < y < x; WITHIN 9 s;
                                                             ^

Language reference
------------------
*Lexical.* Keywords (``QUERY VERTICES EDGES ORDER WITHIN``, the units and ``EDGES`` after a
window size) are case-insensitive and cannot name vertices or edges; names are identifiers
``[A-Za-z_][A-Za-z0-9_]*``, case-sensitive. Comments: ``// ...`` and ``# ...`` to the end
of the line, ``/* ... */``. Whitespace and line breaks are free. The scanner is SAL's
(:mod:`graphcep.lang.tokens`) with the punctuation ``: -> [ ] * < ,`` and with numbers
that may run straight into their unit (``5min``).

*Statements*, in this order::

    QUERY congestion;                    // optional; default: "query" (or the file name)
    VERTICES A:M, B:M, C, D:*;           // vertex variables; ":label" optional, * = any
    EDGES                                // one or more edge variables, each ending in ';'
      AB: A -> B [congested];            //   NAME: SRC -> DST [label]; the label optional
      CA: C -> A;                        //   (no label, or [*], matches any edge label)
    ORDER AB < CA, CA < DC;              // optional timing order; chains AB < CA < DC
    WITHIN 5 min;                        // window: a time, or WITHIN 100 EDGES; ';' optional

A label is a name, a number (kept as written: ``A:1``), a ``"string"`` (``A:"major
road"``) or ``*`` for any label. A time window is a non-negative decimal number and a unit
``us ms s sec min h d`` (also ``secs second seconds mins minute minutes hour hours day
days``), exact to the microsecond (``0.5 us`` is refused); a count window is a positive
whole number of edges.

*Checks* (each reported at the offending name): a name defined twice (vertex and edge
names share one namespace); an edge naming an undeclared vertex, or an order naming an
unknown edge; a timing order with a cycle (named in the message: it must be a strict
partial order); a query graph that is not connected, or a vertex on no edge (the paper
assumes a connected query graph).
"""

from __future__ import annotations

import re
from pathlib import Path

from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.tokens import (
    _NUMBER,
    Token,
    TokenCursor,
    _Scanner,
    emit_number,
    name_of_file,
    position,
    read_source,
    scan_tokens,
)
from graphcep.patterns.ddst import (
    COUNT_UNITS,
    MAX_WINDOW,
    RESERVED,
    TIME_UNITS,
    DDSTQuery,
    DDSTQueryError,
    QueryEdge,
    QueryVertex,
    Window,
    disconnected_vertex,
    order_cycle,
    window_us,
)

__all__ = ["parse_ddst", "parse_ddst_file", "tokenize_ddst", "looks_like_ddst", "DDST_OPERATORS",
           "QuerySyntaxError"]

#: Punctuation of the DDST language, longest first.
DDST_OPERATORS: tuple[str, ...] = ("->", "-", "<", ">", ",", ";", ":", "[", "]", "*")

_LABEL = "a label (a name, a number, a \"string\" or '*')"
_UNITS = "us, ms, s, min, h, d or EDGES"
_SECTIONS = ("query", "vertices", "edges", "order", "within")


def tokenize_ddst(text: str, source: str = "<query>") -> list[Token]:
    """Split DDST text into tokens, ending with one ``EOF`` token.

    Uses the SAL scanner's comments, identifiers and strings; only the punctuation
    (:data:`DDST_OPERATORS`) differs, and a number may run straight into its unit.

    Examples
    --------
    >>> [t.value for t in tokenize_ddst("AB: A -> B [x]; // c\\nWITHIN 5min")]
    ['AB', ':', 'A', '->', 'B', '[', 'x', ']', ';', 'WITHIN', '5', 'min', '']
    """
    return scan_tokens(text, source, _scan_number, _scan_operator)


def _scan_number(sc: _Scanner) -> None:
    m = _NUMBER.match(sc.text, sc.pos)
    assert m is not None
    emit_number(sc, m.group())


def _scan_operator(sc: _Scanner) -> None:
    for op in DDST_OPERATORS:
        if sc.text.startswith(op, sc.pos):
            sc.emit("OP", op, len(op))
            return
    ch = sc.text[sc.pos]
    sc.error("a token", repr(ch), f"unexpected character {ch!r}", sc.line, sc.column)


class _Parser(TokenCursor):
    """Recursive-descent parser over the tokens of one DDST text."""

    def __init__(self, text: str, source: str, default_name: str) -> None:
        super().__init__(text, source, tokenize_ddst(text, source))
        self.name = default_name
        self.names: dict[str, tuple[str, Token]] = {}
        self.vertices: list[QueryVertex] = []
        self.edges: list[QueryEdge] = []
        self.order: list[tuple[str, str]] = []


    def expect_name(self, expected: str) -> Token:
        tok = self.peek()
        if tok.kind != "IDENT":
            self.fail(expected)
        if tok.value.lower() in RESERVED:
            self.fail(expected, tok, f"expected {expected}, found the keyword '{tok.value}'")
        return self.next()

    # -- query -----------------------------------------------------------------------

    def parse(self) -> DDSTQuery:
        if self.accept_kw("query"):
            if self.peek().kind != "IDENT":
                self.fail("a query name after QUERY")
            self.name = self.next().value
            self.expect_op(";", "';' after the query name")
        self.vertex_section()
        self.edge_section()
        if self.accept_kw("order"):
            self.order_section()
        self.window = self.window_section()
        self.check_connected()
        try:
            return DDSTQuery(
                self.name, tuple(self.vertices), tuple(self.edges), tuple(self.order), self.window
            )
        except DDSTQueryError as exc:  # pragma: no cover - every check above comes first
            self.fail("a valid query", self.toks[0], str(exc))

    def define(self, tok: Token, kind: str) -> None:
        if tok.value in self.names:
            other, first = self.names[tok.value]
            what = (
                f"{kind} '{tok.value}' is already declared"
                if other == kind
                else f"'{tok.value}' is already the name of a {other}"
            )
            self.fail(f"a new {kind} name", tok, f"{what} at {position(first)}")
        self.names[tok.value] = (kind, tok)

    def label(self) -> str | None:
        tok = self.peek()
        if tok.is_op("*"):
            self.next()
            return None
        if tok.kind in ("IDENT", "NUMBER", "STRING"):
            return self.next().value
        self.fail(_LABEL)

    def vertex_section(self) -> None:
        self.expect_kw("vertices", "VERTICES (the query's vertex variables)")
        while True:
            tok = self.expect_name("a vertex name")
            self.define(tok, "vertex")
            label = self.label() if self.accept_op(":") else None
            self.vertices.append(QueryVertex(tok.value, label))
            if not self.accept_op(","):
                break
        self.expect_op(";", "',' or ';' after the vertex list")

    def edge_section(self) -> None:
        self.expect_kw("edges", "EDGES after the vertex list")
        self.edge()
        while not (self.peek().kind == "EOF" or self.peek().value.lower() in ("order", "within")):
            self.edge()

    def edge(self) -> None:
        tok = self.expect_name(
            "an edge 'NAME: SRC -> DST [label];'"
            if not self.edges
            else "another edge 'NAME: SRC -> DST [label];', ORDER or WITHIN"
        )
        self.define(tok, "edge")
        self.expect_op(":", f"':' after the edge name '{tok.value}'")
        src = self.vertex_ref()
        self.expect_op("->", "'->' between the edge's source and destination")
        dst = self.vertex_ref()
        label = None
        if self.accept_op("["):
            label = self.label()
            self.expect_op("]", "']' closing the edge label")
        self.expect_op(";", "';' after the edge")
        self.edges.append(QueryEdge(tok.value, src, dst, label))

    def vertex_ref(self) -> str:
        tok = self.expect_name("a vertex name")
        kind = self.names.get(tok.value, ("", tok))[0]
        if kind != "vertex":
            known = ", ".join(v.name for v in self.vertices)
            why = (
                f"'{tok.value}' is an edge, not a vertex"
                if kind
                else f"unknown vertex '{tok.value}'"
            )
            self.fail("a declared vertex name", tok, f"{why} (declared vertices: {known})")
        return tok.value

    def order_section(self) -> None:
        pairs: list[tuple[Token, Token]] = []
        while True:
            prev = self.edge_ref()
            self.expect_op("<", f"'<' after '{prev.value}' in the timing order")
            while True:
                cur = self.edge_ref()
                pairs.append((prev, cur))
                prev = cur
                if not self.accept_op("<"):
                    break
            if not self.accept_op(","):
                break
        self.expect_op(";", "'<', ',' or ';' in the timing order")
        self.check_order(pairs)

    def edge_ref(self) -> Token:
        tok = self.expect_name("an edge name")
        kind = self.names.get(tok.value, ("", tok))[0]
        if kind != "edge":
            known = ", ".join(e.name for e in self.edges)
            why = (
                f"'{tok.value}' is a vertex, not an edge" if kind else f"unknown edge '{tok.value}'"
            )
            self.fail("an edge name", tok, f"{why} in the timing order (edges: {known})")
        return tok

    def check_order(self, pairs: list[tuple[Token, Token]]) -> None:
        for k, (a, b) in enumerate(pairs):
            cycle = order_cycle((x.value, y.value) for x, y in pairs[: k + 1])
            if cycle is not None:
                msg = f"the timing order has a cycle: {' < '.join(cycle)}"
                self.fail("an acyclic timing order", b, msg)
            self.order.append((a.value, b.value))

    def window_section(self) -> Window:
        self.expect_kw("within", "WITHIN (the window)" if self.order else "ORDER or WITHIN")
        num = self.peek()
        if num.kind != "NUMBER":
            self.fail("a window size (a non-negative number) after WITHIN")
        self.next()
        unit = self.peek()
        if unit.kind != "IDENT":
            self.fail(f"a unit ({_UNITS}) after the window size")
        self.next()
        window = self.window_value(num, unit)
        self.accept_op(";")
        end = self.peek()
        if end.kind != "EOF":
            hint = ""
            if end.kind == "IDENT" and end.value.lower() in _SECTIONS:
                hint = " (the statements are QUERY, VERTICES, EDGES, ORDER, WITHIN, in this order)"
            self.fail(
                "end of input after WITHIN",
                end,
                f"expected end of input after WITHIN, found {end.describe()}{hint}",
            )
        return window

    def window_value(self, num: Token, unit: Token) -> Window:
        word = unit.value.lower()
        if word in COUNT_UNITS:
            if not num.value.isdigit() or not 1 <= int(num.value) < MAX_WINDOW:
                self.fail("a positive whole number of edges (below 2**62)", num)
            return Window.edges(int(num.value))
        if word not in TIME_UNITS:
            self.fail(_UNITS, unit, f"unknown window unit '{unit.value}' (use {_UNITS})")
        try:
            return Window("time", window_us(num.value, word))
        except DDSTQueryError as exc:
            self.fail("a whole number of microseconds", num, str(exc))

    def check_connected(self) -> None:
        names = [v.name for v in self.vertices]
        lonely = disconnected_vertex(names, self.edges)
        if lonely is None:
            return
        tok = self.names[lonely][1]
        on_edge = any(lonely in (e.src, e.dst) for e in self.edges)
        why = (
            f"vertex '{lonely}' is not connected to '{names[0]}'"
            if on_edge
            else f"vertex '{lonely}' is on no edge"
        )
        self.fail(
            "a connected query graph", tok,
            f"the query graph must be connected (the paper assumes it; write its parts as "
            f"separate queries): {why}",
        )  # fmt: skip


def parse_ddst(text: str, source: str = "<query>", default_name: str = "query") -> DDSTQuery:
    """Parse DDST text into a :class:`~graphcep.patterns.ddst.DDSTQuery`.

    Parameters
    ----------
    text : str
        DDST source (see the module docstring).
    source : str
        Name shown in error messages (a file path, or ``"<query>"``).
    default_name : str
        The query's name when the text has no ``QUERY name;``.

    Returns
    -------
    DDSTQuery

    Raises
    ------
    QuerySyntaxError
        For malformed or inconsistent text, with line, column and what was expected.

    Examples
    --------
    >>> q = parse_ddst("QUERY p; VERTICES A:M, B; EDGES AB: A -> B [congested]; WITHIN 10 EDGES")
    >>> q.name, q.vertices[0], str(q.edges[0]), q.window
    ('p', QueryVertex(name='A', label='M'), 'AB: A -> B [congested]', Window(kind='count', size=10))
    >>> parse_ddst("VERTICES A; EDGES AB: A -> X; WITHIN 1 s")
    Traceback (most recent call last):
      ...
    graphcep.lang.errors.QuerySyntaxError: <query>:1:28: unknown vertex 'X' (declared vertices: A)
        VERTICES A; EDGES AB: A -> X; WITHIN 1 s
                                   ^
    """
    return _Parser(text, source, default_name).parse()


def parse_ddst_file(path: str | Path) -> DDSTQuery:
    """Parse a ``.ddst`` file (UTF-8, a leading byte order mark allowed); errors name the
    file as given.

    The query is named by its ``QUERY`` statement, else by the file's stem when that is an
    identifier (``examples/ddst/congestion.ddst`` -> ``congestion``), else ``query``.

    Raises
    ------
    QuerySyntaxError
        For malformed text or bytes that are not UTF-8. :class:`OSError` if the file cannot
        be read.
    """
    name = name_of_file(path, "query", {word.lower() for word in RESERVED})
    return parse_ddst(read_source(path), str(path), name)


_COMMENT = re.compile(r"//[^\n]*|#[^\n]*|/\*.*?\*/", re.DOTALL)
#: How DDST text starts once comments are gone: its first statement, not a SAL assignment.
_DDST_START = re.compile(r"\s*(?:QUERY|VERTICES)\b(?!\s*=)", re.IGNORECASE)


def looks_like_ddst(text: str) -> bool:
    """Whether a query text starts like DDST: its first statement (comments aside) is
    ``QUERY`` or ``VERTICES``, not a SAL assignment.

    Examples
    --------
    >>> looks_like_ddst("// spread\\nQUERY spread; VERTICES A;")
    True
    >>> looks_like_ddst("VERTICES = 3; { x1 e1 x2; }")
    False
    """
    return bool(_DDST_START.match(_COMMENT.sub(" ", text)))
