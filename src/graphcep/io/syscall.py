"""System-call traces (``.syscall``), the case study of Tolpin et al., "Progressive Temporal
Window Widening": one call a line, ``[TIME] NAME [ARG=VALUE ...] [=> RETURN]``.

**Time.** One call arrives per time unit (one second of the edge schema, so ν delays and
``--pww-base`` read in time units). A line may open with its time, a whole number of
time units; a line without one comes one unit after the previous call (the first at 1), so
in a trace of calls alone a call's time is its line number. Times must increase from
call to call (two calls never share a time).

**Links.** ν-expressions match node names, not labels, so each call becomes two links at
its time, in this order:

* ``NAME ~> KEY``: the call reads its key object, the value of its first argument (``-``
  for a call without arguments);
* ``KEY ~> RETURN``: the object gives its result, when the call returns one.

``accept fd=5 => 6`` is ``accept ~> 5``, ``5 ~> 6``; ``dup fd=6 => 0`` is ``dup ~> 6``,
``6 ~> 0``; ``execve exe=sh`` is ``execve ~> sh``. A value returned by one call and read by
another (the accepted connection ``6``) is the same node in both, so one ν variable holds
it; the two links of a call share a time no other call has, so ``<K ~> R>[0]`` after
``NAME ~> K`` reads the same call (``examples/nu/remote_shell.nu``). Each row's ``label``
is the call's name, ``seq`` its link's number (1-based), and a reject's ``line`` its line.

A ``#`` opening a line makes it a comment; blank and comment lines are skipped. A line that
is no call (an argument without ``=``, an empty name or value, ``=>`` without exactly one
value after it, a time that does not increase, invalid UTF-8) is a counted reject with its
line number, reason and text; its call is not read.

Examples
--------
>>> read = parse_syscall("accept fd=5 => 6\\n# shell\\n9 dup fd=6 => 0\\nexecve exe\\n", "x")
>>> [(t // 10**6, s, d) for t, s, d in zip(*(read.edges.column(c).to_pylist()
...                                           for c in ("t", "src", "dst")))]
[(1, 'accept', '5'), (1, '5', '6'), (9, 'dup', '6'), (9, '6', '0')]
>>> read.rejects.to_pylist()[0]["line"], read.rejects.to_pylist()[0]["reason"]
(4, "argument without '=' (an argument is NAME=VALUE): 'exe'")
>>> read.lines, read.skipped, read.last
(4, 1, 9)
"""

from __future__ import annotations

from typing import NamedTuple

import pyarrow as pa

from graphcep.events import US_PER_SECOND
from graphcep.io.formats import MAX_ABS_US
from graphcep.io.token_text import FileRejects, text_lines, unreadable_text

__all__ = ["SyscallRead", "Call", "parse_syscall", "parse_call", "NO_KEY", "RETURNS"]

#: The key node of a call without arguments.
NO_KEY = "-"
#: The token before a call's return value.
RETURNS = "=>"


class Call(NamedTuple):
    """One system call as written on its line."""

    #: Its time in time units, or None when the line gives none.
    time: int | None
    name: str
    #: ``(name, value)`` per argument, in order.
    args: tuple[tuple[str, str], ...]
    #: The return value, or None.
    result: str | None


class SyscallRead(NamedTuple):
    """What parsing a system-call trace gave."""

    #: Two rows per call (one without a return value): ``t``, ``src``, ``dst``, ``seq``,
    #: ``label`` (the call's name).
    edges: pa.Table
    #: The rejected lines (file, line, reason, text).
    rejects: pa.Table
    #: Lines read.
    lines: int
    #: Blank and comment lines.
    skipped: int
    #: The time of the last call read (``after`` when none was).
    last: int


def parse_call(line: str) -> Call | str:
    """One line's call, or why it is none (see the module docstring).

    >>> parse_call("3 accept fd=5 => 6")
    Call(time=3, name='accept', args=(('fd', '5'),), result='6')
    >>> parse_call("dup fd=6 =>")
    "'=>' with no return value after it"
    """
    if (unreadable := unreadable_text(line)) is not None:
        return unreadable
    tokens = line.split()
    time = None
    if tokens and tokens[0].isdigit():
        time = int(tokens.pop(0))
    result = None
    if RETURNS in tokens:
        at = tokens.index(RETURNS)
        after = tokens[at + 1:]
        if len(after) != 1:
            return ("'=>' with no return value after it" if not after
                    else f"more than one value after '=>' (a call returns one): {len(after)}")
        result, tokens = after[0], tokens[:at]
    if not tokens:
        return "no system call name"
    name, *words = tokens
    if "=" in name:
        return f"'=' in the system call's name: {name!r}"
    args = []
    for word in words:
        key, eq, value = word.partition("=")
        if not eq:
            return f"argument without '=' (an argument is NAME=VALUE): {word!r}"
        if not key or not value:
            return f"argument with an empty name or value: {word!r}"
        args.append((key, value))
    return Call(time, name, tuple(args), result)


def parse_syscall(text: str, name: str, after: int = 0) -> SyscallRead:
    """Parse a system-call trace (see the module docstring).

    Parameters
    ----------
    text
        The file's text (invalid UTF-8 decoded as U+FFFD).
    name
        The file's name, for its rejects.
    after
        The time of the call before its first (the last call of the files before it): a
        line without a time comes one unit after it.

    Returns
    -------
    SyscallRead
        Calls as edge rows, rejects, lines read, lines skipped and the last call's time.
    """
    times: list[int] = []
    srcs: list[str] = []
    dsts: list[str] = []
    labels: list[str] = []
    rejects = FileRejects(name)
    lines, count = text_lines(text)
    skipped = 0
    last = after
    for number, line in enumerate(lines[:count], start=1):
        line = line.rstrip("\r")
        if not line.strip() or line.lstrip().startswith("#"):
            skipped += 1
            continue
        call = parse_call(line)
        if isinstance(call, str):
            rejects.add(number, call, line)
            continue
        time = last + 1 if call.time is None else call.time
        if call.time is not None and (times or after) and time <= last:
            rejects.add(number, f"time not after the previous call's ({last}): {time}", line)
            continue
        if time * US_PER_SECOND >= MAX_ABS_US:
            rejects.add(number, f"time past the range of times (2**62 µs): {time}", line)
            continue
        last = time
        key = call.args[0][1] if call.args else NO_KEY
        links = [(call.name, key)] + ([(key, call.result)] if call.result is not None else [])
        for src, dst in links:
            times.append(time * US_PER_SECOND)
            srcs.append(src)
            dsts.append(dst)
            labels.append(call.name)
    edges = pa.table({
        "t": pa.array(times, pa.int64()),
        "src": pa.array(srcs, pa.string()),
        "dst": pa.array(dsts, pa.string()),
        "seq": pa.array(range(1, len(times) + 1), pa.int64()),
        "label": pa.array(labels, pa.string()),
    })
    return SyscallRead(edges, rejects.table(), count, skipped, last)
