"""Types: PyFlink's ``Types`` and its mapping to Arrow (:mod:`.mapping`), the type
information classes (:mod:`.typeinfo`, :mod:`.pojo`), and keys as a checkpoint stores them
(:mod:`.canonical`).

The face of this package: the type information classes, and the canonical forms of keys
and values that readers and writers of checkpoints share."""

from .canonical import canonical_float, canonical_nans, key_token
from .mapping import TypeInformation, Types, to_type_info
from .pojo import PojoTypeInfo
from .typeinfo import (
    ArrowTypeInfo,
    BasicTypeInfo,
    ListTypeInfo,
    MapTypeInfo,
    PickledBytesTypeInfo,
    RowTypeInfo,
)

__all__ = [
    "ArrowTypeInfo",
    "BasicTypeInfo",
    "ListTypeInfo",
    "MapTypeInfo",
    "PickledBytesTypeInfo",
    "PojoTypeInfo",
    "RowTypeInfo",
    "TypeInformation",
    "Types",
    "canonical_float",
    "canonical_nans",
    "key_token",
    "to_type_info",
]
