"""PyFlink's Python keyed state, decoded with the types the user declares.

PyFlink keeps a Python state ``name`` on the Java side as ``python-state-<name>``: a
ListState (Value and List states) or MapState of byte arrays, keyed by a one-field Row.
The bytes are PyFlink coder encodings, which the savepoint does not describe: LONG 8
bytes, INT 4, SHORT 2, BYTE 1, BOOLEAN 1, DOUBLE 8, FLOAT 4 (big-endian), STRING an int32
length and UTF-8, ROW a null mask then its non-null fields, PICKLED_BYTE_ARRAY an int32
length and a pickle (loaded only with ``allow_pickle``: a pickle runs code). One stored
element may hold several values. :mod:`.pyflink_write` writes the same bytes (the savepoint
writer's process mode).
"""

from __future__ import annotations

import pickle
import struct
from typing import Any

import pyarrow as pa

from flinkstate.state.types.mapping import BasicTypeInfo, PickledBytesTypeInfo, RowTypeInfo, TypeInformation

from ...arrow_codec import to_arrow
from ..errors import (
    DeclaredTypeError,
    FlinkFormatError,
    UnsupportedSerializerError,
)
from .declared_read import StateDeclaration, python_type

#: PyFlink's coders of fixed width (big-endian ``struct`` formats); both sides go by it.
FIXED = {
    "LONG": ">q",
    "INT": ">i",
    "SHORT": ">h",
    "BYTE": ">b",
    "DOUBLE": ">d",
    "FLOAT": ">f",
    "BOOLEAN": ">?",
}
LENGTH = struct.Struct(">i")


def _reader(t: TypeInformation, allow_pickle: bool, where: str) -> Any:
    if isinstance(t, BasicTypeInfo) and t.name in FIXED:
        s = struct.Struct(FIXED[t.name])
        return lambda buf, pos: (s.unpack_from(buf, pos)[0], pos + s.size)
    if isinstance(t, BasicTypeInfo) and t.name == "STRING":

        def text(buf: bytes, pos: int) -> tuple[Any, int]:
            (n,) = LENGTH.unpack_from(buf, pos)
            return buf[pos + 4 : pos + 4 + n].decode("utf-8"), pos + 4 + n

        return text
    if isinstance(t, RowTypeInfo):
        return _row([_reader(f, allow_pickle, where) for f in t.field_types])
    if isinstance(t, PickledBytesTypeInfo):
        if not allow_pickle:
            raise UnsupportedSerializerError(
                f"{where} holds pickled Python values: loading a pickle runs code, pass allow_pickle=True "
                "for a trusted savepoint",
                code="PICKLE_NOT_ALLOWED",
            )

        def pickled(buf: bytes, pos: int) -> tuple[Any, int]:
            (n,) = LENGTH.unpack_from(buf, pos)
            return pickle.loads(buf[pos + 4 : pos + 4 + n]), pos + 4 + n

        return pickled
    raise DeclaredTypeError(
        f"{where}: PyFlink values of type {t} are not decoded (declare BIGINT, INT, SMALLINT, TINYINT, "
        "BOOLEAN, DOUBLE, FLOAT, STRING, a STRUCT of those (Types.ROW) or PICKLED)"
    )


def _row(fields: list[Any]) -> Any:
    """PyFlink's RowCoder: a mask of 2 row-kind bits then one null bit per field (most
    significant bit first), then the non-null fields."""
    mask_bytes = (len(fields) + 2 + 7) // 8

    def row(buf: bytes, pos: int) -> tuple[Any, int]:
        mask = buf[pos : pos + mask_bytes]
        if len(mask) != mask_bytes:
            raise ValueError("truncated row null mask")
        pos += mask_bytes
        out: list[Any] = []
        for i, read in enumerate(fields):
            bit = i + 2
            if mask[bit >> 3] & (0x80 >> (bit & 7)):
                out.append(None)
            else:
                value, pos = read(buf, pos)
                out.append(value)
        return tuple(out), pos

    return row


