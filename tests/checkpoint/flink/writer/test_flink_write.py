"""Writing Flink savepoints from our checkpoints: read back with our own reader, every value
compared with the model the source checkpoint was built from; byte-compared with what Flink
itself writes; refusals before any file is written."""

from __future__ import annotations

import datetime
import decimal
import uuid
from pathlib import Path
from typing import Any

import pytest
from flink_model import FIXTURES
from hypothesis import given
from hypothesis import strategies as st
from operator_views import expected_operator_states, operator_view
from write_model import build_checkpoint, model, read_rows, rows

from flinkstate.checkpoint import CheckpointStorage, CompletedCheckpoint
from flinkstate.checkpoint.errors import CheckpointError
from flinkstate.checkpoint.flink import (
    FlinkTarget,
    UnsupportedFlinkWriteError,
    operator_id_hex,
    read_savepoint,
    write_savepoint,
)
from flinkstate.checkpoint.flink.errors import FlinkFormatError
from flinkstate.checkpoint.flink.metadata.operator_id import murmur3_128
from flinkstate.checkpoint.flink.streams.header_read import read_meta_info
from flinkstate.checkpoint.flink.streams.header_write import KeyedStateSpec, write_header
from flinkstate.checkpoint.flink.streams.keyed_write import EntryEncoder
from flinkstate.checkpoint.flink.streams.operator_write import operator_stream
from flinkstate.checkpoint.flink.types.snapshots_read import read_top_level
from flinkstate.checkpoint.flink.types.snapshots_write import Snapshot, snapshot_of
from flinkstate.checkpoint.flink.wire.data_read import Cursor
from flinkstate.checkpoint.flink.wire.data_write import Output, modified_utf8
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    compute_key_group_range_for_operator_index,
)
from flinkstate.state.errors import InvalidArgumentError, SerializationError
from flinkstate.state.keyed.snapshot import StateColumns
from flinkstate.state.operator import OperatorStateBackend, OperatorStateData, OperatorStateMode


@pytest.fixture(scope="module")
def model_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> CompletedCheckpoint:
    return build_checkpoint(str(tmp_path_factory.mktemp("model") / "checkpoint"))


@pytest.mark.parametrize(("parallelism", "max_parallelism"), [(None, None), (3, 256), (1, 64), (5, 5)])
def test_round_trip_every_value(
    model_checkpoint: CompletedCheckpoint,
    tmp_path: Path,
    parallelism: int | None,
    max_parallelism: int | None,
) -> None:
    sp = write_savepoint(
        model_checkpoint, str(tmp_path / "sp"), parallelism=parallelism, max_parallelism=max_parallelism
    )
    assert read_rows(sp) == set(rows())
    assert operator_view(sp) == expected_operator_states({uid: parallelism or 2 for uid in model()})
    assert sp.properties["metadata_version"] == "3" and sp.properties["format"] == "canonical"
    for uid in model():
        op = sp.operator(uid)
        assert op.operator_id == operator_id_hex(uid)
        assert op.parallelism == (parallelism or 2) and op.max_parallelism == (max_parallelism or 128)
        for sub in op.subtasks:
            rng = compute_key_group_range_for_operator_index(op.max_parallelism, op.parallelism, sub.index)
            if model()[uid].states:
                assert sub.managed_keyed is not None
                assert sub.managed_keyed.key_groups == range(rng.start, rng.end + 1)
            else:
                assert sub.managed_keyed is None
        assert [s.index for s in op.subtasks] == list(range(op.parallelism))


