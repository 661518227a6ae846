"""Key groups: Java ``hashCode`` and Flink's murmur finalizer (:mod:`.hashing`), the pure,
checked assignment of keys and operators to groups (:mod:`.assignment`), and whole Arrow
columns at once (:mod:`.vectorized`). ``_hashing`` is the optional C accelerator.

The face of this package: the assignment functions, a key type's assigner and whether its
hash is Java's (what routes rows to subtasks), and the assignment of whole columns."""

from .assignment import (
    KeyGroupRange,
    assign_to_key_group,
    compute_default_max_parallelism,
    compute_key_group_range_for_operator_index,
    compute_operator_index_for_key_group,
)
from .hashing import java_hashed, key_group_assigner
from .vectorized import assign_key_groups

__all__ = [
    "KeyGroupRange",
    "assign_key_groups",
    "assign_to_key_group",
    "compute_default_max_parallelism",
    "compute_key_group_range_for_operator_index",
    "compute_operator_index_for_key_group",
    "java_hashed",
    "key_group_assigner",
]
