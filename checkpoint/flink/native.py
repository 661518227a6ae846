"""RocksDB native savepoints and checkpoints: SST files opened through rocksdict.

``_metadata`` maps each local RocksDB file name (``*.sst``, ``MANIFEST-*``, ``CURRENT``,
``OPTIONS-*``) to its stored handle, plus a "meta" stream holding the keyed header. The
files are copied under their local names into a temporary directory and opened read-only;
each state is a column family named after it whose keys and values use the canonical
savepoint layout.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Mapping
from typing import Any

from rocksdict import AccessType, Options, Rdict

from .binary import FlinkFormatError, UnsupportedFlinkFeatureError
from .body import KeyGroupDecoder
from .metadata import KeyedHandle


def read_native(
    directory: str,
    storage: Mapping[str, Any],
    handle: KeyedHandle,
    decoder: KeyGroupDecoder,
    wanted: set[int] | None,
) -> None:
    """Decode the wanted key groups of ``decoder``'s states from one subtask's RocksDB files."""
    tmp = tempfile.mkdtemp(prefix="flink-rocksdb-")
    try:
        for name, stream in handle.files:
            if os.path.basename(name) != name or not name:
                raise FlinkFormatError(f"{directory}: bad RocksDB file name {name!r} in _metadata")
            with open(os.path.join(tmp, name), "wb") as f:
                f.write(stream.read(directory, storage))
        _scan(tmp, handle, decoder, wanted)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def _scan(path: str, handle: KeyedHandle, decoder: KeyGroupDecoder, wanted: set[int] | None) -> None:
    opts = Options(raw_mode=True)
    try:
        families = Rdict.list_cf(path, opts)
        db = Rdict(path, opts, column_families={n: Options(raw_mode=True) for n in families},
                   access_type=AccessType.read_only())  # fmt: skip
    except Exception as exc:  # rocksdict raises plain Exception for every RocksDB error
        raise FlinkFormatError(f"{decoder.where}: cannot open the RocksDB files: {exc}") from exc
    try:
        mask = ~(0x80 << (8 * (decoder.prefix - 1)))
        for rows in decoder.rows.values():
            if rows.info.name not in families:
                continue
            it = db.get_column_family(rows.info.name).iter()
            it.seek_to_first()
            while it.valid():
                key_raw, value_raw = bytes(it.key()), bytes(it.value())
                kg = int.from_bytes(key_raw[: decoder.prefix], "big") & mask
                if kg in handle.key_groups and (wanted is None or kg in wanted):
                    decoder.entry(rows, kg, key_raw, value_raw, "in the RocksDB files")
                it.next()
            try:
                it.status()
            except Exception as exc:  # rocksdict raises plain Exception for every RocksDB error
                raise UnsupportedFlinkFeatureError(
                    f"{decoder.where}: the RocksDB files of state {rows.info.name} hold values that need "
                    f"Flink's merge operator (ListState appends), which rocksdict cannot apply: {exc}"
                ) from exc
            del it
    finally:
        db.close()
