"""PyFlink Python keyed state in a written savepoint, for either of PyFlink's execution modes.

PyFlink keys every keyed operator by a one-field Row holding the Python key (``key_by``'s
``key_type``; Flink's RowSerializer of that type), whose Java ``hashCode`` is
``31 * row kind + (31 * 1 + (31 + hashCode(f0)))``: the key group differs from the bare key's.
Without ``key_type`` the field is the key's pickle (a byte array hashed by ``Arrays.hashCode``):
cloudpickle's, protocol 5, in process mode; ``pickle.dumps``'s default protocol in thread mode
(the mode ``"<mode>+pickled-key"``; the writer's Python must pickle as the job's does).
How a Python state ``name`` is kept depends on ``python.execution-mode``:

- ``process`` (Beam): ``python-state-<name>``, a ListState of byte arrays for Value, List,
  Reducing and Aggregating states (a value state holds one element) or a MapState of
  byte arrays keyed by ``ByteArrayWrapperSerializer``'s byte arrays; each byte array is
  PyFlink's coder encoding of a value (:func:`..types.pyflink_write.encoder`).
- ``thread`` (embedded): ``name`` itself, a Value (also Reducing and Aggregating), List or
  Map state of Java types PyFlink maps the declared types to: BYTE, SHORT, INT and LONG to
  Long, FLOAT and DOUBLE to Double, CHAR to String, Map to Map; PICKLED_BYTE_ARRAY and Tuple
  values are pickles in a byte array.

TTL carries over as Flink's TTL serializer in both modes. An operator of a Flink savepoint
keyed by such a Row is written back as it was (its mode kept). Thread mode's keyed state is
restored from Flink 1.16 on: for an older target release it is ``[FLINK_UNSUPPORTED]``, ours or
a Flink savepoint's (an operator keyed by the Row whose states are not ``python-state-<name>``),
and a Flink savepoint holding it is written for 1.16 at the oldest when no release is named.
"""

from __future__ import annotations

import pickle
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, fields
from typing import Any

from flinkstate.state.errors import SerializationError
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.hashing import key_hash_code, murmur_hash
from flinkstate.state.types.mapping import (
    BasicTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
    TypeInformation,
    Types,
)

from ...manifest import OperatorEntry
from ...reading.restore import CompletedCheckpoint
from ..errors import UnsupportedFlinkWriteError, UnsupportedSerializerError
from ..metadata.metadata_read import OperatorMeta
from ..metadata.versions import FlinkTarget
from ..reader.savepoint import PYTHON_PREFIX, FlinkSavepoint
from ..streams.header_read import KeyedHeader, StateInfo, read_header
from ..streams.header_write import KeyedStateSpec
from ..streams.keyed_read import END_OF_GROUP
from ..types import classes
from ..types.flink_type import FlinkType
from ..types.pyflink_write import encoder
from ..types.snapshots_write import Snapshot, atomic_name, key_snapshot, map_of, ttl
from ..wire.data_read import Cursor
from ..wire.snappy_read import snappy_block
from .flink_source import FlinkOperator
from .sources import CheckpointOperator, OperatorSource

PYFLINK_MODES = ("process", "thread")
#: Appended to a mode: keys are pickled (``key_by`` without ``key_type``).
PICKLED_KEY = "+pickled-key"
_BYTE_ARRAY = Types.PRIMITIVE_ARRAY(Types.BYTE())
_THREAD_ATOMIC = {
    "BYTE": "LONG",
    "SHORT": "LONG",
    "INT": "LONG",
    "LONG": "LONG",
    "FLOAT": "DOUBLE",
    "DOUBLE": "DOUBLE",
    "CHAR": "STRING",
    "STRING": "STRING",
    "BOOLEAN": "BOOLEAN",
}
Convert = Callable[[Any], Any]


def row_key(key: TypeInformation) -> RowTypeInfo:
    """The type of PyFlink's key: a one-field Row of ``key``."""
    return RowTypeInfo((key,), ("f0",), "ROW")


