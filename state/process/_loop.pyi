from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import Any, TypeVar

_T = TypeVar("_T", bound=tuple[Any, ...])

def process_keyed(
    spec: list[Any],
    set_key: Callable[[Any], None],
    keys: Iterable[Any],
    values: Iterable[Any],
    stamps: Iterable[int | None] | None,
    function: Callable[[Any, Any], Iterable[Any] | None],
    ctx: Any,
    output: list[Any],
    fail: Callable[[Exception], BaseException],
    delay: int | None,
    watermark: int,
    advance: Callable[[int], int],
    /,
) -> None: ...
def rows(cls: type[_T], columns: Sequence[list[Any]], /) -> Iterator[_T]: ...
