"""Opening data files checked against the manifest: the one way restores and readers open them.

A file read whole is checked against its size and SHA-256. A file read by ranges (a few
of its row groups) is checked against its size and the SHA-256 of its footer, recorded at
write time (manifests written before footer checksums existed are checked by size); the
pages read are checked by their CRCs. Any mismatch is ``[CHECKPOINT_CORRUPT]`` naming
the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor

import pyarrow as pa
import pyarrow.parquet as pq

from ..errors import CheckpointCorruptError, CheckpointNotFoundError
from ..manifest import FileRef
from ..parquet_files import open_parquet
from ..storage import Storage


def open_whole(directory: Storage, ref: FileRef) -> pq.ParquetFile:
    """``ref`` read in one go and checked against its SHA-256."""
    try:
        data = directory.read_bytes(ref.path)
    except CheckpointNotFoundError as exc:
        raise CheckpointCorruptError(f"data file {ref.path} is missing") from exc
    if len(data) != ref.size or hashlib.sha256(data).hexdigest() != ref.sha256:
        raise CheckpointCorruptError(
            f"data file {ref.path} does not match its checksum: truncated or altered"
        )
    return open_parquet(pa.BufferReader(data), ref.path)


def open_ranges(directory: Storage, ref: FileRef) -> pq.ParquetFile:
    """``ref`` opened for reading some row groups: size and footer checked."""
    try:
        size = directory.size(ref.path)
    except FileNotFoundError as exc:
        raise CheckpointCorruptError(f"data file {ref.path} is missing") from exc
    if size != ref.size:
        raise CheckpointCorruptError(f"data file {ref.path} has {size} bytes; the manifest says {ref.size}")
    return open_parquet(directory.open_input(ref.path), ref.path, size, ref.footer_sha256)


WHOLE_MAX = 64 << 20
"""Bytes above which a file read whole is checked streamed, then read by ranges."""


def open_verified(directory: Storage, ref: FileRef, whole: bool) -> pq.ParquetFile:
    """:func:`open_whole` when every row group will be read, else :func:`open_ranges`; a file
    above :data:`WHOLE_MAX` to be read whole is checked streamed (:func:`check_file`) first,
    then read by ranges, so a restore never holds it."""
    if not whole:
        return open_ranges(directory, ref)
    if ref.size <= WHOLE_MAX:
        return open_whole(directory, ref)
    problem = check_file(directory, ref)
    if problem == "missing":
        raise CheckpointCorruptError(f"data file {ref.path} is missing")
    if problem is not None:
        raise CheckpointCorruptError(f"data file {ref.path} does not match its checksum: {problem}")
    return open_ranges(directory, ref)


CHUNK = 1 << 20


def check_file(directory: Storage, ref: FileRef, on_read: Callable[[int], None] | None = None) -> str | None:
    """What is wrong with ``ref``'s file (missing, another size, another SHA-256), or ``None``
    when it holds. The file is streamed; ``on_read(n)`` is called as ``n`` more bytes are read."""
    try:
        size = directory.size(ref.path)
    except FileNotFoundError:
        return "missing"
    if size != ref.size:
        return f"has {size} bytes; the manifest says {ref.size}"
    digest = hashlib.sha256()
    read = 0
    try:
        with directory.open_input(ref.path) as f:
            while chunk := f.read(CHUNK):
                digest.update(chunk)
                read += len(chunk)
                if on_read is not None:
                    on_read(len(chunk))
    except CheckpointNotFoundError:
        return "missing"
    if read != ref.size:
        return f"has {read} bytes; the manifest says {ref.size}"
    if digest.hexdigest() != ref.sha256:
        return "its SHA-256 is not the manifest's: altered"
    return None


CHECK_WORKERS = 4
"""Files :func:`check_files` checks at once (reads from object stores overlap)."""


def check_files(
    items: Sequence[tuple[Storage, FileRef]], on_read: Callable[[int], None] | None = None
) -> list[str | None]:
    """:func:`check_file` of each (directory, file) in ``items``, :data:`CHECK_WORKERS` at once,
    in their order; ``on_read(n)`` as bytes are read (from any of the threads)."""
    with ThreadPoolExecutor(max_workers=CHECK_WORKERS, thread_name_prefix="verify") as pool:
        return list(pool.map(lambda item: check_file(item[0], item[1], on_read), items))
