"""What FixtureJob.java wrote (tests/fixtures/flink): every value as a function of its key, for
each Flink version whose fixtures are there (2.3's in the folder itself, the others' in
``<version>/``)."""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path
from typing import Any

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
#: The Flink versions whose fixtures FixtureJob and SqlJob wrote (generate.py --flink).
VERSIONS = ("2.3", "1.20", "1.17", "1.15", "1.13")
#: What each version's files tell of it: the _metadata version, the range of releases.
#: The versions with a PyFlink fixture (PyFlink runs on Python 3.11 from 1.19 on).
PYFLINK_VERSIONS = ("2.3", "1.20")
METADATA_VERSION = {"2.3": 6, "1.20": 4, "1.17": 4, "1.15": 3, "1.13": 3}
#: 1.13-1.15's version 3 _metadata and format 5 operator streams are also what flinkstate's
#: writer writes for 1.13-1.17: the files cannot tell those apart.
_V3 = "1.13-1.15 or flinkstate's writer for 1.13-1.17"
FLINK_RANGE = {"2.3": "2.1-2.3", "1.20": "1.18-1.20", "1.17": "1.16-1.17", "1.15": _V3, "1.13": _V3}
#: The fixture kinds a version lacks: native savepoints came with Flink 1.15, and a retained
#: incremental RocksDB checkpoint is made only where the full one holds key groups (1.13-1.15).
_LATER = {"rocksdb_incremental"}
ABSENT = {"2.3": _LATER, "1.20": _LATER, "1.17": _LATER, "1.13": {"rocksdb_native", "timers_rocksdb_native"}}


def fixture(version: str, kind: str) -> Path:
    """The fixture ``kind`` Flink ``version`` wrote."""
    return FIXTURES / kind if version == "2.3" else FIXTURES / version / kind


def made(kinds: Iterable[str], versions: Iterable[str] = VERSIONS) -> list[tuple[str, str]]:
    """(version, kind) of every fixture of ``kinds`` that its version makes."""
    return [(v, k) for v in versions for k in kinds if k not in ABSENT.get(v, ())]


def told(version: str) -> dict[str, str]:
    """What a read of ``version``'s fixtures is told where the files cannot say which Kryo wrote
    their Kryo values: ``_metadata`` version 3 without operator state (SqlJob's) is Flink 1.13-1.15's
    or flinkstate's writer's for any release (Kryo 5 for 2.x), so the release is given."""
    return {"flink_version": version} if METADATA_VERSION[version] == 3 else {}


def uids(version: str) -> bool:
    """Whether the version's _metadata records operator uids and names (2.x: version 5 on)."""
    return METADATA_VERSION[version] >= 5


KEYS = range(20)
CANONICAL = ["heap_canonical", "heap_canonical_files", "heap_snappy", "rocksdb_canonical"]
NATIVE = ["rocksdb_native", "rocksdb_checkpoint", "rocksdb_incremental"]
CHECKPOINTS = ["heap_checkpoint", "rocksdb_checkpoint", "rocksdb_incremental"]
ALL = [*CANONICAL, *NATIVE, "heap_checkpoint"]
#: Flink 1.13-1.15's full RocksDB checkpoints hold key groups (the canonical layout under a full
#: checkpoint's handle tag 3 or 12), not RocksDB's files.
KEY_GROUP_CHECKPOINTS = {"1.15", "1.13"}


def native_format(version: str, kind: str) -> bool:
    """Whether the fixture holds RocksDB's own files."""
    return kind in NATIVE and not (kind == "rocksdb_checkpoint" and version in KEY_GROUP_CHECKPOINTS)


def text(k: int) -> str:
    return f"k{k}-\u00e9\u6f22\U0001f600"


