"""Every hash graphcep computes, in one place.

Two of them **must equal the JVM's** bit for bit, because Spark computes the same hash on
the other side and the results must agree (tested against Spark itself in
``tests/runtime/test_hypercube_spark.py`` and ``tests/runtime/test_runtimes.py``):

- :func:`vertex_hash`: Spark SQL's ``xxhash64`` (XXH64, seed 42) of a string column --
  HyperCube routes edges to cells with ``pmod(xxhash64(v), s)`` in the JVM and recomputes
  the cells in Python;
- :func:`spark_hash_long`: Spark SQL's ``hash()`` (Murmur3 x86 32-bit, seed 42) of a LONG
  -- the keys that send each shard to a partition of its own.

The others only need to be the same in every process and on every machine (Python's own
``hash()`` of a string is salted per process, so none of them uses it):

- :func:`mix64` / :func:`splitmix64`: SplitMix64's finaliser, for match ids and the
  stream generator's draws;
- :func:`salt64`: 64 bits of BLAKE2b of a text (a query name salting its match ids);
- :data:`GOLDEN_GAMMA`: ``2**64 / golden ratio``, the multiplier of the Fibonacci hashing
  in the compiled hash tables (``engines/subgraph/kernel.py``,
  ``features/count_distinct.py``) and SplitMix64's increment.

Examples
--------
>>> int(splitmix64(np.array([0], dtype=np.uint64))[0])   # SplitMix64's first output, seed 0
16294208416658607535
>>> spark_hash_long(1)                                   # Spark: SELECT hash(1L)
-1712319331
"""

from __future__ import annotations

import hashlib

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

#: ``2**64 / golden ratio``: Fibonacci hashing's multiplier, SplitMix64's increment.
GOLDEN_GAMMA = np.uint64(0x9E3779B97F4A7C15)
#: The seed of Spark SQL's ``xxhash64`` and ``hash``.
SPARK_SEED = 42


