"""The Flink savepoint writer on window namespaces (TimeWindow, GlobalWindow) and timers: what
our reader reads back equals the model (window_model.py), and Flink's own window savepoints
written back keep their bytes and values."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

import pytest
from flink_model import FIXTURES
from hypothesis import given
from hypothesis import strategies as st
from window_model import (
    FLINK_UIDS,
    WINDOWS_WRITTEN,
    build_checkpoint,
    expected_fired,
    flink_spec,
    model,
    namespace_of,
    parse_fired,
    rows,
    timers,
)
from write_model import canonical

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.checkpoint.flink import (
    FlinkSavepoint,
    UnsupportedFlinkWriteError,
    read_savepoint,
    write_savepoint,
)
from flinkstate.checkpoint.flink.streams.namespaces_write import Namespace, flink_namespace, timer_bytes
from flinkstate.checkpoint.flink.types import classes
from flinkstate.checkpoint.flink.types.flink_type import FlinkType
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor, assign_to_key_group
from flinkstate.state.errors import SerializationError


@pytest.fixture(scope="module")
def window_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("windows") / "checkpoint"))


def read_rows(sp: FlinkSavepoint, max_parallelism: int, uids: Any = None) -> set[tuple[Any, ...]]:
    """Every keyed state row our reader finds in ``sp`` (of ``uids``, default all), as
    window_model.rows gives them; each row's key group checked."""
    out = set()
    for uid, op in model().items():
        if uids is not None and uid not in uids:
            continue
        key_type = getattr(Types, op.key_type)()
        for name, s in op.states.items():
            for r in sp.keyed_state(uid, name).to_pylist():
                assert r["key_group"] == assign_to_key_group(r["key"], max_parallelism, key_type)
                extra = r.get("position", r.get("user_key"))
                value = canonical(r["value"], s.value_type) if r["value"] is not None else None
                ns = namespace_of(r["namespace"])
                ts = r.get("ttl_timestamp")
                ts = None if ts is None else round(ts.timestamp() * 1000)
                out.add((uid, name, r["key"], ns, extra, value, ts))
    return out


def read_timers(sp: FlinkSavepoint, max_parallelism: Any, uids: Any = None) -> set[tuple[Any, ...]]:
    out = set()
    for uid, op in model().items():
        if uids is not None and uid not in uids:
            continue
        key_type = getattr(Types, op.key_type)()
        for queue in op.timers:
            for found in sp.decode_timers(uid, queue):
                for kg, key, ns, ts in zip(
                    found.key_group, found.key, found.namespace, found.value, strict=True
                ):
                    assert kg == assign_to_key_group(key, max_parallelism, key_type)
                    out.add((uid, queue, key, ns, ts))
    return out


@pytest.mark.parametrize(("parallelism", "max_parallelism"), [(2, 128), (3, 256), (1, 64)])
def test_windows_and_timers_read_back(
    window_checkpoint: CompletedCheckpoint, tmp_path: Path, parallelism: int, max_parallelism: int
) -> None:
    sp = write_savepoint(
        window_checkpoint,
        str(tmp_path / "sp"),
        parallelism=parallelism,
        max_parallelism=max_parallelism,
        inline_threshold=512,
    )
    assert read_rows(sp, max_parallelism) == rows()
    assert read_timers(sp, max_parallelism) == timers()


def test_meta_info_names_flinks_serializers(window_checkpoint: CompletedCheckpoint, tmp_path: Path) -> None:
    sp = write_savepoint(window_checkpoint, str(tmp_path / "sp"))
    header = sp.keyed_header("window-kinds")
    assert header is not None
    found = {s.name: s.namespace.snapshot_class for s in header.states if s.namespace is not None}
    assert {n for n, c in found.items() if c == classes.WINDOW} == {n for n in found if n.startswith("tw_")}
    assert {n for n, c in found.items() if c == classes.GLOBAL_WINDOW} == {
        n for n in found if n.startswith("gw_")
    }
    for uid, ns_class in (
        ("tumbling", classes.WINDOW),
        ("global", classes.GLOBAL_WINDOW),
        ("timers", classes.VOID),
    ):
        header = sp.keyed_header(uid)
        assert header is not None
        queues = [s for s in header.states if s.is_timer]
        assert {s.name for s in queues} == set(model()[uid].timers)
        for s in queues:
            key, ns = s.value.children
            assert (key.snapshot_class, ns.snapshot_class) == (header.key.snapshot_class, ns_class)


@pytest.mark.parametrize(
    "fixture", ["heap_canonical", "rocksdb_canonical", "heap_checkpoint", "rocksdb_native", "heap_snappy"]
)
def test_flinks_window_savepoint_written_back(tmp_path: Path, fixture: str) -> None:
    """A window operator Flink 2.3 wrote (TimeWindow reducing state and its timers), written back:
    the same contents and timers, and a keyed state header of Flink's very bytes."""
    source = read_savepoint(str(FIXTURES / fixture))
    sp = write_savepoint(source, str(tmp_path / "sp"), operators=["window-sum"])

    def contents(s: FlinkSavepoint) -> list[Any]:
        return sorted(map(repr, s.keyed_state("window-sum", "window-contents").to_pylist()))

    def timer_set(s: FlinkSavepoint) -> set[Any]:
        return {
            (q.name, kg, key, ns, ts)
            for q in s.keyed_header("window-sum").states  # type: ignore[union-attr]
            if q.is_timer
            for r in s.decode_timers("window-sum", q.name)
            for kg, key, ns, ts in zip(r.key_group, r.key, r.namespace, r.value, strict=True)
        }

    assert contents(sp) == contents(source) and len(contents(sp)) > 10
    assert timer_set(sp) == timer_set(source) and len(timer_set(sp)) > 10
    if fixture in ("heap_canonical", "rocksdb_canonical"):  # uncompressed canonical: Flink's header bytes
        ours, theirs = (
            next(st.managed_keyed for st in s.operator("window-sum").subtasks if st.managed_keyed)
            for s in (sp, source)
        )
        data = [h.stream.read(s.directory, s.storage) for h, s in ((ours, sp), (theirs, source))]  # type: ignore[union-attr]
        end = sp.keyed_header("window-sum").end  # type: ignore[union-attr]
        assert data[0][:end] == data[1][:end]


