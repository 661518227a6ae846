"""Operators keyed by Tuples, Rows (with and without field names) and POJOs, holding POJO values,
Lists and Maps of POJOs and Tuples/Rows nested in Lists and Maps: what the savepoint writer's
type tests write (:mod:`write_model`'s terms; the POJO classes are RestoreJob.java's, see
``write_model.POJOS``)."""

from __future__ import annotations

import math
from typing import Any

from write_model import EXPIRED_TS, LIVE_TS, OperatorModel, OperatorStateModel, StateModel

UIDS = ["key-tuple", "key-row", "key-named-row", "key-pojo", "key-nested"]
#: write_savepoint's arguments: as the source (max parallelism 128), and rescaled.
TYPED_WRITES: dict[str, dict[str, Any]] = {
    "same": {"parallelism": dict.fromkeys(UIDS, 2), "max_parallelism": dict.fromkeys(UIDS, 128)},
    "rescaled": {"parallelism": dict.fromkeys(UIDS, 3), "max_parallelism": dict.fromkeys(UIDS, 256)},
}


def _line(k: int) -> tuple[Any, ...]:
    """A LINE POJO (item, price, qty): null fields but the primitive qty."""
    return (None if k % 5 == 0 else f"item-{k}\u00e9", None if k % 3 == 0 else k / 4, -k)


def types_model() -> dict[str, OperatorModel]:
    keys = range(10)
    tuple_keys = [(k * 7 - 20, f"t\t{k}\U0001f600") for k in keys]
    values = {
        "v_line": StateModel("VALUE", "LINE", {k: _line(i) for i, k in enumerate(tuple_keys)}),
        "l_lines": StateModel(
            "LIST", "LINE", {k: [_line(i), _line(i + 1)] for i, k in enumerate(tuple_keys) if i % 4}
        ),
        "m_lines": StateModel(
            "MAP", "LINE", {k: {"a": _line(i), "b": None} for i, k in enumerate(tuple_keys)}, "STRING"
        ),
        "m_tuple_keys": StateModel(
            "MAP",
            "LONG",
            {k: {(i, "x"): i, (-i, "\u6f22"): None} for i, k in enumerate(tuple_keys)},
            "TUPLE<INT,STRING>",
        ),
        "v_list_lines": StateModel(
            "VALUE", "LIST<LINE>", {k: [_line(i)] * (i % 3) for i, k in enumerate(tuple_keys)}
        ),
        "v_map_points": StateModel(
            "VALUE",
            "MAP<STRING,POINT>",
            {k: {"p": (i, None, -0.0), "q": (-i, "n", math.nan)} for i, k in enumerate(tuple_keys)},
        ),
        "v_list_rows": StateModel(
            "VALUE", "LIST<ROW<LONG,STRING>>", {k: [(i, None), (-i, "r")] for i, k in enumerate(tuple_keys)}
        ),
        "v_map_tuples": StateModel(
            "VALUE",
            "MAP<STRING,TUPLE<INT,DOUBLE>>",
            {k: {"t": (i, i / 8), "u": (-i, -0.0)} for i, k in enumerate(tuple_keys)},
        ),
        "ttl_line": StateModel(
            "VALUE",
            "LINE",
            {k: (_line(i), LIVE_TS if i % 2 else EXPIRED_TS) for i, k in enumerate(tuple_keys)},
            ttl=True,
        ),
    }
    row_keys = [(k, None if k % 3 == 0 else f"r{k}", None if k % 4 == 0 else k % 2 == 0) for k in keys]
    named_keys = [(k - 5, k * 1.5 if k != 7 else -0.0) for k in keys]
    points = [(k * 1000 - 3, None if k == 4 else f"p{k}", None if k % 2 else k / 2) for k in keys]
    nested = [((k, None if k % 2 else f"n{k}"), -(2**63) + k) for k in keys]
    return {
        "key-tuple": OperatorModel("TUPLE<LONG,STRING>", values),
        "key-row": OperatorModel(
            "ROW<INT,STRING,BOOLEAN>", {"v": StateModel("VALUE", "STRING", {k: repr(k) for k in row_keys})}
        ),
        "key-named-row": OperatorModel(
            "NROW<SHORT,DOUBLE>",
            {"v": StateModel("VALUE", "LINE", {k: _line(i) for i, k in enumerate(named_keys)})},
        ),
        "key-pojo": OperatorModel(
            "POINT",
            {
                "v": StateModel("VALUE", "POINT", {k: k for k in points}),
                "l": StateModel("LIST", "LONG", {k: [k[0], 1] for k in points}),
            },
            {
                "lines": OperatorStateModel("SPLIT_DISTRIBUTE", "LINE", [[_line(1), _line(5)], [_line(3)]]),
                "tuples": OperatorStateModel("UNION", "TUPLE<LONG,STRING>", [[(1, "a")], [(2, "\t")]]),
                "by_tuple": OperatorStateModel(
                    "BROADCAST",
                    "POINT",
                    [{(1, "a"): points[4], (2, "b"): points[1]}] * 2,
                    "TUPLE<INT,STRING>",
                ),
            },
        ),
        "key-nested": OperatorModel(
            "TUPLE<ROW<INT,STRING>,LONG>",
            {"v": StateModel("VALUE", "INT", {k: i for i, k in enumerate(nested)})},
        ),
    }
