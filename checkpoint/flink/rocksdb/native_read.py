"""RocksDB native savepoints and checkpoints: their SST files read by our own SST reader.

``_metadata`` maps each local RocksDB file name (``*.sst``, ``MANIFEST-*``, ``CURRENT``,
``OPTIONS-*``) to its stored handle, plus a "meta" stream holding the keyed header. Each
state is a column family named after it, whose keys and values use the canonical savepoint
layout; the MANIFEST that ``CURRENT`` names says which SST files are live in it. A user
key's value is resolved across those files the way RocksDB reads it: the newest put or
deletion (by sequence number; range tombstones delete older entries) under the merge
operands written after it. Flink's merge operator (RocksDB's ``StringAppendTESTOperator``)
joins the base value and the operands, oldest first, with a ``,`` byte: that is how
ListState appends its elements.
"""

from __future__ import annotations

import heapq
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from functools import partial
from typing import Any

from ..errors import FlinkFormatError, UnsupportedFlinkFeatureError
from ..metadata.metadata_read import KeyedHandle
from ..streams.keyed_columns_read import entry_columns
from ..streams.keyed_read import KeyGroupDecoder
from .manifest_read import Manifest, parse_manifest
from .sst_read import (
    DELETION,
    MERGE,
    SINGLE_DELETION,
    VALUE,
    Ranges,
    SstTable,
    open_table,
    overlaps,
    range_deletions,
    scan,
)

#: The merge operator names Flink configures (RocksDB's string append with a ``,`` delimiter).
_APPEND_OPERATORS = {b"StringAppendTESTOperator", b"stringappendtest"}

Entry = tuple[bytes, int, int, bytes]


def read_native(
    directory: str,
    storage: Mapping[str, Any],
    handle: KeyedHandle,
    decoder: KeyGroupDecoder,
    wanted: set[int] | None,
) -> None:
    """Decode the wanted key groups of ``decoder``'s states from one subtask's SST files."""
    files: dict[str, Callable[[], bytes]] = {}
    for name, stream in handle.files:
        if os.path.basename(name) != name or not name:
            raise FlinkFormatError(f"{directory}: bad RocksDB file name {name!r} in _metadata")
        files[name] = partial(stream.read, directory, storage)
    names = {name: stream.name for name, stream in handle.files}
    manifest = load_manifest(files, f"{decoder.where}, RocksDB files")
    ranges = None if wanted is None else key_group_ranges(wanted & set(handle.key_groups), decoder.prefix)
    for rows in decoder.rows.values():
        where = f"{decoder.where}, SST file"
        entries = column_family(files, manifest, rows.info.name, where, names, ranges)
        for kg, keys, values in _by_key_group(entries, decoder.prefix):
            if kg not in handle.key_groups or (wanted is not None and kg not in wanted):
                continue
            found = None
            if rows is decoder.columnar:
                value = str(rows.info.value.type_info)
                found = entry_columns(keys, values, kg, decoder.prefix, decoder.key_name, value)
            if found is not None:
                rows.chunks.append((kg, found[0], found[1]))
                continue
            for key_raw, value_raw in zip(keys, values, strict=True):
                decoder.entry(rows, kg, key_raw, value_raw, "in the SST files")


def _by_key_group(
    entries: Iterable[tuple[bytes, bytes]], prefix: int
) -> Iterator[tuple[int, list[bytes], list[bytes]]]:
    """Key-ordered entries gathered per key group (keys start with the group, big-endian)."""
    keys: list[bytes] = []
    values: list[bytes] = []
    current = b""
    for key, value in entries:
        group = key[:prefix]
        if group != current or not keys:
            if keys:
                yield int.from_bytes(current, "big"), keys, values
            keys, values, current = [], [], group
        keys.append(key)
        values.append(value)
    if keys:
        yield int.from_bytes(current, "big"), keys, values


def key_group_ranges(groups: Iterable[int], prefix: int) -> Ranges:
    """The user-key ranges of the key groups ``groups`` (keys start with a ``prefix``-byte group)."""
    out: list[tuple[bytes, bytes | None]] = []
    for g in sorted(groups):
        low = g.to_bytes(prefix, "big")
        high = (g + 1).to_bytes(prefix, "big") if g + 1 < 1 << (8 * prefix) else None
        if out and out[-1][1] == low:
            out[-1] = (out[-1][0], high)
        else:
            out.append((low, high))
    return out


