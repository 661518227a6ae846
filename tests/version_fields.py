"""Generic checks over the records of a manifest: what a path changed, and a base that sets
every field of every record to a non-default value somewhere (so a field added later must
be set here, and is then compared by every path without editing the tests).

Records are walked over ``dataclasses.fields``; tuples of records with an identity (an
operator's ``uid``, a subtask's ``index``, a state's ``name``) and mappings are matched by
it, so an order change is not a change. A path declares what it means to change as
patterns of field paths (``"*"`` matches any one step); a pattern covers all below it.
Other tuples of the same length (a chain of files) are compared position by position.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Iterator, Mapping
from datetime import timedelta
from pathlib import Path
from typing import Any

from flinkstate.checkpoint import CheckpointStorage, Manifest
from flinkstate.checkpoint.manifest import METADATA
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    RocksDBKeyedStateBackend,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
)
from flinkstate.state.operator import OperatorStateBackend
from flinkstate.state.types.mapping import TypeInformation

Step = tuple[str, ...]
_MISSING = object()
_IDENTITY = ("uid", "index", "name")


def _identity(record: Any) -> str | None:
    if not dataclasses.is_dataclass(record):
        return None
    return next((str(getattr(record, n)) for n in _IDENTITY if hasattr(record, n)), None)


def _record(value: Any) -> bool:
    return dataclasses.is_dataclass(value) and not isinstance(value, (type, TypeInformation))


def differences(old: Any, new: Any, path: Step = ()) -> Iterator[Step]:
    """Every field path where ``old`` and ``new`` differ (recursively, by fields)."""
    if _record(old) and type(old) is type(new):
        for f in dataclasses.fields(old):
            yield from differences(getattr(old, f.name), getattr(new, f.name), (*path, f.name))
    elif isinstance(old, Mapping) and isinstance(new, Mapping):
        for key in sorted(set(old) | set(new), key=str):
            yield from differences(old.get(key, _MISSING), new.get(key, _MISSING), (*path, str(key)))
    elif (
        isinstance(old, tuple)
        and isinstance(new, tuple)
        and all(_identity(x) is not None for x in (*old, *new))
    ):
        left = {_identity(x): x for x in old}
        right = {_identity(x): x for x in new}
        for key in sorted(set(left) | set(right), key=str):
            yield from differences(left.get(key, _MISSING), right.get(key, _MISSING), (*path, str(key)))
    elif isinstance(old, tuple) and isinstance(new, tuple) and len(old) == len(new) and old != new:
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            yield from differences(a, b, (*path, str(i)))
    elif old != new:
        yield path


def _covers(pattern: Step, path: Step) -> bool:
    return len(pattern) <= len(path) and all(p in ("*", s) for p, s in zip(pattern, path, strict=False))


def unmeant(old: Any, new: Any, meant: list[Step]) -> list[str]:
    """The differences no pattern of ``meant`` covers, as ``a.b.c`` strings."""
    return [".".join(d) for d in differences(old, new) if not any(_covers(m, d) for m in meant)]


def _records(value: Any) -> Iterator[Any]:
    if _record(value):
        yield value
        for f in dataclasses.fields(value):
            yield from _records(getattr(value, f.name))
    elif isinstance(value, Mapping):
        for item in value.values():
            yield from _records(item)
    elif isinstance(value, (tuple, list)):
        for item in value:
            yield from _records(item)


def _default(f: dataclasses.Field[Any]) -> Any:
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return f.default


def fields_left_default(root: Any) -> list[str]:
    """``Class.field`` of every field with a default that no record under ``root`` sets to
    another value (fields without a default are always set)."""
    seen: dict[tuple[str, str], bool] = {}
    for record in _records(root):
        for f in dataclasses.fields(record):
            if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                continue
            key = (type(record).__name__, f.name)
            seen[key] = seen.get(key, False) or getattr(record, f.name) != _default(f)
    return sorted(f"{c}.{n}" for (c, n), done in seen.items() if not done)


UID = "op"
OTHER_UID = "other-op"
NATIVE_UID = "native-op"
"""An operator on RocksDB backends, checkpointed natively (its files)."""
P, MAX_P = 2, 8


def _ttl() -> StateTtlConfig:
    """Every TTL setting away from its default."""
    return (
        StateTtlConfig.new_builder(timedelta(hours=1))
        .update_ttl_on_read_and_write()
        .return_expired_if_not_cleaned_up()
        .use_event_time()
        .cleanup_full_snapshot()
        .cleanup_incrementally(7, True)
        .cleanup_in_rocksdb_compact_filter(50)
        .disable_cleanup_in_background()
        .build()
    )


def _checkpoint(storage: CheckpointStorage, backends: list[list[Any]], step: int) -> None:
    pending = storage.begin()
    for uid, ops in zip((UID, OTHER_UID), backends[:2], strict=True):
        for i, backend in enumerate(ops):
            operator = OperatorStateBackend()
            operator.get_list_state(ListStateDescriptor("ol", Types.LONG())).add(step * 10 + i)
            bc = operator.get_broadcast_state(MapStateDescriptor("bc", Types.STRING(), Types.LONG()))
            bc.put("b", step)
            pending.write_subtask(uid, i, P, MAX_P, keyed=backend, operator=operator,
                                  raw_keyed={backend.key_group_range.start: b"raw%d" % i},
                                  raw_operator=[b"rawop%d" % i])  # fmt: skip
    for i, backend in enumerate(backends[2]):
        pending.write_subtask(NATIVE_UID, i, P, MAX_P, keyed=backend)
    pending.commit({"step": str(step)})


class Job:
    """Two operators of two keyed subtasks (watermarks 1000 and 2000) on live backends, with
    a TTL value state (every TTL setting away from its default), a namespaced map state,
    list and broadcast operator states and raw state, checkpointed incrementally under
    ``path`` (chains of at most two files); and a third operator on RocksDB backends
    (value and list states), checkpointed as its native files."""

    def __init__(self, path: Path) -> None:
        from flinkstate.state.keygroups.assignment import compute_key_group_range_for_operator_index as rng_of

        self.storage = CheckpointStorage(str(path), retain=10, incremental=True, max_chain_files=2,
                                         rocksdb_format="native")  # fmt: skip
        self.value = ValueStateDescriptor("v", Types.LONG())
        self.value.enable_time_to_live(_ttl())
        self.mapped = MapStateDescriptor("m", Types.STRING(), Types.LONG())
        self.chained = ValueStateDescriptor("c", Types.LONG())
        self.grown = ValueStateDescriptor("d", Types.LONG())
        self.listed = ListStateDescriptor("l", Types.STRING())
        self.backends: list[list[Any]] = [
            [HeapKeyedStateBackend(Types.LONG(), MAX_P, rng_of(MAX_P, P, i)) for i in range(P)]
            for _ in range(2)
        ]
        work = path.parent / f"{path.name}-rocksdb"
        self.backends.append(
            [
                RocksDBKeyedStateBackend(work / str(i), Types.LONG(), MAX_P, rng_of(MAX_P, P, i))
                for i in range(P)
            ]
        )
        weakref.finalize(self, _close, self.backends[2])  # RocksDB directories are freed with the job
        for ops in self.backends:
            for i, backend in enumerate(ops):
                backend.advance_watermark(1000 * (i + 1))
        self.step = 0

    def checkpoint(self, chained: Callable[[int], bool], grown: Callable[[int], bool]) -> Manifest:
        """Update the TTL state of every key (cleaned in full snapshots: written in full), ``c``
        and ``d`` of the keys chosen, then checkpoint; returns the manifest."""
        step = self.step
        self.step += 1
        for backend in self.backends[2]:
            for k in range(40):
                if _group(k) in backend.key_group_range:
                    backend.set_current_key(k)
                    backend.get_state(self.chained).update(k + step)
                    backend.get_list_state(self.listed).add(f"{k}-{step}")
        for ops in self.backends[:2]:
            for backend in ops:
                for k in range(40):
                    if _group(k) not in backend.key_group_range:
                        continue
                    backend.set_current_key(k)
                    backend.get_state(self.value).update(k + step)
                    if chained(k):
                        backend.get_state(self.chained).update(k + step)
                    if grown(k):
                        backend.get_state(self.grown).update(k + step)
                    if step == 0:
                        backend.get_partitioned_state(k % 3, self.mapped).put("x", k)
        _checkpoint(self.storage, self.backends, step)
        return self.storage.load().manifest


def write_base(path: Path) -> tuple[Job, Manifest]:
    """A :class:`Job` whose latest version sets every field of every record to a non-default
    value somewhere: ``d`` an increment over earlier checkpoints, ``c`` compacted (its
    changes kept), ``m`` a file of the first; republished as a savepoint with properties."""
    job = Job(path)
    job.checkpoint(lambda k: True, lambda k: True)
    job.checkpoint(lambda k: k % 10 == 1, lambda k: False)  # "d" unchanged: an increment over 1
    manifest = job.checkpoint(lambda k: k % 10 == 2, lambda k: k % 20 == 0)  # "c" past two files
    directory = job.storage.storage.child(f"chk-{manifest.checkpoint_id}")
    manifest = dataclasses.replace(manifest, kind="savepoint", properties={"origin": "test", "step": "3"})
    directory.delete(METADATA)
    directory.write_bytes(METADATA, manifest.to_bytes())
    left = fields_left_default(manifest)
    assert not left, f"the base leaves fields at their defaults: {left}"
    return job, manifest


def _close(backends: list[RocksDBKeyedStateBackend]) -> None:
    for backend in backends:
        backend.close()


def _group(key: int) -> int:
    from flinkstate.state import assign_to_key_group

    return assign_to_key_group(key, MAX_P)
