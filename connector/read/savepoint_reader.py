"""Reading Flink's own savepoints and checkpoints as DataFrames.

When ``path`` holds a Flink ``_metadata``, ``spark.read.format("flinkstate")`` reads it
through :mod:`flinkstate.checkpoint.flink`: without ``operator``/``state`` the metadata
view (one row per state, its types and serializers); with them the state, with the
columns of our own views (``flatten=false``: a list or map per key, as ours). Filters on
``key_group``, on ``key`` (equality or IN) and on ``subtask`` (operator list state), and the
options ``keys``, ``keyGroups`` and ``subtasks`` are applied here exactly; a keyed read opens
only the files of the subtasks owning the wanted key groups, and decodes only those key groups
(wanted keys prune key groups only for basic and SQL key types: Tuple, Row or POJO keys hash
otherwise in Flink).
SQL ``TIMESTAMP(7..9)`` values arrive floored to microseconds, Spark's precision
(``read_savepoint`` keeps nanoseconds).
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, InputPartition

from flinkstate.checkpoint import spark_compatible
from flinkstate.checkpoint.flink import (
    ROWDATA,
    FlinkSavepoint,
    RowDataReader,
    SqlTypeInfo,
    hashed_key_type,
    key_group_of,
    nested_view,
)
from flinkstate.state import FlinkStateError, assign_to_key_group
from flinkstate.state.types import canonical_float

from ..errors import OptionError
from ..options import ReadOptions
from .checkpoint_reader import is_stand_in
from .pushdown import Pushdown

_UNSUPPORTED = {"checkpoint_id": None, "watermark": None}


@dataclass(frozen=True)
class FlinkPartition(InputPartition):
    """One subtask's share of a state (``key_groups``: the ones to decode, None: all)."""

    subtask: int
    key_groups: tuple[int, ...] | None


def check_options(options: ReadOptions) -> None:
    for name, default in _UNSUPPORTED.items():
        if getattr(options, name) != default:
            raise OptionError(f"option {name} is not supported when reading a Flink savepoint")


def check_not_declaring(options: ReadOptions) -> None:
    """Declared types (and the Flink version) apply to Flink savepoints only: our own checkpoints
    store their types."""
    if options.declares:
        raise OptionError(
            "options valueType, userKeyType, stateType and types declare the types of a Flink "
            f"savepoint's Kryo or PyFlink state; {options.path} is not a Flink savepoint"
        )
    if options.flink_version is not None:
        raise OptionError(
            f"option flinkVersion names the Flink release that wrote a Flink savepoint; {options.path} "
            "is not a Flink savepoint"
        )


def with_flink_version(sp: FlinkSavepoint, options: ReadOptions) -> FlinkSavepoint:
    """``sp`` read as written by the release option flinkVersion names (if given)."""
    if options.flink_version is None:
        return sp
    try:
        return sp.with_flink_version(options.flink_version)
    except FlinkStateError as exc:
        raise OptionError(f"option flinkVersion: {exc.detail}") from exc


def flink_schema(options: ReadOptions, sp: FlinkSavepoint) -> pa.Schema:
    check_options(options)
    if options.operator is None:
        schema = sp.metadata_table().schema
    else:
        schema = sp.schema(options.operator, options.state or "")
        if not options.flatten and sp.keyed_info(options.operator, options.state or "") is not None:
            schema = nested_view(schema.empty_table()).schema
    return spark_schema(schema)


def spark_schema(schema: pa.Schema) -> pa.Schema:
    """``schema`` as Spark takes it from Arrow (its types, microsecond timestamps)."""
    return pa.schema([pa.field(f.name, _micros(spark_compatible(f.type))) for f in schema])


def to_spark(table: pa.Table, schema: pa.Schema) -> pa.Table:
    """``table``'s columns of ``schema`` (Spark's, see :func:`spark_schema`), nanosecond
    timestamps floored to microseconds."""
    table = table.select(schema.names)
    if any(c.type != _micros(c.type) for c in table.columns):
        columns = [_floor_micros(c.combine_chunks()) for c in table.columns]
        table = pa.Table.from_arrays(columns, names=table.column_names)
    return table.cast(schema)


def _micros(t: pa.DataType) -> pa.DataType:
    """``t`` with nanosecond timestamps as microsecond ones (Spark's precision)."""
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pa.timestamp("us", t.tz)
    if pa.types.is_struct(t):
        return pa.struct([pa.field(f.name, _micros(f.type), f.nullable) for f in t])
    return t


def _floor_micros(a: pa.Array) -> pa.Array:
    """``a`` with nanosecond timestamps floored to microseconds (nested in structs too)."""
    t = a.type
    if pa.types.is_timestamp(t) and t.unit == "ns":
        return pc.floor_temporal(a, unit="microsecond").cast(pa.timestamp("us", t.tz))
    if pa.types.is_struct(t) and t != _micros(t):
        children = [_floor_micros(a.field(i)) for i in range(t.num_fields)]
        return pa.StructArray.from_arrays(children, fields=list(_micros(t)), mask=a.is_null())
    return a


