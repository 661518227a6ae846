"""The output rows of a process function, checked against the run's output schema.

Functions yield tuples (by position), dicts, ``Row``s or namedtuples (by field name). Rows
are normalized to tuples in schema order and stored as the ``output`` list state of the
operator ``<uid>/output`` (a struct column per row), so they commit with the state. Side
outputs (:mod:`.side_outputs`) are checked by an :class:`OutputSchema` of their own, whose
errors name the side output and carry its code.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flinkstate.checkpoint import to_arrow
from flinkstate.state import OutputTag, SerializationError, TypeInformation
from flinkstate.state.types import to_type_info

from ..errors import ProcessError


def _undeclared(row: Any) -> None:
    """A ``(tag, value)`` among the main rows: a side output the run does not declare."""
    if isinstance(row, tuple) and row and isinstance(row[0], OutputTag):
        raise ProcessError(
            f"the function yielded to side output {row[0].tag_id!r}, which the run does not declare: "
            "pass its OutputTag in side_outputs=",
            code="SIDE_OUTPUT_UNKNOWN_TAG",
        )


@dataclass(frozen=True)
class OutputSchema:
    """The output schema in the forms the runner needs (picklable)."""

    ddl: str
    arrow: pa.Schema
    what: str = "output"
    """What the rows are, in messages ("output", "side output 'late'")."""
    code: str | None = None
    """The code of a mismatch (``None``: the main output's, ``OUTPUT_SCHEMA_MISMATCH``)."""

    @staticmethod
    def of(schema: Any) -> OutputSchema:
        from pyspark.sql.pandas.types import to_arrow_schema
        from pyspark.sql.types import StructType

        if not isinstance(schema, StructType) or not schema.fields:
            raise ProcessError(f"output_schema must be a non-empty StructType, got {schema!r}")
        return OutputSchema(schema.simpleString(), to_arrow_schema(schema, timezone="UTC"))

    @property
    def names(self) -> list[str]:
        return list(self.arrow.names)

    @property
    def type_info(self) -> TypeInformation:
        return to_type_info(pa.struct(list(self.arrow)))

    def normalize(self, rows: Sequence[Any]) -> list[tuple[Any, ...]]:
        """``rows`` as tuples in schema order; a row of the wrong shape is an error."""
        names = self.names
        n = len(names)
        out: list[tuple[Any, ...]] = []
        for row in rows:
            if type(row) is tuple and len(row) == n:
                out.append(row)
            else:
                out.append(self._one(row, names))
        required = [i for i, f in enumerate(self.arrow) if not f.nullable]
        for i in required:
            if any(r[i] is None for r in out):
                raise self._mismatch(
                    f"{self.what} column {names[i]!r} is not nullable, but a row has None there"
                )
        return out

    def _mismatch(self, message: str) -> ProcessError:
        if self.code is None:
            return ProcessError(message, code="OUTPUT_SCHEMA_MISMATCH")
        return ProcessError(message, code=self.code)

    def _one(self, row: Any, names: list[str]) -> tuple[Any, ...]:
        _undeclared(row)
        fields = getattr(row, "__fields__", None) or getattr(row, "_fields", None)
        if fields is not None:
            row = dict(zip(fields, row, strict=True))
        if isinstance(row, dict):
            missing = [c for c in names if c not in row]
            extra = [c for c in row if c not in names]
            if missing or extra:
                raise self._mismatch(
                    f"{self.what} row {row!r} does not fit the {self.what} schema ({self.ddl}): "
                    f"missing columns {missing}, unknown columns {extra}"
                )
            return tuple(row[c] for c in names)
        if isinstance(row, tuple | list):
            if len(row) != len(names):
                raise self._mismatch(
                    f"{self.what} row {tuple(row)!r} has {len(row)} values; the {self.what} schema "
                    f"({self.ddl}) has {len(names)} columns {names}"
                )
            return tuple(row)
        raise self._mismatch(f"a {self.what} row is a tuple, dict or Row; got {type(row).__name__} {row!r}")

    def mismatch(self, rows: Sequence[tuple[Any, ...]]) -> ProcessError | None:
        """The error naming the first column whose values do not fit its type, if one does."""
        for row in rows:
            _undeclared(row)
        for i, field in enumerate(self.arrow):
            try:
                to_arrow([r[i] for r in rows], to_type_info(field.type))
            except SerializationError as err:
                return self._mismatch(
                    f"{self.what} column {field.name!r} ({field.type}) cannot hold the values "
                    f"the function yielded: {err}"
                )
        return None

    def diagnose(self, rows: Sequence[tuple[Any, ...]], exc: Exception) -> ProcessError:
        """:meth:`mismatch`, or an error naming the whole schema."""
        found = self.mismatch(rows)
        if found is not None:
            return found
        return self._mismatch(f"{self.what} rows do not fit the {self.what} schema ({self.ddl}): {exc}")


_SCHEMAS: dict[str, Any] = {}
"""DDL output schemas already parsed (a micro-batch each would parse its own again)."""


def parse_schema(spark: Any, ddl: str) -> Any:
    if ddl not in _SCHEMAS:
        if len(_SCHEMAS) >= 64:
            _SCHEMAS.clear()
        _SCHEMAS[ddl] = spark.createDataFrame([], ddl).schema
    return _SCHEMAS[ddl]
