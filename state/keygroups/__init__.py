"""Key groups: Java ``hashCode`` and Flink's murmur finalizer (:mod:`.hashing`), the pure,
checked assignment of keys and operators to groups (:mod:`.assignment`), and whole Arrow
columns at once (:mod:`.vectorized`). ``_hashing`` is the optional C accelerator."""

from .assignment import (
    KeyGroupRange,
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)

__all__ = [
    "KeyGroupRange",
    "assign_to_key_group",
    "compute_default_max_parallelism",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
]