def test_void_namespace_in_window_state_refused_before_any_file(tmp_path: Path) -> None:
    pending = CheckpointStorage(str(tmp_path / "ck")).begin()
    backend = HeapKeyedStateBackend(key_type=Types.LONG())
    backend.set_current_key(1)
    desc = ValueStateDescriptor("v", Types.LONG())
    backend.get_partitioned_state((0, 10), desc).update(1)
    backend.get_partitioned_state(None, desc).update(2)
    pending.write_keyed("op", backend, 0, 1)
    ck = pending.commit()
    with pytest.raises(SerializationError, match=r"namespace None is not a time window"):
        write_savepoint(ck, str(tmp_path / "sp"))
    assert not (tmp_path / "sp").exists()


COMMITTED = FIXTURES / "written" / "windows"


def _files(directory: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(directory.iterdir())}


def test_writer_still_writes_the_committed_savepoint(
    window_checkpoint: CompletedCheckpoint, tmp_path: Path
) -> None:
    write_savepoint(window_checkpoint, str(tmp_path / "sp"), **WINDOWS_WRITTEN)
    assert _files(tmp_path / "sp") == _files(COMMITTED / "savepoint")


def test_committed_savepoint_reads_back_and_writes_back(tmp_path: Path) -> None:
    sp = read_savepoint(str(COMMITTED / "savepoint"))
    for uid in FLINK_UIDS:
        max_p = WINDOWS_WRITTEN["max_parallelism"][uid]
        assert read_rows(sp, max_p, [uid]) == rows([uid])
        assert read_timers(sp, max_p, [uid]) == timers([uid])
    write_savepoint(sp, str(tmp_path / "sp"), inline_threshold=WINDOWS_WRITTEN["inline_threshold"])
    assert _files(tmp_path / "sp") == _files(COMMITTED / "savepoint")


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_what_flink_fired(backend: str) -> None:
    """What Flink 2.3 fired after restoring the committed savepoint: every window and timer."""
    parallelism, max_parallelism = WINDOWS_WRITTEN["parallelism"], WINDOWS_WRITTEN["max_parallelism"]
    assert (COMMITTED / "spec.tsv").read_text(encoding="utf-8") == flink_spec(parallelism, max_parallelism)
    lines = (COMMITTED / f"restored-{backend}.tsv").read_text(encoding="utf-8").splitlines()
    fired = parse_fired(lines, parallelism, max_parallelism)
    assert len(fired) == len(set(fired)) and set(fired) == expected_fired()


def test_written_savepoint_read_and_written_again(
    window_checkpoint: CompletedCheckpoint, tmp_path: Path
) -> None:
    """Every kind of state in window namespaces, with and without TTL, and the timers, read from a
    Flink savepoint and written again: the same files; rescaled, the same rows and timers."""
    first = write_savepoint(window_checkpoint, str(tmp_path / "first"), inline_threshold=256)
    write_savepoint(first, str(tmp_path / "again"), inline_threshold=256)
    assert _files(tmp_path / "again") == _files(tmp_path / "first")
    rescaled = write_savepoint(first, str(tmp_path / "rescaled"), parallelism=3, max_parallelism=1024)
    assert read_rows(rescaled, 1024) == rows()
    assert read_timers(rescaled, 1024) == timers()


def test_unknown_namespace_serializer_refused() -> None:
    custom = FlinkType("com.example.MyWindow$Serializer$Snapshot", None, None)
    with pytest.raises(
        UnsupportedFlinkWriteError, match=r"\[FLINK_UNSUPPORTED\] op: namespace serializer com"
    ):
        flink_namespace(custom, "op")
    with pytest.raises(SerializationError, match=r"not the global window 'GlobalWindow'"):
        Namespace.GLOBAL_WINDOW.encode("other")
    with pytest.raises(SerializationError, match=r"not a time window"):
        Namespace.TIME_WINDOW.encode((1, 2, 3))
    assert Namespace.TIME_WINDOW.encode((-1, 2)) == struct.pack(">qq", -1, 2)


@given(st.integers(-(2**63), 2**63 - 1), st.integers(-(2**63), 2**63 - 1))
def test_timer_bytes_sort_as_timestamps(a: int, b: int) -> None:
    """Flink's TimerSerializer flips the timestamp's sign bit: bytes sort as the numbers do, and
    our reader reads the timestamp back."""
    assert (timer_bytes(a, b"k", b"\x00") < timer_bytes(b, b"k", b"\x00")) == (a < b)
    flipped = int.from_bytes(timer_bytes(a, b"", b"")[:8], "big") ^ (1 << 63)
    assert flipped - (flipped >> 63 << 64) == a
