"""``element_rows`` (the runner's input rows, built as consumed) in C against its Python
model ``map(partial(tuple.__new__, cls), zip(*columns, strict=True))``: same rows, same
classes, same errors at the same row."""

from __future__ import annotations

import random
from collections.abc import Iterator
from functools import partial
from typing import Any, NamedTuple

import pytest
from pyspark.sql import Row

from flinkstate.state.process import element_rows
from flinkstate.state.process import operator as operator_module

C_ROWS = operator_module._rows
NO_C = "the C accelerator is not built; element_rows runs its Python model"


class Point(NamedTuple):
    x: Any
    label: Any


SparkRow = type("Row", (Row,), {"__fields__": ["x", "label"]})
VALUES = [0, -1, 1 << 70, 2.5, None, "", "ü", "日本🙂", b"\x00", (1, "t"), [1, 2], {"a": 1}]


def model(cls: type[Any], columns: list[list[Any]]) -> Iterator[Any]:
    return map(partial(tuple.__new__, cls), zip(*columns, strict=True))


def _drain(rows: Iterator[Any]) -> tuple[list[Any], str | None]:
    out: list[Any] = []
    try:
        for row in rows:
            out.append((type(row), tuple(row), getattr(row, "__dict__", None)))
    except ValueError as exc:
        return out, str(exc)
    return out, None


@pytest.mark.parametrize("use_c", [True, False])
@pytest.mark.parametrize("seed", range(25))
def test_rows_equal_the_model(seed: int, use_c: bool, monkeypatch: pytest.MonkeyPatch) -> None:
    if use_c and C_ROWS is None:
        pytest.skip(NO_C)
    if not use_c:
        monkeypatch.setattr(operator_module, "_rows", None)
    rnd = random.Random(seed)
    cls = rnd.choice([SparkRow, Point, tuple])
    width = 2 if cls is not tuple else rnd.randrange(0, 4)
    n = rnd.randrange(0, 40)
    columns = [[rnd.choice(VALUES) for _ in range(n)] for _ in range(width)]
    if width and rnd.random() < 0.4:  # unequal lengths: zip's errors, after the common rows
        columns[rnd.randrange(width)].extend(rnd.choice(VALUES) for _ in range(rnd.randrange(1, 3)))
    got = _drain(element_rows(cls, columns))
    assert got == _drain(model(cls, columns))
    assert all(kind is cls for kind, _, _ in got[0])


@pytest.mark.skipif(C_ROWS is None, reason=NO_C)
def test_spark_rows_behave_as_rows() -> None:
    row = next(element_rows(SparkRow, [[1], ["ü"]]))
    assert row.x == 1 and row["label"] == "ü" and row.asDict() == {"x": 1, "label": "ü"}
    assert row == Row(x=1, label="ü")


@pytest.mark.skipif(C_ROWS is None, reason=NO_C)
def test_bad_arguments_are_refused() -> None:
    assert C_ROWS is not None
    with pytest.raises(TypeError):
        C_ROWS(list, [[1]])
    with pytest.raises(TypeError):
        C_ROWS(Point, [(1,), [2]])


@pytest.mark.parametrize(
    "lengths", [(3, 2), (2, 3), (2, 2, 3), (2, 3, 2), (3, 2, 2), (0, 1), (1, 0), (0, 0, 0)]
)
@pytest.mark.parametrize("use_c", [True, False])
def test_unequal_columns_fail_as_zip(
    lengths: tuple[int, ...], use_c: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    if use_c and C_ROWS is None:
        pytest.skip(NO_C)
    if not use_c:
        monkeypatch.setattr(operator_module, "_rows", None)
    columns = [[f"{j}.{i}" for i in range(n)] for j, n in enumerate(lengths)]
    assert _drain(element_rows(tuple, columns)) == _drain(model(tuple, columns))
