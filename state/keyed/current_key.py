"""The current key of a keyed backend: checked, coerced, canonical, and its key group.

:class:`CurrentKey` is the part of :class:`~.backend.AbstractKeyedStateBackend` that every
record goes through (:meth:`CurrentKey.set_current_key`); states read the key and its
key-group index from the shared :class:`KeyContext`.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Callable
from typing import Any

from ..errors import InvalidArgumentError, SerializationError, StateTypeError
from ..keygroups.assignment import KeyGroupRange, check_max_parallelism
from ..keygroups.hashing import key_group_assigner
from ..types.canonical import canonicalizer
from ..types.mapping import TypeInformation, infer_type, to_type_info


class NoKey:
    """Stands for "no current key" so the hot path needs no check."""


class KeyContext:
    """The current key and its key-group index within the backend's range."""

    __slots__ = ("key", "kgi")

    def __init__(self) -> None:
        self.key: Any = None
        self.kgi = -1


def _int_like(key: Any) -> bool:
    return hasattr(key, "__index__") and not isinstance(key, bool)


def _dtype_kind(key: Any) -> str | None:
    """A numpy scalar's kind ("f" float, "b" bool, ...), ``None`` for other values."""
    kind = getattr(getattr(key, "dtype", None), "kind", None)
    return kind if isinstance(kind, str) else None


class CurrentKey(ABC):
    """The key scope of a backend over the key groups ``key_group_range`` of ``max_parallelism``."""

    def __init__(self, key_type: Any, max_parallelism: int, key_group_range: KeyGroupRange | None) -> None:
        self._max_p = check_max_parallelism(max_parallelism)
        full = KeyGroupRange(0, max_parallelism - 1)
        rng = full if key_group_range is None else key_group_range
        if not isinstance(rng, KeyGroupRange) or len(rng) == 0 or rng.intersection(full) != rng:
            raise InvalidArgumentError(
                f"key-group range {rng} is not a non-empty part of 0..{max_parallelism - 1}",
                code="INVALID_KEY_GROUP_RANGE",
            )
        self.key_group_range = rng
        self._kg_start, self._kg_count = rng.start, len(rng)
        self._ctx = KeyContext()
        self._key_type: TypeInformation | None = None
        self._key_pytype: type = NoKey
        self._fast_pytype: type = NoKey
        self._key_canon: Callable[[Any], Any] | None = None
        self._kg_fn: Callable[[Any, int], int] = lambda key, max_p: 0
        self._key_listeners: list[Callable[[], None]] = []
        self._key_spec: list[Any] = []
        self._describe_key_setter()
        if key_type is not None:
            self._set_key_type(to_type_info(key_type))

    @abstractmethod
    def _check_open(self) -> None:
        """Raise if the backend is closed."""

    @property
    def max_parallelism(self) -> int:
        return self._max_p

    @property
    def key_type(self) -> TypeInformation | None:
        """The key type: declared, or inferred from the first key (``None`` before it)."""
        return self._key_type

    def _set_key_type(self, key_type: TypeInformation) -> None:
        self._key_type = key_type
        self._key_pytype = key_type.python_type
        self._key_canon = canonicalizer(key_type)
        # a key with float parts always takes the slow path, which puts it in canonical form
        self._fast_pytype = NoKey if self._key_canon is not None else self._key_pytype
        self._kg_fn = key_group_assigner(key_type)
        self._describe_key_setter()

    def _describe_key_setter(self) -> None:
        self._key_spec[:] = (
            self._fast_pytype,
            self._kg_fn,
            self._max_p,
            self._kg_start,
            self._kg_count,
            self._ctx,
            self._key_listeners,
        )

    @property
    def key_setter_spec(self) -> list[Any] | None:
        """What :meth:`set_current_key` does for a key of the backend's Python type, for a
        C loop to do it per record: ``[python key type, key-group function, max
        parallelism, range start, range count, key context, key listeners]``, kept up to
        date in place (read it per record). ``None`` when a subclass or the instance
        replaces the setter."""
        if type(self).set_current_key is not CurrentKey.set_current_key or "set_current_key" in vars(self):
            return None
        return self._key_spec

    def set_current_key(self, key: Any) -> None:
        """Make ``key`` the key that every state of this backend reads and writes."""
        if type(key) is not self._fast_pytype:
            key = self._check_key(key)
        try:
            kgi = self._kg_fn(key, self._max_p) - self._kg_start
        except (OverflowError, TypeError, ValueError, SerializationError) as exc:
            raise StateTypeError(
                f"key {key!r} is not a valid {self._key_type} key: {exc}", code="INVALID_KEY"
            ) from exc
        if kgi < 0 or kgi >= self._kg_count:
            raise InvalidArgumentError(
                f"key {key!r} belongs to key group {kgi + self._kg_start}, outside this "
                f"backend's {self.key_group_range}",
                code="KEY_GROUP_OUT_OF_RANGE",
            )
        ctx = self._ctx
        ctx.key = key
        ctx.kgi = kgi
        if self._key_listeners:
            for listener in self._key_listeners:
                listener()

    def _check_key(self, key: Any) -> Any:
        """The slow path of :meth:`set_current_key`: infer, validate or coerce the key, and
        put it in canonical form (:mod:`.canonical`: floats by bits, FLOAT parts rounded)."""
        canon = self._key_canon
        if canon is not None and type(key) is self._key_pytype:
            return canon(key)  # of the backend's own type: what the fast path checks, plus the rule
        key = self._coerce_key(key)
        canon = self._key_canon  # the first key may have just set the type
        return key if canon is None else canon(key)

    def _coerce_key(self, key: Any) -> Any:
        self._check_open()
        if key is None:
            raise InvalidArgumentError("a key must not be None", code="INVALID_KEY")
        if self._key_type is None:
            self._set_key_type(infer_type(key))
            if type(key) is self._key_pytype:
                return key
        expected = self._key_pytype
        if expected is int and _int_like(key):
            return int(key)
        if expected is float and (isinstance(key, float) or _int_like(key) or _dtype_kind(key) == "f"):
            return float(key)
        if expected is bytes and isinstance(key, (bytes, bytearray, memoryview)):
            return bytes(key)
        if expected is tuple and isinstance(key, tuple):
            return tuple(key)  # namedtuples and Rows: keys are values, stored as plain tuples
        if expected is bool and _dtype_kind(key) == "b":
            return bool(key)  # numpy booleans
        if expected is str and isinstance(key, str):
            return str.__str__(key)
        if expected is object or (
            isinstance(key, expected) and not (expected is int and isinstance(key, bool))
        ):
            return key
        raise StateTypeError(
            f"key {key!r} ({type(key).__name__}) does not match the backend's key type {self._key_type}",
            code="KEY_TYPE_MISMATCH",
        )

    def get_current_key(self) -> Any:
        """The current key, ``None`` before the first :meth:`set_current_key`."""
        return self._ctx.key

    @property
    def key_context(self) -> KeyContext:
        """The live holder of the current key (read it, never write it): what the states
        of this backend read, and the cheapest way to read the current key per record."""
        return self._ctx

    def get_current_key_group(self) -> int | None:
        kgi = self._ctx.kgi
        return None if kgi < 0 else kgi + self._kg_start

    def register_key_selection_listener(self, listener: Callable[[], None]) -> None:
        """Call ``listener()`` after every :meth:`set_current_key`."""
        self._key_listeners.append(listener)
