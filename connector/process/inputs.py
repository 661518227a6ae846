"""What a ``process`` run reads: the input rows, routed to one partition per subtask.

:class:`Inputs` is what the runner asks of its input: the key type, the largest event time,
and the routed, ordered frame the tasks read. :class:`OneInput` is one keyed DataFrame;
:mod:`.coprocess` has two. Every range also gets a marker row, so it runs without rows.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

from flinkstate.state import TypeInformation

from .job import Job
from .names import ROUTE, SEQ
from .routing import key_type_of, route_column, route_values

if TYPE_CHECKING:
    from .task.plan import SecondFeed


class Inputs(Protocol):
    """What a run reads: one keyed DataFrame (:class:`OneInput`), or two (:mod:`.coprocess`)."""

    @property
    def spark(self) -> Any: ...

    @property
    def value_columns(self) -> tuple[str, ...]:
        """The columns of the (first) input's rows."""

    @property
    def second(self) -> SecondFeed | None: ...

    def key_type(self, job: Job) -> TypeInformation:
        """The key type of the key column(s); an error before any task runs if it has none."""

    def max_event_time(self, job: Job) -> int | None:
        """The largest event time of the input (None: no event time or no rows)."""

    def ranges(self, job: Job, key_type: TypeInformation, parallelism: int) -> Any:
        """The rows routed to ``parallelism`` partitions (one per subtask, each with a
        marker row), each sorted in the order the function sees them."""


@dataclass(frozen=True)
class OneInput:
    """One keyed DataFrame: rows in event-time order, ties in input order."""

    df: Any

    @property
    def second(self) -> SecondFeed | None:
        return None

    @property
    def spark(self) -> Any:
        return self.df.sparkSession

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(self.df.columns)

    def key_type(self, job: Job) -> TypeInformation:
        return key_type_for(self.df.schema, job.key_columns, job.key_columns)

    def max_event_time(self, job: Job) -> int | None:
        from pyspark.sql import functions as F  # noqa: N812

        if job.event_time is None:
            return None
        found = self.df.agg(F.max(job.event_time)).first()[0]
        return None if found is None else int(found)

    def ranges(self, job: Job, key_type: TypeInformation, parallelism: int) -> Any:
        from pyspark.sql import functions as F  # noqa: N812

        route = route_column(job.key_columns, key_type, parallelism, job.max_parallelism)
        routed = self.df.select("*", F.monotonically_increasing_id().alias(SEQ), route.alias(ROUTE))
        routed = routed.unionByName(markers(self.spark, self.df.schema, parallelism))
        order = [job.event_time, SEQ] if job.event_time is not None else [SEQ]
        return routed.repartition(parallelism, ROUTE).sortWithinPartitions(*order)


def key_type_for(schema: Any, columns: Sequence[str], names: Sequence[str]) -> TypeInformation:
    """The key type of ``columns`` of ``schema`` (a ROW's fields named ``names``)."""
    from pyspark.sql.pandas.types import to_arrow_schema
    from pyspark.sql.types import StructType

    arrow = to_arrow_schema(StructType([schema[k] for k in columns]), timezone="UTC")
    return key_type_of(list(arrow.types), names)


_MARKERS: dict[tuple[int, str, int], tuple[Any, Any]] = {}
"""Marker frames already built: (session id, input schema, parallelism) -> (session, frame)."""


def markers(spark: Any, schema: Any, parallelism: int) -> Any:
    """One marker row per subtask (sequence -1), so every range runs even without rows;
    built once per session, input schema and parallelism (each micro-batch reuses it)."""
    from pyspark.sql import functions as F  # noqa: N812

    key = (id(spark), schema.json(), parallelism)
    cached = _MARKERS.get(key)
    if cached is not None and cached[0] is spark:
        return cached[1]
    routes = F.array(*[F.lit(v) for v in route_values(parallelism)])
    frame = spark.range(0, parallelism, 1, 1).select(
        *[F.lit(None).cast(f.dataType).alias(f.name) for f in schema.fields],
        F.lit(-1).cast("bigint").alias(SEQ),
        F.element_at(routes, (F.col("id") + 1).cast("int")).alias(ROUTE),
    )
    if len(_MARKERS) >= 16:
        _MARKERS.clear()
    _MARKERS[key] = (spark, frame)
    return frame
