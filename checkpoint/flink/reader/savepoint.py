"""A Flink savepoint or retained checkpoint, read without Flink.

:func:`read_savepoint` parses ``_metadata``; each state reads on demand into an Arrow table
with the columns of our own views (``key_group, key, namespace, value`` plus ``position``
for lists, ``user_key`` for maps, ``ttl_timestamp`` with TTL; operator state
``subtask, position, value`` or ``subtask, key, value`` for broadcast state).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property
from typing import Any

import fsspec
import pyarrow as pa

from flinkstate.state.keyed.backend import AbstractKeyedStateBackend
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.types.mapping import TypeInformation

from ...errors import CheckpointNotFoundError
from ..errors import DeclaredTypeError
from ..metadata.metadata_read import (
    CheckpointMeta,
    KeyedHandle,
    OperatorMeta,
    is_flink_metadata,
    parse_metadata,
)
from ..metadata.operator_id import operator_id_hex
from ..metadata.versions import FlinkVersions, from_files, given
from ..rocksdb.native_read import read_native
from ..streams.header_read import KeyedHeader, StateInfo, read_header, read_stream_header, union_headers
from ..streams.keyed_read import KeyGroupDecoder, StateRows, decode_groups
from ..streams.operator_read import operator_stream_version
from ..types.declared_read import StateDeclaration, declarations
from ..types.pyflink_read import declared_table
from .kryo_declared import apply_declarations
from .operator_states import empty_operator_table, operator_infos, operator_state, subtask_values
from .raw_entries import RawEntries
from .restore import keyed_backend, operator_backend, restore_keyed
from .tables import keyed_schema, keyed_table

PYTHON_PREFIX = "python-state-"


@dataclass(frozen=True)
class FlinkState:
    """A state found in the savepoint, with the types its serializer snapshots give."""

    operator_uid: str
    operator_id: str
    operator_name: str
    name: str
    kind: str
    key_type: str
    namespace_type: str
    user_key_type: str
    value_type: str
    ttl: bool
    decodable: bool
    serializer: str


def _directory(path: str) -> str:
    path = path.rstrip("/")
    return path[: -len("/_metadata")] if path.endswith("/_metadata") else path


def is_flink_savepoint(path: str, storage: Mapping[str, Any] | None = None) -> bool:
    """Whether ``path`` (a directory or its ``_metadata``) holds a Flink ``_metadata``."""
    fs, root = fsspec.core.url_to_fs(_directory(path) + "/_metadata", **dict(storage or {}))
    try:
        with fs.open(root, "rb") as f:
            return is_flink_metadata(f.read(4))
    except (FileNotFoundError, IsADirectoryError, NotADirectoryError):
        return False


def read_savepoint(
    path: str,
    storage: Mapping[str, Any] | None = None,
    types: Mapping[str, Any] | None = None,
    allow_pickle: bool = False,
    data: bytes | None = None,
    flink_version: str | None = None,
) -> FlinkSavepoint:
    """Open the Flink savepoint or retained checkpoint at ``path`` (directory or ``_metadata``);
    ``storage``: fsspec storage options; ``types``: declared types by state name (Kryo values,
    PyFlink Python state; see :mod:`..types.declared_read`); ``allow_pickle``: load PyFlink pickles;
    ``data``: the ``_metadata``'s bytes, when the caller has read them; ``flink_version``: the
    Flink release that wrote it (``"1.15"``), where its files do not tell
    (:mod:`..metadata.versions`; a release they rule out is refused)."""
    directory = _directory(path)
    if data is None:
        fs, root = fsspec.core.url_to_fs(directory + "/_metadata", **dict(storage or {}))
        try:
            with fs.open(root, "rb") as f:
                data = f.read()
        except FileNotFoundError as exc:
            raise CheckpointNotFoundError(f"no Flink _metadata in {directory}") from exc
    meta = parse_metadata(data, f"{directory}/_metadata")
    return FlinkSavepoint(directory, meta, storage, types, allow_pickle, flink_version)


class FlinkSavepoint:
    """The operators and states of one Flink savepoint or checkpoint."""

    def __init__(
        self,
        directory: str,
        meta: CheckpointMeta,
        storage: Mapping[str, Any] | None = None,
        types: Mapping[str, Any] | None = None,
        allow_pickle: bool = False,
        flink_version: str | None = None,
    ) -> None:
        self.directory = directory
        self.meta = meta
        self.storage = dict(storage or {})
        self.types = declarations(types or {})
        self.allow_pickle = allow_pickle
        if flink_version is not None:  # refused at once when _metadata alone rules it out
            given(flink_version, from_files(meta.version), f"{directory}/_metadata")
        self.flink_version = flink_version
        self._headers: dict[str, KeyedHeader | None] = {}

    def with_flink_version(self, flink_version: str | None) -> FlinkSavepoint:
        """This savepoint read as written by Flink ``flink_version`` (None: as its files tell)."""
        if flink_version == self.flink_version:
            return self
        return FlinkSavepoint(
            self.directory, self.meta, self.storage, self.types, self.allow_pickle, flink_version
        )

    @cached_property
    def flink_versions(self) -> FlinkVersions:
        """The Flink releases that can have written this savepoint: what ``_metadata`` and the
        operator state streams tell (only their first bytes are read), or the one given."""
        formats: set[int] = set()
        for op in self.meta.operators:
            for sub in op.subtasks:
                handle = sub.managed_operator  # raw operator state is the user's bytes: no header
                if handle is not None and handle.stream is not None:
                    head = handle.stream.read(self.directory, self.storage, 4)
                    formats.add(operator_stream_version(head, f"{self.directory}: {handle.stream.name}"))
        found = from_files(self.meta.version).narrowed(formats)
        if self.flink_version is None:
            return found
        return given(self.flink_version, found, f"{self.directory}/_metadata")

    def _kryo_version(self, what: str) -> int:
        """The Kryo version of the declared Kryo values of ``what`` (asked for when the first is
        read; ``[FLINK_VERSION_REQUIRED]`` where the files do not tell)."""
        return self.flink_versions.require_kryo(what)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled without its cache of parsed headers (they hold decoders): a copy reads them again."""
        return {**self.__dict__, "_headers": {}}

    @property
    def operators(self) -> tuple[OperatorMeta, ...]:
        return tuple(o for o in self.meta.operators if o.subtasks)

    @cached_property
    def properties(self) -> dict[str, str]:
        handles = [s.managed_keyed for o in self.meta.operators for s in o.subtasks if s.managed_keyed]
        kinds = {h.kind for h in handles}
        snapshot = "savepoint" if self.meta.savepoint else "checkpoint"
        fmt = "native" if self.meta.native or "incremental" in kinds else "canonical"
        return {
            "checkpoint_id": str(self.meta.checkpoint_id),
            "metadata_version": str(self.meta.version),
            "snapshot": snapshot,
            "format": fmt,
            "flink_version": self.flink_versions.describe(),
        }

    def operator(self, ref: str) -> OperatorMeta:
        """The operator whose uid, id (the uid hash, hex) or name is ``ref``; an operator
        recorded without its uid (metadata version 3) is found by its uid's hash."""
        by_hash = ("operator_id", operator_id_hex(ref))
        for attr, want in (("uid", ref), ("operator_id", ref.lower()), ("name", ref), by_hash):
            found = [o for o in self.operators if getattr(o, attr) == want]
            if len(found) == 1:
                return found[0]
        names = sorted(o.uid or o.operator_id for o in self.operators)
        raise CheckpointNotFoundError(
            f"no operator {ref!r} with state in {self.directory}; operators: {names}"
        )

    def _keyed_stream(self, op: OperatorMeta, handle: KeyedHandle) -> tuple[bytes, KeyedHeader]:
        assert handle.stream is not None
        data = handle.stream.read(self.directory, self.storage)
        where = f"{self.directory}: operator {op.uid or op.operator_id}, {handle.stream.name}"
        header = read_header(data, where)
        if not self.types:
            return data, header
        return data, apply_declarations(header, self.types, where, self._kryo_version)

    def _header(self, op: OperatorMeta) -> KeyedHeader | None:
        """The keyed states of every subtask's header (a subtask lists only those it registered)."""
        if op.operator_id not in self._headers:
            headers = []
            for sub in op.subtasks:
                handle = sub.managed_keyed
                if handle is not None and handle.stream is not None:
                    where = f"{self.directory}: operator {op.uid or op.operator_id}, {handle.stream.name}"
                    header = read_stream_header(handle.stream, self.directory, self.storage, where)
                    if self.types:
                        header = apply_declarations(header, self.types, where, self._kryo_version)
                    headers.append(header)
            where = f"{self.directory}: operator {op.uid or op.operator_id}"
            self._headers[op.operator_id] = union_headers(headers, where) if headers else None
        return self._headers[op.operator_id]

    def states(self) -> list[FlinkState]:
        """Every keyed and operator state (timers excluded) with its types."""
        out = []
        for op in self.operators:
            header = self._header(op)
            if header is not None:
                for s in header.states:
                    if not s.is_timer:
                        out.append(self._describe(op, s, header.key.describe()))
            for s in self._operator_infos(op):
                out.append(self._describe(op, s, ""))
        return out

    def _operator_infos(self, op: OperatorMeta) -> list[StateInfo]:
        return operator_infos(op, self.directory, self.storage)

    @staticmethod
    def _describe(op: OperatorMeta, s: StateInfo, key: str) -> FlinkState:
        value = s.value.inner if s.value.inner is not None else s.value
        ns = s.namespace.describe() if s.namespace is not None else ""
        return FlinkState(
            op.uid, op.operator_id, op.name, s.name, s.kind, key, ns,
            s.user_key.describe() if s.user_key is not None else "",
            value.describe(), s.ttl, value.decodable,
            value.java_class or value.snapshot_class,
        )  # fmt: skip

    def metadata_table(self) -> pa.Table:
        """One row per state: operator uid, id, name, parallelism, max parallelism, state, types,
        and the Flink version (or the range of releases) that wrote the savepoint."""
        by_id = {o.operator_id: o for o in self.operators}
        rows = [dict(s.__dict__) for s in self.states()]
        version = self.flink_versions.describe()
        for r in rows:
            op = by_id[r["operator_id"]]
            r["parallelism"], r["max_parallelism"] = op.parallelism, op.max_parallelism
            r["flink_version"] = version
        return pa.Table.from_pylist(rows)

    def keyed_info(self, operator: str, state: str) -> tuple[KeyedHeader, StateInfo] | None:
        """The keyed header and meta info of a keyed state (None: no such keyed state)."""
        header = self._header(self.operator(operator))
        if header is None:
            return None
        for name in (state, f"{PYTHON_PREFIX}{state}"):
            info = next((s for s in header.states if s.name == name and not s.is_timer), None)
            if info is not None:
                return header, info
        return None

    def _python(self, operator: str, state: str) -> tuple[str, StateInfo] | None:
        """The Java state behind PyFlink Python state ``state`` (None: ``state`` is not one)."""
        found = self.keyed_info(operator, state)
        if found is None or found[1].name == state:
            return None
        if state not in self.types:
            raise DeclaredTypeError(
                f"{self.directory}: operator {operator}, state {state} is PyFlink Python state: declare its "
                "type (types={state: ...}; option valueType)"
            )
        return found[1].name, found[1]

    def schema(self, operator: str, state: str) -> pa.Schema:
        """The Arrow schema :meth:`state` gives, read from the state's meta info only."""
        found = self.keyed_info(operator, state)
        python = self._python(operator, state)
        if found is not None and python is not None:
            raw = keyed_schema(StateRows(found[1]), found[0].key).empty_table()
            return self._python_table(operator, state, raw, python[1]).schema
        if found is not None:
            return keyed_schema(StateRows(found[1]), found[0].key)
        info = next((i for i in self._operator_infos(self.operator(operator)) if i.name == state), None)
        if info is None:
            raise CheckpointNotFoundError(f"operator {operator!r} has no state {state!r}")
        return empty_operator_table(info).schema

    def _decode(
        self,
        operator: str,
        state: str,
        wanted: set[int] | None,
        timers: bool = False,
        decoder_type: type[KeyGroupDecoder] = KeyGroupDecoder,
    ) -> list[tuple[StateRows, KeyedHeader]]:
        """The rows of a keyed state (or timer queue) per subtask holding it and wanted key groups
        (``decoder_type``: :class:`.raw_entries.RawEntries` gives them as bytes)."""
        op = self.operator(operator)
        known = self._header(op)
        if known is None or not any(s.name == state and s.is_timer == timers for s in known.states):
            raise CheckpointNotFoundError(f"operator {operator!r} has no keyed state {state!r}")
        out = []
        for sub in op.subtasks:
            handle = sub.managed_keyed
            if handle is None or handle.stream is None:
                continue
            if wanted is not None and not wanted.intersection(handle.key_groups):
                continue
            data, header = self._keyed_stream(op, handle)
            info = next((s for s in header.states if s.name == state and s.is_timer == timers), None)
            if info is None:  # a state this subtask never registered
                continue
            where = f"{self.directory}: operator {operator}, state {state}, file {handle.stream.name}"
            decoder = decoder_type(header, op.max_parallelism, where, [state])
            if handle.kind == "incremental":
                read_native(self.directory, self.storage, handle, decoder, wanted)
            else:
                decode_groups(data, handle, header, decoder, wanted, where)
            out.append((decoder.rows[info.state_id], header))
        return out

    def keyed_state(self, operator: str, state: str, key_groups: Iterable[int] | None = None) -> pa.Table:
        """A keyed state as a table; only the key groups in ``key_groups`` are read (all if None)."""
        wanted = None if key_groups is None else set(key_groups)
        python = self._python(operator, state)
        if python is not None:
            raw = self.keyed_state(operator, python[0], key_groups)
            return self._python_table(operator, state, raw, python[1])
        parts = self._decode(operator, state, wanted)
        if not parts:
            return self.schema(operator, state).empty_table()
        return pa.concat_tables([keyed_table(rows, header.key) for rows, header in parts])

    def python_state(
        self,
        operator: str,
        name: str,
        value_type: TypeInformation,
        kind: str = "value",
        user_key_type: TypeInformation | None = None,
        allow_pickle: bool = False,
    ) -> pa.Table:
        """PyFlink Python state ``name`` (``kind`` value, list or map) decoded with the declared types
        (as ``read_savepoint(types={name: StateDeclaration(...)})`` does)."""
        found = self.keyed_info(operator, f"{PYTHON_PREFIX}{name}")
        if found is None:
            raise CheckpointNotFoundError(f"operator {operator!r} has no PyFlink Python state {name!r}")
        raw = self.keyed_state(operator, found[1].name)
        where = f"{self.directory}: operator {operator}, Python state {name}"
        declared = declarations({name: StateDeclaration(value_type, user_key_type, kind)})[name]
        return declared_table(raw, found[1].kind, declared, allow_pickle, where)

    def _python_table(self, operator: str, state: str, raw: pa.Table, info: StateInfo) -> pa.Table:
        where = f"{self.directory}: operator {operator}, Python state {state}"
        return declared_table(raw, info.kind, self.types[state], self.allow_pickle, where)

    def decode_keyed(self, operator: str, state: str, key_groups: Iterable[int] | None = None) -> StateRows:
        """A keyed state's decoded Python values (for restoring into a backend)."""
        parts = self._decode(operator, state, None if key_groups is None else set(key_groups))
        found = self.keyed_info(operator, state)
        assert found is not None
        merged = StateRows(found[1])
        for rows, _ in parts:
            for name in ("key_group", "key", "namespace", "extra", "value", "ttl", "chunks"):
                getattr(merged, name).extend(getattr(rows, name))
        return merged

    def raw_keyed(self, operator: str, state: str, timers: bool = False) -> list[StateRows]:
        """Each subtask's entries of a keyed state (or timer queue) as bytes: ``key`` the key bytes
        after the key-group prefix, ``value`` the value bytes (:mod:`..writer.passthrough`)."""
        return [rows for rows, _ in self._decode(operator, state, None, timers, RawEntries)]

    def decode_timers(
        self, operator: str, queue: str, key_groups: Iterable[int] | None = None
    ) -> list[StateRows]:
        """Each subtask's timers of timer queue ``queue`` (the timestamp is the ``value``) in the
        key groups ``key_groups`` (all if None)."""
        wanted = None if key_groups is None else set(key_groups)
        return [rows for rows, _ in self._decode(operator, queue, wanted, timers=True)]

    def keyed_header(self, operator: str) -> KeyedHeader | None:
        return self._header(self.operator(operator))

    def operator_infos(self, operator: str) -> list[StateInfo]:
        return self._operator_infos(self.operator(operator))

    def operator_values(self, operator: str, state: str, subtask: int) -> Any:
        """One subtask's elements (a list) or broadcast map (a dict) of an operator state, as
        our Python values (rows and POJOs as tuples)."""
        info = next(i for i in self._operator_infos(self.operator(operator)) if i.name == state)
        return subtask_values(self.operator_state(operator, state), info, subtask)

    def restore_keyed(
        self, backend: AbstractKeyedStateBackend, operator: str, states: Iterable[str] | None = None
    ) -> None:
        """Load ``operator``'s keyed states into ``backend`` (its key-group range)."""
        restore_keyed(self, backend, operator, states)

    def keyed_backend(
        self, operator: str, subtask: int, parallelism: int, **kwargs: Any
    ) -> AbstractKeyedStateBackend:
        """A new backend (HeapKeyedStateBackend unless ``backend_factory=``) for a subtask, restored."""
        return keyed_backend(self, operator, subtask, parallelism, **kwargs)

    def operator_backend(self, operator: str, subtask: int, parallelism: int) -> OperatorStateBackend:
        """Operator state of ``operator`` for subtask ``subtask`` of ``parallelism``, repartitioned."""
        return operator_backend(self, operator, subtask, parallelism)

    def operator_state(self, operator: str, state: str) -> pa.Table:
        """Operator list/union state (``subtask, position, value``) or broadcast state
        (``subtask, key, value``)."""
        return operator_state(self.operator(operator), operator, state, self.directory, self.storage)

    def state(self, operator: str, state: str, key_groups: Iterable[int] | None = None) -> pa.Table:
        """A keyed or operator state by name."""
        op = self.operator(operator)
        if any(
            s.managed_operator and any(e.name == state for e in s.managed_operator.states)
            for s in op.subtasks
        ):
            return self.operator_state(operator, state)
        return self.keyed_state(operator, state, key_groups)
