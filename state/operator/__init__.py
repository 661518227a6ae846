"""Operator (non-keyed) state: split and union list states, broadcast state."""

from .backend import OperatorStateBackend
from .repartition import repartition
from .states import BroadcastState, OperatorStateData, OperatorStateMode, PartitionableListState

__all__ = [
    "BroadcastState",
    "OperatorStateBackend",
    "OperatorStateData",
    "OperatorStateMode",
    "PartitionableListState",
    "repartition",
]
