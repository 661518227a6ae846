"""The transformWithStateInPandas anchor of P11 (a module of its own: Spark pickles it)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pandas as pd
from pyspark.sql.streaming.stateful_processor import StatefulProcessor, StatefulProcessorHandle


class CountProcessor(StatefulProcessor):
    """A running count per key in a ValueState; emits the count once per batch."""

    def init(self, handle: StatefulProcessorHandle) -> None:
        self.count = handle.getValueState("count", "count long")

    def handleInputRows(  # noqa: N802 - Spark's name
        self,
        key: Any,
        rows: Iterator[pd.DataFrame],
        timerValues: Any,  # noqa: N803 - Spark's name
    ) -> Iterator[pd.DataFrame]:
        total = self.count.get()[0] if self.count.exists() else 0
        for pdf in rows:
            total += len(pdf)
        self.count.update((total,))
        yield pd.DataFrame({"key": [key[0]], "count": [total]})

    def close(self) -> None:
        pass
