"""A Flink savepoint's timers as our timer service keeps them.

Flink keeps each timer service's timers in two priority-queue states,
``_timer_state/event_<service>`` and ``_timer_state/processing_<service>``, one entry per
(timestamp, key, namespace). Ours are map states of the same names, ``timestamp -> True`` per
key and namespace (:func:`flinkstate.state.process.timers.timer_state_meta`): the process
runner fires those of Flink's ``user-timers`` service (a KeyedProcessFunction's, in the void
namespace), and the savepoint writer writes every one back as Flink's timer queue. So timers
are restored in the namespaces the writer knows (void, ``TimeWindow`` as ``(start, end)``,
``GlobalWindow`` as ``"GlobalWindow"``); a timer queue of another namespace, or a priority-queue
state not named as a timer queue, is ``[FLINK_UNSUPPORTED]``.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import replace

from flinkstate.state.keyed.snapshot import StateMetaInfo
from flinkstate.state.process.timers import timer_state_meta

from ..errors import UnsupportedFlinkFeatureError
from ..streams.header_read import StateInfo
from ..streams.keyed_read import StateRows
from ..streams.namespaces_write import Namespace

_PREFIX = "_timer_state/"
_DOMAINS = ("event_", "processing_")
_NAMESPACES = {n.value for n in Namespace}


def timer_service(info: StateInfo, what: str) -> str:
    """The timer service whose queue ``info`` is (``user-timers``, ``window-timers``, ...)."""
    rest = info.name.removeprefix(_PREFIX)
    domain = next((d for d in _DOMAINS if rest.startswith(d)), None)
    if rest == info.name or domain is None or len(rest) == len(domain) or not info.value.timer:
        raise UnsupportedFlinkFeatureError(
            f"{what}: priority-queue state {info.name!r} is not a timer queue "
            "(_timer_state/event_<service> or _timer_state/processing_<service> of timers), so it "
            "cannot be restored"
        )
    return rest[len(domain) :]


def timer_meta(info: StateInfo, what: str) -> StateMetaInfo:
    """The state of our checkpoints that holds the timers of Flink's timer queue ``info``
    (``what``: the operator, for messages)."""
    service = timer_service(info, what)
    namespace = info.value.children[1]  # a TimerSerializer's: the key's, then the namespace's
    if namespace.snapshot_class not in _NAMESPACES:
        raise UnsupportedFlinkFeatureError(
            f"{what}, timer service {service!r} ({info.name}): timers in namespaces of "
            f"{namespace.describe()} cannot be restored (ours are in the void namespace, a TimeWindow "
            "or the GlobalWindow)"
        )
    return timer_state_meta(info.name, namespace.type_info)


def timer_entries(info: StateInfo, parts: Iterable[StateRows]) -> StateRows:
    """The timers of queue ``info`` (each subtask's rows, the timestamp the ``value``) as the
    entries of the map state holding them: the timestamp the user key, ``True`` the value."""
    merged = StateRows(replace(info, kind="MAP"))
    for rows in parts:
        merged.key_group.extend(rows.key_group)
        merged.key.extend(rows.key)
        merged.namespace.extend(rows.namespace)
        merged.extra.extend(rows.value)
        merged.value.extend([True] * len(rows.value))
    return merged
