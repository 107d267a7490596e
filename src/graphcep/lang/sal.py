r"""Parser for SAL, the Streaming Analytics Language (Goodman & Grunwald, IEEE Big Data 2019).

Turns SAL text into a :class:`~graphcep.patterns.program.Program` (constants, connections,
partitioning, features, filters) holding :class:`~graphcep.patterns.subgraph.SubgraphQuery`
objects. Every error -- malformed text or a semantic mistake -- is a
:class:`~graphcep.lang.errors.QuerySyntaxError` with a 1-based line and column.

Example
-------
>>> q = parse_query('''
... {
...     x1 e1 x2;  x2 e2 x3;  x3 e3 x1;
...     starttime(e3) - starttime(e1) <= 10;
...     starttime(e1) < starttime(e2);
...     starttime(e2) < starttime(e3);
... }''')
>>> q.name, q.edge_names
('query1', ('e1', 'e2', 'e3'))
>>> c = q.temporal[0]
>>> (str(c.plus), str(c.minus), c.op, c.bound_us)
('starttime(e3)', 'starttime(e1)', '<=', Fraction(10000000, 1))
>>> print(q.temporal[1])
starttime(e1) < starttime(e2)
>>> prog = parse_program('W = 1.5\nS = CsvStream("flows.csv");\n'
...                      'SUBGRAPH fan ON S { a e1 b; a e2 c; starttime(e2) - starttime(e1) <= W; }')
>>> prog.connections["S"].kind, prog.query("fan").temporal[0].bound_us
('csv', Fraction(1500000, 1))
>>> parse_query("{ x1 e1 x2 e2; }")
Traceback (most recent call last):
  ...
graphcep.lang.errors.QuerySyntaxError: <query>:1:12: expected ';' after the topology line, found 'e2'
    { x1 e1 x2 e2; }
               ^

Language reference
------------------
*Lexical.* Keywords are case-insensitive (``SUBGRAPH``, ``Subgraph``, ``subgraph``);
names of edges, vertices, streams, features, constants and fields are case-sensitive and
kept as written. Comments: ``// ...`` and ``# ...`` to the end of the line, ``/* ... */``.
Strings are double-quoted with the escapes ``\" \\ \n \t \r \/``. Numbers are decimal
(``10``, ``0.25``, ``1e-3``) and are kept exact; times are in **seconds**.

*Statements* (any order, but a name must be defined before it is used; ``;`` ends a
statement)::

    WindowSize = 1000                      // constant: number or "string"; the ';' may be
    Host = "localhost";                    //   left out at the end of a line
    Netflows = VastStream(Host, 9999);     // connection
    PARTITION Netflows BY SourceIp, DestIp;
    HASH SourceIp WITH IpHashFunction;     // HASH f1, f2 WITH F gives one HashSpec each
    ByHost = STREAM Netflows BY SourceIp;  // keyed stream
    Top1000 = FOREACH Netflows GENERATE topk(DestIp, WindowSize, 10000, 1000);
    Web = FILTER Netflows BY DestPort == 80 AND Proto != "udp";
    SUBGRAPH watering ON Netflows WITH source(SourceIp) AND target(DestIp) { ... }
    { ... }                                // bare query block over the default stream

Connections: ``VastStream("host", port)`` -> kind ``vast``, ``NetflowV5Stream("host",
port)`` or ``NetflowV5Stream("path")`` -> ``netflow5``, and ``SnapStream``,
``CsvStream``, ``JsonStream``, ``ParquetStream`` with one ``"path"`` -> ``snap``, ``csv``,
``jsonl``, ``parquet`` (function names are case-insensitive). Feature operators and their
arguments are those of :data:`~graphcep.patterns.program.FEATURE_OPERATORS` (a field,
then positive integers). Filter predicates use ``== != < <= > >=`` (``=`` means ``==``);
their :class:`EdgePredicate` has ``edge`` set to the filtered (source) stream's name.
A constant may stand wherever a number or string value is expected. The words
``PARTITION HASH SUBGRAPH STREAM FOREACH FILTER`` cannot be used as defined names.

*Query header.* ``SUBGRAPH [name] [ON stream [WITH source(F) AND target(F)]] { ... }``
(``source``/``target`` in either order; default fields ``src``/``dst``). A query without
a name is called ``query1``, ``query2``, ... by its position among the program's queries
(also for files); names must be unique.

*Query block.* Statements end with ``;`` and may come in any order:

* topology ``x1 e1 x2;`` -- edge variable ``e1`` from vertex ``x1`` to ``x2``; an edge
  name may be defined once, and a name cannot be both an edge and a vertex. ``in`` and
  ``not`` cannot be edge names.
* temporal constraint: a comparison ``< <= > >= =`` (``==`` means ``=``) between sums
  and differences of ``starttime(e)``, ``endtime(e)``, numbers and constants, with
  parentheses, e.g. ``starttime(e2) + 5 <= starttime(e3)`` or
  ``10 >= starttime(e3) - starttime(e1)``. It is normalised to
  ``plus - minus OP bound`` (:class:`TemporalConstraint`, bound in exact microseconds):
  if only the right side has time terms the sides are swapped first (``10 >= a - b``
  becomes ``a - b <= 10``); then the right side is subtracted from the left, constants
  go to the right, equal terms cancel, and exactly one positive and at most one negative
  time term must remain. A lone negative term is negated and the comparison flipped
  (``-starttime(e1) < 5`` becomes ``starttime(e1) > -5``).
* vertex constraint ``x in Feature;`` / ``x not in Feature;``.
* edge predicate ``e1.DestPort == 80;`` / ``e1.Proto != "udp";`` (``== != < <= > >=``,
  ``=`` means ``==``; the field is kept as written, the runtime resolves aliases).

*Undefined features.* A text made only of query blocks (such as the paper's Listing 2)
may name features it does not define -- the runtime reports unknown features. As soon as
the text has any other statement (a constant, connection, ...) it is a full program, and
every feature a vertex constraint names must be defined by an earlier ``FOREACH``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import NoReturn, cast

from graphcep.events import US_PER_SECOND, seconds_to_fraction_us
from graphcep.lang.errors import QuerySyntaxError
from graphcep.lang.tokens import (
    Token,
    TokenCursor,
    position,
    read_source,
    tokenize,
    unit_message,
)
from graphcep.patterns.program import (
    FEATURE_OPERATORS,
    SET_FEATURES,
    Connection,
    FeatureDef,
    FilterDef,
    HashSpec,
    KeyedStream,
    Partition,
    Program,
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

__all__ = ["parse_program", "parse_query", "parse_file", "STREAM_FUNCTIONS", "QuerySyntaxError"]

#: Connection functions: lower-cased name -> (display name, kind, allowed signatures).
#: A signature lists the arguments as (name, type); type ``string`` or ``port`` (0-65535).
STREAM_FUNCTIONS: dict[str, tuple[str, str, tuple[tuple[tuple[str, str], ...], ...]]] = {
    "vaststream": ("VastStream", "vast", ((("host", "string"), ("port", "port")),)),
    "netflowv5stream": (
        "NetflowV5Stream",
        "netflow5",
        ((("host", "string"), ("port", "port")), (("path", "string"),)),
    ),
    "snapstream": ("SnapStream", "snap", ((("path", "string"),),)),
    "csvstream": ("CsvStream", "csv", ((("path", "string"),),)),
    "jsonstream": ("JsonStream", "jsonl", ((("path", "string"),),)),
    "parquetstream": ("ParquetStream", "parquet", ((("path", "string"),),)),
}

_FEATURE_SIGNATURES = {
    "topk": "topk(field, window_items, basic_window_items, k)",
    "ehsum": "ehsum(field, window_items)",
    "ehave": "ehave(field, window_items)",
    "ehvar": "ehvar(field, window_items)",
    "countdistinct": "countdistinct(field, window_items)",
}
_RESERVED = frozenset({"partition", "hash", "subgraph", "stream", "foreach", "filter"})
_COMPARISONS = {"<": "<", "<=": "<=", ">": ">", ">=": ">=", "=": "=", "==": "="}
_MIRROR = {"<": ">", "<=": ">=", ">": "<", ">=": "<=", "=": "="}
_PREDICATE_OPS = {"==": "==", "=": "==", "!=": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_STREAM_KINDS = ("stream", "keyed stream", "filter")
_MAX_DEPTH = 50

Value = int | float | str


@dataclass(frozen=True)
class _Constant:
    """A literal or constant value, with its exact numeric value (None for strings)."""

    value: Value
    exact: Fraction | None
    token: Token


@dataclass
class _Linear:
    """A linear expression: coefficients of time terms plus a constant in microseconds."""

    terms: dict[TimeRef, int] = field(default_factory=dict)
    const_us: Fraction = Fraction(0)

    def scaled(self, k: int) -> _Linear:
        return _Linear({t: c * k for t, c in self.terms.items()}, self.const_us * k)

    def plus(self, other: _Linear) -> _Linear:
        terms = dict(self.terms)
        for t, c in other.terms.items():
            terms[t] = terms.get(t, 0) + c
        return _Linear(terms, self.const_us + other.const_us)


@dataclass
class _Block:
    """What a ``{ ... }`` block says, with the tokens needed for error positions."""

    open_tok: Token
    topology: list[tuple[Token, Token, Token]] = field(default_factory=list)
    temporal: list[TemporalConstraint] = field(default_factory=list)
    vertex: list[tuple[VertexConstraint, Token, Token]] = field(default_factory=list)
    predicates: list[EdgePredicate] = field(default_factory=list)
    edge_refs: list[Token] = field(default_factory=list)


@dataclass(frozen=True)
class _Header:
    """``SUBGRAPH [name] [ON stream WITH source(F) AND target(F)]``."""

    name: Token | None = None
    stream: str | None = None
    source_field: str = "src"
    target_field: str = "dst"


class _Parser(TokenCursor):
    """Recursive-descent parser over the token list of one SAL text."""

    def __init__(self, text: str, source: str) -> None:
        super().__init__(text, source, tokenize(text, source))
        self.program = Program()
        self.defs: dict[str, tuple[str, Token]] = {}
        self.constants: dict[str, _Constant] = {}
        self.feature_refs: list[Token] = []
        self.query_names: dict[str, Token] = {}
        self.full = False


    def ident_list(self, what: str) -> list[Token]:
        names = [self.expect_ident(what)]
        while self.accept_op(","):
            names.append(self.expect_ident(what))
        return names

    # -- program ---------------------------------------------------------------------

    def parse(self) -> Program:
        while self.peek().kind != "EOF":
            self.statement()
        self.check_feature_refs()
        return self.program

    def statement(self) -> None:
        tok = self.peek()
        if tok.is_op("{"):
            self.query(_Header())
        elif tok.is_keyword("subgraph"):
            self.query(self.subgraph_header())
        elif tok.is_keyword("partition"):
            self.partition()
        elif tok.is_keyword("hash"):
            self.hash_spec()
        elif tok.kind == "IDENT" and self.peek(1).is_op("="):
            self.definition()
        else:
            self.fail("a statement (NAME = ..., PARTITION, HASH, SUBGRAPH or '{')")

    def stream_ref(self, what: str) -> Token:
        tok = self.expect_ident(what)
        kind = self.defs.get(tok.value, ("", tok))[0]
        if kind not in _STREAM_KINDS:
            known = ", ".join(n for n, (k, _) in self.defs.items() if k in _STREAM_KINDS)
            why = (
                f"'{tok.value}' is a {kind}, not a stream"
                if kind
                else f"unknown stream '{tok.value}'"
            )
            self.fail(what, tok, f"{why} (defined streams: {known or 'none'})")
        return tok

    def partition(self) -> None:
        self.full = True
        self.next()
        stream = self.stream_ref("a stream name after PARTITION")
        self.expect_kw("by", "BY after the stream name")
        fields = self.ident_list("a field name")
        self.expect_op(";", "';' after the PARTITION statement")
        self.program.partitions.append(Partition(stream.value, tuple(t.value for t in fields)))

    def hash_spec(self) -> None:
        self.full = True
        self.next()
        fields = self.ident_list("a field name after HASH")
        self.expect_kw("with", "WITH after the hashed field")
        fn = self.expect_ident("a hash function name after WITH")
        self.expect_op(";", "';' after the HASH statement")
        self.program.hashes.extend(HashSpec(f.value, fn.value) for f in fields)

    def definition(self) -> None:
        self.full = True
        name = self.next()
        if name.value.lower() in _RESERVED:
            self.fail("a name", name, f"'{name.value}' is a reserved word and cannot be defined")
        if name.value in self.defs:
            first = self.defs[name.value][1]
            self.fail("a new name", name, f"'{name.value}' is already defined at {position(first)}")
        self.next()  # '='
        rhs = self.peek()
        handlers: dict[str, Callable[[Token], None]] = {
            "stream": self.keyed_stream,
            "foreach": self.feature,
            "filter": self.filter_def,
        }
        word = rhs.value.lower() if rhs.kind == "IDENT" else ""
        if word in handlers:
            self.next()
            handlers[word](name)
        elif rhs.kind == "IDENT" and self.peek(1).is_op("("):
            self.connection(name)
        else:
            self.constant(name)

    def constant(self, name: Token) -> None:
        expected = 'a number, a "string", a constant, a stream function, STREAM, FOREACH or FILTER'
        const = self.value(expected)
        last = self.toks[self.i - 1]
        if not self.accept_op(";") and self.peek().kind != "EOF" and self.peek().line == last.line:
            self.fail("';' or a line break after the constant")
        self.constants[name.value] = _Constant(const.value, const.exact, name)
        self.program.constants[name.value] = const.value
        self.defs[name.value] = ("constant", name)

    def connection(self, name: Token) -> None:
        fn = self.next()
        spec = STREAM_FUNCTIONS.get(fn.value.lower())
        if spec is None:
            self.unknown_function(fn)
        display, kind, signatures = spec
        self.next()  # '('
        args: list[_Constant] = []
        if not self.peek().is_op(")"):
            args.append(self.value("an argument"))
            while self.accept_op(","):
                args.append(self.value("an argument"))
        close = self.expect_op(")", "',' or ')' in the argument list")
        self.check_stream_args(display, signatures, args, close)
        self.expect_op(";", f"';' after {display}(...)")
        values = tuple(a.value for a in args)
        self.program.connections[name.value] = Connection(name.value, kind, values)
        self.defs[name.value] = ("stream", name)

    def unknown_function(self, fn: Token) -> NoReturn:
        known = ", ".join(d for d, _, _ in STREAM_FUNCTIONS.values())
        hint = ""
        if fn.value.lower() in FEATURE_OPERATORS:
            hint = f"; features are defined with FOREACH stream GENERATE {fn.value}(...)"
        self.fail(
            "a stream function", fn, f"unknown stream function '{fn.value}' (known: {known}){hint}"
        )

    def check_stream_args(
        self,
        display: str,
        signatures: tuple[tuple[tuple[str, str], ...], ...],
        args: list[_Constant],
        close: Token,
    ) -> None:
        usage = " or ".join(_usage(display, sig) for sig in signatures)
        for sig in signatures:
            if len(sig) == len(args) and all(
                _arg_ok(t, a) for (_, t), a in zip(sig, args, strict=True)
            ):
                return
        for sig in signatures:
            if len(sig) == len(args):
                bad = next(a for (_, t), a in zip(sig, args, strict=True) if not _arg_ok(t, a))
                self.fail(usage, bad.token, f"expected {usage}, found {bad.token.describe()}")
        n = len(args)
        self.fail(usage, close, f"expected {usage}, found {n} argument{'s' if n != 1 else ''}")

    def keyed_stream(self, name: Token) -> None:
        source = self.stream_ref("a stream name after STREAM")
        self.expect_kw("by", "BY after the stream name")
        keys = self.ident_list("a key field name")
        self.expect_op(";", "';' after the STREAM definition")
        keyed = KeyedStream(name.value, source.value, tuple(k.value for k in keys))
        self.program.keyed_streams[name.value] = keyed
        self.defs[name.value] = ("keyed stream", name)

    def feature(self, name: Token) -> None:
        stream = self.stream_ref("a stream name after FOREACH")
        self.expect_kw("generate", "GENERATE after the stream name")
        op = self.expect_ident("a feature operator after GENERATE")
        known = ", ".join(FEATURE_OPERATORS)
        if op.value.lower() not in FEATURE_OPERATORS:
            self.fail(
                "a feature operator", op, f"unknown feature operator '{op.value}' (known: {known})"
            )
        opname = op.value.lower()
        self.expect_op("(", f"'(' after {op.value}")
        fld = self.expect_ident(f"the field {op.value} is computed over")
        params = self.feature_params(opname)
        self.expect_op(";", "';' after the feature definition")
        feat = FeatureDef(name.value, stream.value, opname, fld.value, tuple(params))
        self.program.features[name.value] = feat
        self.defs[name.value] = ("feature", name)

    def feature_params(self, opname: str) -> list[int]:
        """The integer arguments after the field, up to and including the ``)``."""
        want = FEATURE_OPERATORS[opname] - 1
        usage = _FEATURE_SIGNATURES.get(opname, f"{opname}(field, {want} integers)")
        params: list[int] = []
        extra: Token | None = None
        while self.accept_op(","):
            if len(params) == want and extra is None:
                extra = self.peek()
            params.append(self.positive_int("a positive integer", usage))
        close = self.expect_op(")", f"',' or ')' closing {usage}")
        if len(params) != want:
            n = len(params) + 1
            self.fail(
                usage,
                extra or close,
                f"{opname} takes {want + 1} arguments, {usage}; found {n}",
            )
        return params

    def positive_int(self, expected: str, usage: str) -> int:
        val = self.value(expected)
        if val.exact is None or val.exact.denominator != 1 or val.exact <= 0:
            self.fail(
                expected,
                val.token,
                f"expected a positive integer in {usage}, found {val.token.describe()}",
            )
        return int(val.exact)

    def filter_def(self, name: Token) -> None:
        stream = self.stream_ref("a stream name after FILTER")
        self.expect_kw("by", "BY after the stream name")
        preds = [self.predicate_tail(stream.value, self.expect_ident("a field name"))]
        while self.accept_kw("and"):
            preds.append(self.predicate_tail(stream.value, self.expect_ident("a field name")))
        self.expect_op(";", "AND or ';' after the filter condition")
        self.program.filters[name.value] = FilterDef(name.value, stream.value, tuple(preds))
        self.defs[name.value] = ("filter", name)

    def predicate_tail(self, subject: str, fld: Token) -> EdgePredicate:
        op = self.peek()
        if op.kind != "OP" or op.value not in _PREDICATE_OPS:
            self.fail("a comparison (==, !=, <, <=, >, >=)")
        self.next()
        val = self.value('a number, a "string" or a constant')
        return EdgePredicate(subject, fld.value, _PREDICATE_OPS[op.value], val.value)

    # -- values ----------------------------------------------------------------------

    def value(self, expected: str) -> _Constant:
        """A string, a signed number or a constant's name."""
        tok = self.peek()
        if tok.kind == "STRING":
            self.next()
            return _Constant(tok.value, None, tok)
        if tok.is_op("-", "+") and self.peek(1).kind == "NUMBER":
            self.next()
            return self.number(self.next(), negative=tok.value == "-", start=tok)
        if tok.kind == "NUMBER":
            return self.number(self.next(), negative=False, start=tok)
        if tok.kind == "IDENT" and not self.peek(1).is_op("("):
            const = self.lookup_constant(self.next(), expected)
            return _Constant(const.value, const.exact, tok)
        self.fail(expected)

    def no_unit_after(self, number: Token, expected: str) -> None:
        """Refuse a time unit after a number (``5 min``) with a message saying how a
        duration is written (plain seconds)."""
        unit = self.peek()
        if unit.kind == "IDENT" and unit.line == number.line:
            message = unit_message(number.value, unit.value)
            if message is not None:
                self.fail(expected, unit, f"{message}, not '{number.value} {unit.value}'")

    def number(self, tok: Token, negative: bool, start: Token) -> _Constant:
        self.no_unit_after(tok, "';' after the number")
        exact = Fraction(Decimal(tok.value)) * (-1 if negative else 1)
        if tok.value.isdigit():
            return _Constant(int(exact), exact, start)
        as_float = float(exact)
        if as_float in (float("inf"), float("-inf")):
            self.fail("a number that fits a float", tok, f"number {tok.value} is out of range")
        return _Constant(as_float, exact, start)

    def lookup_constant(self, tok: Token, expected: str) -> _Constant:
        const = self.constants.get(tok.value)
        if const is not None:
            return const
        kind = self.defs.get(tok.value, ("", tok))[0]
        if kind:
            self.fail(
                expected, tok, f"'{tok.value}' is a {kind}, not a constant; expected {expected}"
            )
        self.fail(expected, tok, f"unknown constant '{tok.value}'; expected {expected}")

    # -- queries ---------------------------------------------------------------------

    def subgraph_header(self) -> _Header:
        self.next()
        name = None
        if self.peek().kind == "IDENT" and not self.peek().is_keyword("on"):
            name = self.next()
        if not self.accept_kw("on"):
            return _Header(name)
        stream = self.stream_ref("a stream name after ON")
        fields = {"source": "src", "target": "dst"}
        if self.accept_kw("with"):
            seen: set[str] = set()
            self.endpoint_field(fields, seen)
            self.expect_kw("and", "AND between source(...) and target(...)")
            self.endpoint_field(fields, seen)
        return _Header(name, stream.value, fields["source"], fields["target"])

    def endpoint_field(self, fields: dict[str, str], seen: set[str]) -> None:
        tok = self.peek()
        word = tok.value.lower() if tok.kind == "IDENT" else ""
        if word not in fields or word in seen:
            missing = " or ".join(f"{w}(FIELD)" for w in fields if w not in seen)
            self.fail(missing)
        seen.add(word)
        self.next()
        self.expect_op("(", f"'(' after {tok.value}")
        fields[word] = self.expect_ident("a field name").value
        self.expect_op(")", "')' after the field name")

    def query(self, header: _Header) -> None:
        block = self.block()
        name = self.query_name(header, block)
        q = self.build_query(block, name, header)
        self.program.queries.append(q)

    def query_name(self, header: _Header, block: _Block) -> str:
        tok = header.name or block.open_tok
        name = header.name.value if header.name else f"query{len(self.program.queries) + 1}"
        if name in self.query_names:
            first = self.query_names[name]
            self.fail(
                "a new query name",
                tok,
                f"a query named '{name}' is already defined at {position(first)}",
            )
        self.query_names[name] = tok
        return name

    def block(self) -> _Block:
        block = _Block(self.expect_op("{", "'{' opening the query block"))
        while not self.peek().is_op("}"):
            if self.peek().kind == "EOF":
                self.fail(f"'}}' closing the query block opened at {position(block.open_tok)}")
            self.block_statement(block)
        self.next()
        if not block.topology:
            self.fail(
                "a topology line", block.open_tok, "the query has no topology lines (x1 e1 x2;)"
            )
        return block

    def block_statement(self, block: _Block) -> None:
        t0, t1 = self.peek(), self.peek(1)
        if t0.kind == "IDENT" and t1.is_op("."):
            self.edge_predicate(block)
        elif t0.kind == "IDENT" and (t1.is_keyword("in") or t1.is_keyword("not")):
            self.vertex_constraint(block)
        elif t0.kind == "IDENT" and t1.kind == "IDENT":
            self.topology(block)
        else:
            self.temporal(block)

    def topology(self, block: _Block) -> None:
        src, name = self.next(), self.next()
        dst = self.expect_ident(f"the target vertex of edge '{name.value}'")
        self.expect_op(";", "';' after the topology line")
        block.topology.append((src, name, dst))

    def vertex_constraint(self, block: _Block) -> None:
        vertex = self.next()
        negated = self.accept_kw("not") is not None
        self.expect_kw("in", "'in' after 'not'")
        feat = self.expect_ident("a feature name after 'in'")
        self.expect_op(";", "';' after the vertex constraint")
        block.vertex.append((VertexConstraint(vertex.value, feat.value, negated), vertex, feat))
        self.feature_refs.append(feat)

    def edge_predicate(self, block: _Block) -> None:
        edge = self.next()
        self.next()  # '.'
        fld = self.expect_ident("a field name after '.'")
        pred = self.predicate_tail(edge.value, fld)
        self.expect_op(";", "';' after the edge predicate")
        block.predicates.append(pred)
        block.edge_refs.append(edge)

    # -- temporal constraints --------------------------------------------------------

    def temporal(self, block: _Block) -> None:
        start = self.peek()
        left = self.expr(block, 0)
        op = self.peek()
        if op.kind != "OP" or op.value not in _COMPARISONS:
            self.fail("a comparison (<, <=, >, >=, =) or '+'/'-'")
        self.next()
        right = self.expr(block, 0)
        self.expect_op(";", "';' after the temporal constraint")
        block.temporal.append(self.normalise(left, _COMPARISONS[op.value], right, start))

    def expr(self, block: _Block, depth: int) -> _Linear:
        if depth > _MAX_DEPTH:
            self.fail(
                "a simpler expression", message=f"expression nested more than {_MAX_DEPTH} deep"
            )
        acc = self.signed_term(block, depth)
        while self.peek().is_op("+", "-"):
            sign = -1 if self.next().value == "-" else 1
            acc = acc.plus(self.signed_term(block, depth).scaled(sign))
        return acc

    def signed_term(self, block: _Block, depth: int) -> _Linear:
        sign = 1
        while self.peek().is_op("+", "-"):
            sign *= -1 if self.next().value == "-" else 1
        return self.primary(block, depth).scaled(sign)

    def primary(self, block: _Block, depth: int) -> _Linear:
        tok = self.peek()
        expected = "starttime(e), endtime(e), a number or a constant"
        if tok.kind == "NUMBER":
            self.next()
            self.no_unit_after(tok, "';' after the temporal constraint")
            return _Linear(const_us=seconds_to_fraction_us(tok.value))
        if (
            tok.kind == "IDENT"
            and self.peek(1).is_op("(")
            and tok.value.lower() in ("starttime", "endtime")
        ):
            return self.time_ref(block)
        if tok.kind == "IDENT":
            const = self.lookup_constant(self.next(), expected)
            if const.exact is None:
                self.fail(expected, tok, f"constant '{tok.value}' is a string, not a number")
            return _Linear(const_us=const.exact * US_PER_SECOND)
        if tok.is_op("("):
            self.next()
            inner = self.expr(block, depth + 1)
            self.expect_op(")", "')' closing the parenthesis")
            return inner
        self.fail(expected)

    def time_ref(self, block: _Block) -> _Linear:
        kind = "start" if self.next().value.lower() == "starttime" else "end"
        self.next()  # '('
        edge = self.expect_ident("an edge name")
        self.expect_op(")", f"')' after the edge name in {kind}time(...)")
        block.edge_refs.append(edge)
        return _Linear({TimeRef(edge.value, kind): 1})

    def normalise(self, left: _Linear, op: str, right: _Linear, start: Token) -> TemporalConstraint:
        if not any(left.terms.values()) and any(right.terms.values()):
            left, right, op = right, left, _MIRROR[op]
        diff = left.plus(right.scaled(-1))
        bound = -diff.const_us
        terms = {t: c for t, c in diff.terms.items() if c != 0}
        pos = [t for t, c in terms.items() if c == 1]
        neg = [t for t, c in terms.items() if c == -1]
        problem = _difference_problem(terms, pos, neg)
        if problem:
            self.fail(
                "a difference constraint",
                start,
                "only differences of two edge times (or one edge time vs a constant) are "
                f"supported, e.g. starttime(e2) - starttime(e1) <= 10; this constraint {problem}",
            )
        where = f"{self.source}:{start.line}:{start.column}"
        try:
            if not pos:
                return TemporalConstraint(neg[0], None, cast(Comparison, _MIRROR[op]), -bound,
                                          where)
            return TemporalConstraint(pos[0], neg[0] if neg else None, cast(Comparison, op),
                                      bound, where)
        except QueryError as exc:  # a bound beyond the range of times
            self.fail("a bound within the range of times", start, str(exc))

    # -- semantic checks -------------------------------------------------------------

    def build_query(self, block: _Block, name: str, header: _Header) -> SubgraphQuery:
        edges = self.check_topology(block)
        self.check_block_refs(block, edges)
        try:
            return SubgraphQuery(
                name,
                tuple(EdgePattern(s.value, n.value, d.value) for s, n, d in block.topology),
                tuple(block.temporal),
                tuple(vc for vc, _, _ in block.vertex),
                tuple(block.predicates),
                header.stream,
                header.source_field,
                header.target_field,
            )
        except QueryError as exc:  # pragma: no cover - the checks above come first
            self.fail("a valid query", block.open_tok, str(exc))

    def check_topology(self, block: _Block) -> dict[str, Token]:
        edges: dict[str, Token] = {}
        vertices: dict[str, Token] = {}
        for src, name, dst in block.topology:
            if name.value in edges:
                first = edges[name.value]
                self.fail(
                    "a new edge name",
                    name,
                    f"edge variable '{name.value}' is defined twice (first at {position(first)})",
                )
            if name.value in vertices:
                first = vertices[name.value]
                self.fail(
                    "an edge name",
                    name,
                    f"'{name.value}' is used both as a vertex (at {position(first)}) and as an edge variable",
                )
            edges[name.value] = name
            for v in (src, dst):
                if v.value in edges:
                    self.fail(
                        "a vertex name",
                        v,
                        f"'{v.value}' is used both as an edge (at {position(edges[v.value])}) and as a vertex variable",
                    )
                vertices.setdefault(v.value, v)
        return edges

    def check_block_refs(self, block: _Block, edges: dict[str, Token]) -> None:
        vertices = {v.value for s, _, d in block.topology for v in (s, d)}
        edge_list = ", ".join(edges)
        for ref in block.edge_refs:
            if ref.value not in edges:
                what = (
                    "a vertex, not an edge"
                    if ref.value in vertices
                    else "not an edge of this query"
                )
                self.fail("an edge name", ref, f"'{ref.value}' is {what} (edges: {edge_list})")
        for vc, vtok, _ in block.vertex:
            if vc.vertex not in vertices:
                what = (
                    "an edge, not a vertex" if vc.vertex in edges else "not a vertex of this query"
                )
                self.fail(
                    "a vertex name",
                    vtok,
                    f"'{vc.vertex}' is {what} (vertices: {', '.join(sorted(vertices))})",
                )

    def check_feature_refs(self) -> None:
        if not self.full:
            return
        features = ", ".join(self.program.features) or "none"
        for ref in self.feature_refs:
            kind, where = self.defs.get(ref.value, ("", ref))
            if kind == "feature" and (where.line, where.column) < (ref.line, ref.column):
                self.check_set_feature(ref)
                continue
            if kind == "feature":
                why = f"feature '{ref.value}' is used before its definition at {position(where)}"
            elif kind:
                why = f"'{ref.value}' is a {kind}, not a feature"
            else:
                why = f"unknown feature '{ref.value}'"
            self.fail("a defined feature", ref, f"{why} (defined features: {features})")

    def check_set_feature(self, ref: Token) -> None:
        """``x in F`` needs a feature whose value is a set (``topk``)."""
        feature = self.program.features[ref.value]
        if feature.operator not in SET_FEATURES:
            self.fail(
                "a set-valued feature", ref,
                f"feature '{ref.value}' ({feature.operator}) gives a number per key, not a set "
                f"of vertices, so 'in {ref.value}' cannot test it; use a topk feature",
            )  # fmt: skip

    def eof(self) -> Token:
        return self.toks[-1]


