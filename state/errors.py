"""The error hierarchy of flinkstate: one root, a stable code in every message."""

from __future__ import annotations


class FlinkStateError(Exception):
    """Root of every flinkstate error. ``str(err)`` starts with ``[CODE]``."""

    default_code = "FLINKSTATE_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        self.code = code or self.default_code
        self.detail = message
        super().__init__(f"[{self.code}] {message}")

    def __reduce__(self) -> tuple[object, ...]:
        return (_rebuild, (type(self), self.detail, self.code))


def _rebuild(cls: type[FlinkStateError], detail: str, code: str) -> FlinkStateError:
    return cls(detail, code=code)


class InvalidArgumentError(FlinkStateError, ValueError):
    """An argument has a value that is out of range or malformed."""

    default_code = "INVALID_ARGUMENT"


class StateTypeError(FlinkStateError, TypeError):
    """A key, namespace, value or type description has the wrong type."""

    default_code = "TYPE_MISMATCH"


class StateAccessError(FlinkStateError, RuntimeError):
    """State was used in a way its lifecycle does not allow (no key, closed, released)."""

    default_code = "ILLEGAL_STATE_ACCESS"


class StateConflictError(FlinkStateError):
    """A state name is already registered with another kind or mode."""

    default_code = "STATE_CONFLICT"


class StateMigrationError(FlinkStateError):
    """A state cannot be read or re-registered with an incompatible type."""

    default_code = "STATE_MIGRATION"


class SerializationError(FlinkStateError):
    """A value could not be serialized or deserialized with its declared type."""

    default_code = "SERIALIZATION"


class MissingExtraError(FlinkStateError, ImportError):
    """An optional dependency is not installed: the message names the extra to install."""

    default_code = "MISSING_EXTRA"


class ProcessFunctionError(FlinkStateError, RuntimeError):
    """A user's process function raised: the message names the key and the subtask."""

    default_code = "PROCESS_FUNCTION_FAILED"
