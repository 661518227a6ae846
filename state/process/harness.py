"""A test harness for process functions, no Spark needed (in the spirit of Flink's
``KeyedOneInputStreamOperatorTestHarness``): feed elements, move the watermark and the
processing clock, collect the output, snapshot, and restore at any parallelism.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..errors import InvalidArgumentError
from ..heap.backend import HeapKeyedStateBackend
from ..keyed.backend import AbstractKeyedStateBackend
from ..keyed.snapshot import StateColumns, StateMetaInfo
from ..keygroups.assignment import KeyGroupRange, compute_key_group_range_for_operator_index
from ..operator import OperatorStateBackend, OperatorStateData, repartition
from ..ttl.time import LONG_MIN, ManualTimeProvider
from ..types.mapping import TypeInformation
from .functions import ProcessFunction
from .operator import KeyedProcessOperator
from .side_outputs import OutputTag, split_side_outputs, tag_id_of
from .timers import TimeDomain

BackendFactory = Callable[..., AbstractKeyedStateBackend]


@dataclass(frozen=True)
class HarnessSnapshot:
    """One subtask's state, timers, broadcast state and watermark, materialized."""

    key_type: TypeInformation | None
    max_parallelism: int
    key_group_range: KeyGroupRange
    keyed: dict[str, tuple[StateMetaInfo, dict[int, StateColumns]]]
    operator_states: list[OperatorStateData] = field(default_factory=list)
    watermark: int = LONG_MIN


def take_snapshot(operator: KeyedProcessOperator) -> HarnessSnapshot:
    """Everything ``operator`` holds, copied out of its backends."""
    backend = operator.backend
    with backend.snapshot() as snap:
        keyed = {}
        for name, state in snap.states.items():
            groups = {kg: cols for kg in snap.key_group_range if len(cols := state.columns(kg))}
            keyed[name] = (state.meta, groups)
    return HarnessSnapshot(
        snap.key_type,
        snap.max_parallelism,
        snap.key_group_range,
        keyed,
        operator.operator_state.snapshot(),
        backend.current_watermark,
    )


def restore_backend(backend: AbstractKeyedStateBackend, snapshots: Sequence[HarnessSnapshot]) -> None:
    """Load the key groups of ``backend``'s range from ``snapshots`` (of any parallelism)."""
    rng = backend.key_group_range
    for snap in snapshots:
        if snap.max_parallelism != backend.max_parallelism:
            raise InvalidArgumentError(
                f"a snapshot of max parallelism {snap.max_parallelism} cannot restore a backend of "
                f"{backend.max_parallelism}",
                code="MAX_PARALLELISM_MISMATCH",
            )
        backend.restore_key_type(snap.key_type)
        for meta, groups in snap.keyed.values():
            backend.restore_state(meta, rng.start, StateColumns([], None, []))
            for kg, cols in groups.items():
                if kg in rng:
                    backend.restore_state(meta, kg, cols)
    if snapshots:
        backend.advance_watermark(min(s.watermark for s in snapshots))


