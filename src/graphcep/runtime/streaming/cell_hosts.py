"""Cell hosts: the executor mode's live engines in one process per executor and task slot.

A cell's engine is kept alive between micro-batches (:class:`~graphcep.runtime.streaming.cells.LiveCells`)
so that a step does not rebuild it from the cell's state files. Kept in the Spark Python
worker that stepped it, it served the next step only when Spark handed the cell's next
task to that same worker; with several task slots Spark hands a task whichever idle worker
comes first, and about half the steps rebuilt their engine (8 cells on ``local[2]``: 56 of
128 steps), each re-reading the cell's window.

So the task that steps cells ``c`` with ``c mod tasks == k`` (:func:`~graphcep.runtime.streaming.cells.partition_keys`)
hands them to host ``k`` of its executor: a process beside the executor's Python workers,
started by the first task that needs it, that keeps the engines whichever worker runs the
task. It runs the same step (:meth:`~graphcep.runtime.streaming.cells.CellRunner.step`),
so the states stay files and the driver's records stay the truth: a host that died, or
could not start, leaves the step to the worker itself, which rebuilds the engine from the
files, and a step re-run after a failure finds the host's engine of another version and
rebuilds it too.

A host listens on a Unix socket named by the executor's Python daemon (the workers'
parent, whose end is the executor's) and the slot, takes one task's connection at a time
(the runner, then a request per cell: length-prefixed pickles), and exits when the daemon
is gone or after :data:`IDLE_S` seconds without a task.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import pickle
import socket
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pyarrow as pa

#: a host with no task for this long exits (its engines with it)
IDLE_S = 900.0
#: how long a task waits for a host it started to listen
_START_S = 60.0
_LENGTH = struct.Struct("!Q")


def _send(conn: socket.socket, value: Any) -> None:
    """``value`` pickled as Spark pickles a task's functions (by value where pickle cannot
    name them), its length first."""
    from pyspark import cloudpickle

    data = cloudpickle.dumps(value, protocol=pickle.HIGHEST_PROTOCOL)
    conn.sendall(_LENGTH.pack(len(data)) + data)


def _receive(conn: socket.socket) -> Any:
    size = _LENGTH.unpack(_exactly(conn, _LENGTH.size))[0]
    return pickle.loads(_exactly(conn, size))


def _exactly(conn: socket.socket, size: int) -> bytes:
    chunks, left = [], size
    while left:
        chunk = conn.recv(min(left, 1 << 22))
        if not chunk:
            raise ConnectionError("the cell host closed the connection")
        chunks.append(chunk)
        left -= len(chunk)
    return b"".join(chunks)


def socket_path(slot: int, daemon: int | None = None) -> Path:
    """Where host ``slot`` of this executor listens (``daemon``: the Python daemon's pid,
    default this worker's parent)."""
    folder = Path(tempfile.gettempdir()) / f"graphcep-cells-{os.getuid()}"
    return folder / f"{daemon if daemon is not None else os.getppid()}-{slot}.sock"


class HostClient:
    """A task's connection to its slot's host, the runner sent once (:func:`connect`)."""

    def __init__(self, conn: socket.socket, runner: Any) -> None:
        self._conn = conn
        _send(conn, runner)

    def step(self, cell: int, stored: bytes | None, payloads: list[bytes], batch: int,
             attempt: int) -> tuple[pa.Table, bytes]:
        """As :meth:`~graphcep.runtime.streaming.cells.CellRunner.step`, in the host; a
        failure of the step itself is raised here as it was there."""
        _send(self._conn, (cell, stored, payloads, batch, attempt))
        reply = _receive(self._conn)
        if reply[0] == "error":
            raise reply[1]
        return reply[1], reply[2]

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._conn.close()


@contextlib.contextmanager
def connect(slot: int, runner: Any) -> Iterator[HostClient | None]:
    """This executor's host ``slot``, started if none listens; None when it cannot be had
    (the task steps its cells itself)."""
    try:
        client = HostClient(_socket(socket_path(slot)), runner)
    except (OSError, ConnectionError, TimeoutError):
        yield None
        return
    try:
        yield client
    finally:
        client.close()


def _socket(path: Path) -> socket.socket:
    """A connection to the host at ``path``, started under a lock if none answers."""
    conn = _try_connect(path)
    if conn is not None:
        return conn
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    with open(path.parent / "start.lock", "w") as lock:  # one start at a time
        fcntl.flock(lock, fcntl.LOCK_EX)
        conn = _try_connect(path)
        if conn is not None:
            return conn
        with contextlib.suppress(FileNotFoundError):
            path.unlink()  # a host that died left it
        env = {**os.environ, "PYTHONPATH": os.pathsep.join(p for p in sys.path if p)}
        # a host that fails to start is a task that steps its cells itself: nothing to say
        subprocess.Popen([sys.executable, "-m", __name__, str(path), str(os.getppid())],
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, env=env, start_new_session=True)
        deadline = time.monotonic() + _START_S
        while time.monotonic() < deadline:
            conn = _try_connect(path)
            if conn is not None:
                return conn
            time.sleep(0.05)
    raise TimeoutError(f"no cell host answered at {path}")


def _try_connect(path: Path) -> socket.socket | None:
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        conn.connect(str(path))
    except OSError:
        conn.close()
        return None
    return conn


def serve(path: Path, daemon: int, idle_s: float = IDLE_S) -> None:
    """Host the cells of the tasks that connect at ``path`` until the process ``daemon``
    is gone or no task came for ``idle_s`` seconds."""
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    server.bind(str(path))
    server.listen(16)
    server.settimeout(1.0)
    last = time.monotonic()
    try:
        while alive(daemon) and time.monotonic() - last < idle_s:
            try:
                conn, _ = server.accept()
            except TimeoutError:
                continue
            with conn:
                conn.settimeout(None)
                _serve_task(conn)
            last = time.monotonic()
    finally:
        server.close()
        with contextlib.suppress(FileNotFoundError):
            path.unlink()


def _serve_task(conn: socket.socket) -> None:
    """One task: its runner, then its cells until it closes the connection."""
    try:
        runner = _receive(conn)
        while True:
            request = _receive(conn)
            try:
                out, saved = runner.step(*request)
            except Exception as err:  # the task raises it as the step would have
                _send(conn, ("error", _picklable(err)))
                continue
            _send(conn, ("ok", out, saved))
    except (ConnectionError, OSError, EOFError):
        return  # the task ended (or died): the next one connects anew


def _picklable(err: Exception) -> Exception:
    """``err``, or its text where it does not pickle."""
    try:
        pickle.loads(pickle.dumps(err))
    except Exception:
        return RuntimeError(f"{type(err).__name__}: {err}")
    return err


def alive(pid: int) -> bool:
    """Whether process ``pid`` exists."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


if __name__ == "__main__":
    serve(Path(sys.argv[1]), int(sys.argv[2]))
