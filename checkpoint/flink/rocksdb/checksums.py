"""The block checksums RocksDB writes: CRC32C (masked), xxHash32, xxHash64 and XXH3-64.

Written from the published algorithms (RFC 3720's CRC32C; Yann Collet's xxHash
specification). XXH3's long-input loop is vectorized with numpy: within one 1 KiB block the
accumulation is a sum, so only the per-block scramble runs in Python.
"""

from __future__ import annotations

import struct

import numpy as np

_M64 = (1 << 64) - 1
_M32 = (1 << 32) - 1

_P32_1, _P32_2, _P32_3, _P32_4, _P32_5 = 0x9E3779B1, 0x85EBCA77, 0xC2B2AE3D, 0x27D4EB2F, 0x165667B1
_P64_1, _P64_2, _P64_3 = 0x9E3779B185EBCA87, 0xC2B2AE3D27D4EB4F, 0x165667B19E3779F9
_P64_4, _P64_5 = 0x85EBCA77C2B2AE63, 0x27D4EB2F165667C5

_SECRET = bytes.fromhex(
    "b8fe6c3923a44bbe7c01812cf721ad1cded46de9839097db7240a4a4b7b3671f"
    "cb79e64eccc0e578825ad07dccff7221b8084674f743248ee03590e6813a264c"
    "3c2852bb91c300cb88d0658b1b532ea371644897a20df94e3819ef46a9deacd8"
    "a8fa763fe39c343ff9dcbbc7c70b4f1d8a51e04bcdb45931c89f7ec9d9787364"
    "eac5ac8334d3ebc3c581a0fffa1363eb170ddd51b7f0da49d316552629d4689e"
    "2b16be587d47a1fc8ff8b8d17ad031ce45cb3a8f95160428afd7fbcabb4b407e"
)
_SECRET64 = np.frombuffer(_SECRET, "<u8")
_STRIPE_KEYS = np.stack([_SECRET64[s : s + 8] for s in range(16)])  # key of stripe s, lane l
_SCRAMBLE_KEY = _SECRET64[16:24]
_LAST_KEY = np.frombuffer(_SECRET[121:185], "<u8")
_SWAP = [1, 0, 3, 2, 5, 4, 7, 6]
_TILED = np.tile(_STRIPE_KEYS, (64, 1))  # keys of 64 full 1 KiB blocks of stripes
_INIT = [_P32_3, _P64_1, _P64_2, _P64_3, _P64_4, _P32_2, _P64_5, _P32_1]


def _le(b: bytes, at: int, n: int = 8) -> int:
    return int.from_bytes(b[at : at + n], "little")


def _rotl64(x: int, r: int) -> int:
    return ((x << r) | (x >> (64 - r))) & _M64


