"""Time-event sequences (``.tes``), the input of MaTiNA, the timed ν-automata paper's tool.

The text is whitespace-separated tokens (spaces, tabs, line ends). A token starting with a
digit (or a sign, or a point) is a **pause**: seconds since the previous event, a decimal
read exactly (a token that is no number, a negative pause or one past the range of times
is a counted reject, as is a token of invalid UTF-8; a byte order mark opening the file is
skipped). Any other token is an **event**: a node. Times
are summed exactly and each event's time is rounded once to the microsecond (half to
even), so pauses finer than a microsecond never drift. A link ``u -> v`` is written as
the two events ``u v`` with no pause between them.

Each event becomes one row of the edge schema with ``src`` the node and ``dst`` empty --
what the ν engine reads as one event (:mod:`graphcep.engines.nu.engine`); other engines
see a link to the node ``""``. ``t`` is the sum of the pauses before it (the sequence
starts at 0), ``seq`` the event's number (1-based), and a reject's ``line`` the line of
its token.

Examples
--------
>>> edges, rejects, lines = parse_tes("a 0.1 y\\n0.3 z b 1.2.3", "x.tes")
>>> list(zip(edges.column("t").to_pylist(), edges.column("src").to_pylist()))
[(0, 'a'), (100000, 'y'), (400000, 'z'), (400000, 'b')]
>>> rejects.to_pylist()[0]["reason"], lines
("pause not a number: '1.2.3'", 2)
"""

from __future__ import annotations

from fractions import Fraction

import pyarrow as pa

from graphcep.events import TimeFormatError, seconds_to_fraction_us
from graphcep.io.formats import MAX_ABS_US
from graphcep.io.token_text import FILE_REJECT_SCHEMA, FileRejects, text_lines, unreadable_text

__all__ = ["parse_tes", "TES_REJECT_SCHEMA"]

#: Rejects of a time-event sequence: the readers' reject rows (file, line, reason, text).
TES_REJECT_SCHEMA = FILE_REJECT_SCHEMA


def parse_tes(text: str, name: str) -> tuple[pa.Table, pa.Table, int]:
    """Events (edge rows with an empty ``dst``), rejects and the number of lines of a
    time-event sequence."""
    times, nodes, seqs = [], [], []
    rejects = FileRejects(name)
    now = Fraction(0)  # exact: each event's time is rounded once, so pauses never drift
    lines, count = text_lines(text)
    for number, line in enumerate(lines, start=1):
        for token in line.split():
            if (unreadable := unreadable_text(token)) is not None:
                rejects.add(number, unreadable, token)
            elif token[0].isdigit() or token[0] in "+-.":
                try:
                    pause = seconds_to_fraction_us(token)
                except TimeFormatError:
                    rejects.add(number, f"pause not a number: {token!r}", token)
                    continue
                if pause < 0:
                    rejects.add(number, f"negative pause: {token!r}", token)
                elif now + pause >= MAX_ABS_US:
                    rejects.add(number, f"pause past the range of times (2**62 µs): "
                                f"{token!r}", token)
                else:
                    now += pause
            else:
                times.append(round(now))  # to the nearest microsecond, half to even
                nodes.append(token)
                seqs.append(len(seqs) + 1)
    edges = pa.table({"t": pa.array(times, pa.int64()), "src": pa.array(nodes, pa.string()),
                      "dst": pa.array([""] * len(nodes), pa.string()),
                      "seq": pa.array(seqs, pa.int64())})
    return edges, rejects.table(), count