def test_inline_or_files(model_checkpoint: CompletedCheckpoint, tmp_path: Path) -> None:
    inline = write_savepoint(model_checkpoint, str(tmp_path / "inline"))
    files = write_savepoint(model_checkpoint, str(tmp_path / "files"), inline_threshold=0)
    assert sorted(p.name for p in (tmp_path / "inline").iterdir()) == ["_metadata"]
    written = sorted(p.name for p in (tmp_path / "files").iterdir())
    streams = sum(2 * (bool(op.states) + bool(op.operator_states)) for op in model().values())
    assert len(written) == 1 + streams
    for sp in (inline, files):
        handles = [
            h for o in sp.operators for s in o.subtasks for h in (s.managed_keyed, s.managed_operator) if h
        ]
        assert len(handles) == streams
        assert {h.stream.kind for h in handles if h.stream} == ({"bytes"} if sp is inline else {"relative"})
    assert read_rows(inline) == read_rows(files) == set(rows())
    assert (
        operator_view(inline) == operator_view(files) == expected_operator_states(dict.fromkeys(model(), 2))
    )
    moved = tmp_path / "moved"
    (tmp_path / "files").rename(moved)
    assert read_rows(read_savepoint(str(moved))) == set(rows())


def test_selected_operators_and_per_operator_parallelism(
    model_checkpoint: CompletedCheckpoint, tmp_path: Path
) -> None:
    sp = write_savepoint(
        model_checkpoint, str(tmp_path / "sp"), operators=["by-name"], parallelism={"by-name": 4}
    )
    assert [(o.operator_id, o.parallelism) for o in sp.operators] == [(operator_id_hex("by-name"), 4)]


def test_uid_hash_matches_flink() -> None:
    """Flink's own _metadata (version 6) records each uid beside its OperatorID."""
    sp = read_savepoint(str(FIXTURES / "heap_canonical"))
    pairs = [(o.uid, o.operator_id) for o in sp.meta.operators if o.uid]
    assert len(pairs) >= 4
    for uid, op_id in pairs:
        assert operator_id_hex(uid) == op_id
    # MurmurHash3 x64 128's published answer (two blocks and a tail)
    assert (
        murmur3_128(b"The quick brown fox jumps over the lazy dog").hex()
        == "6c1b07bc7bbc4be347939ac4a93c437a"
    )


def _spec(info: Any) -> KeyedStateSpec | None:
    """Our spec of a state Flink wrote, when its types are ones the writer covers."""
    value = info.value.inner if info.value.inner is not None else info.value
    if not value.decodable:  # Kryo
        return None
    try:
        snapshot_of(value.type_info, "")
        if info.user_key is not None:
            snapshot_of(info.user_key.type_info, "")
    except (UnsupportedFlinkWriteError, AttributeError):
        return None
    if info.kind not in ("VALUE", "LIST", "MAP", "REDUCING", "AGGREGATING") or not (
        info.namespace and info.namespace.void
    ):
        return None
    user_key = info.user_key.type_info if info.user_key is not None else None
    return KeyedStateSpec(info.name, info.kind, value.type_info, user_key, info.ttl)


def test_meta_info_bytes_equal_flinks() -> None:
    """Each state meta info of a real Flink savepoint, written again, gives Flink's bytes."""
    data = (FIXTURES / "heap_canonical_files").glob("*-*")
    stream = max((p.read_bytes() for p in data), key=len)  # the keyed-states operator's stream
    c = Cursor(stream, "fixture")
    c.i32("version")
    c.boolean("compressed")
    key_start = c.pos
    key = read_top_level(c, "key")
    out = Output("test")
    snapshot_of(key.type_info, "key").write_top_level(out, FlinkTarget())  # type: ignore[arg-type]
    assert bytes(out.buf) == stream[key_start : c.pos]
    compared = []
    for i in range(c.i16("count")):
        start = c.pos
        info = read_meta_info(c, i)
        spec = _spec(info)
        if spec is not None:
            out = Output("test")
            write_header(out, Snapshot("k"), [spec], FlinkTarget())
            header_len = len(out.buf) - (c.pos - start)
            assert bytes(out.buf[header_len:]) == stream[start : c.pos], info.name
            compared.append(info.name)
    assert {
        "v_long",
        "v_string",
        "l_long",
        "m_int_string",
        "ttl_value",
        "ttl_list",
        "ttl_map",
        "v_pojo",
    } <= set(compared)


