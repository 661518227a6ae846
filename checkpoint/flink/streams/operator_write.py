"""One subtask's operator state stream: the inverse of :mod:`.operator_read`.

Header (``OperatorBackendSerializationProxy``: the target release's version, 5 up to Flink 1.17,
which refuses 6, or 6 with its compression flag, not compressed; the meta infos written by
:mod:`.header_write`): ``short n`` list and union state meta infos, ``short m``
broadcast state meta infos. Then each list's elements one after the other and each broadcast
map as ``int size`` and key/value pairs; ``_metadata`` records each element's offset (one
offset per broadcast map). States go in the order of the ``java.util.HashMap`` Flink's
snapshot copies them into. A state carried from a Flink savepoint as it was
(``meta[VERBATIM]``: its meta info's bytes; :mod:`..writer.passthrough`) has bytes for
elements: each list element's, or the broadcast map's whole.
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import Any

from flinkstate.state.errors import SerializationError
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.operator.repartition import hash_map_order, repartition
from flinkstate.state.serializers.lookup import serializer_for
from flinkstate.state.types.mapping import TypeInformation

from ..metadata.metadata_write import OperatorStateEntryOut
from ..metadata.versions import FlinkTarget
from ..types.snapshots_write import key_snapshot, snapshot_of
from ..wire.data_write import Output
from .header_write import VERBATIM, write_operator_meta


def check_types(what: str, value: TypeInformation, user_key: TypeInformation | None, broadcast: bool) -> None:
    """Refuse (``[FLINK_UNSUPPORTED]``) element, key or value types Flink's built-in serializers lack."""
    snapshot_of(value, what)
    if broadcast:
        assert user_key is not None
        key_snapshot(user_key, f"{what} (map key)")


def _ordered(states: Sequence[OperatorStateData], broadcast: bool) -> list[OperatorStateData]:
    """The list (or broadcast) states in the order of Flink's snapshot: a ``new HashMap<>(n)``."""
    chosen = {s.name: s for s in states if (s.mode is OperatorStateMode.BROADCAST) == broadcast}
    capacity = 1 << max(len(chosen) - 1, 0).bit_length()
    return [chosen[n] for n in hash_map_order(list(chosen), capacity)]


def _data(out: Output, s: OperatorStateData) -> tuple[int, ...]:
    if VERBATIM in s.meta:
        offsets = []
        for element in s.elements if s.mode is not OperatorStateMode.BROADCAST else s.elements.values():
            offsets.append(len(out))
            out.raw(element)
        return tuple(offsets)
    value = serializer_for(s.value_type)
    if s.mode is not OperatorStateMode.BROADCAST:
        offsets = []
        for element in s.elements:
            offsets.append(len(out))
            out.raw(value.to_bytes(element))
        return tuple(offsets)
    assert s.user_key_type is not None
    key = serializer_for(s.user_key_type)
    start = len(out)
    out.i32(len(s.elements), "broadcast state size")
    for k, v in s.elements.items():
        out.raw(key.to_bytes(k))
        out.raw(value.to_bytes(v))
    return (start,)


def operator_stream(
    where: str, states: Sequence[OperatorStateData], flink: FlinkTarget
) -> tuple[bytes, list[OperatorStateEntryOut]]:
    """(the stream, each state's handle entry) of one subtask's operator states, for release ``flink``."""
    out = Output(where)
    lists, maps = _ordered(states, False), _ordered(states, True)
    out.i32(flink.operator_format, "operator state format version")
    if flink.operator_format >= 6:
        out.boolean(False)  # not compressed
    for group in (lists, maps):
        out.i16(len(group), "state count")
        for s in group:
            write_operator_meta(out, s, flink)
    entries = []
    for s in lists + maps:
        try:
            offsets = _data(out, s)
        except (SerializationError, TypeError, ValueError, OverflowError) as exc:
            raise SerializationError(
                f"{where}: operator state {s.name}: cannot write as Flink's {s.value_type}: {exc}"
            ) from exc
        entries.append(OperatorStateEntryOut(s.name, s.mode.name, offsets))
    return bytes(out.buf), entries


def subtask_states(
    old: Sequence[Sequence[OperatorStateData]], parallelism: int
) -> list[list[OperatorStateData]]:
    """What each of ``parallelism`` subtasks snapshots, from what each old subtask did: list
    and broadcast state redistributed by Flink's rule (kept where the parallelism is
    unchanged); union state as each old subtask's part, part ``j`` on subtask ``j % parallelism``
    (a restore gives every subtask the union of all parts, as it would of Flink's)."""
    new = repartition([[d for d in sub if d.mode is not OperatorStateMode.UNION] for sub in old], parallelism)
    unions: dict[str, OperatorStateData] = {}
    parts: list[dict[str, list[Any]]] = [{} for _ in range(parallelism)]
    for j, sub in enumerate(old):
        for d in sub:
            if d.mode is OperatorStateMode.UNION:
                unions.setdefault(d.name, d)
                parts[j % parallelism].setdefault(d.name, []).extend(copy.deepcopy(d.elements))
    for i in range(parallelism):
        new[i].extend(d.copy(parts[i].get(name, [])) for name, d in unions.items())
    return new
