"""What SqlJob.java wrote (tests/fixtures/flink/sql_*): every value as a function of its key.

The source numbers are n = 0..39 and id = n % 20, so an id's rows come from n = id and
n = id + 20 and the deduplication keeps the row of n = id + 20.
"""

from __future__ import annotations

import datetime
import decimal
from typing import Any

from flink_model import FIXTURES

SQL = ["sql_heap", "sql_rocksdb", "sql_heap_checkpoint"]
IDS = range(20)
SQL_DIR = FIXTURES
_EPOCH = datetime.datetime(1970, 1, 1)


def text(k: int) -> str:
    return f"n{k}-\u00e9\u6f22\U0001f600"


def _byte(v: int) -> int:
    return (v + 128) % 256 - 128


def _ts_nanos(n: int) -> int:
    """The TIMESTAMP(9) column: 2024-01-01 + n hours + n * 1234567 ns, as epoch nanoseconds."""
    start = datetime.datetime(2024, 1, 1) + datetime.timedelta(hours=n)
    return (start - _EPOCH) // datetime.timedelta(microseconds=1) * 1000 + n * 1_234_567


#: Where a column of the deduplication row (as Flink 2.3 and 1.20 store it) is in another
#: version's: Flink 1.13's, 1.15's and 1.17's planners put the computed columns (dec2, ts3) after the others.
_COMPUTED_LAST = {"f10": "f13", "f11": "f10", "f12": "f14", "f13": "f11", "f14": "f12"}
DEDUP_COLUMNS = {"1.17": _COMPUTED_LAST, "1.15": _COMPUTED_LAST, "1.13": _COMPUTED_LAST}
#: The SQL operators' ids where Flink's planner gives them no uid (1.15 and older: no
#: ``table.exec.uid.generation``): the ids Flink generated from the job graph, the same in each
#: SQL fixture of the version.
SQL_OPERATOR_IDS = {
    "1.15": {
        "4_deduplicate": "b242981826d4547a19a963082ada81bb",
        "10_group-aggregate": "ca248d81199cf3664fcf6c2d8cc000e6",
    },
    "1.13": {
        "4_deduplicate": "dc787a656df4aae213f24af3b2a84980",
        "10_group-aggregate": "b7f2b64efb83279b22bbc5d1eb86f468",
    },
}


def sql_operator(uid: str, version: str) -> str:
    """The reference (uid, or the generated id) of SqlJob's SQL operator ``uid`` in ``version``'s fixtures."""
    return SQL_OPERATOR_IDS.get(version, {}).get(uid, uid)


def dedup_column(name: str, version: str = "2.3") -> str:
    """The name of the deduplication row's column ``name`` (2.3's order) in ``version``'s rows."""
    return DEDUP_COLUMNS.get(version, {}).get(name, name)


def last_row(k: int, version: str = "2.3") -> dict[str, Any]:
    """The deduplication state's row of id ``k`` (timestamps as epoch ns / ms integers), with
    the columns in ``version``'s order."""
    return {dedup_column(name, version): v for name, v in _last_row(k).items()}


def _last_row(k: int) -> dict[str, Any]:
    n = k + 20
    big = decimal.Decimal(n * 12345).scaleb(-3)
    return {
        "f0": k,
        "f1": text(k),
        "f2": -3 * n,
        "f3": None if n % 3 == 0 else n - 10,
        "f4": _byte(n * 5 - 50),
        "f5": n % 2 == 0,
        "f6": n * 1.5,
        "f7": n * 0.25,
        "f8": bytes((n * 3 + i) % 256 for i in range(n % 4)),
        "f9": big + 10**18,
        "f10": big.quantize(decimal.Decimal("0.01"), decimal.ROUND_HALF_UP),
        "f11": _ts_nanos(n),
        "f12": _ts_nanos(n) // 1_000_000,
        "f13": datetime.date(2024, 1, 1) + datetime.timedelta(days=n),
        "f14": None if n % 5 == 0 else f"s{n}" if n % 2 == 0 else f"long string value {n}",
        "f15": None,  # the proctime column: Flink keeps it unset in the state
    }


def accumulators(k: int) -> dict[str, Any]:
    """GROUP BY id, name: COUNT(*), SUM(i), MAX(d), MIN(s) over n = k and n = k + 20."""
    ns = (k, k + 20)
    shorts = [n - 10 for n in ns if n % 3 != 0]
    return {
        "f0": 2,
        "f1": sum(-3 * n for n in ns),
        "f2": max(n * 1.5 for n in ns),
        "f3": min(shorts, default=None),
    }


def _name(k: int) -> str | None:
    """Rich.name: null, non-ASCII, empty, one ASCII char or an ASCII run (Kryo's string forms)."""
    if k % 3 == 0:
        return None
    if k % 3 == 1:
        return f"r{k}\u00e9"
    return "" if k == 17 else "r" if k % 4 == 2 else f"r{k}"


def rich(k: int) -> dict[str, Any]:
    """SqlJob.Rich(k), the Kryo state k_rich."""
    return {
        "id": k * 1_000_003 - 40,
        "count": -7 * k,
        "name": _name(k),
        "boxed": None if k % 4 == 1 else -k * 100_000,
        "ratio": None if k % 5 == 2 else k / 4,
        "flag": k % 2 == 1,
    }


RICH_DDL = (
    "STRUCT<id: BIGINT NOT NULL, count: INT NOT NULL, name: STRING, boxed: BIGINT, ratio: DOUBLE, "
    "flag: BOOLEAN NOT NULL>"
)
