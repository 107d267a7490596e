"""Hand-written tokenizer for SAL.

Token kinds
-----------
``IDENT``
    ``[A-Za-z_][A-Za-z0-9_]*`` (ASCII). Keywords are identifiers too; the parser compares
    them case-insensitively (:meth:`Token.is_keyword`).
``NUMBER``
    ``digits[.digits][(e|E)[+-]digits]``, kept as the exact source text (no float
    rounding). A sign is a separate ``OP`` token. An exponent beyond +-100 is refused,
    as is a number running straight into letters (``10s``).
``STRING``
    ``"..."`` on one line, with the escapes ``\\"`` ``\\\\`` ``\\n`` ``\\t`` ``\\r`` ``\\/``;
    :attr:`Token.value` is the decoded text.
``OP``
    ``== != <= >= < > = + - ( ) { } , ; .`` (``.`` is always its own token:
    ``e1.DestPort`` is ``IDENT OP IDENT``).
``EOF``
    End of input (always the last token).

Whitespace separates tokens; ``//`` and ``#`` start comments to the end of the line and
``/* ... */`` is a block comment. Lines and columns are 1-based; a tab counts as one
column; lines end at ``\\n``.

Examples
--------
>>> [t.value for t in tokenize('x1 e1 x2; // comment\\nstarttime(e1) >= 1.50')]
['x1', 'e1', 'x2', ';', 'starttime', '(', 'e1', ')', '>=', '1.50', '']
>>> tokenize('a\\n  "b"')[1].line, tokenize('a\\n  "b"')[1].column
(2, 3)
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from pathlib import Path
from typing import Literal, NoReturn

from graphcep.lang.errors import QuerySyntaxError
from graphcep.patterns.ddst import TIME_UNITS
from graphcep.text_encoding import UTF8_BOM, wide_encoding

__all__ = ["Token", "TokenKind", "tokenize", "read_source", "OPERATORS", "MAX_EXPONENT"]

TokenKind = Literal["IDENT", "NUMBER", "STRING", "OP", "EOF"]

#: Operator and punctuation tokens, longest first.
OPERATORS: tuple[str, ...] = (
    "==", "!=", "<=", ">=", "<", ">", "=", "+", "-", "(", ")", "{", "}", ",", ";", ".",
)  # fmt: skip

#: Largest exponent magnitude accepted in a number literal (``1e100``).
MAX_EXPONENT = 100

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_NUMBER = re.compile(r"[0-9]+(?:\.[0-9]+)?(?:[eE][+-]?[0-9]+)?")
_EXPONENT = re.compile(r"[eE]([+-]?[0-9]+)$")
_WORD_CHAR = re.compile(r"[A-Za-z0-9_]")
_ESCAPES = {'"': '"', "\\": "\\", "n": "\n", "t": "\t", "r": "\r", "/": "/"}
_SPACE = " \t\r\n\f\v"


@dataclass(frozen=True, slots=True)
class Token:
    """One token: its kind, decoded value, source text and 1-based position."""

    kind: TokenKind
    value: str
    text: str
    line: int
    column: int

    def is_keyword(self, word: str) -> bool:
        """True for an identifier spelling ``word`` in any letter case."""
        return self.kind == "IDENT" and self.value.lower() == word

    def is_op(self, *symbols: str) -> bool:
        """True for an operator token among ``symbols``."""
        return self.kind == "OP" and self.value in symbols

    def describe(self) -> str:
        """How the token is shown in an error message."""
        if self.kind == "EOF":
            return "end of input"
        shown = self.text if len(self.text) <= 40 else self.text[:37] + "..."
        if self.kind == "STRING":
            return f"string {shown}"
        return f"'{shown}'"


class _Scanner:
    """Position bookkeeping over the source text."""

    def __init__(self, text: str, source: str) -> None:
        self.text = text
        self.source = source
        self.pos = 0
        self.line = 1
        self.line_start = 0
        self.tokens: list[Token] = []

    @property
    def column(self) -> int:
        return self.pos - self.line_start + 1

    def error(self, expected: str, found: str, message: str, line: int, column: int) -> None:
        raise QuerySyntaxError(expected, found, line, column, self.source, self.text, message)

    def advance(self, n: int) -> None:
        """Move ``n`` characters on, counting newlines."""
        end = self.pos + n
        nl = self.text.rfind("\n", self.pos, end)
        if nl >= 0:
            self.line += self.text.count("\n", self.pos, end)
            self.line_start = nl + 1
        self.pos = end

    def emit(self, kind: TokenKind, value: str, length: int) -> None:
        text = self.text[self.pos : self.pos + length]
        self.tokens.append(Token(kind, value, text, self.line, self.column))
        self.advance(length)


def _skip_space_and_comments(sc: _Scanner, hash_comments: bool = True) -> None:
    text = sc.text
    while sc.pos < len(text):
        ch = text[sc.pos]
        if ch in _SPACE:
            sc.advance(1)
        elif (ch == "#" and hash_comments) or text.startswith("//", sc.pos):
            nl = text.find("\n", sc.pos)
            sc.advance((len(text) if nl < 0 else nl) - sc.pos)
        elif text.startswith("/*", sc.pos):
            end = text.find("*/", sc.pos + 2)
            if end < 0:
                sc.error(
                    "'*/'", "end of input", "unterminated block comment '/*'", sc.line, sc.column
                )
            sc.advance(end + 2 - sc.pos)
        else:
            return


def emit_number(sc: _Scanner, text: str) -> None:
    """A NUMBER token; an exponent beyond :data:`MAX_EXPONENT` is an error here rather than
    a huge exact decimal later. Shared by the SAL and DDST scanners."""
    exp = _EXPONENT.search(text)
    if exp and abs(int(exp.group(1))) > MAX_EXPONENT:
        sc.error(
            f"an exponent between -{MAX_EXPONENT} and {MAX_EXPONENT}", f"'{text}'",
            f"number '{text}' is out of range", sc.line, sc.column,
        )  # fmt: skip
    sc.emit("NUMBER", text, len(text))


def unit_message(number: str, unit: str) -> str | None:
    """What to say when a duration is written with a unit (``5 min``, ``5min``) where
    times are plain seconds, or None when ``unit`` is no time unit.

    >>> unit_message("5", "min")
    'durations are plain seconds, with no unit: write 300'
    >>> unit_message("1.5", "ms"), unit_message("5", "e1")
    ('durations are plain seconds, with no unit: write 0.0015', None)
    """
    factor = TIME_UNITS.get(unit.lower())
    if factor is None:
        return None
    seconds = Fraction(Decimal(number)) * factor  # units are powers of ten or whole
    text = format((Decimal(seconds.numerator) / seconds.denominator).normalize(), "f")
    return f"durations are plain seconds, with no unit: write {text}"


def _scan_number(sc: _Scanner) -> None:
    m = _NUMBER.match(sc.text, sc.pos)
    assert m is not None
    end = m.end()
    if end < len(sc.text) and _WORD_CHAR.match(sc.text, end):
        bad = _IDENT.match(sc.text, end)
        tail = bad.group() if bad else sc.text[end]
        word = m.group() + tail
        unit = unit_message(m.group(), tail)
        message = f"malformed number '{word}': {unit}" if unit else \
            f"malformed number '{word}' (no units; times are seconds)"
        sc.error("a number", f"'{word}'", message, sc.line, sc.column)
    emit_number(sc, m.group())


def _scan_string(sc: _Scanner) -> None:
    text, i = sc.text, sc.pos + 1
    out: list[str] = []
    while i < len(text) and text[i] not in '"\n':
        if text[i] != "\\":
            out.append(text[i])
            i += 1
            continue
        nxt = text[i + 1] if i + 1 < len(text) else ""
        if nxt not in _ESCAPES:
            col = sc.column + (i - sc.pos)
            shown = repr("\\" + nxt) if nxt else "'\\' at end of input"
            msg = f"unknown escape {shown} in string (use \\\\ for a backslash)"
            sc.error('an escape (\\" \\\\ \\n \\t \\r \\/)', shown, msg, sc.line, col)
        out.append(_ESCAPES[nxt])
        i += 2
    if i >= len(text) or text[i] != '"':
        sc.error(
            "'\"' closing the string", "end of line", "unterminated string", sc.line, sc.column
        )
    sc.emit("STRING", "".join(out), i + 1 - sc.pos)


def _scan_operator(sc: _Scanner) -> None:
    for op in OPERATORS:
        if sc.text.startswith(op, sc.pos):
            sc.emit("OP", op, len(op))
            return
    ch = sc.text[sc.pos]
    hint = "; strings use double quotes" if ch == "'" else ""
    sc.error("a token", repr(ch), f"unexpected character {ch!r}{hint}", sc.line, sc.column)


def tokenize(text: str, source: str = "<query>") -> list[Token]:
    """Split SAL text into tokens, ending with one ``EOF`` token.

    Parameters
    ----------
    text : str
        SAL source.
    source : str
        Name used in error messages.

    Returns
    -------
    list of Token

    Raises
    ------
    QuerySyntaxError
        On an unexpected character, an unterminated string or block comment, a bad
        escape or a malformed number.
    """
    return scan_tokens(text, source, _scan_number, _scan_operator)


def scan_tokens(
    text: str,
    source: str,
    scan_number: Callable[[_Scanner], None],
    scan_operator: Callable[[_Scanner], None],
    *,
    hash_comments: bool = True,
) -> list[Token]:
    """The scanning loop every language here shares: comments, identifiers and strings
    are the same; each language brings its own numbers and punctuation (and a language
    whose ``#`` means something else turns ``#`` comments off)."""
    sc = _Scanner(text, source)
    while True:
        _skip_space_and_comments(sc, hash_comments)
        if sc.pos >= len(text):
            sc.tokens.append(Token("EOF", "", "", sc.line, sc.column))
            return sc.tokens
        ch = text[sc.pos]
        if ch.isascii() and (ch.isalpha() or ch == "_"):
            m = _IDENT.match(text, sc.pos)
            assert m is not None
            sc.emit("IDENT", m.group(), len(m.group()))
        elif ch.isascii() and ch.isdigit():
            scan_number(sc)
        elif ch == '"':
            _scan_string(sc)
        else:
            scan_operator(sc)




def read_source(path: str | Path) -> str:
    """The text of a query file: UTF-8, a leading byte order mark skipped (editors on
    Windows write one). Shared by every language here.

    Raises
    ------
    QuerySyntaxError
        For bytes that are not UTF-8, at the line and column of the first of them (the
        column counts the characters before it on its line).
    OSError
        If the file cannot be read.

    Examples
    --------
    >>> import os, tempfile
    >>> with tempfile.NamedTemporaryFile("wb", suffix=".sal", delete=False) as f:
    ...     _ = f.write(b"{ a e1 b;\\n  \\xff }")
    >>> try:
    ...     read_source(f.name)
    ... except QuerySyntaxError as err:
    ...     print(err.line, err.column, err.message)
    2 3 the file is not UTF-8 text: byte 0xff (invalid start byte)
    >>> os.unlink(f.name)
    """
    data = Path(path).read_bytes()
    data = data.removeprefix(UTF8_BOM)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as err:
        line_start = data.rfind(b"\n", 0, err.start) + 1
        line = data.count(b"\n", 0, err.start) + 1
        column = len(data[line_start:err.start].decode("utf-8", errors="replace")) + 1
        shown = data.decode("utf-8", errors="replace")
        byte = f"byte 0x{data[err.start]:02x}"
        wide = wide_encoding(data)
        why = (f"{wide[0]} text (it starts with a {wide[0]} byte order mark): save it as "
               "UTF-8" if wide else f"not UTF-8 text: {byte} ({err.reason})")
        raise QuerySyntaxError(
            "UTF-8 text", byte, line, column, str(path), shown, f"the file is {why}",
        ) from None


def just_after(tok: Token) -> tuple[int, int]:
    """The line and column just after a token's text (which may span lines)."""
    lines = tok.text.split("\n")
    if len(lines) == 1:
        return tok.line, tok.column + len(tok.text)
    return tok.line + len(lines) - 1, len(lines[-1]) + 1


def position(tok: Token) -> str:
    """``line L:C`` of a token, for messages that point back at an earlier definition."""
    return f"line {tok.line}:{tok.column}"


class TokenCursor:
    """Recursive-descent helpers over a token list; parsers of each language extend it."""

    def __init__(self, text: str, source: str, tokens: list[Token]) -> None:
        self.text = text
        self.source = source
        self.toks = tokens
        self.i = 0

    def peek(self, k: int = 0) -> Token:
        return self.toks[min(self.i + k, len(self.toks) - 1)]

    def next(self) -> Token:
        tok = self.peek()
        self.i = min(self.i + 1, len(self.toks) - 1)
        return tok

    def fail(self, expected: str, tok: Token | None = None, message: str | None = None) -> NoReturn:
        tok = tok or self.peek()
        line, column = tok.line, tok.column
        if tok is self.toks[-1] and len(self.toks) > 1:
            # the end of the input is pointed at just after the last token: a query cut
            # short by a trailing '.' is shown there, not at the blank lines below it
            line, column = just_after(self.toks[-2])
        raise QuerySyntaxError(expected, tok.describe(), line, column, self.source, self.text,
                               message)

    def expect_op(self, symbol: str, expected: str) -> Token:
        if not self.peek().is_op(symbol):
            self.fail(expected)
        return self.next()

    def accept_op(self, symbol: str) -> Token | None:
        return self.next() if self.peek().is_op(symbol) else None

    def expect_ident(self, expected: str) -> Token:
        if self.peek().kind != "IDENT":
            self.fail(expected)
        return self.next()

    def expect_kw(self, word: str, expected: str) -> Token:
        if not self.peek().is_keyword(word):
            self.fail(expected)
        return self.next()

    def accept_kw(self, word: str) -> Token | None:
        return self.next() if self.peek().is_keyword(word) else None


def name_of_file(path: str | Path, fallback: str = "pattern",
                 reserved: frozenset[str] | set[str] = frozenset()) -> str:
    """A pattern's name from its file: the stem as a name, each run of other characters
    one ``_`` (``port-scan.nu``: ``port_scan``; ``2024.nu``: ``_2024``), or ``fallback``
    when nothing of it is left or it is one of the ``reserved`` words (lower case).

    >>> name_of_file("rules/port-scan.nu"), name_of_file("2024 scan.nu"), name_of_file("-.nu")
    ('port_scan', '_2024_scan', 'pattern')
    """
    name = re.sub(r"[^A-Za-z0-9_]+", "_", Path(path).stem)
    if not name.strip("_") or name.lower() in reserved:
        return fallback
    return f"_{name}" if name[0].isdigit() else name