VALUES: dict[str, Any] = {
    "v_long": lambda k: k * 1000 + 7,
    "v_int": lambda k: -3 * k,
    "v_short": lambda k: k - 10,
    "v_byte": lambda k: k * 5 - 50,
    "v_bool": lambda k: k % 2 == 0,
    "v_double": lambda k: k * 1.5,
    "v_float": lambda k: k * 0.25,
    "v_char": lambda k: chr(ord("a") + k),
    "v_string": text,
    "v_bytes": lambda k: bytes(k + i for i in range(k % 4)),
    "v_tuple": lambda k: {"f0": k, "f1": f"t{k}"},
    "v_row": lambda k: {"f0": 2 * k, "f1": None if k % 3 == 0 else f"r{k}"},
    "v_pojo": lambda k: {"id": k, "name": f"p{k}", "score": None if k % 2 == 0 else k / 2},
    "v_list": lambda k: [k + i for i in range(k % 3 + 1)],
    "v_map": lambda k: sorted((f"m{i}", k * 10 + i) for i in range(k % 3 + 1)),
    "r_sum": lambda k: 2 * k,
    "ttl_value": lambda k: f"t{k}",
}
LISTS: dict[str, Any] = {
    "l_long": lambda k: [k * 10 + i for i in range(k % 3 + 1)],
    "l_string": lambda k: [f"e{k}_{i}" for i in range(k % 3 + 1)],
    "ttl_list": lambda k: [k + i for i in range(k % 3 + 1)],
}
MAPS: dict[str, Any] = {
    "m_string_long": lambda k: {f"u{i}": k * 100 + i for i in range(k % 3 + 1)},
    "m_int_string": lambda k: {i: None if i == 1 else f"v{k}_{i}" for i in range(k % 3 + 1)},
    "ttl_map": lambda k: {f"x{i}": k + i for i in range(k % 3 + 1)},
}
TTL = {"ttl_value", "ttl_list", "ttl_map"}
#: The states a heap checkpoint stores before its Kryo states (v_kryo, v_kryo_fields) in every key
#: group: readable with neither declared (the order is the heap backend's, by release).
HEAP_CHECKPOINT_READABLE = {"l_string", "v_bool"}
HEAP_READABLE = {
    "2.3": HEAP_CHECKPOINT_READABLE,
    "1.20": {
        "l_long",
        "l_string",
        "m_int_string",
        "m_string_long",
        "v_bool",
        "v_byte",
        "v_double",
        "v_float",
        "v_int",
        "v_list",
        "v_long",
        "v_map",
        "v_pojo",
        "v_short",
        "v_string",
    },
    "1.17": {"l_long", "m_string_long", "r_sum", "ttl_map", "v_bytes", "v_map", "v_short", "v_tuple"},
    "1.15": {"l_string", "m_int_string", "ttl_map", "v_double", "v_list", "v_map"},
    "1.13": {"l_string", "m_int_string", "m_string_long", "ttl_map", "v_bool", "v_double", "v_list"},
}

#: FixtureJob.Fields, a Kryo class whose short, float and
#: double fields Kryo 2 writes big-endian and Kryo 5 little-endian.
FIELDS_DDL = (
    "STRUCT<id: BIGINT NOT NULL, s: SMALLINT NOT NULL, f: FLOAT NOT NULL, d: DOUBLE NOT NULL, "
    "boxedShort: SMALLINT, boxedFloat: FLOAT, boxedDouble: DOUBLE>"
)


def fields(k: int) -> dict[str, Any]:
    return {
        "id": k,
        "s": k * 300 - 3000,
        "f": k * 0.75 - 4,
        "d": k / 8 - 1,
        "boxedShort": None if k % 3 == 0 else 7 - k,
        "boxedFloat": None if k % 4 == 1 else k * -1.5,
        "boxedDouble": None if k % 5 == 2 else k * 1e10,
    }


def windows() -> dict[tuple[str, int], int]:
    """(key, window start) -> sum of the window-sum job's tumbling one-hour windows."""
    out: dict[tuple[str, int], int] = {}
    for k in KEYS:
        start = k * 600_000 // 3_600_000 * 3_600_000
        out[(f"w{k % 5}", start)] = out.get((f"w{k % 5}", start), 0) + k
    return out
