from typing import Any

def encode_block(
    prefix: bytes,
    suffix: bytes,
    keys: list[Any],
    key_kind: int,
    values: list[Any],
    value_kind: int,
    stamps: list[Any] | None,
    /,
) -> bytes | None: ...
