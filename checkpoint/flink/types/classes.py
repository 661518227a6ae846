"""The class names of Flink's serializer snapshots, and the magic numbers of their framing.

Both sides go by these names: the readers (:mod:`.snapshots_read`) map each class to our type
and a decoder; the writers (:mod:`.snapshots_write`) write the class of our type. Composite
snapshots (List, Map, Tuple, Row, the TTL wrapper, timers) hold nested snapshots; POJO and Kryo
snapshots hold "linked optional maps".
"""

from __future__ import annotations

_BASE = "org.apache.flink.api.common.typeutils.base."
COMPOSITE_MAGIC = 911108
NESTED_MAGIC = 1333245
OPTIONAL_MAP_HEADER = 0x4F2C69A3D70

ATOMIC = {
    f"{_BASE}{n}Serializer${n}SerializerSnapshot": t
    for n, t in {
        "Long": "LONG",
        "Integer": "INT",
        "Int": "INT",
        "Short": "SHORT",
        "Byte": "BYTE",
        "Boolean": "BOOLEAN",
        "Double": "DOUBLE",
        "Float": "FLOAT",
        "Char": "CHAR",
        "String": "STRING",
    }.items()
}
BYTES = f"{_BASE}array.BytePrimitiveArraySerializer$BytePrimitiveArraySerializerSnapshot"
# PyFlink's Python state: bytes its coders wrote (int length, then the bytes).
BYTE_WRAPPER = (
    "org.apache.flink.streaming.api.utils.ByteArrayWrapperSerializer$ByteArrayWrapperSerializerSnapshot"
)
VOID = "org.apache.flink.runtime.state.VoidNamespaceSerializer$VoidNamespaceSerializerSnapshot"
WINDOW = "org.apache.flink.streaming.api.windowing.windows.TimeWindow$Serializer$TimeWindowSerializerSnapshot"
GLOBAL_WINDOW = (
    "org.apache.flink.streaming.api.windowing.windows.GlobalWindow$Serializer$GlobalWindowSerializerSnapshot"
)
LIST = f"{_BASE}ListSerializerSnapshot"
MAP = f"{_BASE}MapSerializerSnapshot"
TUPLE = "org.apache.flink.api.java.typeutils.runtime.TupleSerializerSnapshot"
ROW = "org.apache.flink.api.java.typeutils.runtime.RowSerializer$RowSerializerSnapshot"
TTL = "org.apache.flink.runtime.state.ttl.TtlStateFactory$TtlSerializerSnapshot"
TIMER = "org.apache.flink.streaming.api.operators.TimerSerializerSnapshot"
POJO = "org.apache.flink.api.java.typeutils.runtime.PojoSerializerSnapshot"
KRYO = "org.apache.flink.api.java.typeutils.runtime.kryo.KryoSerializerSnapshot"
NULLABLE = "org.apache.flink.api.java.typeutils.runtime.NullableSerializer$NullableSerializerSnapshot"
COMPOSITES = {LIST, MAP, TUPLE, ROW, TTL, TIMER, NULLABLE}
FIXED_WIDTH = {"LONG", "INT", "SHORT", "BYTE", "BOOLEAN", "DOUBLE", "FLOAT", "CHAR"}
ROWDATA = "org.apache.flink.table.runtime.typeutils.RowDataSerializer$RowDataSerializerSnapshot"