def _bytes_hash(data: bytes) -> int:
    """Java's ``Arrays.hashCode(byte[])``."""
    h = 1
    for b in data:
        h = (31 * h + (b - 256 if b > 127 else b)) & 0xFFFFFFFF
    return h


def row_key_group(key: tuple[Any, ...], field: TypeInformation, max_parallelism: int) -> int:
    """The key group of PyFlink's key ``key`` (a 1-tuple of ``field``, an atomic type or a
    pickle's bytes): Flink's Row hash."""
    f0 = key[0]
    if f0 is None:
        code = 31
    elif field == _BYTE_ARRAY:
        code = 62 + _bytes_hash(f0)
    else:
        code = 62 + key_hash_code(f0, field)
    return murmur_hash(code) % max_parallelism


def _row_key_field(t: TypeInformation) -> TypeInformation | None:
    """The field of a one-field Row of an atomic type or byte[] (PyFlink's key), else None."""
    if isinstance(t, RowTypeInfo) and t.kind == "ROW" and len(t.field_types) == 1:
        field = t.field_types[0]
        return field if atomic_name(field) is not None or field == _BYTE_ARRAY else None
    return None


def _key_snapshot(field: TypeInformation, what: str) -> Snapshot:
    """The snapshot of Flink's serializer of PyFlink's key (a Row of ``field``)."""
    return Snapshot(
        classes.ROW, (Snapshot(classes.BYTES) if field == _BYTE_ARRAY else key_snapshot(field, what),)
    )


@dataclass(frozen=True)
class PythonStateSpec(KeyedStateSpec):
    """Process mode's ``python-state-<name>``: a map's keys use ``ByteArrayWrapperSerializer``."""

    def value_snapshot(self, what: str = "") -> Snapshot:
        if self.kind != "MAP":
            return super().value_snapshot(what)
        value = Snapshot(classes.BYTES)
        return map_of(Snapshot(classes.BYTE_WRAPPER), ttl(value) if self.ttl else value)


def _thread_type(t: TypeInformation | None, what: str) -> tuple[TypeInformation, Convert]:
    """The Java type thread mode keeps a declared type as, and the conversion of a value."""
    if isinstance(t, BasicTypeInfo) and t.name in _THREAD_ATOMIC:
        return BasicTypeInfo(_THREAD_ATOMIC[t.name]), lambda v: v
    if isinstance(t, PickledBytesTypeInfo):
        return _BYTE_ARRAY, pickle.dumps
    if isinstance(t, RowTypeInfo) and t.kind == "TUPLE":
        return _BYTE_ARRAY, lambda v: pickle.dumps(tuple(v.values()) if isinstance(v, dict) else tuple(v))
    if isinstance(t, MapTypeInfo) and atomic_name(t.key) is not None:
        key, key_of = _thread_type(t.key, what)
        value, value_of = _thread_type(t.value, what)
        return MapTypeInfo(key, value), lambda v: {key_of(k): value_of(x) for k, x in v.items()}
    raise UnsupportedFlinkWriteError(
        f"{what}: type {t} cannot be written as PyFlink thread-mode state (supported: BYTE, SHORT, "
        "INT, LONG, FLOAT, DOUBLE, CHAR, STRING, BOOLEAN, PICKLED_BYTE_ARRAY, TUPLE, and MAP of them)"
    )


def _or_none(f: Convert) -> Convert:
    return lambda v: None if v is None else f(v)