def _one_state(
    path: str, desc: Any, namespace: Any = None, value: Any = 3, key: Any = 1, key_type: Any = None
) -> CompletedCheckpoint:
    """A checkpoint of operator ``op`` holding ``value`` for ``key`` (of ``key_type``, default
    LONG) in state ``desc``."""
    pending = CheckpointStorage(path).begin()
    key_type = key_type or Types.LONG()
    backend = HeapKeyedStateBackend(key_type=key_type)
    backend.advance_watermark(100)
    backend.set_current_key(key)
    backend.get_partitioned_state(namespace, desc).update(value)
    pending.write_keyed("op", backend, 0, 1)
    return pending.commit()


def _event_time_ttl() -> Any:
    desc = ValueStateDescriptor("e", Types.LONG())
    desc.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(hours=1)).use_event_time().build())
    return desc


@pytest.mark.parametrize(
    ("case", "message"),
    [
        ("event-time TTL", "event-time TTL"),
        ("namespace", r"state 'n': namespace type LONG has no Flink window"),
        ("decimal value", r"operator 'op', state 'dec': type BIG_DEC cannot be written"),
        ("decimal in a row key", r"the key, field f1: type BIG_DEC .*as a key"),
        ("bytes in a row key", r"the key, field f1: type PRIMITIVE_ARRAY<BYTE> .*as a key"),
        ("pojo key", r"the key: the POJO x.P hashes as its own hashCode\(\) says"),
        ("raw state", "raw state"),
        ("pickled operator state", r"operator state 'pickles'.*cannot be written"),
    ],
)
def test_refused_before_any_file(tmp_path: Path, case: str, message: str) -> None:
    path = str(tmp_path / "ck")
    if case == "event-time TTL":
        ck = _one_state(path, _event_time_ttl())
    elif case == "namespace":
        ck = _one_state(path, ValueStateDescriptor("n", Types.LONG()), namespace=7)
    elif case == "decimal value":
        ck = _one_state(path, ValueStateDescriptor("dec", Types.BIG_DEC()), value=decimal.Decimal("1.5"))
    elif case == "decimal in a row key":
        key_type = Types.ROW([Types.LONG(), Types.BIG_DEC()])
        key = (1, decimal.Decimal("1.5"))
        ck = _one_state(path, ValueStateDescriptor("v", Types.LONG()), key=key, key_type=key_type)
    elif case == "bytes in a row key":
        key_type = Types.ROW([Types.LONG(), Types.PRIMITIVE_ARRAY(Types.BYTE())])
        ck = _one_state(path, ValueStateDescriptor("v", Types.LONG()), key=(1, b"a"), key_type=key_type)
    elif case == "pojo key":
        key_type = Types.POJO("x.P", ["b", "a"], [Types.LONG(), Types.STRING()])
        ck = _one_state(path, ValueStateDescriptor("v", Types.LONG()), key=("s", 1), key_type=key_type)
    elif case == "raw state":
        pending = CheckpointStorage(path).begin()
        pending.write_subtask("op", 0, 1, 128, raw_operator=[b"raw"]).result()
        ck = pending.commit()
    else:
        pending = CheckpointStorage(path).begin()
        ops = OperatorStateBackend()
        ops.get_union_list_state(ListStateDescriptor("pickles", Types.PICKLED_BYTE_ARRAY())).add({"a": 1})
        pending.write_operator("op", ops, 0, 1)
        ck = pending.commit()
    with pytest.raises(UnsupportedFlinkWriteError, match=rf"\[FLINK_UNSUPPORTED\].*{message}"):
        write_savepoint(ck, str(tmp_path / "sp"))
    assert not (tmp_path / "sp").exists()


def test_bad_arguments_refused_before_any_file(model_checkpoint: CompletedCheckpoint, tmp_path: Path) -> None:
    target = tmp_path / "sp"
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_PARALLELISM\]"):
        write_savepoint(model_checkpoint, str(target), parallelism=200)
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_MAX_PARALLELISM\]"):
        write_savepoint(model_checkpoint, str(target), max_parallelism=0)
    with pytest.raises(CheckpointError, match=r"\[UNKNOWN_OPERATOR\]"):
        write_savepoint(model_checkpoint, str(target), operators=["nope"])
    assert not target.exists()
    write_savepoint(model_checkpoint, str(target))
    before = (target / "_metadata").read_bytes()
    with pytest.raises(CheckpointError, match=r"\[CHECKPOINT_EXISTS\]"):
        write_savepoint(model_checkpoint, str(target), parallelism=1)
    assert (target / "_metadata").read_bytes() == before


