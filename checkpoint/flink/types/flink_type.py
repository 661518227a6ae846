"""A serializer found in a savepoint: the snapshot class Flink used, our type and a decoder."""

from __future__ import annotations

from dataclasses import dataclass

from flinkstate.state.serializers.base import TypeSerializer
from flinkstate.state.types.mapping import TypeInformation

from . import classes


@dataclass(frozen=True)
class FlinkType:
    """A serializer found in a savepoint: its snapshot class, our type and a decoder.

    ``type_info`` is None for the void namespace and for serializers read as raw bytes;
    ``ttl`` marks Flink's TTL wrapper (long timestamp, then ``inner``); a POJO's ``children``
    are its fields' serializers, named by ``field_names`` (read as raw bytes or not).
    """

    snapshot_class: str
    type_info: TypeInformation | None
    serializer: TypeSerializer | None
    decodable: bool = True
    fixed_width: bool = False
    inner: FlinkType | None = None
    java_class: str = ""
    children: tuple[FlinkType, ...] = ()
    field_names: tuple[str, ...] = ()
    #: A Kryo serializer's classes of serializers of their own (registered or default ones).
    kryo_serializers: tuple[str, ...] = ()

    @property
    def ttl(self) -> bool:
        return self.snapshot_class == classes.TTL

    @property
    def void(self) -> bool:
        return self.snapshot_class == classes.VOID

    @property
    def timer(self) -> bool:
        return self.snapshot_class == classes.TIMER

    def describe(self) -> str:
        """A readable name: our type, or the Java class for raw-bytes serializers."""
        if self.inner is not None:
            return f"TTL<{self.inner.describe()}>"
        if self.void:
            return "VoidNamespace"
        if not self.decodable:
            return f"RAW({self.java_class or self.snapshot_class})"
        return str(self.type_info)
