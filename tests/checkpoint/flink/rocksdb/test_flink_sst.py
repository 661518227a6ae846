"""Our SST reader against RocksDB itself (files written by rocksdict), merge resolution
against a model, and typed errors for cut or altered SST files."""

from __future__ import annotations

import random
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest
from flink_model import FIXTURES, KEYS, LISTS
from hypothesis import given, settings
from hypothesis import strategies as st
from rocksdict import (
    BlockBasedIndexType,
    BlockBasedOptions,
    ChecksumType,
    DataBlockIndexType,
    DBCompressionType,
    Options,
    Rdict,
    SliceTransform,
    SstFileWriter,
)

from flinkstate.checkpoint.errors import CheckpointCorruptError
from flinkstate.checkpoint.flink import read_savepoint
from flinkstate.checkpoint.flink.errors import FlinkFormatError, UnsupportedFlinkFeatureError
from flinkstate.checkpoint.flink.rocksdb.checksums import block_checksum
from flinkstate.checkpoint.flink.rocksdb.manifest_read import parse_manifest
from flinkstate.checkpoint.flink.rocksdb.native_read import (
    column_family,
    key_group_ranges,
    load_manifest,
    resolve,
    resolve_entries,
)
from flinkstate.checkpoint.flink.rocksdb.sst_read import (
    DELETION,
    MERGE,
    VALUE,
    Handle,
    SstTable,
    data_blocks,
    open_table,
    scan,
)

CONFIGS = [
    ("snappy", "xxh3", 5, "binary_search", "binary_search", False),
    ("lz4", "crc32c", 2, "two_level_index_search", "binary_search", False),
    ("zstd", "xxhash64", 4, "binary_search", "binary_and_hash", True),
    ("zlib", "xxhash", 3, "hash_search", "binary_search", False),
    ("bz2", "no_checksum", 5, "binary_search", "binary_search", True),
    ("lz4hc", "xxh3", 6, "two_level_index_search", "binary_and_hash", False),
    ("none", "xxh3", 6, "binary_search", "binary_search", True),
]


def _write_db(
    path: Path, config: tuple[str, str, int, str, str, bool], seed: int
) -> list[tuple[bytes, bytes]]:
    """A RocksDB written in several flushes (puts, overwrites, deletes, range deletes); its items."""
    compression, checksum, version, index, data_index, compact = config
    table = BlockBasedOptions()
    table.set_block_size(256)
    table.set_metadata_block_size(128)
    table.set_checksum_type(getattr(ChecksumType, checksum)())
    table.set_format_version(version)
    table.set_index_type(getattr(BlockBasedIndexType, index)())
    table.set_data_block_index_type(getattr(DataBlockIndexType, data_index)())
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_disable_auto_compactions(True)
    opts.set_compression_type(getattr(DBCompressionType, compression)())
    opts.set_block_based_table_factory(table)
    if index == "hash_search":
        opts.set_prefix_extractor(SliceTransform.create_fixed_prefix(2))
    rnd = random.Random(seed)
    db = Rdict(str(path), opts)
    try:
        other = db.create_column_family("other", opts)
        ingest = path.parent / "ingest.sst"
        writer = SstFileWriter(opts)
        writer.open(str(ingest))
        for k in range(0, 400, 7):
            writer[b"k%05d" % k] = b"ingested"
        writer.finish()
        for step in range(4):
            for _ in range(150):
                key = b"k%05d" % rnd.randrange(400)
                target = db if rnd.random() < 0.8 else other
                if rnd.random() < 0.2:
                    target.delete(key)
                else:
                    target.put(key, f"v\u00e9{rnd.randrange(10**6)}-".encode() * rnd.randrange(0, 12))
            if rnd.random() < 0.7:
                low = rnd.randrange(400)
                db.delete_range(b"k%05d" % low, b"k%05d" % (low + rnd.randrange(1, 30)))
            db.flush()
            other.flush()
            if step == 1:
                db.ingest_external_file([str(ingest)])
        if compact:
            db.compact_range(None, None)
        del other
        return [(bytes(k), bytes(v)) for k, v in db.items()]
    finally:
        db.close()