class FlinkSavepointReader(DataSourceReader):
    """Reads one view of a Flink savepoint; see the module docstring."""

    def __init__(self, options: ReadOptions, savepoint: FlinkSavepoint, schema: pa.Schema) -> None:
        check_options(options)
        self.options = options
        self.arrow_schema = schema
        self.savepoint = sp = savepoint
        keyed = False
        self.max_parallelism = 0
        self.key_type: Any = None
        self.rowdata_fields: tuple[SqlTypeInfo, ...] | None = None
        self.subtask_groups: list[tuple[int, range]] = []
        if options.operator is not None:
            op = sp.operator(options.operator)
            found = sp.keyed_info(options.operator, options.state or "")
            keyed = found is not None
            if found is not None:
                # Keys whose Java hashCode() we compute (basic types) and SQL RowData keys (hashed
                # as BinaryRowData) prune key groups; other keys still filter rows.
                rowdata = found[0].key.serializer if found[0].key.snapshot_class == ROWDATA else None
                self.rowdata_fields = rowdata.fields if isinstance(rowdata, RowDataReader) else None
                self.key_type = hashed_key_type(sp, options.operator, options.state or "")
                self.max_parallelism = op.max_parallelism
                self.subtask_groups = [
                    (s.index, s.managed_keyed.key_groups) for s in op.subtasks if s.managed_keyed is not None
                ]
            else:
                sp.schema(options.operator, options.state or "")  # the state exists
        self.keyed = keyed
        subtasks = not keyed and options.operator is not None  # operator state has a subtask column
        self.pushdown = Pushdown(keyed=keyed, key_type=self.key_type, subtasks=subtasks)
        self.pushdown.install(self)

    def _keys(self) -> list[Any] | None:
        """Keys the ``keys`` option and pushed key filters allow (``None``: any), normalized."""
        selected = None
        if self.options.keys is not None:
            key_type = self.arrow_schema.field("key").type if "key" in self.arrow_schema.names else None
            selected = [_normal(k, key_type) for k in self.options.keys]
        return self.pushdown.keys(selected)

    def _wanted(self) -> set[int] | None:
        keys = self._keys()
        fields, key_type, max_p = self.rowdata_fields, self.key_type, self.max_parallelism

        def group_of(key: Any) -> int | None:
            if fields is not None:
                try:
                    return key_group_of(fields, key, max_p)
                except (AttributeError, struct.error) as exc:  # a key of another type matches no row
                    raise ValueError(str(exc)) from exc
            return None if key_type is None else assign_to_key_group(key, max_p, key_type)

        return self.pushdown.wanted_key_groups(max_p, keys, group_of, self.options.key_groups)

    def partitions(self) -> Sequence[InputPartition]:
        if not self.keyed:
            return [FlinkPartition(-1, None)]
        wanted = self._wanted()
        out: list[InputPartition] = []
        for index, groups in self.subtask_groups:
            if self.options.subtasks is not None and index not in self.options.subtasks:
                continue
            mine = None if wanted is None else tuple(sorted(wanted.intersection(groups)))
            if mine is None or mine:
                out.append(FlinkPartition(index, mine))
        return out

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if is_stand_in(partition):
            return
        assert isinstance(partition, FlinkPartition)
        table = self._table(self.savepoint, partition)
        if table.num_rows:
            yield from to_spark(table, self.arrow_schema).to_batches()

    def _table(self, sp: FlinkSavepoint, partition: FlinkPartition) -> pa.Table:
        operator, state = self.options.operator, self.options.state or ""
        if operator is None:
            return sp.metadata_table()
        if not self.keyed:
            table = sp.operator_state(operator, state)
            allowed = self.options.subtasks
            mask = [
                self.pushdown.subtask_allowed(s) and (allowed is None or s in allowed)
                for s in table.column("subtask").to_pylist()
            ]
            return table.filter(pa.array(mask, pa.bool_()))
        groups = partition.key_groups
        if groups is None:
            index = partition.subtask
            groups = tuple(next(g for i, g in self.subtask_groups if i == index))
        table = sp.keyed_state(operator, state, groups)
        keys = self._keys()
        key_type = table.schema.field("key").type
        if keys is not None and (pa.types.is_struct(key_type) or pa.types.is_floating(key_type)):
            mask = [_normal(k, key_type) in keys for k in table.column("key").to_pylist()]
            table = table.filter(pa.array(mask, pa.bool_()))
        elif keys is not None:
            table = table.filter(pc.is_in(table.column("key"), pa.array(sorted(keys), key_type)))
        return table if self.options.flatten else nested_view(table)


def _normal(value: Any, t: pa.DataType | None) -> Any:
    """A key from the ``keys`` option or a decoded row, hashable and comparable: ROW keys (JSON
    arrays or objects, decoded dicts) as tuples in field order, byte arrays as bytes, floats
    in canonical form (:mod:`flinkstate.state.types.canonical`: one NaN, -0.0 apart from 0.0)."""
    if t is not None and pa.types.is_struct(t):
        fields = list(t)
        items = [value.get(f.name) for f in fields] if isinstance(value, dict) else list(value)
        if len(items) != len(fields):
            raise OptionError(f"key {value!r} does not have the {len(fields)} fields of the key type {t}")
        return tuple(_normal(v, f.type) for v, f in zip(items, fields, strict=True))
    if isinstance(value, list):
        return bytes(value) if t is not None and pa.types.is_binary(t) else tuple(value)
    if t is not None and pa.types.is_float32(t) and type(value) in (int, float):
        try:  # the FLOAT nearest the number: what the key stores, as Arrow decodes it
            single: float = struct.unpack("<f", struct.pack("<f", value))[0]
        except OverflowError:  # no FLOAT: matches no key
            return value
        return canonical_float(single)
    return canonical_float(value) if isinstance(value, float) else value
