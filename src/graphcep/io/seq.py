"""Plain sequences (``.seq``): the setting of du Mouza, Rigaux, Scholl (SSDBM 2006), a
sequence of symbols rather than a graph.

Each whitespace-separated token is one symbol, in order. A line may open with a key,
``KEY: sym sym ...``: its symbols continue the sequence of ``KEY`` (a file may interleave
many keys, each keyed line going on where that key's last one stopped). The symbols of a
line without a key belong to the key ``""``. A token starting with ``#`` starts a comment
to the end of the line; blank and comment lines are skipped.

Each symbol becomes one row of the edge schema, so that a subscriptions job reads it with
its default fields (``--key src --symbol dst``): ``src`` the key, ``dst`` the symbol,
``t`` the symbol's position in the read (0-based, across keys and files, one second per
symbol: a notification's ``start_t``/``end_t`` are positions in the input), ``seq`` its
number in its file (1-based).

A line is read whole or not at all: a key with no symbols, a ``:`` anywhere but ending a
line's first token, an empty key or a token of invalid UTF-8 make the line a counted
reject (its number, the first problem found and its text); its symbols are not read.

Examples
--------
>>> read = parse_seq("# figure 3\\na c b\\nh1: 22 80\\nc a d b\\nh1: 22\\nh2:\\n", "x.seq")
>>> read.edges.column("dst").to_pylist()
['a', 'c', 'b', '22', '80', 'c', 'a', 'd', 'b', '22']
>>> read.edges.column("src").to_pylist()[2:5], read.edges.column("t").to_pylist()[:3]
(['', 'h1', 'h1'], [0, 1000000, 2000000])
>>> read.rejects.to_pylist()[0]["line"], read.rejects.to_pylist()[0]["reason"]
(6, "key without symbols: 'h2'")
>>> read.lines, read.skipped
(6, 1)
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

from graphcep.io.token_text import FileRejects, text_lines, unreadable_text

__all__ = ["SeqRead", "parse_seq", "SYMBOL_US"]

#: The time between two symbols: one second, so times read as positions.
SYMBOL_US = 1_000_000


class SeqRead(NamedTuple):
    """What parsing a plain sequence gave."""

    #: One row per symbol: ``t``, ``src`` (key), ``dst`` (symbol), ``seq``.
    edges: pa.Table
    #: The rejected lines (file, line, reason, text).
    rejects: pa.Table
    #: Lines read.
    lines: int
    #: Blank and comment lines.
    skipped: int


def parse_seq(text: str, name: str, first: int = 0) -> SeqRead:
    """Parse a plain sequence (see the module docstring).

    Parameters
    ----------
    text
        The file's text (invalid UTF-8 decoded as U+FFFD).
    name
        The file's name, for its rejects.
    first
        The position of its first symbol in the read (the symbols of the files before it).

    Returns
    -------
    SeqRead
        Symbols as edge rows, rejects, lines read and lines skipped.
    """
    keys: list[str] = []
    symbols: list[str] = []
    rejects = FileRejects(name)
    lines, count = text_lines(text)
    skipped = 0
    for number, line in enumerate(lines[:count], start=1):
        tokens = _uncommented(line.split())
        if not tokens:
            skipped += 1
            continue
        problem = _problem(tokens)
        if problem is not None:
            rejects.add(number, problem, line.rstrip("\r"))
            continue
        key = tokens[0][:-1] if tokens[0].endswith(":") else None
        read = tokens[1:] if key is not None else tokens
        keys += [key or ""] * len(read)
        symbols += read
    edges = pa.table({
        "t": pa.array([(first + i) * SYMBOL_US for i in range(len(symbols))], pa.int64()),
        "src": pa.array(keys, pa.string()),
        "dst": pa.array(symbols, pa.string()),
        "seq": pa.array(range(1, len(symbols) + 1), pa.int64()),
    })
    return SeqRead(edges, rejects.table(), count, skipped)


def _uncommented(tokens: list[str]) -> list[str]:
    """The tokens before the first one starting with ``#``."""
    for i, token in enumerate(tokens):
        if token.startswith("#"):
            return tokens[:i]
    return tokens


def _problem(tokens: list[str]) -> str | None:
    """Why a line's tokens are no keyed or unkeyed run of symbols (None: they are)."""
    if (unreadable := unreadable_text("".join(tokens))) is not None:
        return unreadable
    head = tokens[0]
    if head == ":":
        return "no key before ':' (a key is written 'KEY:')"
    if ":" in head[:-1]:
        return f"colon inside a key: {head!r} (a key is written 'KEY:', then the symbols)"
    if head.endswith(":") and len(tokens) == 1:
        return f"key without symbols: {head[:-1]!r}"
    for token in tokens[1:]:
        if ":" in token:
            return (f"colon in a symbol: {token!r} (only a key, first on its line, ends "
                    "with ':')")
    return None
