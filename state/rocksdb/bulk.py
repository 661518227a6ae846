"""Bulk loading: many entries written as sorted SST files, ingested into a column family.

A restore (Parquet → RocksDB, heap → RocksDB, rescales) hands the backend one key group of
one state at a time. Put entry by entry, each would go through the memtable, be flushed to
level 0 and be compacted again; Flink's RocksDB backend writes sorted files and ingests
them instead, and so does this backend. A key group's entries are one key range (the key
group is the first bytes of every key, see :mod:`.codec`), sorted here by their bytes,
which is the order of RocksDB's default bytewise comparator; ``SstFileWriter`` writes them
with the column family's own table options (block size, bloom filter), and the file is
moved into the DB (a hard link, no copy). A file that overlaps nothing already in the
column family goes straight to the last level; one that does is placed above the entries
it overlaps, so it wins over them, as later puts would.

A load is a dict of keys to values, so a key given twice keeps its last value, which is
what puts would have left; the dict holds only bytes, so the garbage collector does not
track it, as it would a list of pairs per entry. Small loads still use write batches
(:attr:`.RocksDBOptions.bulk_load_min_entries`): a file, its ingestion and the memtable
flush it may cause cost more than a few thousand puts.

A rescale that merges copies another subtask's stored entries of a key-group range: they
come sorted from that DB's iterator, bounded in RocksDB at the range's end, and stream into
the files as they are read (:func:`stored_between`, :func:`ingest_sorted`), with no dict,
no sort and no key compared in Python.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterable, Iterator, Mapping
from itertools import islice
from typing import Any

from ..errors import StateAccessError

FILE_ENTRIES = 1 << 22
"""Entries an ingested SST file holds at most (its index and bloom filter stay in memory
until it is finished)."""


def ingest(cf: Any, cf_options: Any, sst_path: Callable[[], str], puts: Mapping[bytes, bytes]) -> None:
    """Write ``puts`` in key order to SST files and ingest them into the column family ``cf``."""
    keys = sorted(puts)
    ingest_sorted(cf, cf_options, sst_path, zip(keys, map(puts.__getitem__, keys), strict=True))


def ingest_sorted(
    cf: Any, cf_options: Any, sst_path: Callable[[], str], entries: Iterable[tuple[bytes, bytes]]
) -> None:
    """Write ``entries`` (keys strictly increasing), as they come, to SST files at
    ``sst_path()`` of at most :data:`FILE_ENTRIES` each, and ingest them into the column
    family ``cf`` together; the files are gone afterwards, whatever happens (and so is any
    reference to ``entries``: a failure's traceback keeps no RocksDB iterator open)."""
    import rocksdict

    paths: list[str] = []
    it = iter(entries)
    try:
        first = next(it, None)
        while first is not None:
            paths.append(sst_path())
            writer = rocksdict.SstFileWriter(cf_options)
            writer.open(paths[-1])
            writer[first[0]] = first[1]
            for key, value in islice(it, FILE_ENTRIES - 1):
                writer[key] = value
            writer.finish()
            first = next(it, None)
        if paths:
            opts = rocksdict.IngestExternalFileOptions()
            opts.set_move_files(True)
            cf.ingest_external_file(paths, opts)
    except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
        raise StateAccessError(f"bulk-loading {paths} failed: {exc}", code="BULK_LOAD_FAILED") from exc
    finally:
        del it, entries
        for path in paths:
            with contextlib.suppress(FileNotFoundError):
                os.remove(path)  # moved in: the DB keeps its own link


def stored_between(cf: Any, begin: bytes, end: bytes) -> Iterator[tuple[bytes, bytes]]:
    """The entries of column family ``cf`` with keys in ``[begin, end)``, in key order,
    read by one RocksDB iterator bounded at ``end`` (no key compared in Python). RocksDB
    keeps a pointer to the bound, not a copy: this generator holds the bound and ``end``
    for as long as the read goes on (freed earlier, their memory could be reused by the
    very keys read, and the read would stop early or run past ``end``)."""
    import rocksdict

    bound = rocksdict.ReadOptions()
    bound.set_iterate_upper_bound(end)
    yield from cf.items(from_key=begin, read_opt=bound)