def test_version_3_metadata_with_trailing_bytes_is_refused(
    model_checkpoint: CompletedCheckpoint, tmp_path: Path
) -> None:
    write_savepoint(model_checkpoint, str(tmp_path / "sp"))
    with (tmp_path / "sp" / "_metadata").open("ab") as f:
        f.write(b"\x00")
    with pytest.raises(FlinkFormatError, match=r"\[FLINK_FORMAT\].*trailing bytes"):
        read_savepoint(str(tmp_path / "sp"))


@given(st.text())
def test_modified_utf8_reads_back(text: str) -> None:
    """Java's modified UTF-8: NUL as two bytes, a non-BMP character as two 3-byte surrogates,
    otherwise UTF-8."""
    out = Output("test")
    out.utf(text, "text")
    encoded = bytes(out.buf)
    assert Cursor(encoded, "test").utf("text") == text
    assert b"\x00" not in encoded[2:]
    nul_or_astral = sum(2 if ord(c) > 0xFFFF else 1 for c in text if ord(c) == 0 or ord(c) > 0xFFFF)
    assert len(modified_utf8(text)) == len(text.encode("utf-8")) + nul_or_astral
    if not nul_or_astral:
        assert modified_utf8(text) == text.encode("utf-8")


def test_over_long_names_are_refused() -> None:
    with pytest.raises(SerializationError, match=r"\[SERIALIZATION\].*writeUTF"):
        Output("test").utf("\u6f22" * 30000, "state name")


@pytest.mark.parametrize("operator", ["operator-states", "broadcast"])
def test_operator_state_streams_equal_flinks(operator: str) -> None:
    """Each subtask's operator state stream of a real Flink savepoint, written again from the
    values our reader finds in it, is Flink's file byte for byte, with Flink's offsets."""
    sp = read_savepoint(str(FIXTURES / "heap_canonical_files"))
    op = sp.operator(operator)
    infos = {i.name: i for i in sp.operator_infos(operator)}
    for sub in op.subtasks:
        handle = sub.managed_operator
        assert handle is not None and handle.stream is not None
        states = []
        for entry in handle.states:
            info = infos[entry.name]
            mode = OperatorStateMode[info.kind]
            user_key = info.user_key.type_info if info.user_key is not None else None
            values = sp.operator_values(operator, entry.name, sub.index)
            states.append(OperatorStateData(entry.name, mode, info.value.type_info, values, user_key))
        data, entries = operator_stream("test", states, FlinkTarget())
        assert data == handle.stream.read(sp.directory)
        assert {(e.name, e.mode, e.offsets) for e in entries} == {
            (e.name, e.mode, e.offsets) for e in handle.states
        }


@pytest.mark.parametrize("ttl", [False, True])
def test_a_value_that_does_not_fit_names_the_state_and_key(ttl: bool) -> None:
    encoder = EntryEncoder(KeyedStateSpec("counts", "VALUE", Types.INT(), ttl=ttl), Types.LONG(), 128)
    columns = StateColumns([1, 2], None, [5, 2**40], [0, 0] if ttl else None)
    with pytest.raises(SerializationError, match=r"\[SERIALIZATION\] state counts, key 2 \(key group 7\)"):
        encoder.encode(7, columns)


def test_written_to_any_fsspec_storage(model_checkpoint: CompletedCheckpoint) -> None:
    target = f"memory://flinkstate-tests/{uuid.uuid4().hex}/sp"
    sp = write_savepoint(model_checkpoint, target, inline_threshold=0)
    assert read_rows(read_savepoint(target)) == read_rows(sp) == set(rows())
