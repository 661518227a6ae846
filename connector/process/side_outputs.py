"""The side outputs a ``process`` / ``foreach_batch`` run declares, parsed once.

A run declares its side outputs (``side_outputs=``): a list of ``OutputTag``s, each with
the schema of its ``type_info`` (a row type gives its fields; any other type one column
``value``, which takes the values as they are), or a dict of tag to a declared schema
(a ``StructType`` or DDL: values are rows then, but for a tag of a type other than a row,
whose one column the schema names). Each task writes a side output's rows as
the list state ``side_output.<tag id>`` of the operator ``<uid>/output``, in the same
subtask files as the main output, so they commit in the same checkpoint, exactly once
as the main output is. :func:`.committed.read_side_output` reads one back as a DataFrame.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from flinkstate.state import OutputTag
from flinkstate.state.process import tag_id_of
from flinkstate.state.types import RowTypeInfo

from ..errors import ProcessError
from .output import OutputSchema, parse_schema


@dataclass(frozen=True)
class SideOutput:
    """One declared side output (picklable)."""

    tag_id: str
    schema: OutputSchema
    atomic: bool
    """Values are single values (the tag's type is not a row): each is one row's one column."""

    def rows(self, values: Sequence[Any]) -> list[tuple[Any, ...]]:
        """``values`` as rows of the side output's schema (an error names the tag)."""
        return self.schema.normalize([(v,) for v in values] if self.atomic else values)


def _side_schema(tag_id: str, struct: Any) -> OutputSchema:
    return replace(
        OutputSchema.of(struct), what=f"side output {tag_id!r}", code="SIDE_OUTPUT_SCHEMA_MISMATCH"
    )


def _of_tag(tag: OutputTag) -> SideOutput:
    """A side output with the schema of the tag's ``type_info``."""
    from pyspark.sql.pandas.types import from_arrow_type
    from pyspark.sql.types import StructField, StructType

    info = tag.type_info
    if info.is_pickled:
        raise ProcessError(
            f"side output {tag.tag_id!r} has no schema: its OutputTag has no type_info (or a pickled "
            "one); give it a type, or a schema in side_outputs={tag: 'a string, b bigint'}",
            code="SIDE_OUTPUT_NO_SCHEMA",
        )
    atomic = not isinstance(info, RowTypeInfo)
    arrow = info.to_arrow()
    fields = [arrow.field(i) for i in range(arrow.num_fields)] if not atomic else []
    struct = (
        StructType([StructField("value", from_arrow_type(arrow))])
        if atomic
        else StructType([StructField(f.name, from_arrow_type(f.type), f.nullable) for f in fields])
    )
    return SideOutput(tag.tag_id, _side_schema(tag.tag_id, struct), atomic)


def parse_side_outputs(spark: Any, spec: Any) -> tuple[SideOutput, ...]:
    """The run's side outputs from its ``side_outputs`` option (see the module docstring)."""
    from pyspark.sql.types import StructType

    if spec is None:
        return ()
    entries: Iterable[tuple[Any, Any]]
    if isinstance(spec, Mapping):
        entries = spec.items()
    elif isinstance(spec, list | tuple):
        entries = ((tag, None) for tag in spec)
    else:
        raise ProcessError(
            f"side_outputs must be a list of OutputTags or a dict of tag to schema, got {spec!r}"
        )
    out: dict[str, SideOutput] = {}
    for tag, schema in entries:
        if schema is None and not isinstance(tag, OutputTag):
            raise ProcessError(
                f"side output {tag!r} needs an OutputTag with a type_info, or a schema",
                code="SIDE_OUTPUT_INVALID",
            )
        tag_id = tag_id_of(tag)
        if tag_id in out:
            raise ProcessError(f"side output {tag_id!r} is declared twice", code="SIDE_OUTPUT_INVALID")
        if schema is None:
            out[tag_id] = _of_tag(tag)
            continue
        struct = parse_schema(spark, schema) if isinstance(schema, str) else schema
        if not isinstance(struct, StructType):
            raise ProcessError(
                f"the schema of side output {tag_id!r} must be a StructType or DDL, got {schema!r}"
            )
        info = tag.type_info if isinstance(tag, OutputTag) else None
        atomic = info is not None and not info.is_pickled and not isinstance(info, RowTypeInfo)
        if atomic and len(struct.fields) != 1:
            raise ProcessError(
                f"side output {tag_id!r} holds single values ({info}): its schema has one column, "
                f"not {len(struct.fields)}",
                code="SIDE_OUTPUT_INVALID",
            )
        out[tag_id] = SideOutput(tag_id, _side_schema(tag_id, struct), atomic)
    return tuple(out.values())