def _other(path: Path) -> list[tuple[bytes, bytes]]:
    db = Rdict(str(path), Options(raw_mode=True), column_families={"other": Options(raw_mode=True)})
    try:
        return [(bytes(k), bytes(v)) for k, v in db.get_column_family("other").items()]
    finally:
        db.close()


def _files(path: Path) -> dict[str, Callable[[], bytes]]:
    return {p.name: p.read_bytes for p in path.iterdir()}


@pytest.mark.parametrize("config", CONFIGS, ids=lambda c: "-".join(str(x) for x in c))
def test_sst_files_read_like_rocksdb(tmp_path: Path, config: tuple[str, str, int, str, str, bool]) -> None:
    db = tmp_path / "db"
    expected = _write_db(db, config, seed=len(config[0]) * 31 + config[2])
    manifest = load_manifest(_files(db), str(db))
    assert len(manifest.live("default")) >= (1 if config[5] else 4)
    assert list(column_family(_files(db), manifest, "default", str(db))) == expected
    assert list(column_family(_files(db), manifest, "other", str(db))) == _other(db)
    assert len(expected) > 100 and any(v == b"ingested" for _, v in expected)


Op = tuple[str, int, bytes]


@st.composite
def histories(
    draw: st.DrawFn,
) -> tuple[list[list[tuple[bytes, int, int, bytes]]], list[tuple[bytes, bytes, int]]]:
    """Writes of random kinds to a few keys with rising sequence numbers, spread over files."""
    n_files = draw(st.integers(1, 4))
    files: list[list[tuple[bytes, int, int, bytes]]] = [[] for _ in range(n_files)]
    tombstones = []
    seq = 0
    for _ in range(draw(st.integers(0, 40))):
        seq += 1
        key = draw(st.sampled_from([b"a", b"b", b"bb", b"c"]))
        kind = draw(st.sampled_from([VALUE, MERGE, MERGE, DELETION, -1]))
        if kind == -1:
            start, end = sorted(
                draw(st.lists(st.sampled_from([b"a", b"b", b"bc", b"d"]), min_size=2, max_size=2))
            )
            tombstones.append((start, end, seq))
            continue
        value = draw(st.binary(max_size=3))
        files[draw(st.integers(0, n_files - 1))].append((key, seq, kind, value))
    return [sorted(f, key=lambda e: (e[0], -e[1])) for f in files], tombstones


def _model(
    files: list[list[tuple[bytes, int, int, bytes]]], tombstones: list[tuple[bytes, bytes, int]]
) -> list[tuple[bytes, bytes]]:
    events = sorted([(e[1], "w", e) for f in files for e in f] + [(t[2], "r", t) for t in tombstones])
    state: dict[bytes, bytes | None] = {}
    for _, what, e in events:
        if what == "r":
            for k in state:
                if e[0] <= k < e[1]:
                    state[k] = None
            continue
        key, _, kind, value = e  # type: ignore[misc]
        if kind == VALUE:
            state[key] = value
        elif kind == DELETION:
            state[key] = None
        else:
            old = state.get(key)
            state[key] = value if old is None else old + b"," + value
    return sorted((k, v) for k, v in state.items() if v is not None)


@settings(max_examples=300, deadline=None)
@given(histories())
def test_merge_resolution_matches_a_model(
    history: tuple[list[list[tuple[bytes, int, int, bytes]]], list[tuple[bytes, bytes, int]]],
) -> None:
    files, tombstones = history
    merged = sorted((e for f in files for e in f), key=lambda e: (e[0], -e[1]))
    assert list(resolve_entries(merged, tombstones)) == _model(files, tombstones)


def _list_sst(directory: Path) -> tuple[Path, str]:
    """The stored file of subtask 0's l_long SST in a copied native savepoint, and its local name."""
    op = read_savepoint(str(directory)).operator("keyed-states")
    handle = op.subtasks[0].managed_keyed
    assert handle is not None
    for name, stream in handle.files:
        path = directory / stream.name
        if name.endswith(".sst") and open_table(path.read_bytes(), name).column_family == "l_long":
            return path, name
    raise AssertionError("no l_long SST file")


