"""The savepoint writer's source for an operator of a Flink savepoint read: each state is
written again with the serializers it had; a state whose serializer the writer cannot write
again is carried as bytes (:mod:`.passthrough`), and timers are the savepoint's priority-queue
states.

Kryo bytes differ between Flink 1.x (Kryo 2) and 2.x (Kryo 5): a Kryo state of a savepoint of
one Kryo major written for a release of the other is re-encoded when its class is declared
(:func:`kryo_spec`: decoded with the source's Kryo, encoded with the target's), else refused
(``[FLINK_UNSUPPORTED]`` naming it), never carried as bytes the target misreads."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.operator import OperatorStateData, OperatorStateMode
from flinkstate.state.types.canonical import canonical_values
from flinkstate.state.types.mapping import TypeInformation

from ..errors import UnsupportedFlinkWriteError, UnsupportedSerializerError
from ..metadata.metadata_read import OperatorMeta
from ..metadata.versions import FlinkTarget
from ..reader.savepoint import FlinkSavepoint
from ..streams.header_read import KeyedHeader, StateInfo
from ..streams.header_write import KeyedStateSpec
from ..streams.namespaces_write import flink_namespace
from ..streams.operator_read import read_operator_header
from ..types import classes
from ..types.flink_type import FlinkType
from ..types.kryo_read import KryoReader
from ..types.kryo_write import KryoWriter, state_class_header
from ..types.snapshots_write import Snapshot, VerbatimSnapshot, key_snapshot
from .migrate import declaration_hint, nullable_lists, pojo_spec
from .passthrough import BYTES as _BYTES
from .passthrough import (
    check_carried,
    serializer_classes,
    snapshot_classes,
    unwritable,
    verbatim_columns,
    verbatim_operator_state,
    verbatim_spec,
)
from .sources import TIMESTAMP, OperatorSource


class FlinkOperator(OperatorSource):
    """An operator of a Flink savepoint read: each state is written with the serializers it
    had (a state whose serializer the writer would change is refused)."""

    @property
    def flink_key_groups(self) -> bool:
        """A Flink savepoint's keys are where Flink put them."""
        return True

    def __init__(
        self,
        source: FlinkSavepoint,
        op: OperatorMeta,
        flink: FlinkTarget,
        refused: dict[str, str] | None = None,
    ) -> None:
        """``refused``: where a state that cannot be written is recorded (its name: why) and left
        out, rather than refused (a dry run's plan: :mod:`.plan`)."""
        self.source, self.op, self.flink, self.target = source, op, flink, flink
        self.name, self.operator_id = op.uid or op.operator_id, bytes.fromhex(op.operator_id)
        self.parallelism, self.max_parallelism = op.parallelism, op.max_parallelism
        if any(s.raw_keyed or s.raw_operator for s in op.subtasks):
            raise self.refuse("raw state cannot be written to a Flink savepoint yet; leave the operator out")
        try:
            header = source.keyed_header(op.operator_id)
        except UnsupportedSerializerError as exc:  # Avro, custom serializers: not even read
            raise self.refuse(f"{exc}; it cannot be written") from exc
        self.header = header
        self.key_verbatim: str | None = None  # why the key serializer is carried as read
        self.key_type = None
        self.why: dict[str, str] = {}  # why each verbatim keyed state is (its serializer cannot be written)
        if header is not None:
            try:
                self.key_type = self._same(header.key, "the key", key=True)
            except UnsupportedFlinkWriteError as exc:
                self.key_verbatim, self.key_type = exc.detail, header.key.type_info or _BYTES
                self._check_carried(header.key, header.key_bytes, "the key")
        infos = self._keyed_infos(header) if header is not None else []
        self.states = tuple(s for s in (self._recorded(refused, i.name, self._spec, i) for i in infos) if s)
        carried = check_carried(op) if any(s.carried for s in self.states) else None
        if carried is not None:
            raise UnsupportedFlinkWriteError(f"{next(iter(self.why.values()))}; {carried}")
        self.infos: dict[str, StateInfo] = {}  # every subtask's: one may hold a state others lack
        self.compressed: dict[int, bool] = {}  # by subtask: whether its operator state stream is
        for sub in op.subtasks:
            handle = sub.managed_operator
            if handle is not None and handle.stream is not None:
                data = handle.stream.read(source.directory, source.storage)
                try:
                    found = read_operator_header(data, f"{source.directory}: {handle.stream.name}")
                except UnsupportedSerializerError as exc:
                    raise self.refuse(f"{exc}; it cannot be written") from exc
                self.compressed[sub.index] = found[0]
                self.infos.update(found[1])
        self.verbatim: set[str] = set()  # operator states carried as bytes
        for info in list(self.infos.values()):
            if not self._recorded(refused, info.name, self._operator_state, info):
                del self.infos[info.name]

    def _recorded(
        self, refused: dict[str, str] | None, name: str, check: Callable[[StateInfo], Any], info: StateInfo
    ) -> Any:
        """``check(info)``; with ``refused``, a refusal recorded there (None returned)."""
        if refused is None:
            return check(info)
        try:
            return check(info)
        except UnsupportedFlinkWriteError as exc:
            refused[name] = str(exc)
            return None

    def _operator_state(self, info: StateInfo) -> bool:
        """Check operator state ``info``: written with its serializers, or carried as bytes."""
        try:
            self._same(info.value, f"operator state {info.name!r}")
            if info.user_key is not None:
                self._same(info.user_key, f"operator state {info.name!r} (map key)", key=True)
        except UnsupportedFlinkWriteError:
            self.verbatim.add(info.name)
            self._check_carried(info.value, info.meta, f"operator state {info.name!r}")
            self._check_carried(info.user_key, b"", f"operator state {info.name!r}")
        return True

    def key_serializer_snapshot(self) -> Snapshot | VerbatimSnapshot:
        if self.key_verbatim is not None:
            assert self.header is not None
            return VerbatimSnapshot(self.header.key_bytes)
        return super().key_serializer_snapshot()

    def _keyed_infos(self, header: KeyedHeader) -> list[StateInfo]:
        """The keyed states (and timers) to write."""
        return list(header.states)

    def _same(self, t: FlinkType, what: str, key: bool = False) -> TypeInformation:
        """``t``'s type, when the writer writes Flink's serializer ``t`` again."""
        why = unwritable(t)
        if why is not None or t.type_info is None:
            raise self.refuse(f"{what}: {why or t.describe() + ' cannot be written yet'}")
        ours = key_snapshot(t.type_info, f"operator {self.name!r}, {what}") if key else None
        if ours is None:
            spec = KeyedStateSpec("", "VALUE", t.type_info)
            ours = spec.value_snapshot(f"operator {self.name!r}, {what}")
        if snapshot_classes(ours) != serializer_classes(t):
            raise self.refuse(f"{what}: serializer {t.java_class or t.snapshot_class} cannot be written yet")
        return t.type_info

    def _spec(self, info: StateInfo) -> KeyedStateSpec:
        """The state written with its own serializers; else (one we cannot encode) carried
        verbatim, or re-encoded for the target's Kryo (:meth:`_kryo_checked`)."""
        if self.key_verbatim is None:
            try:
                return self._written(info)
            except UnsupportedFlinkWriteError as exc:
                self.why[info.name] = exc.detail
        else:
            self.why[info.name] = self.key_verbatim
        return self._kryo_checked(info)

    def _source_kryo(self, what: str) -> int:
        """The Kryo major of the source's values (``[FLINK_VERSION_REQUIRED]`` where its files
        do not tell)."""
        return self.source.flink_versions.require_kryo(
            f"{self.source.directory}: operator {self.name!r}, {what}"
        )

    def _check_carried(
        self, t: FlinkType | None, meta: bytes, what: str, info: StateInfo | None = None
    ) -> None:
        """Refuse carrying as read the values of ``t`` and the serializer snapshots ``meta``
        where the target would misread or refuse them: Kryo values of another Kryo major than
        the target's, a Row snapshot of outer version 4 for Flink 1.13 (which refuses it), a
        POJO's List field of Flink 2.x's serializers for Flink 1.x (which refuses it)."""
        if t is not None and self.target.kryo == 2 and nullable_lists(t):
            raise self.refuse(
                f"{what}: its POJO's List fields {', '.join(nullable_lists(t))} hold Flink 2.x's serializers "
                f"(Nullable(List)), which {self.target.describe()} refuses (StateMigrationException: its "
                "type extraction gives them a Kryo GenericType); it cannot be written for Flink 1.x yet"
            )
        if self.target.row_outer_version < 4 and max(row_outer_versions(meta), default=0) >= 4:
            raise self.refuse(
                f"{what}: its serializer snapshot, carried as read, holds a Row snapshot of outer version 4, "
                f"which {self.target.describe()} refuses; write it for Flink 1.14 or later"
            )
        if t is not None and _has_kryo(t) and self._source_kryo(what) != self.target.kryo:
            raise self.refuse(
                f"{what}: its Kryo values are Kryo {self._source_kryo(what)}'s and {self.target.describe()} "
                f"reads Kryo {self.target.kryo}'s; they cannot be carried as bytes; to re-encode them, "
                + (declaration_hint(info) if info is not None else "only a keyed state's can be")
            )

    def _kryo_checked(self, info: StateInfo) -> KeyedStateSpec:
        """``info`` carried as bytes, or, holding Kryo values of another Kryo than the target's,
        re-encoded when its class is declared (else refused, naming it)."""
        what = f"state {info.name!r}"
        kryo = any(_has_kryo(t) for t in (info.value, info.user_key) if t is not None)
        if kryo and self.key_verbatim is None and self._source_kryo(what) != self.target.kryo:
            spec = self.settable(info.name)
            if spec is None:
                check = lambda t: self._same(t, f"{what} (map key)", True)  # noqa: E731
                spec = pojo_spec(info, f"operator {self.name!r}, {what}", check)
            if spec is not None:
                return spec
        self._check_carried(info.value, info.meta, what, info)
        self._check_carried(info.user_key, b"", f"{what} (map key)", info)
        return verbatim_spec(info)

    def settable(self, name: str) -> KeyedStateSpec | None:
        info = next((i for i in self.header.states if i.name == name), None) if self.header else None
        if info is None or self.key_verbatim is not None:
            return None
        what, at = f"operator {self.name!r}, state {name!r}", f"state {name!r} (map key)"
        check = lambda t: self._same(t, at, True)  # noqa: E731
        return kryo_spec(self.source, self.op.operator_id, info, what, check, self.target)

    def check_key_groups(self) -> None:
        if self.key_verbatim is not None:
            raise UnsupportedFlinkWriteError(
                f"{self.key_verbatim}: its states are carried as bytes, in the key groups they are in: "
                f"keep max parallelism {self.max_parallelism}"
            )
        super().check_key_groups()

    def verbatim_key(self, spec: KeyedStateSpec, key: bytes) -> Any:
        assert (
            self.header is not None and self.key_verbatim is None and self.header.key.serializer is not None
        )
        return self.header.key.serializer.read(key, 8 if spec.is_timer else 0)[0]  # a timer: after its time

    def _written(self, info: StateInfo) -> KeyedStateSpec:
        what = f"state {info.name!r}"
        if info.is_timer:
            key_ns = info.value.children
            if len(key_ns) != 2:
                raise self.refuse(f"{what}: a timer queue without key and namespace serializers")
            self._same(key_ns[0], f"{what} (timer key)", key=True)
            namespace = flink_namespace(key_ns[1], f"operator {self.name!r}, {what}")
            return KeyedStateSpec(info.name, "PRIORITY_QUEUE", TIMESTAMP, namespace=namespace)
        if info.namespace is None:
            raise self.refuse(f"{what}: a keyed state without a namespace serializer")
        namespace = flink_namespace(info.namespace, f"operator {self.name!r}, {what}")
        value = info.value.inner if info.value.inner is not None else info.value
        value_type = self._same(value, what)
        user_key = None if info.user_key is None else self._same(info.user_key, f"{what} (map key)", True)
        return KeyedStateSpec(info.name, info.kind, value_type, user_key, info.ttl, namespace)

    def keyed_columns(self, index: int) -> Iterator[tuple[int, StateColumns]]:
        spec = self.states[index]
        if spec.carried:
            yield from verbatim_columns(self.source, self.op.operator_id, spec)
            return
        if spec.is_timer:
            yield from self._timers(spec.name)
            return
        rows = self.source.decode_keyed(self.op.operator_id, spec.name)
        groups: dict[int, dict[Any, list[Any]]] = {}  # key group -> (key, namespace) -> [value, ts]
        # keys and map keys canonical: 0.0 and -0.0 stay two (Python's == says one)
        user_keys = canonical_values(list(rows.extra), spec.user_key) if spec.kind == "MAP" else rows.extra
        for kg, key, ns, extra, value, ts in zip(
            rows.key_group,
            canonical_values(list(rows.key), self.key_type),
            rows.namespace,
            user_keys,
            rows.value,
            rows.ttl or [None] * len(rows.key),
            strict=True,
        ):
            by_key = groups.setdefault(kg, {})
            scope = (key, ns)
            if spec.kind == "LIST":
                entry = by_key.setdefault(scope, [[], []])
                entry[0].append(value)
                entry[1].append(ts)
            elif spec.kind == "MAP":
                entry = by_key.setdefault(scope, [{}, {}])
                entry[0][extra] = value
                entry[1][extra] = ts
            else:
                by_key[scope] = [value, ts]
        for kg, chunk_keys, values in rows.chunks:  # void namespace only
            for key, value in zip(
                canonical_values(chunk_keys.to_pylist(), self.key_type), values.to_pylist(), strict=True
            ):
                groups.setdefault(kg, {})[(key, None)] = [value, None]
        for kg, by_scope in sorted(groups.items()):
            stamps = [e[1] for e in by_scope.values()] if spec.ttl else None
            keys, namespaces = [k for k, _ in by_scope], [ns for _, ns in by_scope]
            yield kg, StateColumns(keys, namespaces, [e[0] for e in by_scope.values()], stamps)

    def _timers(self, queue: str) -> Iterator[tuple[int, StateColumns]]:
        groups: dict[int, StateColumns] = {}
        for rows in self.source.decode_timers(self.op.operator_id, queue):
            timers = zip(rows.key_group, rows.key, rows.namespace, rows.value, strict=True)
            for kg, key, ns, timestamp in timers:
                found = groups.setdefault(kg, StateColumns([], [], []))
                found.keys.append(key)
                found.namespaces.append(ns)  # type: ignore[union-attr]
                found.values.append(timestamp)
        yield from sorted(groups.items())

    def operator_states(self) -> list[list[OperatorStateData]]:
        out: list[list[OperatorStateData]] = [[] for _ in range(self.parallelism)]
        infos, ref = self.infos, self.op.operator_id
        for sub in self.op.subtasks:
            handle = sub.managed_operator
            for entry in handle.states if handle is not None else ():
                info = infos[entry.name]
                if entry.name in self.verbatim:
                    out[sub.index].append(
                        verbatim_operator_state(self.source, sub, info, self.compressed[sub.index])
                    )
                    continue
                values = self.source.operator_values(ref, entry.name, sub.index)
                user_key = info.user_key.type_info if info.user_key is not None else None
                assert info.value.type_info is not None
                mode = OperatorStateMode[info.kind]
                out[sub.index].append(
                    OperatorStateData(entry.name, mode, info.value.type_info, values, user_key)
                )
        return out


