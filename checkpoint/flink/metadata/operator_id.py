"""Flink's OperatorID of an operator uid: the 128-bit MurmurHash3 (x64 variant, seed 0) of
the uid's UTF-8 bytes, as ``OperatorIDGenerator.fromUid`` and the job graph's hasher give it.

The hash's 16 bytes (two little-endian 64-bit halves ``h1, h2``) become the id's lower and
upper longs (big-endian reads of bytes 0-7 and 8-15); ``_metadata`` stores the lower long,
then the upper one: the hash's bytes as they are, also the order of the id's hex string.
"""

from __future__ import annotations

_MASK = (1 << 64) - 1
_C1 = 0x87C37B91114253D5
_C2 = 0x4CF5AD432745937F


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _MASK


def _fmix(k: int) -> int:
    k ^= k >> 33
    k = (k * 0xFF51AFD7ED558CCD) & _MASK
    k ^= k >> 33
    k = (k * 0xC4CEB9FE1A85EC53) & _MASK
    return k ^ (k >> 33)


def _mix_k1(k1: int) -> int:
    return (_rotl((k1 * _C1) & _MASK, 31) * _C2) & _MASK


def _mix_k2(k2: int) -> int:
    return (_rotl((k2 * _C2) & _MASK, 33) * _C1) & _MASK


def murmur3_128(data: bytes) -> bytes:
    """MurmurHash3 x64 128 (seed 0) of ``data``: ``h1`` then ``h2``, each little-endian."""
    h1 = h2 = 0
    full = len(data) - len(data) % 16
    for i in range(0, full, 16):
        k1 = int.from_bytes(data[i : i + 8], "little")
        k2 = int.from_bytes(data[i + 8 : i + 16], "little")
        h1 ^= _mix_k1(k1)
        h1 = (_rotl(h1, 27) + h2) & _MASK
        h1 = (h1 * 5 + 0x52DCE729) & _MASK
        h2 ^= _mix_k2(k2)
        h2 = (_rotl(h2, 31) + h1) & _MASK
        h2 = (h2 * 5 + 0x38495AB5) & _MASK
    tail = data[full:]
    if tail:
        h1 ^= _mix_k1(int.from_bytes(tail[:8], "little"))
        if len(tail) > 8:
            h2 ^= _mix_k2(int.from_bytes(tail[8:], "little"))
    h1 ^= len(data)
    h2 ^= len(data)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    h1, h2 = _fmix(h1), _fmix(h2)
    h1 = (h1 + h2) & _MASK
    h2 = (h2 + h1) & _MASK
    return h1.to_bytes(8, "little") + h2.to_bytes(8, "little")


def operator_id(uid: str) -> bytes:
    """The 16 bytes ``_metadata`` stores for the operator with ``uid`` (lower long, upper long).

    Java encodes an unpaired surrogate as ``?``; so does this."""
    return murmur3_128(uid.encode("utf-8", "replace"))


def operator_id_hex(uid: str) -> str:
    """The OperatorID's hex string (as Flink prints it and the reader names operators)."""
    return operator_id(uid).hex()
