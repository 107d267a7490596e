"""Ctrl-C and ``kill`` while Spark runs: one line and the conventional exit status.

Once a SparkContext exists, its own SIGINT handler cancels the jobs through py4j and raises
``KeyboardInterrupt`` wherever the main thread is -- often in the middle of a py4j call,
which then prints dozens of lines of connection errors before graphcep can say anything.
The commands that talk to Spark replace that handler with :func:`exit_on_interrupt`.
"""

from __future__ import annotations

import contextlib
import os
import signal
import sys
import threading
from collections.abc import Iterator
from typing import Any

#: Signals that stop a command at once with one line: Ctrl-C, and ``kill`` (as systemd and
#: container runtimes stop a service).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_on_interrupt(note: str) -> None:
    """From now on, Ctrl-C or SIGTERM ends the process at once: one line, exit 130 or 143.

    Not a ``KeyboardInterrupt``: raised in the middle of a call into Spark it breaks the
    connection to the JVM, and work running in Spark's callback threads goes on regardless.
    The caller says in ``note`` what the user keeps (and so when leaving at once is safe).
    """

    def interrupted(signum: int, frame: Any) -> None:
        with contextlib.suppress(Exception):
            sys.stdout.flush()  # matches already printed on the console
        what = "interrupted" if signum == signal.SIGINT else "terminated"
        os.write(sys.stderr.fileno(), f"graphcep: {what}; {note}\n".encode())
        os._exit(128 + signum)  # 130 for Ctrl-C, 143 for kill's SIGTERM

    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupted)


@contextlib.contextmanager
def signals_kept() -> Iterator[None]:
    """Restore the stop signals' handlers on the way out (a library caller, a test, keeps its
    own Ctrl-C; the part of a command after Spark is done gets Python's)."""
    previous = {sig: signal.getsignal(sig) for sig in STOP_SIGNALS}
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


@contextlib.contextmanager
def interrupt_deferred() -> Iterator[list[int]]:
    """Hold Ctrl-C and SIGTERM back for the block; the list yielded names those that came.

    For the JVM's start: interrupted half-way, PySpark leaves a Java process behind that
    never exits. Held back, the signal is honoured once the session is up and can be
    stopped cleanly. Outside the main thread (where no handler can be set) nothing is held.
    """
    caught: list[int] = []
    if threading.current_thread() is not threading.main_thread():
        yield caught
        return
    with signals_kept():
        for sig in STOP_SIGNALS:
            signal.signal(sig, lambda signum, frame: caught.append(signum))
        yield caught