def test_list_state_is_merge_operands_in_native_snapshots() -> None:
    path, name = _list_sst(FIXTURES / "rocksdb_native")
    table = open_table(path.read_bytes(), name)
    assert {kind for _, _, kind, _ in scan(table)} == {MERGE}
    table_rows = read_savepoint(str(FIXTURES / "rocksdb_native")).keyed_state("keyed-states", "l_long")
    got: dict[int, list[int]] = {}
    for row in sorted(table_rows.to_pylist(), key=lambda r: (r["key"], r["position"])):
        got.setdefault(row["key"], []).append(row["value"])
    assert got == {k: LISTS["l_long"](k) for k in KEYS}


@pytest.mark.parametrize("cut", [0, 10, 52, 200, 600, -60, -53, -1])
def test_cut_sst_file_names_file_and_offset(cut: int) -> None:
    path, name = _list_sst(FIXTURES / "rocksdb_native")
    data = path.read_bytes()
    with pytest.raises(FlinkFormatError, match=rf"\[FLINK_FORMAT\] {name}: .*byte offset \d+"):
        list(resolve([open_table(data[: cut if cut >= 0 else len(data) + cut], name)]))


@pytest.mark.parametrize("kind", ["rocksdb_native", "rocksdb_checkpoint"])
def test_altered_sst_in_a_snapshot_names_state_file_and_offset(tmp_path: Path, kind: str) -> None:
    shutil.copytree(FIXTURES / kind, tmp_path / kind)
    path, name = _list_sst(tmp_path / kind)
    data = bytearray(path.read_bytes())
    block = data_blocks(open_table(bytes(data), name))[0]
    data[block.offset + 3] ^= 1
    path.write_bytes(bytes(data))
    pattern = (
        rf"\[FLINK_FORMAT\].*state l_long.*{name}.*data block checksum mismatch at byte offset {block.offset}"
    )
    with pytest.raises(CheckpointCorruptError, match=pattern):
        read_savepoint(str(tmp_path / kind)).keyed_state("keyed-states", "l_long")


def test_every_altered_byte_is_caught(tmp_path: Path) -> None:
    shutil.copytree(FIXTURES / "rocksdb_native", tmp_path / "sp")
    path, name = _list_sst(tmp_path / "sp")
    data = path.read_bytes()
    table = open_table(data, name)
    rows = list(resolve([table]))
    for at in range(len(data)):
        altered = bytearray(data)
        altered[at] ^= 0x41
        try:
            t = open_table(bytes(altered), name)
            got = list(resolve([t]))
        except FlinkFormatError as exc:
            assert name in str(exc) and "byte offset" in str(exc)
            continue
        # Only bytes no reader checks may change (footer padding, unused handle bytes).
        assert got == rows, at


def test_unknown_compression_type_is_unsupported() -> None:
    path, name = _list_sst(FIXTURES / "rocksdb_native")
    data = bytearray(path.read_bytes())
    table = open_table(bytes(data), name)
    block = data_blocks(table)[0]
    end = block.offset + block.size
    data[end] = 6  # xpress
    stored = block_checksum(table.checksum, bytes(data[block.offset : end]), 6)
    assert stored is not None
    data[end + 1 : end + 5] = stored.to_bytes(4, "little")
    with pytest.raises(
        UnsupportedFlinkFeatureError,
        match=rf"\[FLINK_UNSUPPORTED\].*{name}.*compression type 6.*byte offset {block.offset}",
    ):
        list(scan(open_table(bytes(data), name)))


def test_ingested_sst_file_is_refused(tmp_path: Path) -> None:
    writer = SstFileWriter(Options(raw_mode=True))
    writer.open(str(tmp_path / "x.sst"))
    writer[b"a"] = b"1"
    writer.finish()
    with pytest.raises(
        UnsupportedFlinkFeatureError,
        match=r"\[FLINK_UNSUPPORTED\] x.sst: an ingested SST file whose sequence number only the MANIFEST",
    ):
        open_table((tmp_path / "x.sst").read_bytes(), "x.sst")


