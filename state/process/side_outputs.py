"""Side outputs, as in PyFlink: a function yields ``(output_tag, value)`` to send ``value``
to the side output ``output_tag`` instead of the main output.

:class:`OutputTag` has PyFlink's signature. :func:`split_side_outputs` is the one rule that
tells side outputs from main rows, shared by the test harness and the Spark runner: an
item is a side output when it is a ``tuple`` whose first element is an :class:`OutputTag`
(an output row never holds a tag, so no row is mistaken for one).
"""

from __future__ import annotations

from collections.abc import Collection, Iterable
from typing import Any

from ..errors import InvalidArgumentError, StateTypeError
from ..types.mapping import TypeInformation, Types, to_type_info


class OutputTag:
    """A named, typed tag of a side output (PyFlink's ``OutputTag``).

    ``type_info`` is a type (``Types...`` or a ``pyarrow.DataType``), a list of field
    types (a ``Types.ROW`` of them), or ``None`` (pickled values, PyFlink's default).
    Two tags are equal when their ids are, as Flink's ``OutputTag.equals`` has it.
    """

    __slots__ = ("tag_id", "type_info")

    def __init__(self, tag_id: str, type_info: TypeInformation | list[Any] | Any = None) -> None:
        if not isinstance(tag_id, str) or not tag_id:
            raise InvalidArgumentError(
                f"OutputTag tag_id must be a non-empty str, got {tag_id!r}", code="SIDE_OUTPUT_INVALID"
            )
        self.tag_id = tag_id
        if type_info is None:
            self.type_info: TypeInformation = Types.PICKLED_BYTE_ARRAY()
        elif isinstance(type_info, list):
            self.type_info = Types.ROW(type_info)
        else:
            try:
                self.type_info = to_type_info(type_info)
            except StateTypeError as exc:
                raise StateTypeError(
                    f"OutputTag type_info must be None, a list or a type, got {type_info!r}",
                    code="SIDE_OUTPUT_INVALID",
                ) from exc

    def __eq__(self, other: object) -> bool:
        return isinstance(other, OutputTag) and other.tag_id == self.tag_id

    def __hash__(self) -> int:
        return hash(("OutputTag", self.tag_id))

    def __repr__(self) -> str:
        return f"OutputTag({self.tag_id!r}, {self.type_info})"

    def __reduce__(self) -> tuple[object, ...]:
        return (OutputTag, (self.tag_id, self.type_info))


def tag_id_of(tag: OutputTag | str) -> str:
    """The id of ``tag`` (a tag or its id)."""
    if isinstance(tag, OutputTag):
        return tag.tag_id
    if isinstance(tag, str) and tag:
        return tag
    raise InvalidArgumentError(f"expected an OutputTag or its id, got {tag!r}", code="SIDE_OUTPUT_INVALID")


def split_side_outputs(
    items: Iterable[Any], side: dict[str, list[Any]], known: Collection[str] | None = None
) -> list[Any]:
    """The main rows of ``items``, in order; each ``(tag, value)`` appends ``value`` to
    ``side[tag.tag_id]`` instead. With ``known``, a tag id outside it is an error
    (``[SIDE_OUTPUT_UNKNOWN_TAG]``)."""
    main: list[Any] = []
    for item in items:
        if not (isinstance(item, tuple) and item and isinstance(item[0], OutputTag)):
            main.append(item)
            continue
        if len(item) != 2:
            raise InvalidArgumentError(
                f"a side output is yielded as (output_tag, value); got {len(item)} items {item!r}",
                code="SIDE_OUTPUT_INVALID",
            )
        tag_id = item[0].tag_id
        if known is not None and tag_id not in known:
            raise InvalidArgumentError(
                f"the function yielded to side output {tag_id!r}, which the run does not declare "
                f"(side outputs: {sorted(known)}): pass its OutputTag in side_outputs=",
                code="SIDE_OUTPUT_UNKNOWN_TAG",
            )
        side.setdefault(tag_id, []).append(item[1])
    return main


__all__ = ["OutputTag", "split_side_outputs", "tag_id_of"]
