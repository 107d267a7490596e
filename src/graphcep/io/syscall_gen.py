"""Synthetic system-call traces with remote-shell episodes, for the window-widening case
study (:mod:`graphcep.io.syscall`, ``examples/nu/remote_shell.nu``).

``python -m graphcep.io.syscall_gen OUT.syscall [--episodes N] [--background N]
[--min-delay D] [--max-delay D] [--seed S]`` writes a trace and, beside it
(``OUT.truth.json`` unless ``--truth`` names another file), the injected episodes' ground
truth: per episode its first and last call's times (``start``, ``end``), every call's time,
the accepted connection ``fd`` and the listening one ``listen``.

Decisions
---------
* An episode is ``accept fd=x => y``, ``dup fd=y => 0``, ``=> 1``, ``=> 2`` in a random
  order, ``execve exe=/bin/sh``; the delay before each call after the first is drawn
  log-uniformly among whole numbers from ``min_delay`` to ``max_delay`` time units, so slow
  and fast episodes both come. Episodes follow each other (one starts after the previous
  ends) and each accepts its own connection (``y`` from 1000 on).
* Background calls (``open``, ``read``, ``write``, ``close``, ``stat``, and ``accept``,
  ``dup`` and ``execve`` too) come at random free times over the episodes' span; their
  descriptors stay below 1000 and they never ``dup`` onto 0, 1 or 2, so they complete no
  episode of their own, and no ``execve`` comes inside an episode (it would end the
  episode there). An episode followed by a later ``execve`` (of the background or of
  the next episode) matches the paper's pattern again, ending there: the ground truth
  lists the injected episodes, each the earliest-ending match from its ``accept``.
* Every line carries its time (the trace is sparse: one call per time unit at most).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import sys
from pathlib import Path
from typing import NoReturn

import numpy as np

__all__ = ["generate_syscalls", "write_syscalls", "main"]

_SHELL = "/bin/sh"
_FIRST_CONNECTION = 1000


def _delay(rng: np.random.Generator, low: int, high: int) -> int:
    """A whole delay from ``low`` to ``high``, log-uniform."""
    return min(high, max(low, round(math.exp(rng.uniform(math.log(low), math.log(high))))))


def _background_call(rng: np.random.Generator, execve: bool) -> str:
    """One unrelated call: its descriptors below 1000, never a ``dup`` onto 0, 1 or 2; an
    ``execve`` only where ``execve`` says it may come."""
    fd = int(rng.integers(3, 64))
    kind = int(rng.integers(0, 8 if execve else 7))
    return [
        f"open path=/etc/f{fd} => {fd}",
        f"read fd={fd} => {int(rng.integers(0, 4096))}",
        f"write fd={fd} => {int(rng.integers(0, 4096))}",
        f"close fd={fd} => 0",
        f"stat path=/tmp/f{fd} => 0",
        f"accept fd=3 => {fd}",
        f"dup fd={fd} => {int(rng.integers(64, 128))}",
        "execve exe=/usr/bin/ls",
    ][kind]


def generate_syscalls(
    episodes: int = 3,
    background: int = 100,
    min_delay: int = 1,
    max_delay: int = 100_000,
    seed: int = 0,
) -> tuple[list[tuple[int, str]], list[dict]]:
    """A trace's calls ``(time, call)`` in time order and its episodes' ground truth.

    Parameters
    ----------
    episodes
        Remote-shell episodes injected.
    background
        Unrelated calls, at random free times over the episodes' span.
    min_delay, max_delay
        The range of delays between an episode's calls, in time units (``1 <= min <= max``).
    seed
        Seed of the random draws (NumPy ``default_rng``).
    """
    if not 1 <= min_delay <= max_delay:
        raise ValueError(f"delays must satisfy 1 <= min_delay <= max_delay, not "
                         f"{min_delay}, {max_delay}")
    rng = np.random.default_rng(seed)
    calls: dict[int, str] = {}
    truth = []
    now = 1
    for i in range(episodes):
        y = _FIRST_CONNECTION + i
        body = [f"dup fd={y} => {k}" for k in rng.permutation(3)]
        steps = [f"accept fd=3 => {y}", *body, f"execve exe={_SHELL}"]
        times = []
        for j, call in enumerate(steps):
            if j:
                now += _delay(rng, min_delay, max_delay)
            calls[now] = call
            times.append(now)
        truth.append({"start": times[0], "end": times[-1], "times": times, "fd": y,
                      "listen": 3})
        now += _delay(rng, min_delay, max_delay)
    span = max(now, background + len(calls) + 1)
    free = np.setdiff1d(np.arange(1, span + 1), np.fromiter(calls, np.int64))
    spans = [(e["start"], e["end"]) for e in truth]
    for t in rng.choice(free, size=min(background, free.size), replace=False):
        outside = all(not start < t < end for start, end in spans)
        calls[int(t)] = _background_call(rng, execve=outside)
    return sorted(calls.items()), truth


def write_syscalls(calls: list[tuple[int, str]], path: str | os.PathLike) -> None:
    """Write calls as a ``.syscall`` trace, each line opening with its time."""
    Path(path).write_text("".join(f"{t} {call}\n" for t, call in calls), encoding="utf-8")


class _OneLineParser(argparse.ArgumentParser):
    """A wrong option is one line on stderr and exit status 2 (``--help`` shows usage)."""

    def error(self, message: str) -> NoReturn:
        self.exit(2, f"{self.prog}: {message}\n")


def _count(text: str) -> int:
    """An argparse type: a whole number, 0 or more."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected 0 or more, got {value}")
    return value


def main(argv: list[str] | None = None) -> int:
    """The command line (see the module docstring)."""
    parser = _OneLineParser(prog="python -m graphcep.io.syscall_gen",
                            description="A system-call trace with remote-shell episodes, "
                            "and their ground truth (JSON).")
    parser.add_argument("output", help="the .syscall file to write")
    parser.add_argument("--episodes", type=_count, default=3)
    parser.add_argument("--background", type=_count, default=100)
    parser.add_argument("--min-delay", type=_count, default=1)
    parser.add_argument("--max-delay", type=_count, default=100_000)
    parser.add_argument("--seed", type=_count, default=0)
    parser.add_argument("--truth", help="the ground truth's file (default OUT.truth.json)")
    args = parser.parse_args(argv)
    try:
        calls, truth = generate_syscalls(args.episodes, args.background, args.min_delay,
                                         args.max_delay, args.seed)
    except ValueError as err:
        parser.error(str(err))
    out = Path(args.output)
    truth_path = Path(args.truth) if args.truth else out.with_suffix(".truth.json")
    try:
        write_syscalls(calls, out)
        truth_path.write_text(json.dumps({"time_unit": "1 s", "episodes": truth}, indent=1)
                              + "\n", encoding="utf-8")
    except OSError as err:
        print(f"{parser.prog}: {err.filename}: {err.strerror}", file=sys.stderr)
        return 1
    print(f"{out}: {len(calls)} calls, {len(truth)} episodes; ground truth in {truth_path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
