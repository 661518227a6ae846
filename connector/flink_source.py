"""Reading Flink's own savepoints and checkpoints as DataFrames.

When ``path`` holds a Flink ``_metadata``, ``spark.read.format("flinkstate")`` reads it
through :mod:`flinkstate.checkpoint.flink`: without ``operator``/``state`` the metadata
view (one row per state, its types and serializers); with them the state, with the
columns of our own views. Filters on ``key_group``, on ``key`` (equality or IN) and on
``subtask`` (operator list state), and the options ``keys``, ``keyGroups`` and
``subtasks`` are applied here exactly; a keyed read opens only the files of the subtasks
owning the wanted key groups, and decodes only those key groups (wanted keys prune key
groups only for basic and SQL key types: Tuple, Row or POJO keys hash otherwise in Flink).
SQL ``TIMESTAMP(7..9)`` values arrive floored to microseconds, Spark's precision
(``read_savepoint`` keeps nanoseconds).
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceReader, EqualTo, Filter, In, InputPartition

from flinkstate.checkpoint.flink import FlinkSavepoint, is_flink_savepoint, read_savepoint
from flinkstate.checkpoint.flink.rowdata import ROWDATA, RowDataReader, SqlTypeInfo, key_group_of
from flinkstate.checkpoint.views import spark_compatible
from flinkstate.state.keygroups.assignment import assign_to_key_group
from flinkstate.state.keygroups.hashing import java_hashed
from flinkstate.state.types.canonical import canonical_float
from flinkstate.state.keygroups.hashing import java_hashed
from flinkstate.state.keygroups.assignment import assign_to_key_group

from .errors import OptionError
from .options import ReadOptions
from .reader import _int_filter, _predicate, _pushable_key_type, _PushFilters

_UNSUPPORTED = {"checkpoint_id": None, "watermark": None, "flatten": True}


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
    """Declared types apply to Flink savepoints only: our own checkpoints store their types."""
    if options.declares:
        raise OptionError(
            "options valueType, userKeyType, stateType and types declare the types of a Flink "
            f"savepoint's Kryo or PyFlink state; {options.path} is not a Flink savepoint"
        )


def _open(options: ReadOptions) -> FlinkSavepoint:
    return read_savepoint(options.path, options.storage, options.declared, options.allow_pickle)


def flink_schema(options: ReadOptions) -> pa.Schema:
    check_options(options)
    sp = _open(options)
    if options.operator is None:
        schema = sp.metadata_table().schema
    else:
        schema = sp.schema(options.operator, options.state or "")
    return pa.schema([pa.field(f.name, _micros(spark_compatible(f.type))) for f in schema])


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

    def __init__(self, options: ReadOptions, schema: pa.Schema) -> None:
        check_options(options)
        self.options = options
        self.arrow_schema = schema
        sp = _open(options)
        self.keyed = False
        self.max_parallelism = 0
        self.key_type: Any = None
        self.rowdata_fields: tuple[SqlTypeInfo, ...] | None = None
        self.subtask_groups: list[tuple[int, range]] = []
        if options.operator is not None:
            op = sp.operator(options.operator)
            found = sp.keyed_info(options.operator, options.state or "")
            self.keyed = found is not None
            if found is not None:
                # Only keys whose Java hashCode() we compute (basic types) and SQL RowData keys
                # (hashed as BinaryRowData) prune key groups; other keys (PyFlink Python state,
                # Tuple, Row, POJO) hash unlike ours in Flink: they still filter rows.
                python = found[1].name != options.state
                rowdata = found[0].key.serializer if found[0].key.snapshot_class == ROWDATA else None
                self.rowdata_fields = rowdata.fields if isinstance(rowdata, RowDataReader) else None
                key_type = found[0].key.type_info
                plain = not python and self.rowdata_fields is None
                self.key_type = key_type if plain and key_type is not None and java_hashed(key_type) else None
                self.max_parallelism = op.max_parallelism
                self.subtask_groups = [
                    (s.index, s.managed_keyed.key_groups) for s in op.subtasks if s.managed_keyed is not None
                ]
            else:
                sp.schema(options.operator, options.state or "")  # the state exists
        self.key_groups: list[Any] = []
        self.subtasks: list[Any] = []
        self.key_values: list[set[Any]] = []
        self.pushFilters = _PushFilters(self)  # type: ignore[method-assign,arg-type]

    def push(self, filters: list[Filter]) -> Iterable[Filter]:
        rejected = []
        for f in filters:
            attribute = getattr(f, "attribute", ())
            column = attribute if len(attribute) == 1 else ()
            if self.keyed and column == ("key_group",) and _int_filter(f):
                self.key_groups.append(_predicate(f))
            elif self.keyed and column == ("key",) and self._key_filter(f):
                pass
            elif not self.keyed and self.options.operator and column == ("subtask",) and _int_filter(f):
                self.subtasks.append(_predicate(f))
            else:
                rejected.append(f)
        return rejected

    def _key_filter(self, f: Filter) -> bool:
        if not isinstance(f, EqualTo | In) or not _pushable_key_type(self.key_type):
            return False
        values = set(f.value) if isinstance(f, In) else {f.value}
        if any(v is None or not isinstance(v, self.key_type.python_type) for v in values):
            return False
        self.key_values.append(values)
        return True

    def _keys(self) -> set[Any] | None:
        sets = list(self.key_values)
        if self.options.keys is not None:
            key_type = self.arrow_schema.field("key").type if "key" in self.arrow_schema.names else None
            sets.append({_normal(k, key_type) for k in self.options.keys})
        return set.intersection(*sets) if sets else None

    def _wanted(self) -> set[int] | None:
        wanted: set[int] | None = None
        keys = self._keys()
        if keys is not None and self.rowdata_fields is not None:
            wanted = self._rowdata_groups(keys, self.rowdata_fields)
        elif keys is not None and self.key_type is not None:
            wanted = set()
            for value in keys:
                try:
                    wanted.add(assign_to_key_group(value, self.max_parallelism, self.key_type))
                except (ValueError, TypeError):
                    continue
        if self.key_groups:
            allowed = {g for g in range(self.max_parallelism) if all(p(g) for p in self.key_groups)}
            wanted = allowed if wanted is None else wanted & allowed
        if self.options.key_groups is not None:
            wanted = set(self.options.key_groups) if wanted is None else wanted & self.options.key_groups
        return wanted

    def _rowdata_groups(self, keys: set[Any], fields: tuple[SqlTypeInfo, ...]) -> set[int] | None:
        """Key groups of RowData keys (None: a key field type whose bytes are not written here)."""
        wanted = set()
        for value in keys:
            try:
                group = key_group_of(fields, value, self.max_parallelism)
            except (ValueError, TypeError, AttributeError, struct.error):
                continue  # a key of another type matches no row
            if group is None:
                return None
            wanted.add(group)
        return wanted

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
        assert isinstance(partition, FlinkPartition)
        sp = _open(self.options)
        table = self._table(sp, partition)
        if table.num_rows:
            table = table.select(self.arrow_schema.names)
            if any(c.type != _micros(c.type) for c in table.columns):
                columns = [_floor_micros(c.combine_chunks()) for c in table.columns]
                table = pa.Table.from_arrays(columns, names=table.column_names)
            yield from table.cast(self.arrow_schema).to_batches()

    def _table(self, sp: FlinkSavepoint, partition: FlinkPartition) -> pa.Table:
        operator, state = self.options.operator, self.options.state or ""
        if operator is None:
            return sp.metadata_table()
        if not self.keyed:
            table = sp.operator_state(operator, state)
            if "position" in table.column_names:
                allowed = self.options.subtasks
                mask = [
                    all(p(s) for p in self.subtasks) and (allowed is None or s in allowed)
                    for s in table.column("subtask").to_pylist()
                ]
                table = table.filter(pa.array(mask, pa.bool_()))
            return table
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
        return table


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


def is_flink(options: ReadOptions) -> bool:
    """Whether the read options' path holds a Flink ``_metadata`` (not one of our checkpoints)."""
    return is_flink_savepoint(options.path, options.storage)