def _process(meta: StateMetaInfo, ttl: bool, what: str) -> tuple[KeyedStateSpec, Convert]:
    """Process mode: the spec of ``python-state-<name>`` and the conversion of (value, timestamps)."""
    value = encoder(meta.value_type, what)
    if meta.kind.name == "MAP":
        assert meta.user_key_type is not None
        user_key = encoder(meta.user_key_type, f"{what} (map key)")
        spec = PythonStateSpec(f"{PYTHON_PREFIX}{meta.name}", "MAP", _BYTE_ARRAY, _BYTE_ARRAY, ttl)

        def entries(vt: tuple[Any, Any]) -> tuple[Any, Any]:
            values, stamps = vt
            out = {user_key(k): None if v is None else value(v) for k, v in values.items()}
            return out, {user_key(k): t for k, t in stamps.items()} if ttl else None

        return spec, entries
    spec = PythonStateSpec(f"{PYTHON_PREFIX}{meta.name}", "LIST", _BYTE_ARRAY, None, ttl)
    if meta.kind.name == "LIST":
        return spec, lambda vt: ([value(v) for v in vt[0]], vt[1])
    return spec, lambda vt: ([value(vt[0])], [vt[1]] if ttl else None)


def _thread(meta: StateMetaInfo, ttl: bool, what: str) -> tuple[KeyedStateSpec, Convert]:
    """Thread mode: the state's spec with Java types and the conversion of (value, timestamps)."""
    value_type, value = _thread_type(meta.value_type, what)
    kind = meta.kind.name if meta.kind.name in ("LIST", "MAP") else "VALUE"
    if kind == "MAP":
        if meta.user_key_type is None or atomic_name(meta.user_key_type) is None:
            raise UnsupportedFlinkWriteError(f"{what}: map key type {meta.user_key_type} is not atomic")
        key_type, user_key = _thread_type(meta.user_key_type, f"{what} (map key)")
        spec = KeyedStateSpec(meta.name, kind, value_type, key_type, ttl)

        def entries(vt: tuple[Any, Any]) -> tuple[Any, Any]:
            values, stamps = vt
            out = {user_key(k): _or_none(value)(v) for k, v in values.items()}
            return out, {user_key(k): t for k, t in stamps.items()} if ttl else None

        convert: Convert = entries
    else:
        spec = KeyedStateSpec(meta.name, kind, value_type, None, ttl)
        if kind == "LIST":
            convert = lambda vt: ([value(v) for v in vt[0]], vt[1])  # noqa: E731
        else:
            convert = lambda vt: (value(vt[0]), vt[1])  # noqa: E731
    spec.value_snapshot(what)
    return spec, convert


class PyFlinkCheckpointOperator(CheckpointOperator):
    """An operator of one of our checkpoints written as PyFlink Python state of ``mode``."""

    def __init__(self, source: CompletedCheckpoint, op: OperatorEntry, mode: str) -> None:
        self.mode, pickled = mode.removesuffix(PICKLED_KEY), mode.endswith(PICKLED_KEY)
        self._converts: list[Convert] = []
        super().__init__(source, op)
        # process mode's keys are cloudpickle's (protocol 5), thread mode's pickle.dumps's
        protocol = 5 if self.mode == "process" else pickle.DEFAULT_PROTOCOL
        self.key_of: Convert = (lambda k: pickle.dumps(k, protocol)) if pickled else (lambda k: k)
        self.python_key = _BYTE_ARRAY if pickled else self.key_type
        if self.python_key is not None:
            self.key_type = row_key(self.python_key)

    def _spec(self, meta: StateMetaInfo) -> KeyedStateSpec:
        what = f"operator {self.name!r}, state {meta.name!r}"
        make = _process if self.mode == "process" else _thread
        spec, convert = make(meta, self._ttl(meta), what)
        self._converts.append(convert)
        return spec

    @property
    def flink_key_groups(self) -> bool:
        """:meth:`keyed_columns` places each key where Flink puts PyFlink's Row of it."""
        return True

    def check_key_groups(self) -> None:
        """PyFlink's Row key is placed by :func:`row_key_group` (a pickled key too)."""

    def key_group(self, key: Any, max_parallelism: int) -> int:
        assert self.python_key is not None
        return row_key_group(key, self.python_key, max_parallelism)

    def key_serializer_snapshot(self) -> Snapshot:
        assert self.python_key is not None
        return _key_snapshot(self.python_key, f"operator {self.name!r}: the key")

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        convert, spec = self._converts[index], self.states[index]
        groups: dict[int, StateColumns] = {}
        for _, cols in super().keyed_columns(index):
            stamps = cols.timestamps if cols.timestamps is not None else [None] * len(cols.keys)
            for key, value, stamp in zip(cols.keys, cols.values, stamps, strict=True):
                if value is None:
                    continue
                try:
                    new, new_stamp = convert((value, stamp))
                except (TypeError, ValueError, OverflowError, AttributeError) as exc:
                    raise SerializationError(
                        f"operator {self.name!r}, state {spec.name}, key {key!r}: cannot write {value!r} "
                        f"as PyFlink {self.mode}-mode state: {exc}"
                    ) from exc
                row = (self.key_of(key),)
                group = groups.get(kg := self.key_group(row, self.max_parallelism))
                if group is None:
                    group = groups[kg] = StateColumns([], None, [], [] if spec.ttl else None)
                group.keys.append(row)
                group.values.append(new)
                if group.timestamps is not None:
                    group.timestamps.append(new_stamp)
        yield from sorted(groups.items(), key=lambda item: item[0])


