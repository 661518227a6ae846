"""Key groups, Flink's unit of rescaling: pure functions with checked preconditions.

A key's group is ``murmurHash(hashCode(key)) % max_parallelism``; operator ``i`` of
``p`` owns a contiguous range of groups. Results equal Flink's
``KeyGroupRangeAssignment``; unlike Flink, every argument is checked.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from ..types.mapping import infer_type, to_type_info
from .hashing import key_hash_code, murmur_hash

UPPER_BOUND_MAX_PARALLELISM = 1 << 15
DEFAULT_LOWER_BOUND_MAX_PARALLELISM = 1 << 7


@dataclass(frozen=True, slots=True)
class KeyGroupRange:
    """The key groups ``start`` to ``end``, both inclusive (empty when ``end < start``)."""

    start: int
    end: int

    def __post_init__(self) -> None:
        if self.start < 0 or self.end < self.start - 1:
            raise InvalidArgumentError(
                f"invalid key-group range {self.start}..{self.end}", code="INVALID_KEY_GROUP_RANGE"
            )

    @classmethod
    def of(cls, start: int, end: int) -> KeyGroupRange:
        return cls(start, end)

    @property
    def number_of_key_groups(self) -> int:
        return self.end - self.start + 1

    def __len__(self) -> int:
        return self.end - self.start + 1

    def __contains__(self, key_group: object) -> bool:
        return isinstance(key_group, int) and self.start <= key_group <= self.end

    def __iter__(self) -> Iterator[int]:
        return iter(range(self.start, self.end + 1))

    def intersection(self, other: KeyGroupRange) -> KeyGroupRange:
        start, end = max(self.start, other.start), min(self.end, other.end)
        return KeyGroupRange(start, end) if start <= end else KeyGroupRange(0, -1)

    def __str__(self) -> str:
        return f"KeyGroupRange{{start={self.start}, end={self.end}}}"


def check_max_parallelism(max_parallelism: int) -> int:
    """Return ``max_parallelism`` if it is an int in 1..32768, else raise."""
    if type(max_parallelism) is not int or not 1 <= max_parallelism <= UPPER_BOUND_MAX_PARALLELISM:
        raise InvalidArgumentError(
            f"max parallelism must be an int in 1..{UPPER_BOUND_MAX_PARALLELISM}, got {max_parallelism!r}",
            code="INVALID_MAX_PARALLELISM",
        )
    return max_parallelism


def _check_parallelism(max_parallelism: int, parallelism: int) -> None:
    check_max_parallelism(max_parallelism)
    if type(parallelism) is not int or not 1 <= parallelism <= max_parallelism:
        raise InvalidArgumentError(
            f"parallelism must be an int in 1..max parallelism ({max_parallelism}), got {parallelism!r}",
            code="INVALID_PARALLELISM",
        )


def compute_key_group_for_key_hash(key_hash: int, max_parallelism: int) -> int:
    """The key group of a key with Java hash code ``key_hash``."""
    check_max_parallelism(max_parallelism)
    if not -(1 << 31) <= key_hash < 1 << 31:
        raise InvalidArgumentError(f"hash code {key_hash} is not a 32-bit int", code="INVALID_KEY")
    return murmur_hash(key_hash) % max_parallelism


def assign_to_key_group(key: Any, max_parallelism: int, key_type: Any = None) -> int:
    """The key group of ``key``; ``key_type`` (a type or ``pyarrow`` type) or inferred."""
    check_max_parallelism(max_parallelism)
    if key is None:
        raise InvalidArgumentError("a key must not be None", code="INVALID_KEY")
    resolved = infer_type(key) if key_type is None else to_type_info(key_type)
    return murmur_hash(key_hash_code(key, resolved)) % max_parallelism


def compute_key_group_range_for_operator_index(
    max_parallelism: int, parallelism: int, operator_index: int
) -> KeyGroupRange:
    """The key groups that operator ``operator_index`` of ``parallelism`` owns."""
    _check_parallelism(max_parallelism, parallelism)
    if type(operator_index) is not int or not 0 <= operator_index < parallelism:
        raise InvalidArgumentError(
            f"operator index must be in 0..{parallelism - 1}, got {operator_index!r}",
            code="INVALID_OPERATOR_INDEX",
        )
    start = (operator_index * max_parallelism + parallelism - 1) // parallelism
    end = ((operator_index + 1) * max_parallelism - 1) // parallelism
    return KeyGroupRange(start, end)


def compute_operator_index_for_key_group(max_parallelism: int, parallelism: int, key_group: int) -> int:
    """The operator index (of ``parallelism``) that owns ``key_group``."""
    _check_parallelism(max_parallelism, parallelism)
    if type(key_group) is not int or not 0 <= key_group < max_parallelism:
        raise InvalidArgumentError(
            f"key group must be in 0..{max_parallelism - 1}, got {key_group!r}",
            code="INVALID_KEY_GROUP",
        )
    return key_group * parallelism // max_parallelism


def compute_default_max_parallelism(operator_parallelism: int) -> int:
    """Flink's default: 1.5 x parallelism rounded up to a power of two, in 128..32768."""
    if type(operator_parallelism) is not int or operator_parallelism < 1:
        raise InvalidArgumentError(
            f"parallelism must be a positive int, got {operator_parallelism!r}",
            code="INVALID_PARALLELISM",
        )
    wanted = operator_parallelism + operator_parallelism // 2
    rounded = 1 << (wanted - 1).bit_length()
    return min(max(rounded, DEFAULT_LOWER_BOUND_MAX_PARALLELISM), UPPER_BOUND_MAX_PARALLELISM)