class KeyedProcessFunctionHarness:
    """Drives one subtask of a :class:`KeyedProcessFunction` by hand.

    ``key_selector(value)`` gives each element's key. The watermark moves with
    :meth:`process_watermark`, and with ``watermark_delay`` set also with the elements'
    event times (as in the Spark runner). The processing clock starts at
    ``processing_time`` and moves only with :meth:`set_processing_time`; processing-time
    TTL follows it. ``restore_from`` takes snapshots of any parallelism (a rescale).
    ``task_name`` (default: the function's class name), ``attempt_number`` and
    ``job_parameters`` are what the runtime context reports. What the function yields as
    ``(output_tag, value)`` goes to that side output (:meth:`get_side_output`), not the output.
    """

    def __init__(
        self,
        function: ProcessFunction,
        key_selector: Callable[[Any], Any],
        *,
        key_type: Any = None,
        max_parallelism: int = 128,
        parallelism: int = 1,
        subtask: int = 0,
        processing_time: int = 0,
        watermark_delay: int | None = None,
        restore_from: HarnessSnapshot | Sequence[HarnessSnapshot] | None = None,
        backend_factory: BackendFactory = HeapKeyedStateBackend,
        task_name: str | None = None,
        attempt_number: int = 0,
        job_parameters: Mapping[str, str] | None = None,
    ) -> None:
        if not callable(key_selector):
            raise InvalidArgumentError(f"key_selector must be callable, got {key_selector!r}")
        snapshots = [restore_from] if isinstance(restore_from, HarnessSnapshot) else list(restore_from or ())
        self.key_selector = key_selector
        self.clock = ManualTimeProvider(processing_time)
        rng = compute_key_group_range_for_operator_index(max_parallelism, parallelism, subtask)
        backend = backend_factory(
            key_type=key_type, max_parallelism=max_parallelism, key_group_range=rng, time_provider=self.clock
        )
        restore_backend(backend, snapshots)
        old = [s.operator_states for s in snapshots]
        operator_state = OperatorStateBackend(repartition(old, parallelism)[subtask] if old else ())
        self.operator = KeyedProcessOperator(
            function,
            backend,
            operator_state,
            subtask=subtask,
            parallelism=parallelism,
            clock=self.clock,
            watermark_delay=watermark_delay,
            task_name=task_name,
            attempt_number=attempt_number,
            job_parameters=job_parameters,
        )
        self._output: list[Any] = []
        self._side: dict[str, list[Any]] = {}
        self.operator.open()

    @property
    def backend(self) -> AbstractKeyedStateBackend:
        return self.operator.backend

    def _collect(self) -> None:
        self._output.extend(split_side_outputs(self.operator.drain(), self._side))

    def process_element(self, value: Any, timestamp: int | None = None) -> None:
        """Feed one element (``timestamp``: its event time)."""
        self.operator.process_element(self.key_selector(value), value, timestamp)
        self._collect()

    def process_watermark(self, watermark: int) -> None:
        """Move event time: due event-time timers fire, event-time TTL follows."""
        self.operator.advance_watermark(watermark)
        self._collect()

    def set_processing_time(self, time: int) -> None:
        """Set the processing clock (never back): due processing-time timers fire."""
        self.clock.now = max(self.clock.now, time)
        self.operator.advance_processing_time()
        self._collect()

    def end_input(self) -> None:
        """The input is bounded and ended: every event-time timer fires."""
        self.operator.end_of_input()
        self._collect()

    def get_output(self) -> list[Any]:
        """Every row emitted so far."""
        return list(self._output)

    def extract_output(self) -> list[Any]:
        """The rows emitted since the last call (and forget them)."""
        out, self._output = self._output, []
        return out

    def get_side_output(self, tag: OutputTag | str) -> list[Any]:
        """Every value yielded to the side output ``tag`` (a tag or its id) so far."""
        return list(self._side.get(tag_id_of(tag), ()))

    def current_watermark(self) -> int:
        return self.operator.current_watermark

    def timers(self, domain: TimeDomain = TimeDomain.EVENT_TIME) -> list[tuple[Any, int]]:
        """Registered ``(key, timestamp)`` timers of ``domain``, in time order."""
        op = self.operator
        return (op.event_timers if domain is TimeDomain.EVENT_TIME else op.processing_timers).timers()

    def snapshot(self) -> HarnessSnapshot:
        return take_snapshot(self.operator)

    def close(self) -> None:
        self.operator.close()
        self.operator.backend.close()

    def __enter__(self) -> KeyedProcessFunctionHarness:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class KeyedBroadcastProcessFunctionHarness(KeyedProcessFunctionHarness):
    """:class:`KeyedProcessFunctionHarness` for a :class:`KeyedBroadcastProcessFunction`."""

    def process_broadcast_element(self, value: Any, timestamp: int | None = None) -> None:
        self.operator.process_broadcast_element(value, timestamp)
        self._collect()
