"""The values of ``tests/fixtures/flink/MigrateJob.java`` (keys 0..7 of operator ``migrate``)."""

from __future__ import annotations

import struct
from typing import Any

KEYS = range(8)
#: The declaration of the Kryo class ``MigrateJob$Listed``.
LISTED = (
    "STRUCT<id: BIGINT NOT NULL, d: DOUBLE NOT NULL, s: SMALLINT NOT NULL, f: FLOAT NOT NULL, "
    "tags: ARRAY<STRING>, c: CHAR NOT NULL, boxedChar: CHAR>"
)
#: The declaration of the Kryo class ``MigrateJob$Counted``.
COUNTED = "STRUCT<id: BIGINT NOT NULL, counts: ARRAY<BIGINT>, weights: ARRAY<DOUBLE>, ints: ARRAY<INT>>"
#: The declaration of the POJO ``MigrateJob$PojoListed``'s Kryo (GenericType) field.
POJO_LISTED = "STRUCT<tags: ARRAY<STRING>>"
TYPES = {"kryo_listed": LISTED, "kryo_counted": COUNTED, "pojo_listed": POJO_LISTED}


def tags(k: int) -> list[str | None]:
    if k == 2:
        return []
    out: list[str | None] = [f"a{k}", "b"]
    if k == 3:
        out.append(None)
    if k == 4:
        out.append("\u00e9\u6f22\U0001f600")
    if k == 7:
        out += [f"n{i}" for i in range(70)]
    return out


def f32(v: float) -> float:
    return float(struct.unpack("<f", struct.pack("<f", v))[0])


def listed(k: int) -> dict[str, Any]:
    """``new Listed(k)``."""
    return {
        "id": k,
        "d": k / 4.0 + 0.5,
        "s": -3 - 100 * k,
        "f": f32(k * 1.25 - 2),
        "tags": None if k == 5 else tags(k),
        "c": "\u6f22" if k == 4 else chr(ord("A") + k),
        "boxedChar": None if k == 5 else chr(0x3B1 + k),
    }


def counted(k: int) -> dict[str, Any]:
    """``new Counted(k)``."""
    counts: list[int | None] = [] if k == 2 else [k * 1000, -k]
    return {
        "id": k,
        "counts": [*counts, None] if k == 3 else counts,
        "weights": None if k == 6 else [k * 0.5, -1.25],
        "ints": ([] if k == 1 else [k * -7]) + ([None] if k == 5 else []) + ([-(2**31)] if k == 7 else []),
    }


def pojo(k: int) -> dict[str, Any]:
    """``new PojoListed(k)``."""
    return {"id": k, "tags": None if k == 6 else tags(k)}
