"""Parquet data files: writing row groups streamed to a sink, reading footers and row groups.

A file is written row group by row group into a :class:`FileSink`, which computes its size
and SHA-256 on the way and keeps only its last bytes (the footer): a small file is held in
memory (what the Spark writers hand back, one write to the storage), a larger one streams to
the storage, so writing a file holds one row group, not the file.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable, Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from flinkstate.state.memory import trim_heap

from .errors import CheckpointCorruptError
from .storage import Storage

COMPRESSION = "snappy"
PARQUET_MAGIC = b"PAR1"
SPILL = 8 << 20
"""Bytes a file destined for the storage is held in memory before it streams there."""
TAIL = 1 << 20
"""Bytes a streamed file keeps of its end: its footer, unless larger (then read back)."""
RELEASE_ROWS = 65_536
"""Rows of a row group after whose write freed memory goes back to the OS (see :func:`_write`)."""
WRITE_BUFFER = 1 << 20
"""Bytes the Parquet writer's output is gathered into before the sink (Python) sees them:
each call into the sink needs the GIL, which the thread building the next row group holds,
so many small writes (page headers) would wait on it one by one."""


def writer_options(schema: pa.Schema) -> dict[str, Any]:
    """How data files are written: snappy pages with CRCs; dictionary encoding only for
    ``key_group`` (constant in a row group: nearly free), since trying it on unique keys
    costs several times the write and gains little. Min/max statistics only for
    ``key_group`` too: keys are hash-partitioned, so their ranges prune nothing, and the
    statistics of every column of every row group would make the footer (read by every
    partial restore) a large part of the file, or several times the data for raw blobs."""
    grouped = "key_group" in schema.names
    dictionary = ["key_group"] if grouped else False
    statistics = ["key_group"] if grouped else False
    return {
        "compression": COMPRESSION,
        "use_dictionary": dictionary,
        "write_statistics": statistics,
        "write_page_checksum": True,
    }


@dataclass(frozen=True)
class WrittenFile:
    """A finished data file: what the manifest records about it, and its bytes when it was
    written to memory (``None`` when it streamed to the storage)."""

    data: Any
    rows: int
    key_groups: dict[int, tuple[int, int]]
    size: int
    sha256: str
    footer_sha256: str


class FileSink:
    """A write-only file the Parquet writer writes to: into memory, or with ``directory``
    and ``name`` into memory up to :data:`SPILL` bytes, then streamed to ``directory/name``
    (see :meth:`finish`). Size and SHA-256 are computed as bytes pass."""

    closed = False

    def __init__(self, directory: Storage | None = None, name: str = "") -> None:
        self.directory = directory
        self.name = name
        self._digest = hashlib.sha256()
        self._held: list[bytes] = []
        self._tail = bytearray()
        self._out: Any = None
        self.size = 0
        self.kept = False
        """The file is in the storage (after :meth:`finish`)."""

    def write(self, data: Any) -> int:
        chunk = bytes(data)
        self._digest.update(chunk)
        self.size += len(chunk)
        if self._out is not None:
            self._out.write(chunk)
            self._tail += chunk
            if len(self._tail) > 2 * TAIL:
                del self._tail[:-TAIL]
            return len(chunk)
        self._held.append(chunk)
        if self.directory is not None and self.size > SPILL:
            self._out = self.directory.open_output(self.name)
            held, self._held = b"".join(self._held), []
            self._out.write(held)
            self._tail = bytearray(held[-TAIL:])
        return len(chunk)

    def flush(self) -> None:
        """Nothing to do: bytes are written as they come (the Parquet writer calls it)."""

    def finish(self, keep: bool = True) -> tuple[Any, str, str]:
        """The file complete: (its bytes when held in memory without a ``directory``, else
        ``None``; its SHA-256; the SHA-256 of its footer and trailer). With a ``directory``, a
        file held in memory is written there now, and with ``keep=False`` none is left."""
        data = b"".join(self._held) if self._out is None else None
        tail = memoryview(data if data is not None else self._tail)
        length = int.from_bytes(tail[-8:-4], "little")
        footer = (
            None if length + 8 > len(tail) else hashlib.sha256(tail[len(tail) - 8 - length :]).hexdigest()
        )
        if self._out is not None:
            self._out.close()
            if footer is None:
                with self.directory.open_input(self.name) as f:  # type: ignore[union-attr]
                    footer = read_footer(f, self.size)[1]
            if not keep:
                self.directory.delete(self.name)  # type: ignore[union-attr]
            self.kept = keep
        elif self.directory is not None:
            if keep:
                self.directory.write_bytes(self.name, data)  # type: ignore[arg-type]
            self.kept, data = keep, None
        assert footer is not None
        return data, self._digest.hexdigest(), footer

    def abandon(self) -> None:
        """The write failed: close (and with it keep) whatever was streamed, to be deleted."""
        if self._out is not None:
            self._out.close()
            self._out = None
            self.directory.delete(self.name)  # type: ignore[union-attr]


def write_row_groups(
    schema: pa.Schema,
    tables: Iterable[tuple[int, pa.Table]],
    pipelined: bool = True,
    sink: FileSink | None = None,
    keep_empty: bool = True,
) -> WrittenFile:
    """Write row groups (``tables``: (key group, table) pairs) into ``sink`` (default: memory),
    in a second thread while the next table is built; ``keep_empty=False``: a file without
    rows is not left in the sink's storage.

    Building a table from Python values holds the GIL; encoding and compressing a row
    group does not, so the two overlap. Small row groups (increments) are written inline
    (``pipelined=False``): handing each to a thread costs more than it saves.
    """
    sink = FileSink() if sink is None else sink
    index: dict[int, tuple[int, int]] = {}
    rows = 0
    try:
        out = pa.BufferedOutputStream(pa.PythonFile(sink, mode="w"), WRITE_BUFFER)
        with (
            pq.ParquetWriter(out, schema, **writer_options(schema)) as writer,
            ThreadPoolExecutor(max_workers=1, thread_name_prefix="parquet-writer") as pool,
        ):
            pending: Future[None] | None = None
            for kg, table in tables:
                if not table.num_rows:
                    continue
                index[kg] = (len(index), table.num_rows)
                rows += table.num_rows
                if not pipelined:
                    _write(writer, table)
                    continue
                if pending is not None:
                    pending.result()
                pending = pool.submit(_write, writer, table)
            if pending is not None:
                pending.result()
        out.detach()  # the buffered bytes into the sink, which stays open
    except BaseException:
        sink.abandon()
        raise
    data, sha256, footer = sink.finish(keep_empty or rows > 0)
    return WrittenFile(data, rows, index, sink.size, sha256, footer)


def _write(writer: pq.ParquetWriter, table: pa.Table) -> None:
    """``table`` as one row group; after a large one, the memory freed by building and
    encoding it is given back (Arrow's pool and the C heap keep it otherwise, and a large
    checkpoint's resident memory would grow with its key groups' size several times over)."""
    writer.write_table(table, row_group_size=table.num_rows)
    if table.num_rows >= RELEASE_ROWS:
        pa.default_memory_pool().release_unused()
        trim_heap()


def read_footer(source: Any, size: int) -> tuple[pq.FileMetaData, str]:
    """The footer of a Parquet file of ``size`` bytes, read exactly (its length, then it),
    and the SHA-256 of the footer with its trailer.

    Arrow would read a speculative 64 KiB tail instead, which for a small file is all of
    it and for a larger one several times its footer: a restore that wants a few row
    groups would read far more than them.
    """
    if size < 12:
        raise ValueError(f"{size} bytes is too short for a Parquet file")
    source.seek(size - 8)
    trailer = source.read(8)
    length = int.from_bytes(trailer[:4], "little")
    if len(trailer) != 8 or trailer[4:] != PARQUET_MAGIC or length + 12 > size:
        raise ValueError("no Parquet footer at the end of the file")
    source.seek(size - 8 - length)
    footer = source.read(length)
    if len(footer) != length:
        raise ValueError("the Parquet footer is truncated")
    digest = hashlib.sha256(footer + trailer).hexdigest()
    return pq.read_metadata(pa.BufferReader(PARQUET_MAGIC + footer + trailer)), digest


def open_parquet(
    source: Any, name: str, size: int | None = None, footer_sha256: str | None = None
) -> pq.ParquetFile:
    """A Parquet file over ``source``. With ``size`` (a file read by ranges) the footer is
    read exactly (see :func:`read_footer`) and checked against ``footer_sha256`` if given."""
    try:
        metadata, digest = (None, None) if size is None else read_footer(source, size)
        opened = pq.ParquetFile(source, metadata=metadata, page_checksum_verification=True, pre_buffer=True)
    except (pa.ArrowException, OSError, ValueError) as exc:
        raise CheckpointCorruptError(f"data file {name} is not a readable Parquet file: {exc}") from exc
    if footer_sha256 is not None and digest != footer_sha256:
        raise CheckpointCorruptError(f"data file {name}: its footer does not match the manifest's checksum")
    return opened


def read_row_group(pf: pq.ParquetFile, index: int, name: str, columns: list[str] | None = None) -> pa.Table:
    try:
        return pf.read_row_group(index, columns=columns)
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise CheckpointCorruptError(f"data file {name}: row group {index} is unreadable: {exc}") from exc


def read_row_groups(
    pf: pq.ParquetFile,
    indexes: list[int],
    name: str,
    columns: list[str] | None = None,
    use_threads: bool = False,
) -> list[pa.Table]:
    """Row groups ``indexes`` decoded in one call (cheaper than one by one), as one table each
    (``use_threads``: columns decoded in parallel, for a caller not already parallel)."""
    try:
        table = pf.read_row_groups(indexes, columns=columns, use_threads=use_threads)
        sizes = [pf.metadata.row_group(i).num_rows for i in indexes]
    except (pa.ArrowException, OSError, ValueError, IndexError) as exc:
        raise CheckpointCorruptError(f"data file {name}: row groups {indexes} are unreadable: {exc}") from exc
    if sum(sizes) != table.num_rows:
        raise CheckpointCorruptError(f"data file {name}: row groups {indexes} hold {table.num_rows} rows, "
                                     f"its footer says {sum(sizes)}")  # fmt: skip
    out, start = [], 0
    for size in sizes:
        out.append(table.slice(start, size))
        start += size
    return out


def iter_row_groups(pf: pq.ParquetFile, name: str, indexes: Iterable[int]) -> Iterator[pa.Table]:
    for i in indexes:
        yield read_row_group(pf, i, name)
