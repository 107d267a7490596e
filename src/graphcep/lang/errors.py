"""Errors raised by the query languages (SAL, DDST, and every language added after them).

Every problem the tokenizer or the parser finds -- malformed text as well as semantic
mistakes such as an unknown edge or an undefined stream -- is a :class:`QuerySyntaxError`
carrying a 1-based line and column. Its text names the source, the position, what was
expected and what was found, then shows the offending line with a caret under the column::

    query.sal:3:10: expected ';' after the topology line, found 'e2'
        x1 e1 x2 e2;
                 ^
"""

from __future__ import annotations

__all__ = ["QuerySyntaxError"]


def source_line(text: str, line: int) -> str:
    """Line ``line`` (1-based) of ``text``, lines split on ``\\n`` only; ``''`` if absent.

    Examples
    --------
    >>> source_line("a\\nbc\\n", 2)
    'bc'
    """
    lines = text.split("\n")
    if 1 <= line <= len(lines):
        return lines[line - 1].rstrip("\r")
    return ""


def _caret(line_text: str, column: int) -> str:
    """Spaces (tabs where the source has tabs) up to ``column``, then ``^``."""
    prefix = "".join("\t" if ch == "\t" else " " for ch in line_text[: max(column - 1, 0)])
    return prefix + "^"


class QuerySyntaxError(ValueError):
    """A query text (in any of graphcep's languages) that cannot be turned into pattern objects.

    Parameters
    ----------
    expected : str
        What the parser wanted at this point, in words (``"';' after the topology line"``).
    found : str
        What it found, as shown to the user (``"'e2'"``, ``"end of input"``).
    line, column : int
        1-based position of the offending token.
    source : str
        Name of the text (a file path, or ``"<query>"``).
    text : str
        The whole source text; only the offending line is kept, for display.
    message : str, optional
        Replaces the default ``"expected X, found Y"`` sentence (used for semantic errors).

    Examples
    --------
    >>> err = QuerySyntaxError("';'", "'e2'", 1, 10, "q.sal", "x1 e1 x2 e2;")
    >>> print(err)
    q.sal:1:10: expected ';', found 'e2'
        x1 e1 x2 e2;
                 ^
    >>> (err.line, err.column, err.expected, err.found)
    (1, 10, "';'", "'e2'")
    """

    def __init__(
        self,
        expected: str,
        found: str,
        line: int,
        column: int,
        source: str = "<query>",
        text: str = "",
        message: str | None = None,
    ) -> None:
        self.expected = expected
        self.found = found
        self.line = line
        self.column = column
        self.source = source
        self.line_text = source_line(text, line)
        self.message = message if message is not None else f"expected {expected}, found {found}"
        super().__init__(self.__str__())

    def __reduce__(self) -> tuple[object, ...]:
        state = (self.expected, self.found, self.line, self.column, self.source)
        return (_rebuild, (*state, self.line_text, self.message))

    @property
    def headline(self) -> str:
        """The one-line form, ``file:line:col: message`` (what a log or a script reads)."""
        return f"{self.source}:{self.line}:{self.column}: {self.message}"

    def __str__(self) -> str:
        if not self.line_text.strip():
            return self.headline
        caret = _caret(self.line_text, self.column)
        return f"{self.headline}\n    {self.line_text}\n    {caret}"


def _rebuild(
    expected: str,
    found: str,
    line: int,
    column: int,
    source: str,
    line_text: str,
    message: str,
) -> QuerySyntaxError:
    """Unpickle a :class:`QuerySyntaxError` (the displayed line is all that is kept)."""
    text = "\n" * (line - 1) + line_text if line >= 1 else ""
    return QuerySyntaxError(expected, found, line, column, source, text, message)
