def decode_block(
    buf: bytes,
    pos: int,
    kg: int,
    state_id: int,
    states: int,
    prefix: int,
    key_kind: int,
    value_kind: int,
    /,
) -> tuple[int, tuple[bytes, bytes | None, None], tuple[bytes, bytes | None, None]] | None: ...
def decode_kryo_block(
    buf: bytes,
    pos: int,
    kg: int,
    state_id: int,
    states: int,
    prefix: int,
    key_kind: int,
    fields: bytes,
    kryo: int,
    class_id: int,
    java_class: bytes,
    /,
) -> (
    tuple[int, tuple[bytes, bytes | None, None], tuple[tuple[bytes, bytes | None, bytes | None], ...], int]
    | None
): ...
