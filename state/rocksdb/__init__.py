"""The RocksDB keyed state backend (rocksdict, raw bytes mode)."""

from .backend import RocksDBKeyedStateBackend
from .options import RocksDBOptions

__all__ = ["RocksDBKeyedStateBackend", "RocksDBOptions"]