def mix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64's finaliser (Stafford's mix 13): a bijection of uint64 that spreads
    every input bit over the output."""
    with np.errstate(over="ignore"):
        x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
        x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
        return x ^ (x >> np.uint64(31))


def splitmix64(x: np.ndarray) -> np.ndarray:
    """SplitMix64: the ``x``-th output of the generator seeded 0 (counter-based: any subset
    of outputs, in any order)."""
    with np.errstate(over="ignore"):
        return mix64(x + GOLDEN_GAMMA)


def salt64(text: str) -> np.uint64:
    """64 bits of BLAKE2b of ``text`` (UTF-8), little-endian."""
    digest = hashlib.blake2b(text.encode(), digest_size=8).digest()
    return np.uint64(int.from_bytes(digest, "little"))



_MASK = (1 << 64) - 1
_P1 = 0x9E3779B185EBCA87
_P2 = 0xC2B2AE3D27D4EB4F
_P3 = 0x165667B19E3779F9
_P4 = 0x85EBCA77C2B2AE63
_P5 = 0x27D4EB2F165667C5
_U = np.uint64


def vertex_hash(values: pa.Array | pa.ChunkedArray, seed: int = SPARK_SEED) -> np.ndarray:
    """int64 XXH64 of each value's UTF-8 bytes: Spark SQL's ``xxhash64(column)`` (**must
    equal the JVM's**: HyperCube cells are routed by Spark SQL and checked in Python).

    Non-string columns are cast to strings first, as :func:`graphcep.events.normalize_edges`
    casts endpoints; nulls hash like the empty string. Each distinct value is hashed once.
    """
    if isinstance(values, pa.ChunkedArray):
        values = values.combine_chunks() if values.num_chunks else pa.array([], pa.string())
    if not (pa.types.is_string(values.type) or pa.types.is_large_string(values.type)):
        values = pc.cast(values, pa.string())
    encoded = pc.dictionary_encode(values, null_encoding="encode")
    hashes = _xxh64(encoded.dictionary, seed)
    return hashes[encoded.indices.to_numpy(zero_copy_only=False).astype(np.intp)]


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return (x << _U(r)) | (x >> _U(64 - r))


def _round(acc: np.ndarray | np.uint64, lane: np.ndarray) -> np.ndarray:
    return _rotl(acc + lane * _U(_P2), 31) * _U(_P1)


def _xxh64(strings: pa.Array, seed: int) -> np.ndarray:
    """XXH64 of every string of an Arrow (large_)string array, vectorised over strings.

    The loop runs over positions within a string (32-byte stripes, then at most three
    8-byte words, one 4-byte word and three bytes), each step over all strings at once.
    """
    n = len(strings)
    off_type = np.int64 if pa.types.is_large_string(strings.type) else np.int32
    offsets = np.frombuffer(strings.buffers()[1], dtype=off_type)
    offsets = offsets[strings.offset: strings.offset + n + 1].astype(np.int64)
    data = strings.buffers()[2]
    raw = np.frombuffer(data, dtype=np.uint8) if data is not None else np.empty(0, np.uint8)
    # padded so that an 8-byte read at any string position stays inside the buffer
    padded = np.concatenate([raw[offsets[0]: offsets[-1]], np.zeros(8, np.uint8)])
    start = offsets[:-1] - offsets[0]
    length = np.diff(offsets)
    # unaligned little-endian views: words64[p] is the 8 bytes starting at byte p
    words64 = np.ndarray((len(padded) - 7,), dtype="<u8", buffer=padded, strides=(1,))
    words32 = np.ndarray((len(padded) - 3,), dtype="<u4", buffer=padded, strides=(1,))
    with np.errstate(over="ignore"):
        h = np.full(n, _U((seed + _P5) & _MASK))
        long = np.flatnonzero(length >= 32)
        if len(long):
            h[long] = _stripes(words64, start[long], length[long], seed)
        h += length.astype(np.uint64)
        pos = start + 32 * (length // 32)
        rest = length % 32
        for step in range(3):
            idx = np.flatnonzero(rest >= 8 * (step + 1))
            k1 = _round(_U(0), words64[pos[idx] + 8 * step])
            h[idx] = _rotl(h[idx] ^ k1, 27) * _U(_P1) + _U(_P4)
        pos += 8 * (rest // 8)
        rest %= 8
        idx = np.flatnonzero(rest >= 4)
        h[idx] = _rotl(h[idx] ^ (words32[pos[idx]].astype(np.uint64) * _U(_P1)), 23)
        h[idx] = h[idx] * _U(_P2) + _U(_P3)
        pos[idx] += 4
        rest[idx] -= 4
        for step in range(3):
            idx = np.flatnonzero(rest > step)
            h[idx] = _rotl(h[idx] ^ (padded[pos[idx] + step].astype(np.uint64) * _U(_P5)), 11)
            h[idx] *= _U(_P1)
        return _avalanche(h).view(np.int64)


def _stripes(words64: np.ndarray, start: np.ndarray, length: np.ndarray, seed: int) -> np.ndarray:
    """XXH64's four accumulators over the 32-byte stripes of strings at least 32 long."""
    m = len(start)
    acc = [np.full(m, _U(v & _MASK)) for v in (seed + _P1 + _P2, seed + _P2, seed, seed - _P1)]
    stripes = length // 32
    for j in range(int(stripes.max())):
        active = np.flatnonzero(stripes > j)
        base = start[active] + 32 * j
        for lane in range(4):
            acc[lane][active] = _round(acc[lane][active], words64[base + 8 * lane])
    h = _rotl(acc[0], 1) + _rotl(acc[1], 7) + _rotl(acc[2], 12) + _rotl(acc[3], 18)
    for lane in acc:
        h = (h ^ _round(_U(0), lane)) * _U(_P1) + _U(_P4)
    return h


def _avalanche(h: np.ndarray) -> np.ndarray:
    h = h ^ (h >> _U(33))
    h = h * _U(_P2)
    h = h ^ (h >> _U(29))
    h = h * _U(_P3)
    return h ^ (h >> _U(32))


def spark_hash_long(value: int, seed: int = SPARK_SEED) -> int:
    """Spark SQL's ``hash()`` of a LONG value (Murmur3 x86 32-bit, as Spark computes it;
    **must equal the JVM's**: it places shards on the partitions Spark sends them to)."""

    def mix_k1(k: int) -> int:
        k = (k * 0xCC9E2D51) & 0xFFFFFFFF
        k = ((k << 15) | (k >> 17)) & 0xFFFFFFFF
        return (k * 0x1B873593) & 0xFFFFFFFF

    def mix_h1(h: int, k: int) -> int:
        h ^= k
        h = ((h << 13) | (h >> 19)) & 0xFFFFFFFF
        return (h * 5 + 0xE6546B64) & 0xFFFFFFFF

    value &= 0xFFFFFFFFFFFFFFFF
    h = mix_h1(seed & 0xFFFFFFFF, mix_k1(value & 0xFFFFFFFF))
    h = mix_h1(h, mix_k1(value >> 32))
    h ^= 8
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & 0xFFFFFFFF
    h ^= h >> 16
    return h - (1 << 32) if h >= 1 << 31 else h
