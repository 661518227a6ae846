"""What a subtask's operator yields, collected: the main output and each declared side output."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from flinkstate.state import InvalidArgumentError
from flinkstate.state.process import KeyedProcessOperator, split_side_outputs

from ...errors import ProcessError
from ..side_outputs import SideOutput


class Outputs:
    """What a subtask yielded: main rows, and each declared side output's values."""

    def __init__(self, side_outputs: Iterable[SideOutput]) -> None:
        self.main: list[Any] = []
        self.side: dict[str, list[Any]] = {}
        self._known = frozenset(s.tag_id for s in side_outputs)

    def take(self, operator: KeyedProcessOperator) -> None:
        """Collect the operator's output (split only where the run declares side outputs:
        an undeclared tag among the main rows is reported when they are checked)."""
        rows = operator.drain()
        if not self._known:
            self.main.extend(rows)
            return
        try:
            self.main.extend(split_side_outputs(rows, self.side, self._known))
        except InvalidArgumentError as exc:
            raise ProcessError(exc.detail, code=exc.code) from exc
