"""What every keyed state backend shares: registration, caching, TTL, snapshots (the
current key is :mod:`.current_key`).

A backend implements one hook, :meth:`AbstractKeyedStateBackend._create_internal_state`,
plus key listing and snapshots; TTL decoration happens here, once, for all backends.
"""

from __future__ import annotations

from abc import abstractmethod
from collections.abc import Callable, Collection, Hashable, Iterator, Mapping
from dataclasses import replace
from typing import Any, TypeVar, cast, overload

from ..descriptors import (
    AggregatingStateDescriptor,
    ListStateDescriptor,
    MapStateDescriptor,
    ReducingStateDescriptor,
    StateDescriptor,
    ValueStateDescriptor,
)
from ..errors import (
    InvalidArgumentError,
    StateAccessError,
    StateConflictError,
    StateMigrationError,
    StateTypeError,
)
from ..interfaces import (
    AggregatingState,
    InternalKvState,
    ListState,
    MapState,
    ReducingState,
    State,
    StateIncrementalVisitor,
    ValueState,
)
from ..keygroups.assignment import KeyGroupRange
from ..ttl.factory import create_ttl_state
from ..ttl.time import WatermarkTimeProvider
from ..types.mapping import TypeInformation
from .changes import ChangeLog
from .current_key import CurrentKey, NoKey
from .migration import Migrate, check_registered, restored_migrators
from .snapshot import Changed, ColumnTransform, KeyedStateSnapshot, StateColumns, StateMetaInfo

S = TypeVar("S", bound=InternalKvState)


