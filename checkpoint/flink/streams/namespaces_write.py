"""Window namespaces and timers for the savepoint writer.

A keyed state's namespace is Flink's void namespace (one 0 byte), a ``TimeWindow``
(``TimeWindow.Serializer``: start and end, two longs) or the ``GlobalWindow`` (one 0 byte);
the state meta info names its serializer's snapshot (simple snapshots of version 3). Of our
checkpoints, a namespace type of two LONG fields is a TimeWindow ``(start, end)`` and a
STRING one the GlobalWindow, each namespace the string ``"GlobalWindow"`` (what the Flink
reader gives for them); any other namespace type is ``[FLINK_UNSUPPORTED]``. All three
serializers have a fixed length, so Flink never writes the key's or namespace's length into
the key bytes.

A timer queue is a priority-queue state (backend state type PRIORITY_QUEUE, no options, its
VALUE_SERIALIZER a ``TimerSerializerSnapshot``: a composite of outer version 2 over the key
and namespace serializers' snapshots). Each timer is one entry of the key-group block: key
bytes the key-group prefix, the timestamp with its sign bit flipped, the key and the
namespace; an empty value.
"""

from __future__ import annotations

import enum
import struct
from collections.abc import Sequence
from typing import Any

from flinkstate.state.errors import SerializationError
from flinkstate.state.types.mapping import BasicTypeInfo, RowTypeInfo, TypeInformation

from ..errors import UnsupportedFlinkWriteError
from ..types import classes
from ..types.flink_type import FlinkType
from ..types.snapshots_write import Snapshot
from ..types.values_read import GLOBAL_WINDOW

_WINDOW_BOUNDS = struct.Struct(">qq")
_SIGN = 1 << 63
_ZERO = b"\x00"
_STRING = BasicTypeInfo("STRING")


class Namespace(enum.Enum):
    """A namespace Flink's savepoints can hold, by its serializer snapshot class."""

    VOID = classes.VOID
    TIME_WINDOW = classes.WINDOW
    GLOBAL_WINDOW = classes.GLOBAL_WINDOW

    @property
    def snapshot(self) -> Snapshot:
        return Snapshot(self.value)

    def encode(self, namespace: Any) -> bytes:
        """A namespace's bytes (``None`` is the void namespace)."""
        if self is Namespace.VOID:
            if namespace is not None:
                raise SerializationError(f"namespace {namespace!r} in a state of the void namespace")
            return _ZERO
        if self is Namespace.GLOBAL_WINDOW:
            if namespace != GLOBAL_WINDOW:
                raise SerializationError(
                    f"namespace {namespace!r} is not the global window {GLOBAL_WINDOW!r}"
                )
            return _ZERO
        if not isinstance(namespace, Sequence) or isinstance(namespace, str | bytes) or len(namespace) != 2:
            raise SerializationError(f"namespace {namespace!r} is not a time window (start, end)")
        start, end = namespace
        if type(start) is not int or type(end) is not int:
            raise SerializationError(f"time window {namespace!r} has bounds that are not integers")
        return _WINDOW_BOUNDS.pack(start, end)


def namespace_of(t: TypeInformation | None, what: str) -> Namespace:
    """The Flink namespace of one of our namespace types (None: void)."""
    if t is None:
        return Namespace.VOID
    if t == _STRING:
        return Namespace.GLOBAL_WINDOW
    if (
        isinstance(t, RowTypeInfo)
        and len(t.field_types) == 2
        and all(isinstance(f, BasicTypeInfo) and f.name == "LONG" for f in t.field_types)
    ):
        return Namespace.TIME_WINDOW
    raise UnsupportedFlinkWriteError(
        f"{what}: namespace type {t} has no Flink window (a TimeWindow is two LONGs (start, end), "
        f"the GlobalWindow the STRING {GLOBAL_WINDOW!r})"
    )


def flink_namespace(t: FlinkType | None, what: str) -> Namespace:
    """The namespace of a Flink savepoint's namespace serializer (None: void)."""
    if t is None:
        return Namespace.VOID
    for ns in Namespace:
        if t.snapshot_class == ns.value:
            return ns
    raise UnsupportedFlinkWriteError(f"{what}: namespace serializer {t.snapshot_class} cannot be written yet")


def timer_snapshot(key: Snapshot, namespace: Namespace) -> Snapshot:
    """The VALUE_SERIALIZER snapshot of a timer queue: Flink's TimerSerializer of key and namespace."""
    return Snapshot(classes.TIMER, (key, namespace.snapshot))


def timer_bytes(timestamp: int, key: bytes, namespace: bytes) -> bytes:
    """A timer's bytes after the key-group prefix."""
    if type(timestamp) is not int or not -_SIGN <= timestamp < _SIGN:
        raise SerializationError(f"timer timestamp {timestamp!r} is not a long")
    return ((timestamp + _SIGN) & (2 * _SIGN - 1)).to_bytes(8, "big") + key + namespace
