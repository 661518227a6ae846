"""Reading chosen key groups of a keyed state: the one way a restore, the Spark reader and
the change feed read a state's files.

A plan (:data:`KeyGroupFiles`) names files, each with the (key group, row group) pairs to
read of it; :func:`key_group_files` makes one from a subtask's files of a state and the
wanted key groups. :func:`read_key_groups` opens each file checked against the manifest
(see :mod:`.verified`: a file read whole against its SHA-256, a file read in part against its
size, its footer's checksum and its pages' CRCs), decodes the row groups it needs in one call
per file, and yields every key group's tables in file order (the order they apply in, see
:mod:`.format`). A missing or damaged file is ``[CHECKPOINT_CORRUPT]`` naming it and the
checkpoint whose manifest references it.
"""

from __future__ import annotations

from collections.abc import Collection, Container, Iterable, Iterator, Mapping
from contextlib import contextmanager

import pyarrow as pa

from ..errors import CheckpointCorruptError
from ..manifest import FileRef
from ..parquet_files import read_row_groups
from ..storage import Storage
from .verified import open_verified

KeyGroupFiles = tuple[tuple[FileRef, tuple[tuple[int, int], ...]], ...]
"""Files, each with the (key group, row group) pairs to read of it, key groups ascending."""


def key_group_files(refs: Iterable[FileRef], wanted: Container[int] | None = None) -> KeyGroupFiles:
    """``refs`` with the row groups of their ``wanted`` key groups (``None``: all); a file
    holding none of them is left out (it is not opened)."""
    picked = (
        (r, tuple((kg, rg) for kg, (rg, _) in sorted(r.key_groups.items()) if wanted is None or kg in wanted))
        for r in refs
    )
    return tuple(f for f in picked if f[1])


def only_key_groups(files: KeyGroupFiles, wanted: Container[int]) -> KeyGroupFiles:
    """``files`` narrowed to the ``wanted`` key groups."""
    picked = ((r, tuple((kg, rg) for kg, rg in pairs if kg in wanted)) for r, pairs in files)
    return tuple(f for f in picked if f[1])


@contextmanager
def naming_corruption(checkpoint_id: int, directory: Storage) -> Iterator[None]:
    """A ``[CHECKPOINT_CORRUPT]`` raised inside names checkpoint ``checkpoint_id`` (in
    ``directory``) as the one whose manifest references the file."""
    try:
        yield
    except CheckpointCorruptError as exc:
        raise CheckpointCorruptError(
            f"{exc.detail} (referenced by checkpoint {checkpoint_id} in {directory!r})"
        ) from exc


def read_key_groups(
    directory: Storage,
    files: KeyGroupFiles,
    checkpoint_id: int,
    columns: Collection[str] | None = None,
    batch: int | None = None,
    threads: bool = False,
    max_rows: int | None = None,
) -> Iterator[tuple[int, list[pa.Table]]]:
    """(key group, its tables in file order) of every key group ``files`` name, ascending.

    ``checkpoint_id``: the checkpoint whose manifest lists ``files`` (named when one is
    corrupt). ``columns``: the columns wanted; honoured where one file holding no deletes is
    read (several files, or deletes, apply whole rows), the other columns then come back as
    nulls, so every table has its file's schema. ``batch``: decode at most this many key
    groups at a time (``None``: all at once), to bound the memory a long read holds;
    ``threads``: decode columns in parallel (a restore; Spark's tasks are parallel already);
    ``max_rows``: and at most this many rows at a time, by the manifest's row counts (a key
    group holding more is decoded alone), so a restore of large key groups holds one at a time.
    """
    with naming_corruption(checkpoint_id, directory):
        opened = [(open_verified(directory, ref, len(pairs) == len(ref.key_groups)), ref, pairs)
                  for ref, pairs in files]  # fmt: skip
    prune = columns is not None and len(opened) == 1 and "op" not in opened[0][0].schema_arrow.names
    rows: dict[int, int] = {}
    for ref, pairs in files:
        for kg, _ in pairs:
            rows[kg] = rows.get(kg, 0) + ref.key_groups[kg][1]
    for chunk in chunks(sorted(rows), rows, batch, max_rows):
        by_group: dict[int, list[pa.Table]] = {}
        for pf, ref, pairs in opened:
            mine = [(kg, rg) for kg, rg in pairs if kg in chunk]
            if not mine:
                continue
            schema = pf.schema_arrow
            wanted = [n for n in schema.names if columns is not None and n in columns] if prune else None
            with naming_corruption(checkpoint_id, directory):
                tables = read_row_groups(pf, [rg for _, rg in mine], ref.path, wanted, threads)
            for (kg, _), table in zip(mine, tables, strict=True):
                if wanted is not None:
                    table = _with_nulls(table, schema)
                by_group.setdefault(kg, []).append(table)
        for kg in sorted(by_group):
            yield kg, by_group[kg]


def chunks(
    groups: list[int], rows: Mapping[int, int], batch: int | None, max_rows: int | None
) -> Iterator[set[int]]:
    """``groups`` in order, cut into runs of at most ``batch`` key groups and ``max_rows``
    rows (``rows``: each key group's; a key group above ``max_rows`` alone)."""
    chunk: set[int] = set()
    held = 0
    for kg in groups:
        n = rows[kg]
        if chunk and (len(chunk) == batch or (max_rows is not None and held + n > max_rows)):
            yield chunk
            chunk, held = set(), 0
        chunk.add(kg)
        held += n
    if chunk:
        yield chunk


def _with_nulls(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table`` with ``schema``'s columns it lacks as nulls (never shown: not asked for)."""
    for field in schema:
        if field.name not in table.column_names:
            table = table.append_column(field, pa.nulls(table.num_rows, field.type))
    return table.select(schema.names)
