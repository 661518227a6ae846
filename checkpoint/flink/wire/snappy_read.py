"""Snappy's framing format, as Flink compresses state streams (one framed stream per key
group or operator state element); a block written without the stream identifier reads too."""

from __future__ import annotations

import cramjam

from ..errors import FlinkFormatError

_SNAPPY_STREAM = b"\xff\x06\x00\x00sNaPpY"


def snappy_block(buf: bytes, start: int, end: int, where: str) -> bytes:
    """The decompressed bytes of the snappy frames in ``buf[start:end]``."""
    frames = buf[start:end]
    if not frames.startswith(_SNAPPY_STREAM):
        frames = _SNAPPY_STREAM + frames
    try:
        return bytes(cramjam.snappy.decompress(frames))
    except cramjam.DecompressionError as exc:
        raise FlinkFormatError(f"{where}: corrupt snappy block at byte offset {start}: {exc}") from exc