def load_manifest(files: Mapping[str, Callable[[], bytes]], where: str) -> Manifest:
    """The MANIFEST that ``CURRENT`` names."""
    if "CURRENT" not in files:
        raise FlinkFormatError(f"{where}: no CURRENT file among {sorted(files)}")
    name = files["CURRENT"]().decode("utf-8", "replace").strip()
    if name not in files or os.path.basename(name) != name:
        raise FlinkFormatError(f"{where}: CURRENT names {name!r}, which is not among the files")
    return parse_manifest(files[name](), f"{where}, {name}")


def column_family(
    files: Mapping[str, Callable[[], bytes]],
    manifest: Manifest,
    family: str,
    where: str,
    stored: Mapping[str, str] | None = None,
    ranges: Ranges = None,
) -> Iterator[tuple[bytes, bytes]]:
    """The live (user key, value) pairs of column family ``family`` in key order (``stored``:
    the file names the local names are stored under, for messages). With ``ranges`` only the
    files and blocks that can hold keys in them are read (other keys may come too)."""
    tables = []
    for live in manifest.live(family):
        if not overlaps(live.smallest_key, live.largest_key, ranges):
            continue
        if live.name not in files:
            raise FlinkFormatError(f"{where}: the MANIFEST lists {live.name} of {family}, which is missing")
        label = f"{where} {live.name}" + (f" ({stored[live.name]})" if stored else "")
        table = open_table(files[live.name](), label, live.largest_seqno)
        if table.column_family not in ("", family):
            raise FlinkFormatError(f"{label}: holds column family {table.column_family}, not {family}")
        tables.append(table)
    return resolve(tables, ranges)


def _merged(tables: list[SstTable], ranges: Ranges) -> Iterator[Entry]:
    """Every entry of ``tables`` in internal-key order (user key, then newest first)."""
    if len(tables) == 1:
        return scan(tables[0], ranges)
    return heapq.merge(*(scan(t, ranges) for t in tables), key=lambda e: (e[0], -e[1]))


def _covered(tombstones: list[tuple[bytes, bytes, int]], key: bytes, seq: int) -> bool:
    return any(start <= key < end and seq < tseq for start, end, tseq in tombstones)


def _append(base: bytes | None, operands: list[bytes]) -> bytes:
    parts = ([] if base is None else [base]) + operands[::-1]
    return b",".join(parts)


def resolve(tables: Iterable[SstTable], ranges: Ranges = None) -> Iterator[tuple[bytes, bytes]]:
    """The live (user key, value) pairs of one column family's SST files (newest first: ties
    of sequence numbers go to the earlier file), in key order."""
    tables = list(tables)
    if not tables:
        return iter(())
    merging = [t for t in tables if t.number("rocksdb.merge.operands")]
    operators = {t.properties.get("rocksdb.merge.operator", b"") for t in merging}
    if not operators <= _APPEND_OPERATORS:
        raise UnsupportedFlinkFeatureError(
            f"{merging[0].where}: column family {merging[0].column_family} holds merge operands of "
            f"merge operator {sorted(o.decode() for o in operators)}, which cannot be applied"
        )
    tombstones = [r for t in tables for r in range_deletions(t)]
    if merging or tombstones:
        return resolve_entries(_merged(tables, ranges), tombstones)
    return _newest(_merged(tables, ranges), tables[0].where)


def _newest(entries: Iterable[Entry], where: str) -> Iterator[tuple[bytes, bytes]]:
    """Without merge operands and range tombstones each key's newest entry decides."""
    previous = None
    for key, _, kind, value in entries:
        if key != previous:
            previous = key
            if kind == VALUE:
                yield key, value
            elif kind == MERGE:
                raise FlinkFormatError(f"{where}: a merge operand in SST files whose properties count none")


def resolve_entries(
    entries: Iterable[Entry], tombstones: list[tuple[bytes, bytes, int]]
) -> Iterator[tuple[bytes, bytes]]:
    """Resolve entries in internal-key order (user key ascending, sequence descending)."""
    current: bytes | None = None
    done = False
    operands: list[bytes] = []
    for key, seq, kind, value in entries:
        if key != current:
            if operands:
                yield current, _append(None, operands)  # type: ignore[misc]
                operands = []
            current, done = key, False
        if done:
            continue
        if tombstones and _covered(tombstones, key, seq):
            kind = DELETION
        if kind == MERGE:
            operands.append(value)
            continue
        done = True
        if kind == VALUE:
            yield key, _append(value, operands) if operands else value
        elif operands:
            assert kind in (DELETION, SINGLE_DELETION)
            yield key, _append(None, operands)
        operands = []
    if operands:
        assert current is not None
        yield current, _append(None, operands)
