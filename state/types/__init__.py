"""Types: PyFlink's ``Types`` and its mapping to Arrow (:mod:`.mapping`), the type
information classes (:mod:`.typeinfo`), and keys as a checkpoint stores them
(:mod:`.canonical`)."""

from .mapping import TypeInformation, Types, to_type_info

__all__ = ["TypeInformation", "Types", "to_type_info"]
