"""A Java POJO as a state type: Flink's ``PojoTypeInfo``.

A POJO value is a ``tuple`` of its fields (``None``: a null field), in Flink's field order:
by name, as Java's ``String.compareTo`` orders them (UTF-16 code units). Flink serializes a
POJO with its ``PojoSerializer``, which a Flink savepoint names along with the class and each
field's name and serializer; the Java job restoring it must have that class, with those fields
declared by the class itself. A POJO's ``hashCode()`` is the user's: ``hash_fields`` says it is
``java.util.Objects.hash`` over those fields, in that order, which is what keying by the POJO
needs (a key's group is computed from its hash code).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..errors import InvalidArgumentError
from .typeinfo import RowTypeInfo, TypeInformation


def java_order(name: str) -> bytes:
    """A sort key ordering names as Java's ``String.compareTo`` does."""
    return name.encode("utf-16-be", "surrogatepass")


@dataclass(frozen=True, slots=True)
class PojoTypeInfo(RowTypeInfo):
    """A POJO of class ``java_class`` (a Java binary name, e.g. ``com.example.Order$Line``)
    with fields ordered by name; ``hash_fields``: the fields its ``hashCode()`` hashes with
    ``Objects.hash``, in order (None: not stated)."""

    java_class: str = ""
    hash_fields: tuple[str, ...] | None = None

    def __str__(self) -> str:
        return f"POJO {self.java_class}<{self.fields_text()}>"

    def __post_init__(self) -> None:
        RowTypeInfo.__post_init__(self)  # slots dataclasses cannot use super() here
        if not isinstance(self.java_class, str) or not self.java_class.strip():
            raise InvalidArgumentError(
                f"a POJO needs its Java class name, got {self.java_class!r}", code="UNSUPPORTED_TYPE"
            )
        if list(self.field_names) != sorted(self.field_names, key=java_order):
            raise InvalidArgumentError(
                f"POJO {self.java_class}: fields {list(self.field_names)} are not in Flink's order (by "
                "name); Types.POJO orders them",
                code="UNSUPPORTED_TYPE",
            )
        if self.hash_fields is not None:
            object.__setattr__(self, "hash_fields", tuple(self.hash_fields))
            unknown = [f for f in self.hash_fields if f not in self.field_names]
            if unknown:
                raise InvalidArgumentError(
                    f"POJO {self.java_class}: hash fields {unknown} are not among its fields "
                    f"{list(self.field_names)}",
                    code="UNSUPPORTED_TYPE",
                )

    def to_json(self) -> dict[str, Any]:
        out = RowTypeInfo.to_json(self)
        out.update(type="POJO", java_class=self.java_class)
        if self.hash_fields is not None:
            out["hash_fields"] = list(self.hash_fields)
        return out


def pojo(
    java_class: str,
    field_names: Sequence[str],
    field_types: Sequence[TypeInformation],
    hash_fields: Sequence[str] | None = None,
) -> PojoTypeInfo:
    """A :class:`PojoTypeInfo` with its fields put in Flink's order."""
    if len(field_names) != len(field_types):
        raise InvalidArgumentError(
            f"POJO {java_class}: {len(field_names)} field names for {len(field_types)} field types",
            code="UNSUPPORTED_TYPE",
        )
    pairs = sorted(zip(field_names, field_types, strict=True), key=lambda p: java_order(str(p[0])))
    return PojoTypeInfo(
        tuple(t for _, t in pairs),
        tuple(n for n, _ in pairs),
        "ROW",
        java_class,
        None if hash_fields is None else tuple(hash_fields),
    )