def row_outer_versions(meta: bytes) -> set[int]:
    """The outer versions of the Row serializer snapshots in the serializer snapshot bytes ``meta``
    (each: the class name, then ``int version, int magic, int outer version``)."""
    name, found, at = classes.ROW.encode(), set(), 0
    while (at := meta.find(name, at)) >= 0:
        at += len(name)
        if meta[at + 4 : at + 8] == classes.COMPOSITE_MAGIC.to_bytes(4):
            found.add(int.from_bytes(meta[at + 8 : at + 12]))
    return found


def _has_kryo(t: FlinkType) -> bool:
    """Whether Flink type ``t`` is or holds a Kryo-serialized class."""
    inner = t.inner if t.inner is not None else t
    return inner.snapshot_class == classes.KRYO or any(_has_kryo(c) for c in inner.children)


def kryo_spec(
    source: FlinkSavepoint,
    operator_id: str,
    info: StateInfo,
    what: str,
    check_key: Callable[[FlinkType], object],
    flink: FlinkTarget,
) -> KeyedStateSpec | None:
    """How keyed state ``info`` of a Flink savepoint, a declared Kryo class, is set from rows
    (or re-encoded) for release ``flink``: its meta info written as read (the Kryo serializer
    snapshot and its registrations with it), its values encoded by a :class:`KryoWriter` of the
    target's Kryo with the class header its values carry (``check_key`` refuses a map key the
    writer cannot encode). None: not a declared Kryo state."""
    value = info.value.inner if info.value.inner is not None else info.value
    if info.is_timer or value.snapshot_class != classes.KRYO or not isinstance(value.serializer, KryoReader):
        return None
    if info.user_key is not None:
        check_key(info.user_key)
    namespace = flink_namespace(info.namespace, what)
    raw = (v for rows in source.raw_keyed(operator_id, info.name) for v in rows.value)
    header = state_class_header(raw, info.kind, info.ttl, value.java_class, what)
    assert value.type_info is not None
    writer = KryoWriter(value.type_info.to_arrow(), value.java_class, header, what, flink.kryo)
    return replace(verbatim_spec(info), namespace=namespace, encoder=writer)
