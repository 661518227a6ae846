"""RocksDB options of a backend, parsed once into a frozen object.

Memory is bounded by RocksDB, not Python: one LRU block cache per backend, and a write
buffer manager that charges every column family's memtables to that cache, so a
backend's RocksDB memory stays near ``block_cache_bytes`` however large its state is
(the budget: :attr:`RocksDBOptions.memory_budget`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields
from typing import Any

from ..errors import InvalidArgumentError

_MIB = 1 << 20


@dataclass(frozen=True)
class RocksDBOptions:
    """``block_cache_bytes``: the LRU cache of data blocks, with the memtables charged to it;
    ``write_buffer_bytes``: one memtable of one state (``max_write_buffers`` per state);
    ``total_write_buffer_bytes``: every memtable of the backend together;
    ``disable_wal``: no write-ahead log (checkpoints, not the DB, make state durable, as
    in Flink); ``bulk_load_min_entries``: a restored key group of a state with at least
    this many entries is written as a sorted SST file and ingested (see :mod:`.bulk`),
    a smaller one with write batches."""

    block_cache_bytes: int = 64 * _MIB
    write_buffer_bytes: int = 16 * _MIB
    max_write_buffers: int = 2
    total_write_buffer_bytes: int = 32 * _MIB
    disable_wal: bool = True
    bulk_load_min_entries: int = 4096

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if f.type == "bool":
                if not isinstance(value, bool):
                    raise InvalidArgumentError(
                        f"RocksDB option {f.name} must be a bool, got {value!r}", code="INVALID_OPTION"
                    )
            elif type(value) is not int or value <= 0:
                raise InvalidArgumentError(
                    f"RocksDB option {f.name} must be a positive int, got {value!r}", code="INVALID_OPTION"
                )

    @classmethod
    def from_mapping(cls, options: Mapping[str, Any]) -> RocksDBOptions:
        """Options from a mapping (strings accepted); an unknown name is an error naming it."""
        known = {f.name: f for f in fields(cls)}
        parsed: dict[str, Any] = {}
        for name, raw in options.items():
            if name not in known:
                raise InvalidArgumentError(
                    f"unknown RocksDB option {name!r}; valid options: {sorted(known)}", code="INVALID_OPTION"
                )
            parsed[name] = _parse(name, raw, known[name].type == "bool")
        return cls(**parsed)

    @property
    def memory_budget(self) -> int:
        """RocksDB's memory for this backend: the block cache, which the memtables are charged to."""
        return self.block_cache_bytes

    def build(self) -> tuple[Any, Any]:
        """(DB options, column family options) sharing one cache and write buffer manager."""
        import rocksdict

        cache = rocksdict.Cache(self.block_cache_bytes)
        manager = rocksdict.WriteBufferManager.new_write_buffer_manager_with_cache(
            self.total_write_buffer_bytes, False, cache
        )
        table = rocksdict.BlockBasedOptions()
        table.set_block_cache(cache)
        table.set_bloom_filter(10, False)
        table.set_cache_index_and_filter_blocks(True)
        table.set_pin_l0_filter_and_index_blocks_in_cache(True)

        def options() -> Any:
            opts = rocksdict.Options(raw_mode=True)
            opts.set_block_based_table_factory(table)
            opts.set_write_buffer_size(self.write_buffer_bytes)
            opts.set_max_write_buffer_number(self.max_write_buffers)
            opts.set_write_buffer_manager(manager)
            return opts

        db = options()
        db.create_if_missing(True)
        db.create_missing_column_families(True)
        return db, options()

    def write_options(self) -> Any:
        import rocksdict

        opts = rocksdict.WriteOptions()
        # a property at run time; rocksdict's stub wrongly declares a method
        opts.disable_wal = self.disable_wal  # type: ignore[method-assign,assignment]
        return opts


def _parse(name: str, raw: Any, boolean: bool) -> Any:
    if boolean:
        if isinstance(raw, bool):
            return raw
        if isinstance(raw, str) and raw.lower() in ("true", "false"):
            return raw.lower() == "true"
    elif isinstance(raw, int) and not isinstance(raw, bool):
        return raw
    elif isinstance(raw, str) and raw.strip().isdigit():
        return int(raw)
    kind = "a bool" if boolean else "a positive int"
    raise InvalidArgumentError(f"RocksDB option {name} must be {kind}, got {raw!r}", code="INVALID_OPTION")
