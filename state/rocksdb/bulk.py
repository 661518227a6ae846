"""Bulk loading: many entries written as one sorted SST file, ingested into a column family.

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
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Mapping
from typing import Any

from ..errors import StateAccessError


def ingest(cf: Any, cf_options: Any, path: str, puts: Mapping[bytes, bytes]) -> None:
    """Write ``puts`` in key order to the SST file ``path`` and ingest it into the column
    family ``cf``; the file is gone afterwards, whatever happens."""
    import rocksdict

    try:
        writer = rocksdict.SstFileWriter(cf_options)
        writer.open(path)
        for key in sorted(puts):
            writer[key] = puts[key]
        writer.finish()
        opts = rocksdict.IngestExternalFileOptions()
        opts.set_move_files(True)
        cf.ingest_external_file([path], opts)
    except Exception as exc:  # rocksdict raises plain Exception for RocksDB errors
        raise StateAccessError(
            f"bulk-loading {len(puts)} entries from {path} failed: {exc}", code="BULK_LOAD_FAILED"
        ) from exc
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)  # moved in: the DB keeps its own link