def _all(read: Any, raw: bytes, where: str) -> list[Any]:
    out, pos = [], 0
    try:
        while pos < len(raw):
            value, pos = read(raw, pos)
            out.append(value)
    except (struct.error, UnicodeDecodeError, pickle.UnpicklingError, EOFError, ValueError) as exc:
        raise FlinkFormatError(f"{where}: cannot decode PyFlink bytes {raw[:32]!r}: {exc}") from exc
    if pos != len(raw):
        raise FlinkFormatError(f"{where}: {pos - len(raw)} bytes missing after a PyFlink value")
    return out


def python_table(
    table: pa.Table, kind: str, value_type: TypeInformation, user_key_type: TypeInformation | None,
    allow_pickle: bool, where: str,
) -> pa.Table:  # fmt: skip
    """Decode the raw table of ``python-state-<name>`` into typed rows of ``kind``."""
    read = _reader(value_type, allow_pickle, where)
    keys = [k["f0"] if isinstance(k, dict) and len(k) == 1 else k for k in table.column("key").to_pylist()]
    cols: dict[str, list[Any]] = {"key_group": [], "key": [], "namespace": [], "extra": [], "value": []}
    groups = table.column("key_group").to_pylist()
    raw_values = table.column("value").to_pylist()
    positions: dict[Any, int] = {}
    user_keys = table.column("user_key").to_pylist() if "user_key" in table.column_names else None
    read_key = _reader(user_key_type, allow_pickle, where) if user_key_type is not None else None
    for i, (group, key, raw) in enumerate(zip(groups, keys, raw_values, strict=True)):
        values = _all(read, raw, where) if raw is not None else [None]
        for value in values:
            extra: Any = None
            if kind == "map":
                if read_key is None or user_keys is None:
                    raise UnsupportedSerializerError(f"{where}: a map state needs user_key_type")
                (extra,) = _all(read_key, user_keys[i], where)
            elif kind == "list":
                extra = positions.get(key, 0)
                positions[key] = extra + 1
            for name, v in zip(cols, (group, key, None, extra, value), strict=True):
                cols[name].append(v)
    out = {
        "key_group": pa.array(cols["key_group"], pa.int32()),
        "key": pa.array(cols["key"], table.schema.field("key").type.field(0).type),
        "namespace": pa.array(cols["namespace"], pa.string()),
    }
    if kind == "list":
        out["position"] = pa.array(cols["extra"], pa.int32())
    elif kind == "map":
        assert user_key_type is not None
        out["user_key"] = to_arrow(cols["extra"], user_key_type)
    if kind == "value" and len(set(cols["key"])) != len(cols["key"]):
        raise FlinkFormatError(f"{where}: a key holds several values; read it as kind='list'")
    out["value"] = to_arrow(cols["value"], value_type)
    return pa.table(out)


def declared_table(
    raw: pa.Table, java_kind: str, declared: StateDeclaration, allow_pickle: bool, where: str
) -> pa.Table:
    """Python state read with a declaration; a type that does not fit its bytes is an
    ``[INVALID_OPTION]`` error naming the state."""
    kind = declared.kind or ("map" if java_kind == "MAP" else "value")
    if kind not in ("value", "list", "map") or (kind == "map") != (java_kind == "MAP"):
        raise DeclaredTypeError(f"{where}: declared kind {kind!r} does not fit its {java_kind} state")
    if kind == "map" and declared.user_key is None:
        raise DeclaredTypeError(f"{where}: a map state needs its map key type declared (userKeyType)")
    value = python_type(declared.value)
    user_key = python_type(declared.user_key) if declared.user_key is not None else None
    try:
        return python_table(raw, kind, value, user_key, allow_pickle, where)
    except FlinkFormatError as exc:
        if exc.code == "PICKLE_NOT_ALLOWED":
            raise
        raise DeclaredTypeError(f"the declared type does not fit: {exc.detail}") from exc