def _held_states(source: FlinkSavepoint, op: OperatorMeta) -> set[str] | None:
    """The names of the states with entries in any key group of ``op``'s canonical state streams
    (None: a stream of another kind, not scanned)."""
    held: set[str] = set()
    for sub in op.subtasks:
        handle = sub.managed_keyed
        if handle is None or handle.stream is None:
            continue
        if handle.kind != "key_groups":
            return None
        data = handle.stream.read(source.directory, source.storage)
        where = f"{source.directory}: operator {op.uid or op.operator_id}, {handle.stream.name}"
        header = read_header(data, where)
        starts = sorted({o for o in handle.offsets if o} | {len(data)})
        for offset in (o for o in handle.offsets if o):
            end = starts[starts.index(offset) + 1]
            block = snappy_block(data, offset, end, where) if header.compressed else data[offset:end]
            c = Cursor(block, where, 0)
            state_id = c.u16("state id")
            while state_id != END_OF_GROUP:
                held.add(header.states[state_id].name)
                while True:
                    key = c.take(c.count("key length"), "key")
                    c.take(c.count("value length"), "value")
                    if not key or key[0] & 0x80:
                        break
                state_id = c.u16("state id")
    return held


class PyFlinkSavepointOperator(FlinkOperator):
    """An operator of a Flink savepoint keyed by PyFlink's one-field Row, written as it was.
    Timer states without timers (PyFlink registers both) are left out."""

    def _keyed_infos(self, header: KeyedHeader) -> list[StateInfo]:
        held = _held_states(self.source, self.op) if any(s.is_timer for s in header.states) else set()
        return [s for s in header.states if not s.is_timer or held is None or s.name in held]

    def _same(self, t: FlinkType, what: str, key: bool = False) -> TypeInformation:
        field = _row_key_field(t.type_info) if key and t.type_info is not None else None
        if field is not None and t.snapshot_class == classes.ROW and len(t.children) == 1:
            child = t.children[0]
            self.python_key = (
                _BYTE_ARRAY if child.snapshot_class == classes.BYTES else super()._same(child, what, True)
            )
            return row_key(self.python_key)
        if key and t.snapshot_class == classes.BYTE_WRAPPER:
            return _BYTE_ARRAY
        return super()._same(t, what, key)

    def _spec(self, info: StateInfo) -> KeyedStateSpec:
        spec = super()._spec(info)
        if info.user_key is not None and info.user_key.snapshot_class == classes.BYTE_WRAPPER:
            return PythonStateSpec(**{f.name: getattr(spec, f.name) for f in fields(spec)})
        return spec

    def check_key_groups(self) -> None:
        """PyFlink's Row key is placed by :func:`row_key_group` (a pickled key too)."""

    def key_group(self, key: Any, max_parallelism: int) -> int:
        return row_key_group(key, self.python_key, max_parallelism)

    def key_serializer_snapshot(self) -> Snapshot:
        return _key_snapshot(self.python_key, f"operator {self.name!r}: the key")


