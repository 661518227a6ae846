"""Two keyed inputs on Spark: ``coprocess`` runs a ``KeyedCoProcessFunction`` over two
DataFrames connected by their keys, as ``process`` runs one (the same run, checkpoint and
commit: :func:`.run.run`; exactly once as ``process`` is).

Both inputs' rows go to the subtask owning their key's key group, by the one routing
function over the one key type: the key columns of the two inputs must have the same types
(names may differ), else ``[INCOMPATIBLE_KEYS]`` before any task runs. A key of input 1 and
a key of input 2 are the same key when Flink's serializer says so (see
:mod:`flinkstate.state.types.canonical`). Within a subtask the function sees the rows in
event-time order when ``event_time`` is given, at equal times input 1's before input 2's,
each input's in input order; without event time, all of input 1 in input order, then all of
input 2.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from flinkstate.state import TypeInformation

from ..errors import ProcessError
from .api import output_frame
from .inputs import key_type_for, markers
from .job import Job, parse_job
from .names import ROUTE, SEQ
from .routing import _quote, route_column
from .run import run
from .task.two_inputs import IN1, IN2, INPUT, TIME, SecondInput


def coprocess(
    df1: Any,
    df2: Any,
    key1: str | Sequence[str],
    key2: str | Sequence[str],
    function: Any,
    output_schema: Any,
    checkpoint: str,
    uid: str,
    **options: Any,
) -> Any:
    """Run the ``KeyedCoProcessFunction`` ``function`` over ``df1`` keyed by ``key1``
    (its ``process_element1``) and ``df2`` keyed by ``key2`` (``process_element2``); return
    its committed output.

    The options are those of ``process`` but ``broadcast``; ``event_time`` names a column
    of both inputs, or is a pair ``(column of df1, column of df2)``.
    """
    event_time = options.get("event_time")
    if isinstance(event_time, tuple | list):
        if len(event_time) != 2:
            raise ProcessError(f"event_time must be a column name or a pair of them, got {event_time!r}")
        time1, time2 = event_time
    else:
        time1 = time2 = event_time
    first = dict(options, event_time=time1) if event_time is not None else dict(options)
    job = parse_job(df1, key1, function, output_schema, checkpoint, uid, first, two_inputs=True)
    other = {} if time2 is None else {"event_time": time2}
    second = parse_job(df2, key2, function, output_schema, checkpoint, uid, other, two_inputs=True)
    inputs = TwoInputs(df1, df2, SecondInput(tuple(df2.columns), second.key_columns), second.event_time)
    return output_frame(df1.sparkSession, run(job, inputs, None, None), job)


@dataclass(frozen=True)
class TwoInputs:
    """Two keyed DataFrames read as one run's input (see the module docstring)."""

    df1: Any
    df2: Any
    second: SecondInput
    event_time2: str | None

    @property
    def spark(self) -> Any:
        return self.df1.sparkSession

    @property
    def value_columns(self) -> tuple[str, ...]:
        return tuple(self.df1.columns)

    def key_type(self, job: Job) -> TypeInformation:
        key_type = key_type_for(self.df1.schema, job.key_columns, job.key_columns)
        theirs = self.second.key_columns
        other = key_type_for(self.df2.schema, theirs, theirs)
        # a ROW's fields named as input 1's: key values are tuples, compared by position
        if (
            len(theirs) == len(job.key_columns)
            and key_type_for(self.df2.schema, theirs, job.key_columns) == key_type
        ):
            return key_type
        raise ProcessError(
            f"the key column(s) {list(job.key_columns)} of the first input are {key_type}, "
            f"{list(theirs)} of the second {other}: both inputs' keys must have one type to be "
            "the same keys in the same key groups; cast the key columns of one input to the "
            "other's types",
            code="INCOMPATIBLE_KEYS",
        )

    def max_event_time(self, job: Job) -> int | None:
        from pyspark.sql import functions as F  # noqa: N812

        if job.event_time is None or self.event_time2 is None:
            return None
        times = self.df1.select(F.col(_quote(job.event_time)).cast("bigint").alias(TIME)).unionByName(
            self.df2.select(F.col(_quote(self.event_time2)).cast("bigint").alias(TIME))
        )
        found = times.agg(F.max(TIME)).first()[0]
        return None if found is None else int(found)

    def ranges(self, job: Job, key_type: TypeInformation, parallelism: int) -> Any:
        from pyspark.sql import functions as F  # noqa: N812

        def side(number: int, df: Any, keys: Sequence[str], event_time: str | None, other: Any) -> Any:
            row = F.struct(*[F.col(_quote(c)) for c in df.columns])
            empty = F.lit(None).cast(other.schema)  # the other input's struct, null
            time = F.lit(None) if event_time is None else F.col(_quote(event_time))
            route = route_column(keys, key_type, parallelism, job.max_parallelism)
            return df.select(
                (row if number == 1 else empty).alias(IN1),
                (empty if number == 1 else row).alias(IN2),
                F.lit(number).cast("int").alias(INPUT),
                time.cast("bigint").alias(TIME),
                F.monotonically_increasing_id().alias(SEQ),
                route.alias(ROUTE),
            )

        one = side(1, self.df1, job.key_columns, job.event_time, self.df2)
        two = side(2, self.df2, self.second.key_columns, self.event_time2, self.df1)
        both = one.unionByName(two)
        layout = both.drop(SEQ, ROUTE).schema
        both = both.unionByName(markers(self.spark, layout, parallelism))
        order = [INPUT, SEQ] if job.event_time is None else [TIME, INPUT, SEQ]
        return both.repartition(parallelism, ROUTE).sortWithinPartitions(*order)


__all__ = ["TwoInputs", "coprocess"]