def _rotl32(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _M32


def _fold(a: int, b: int) -> int:
    p = a * b
    return (p & _M64) ^ (p >> 64)


def _avalanche3(h: int) -> int:
    h ^= h >> 37
    h = (h * 0x165667919E3779F9) & _M64
    return h ^ (h >> 32)


def _avalanche64(h: int) -> int:
    h ^= h >> 33
    h = (h * _P64_2) & _M64
    h ^= h >> 29
    h = (h * _P64_3) & _M64
    return h ^ (h >> 32)


def _mix16(data: bytes, at: int, s: int) -> int:
    return _fold(_le(data, at) ^ _le(_SECRET, s), _le(data, at + 8) ^ _le(_SECRET, s + 8))


def _short(data: bytes) -> int:
    n = len(data)
    if n > 8:
        lo = _le(data, 0) ^ (_le(_SECRET, 24) ^ _le(_SECRET, 32))
        hi = _le(data, n - 8) ^ (_le(_SECRET, 40) ^ _le(_SECRET, 48))
        swapped = int.from_bytes(lo.to_bytes(8, "little"), "big")
        return _avalanche3((n + swapped + hi + _fold(lo, hi)) & _M64)
    if n >= 4:
        keyed = (_le(data, n - 4, 4) + (_le(data, 0, 4) << 32)) ^ (_le(_SECRET, 8) ^ _le(_SECRET, 16))
        keyed ^= _rotl64(keyed, 49) ^ _rotl64(keyed, 24)
        keyed = (keyed * 0x9FB21C651E98DF25) & _M64
        keyed ^= (keyed >> 35) + n
        keyed = (keyed * 0x9FB21C651E98DF25) & _M64
        return keyed ^ (keyed >> 28)
    if n:
        combined = (data[0] << 16) | (data[n >> 1] << 24) | data[n - 1] | (n << 8)
        return _avalanche64(combined ^ (_le(_SECRET, 0, 4) ^ _le(_SECRET, 4, 4)))
    return _avalanche64(_le(_SECRET, 56) ^ _le(_SECRET, 64))


def _mid(data: bytes) -> int:
    n = len(data)
    acc = (n * _P64_1) & _M64
    if n <= 128:
        for i in range((n - 1) // 32 + 1):
            acc += _mix16(data, 16 * i, 32 * i) + _mix16(data, n - 16 * (i + 1), 32 * i + 16)
        return _avalanche3(acc & _M64)
    for i in range(8):
        acc += _mix16(data, 16 * i, 16 * i)
    acc = _avalanche3(acc & _M64)
    end = _mix16(data, n - 16, 136 - 17)
    for i in range(8, n // 16):
        end += _mix16(data, 16 * i, 16 * (i - 8) + 3)
    return _avalanche3((acc + end) & _M64)


def _long(data: bytes) -> int:
    n = len(data)
    blocks = (n - 1) // 1024
    stripes = ((n - 1) - blocks * 1024) // 64
    full = blocks * 16
    words = np.frombuffer(data, "<u8", count=(full + stripes) * 8).reshape(-1, 8)
    lanes = np.concatenate([words, np.frombuffer(data[n - 64 :], "<u8").reshape(1, 8)])
    tiled = _TILED[:full] if full <= len(_TILED) else np.tile(_STRIPE_KEYS, (blocks, 1))
    keys = np.concatenate([tiled, _STRIPE_KEYS[:stripes], _LAST_KEY.reshape(1, 8)])
    dk = lanes ^ keys
    # Each stripe adds lo32 * hi32 of (input ^ key) to its lane and its input to the neighbour lane.
    adds = (dk & np.uint64(_M32)) * (dk >> np.uint64(32)) + lanes[:, _SWAP]
    acc = np.array(_INIT, dtype=np.uint64)
    if blocks:
        sums = adds[:full].reshape(blocks, 16, 8).sum(axis=1, dtype=np.uint64)
        for b in range(blocks):
            acc += sums[b]
            acc ^= acc >> np.uint64(47)
            acc ^= _SCRAMBLE_KEY
            acc *= np.uint64(_P32_1)
    acc += adds[full:].sum(axis=0, dtype=np.uint64)
    lane = [int(x) for x in acc]
    result = n * _P64_1
    for i in range(4):
        result += _fold(lane[2 * i] ^ _le(_SECRET, 11 + 16 * i), lane[2 * i + 1] ^ _le(_SECRET, 19 + 16 * i))
    return _avalanche3(result & _M64)


def xxh3_64(data: bytes) -> int:
    """XXH3-64 with seed 0 and the default secret."""
    n = len(data)
    if n <= 16:
        return _short(data)
    if n <= 240:
        return _mid(data)
    return _long(data)


def xxh64(data: bytes) -> int:
    """xxHash64 with seed 0."""
    n, pos = len(data), 0
    if n >= 32:
        v = [(_P64_1 + _P64_2) & _M64, _P64_2, 0, (-_P64_1) & _M64]
        while pos + 32 <= n:
            for i in range(4):
                v[i] = (_rotl64((v[i] + _le(data, pos) * _P64_2) & _M64, 31) * _P64_1) & _M64
                pos += 8
        h = (_rotl64(v[0], 1) + _rotl64(v[1], 7) + _rotl64(v[2], 12) + _rotl64(v[3], 18)) & _M64
        for x in v:
            h = ((h ^ ((_rotl64((x * _P64_2) & _M64, 31) * _P64_1) & _M64)) * _P64_1 + _P64_4) & _M64
    else:
        h = _P64_5
    h = (h + n) & _M64
    while pos + 8 <= n:
        k = (_rotl64((_le(data, pos) * _P64_2) & _M64, 31) * _P64_1) & _M64
        h = (_rotl64(h ^ k, 27) * _P64_1 + _P64_4) & _M64
        pos += 8
    if pos + 4 <= n:
        h = (_rotl64(h ^ ((_le(data, pos, 4) * _P64_1) & _M64), 23) * _P64_2 + _P64_3) & _M64
        pos += 4
    for b in data[pos:]:
        h = (_rotl64(h ^ ((b * _P64_5) & _M64), 11) * _P64_1) & _M64
    return _avalanche64(h)


def xxh32(data: bytes) -> int:
    """xxHash32 with seed 0."""
    n, pos = len(data), 0
    if n >= 16:
        v = [(_P32_1 + _P32_2) & _M32, _P32_2, 0, (-_P32_1) & _M32]
        while pos + 16 <= n:
            for i in range(4):
                v[i] = (_rotl32((v[i] + _le(data, pos, 4) * _P32_2) & _M32, 13) * _P32_1) & _M32
                pos += 4
        h = (_rotl32(v[0], 1) + _rotl32(v[1], 7) + _rotl32(v[2], 12) + _rotl32(v[3], 18)) & _M32
    else:
        h = _P32_5
    h = (h + n) & _M32
    while pos + 4 <= n:
        h = (_rotl32((h + _le(data, pos, 4) * _P32_3) & _M32, 17) * _P32_4) & _M32
        pos += 4
    for b in data[pos:]:
        h = (_rotl32((h + b * _P32_5) & _M32, 11) * _P32_1) & _M32
    h = ((h ^ (h >> 15)) * _P32_2) & _M32
    h = ((h ^ (h >> 13)) * _P32_3) & _M32
    return h ^ (h >> 16)


def _crc_tables() -> list[list[int]]:
    """Slicing-by-8 tables of the reflected Castagnoli polynomial."""
    first = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        first.append(c)
    tables = [first]
    for _ in range(7):
        prev = tables[-1]
        tables.append([(prev[i] >> 8) ^ first[prev[i] & 0xFF] for i in range(256)])
    return tables


_CRC = _crc_tables()


def crc32c(data: bytes) -> int:
    """CRC32C (Castagnoli), eight bytes a step."""
    t0, t1, t2, t3, t4, t5, t6, t7 = _CRC
    crc = _M32
    whole = len(data) & ~7
    for lo, hi in struct.iter_unpack("<II", data[:whole]):
        lo ^= crc
        crc = (
            t7[lo & 0xFF] ^ t6[(lo >> 8) & 0xFF] ^ t5[(lo >> 16) & 0xFF] ^ t4[lo >> 24]
            ^ t3[hi & 0xFF] ^ t2[(hi >> 8) & 0xFF] ^ t1[(hi >> 16) & 0xFF] ^ t0[hi >> 24]
        )  # fmt: skip
    for b in data[whole:]:
        crc = t0[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ _M32


def masked_crc32c(data: bytes) -> int:
    """CRC32C masked the way RocksDB and LevelDB store it."""
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & _M32) + 0xA282EAD8) & _M32


def block_checksum(kind: int, data: bytes, last: int) -> int | None:
    """The stored checksum of a block of ``data`` then the byte ``last``; None: unknown ``kind``."""
    if kind == 1:
        return masked_crc32c(data + bytes([last]))
    if kind == 2:
        return xxh32(data + bytes([last]))
    if kind == 3:
        return xxh64(data + bytes([last])) & _M32
    if kind == 4:
        return (xxh3_64(data) & _M32) ^ ((last * 0x6B9083D9) & _M32)
    return None
