"""Key and namespace types are the operator's, not a subtask's: two subtasks that infer them
from different first values (a namedtuple here, a plain tuple there; one state used in the
void namespace only here, with int namespaces there) commit, checkpoint after checkpoint,
incremental or not, and every value reads back after a restore (compared to a model)."""

from __future__ import annotations

from collections import namedtuple
from pathlib import Path
from typing import Any

import pytest

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import (
    FlinkStateError,
    HeapKeyedStateBackend,
    RocksDBKeyedStateBackend,
    Types,
    ValueStateDescriptor,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateColumns, StateMetaInfo
from flinkstate.state.keygroups.hashing import key_group_assigner
from flinkstate.state.types.mapping import infer_type

MAX_P = 16
Point = namedtuple("Point", "x label")
VALUE = ValueStateDescriptor("v", Types.LONG())
WINDOWS = ValueStateDescriptor("w", Types.STRING())


def _backends(factory: Any, tmp_path: Path) -> list[Any]:
    out = []
    for i in range(2):
        rng = compute_key_group_range_for_operator_index(MAX_P, 2, i)
        if factory == "rocksdb":
            out.append(
                RocksDBKeyedStateBackend(str(tmp_path / f"db{i}"), max_parallelism=MAX_P, key_group_range=rng)
            )
        else:
            out.append(
                HeapKeyedStateBackend(max_parallelism=MAX_P, key_group_range=rng, async_snapshots=factory)
            )
    return out


def _keys_of(subtask: int, n: int) -> list[tuple[int, str]]:
    """``n`` tuple keys owned by ``subtask`` of 2."""
    kg = key_group_assigner(infer_type((0, "a")))
    rng = compute_key_group_range_for_operator_index(MAX_P, 2, subtask)
    return [k for k in ((i, f"k{i}") for i in range(200)) if kg(k, MAX_P) in rng][:n]


def test_a_namedtuple_and_a_plain_tuple_infer_one_type() -> None:
    assert infer_type(Point(1, "a")) == infer_type((1, "a"))
    assert infer_type((Point(1, "a"), 2.5)) == infer_type(((1, "a"), 2.5))


@pytest.mark.parametrize("factory", [True, False, "rocksdb"], ids=["heap-cow", "heap-nested", "rocksdb"])
@pytest.mark.parametrize("incremental", [True, False], ids=["incremental", "full"])
def test_subtasks_inferring_from_different_first_values_commit(
    tmp_path: Path, factory: Any, incremental: bool
) -> None:
    backends = _backends(factory, tmp_path)
    storage = CheckpointStorage(str(tmp_path / "chk"), incremental=incremental)
    keys = [_keys_of(0, 4), _keys_of(1, 4)]
    model: dict[tuple[Any, Any, Any], Any] = {}
    for round_ in range(5):
        for subtask, backend in enumerate(backends):
            for j, key in enumerate(keys[subtask]):
                # subtask 0 keys by namedtuples, subtask 1 by plain tuples (first keys included)
                backend.set_current_key(Point(*key) if subtask == 0 else key)
                backend.get_state(VALUE).update(round_ * 10 + j)
                model[("v", key, None)] = round_ * 10 + j
                if subtask == 0:  # "w" in the void namespace only
                    backend.get_state(WINDOWS).update(f"r{round_}")
                    model[("w", key, None)] = f"r{round_}"
                elif j % 2 == round_ % 2:  # "w" with int namespaces only
                    backend.get_partitioned_state(round_, WINDOWS).update(f"n{round_}")
                    model[("w", key, round_)] = f"n{round_}"
        pending = storage.begin()
        for subtask, backend in enumerate(backends):
            pending.write_keyed("op", backend, subtask=subtask, parallelism=2)
        checkpoint = pending.commit()
        restored = checkpoint.keyed_backend("op", 0, 1)
        got: dict[tuple[Any, Any, Any], Any] = {}
        for name, desc in (("v", VALUE), ("w", WINDOWS)):
            for ns in (None, *range(round_ + 1)):
                for key in restored.get_keys(name, ns):
                    restored.set_current_key(key)
                    got[(name, key, ns)] = restored.get_partitioned_state(ns, desc).value()
        assert got == model, round_
        restored.close()
    for backend in backends:
        backend.close()


def test_a_tuple_of_any_class_fits_a_declared_row_namespace(make_backend: Any) -> None:
    """A namespace type recorded as a named ROW (a Spark write's struct column) takes plain
    tuples and namedtuples of other names: the same values, by their fields."""
    Window = namedtuple("Window", "start end")
    Other = namedtuple("Other", "a b")
    declared = Types.ROW_NAMED(["start", "end"], [Types.LONG(), Types.LONG()])
    backend = make_backend(key_type=Types.LONG(), max_parallelism=4)
    meta = StateMetaInfo("w", StateKind.VALUE, Types.STRING(), None, declared)
    backend.restore_state(meta, 0, StateColumns([], None, []))
    backend.set_current_key(1)
    for i, ns in enumerate([Window(0, 10), (0, 10), Other(0, 10)]):
        backend.get_partitioned_state(ns, WINDOWS).update(f"v{i}")
    got = [backend.get_partitioned_state(ns, WINDOWS).value() for ns in [(0, 10), Window(0, 10)]]
    assert got == ["v2", "v2"]
    with pytest.raises(FlinkStateError, match="NAMESPACE_TYPE_MISMATCH"):
        backend.get_partitioned_state(("a", 10), WINDOWS).update("x")
