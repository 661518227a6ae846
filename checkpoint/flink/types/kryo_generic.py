"""A POJO's ``List<String>`` field as Flink 1.x writes it: a Kryo GenericType.

Flink 1.x's type extraction gives a POJO's ``List`` field a ``GenericTypeInfo`` (a
``KryoSerializer`` of ``java.util.List``); its bytes are ``writeClassAndObject`` of the
``ArrayList`` with Kryo 2, and, no generics being known there, each element is
``writeClassAndObject`` too: String's default class id (1, written 3) and a new-object marker
before its chars, or the null class 0 (checked against Flink 1.20.5's bytes of
``tests/fixtures/flink/MigrateJob.java``). Flink 2.x gives the same field
``Nullable(List(Nullable(String)))`` (:mod:`.nullable`). Such a field is read once declared
``ARRAY<STRING>`` (:mod:`..reader.kryo_declared`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from flinkstate.state.errors import SerializationError

from ..errors import DeclaredTypeError
from .kryo_lists import Names, list_reader
from .kryo_read import kryo_string, varint
from .values_read import _ReadOnly

#: The Kryo classes of a POJO's List field (its declared type; the class of its values).
LIST_CLASSES = ("java.util.List", "java.util.ArrayList")
_STRING_CLASS = 3  # Kryo's default registration of java.lang.String (id 1), as written


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    return varint(buf, pos, 5)


def _element(buf: bytes, pos: int) -> tuple[Any, int]:
    class_id, pos = _varint(buf, pos)
    if class_id == 0:
        return None, pos
    if class_id != _STRING_CLASS:
        raise SerializationError(f"an element of Kryo class id {class_id - 2}, not a String")
    marker, pos = _varint(buf, pos)
    if marker != 1:
        raise SerializationError(f"reference marker {marker} (a Kryo back reference is not supported)")
    return kryo_string(buf, pos)


class KryoStringList(_ReadOnly):
    """Reads a GenericType ``List<String>`` (``kryo``: the values' Kryo major, or a function
    giving it; only Kryo 2's layout is read)."""

    def __init__(self, kryo: int | Callable[[], int], what: str) -> None:
        self._kryo = kryo
        self.what = what
        self._names = Names()
        self._list = list_reader(2, self._names, _varint, kryo_string, lambda _: _element)

    def read(self, buf: bytes, pos: int) -> tuple[Any, int]:
        kryo = self._kryo if isinstance(self._kryo, int) else self._kryo()
        if kryo != 2:
            raise DeclaredTypeError(
                f"{self.what}: a Kryo {kryo} GenericType List is not read yet (only Flink 1.x's Kryo 2)"
            )
        self._names.reset()
        try:
            return self._list(buf, pos)
        except (SerializationError, IndexError, UnicodeDecodeError) as exc:
            raise DeclaredTypeError(f"{self.what} does not fit the Kryo bytes at byte {pos}: {exc}") from exc

    def __repr__(self) -> str:
        return "KryoStringList"
