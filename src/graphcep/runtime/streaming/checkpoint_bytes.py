"""Checkpoint state as compressed bytes: what the streaming operators write every
micro-batch (the driver operator's ``state-<b>.bin``, the executor cells' state files).

A micro-batch's state is written whole, and much of it is arrays of small integers and
repeated names: 20 mixed rules over S1 snapshot 62.7 MB, 9.9 MB compressed with zstd at
level 1 in 0.16 s, where writing the 62.7 MB took 0.2-0.7 s on the benches' disk
(``bench/RESULTS.md``). Bytes written before compression (no header) read as they are.

>>> data = b"window " * 1000
>>> packed = compressed(data)
>>> len(packed) < len(data), decompressed(packed) == data, decompressed(data) == data
(True, True, True)
"""

from __future__ import annotations

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
