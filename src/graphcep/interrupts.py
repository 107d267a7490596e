"""Ctrl-C and ``kill`` while Spark runs: one line and the conventional exit status.

Once a SparkContext exists, its own SIGINT handler cancels the jobs through py4j and raises
``KeyboardInterrupt`` wherever the main thread is -- often in the middle of a py4j call,
which then prints dozens of lines of connection errors before graphcep can say anything.
The commands that talk to Spark replace that handler with :func:`exit_on_interrupt`.
"""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from typing import Any

#: Signals that stop a command at once with one line: Ctrl-C, and ``kill`` (as systemd and
#: container runtimes stop a service).
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)


def exit_on_interrupt(note: str, last: Callable[[], str] | None = None) -> None:
    """From now on, Ctrl-C or SIGTERM ends the process at once: one line, exit 130 or 143.

    Not a ``KeyboardInterrupt``: raised in the middle of a call into Spark it breaks the
    connection to the JVM, and work running in Spark's callback threads goes on regardless.
    The caller says in ``note`` what the user keeps (and so when leaving at once is safe).
    ``last``, when given, runs first (a stream's summary and pictures of what it has done);
    what it returns ends the line, and its failure is named there instead. A second signal
    while it runs leaves at once. py4j's own log records are silenced too
    (:func:`quiet_py4j_records`).
    """
    quiet_py4j_records()
    leaving: list[int] = []

    def interrupted(signum: int, frame: Any) -> None:
        _JVM_SILENCED.set()  # the JVM's stderr from now on is dropped (jvm_stderr_relay)
        _hush_jvm()
        ending = ""
        if last is not None and not leaving:
            leaving.append(signum)
            try:
                ending = last()  # the JVM still up: a summary may ask Spark
            except Exception as err:  # the line still comes, and says what was not done
                ending = f"; {err}"
        with contextlib.suppress(Exception):
            sys.stdout.flush()  # matches already printed on the console
            sys.stderr.flush()
        stderr = _stderr_to_null()
        _stop_jvm()
        what = "interrupted" if signum == signal.SIGINT else "terminated"
        os.write(stderr, f"graphcep: {what}; {note}{ending}\n".encode())
        os._exit(128 + signum)  # 130 for Ctrl-C, 143 for kill's SIGTERM

    for sig in STOP_SIGNALS:
        signal.signal(sig, interrupted)


#: Set on an interrupt: what the JVM writes on stderr after it is not copied to ours.
_JVM_SILENCED = threading.Event()


def jvm_stderr_relay() -> int:
    """A pipe for the JVM's stderr: a daemon thread copies what comes to graphcep's stderr
    until an interrupt (:func:`exit_on_interrupt`), then drops it. Returns the write end,
    for the JVM's ``Popen`` (close it here once the JVM has started).

    Stopped while a micro-batch runs, the JVM goes on for a moment failing its tasks and
    RPC calls (an ``RpcEnvStoppedException`` trace and more), on the stderr it shares;
    switching its log off first (:func:`_hush_jvm`) takes a py4j call that a loaded
    machine may not answer in time. What the JVM writes through this pipe cannot come
    after graphcep's line, whatever the load.
    """
    read, write = os.pipe()

    def relay() -> None:
        with os.fdopen(read, "rb", buffering=0) as source:
            while chunk := source.read(65536):
                if not _JVM_SILENCED.is_set():
                    with contextlib.suppress(OSError):
                        os.write(sys.stderr.fileno(), chunk)

    threading.Thread(target=relay, name="jvm-stderr", daemon=True).start()
    return write


def _stderr_to_null() -> int:
    """Send what this process writes on stderr (file descriptor 2) to ``/dev/null`` from
    now on, and return a descriptor of the real stderr, for the one line. While the JVM
    stops, PySpark's own threads (its accumulator server, reading from a connection the
    JVM closes) print tracebacks on stderr: they must not come before that line."""
    real = os.dup(sys.stderr.fileno())
    null = os.open(os.devnull, os.O_WRONLY)
    os.dup2(null, sys.stderr.fileno())
    os.close(null)
    return real


#: Seconds the JVM may take to stop on an interrupt before it is killed.
JVM_STOP_SECONDS = 15.0


def _stop_jvm() -> None:
    """Ask the JVM to stop now (SIGTERM: its shutdown hooks still remove its temporary
    files), rather than let it notice the lost connection while its tasks fail one by
    one, each with a stack trace on the stderr it shares with graphcep; and wait until it
    has (SIGKILL after :data:`JVM_STOP_SECONDS`). A JVM that outlived the command could
    still log a micro-batch's offsets in the checkpoint while the same command, run again
    at once to continue, starts on it: Spark then stops the new run ("Concurrent update
    to the log"). A no-op without a gateway process."""
    pyspark = sys.modules.get("pyspark")
    gateway = getattr(getattr(pyspark, "SparkContext", None), "_gateway", None)
    process = getattr(gateway, "proc", None)
    if process is None:
        return
    with contextlib.suppress(Exception):
        process.terminate()
        try:
            process.wait(timeout=JVM_STOP_SECONDS)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait(timeout=5)


def _hush_jvm(wait: float = 2.0) -> None:
    """Turn the JVM's log off before the process leaves it (a no-op without a SparkContext).

    The JVM outlives the Python process by a moment, stopping the Spark jobs still running,
    and each task it aborts is an ERROR with a Java stack trace on the stderr it shares.
    The call goes from a thread of its own: the main thread, where the signal handler runs,
    may be half-way through a call on its own py4j connection.
    """
    pyspark = sys.modules.get("pyspark")
    context = getattr(pyspark, "SparkContext", None)
    active = getattr(context, "_active_spark_context", None)
    if active is None:
        return

    def off() -> None:
        with contextlib.suppress(Exception):
            active.setLogLevel("OFF")

    hush = threading.Thread(target=off, name="hush-jvm", daemon=True)
    hush.start()
    hush.join(wait)


def quiet_py4j_records() -> None:
    """Drop the records py4j logs on the root logger (``logging.exception(...)`` when a
    ``KeyboardInterrupt`` or a closed connection meets a call into the JVM): with no
    handler configured, each is a traceback on stderr after Ctrl-C. Idempotent."""
    root = logging.getLogger()
    if not any(isinstance(f, _Py4JRecords) for f in root.filters):
        root.addFilter(_Py4JRecords())


class _Py4JRecords(logging.Filter):
    """Refuses the records logged from py4j's modules."""

    def filter(self, record: logging.LogRecord) -> bool:
        return f"{os.sep}py4j{os.sep}" not in record.pathname


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


def honour(caught: list[int]) -> None:
    """Act on the first signal :func:`interrupt_deferred` held back: through the command's
    own handler where it set one (:func:`exit_on_interrupt`: its line, 130 or 143), else
    as ``KeyboardInterrupt``. Nothing when none came."""
    if not caught:
        return
    handler = signal.getsignal(caught[0])
    if callable(handler) and handler is not signal.default_int_handler:
        signal.raise_signal(caught[0])
    raise KeyboardInterrupt
