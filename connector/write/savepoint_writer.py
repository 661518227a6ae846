"""``df.write.format("flinkstate").option("format", "flink")``: a canonical Flink savepoint
from a DataFrame, which Flink restores (``flink run -s <path>``): the release option
``flinkVersion`` names (1.13-2.3; default the newest, or, appending to a Flink 1.x savepoint, the
oldest release it can be from).

The options are the bootstrap writer's (:mod:`.batch`); ``flinkKeyType``, ``flinkValueType``
and ``flinkUserKeyType`` declare Flink types the columns do not say (a Java class name or a
DDL type; undeclared, a column's own type gives it). Tasks check their rows against the
types (``[TYPE_MISMATCH]``) and hand them to the driver in their commit messages; the
driver's commit writes the savepoint through :func:`flinkstate.checkpoint.flink.write_operators`,
which encodes everything before it writes a file. Flink's format cannot be appended to in
place: ``mode("append")`` on a path holding a Flink savepoint reads it and writes it again
with this state added to its operator (or a new operator; a state of the same name
replaced); ``mode("overwrite")`` writes a savepoint holding only this state. Either way the
new files are written beside the old ones and ``_metadata`` is replaced last: a write that
fails leaves the previous savepoint readable.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import pyarrow as pa
import pyarrow.compute as pc
from pyspark.sql.datasource import DataSourceArrowWriter, WriterCommitMessage
from pyspark.sql.types import StructType

from flinkstate.checkpoint import METADATA, Storage, fit
from flinkstate.checkpoint.flink import (
    ArrowOperator,
    ArrowState,
    FlinkSavepoint,
    flink_target,
    flink_type,
    is_flink_savepoint,
    read_savepoint,
    with_operator,
    write_operators,
)
from flinkstate.state import TypeInformation

from ..errors import OptionError
from ..options import WriteOptions
from .plan import WritePlan, make_plan

_KINDS = {
    "value": "VALUE", "list": "LIST", "map": "MAP",
    "split": "SPLIT_DISTRIBUTE", "union": "UNION", "broadcast": "BROADCAST",
}  # fmt: skip


@dataclass
class TaskRows(WriterCommitMessage):
    """One task's rows (an Arrow IPC stream of the state's columns, in their Flink types)."""

    partition: int
    data: bytes


@dataclass(frozen=True)
class FlinkTypes:
    """The Flink types of the state's columns: declared, or the DataFrame's."""

    key: TypeInformation | None
    value: TypeInformation
    user_key: TypeInformation | None  # a map state's user key; a broadcast state's key

    @staticmethod
    def of(plan: WritePlan) -> FlinkTypes:
        declared = plan.options.flink_types

        def chosen(option: str, default: TypeInformation | None) -> TypeInformation | None:
            return flink_type(declared[option]) if option in declared else default

        kind = plan.options.state_type
        if "flinkuserkeytype" in declared and kind != "map":
            raise OptionError(f"option flinkUserKeyType declares a map state's key; this is a {kind} state")
        if "flinkkeytype" in declared and plan.key_type is None:
            raise OptionError(f"option flinkKeyType declares the key; a {kind} state has none")
        value = chosen("flinkvaluetype", plan.value_type)
        assert value is not None
        if plan.keyed:
            key = chosen("flinkkeytype", plan.key_type)
            return FlinkTypes(key, value, chosen("flinkuserkeytype", plan.user_key_type))
        return FlinkTypes(None, value, chosen("flinkkeytype", plan.key_type))  # a broadcast state's key


def _column(table: pa.Table, columns: tuple[str, ...]) -> pa.Array:
    if len(columns) == 1:
        return table.column(columns[0]).combine_chunks()
    arrays = [table.column(c).combine_chunks() for c in columns]
    return pa.StructArray.from_arrays(arrays, names=list(columns))


def state_table(plan: WritePlan, types: FlinkTypes, table: pa.Table) -> pa.Table:
    """The state's columns (``key``, ``user_key``, ``value``) of a DataFrame's rows, in their
    Flink types (``[TYPE_MISMATCH]`` where a value does not fit), list elements by position."""
    opts = plan.options
    if opts.position_column:
        by = [(opts.position_column, "ascending")]
        table = table.take(pc.sort_indices(table, sort_keys=by))  # nulls last
    what = f"operator {opts.operator!r}, state {opts.state!r}"

    def fitted(columns: tuple[str, ...], t: TypeInformation | None, role: str) -> pa.Array:
        assert t is not None
        return fit(_column(table, columns), t, f"{what}, {role} column(s) {', '.join(columns)}")

    cols = {"value": fitted(plan.value_columns, types.value, "value")}
    if plan.keyed:
        cols["key"] = fitted(plan.key_columns, types.key, "key")
    if plan.user_key_column is not None:
        cols["user_key"] = fitted((plan.user_key_column,), types.user_key, "user key")
    if opts.state_type == "broadcast":
        cols["key"] = fitted(plan.key_columns, types.user_key, "key")
    return pa.table(cols)


def _ipc(table: pa.Table) -> bytes:
    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as writer:
        writer.write_table(table)
    return bytes(sink.getvalue())


def _from_ipc(data: bytes) -> pa.Table:
    return pa.ipc.open_stream(pa.BufferReader(data)).read_all()


class FlinkSavepointWriter(DataSourceArrowWriter):
    """See the module docstring."""

    def __init__(self, options: Mapping[str, str], schema: StructType, overwrite: bool) -> None:
        from pyspark.sql.pandas.types import to_arrow_schema

        self.options = WriteOptions.parse(options)
        arrow_schema = to_arrow_schema(schema, timezone="UTC")
        self.arrow_schema = arrow_schema
        self.plan = make_plan(self.options, arrow_schema)
        self.types = FlinkTypes.of(self.plan)
        self.overwrite = overwrite
        root = self._root()
        if root.exists(METADATA) and not is_flink_savepoint(self.options.path, self.options.storage):
            raise OptionError(
                f"{self.options.path} holds one of our savepoints; format flink writes Flink's: "
                "use another path",
                code="INVALID_PATH",
            )
        if not root.exists(METADATA) and any(n.startswith("chk-") for n in self._listing(root)):
            raise OptionError(
                f"{self.options.path} holds our checkpoints; format flink writes a Flink savepoint: "
                "use another path",
                code="INVALID_PATH",
            )
        self.operator(state_table(self.plan, self.types, arrow_schema.empty_table()))  # checks the types

    @staticmethod
    def _listing(root: Storage) -> list[str]:
        try:
            return [n.rstrip("/").rsplit("/", 1)[-1] for n in root.list_dir()]
        except FileNotFoundError:
            return []

    def _root(self) -> Storage:
        return Storage(self.options.path, self.options.storage)

    def operator(self, table: pa.Table) -> ArrowOperator:
        """The operator with this write's state, of ``table``'s rows (the driver's check, then its write)."""
        opts, types = self.options, self.types
        user_key = types.user_key if opts.state_type in ("map", "broadcast") else None
        kind, ttl = _KINDS[opts.state_type], opts.ttl_ms is not None
        state = ArrowState(opts.state, kind, table, types.value, user_key, ttl)
        return ArrowOperator(opts.operator, [state], types.key, opts.parallelism, opts.max_parallelism)

    def write(self, iterator: Iterator[pa.RecordBatch]) -> TaskRows:
        from pyspark import TaskContext

        context = TaskContext.get()
        part = 0 if context is None else context.partitionId()
        batches = list(iterator)
        if not batches:
            return TaskRows(part, b"")
        return TaskRows(part, _ipc(state_table(self.plan, self.types, pa.Table.from_batches(batches))))

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        rows = sorted((m for m in messages if isinstance(m, TaskRows) and m.data), key=lambda m: m.partition)
        tables = [_from_ipc(m.data) for m in rows]
        empty = state_table(self.plan, self.types, self.arrow_schema.empty_table())
        table = pa.concat_tables([t.cast(empty.schema) for t in tables]) if tables else empty
        op = self.operator(table)
        opts = self.options
        old: FlinkSavepoint | None = None
        if self._root().exists(METADATA):
            old = read_savepoint(opts.path, opts.storage)
        base = None if self.overwrite else old
        flink = flink_target(opts.flink_version, base)
        ops = with_operator(base, op, flink)
        checkpoint_id = old.meta.checkpoint_id + 1 if old is not None else 1
        write_operators(ops, opts.path, checkpoint_id, flink=flink, storage=opts.storage, replace=True)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        """Nothing to undo: tasks write no files, the commit writes the savepoint."""