def _usage(display: str, sig: tuple[tuple[str, str], ...]) -> str:
    """``VastStream("host", port)``."""
    shown = (f'"{n}"' if t == "string" else n for n, t in sig)
    return f"{display}({', '.join(shown)})"


def _arg_ok(kind: str, arg: _Constant) -> bool:
    if kind == "string":
        return isinstance(arg.value, str)
    exact = arg.exact
    return exact is not None and exact.denominator == 1 and 0 <= exact <= 65535


def _difference_problem(terms: dict[TimeRef, int], pos: list[TimeRef], neg: list[TimeRef]) -> str:
    """Why ``terms`` is not ``plus [- minus]`` (empty string when it is)."""
    if not terms:
        return "has no edge time left after cancelling terms"
    odd = [t for t, c in terms.items() if c not in (1, -1)]
    if odd:
        return f"has {odd[0]} with coefficient {terms[odd[0]]}"
    if len(pos) > 1 or len(neg) > 1:
        return f"has {len(pos)} positive and {len(neg)} negative edge times"
    return ""


def _parse(text: str, source: str) -> tuple[Program, Token]:
    parser = _Parser(text, source)
    return parser.parse(), parser.eof()


def parse_program(text: str, source: str = "<query>") -> Program:
    """Parse a SAL program (or a bare ``{ ... }`` query block) into a :class:`Program`.

    Parameters
    ----------
    text : str
        SAL source text.
    source : str
        Name shown in error messages (a file path, or ``"<query>"``).

    Returns
    -------
    Program
        Constants, connections, partitions, hashes, keyed streams, features, filters and
        queries, in the order written. A text with no statements gives an empty program.

    Raises
    ------
    QuerySyntaxError
        For any malformed or inconsistent text, with line and column.

    Examples
    --------
    >>> p = parse_program('N = VastStream("localhost", 9999);\\nPARTITION N BY SourceIp;')
    >>> p.connections["N"], p.partitions[0].fields
    (Connection(name='N', kind='vast', args=('localhost', 9999)), ('SourceIp',))
    """
    return _parse(text, source)[0]