@pytest.mark.parametrize("cut", [5, 100, 1000, -3])
def test_cut_manifest_names_file_and_offset(tmp_path: Path, cut: int) -> None:
    shutil.copytree(FIXTURES / "rocksdb_native", tmp_path / "sp")
    handle = read_savepoint(str(tmp_path / "sp")).operator("keyed-states").subtasks[0].managed_keyed
    assert handle is not None
    files = {name: (tmp_path / "sp" / stream.name).read_bytes for name, stream in handle.files}
    data = files["MANIFEST-000005"]()
    files["MANIFEST-000005"] = lambda: data[: cut if cut > 0 else len(data) + cut]
    with pytest.raises(FlinkFormatError, match=r"\[FLINK_FORMAT\] here, MANIFEST-000005: .*byte offset \d+"):
        load_manifest(files, "here")


def test_sst_listed_in_manifest_but_missing_is_named(tmp_path: Path) -> None:
    handle = (
        read_savepoint(str(FIXTURES / "rocksdb_native")).operator("keyed-states").subtasks[0].managed_keyed
    )
    assert handle is not None
    files = {name: (FIXTURES / "rocksdb_native" / stream.name).read_bytes for name, stream in handle.files}
    manifest = load_manifest(files, "here")
    (gone,) = [f.name for f in manifest.live("l_long")]
    del files[gone]
    with pytest.raises(FlinkFormatError, match=rf"the MANIFEST lists {gone} of l_long, which is missing"):
        list(column_family(files, manifest, "l_long", "here"))


def test_altered_manifest_bytes_are_caught() -> None:
    handle = (
        read_savepoint(str(FIXTURES / "rocksdb_native")).operator("keyed-states").subtasks[0].managed_keyed
    )
    assert handle is not None
    files = {name: (FIXTURES / "rocksdb_native" / stream.name).read_bytes for name, stream in handle.files}
    data = files["MANIFEST-000005"]()
    for at in range(0, len(data), 7):
        altered = bytearray(data)
        altered[at] ^= 0x41
        with pytest.raises(FlinkFormatError, match=r"MANIFEST-000005: .*byte offset \d+"):
            parse_manifest(bytes(altered), "MANIFEST-000005")


@pytest.mark.parametrize("prefix", [1, 2])
def test_key_group_pushdown_reads_fewer_blocks_same_rows(
    tmp_path: Path, prefix: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    table = BlockBasedOptions()
    table.set_block_size(256)
    opts = Options(raw_mode=True)
    opts.create_if_missing(True)
    opts.set_disable_auto_compactions(True)
    opts.set_block_based_table_factory(table)
    db = Rdict(str(tmp_path / "db"), opts)
    groups = 1 << (7 if prefix == 1 else 9)
    for flush in range(3):
        for k in range(flush, 3000, 3):
            key = (k % groups).to_bytes(prefix, "big") + k.to_bytes(8, "big") + b"\0"
            db.put(key, f"v{k}-{flush}".encode())
        db.flush()
    db.close()
    files = _files(tmp_path / "db")
    manifest = load_manifest(files, "db")
    reads: list[str] = []
    original = SstTable.block

    def spy(self: SstTable, h: Handle, what: str) -> bytes:
        reads.append(what)
        return original(self, h, what)

    monkeypatch.setattr(SstTable, "block", spy)
    full = list(column_family(files, manifest, "default", "db"))
    full_blocks = reads.count("data")
    reads.clear()
    wanted = {5, 6, groups - 1}
    part = list(column_family(files, manifest, "default", "db", None, key_group_ranges(wanted, prefix)))
    kg = lambda key: int.from_bytes(key[:prefix], "big")  # noqa: E731
    assert [e for e in part if kg(e[0]) in wanted] == [e for e in full if kg(e[0]) in wanted]
    assert len({kg(e[0]) for e in full}) == groups and len(full) == 3000
    assert {kg(e[0]) for e in part} >= wanted
    assert reads.count("data") * 5 < full_blocks, (reads.count("data"), full_blocks)


def test_merge_operands_the_properties_do_not_count_are_not_dropped(monkeypatch: pytest.MonkeyPatch) -> None:
    path, name = _list_sst(FIXTURES / "rocksdb_native")
    table = open_table(path.read_bytes(), name)
    original = SstTable.number
    monkeypatch.setattr(
        SstTable, "number", lambda self, prop: 0 if prop == "rocksdb.merge.operands" else original(self, prop)
    )
    with pytest.raises(
        FlinkFormatError, match=rf"{name}: a merge operand in SST files whose properties count none"
    ):
        list(resolve([table]))
