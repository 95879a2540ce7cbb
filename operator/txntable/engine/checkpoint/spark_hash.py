"""Spark's ``hash()`` (Murmur3, seed 42) of string keys, column-wise with Arrow compute.

Multi-part checkpoints assign each action row to a part by ``pmod(hash(coalesce(add.path,
remove.path)), numParts)``, exactly as Delta Spark's ``repartition`` does, so that two writers of
the same checkpoint (ours, Spark's, a retry of ours) produce identical parts. Spark hashes the
UTF-8 bytes with ``Murmur3_x86_32.hashUnsafeBytes``: 4-byte little-endian words, then each tail
byte *sign-extended* on its own, then the final mix with the byte length; a null key hashes to the
seed. The loop below runs once per 4-byte word position (a path's length / 4), each step a
vectorised operation over all rows, so a million paths hash without a per-row Python loop.
"""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

SEED = 42
_U32 = pa.uint32()


def _c(value: int) -> pa.Scalar:
    return pa.scalar(value & 0xFFFFFFFF, _U32)


def _rotl(x: pa.Array, r: int) -> pa.Array:
    return pc.bit_wise_or(pc.shift_left(x, _c(r)), pc.shift_right(x, _c(32 - r)))


def _mix_k1(k1: pa.Array) -> pa.Array:
    k1 = pc.multiply(k1, _c(0xCC9E2D51))
    return pc.multiply(_rotl(k1, 15), _c(0x1B873593))


def _mix_h1(h1: pa.Array, k1: pa.Array) -> pa.Array:
    h1 = _rotl(pc.bit_wise_xor(h1, k1), 13)
    return pc.add(pc.multiply(h1, _c(5)), _c(0xE6546B64))


def _fmix(h1: pa.Array, length: pa.Array) -> pa.Array:
    h1 = pc.bit_wise_xor(h1, length)
    h1 = pc.bit_wise_xor(h1, pc.shift_right(h1, _c(16)))
    h1 = pc.multiply(h1, _c(0x85EBCA6B))
    h1 = pc.bit_wise_xor(h1, pc.shift_right(h1, _c(13)))
    h1 = pc.multiply(h1, _c(0xC2B2AE35))
    return pc.bit_wise_xor(h1, pc.shift_right(h1, _c(16)))


def _byte_at(data: pa.Array, index: pa.Array) -> pa.Array:
    return pc.cast(pc.take(data, index), _U32)


def murmur3_strings(keys: pa.Array | pa.ChunkedArray) -> pa.Array:
    """Spark ``hash(key)`` of each string (int32); null keys give the seed."""
    if isinstance(keys, pa.ChunkedArray):
        keys = keys.combine_chunks() if keys.num_chunks != 1 else keys.chunk(0)
    keys = keys.cast(pa.large_string())  # 64-bit offsets: no overflow on any size
    n = len(keys)
    if n == 0:
        return pa.array([], pa.int32())
    _, offsets_buf, data_buf = keys.buffers()
    offsets = pa.Array.from_buffers(pa.int64(), n + 1, [None, offsets_buf], offset=keys.offset)
    starts = offsets.slice(0, n)
    lengths = pc.subtract(offsets.slice(1, n), starts)
    data_len = 0 if data_buf is None else data_buf.size
    data = pa.Array.from_buffers(
        pa.uint8(), max(data_len, 1), [None, data_buf or pa.py_buffer(b"\0")]
    )
    last = pa.scalar(max(data_len - 1, 0), pa.int64())
    words = pc.divide(lengths, pa.scalar(4, pa.int64()))
    tail = pc.subtract(lengths, pc.multiply(words, pa.scalar(4, pa.int64())))
    h1: pa.Array = pa.repeat(pa.scalar(SEED, _U32), n)
    max_words = pc.max(words).as_py() or 0
    for w in range(max_words):
        base = pc.add(starts, pa.scalar(4 * w, pa.int64()))
        word = _byte_at(data, pc.min_element_wise(base, last))
        for k in (1, 2, 3):
            index = pc.min_element_wise(pc.add(base, pa.scalar(k, pa.int64())), last)
            word = pc.bit_wise_or(word, pc.shift_left(_byte_at(data, index), _c(8 * k)))
        h1 = pc.if_else(pc.greater(words, w), _mix_h1(h1, _mix_k1(word)), h1)
    tail_base = pc.add(starts, pc.multiply(words, pa.scalar(4, pa.int64())))
    for t in range(3):
        index = pc.min_element_wise(pc.add(tail_base, pa.scalar(t, pa.int64())), last)
        byte = _byte_at(data, index)
        signed = pc.if_else(pc.greater_equal(byte, _c(128)), pc.add(byte, _c(0xFFFFFF00)), byte)
        h1 = pc.if_else(pc.greater(tail, t), _mix_h1(h1, _mix_k1(signed)), h1)
    h1 = _fmix(h1, pc.cast(lengths, _U32))
    hashed = h1.view(pa.int32())
    return pc.if_else(pc.is_valid(keys), hashed, pa.scalar(SEED, pa.int32()))


def partition_ids(keys: pa.Array | pa.ChunkedArray, num_parts: int) -> pa.Array:
    """Spark's ``pmod(hash(key), num_parts)`` per row (0-based partition ids, int64)."""
    hashed = pc.cast(murmur3_strings(keys), pa.int64())
    n = pa.scalar(num_parts, pa.int64())
    remainder = pc.subtract(hashed, pc.multiply(pc.divide(hashed, n), n))  # truncating division
    return pc.if_else(pc.less(remainder, 0), pc.add(remainder, n), remainder)
