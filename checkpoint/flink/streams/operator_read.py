"""Operator state streams: list, union and broadcast state of each subtask.

Header (``OperatorBackendSerializationProxy``): ``int version, bool compressed, short n``
operator state meta infos, ``short m`` broadcast state meta infos; version 5 (Flink 1.17 and
older) has no compression flag (its streams are never compressed). The handle in
``_metadata`` gives each state's offsets: one per list element, or one per broadcast map
(``int size`` then key/value pairs). Compressed streams hold snappy frames; an element runs
to the next offset.
"""

from __future__ import annotations

from typing import Any

from flinkstate.state.errors import SerializationError

from ..errors import FlinkFormatError
from ..metadata.metadata_read import OperatorHandle
from ..wire.data_read import Cursor
from ..wire.snappy_read import snappy_block
from .header_read import StateInfo, read_meta_info

SUPPORTED_VERSIONS = (5, 6)
"""Operator state format versions read: 5 (Flink 1.17 and older, no compression flag), 6 (1.18+)."""


def operator_stream_version(buf: bytes, where: str) -> int:
    """The format version an operator state stream starts with."""
    c = Cursor(buf, where)
    version = c.i32("operator state format version")
    if version not in SUPPORTED_VERSIONS:
        raise c.fail(f"unsupported operator state format version {version}", 0)
    return version


def _read_header(buf: bytes, where: str) -> tuple[bool, dict[str, StateInfo], int]:
    c = Cursor(buf, where)
    version = operator_stream_version(buf, where)
    c.pos = 4
    compressed = c.boolean("compression flag") if version >= 6 else False
    states: dict[str, StateInfo] = {}
    for _ in range(2):
        for _ in range(c.i16("operator state count")):
            info = read_meta_info(c, len(states))
            states[info.name] = info
    return compressed, states, c.pos


def read_operator_header(buf: bytes, where: str) -> tuple[bool, dict[str, StateInfo]]:
    """(whether the elements are snappy-compressed, the meta info of each state by name)."""
    compressed, states, _ = _read_header(buf, where)
    return compressed, states


def element_spans(data: bytes, handle: OperatorHandle, name: str, where: str) -> list[tuple[int, int]]:
    """(start, end) of each element (of a broadcast state: its map) of operator state ``name`` in
    one subtask's stream: from its offset in ``_metadata`` to the next offset of any state or the
    end; an offset inside the header or past the end is refused."""
    entry = next((e for e in handle.states if e.name == name), None)
    if entry is None:
        raise FlinkFormatError(f"{where}: no operator state {name!r}")
    end_of_header = _read_header(data, where)[2]
    bounds = sorted({o for e in handle.states for o in e.offsets} | {len(data)})
    for offset in bounds:
        if not end_of_header <= offset <= len(data):
            raise FlinkFormatError(
                f"{where}: operator state offset {offset} is outside the state data "
                f"(bytes {end_of_header} to {len(data)})"
            )
    following = {o: bounds[i + 1] for i, o in enumerate(bounds[:-1])}
    return [(o, following.get(o, o)) for o in entry.offsets]


def read_operator_state(
    data: bytes, handle: OperatorHandle, name: str, where: str
) -> tuple[StateInfo, list[Any], list[Any]]:
    """(meta info, positions or keys, values) of state ``name`` in one subtask's stream."""
    compressed, infos = read_operator_header(data, where)
    info = infos.get(name)
    if info is None:
        raise FlinkFormatError(f"{where}: no operator state {name!r}")
    spans = element_spans(data, handle, name, where)
    mode = next(e.mode for e in handle.states if e.name == name)
    where = f"{where}, state {name}"
    firsts: list[Any] = []
    values: list[Any] = []
    for i, (start, end) in enumerate(spans):
        buf, pos = data, start
        if compressed:
            buf, pos = snappy_block(data, start, end, where), 0
        try:
            if mode == "BROADCAST":
                _read_broadcast(buf, pos, info, firsts, values, where)
                continue
            serializer = info.value.serializer
            if serializer is None or not info.value.decodable:
                raise SerializationError(f"elements of {info.value.describe()} cannot be delimited")
            value, _ = serializer.read_at(buf, pos)
        except SerializationError as exc:
            raise FlinkFormatError(f"{where}: {exc} (element at byte offset {start})") from exc
        firsts.append(i)
        values.append(value)
    return info, firsts, values


def _read_broadcast(
    buf: bytes, pos: int, info: StateInfo, keys: list[Any], values: list[Any], where: str
) -> None:
    c = Cursor(buf, where, pos)
    key_type = info.user_key
    if key_type is None or key_type.serializer is None or info.value.serializer is None:
        raise SerializationError(f"broadcast state {info.name} has no key/value serializers")
    for _ in range(c.count("broadcast state size", 2)):
        key = c.value(key_type.serializer, "broadcast state key")
        value = c.value(info.value.serializer, "broadcast state value")
        keys.append(key)
        values.append(value)