def _mode(choice: str | Mapping[str, str] | None, uid: str) -> str | None:
    mode = choice.get(uid) if isinstance(choice, Mapping) else choice
    if mode is not None and mode.removesuffix(PICKLED_KEY) not in PYFLINK_MODES:
        raise UnsupportedFlinkWriteError(
            f"operator {uid!r}: pyflink_mode must be one of {', '.join(PYFLINK_MODES)} (with "
            f"{PICKLED_KEY!r} for pickled keys), got {mode!r}"
        )
    return mode


def pyflink_operator(
    source: CompletedCheckpoint | FlinkSavepoint,
    op: OperatorEntry | OperatorMeta,
    choice: str | Mapping[str, str] | None,
    flink: FlinkTarget,
) -> OperatorSource | None:
    """``op`` as a PyFlink operator of release ``flink`` when ``choice`` names a mode for it
    (ours) or it is keyed by PyFlink's Row (a Flink savepoint's); None otherwise."""
    if isinstance(source, CompletedCheckpoint):
        assert isinstance(op, OperatorEntry)
        mode = _mode(choice, op.uid)
        if mode is not None and mode.startswith("thread") and not flink.pyflink_thread_mode:
            raise UnsupportedFlinkWriteError(
                f"operator {op.uid!r}: PyFlink's thread mode keeps keyed state from Flink 1.16 on, not in "
                f"{flink.describe()}: write it in process mode (pyflink_mode='process') or for 1.16+"
            )
        return None if mode is None else PyFlinkCheckpointOperator(source, op, mode)
    assert isinstance(op, OperatorMeta)
    if _mode(choice, op.uid or op.operator_id) is not None:
        raise UnsupportedFlinkWriteError(
            f"operator {op.uid or op.operator_id!r}: pyflink_mode converts our checkpoints; an operator "
            "of a Flink savepoint keeps the mode it was written in"
        )
    header = _pyflink_header(source, op)
    if header is None:
        return None
    held = thread_mode_states(header)
    if held and not flink.pyflink_thread_mode:
        raise UnsupportedFlinkWriteError(
            f"operator {op.uid or op.operator_id!r} is keyed by PyFlink's Row and keeps its states "
            f"{', '.join(held)} as PyFlink's thread mode does (not {PYTHON_PREFIX}<name>), which Flink "
            f"restores from 1.16 on, not in {flink.describe()}: write it for 1.16+"
        )
    return PyFlinkSavepointOperator(source, op, flink)


def _pyflink_header(source: FlinkSavepoint, op: OperatorMeta) -> KeyedHeader | None:
    """The keyed header of an operator keyed by PyFlink's one-field Row; None: another operator."""
    try:
        header = source.keyed_header(op.operator_id)
    except UnsupportedSerializerError:  # FlinkOperator refuses it, naming the state
        return None
    if header is None or header.key.type_info is None or _row_key_field(header.key.type_info) is None:
        return None
    return header


def thread_mode_states(header: KeyedHeader) -> list[str]:
    """The states of a PyFlink-keyed operator kept as thread mode keeps them: by the Python
    name itself (process mode keeps ``python-state-<name>``); timer states aside."""
    return [s.name for s in header.states if not s.is_timer and not s.name.startswith(PYTHON_PREFIX)]


def holds_thread_mode(source: FlinkSavepoint) -> bool:
    """Whether an operator of ``source`` keeps PyFlink thread-mode keyed state, which only a
    Flink 1.16+ job (or flinkstate's writer for 1.16+) writes."""
    for op in source.operators:
        header = _pyflink_header(source, op) if op.subtasks else None
        if header is not None and thread_mode_states(header):
            return True
    return False
