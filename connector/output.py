"""The output rows of a process function, checked against the run's output schema.

Functions yield tuples (by position), dicts, ``Row``s or namedtuples (by field name). Rows
are normalized to tuples in schema order and stored as the ``output`` list state of the
operator ``<uid>/output`` (a struct column per row), so they commit with the state.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa

from flinkstate.checkpoint import to_arrow
from flinkstate.state.errors import SerializationError
from flinkstate.state.types.mapping import TypeInformation, to_type_info

from .errors import ProcessError


def _mismatch(message: str) -> ProcessError:
    return ProcessError(message, code="OUTPUT_SCHEMA_MISMATCH")


@dataclass(frozen=True)
class OutputSchema:
    """The output schema in the forms the runner needs (picklable)."""

    ddl: str
    arrow: pa.Schema

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
                raise _mismatch(f"output column {names[i]!r} is not nullable, but a row has None there")
        return out

    def _one(self, row: Any, names: list[str]) -> tuple[Any, ...]:
        fields = getattr(row, "__fields__", None) or getattr(row, "_fields", None)
        if fields is not None:
            row = dict(zip(fields, row, strict=True))
        if isinstance(row, dict):
            missing = [c for c in names if c not in row]
            extra = [c for c in row if c not in names]
            if missing or extra:
                raise _mismatch(
                    f"output row {row!r} does not fit the output schema ({self.ddl}): "
                    f"missing columns {missing}, unknown columns {extra}"
                )
            return tuple(row[c] for c in names)
        if isinstance(row, tuple | list):
            if len(row) != len(names):
                raise _mismatch(
                    f"output row {tuple(row)!r} has {len(row)} values; the output schema ({self.ddl}) "
                    f"has {len(names)} columns {names}"
                )
            return tuple(row)
        raise _mismatch(f"an output row is a tuple, dict or Row; got {type(row).__name__} {row!r}")

    def diagnose(self, rows: Sequence[tuple[Any, ...]], exc: Exception) -> ProcessError:
        """The error naming the first column whose values do not fit its type."""
        for i, field in enumerate(self.arrow):
            try:
                to_arrow([r[i] for r in rows], to_type_info(field.type))
            except SerializationError as err:
                return _mismatch(
                    f"output column {field.name!r} ({field.type}) cannot hold the values "
                    f"the function yielded: {err}"
                )
        return _mismatch(f"output rows do not fit the output schema ({self.ddl}): {exc}")
