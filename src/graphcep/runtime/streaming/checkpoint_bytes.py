"""Checkpoint state as compressed bytes: what the streaming operators write every
micro-batch (the driver operator's ``state-<b>.bin``, the executor cells' state files).

A micro-batch's state is written whole, and much of it is arrays of small integers and
repeated names: 20 mixed rules over S1 snapshot 62.7 MB, 9.9 MB compressed with zstd at
level 1 in 0.16 s, where writing the 62.7 MB took 0.2-0.7 s on the benches' disk
(``bench/RESULTS.md``). Bytes written before compression (no header) read as they are.
A checkpoint file that is missing or unreadable is :class:`CheckpointDamaged`, one line
naming it, on the driver and in the executors' cells alike.

>>> data = b"window " * 1000
>>> packed = compressed(data)
>>> len(packed) < len(data), decompressed(packed) == data, decompressed(data) == data
(True, True, True)
"""

from __future__ import annotations

import pickle
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pyarrow as pa

_MAGIC = b"GCZ\x01"  # then the length before compression (8 bytes) and a zstd frame
_LEVEL = 1  # zstd's fastest regular level: most of the size for a fraction of the time


def compressed(blob: bytes) -> bytes:
    """``blob`` compressed, with a header :func:`decompressed` reads."""
    body = pa.Codec("zstd", compression_level=_LEVEL).compress(blob, asbytes=True)
    return _MAGIC + len(blob).to_bytes(8, "little") + body


def decompressed(data: bytes) -> bytes:
    """The bytes :func:`compressed` was given; bytes without its header as they are."""
    if not data.startswith(_MAGIC):
        return data
    size = int.from_bytes(data[len(_MAGIC):len(_MAGIC) + 8], "little")
    body = memoryview(data)[len(_MAGIC) + 8:]
    return pa.Codec("zstd").decompress(body, decompressed_size=size, asbytes=True)


class CheckpointDamaged(Exception):
    """A file of a stream's checkpoint is missing or unreadable: the stream cannot go on
    from it (one line naming the file)."""

    @staticmethod
    def found_in(text: str) -> str | None:
        """The message of a damaged checkpoint named in ``text`` (a Spark task's traceback,
        which Spark re-raises on the driver as text in an exception of its own), else None."""
        match = re.search(r"CheckpointDamaged: ([^\n]+)", text)
        return match.group(1).strip() if match else None


def read_checkpoint(path: str | Path, read: Callable[[Path], Any]) -> Any:
    """``read(path)`` of a checkpoint file; :class:`CheckpointDamaged` naming the file
    where it is missing or unreadable (a restart could not go on either)."""
    try:
        return read(Path(path))
    except (OSError, EOFError, pickle.UnpicklingError, pa.ArrowInvalid) as err:
        reason = err.strerror if isinstance(err, OSError) and err.strerror else str(err)
        raise CheckpointDamaged(
            f"the checkpoint cannot be read: {path}: {' '.join(reason.split())}; the stream "
            "cannot go on from it: start with a new --checkpoint (from the stream's "
            "start)") from err
