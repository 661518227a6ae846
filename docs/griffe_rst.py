"""A griffe extension for the API pages: our docstrings cross-reference in Sphinx's roles
(``:func:`write_savepoint```); Markdown has none, so each role becomes its code span."""

from __future__ import annotations

import re
from typing import Any

import griffe

_ROLE = re.compile(r":(?:func|class|mod|meth|data|attr|exc):`~?\.?([^`]+)`")


class RstRoles(griffe.Extension):
    def on_object(self, *, obj: griffe.Object, **kwargs: Any) -> None:
        if obj.docstring is not None:
            obj.docstring.value = _ROLE.sub(r"`\1`", obj.docstring.value)