class AbstractKeyedStateBackend(CurrentKey):
    """Keyed state scoped to a current key; see :class:`HeapKeyedStateBackend`."""

    def __init__(
        self,
        key_type: Any = None,
        max_parallelism: int = 128,
        key_group_range: KeyGroupRange | None = None,
        time_provider: Any = None,
    ) -> None:
        super().__init__(key_type, max_parallelism, key_group_range)
        self._states: dict[str, InternalKvState] = {}
        self._metas: dict[str, StateMetaInfo] = {}
        self._last_desc: StateDescriptor | None = None
        self._last_state: Any = None
        self._closed = False
        if time_provider is not None and not callable(getattr(time_provider, "current_timestamp", None)):
            raise StateTypeError(f"a time provider needs current_timestamp() -> int, got {time_provider!r}")
        self.time_provider = time_provider
        self._watermark = WatermarkTimeProvider()
        self.change_log = ChangeLog()

    # -- states ------------------------------------------------------------------

    def get_state(self, state_descriptor: ValueStateDescriptor) -> ValueState[Any]:
        return cast("ValueState[Any]", self._typed(state_descriptor, ValueStateDescriptor))

    def get_list_state(self, state_descriptor: ListStateDescriptor) -> ListState[Any]:
        return cast("ListState[Any]", self._typed(state_descriptor, ListStateDescriptor))

    def get_map_state(self, state_descriptor: MapStateDescriptor) -> MapState[Any, Any]:
        return cast("MapState[Any, Any]", self._typed(state_descriptor, MapStateDescriptor))

    def get_reducing_state(self, state_descriptor: ReducingStateDescriptor) -> ReducingState[Any]:
        return cast("ReducingState[Any]", self._typed(state_descriptor, ReducingStateDescriptor))

    def get_aggregating_state(
        self, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState[Any, Any]:
        return cast("AggregatingState[Any, Any]", self._typed(state_descriptor, AggregatingStateDescriptor))

    def _typed(self, desc: StateDescriptor, cls: type[StateDescriptor]) -> InternalKvState:
        if not isinstance(desc, cls):
            raise StateTypeError(f"expected a {cls.__name__}, got {desc!r}", code="WRONG_DESCRIPTOR")
        return self._partitioned(None, desc)

    @overload
    def get_partitioned_state(
        self, namespace: Any, state_descriptor: ValueStateDescriptor
    ) -> ValueState[Any]: ...
    @overload
    def get_partitioned_state(
        self, namespace: Any, state_descriptor: ListStateDescriptor
    ) -> ListState[Any]: ...
    @overload
    def get_partitioned_state(
        self, namespace: Any, state_descriptor: MapStateDescriptor
    ) -> MapState[Any, Any]: ...
    @overload
    def get_partitioned_state(
        self, namespace: Any, state_descriptor: ReducingStateDescriptor
    ) -> ReducingState[Any]: ...
    @overload
    def get_partitioned_state(
        self, namespace: Any, state_descriptor: AggregatingStateDescriptor
    ) -> AggregatingState[Any, Any]: ...
    @overload
    def get_partitioned_state(self, namespace: Any, state_descriptor: StateDescriptor) -> State: ...

    def get_partitioned_state(self, namespace: Any, state_descriptor: StateDescriptor) -> State:
        """The state ``state_descriptor`` names, scoped to ``namespace`` (``None``: void)."""
        return self._partitioned(namespace, state_descriptor)

    def _partitioned(self, namespace: Any, desc: StateDescriptor) -> InternalKvState:
        if desc is self._last_desc:
            state: InternalKvState = self._last_state
        else:
            state = self.get_or_create_keyed_state(desc)
            self._last_desc, self._last_state = desc, state
        state.set_current_namespace(namespace)
        return state

    def get_or_create_keyed_state(self, desc: StateDescriptor) -> InternalKvState:
        """Create the state on first use (with TTL if the descriptor enables it)."""
        self._check_open()
        if not isinstance(desc, StateDescriptor):
            raise StateTypeError(f"expected a state descriptor, got {desc!r}", code="WRONG_DESCRIPTOR")
        meta = StateMetaInfo(
            desc.name,
            desc.kind,
            desc.type_info,
            desc.key_type_info if isinstance(desc, MapStateDescriptor) else None,
            ttl=desc.ttl_config,
        )
        state = self._states.get(desc.name)
        if state is not None:
            check_registered(self._metas[desc.name], meta)
            return state
        restored = self._metas.get(desc.name)
        if restored is not None:
            value, user_key = restored_migrators(restored, meta)
            self._bind_restored(restored, meta, value, user_key)
            meta = replace(meta, namespace_type=restored.namespace_type)
        state = self._create_state(desc, meta)
        self._states[desc.name] = state
        self._metas[desc.name] = meta
        return state

    def _create_state(self, desc: StateDescriptor, meta: StateMetaInfo) -> InternalKvState:
        if meta.ttl is None:
            return self._create_internal_state(desc, meta)
        return create_ttl_state(self, desc, meta)

    @abstractmethod
    def _create_internal_state(
        self,
        desc: StateDescriptor,
        meta: StateMetaInfo,
        transform: Callable[[], ColumnTransform] | None = None,
    ) -> InternalKvState:
        """Create the backend's own state for ``desc`` (the one hook of a backend).

        ``meta`` is what snapshots report; ``desc`` says what is stored (with TTL, a
        descriptor of TtlValues). ``transform``, when given, makes at each snapshot the
        function that turns stored entries into snapshot entries.
        """

    @abstractmethod
    def _bind_restored(
        self, restored: StateMetaInfo, meta: StateMetaInfo, value: Migrate | None, user_key: Migrate | None
    ) -> None:
        """A restored state is registered as ``meta``: migrate its entries if needed."""

    # -- restore -------------------------------------------------------------------

    def restore_key_type(self, key_type: TypeInformation | None) -> None:
        """Adopt the key type of restored state (it must match a declared one)."""
        if key_type is None or key_type == self._key_type:
            return
        if self._key_type is not None:
            raise StateMigrationError(
                f"the checkpoint's key type is {key_type}; this backend's is {self._key_type} "
                "(keys of another type would land in other key groups)"
            )
        self._set_key_type(key_type)

    def restore_state(self, meta: StateMetaInfo, key_group: int, columns: StateColumns) -> None:
        """Bulk-load one key group of a restored state (before it is registered)."""
        self._check_open()
        if key_group not in self.key_group_range:
            raise InvalidArgumentError(
                f"key group {key_group} is outside this backend's {self.key_group_range}",
                code="KEY_GROUP_OUT_OF_RANGE",
            )
        if meta.name in self._states:
            raise StateAccessError(
                f"state {meta.name!r} is already in use; restore before use", code="RESTORE_AFTER_USE"
            )
        self.change_log.reset()  # restored entries are no change of a checkpoint of ours
        known = self._metas.get(meta.name)
        if known is None:
            self._metas[meta.name] = meta
        elif known != meta:
            raise StateConflictError(
                f"state {meta.name!r} is restored with two different descriptions", code="STATE_KIND_CONFLICT"
            )
        self._restore_columns(meta, key_group - self._kg_start, columns)

    @abstractmethod
    def _restore_columns(self, meta: StateMetaInfo, kgi: int, columns: StateColumns) -> None:
        """Insert restored entries of key-group index ``kgi``."""

    def _incremental_visitor(self, state_name: str) -> StateIncrementalVisitor | None:
        """A resumable walk over a state's entries, if the backend has one (TTL cleanup)."""
        return None

    # -- time ----------------------------------------------------------------------

    @property
    def watermark_provider(self) -> WatermarkTimeProvider:
        return self._watermark

    def advance_watermark(self, watermark: int) -> None:
        """Event time: "now" for event-time TTL states becomes ``watermark`` (never back)."""
        if type(watermark) is not int:
            raise StateTypeError(f"a watermark is epoch milliseconds (int), got {watermark!r}")
        self._watermark.advance(watermark)

    @property
    def current_watermark(self) -> int:
        return self._watermark.watermark

    def state_names(self) -> list[str]:
        return list(self._metas)

    def state_meta(self, name: str) -> StateMetaInfo:
        try:
            return self._metas[name]
        except KeyError:
            raise InvalidArgumentError(
                f"no state named {name!r}; registered: {sorted(self._metas)}", code="UNKNOWN_STATE"
            ) from None

    # -- keys of a state ---------------------------------------------------------

    def get_keys(self, state_name: str, namespace: Any = None) -> Iterator[Any]:
        """Every key with state under ``state_name`` in ``namespace`` (TTL-blind, as Flink)."""
        self._check_open()
        if state_name not in self._metas:
            return iter(())
        return self._keys(state_name, namespace)

    @abstractmethod
    def _keys(self, state_name: str, namespace: Any) -> Iterator[Any]: ...

    def apply_to_all_keys(self, namespace: Any, state_descriptor: StateDescriptor, function: Any) -> None:
        """Call ``function(key, state)`` (or ``function.process``) with each key current."""
        process = function.process if hasattr(function, "process") else function
        state = self._partitioned(namespace, state_descriptor)
        previous = self._ctx.key if self._ctx.kgi >= 0 else NoKey
        for key in self.get_keys(state_descriptor.name, namespace):
            self.set_current_key(key)
            state.set_current_namespace(namespace)
            process(key, state)
        if previous is not NoKey:
            self.set_current_key(previous)

    # -- snapshots and lifecycle ---------------------------------------------------

    @abstractmethod
    def snapshot(self) -> KeyedStateSnapshot:
        """Freeze every state (the synchronous part of a checkpoint)."""

    def _take_changes(self) -> Mapping[str, Changed] | None:
        """Hand over the changes recorded per state and start recording anew (see
        :mod:`.changes`); ``None`` when this backend does not record changes."""
        return None

    def snapshot_for_checkpoint(
        self, checkpoint_id: int, scope: Hashable | None = None, full: bool = False
    ) -> KeyedStateSnapshot:
        """:meth:`snapshot` plus, when the backend records changes, what changed since its
        last completed checkpoint (taken at the same moment). Confirm it with
        ``snapshot.changes.confirm(id)`` or :meth:`notify_checkpoint_complete` once the
        checkpoint commits; until then every later increment still carries those changes.

        ``scope`` says where the checkpoint goes (see :mod:`.changes`): the changes build
        on the last completed checkpoint of the same scope only, and states may then be
        snapshot as their changes only (cheaper). ``full``: the checkpoint is written in
        full (nothing to build on, every state frozen); it becomes the base all the same."""
        if self._closed:
            self._check_open()
        snap = self.change_log.take(checkpoint_id, scope, self._take_increment, full)
        return self.snapshot() if snap is None else snap

    def _take_increment(
        self, base_metas: Mapping[str, StateMetaInfo] | None, freeze: Collection[str]
    ) -> tuple[KeyedStateSnapshot, Mapping[str, Changed]] | None:
        """The changes recorded so far (see :meth:`_take_changes`; ``None``: not recording)
        and, at the same moment, the snapshot of a checkpoint whose base was taken with
        ``base_metas`` (``None``: no base in its scope). A backend may leave a state unfrozen
        (snapshot as its changes only) when its description is the base's and it is not in
        ``freeze``; by default every state is frozen."""
        taken = self._take_changes()
        return None if taken is None else (self.snapshot(), taken)

    def record_from(self, checkpoint_id: int, scope: Hashable) -> None:
        """This backend was just restored from checkpoint ``checkpoint_id``, which holds
        exactly its state, written to ``scope`` (see :mod:`.changes`): record changes from
        now on, so the next checkpoint to ``scope`` is an increment over that one. Only a
        restore at the same key-group range, before any write, may call it."""
        self._check_open()
        self._start_recording()
        self.change_log.restored(checkpoint_id, scope, self._metas)

    def _start_recording(self) -> None:
        """Every state records its changes from now on (a backend that records: see
        :meth:`_take_changes`)."""
        raise StateAccessError(f"{type(self).__name__} does not record changes", code="CHANGES_UNSUPPORTED")

    def notify_checkpoint_complete(self, checkpoint_id: int) -> None:
        """Checkpoint ``checkpoint_id`` (taken by :meth:`snapshot_for_checkpoint`) committed
        elsewhere (e.g. by a driver): later increments build on it."""
        self.change_log.complete_checkpoint(checkpoint_id)

    def _check_open(self) -> None:
        if self._closed:
            raise StateAccessError("the backend is closed", code="BACKEND_CLOSED")

    def close(self) -> None:
        """Release the backend; later use is an error."""
        self._closed = True
        self._key_pytype = self._fast_pytype = NoKey
        self._describe_key_setter()
        self._ctx.kgi = -1
        self._ctx.key = None
        self._last_desc = self._last_state = None

    @property
    def is_closed(self) -> bool:
        return self._closed

    def __enter__(self: Any) -> Any:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