def parse_query(text: str, source: str = "<query>") -> SubgraphQuery:
    """Parse SAL text and return its first subgraph query.

    Parameters
    ----------
    text : str
        A bare ``{ ... }`` block or a whole program.
    source : str
        Name shown in error messages.

    Returns
    -------
    SubgraphQuery

    Raises
    ------
    QuerySyntaxError
        For malformed text, or a text without any query.

    Examples
    --------
    >>> parse_query("{ a e1 b; b e2 c; starttime(e1) < starttime(e2); }").edge_names
    ('e1', 'e2')
    """
    return _parse_with_query(text, source).queries[0]


def _parse_with_query(text: str, source: str) -> Program:
    """A program that holds at least one query; else the error points at the end of input
    (an empty file, one with only comments or only definitions)."""
    program, eof = _parse(text, source)
    if not program.queries:
        raise QuerySyntaxError(
            "a SUBGRAPH query or a '{ ... }' block", eof.describe(), eof.line, eof.column,
            source, text,
            f"expected a SUBGRAPH query or a '{{ ... }}' block, found {eof.describe()}: "
            "the text defines no query",
        )
    return program


def parse_file(path: str | Path) -> Program:
    """Parse a SAL file (UTF-8, a leading byte order mark allowed); errors name the file
    as given.

    A file is what a runtime runs, so unlike :func:`parse_program` it must define at
    least one query.

    Parameters
    ----------
    path : str or Path
        The ``.sal`` file.

    Returns
    -------
    Program

    Raises
    ------
    QuerySyntaxError
        For malformed text, bytes that are not UTF-8, or a file without any query.
        :class:`OSError` if the file cannot be read.
    """
    return _parse_with_query(read_source(path), str(path))
