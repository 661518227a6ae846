"""``python -m flinkstate``: the ``flinkstate`` command.

``flinkstate`` is an implicit namespace package: its parts (``flinkstate.state`` from
``state/``, ``flinkstate.checkpoint``, ``flinkstate.connector``, ``flinkstate.cli``) are
mapped from separate folders. ``python -m flinkstate`` needs a module ``flinkstate.__main__``,
so this folder (holding only this file, and no ``__init__.py``) is mapped to ``flinkstate``
itself and the file installed as a single module (``py-modules``). A regular
``flinkstate/__init__.py`` is avoided on purpose: setuptools would install the mapped
folder's ``__init__.py`` as it, turning the namespace into a regular package whose import
would run on every ``import flinkstate.state`` (in Spark's Python workers too). Wheels,
strict editable installs and Spark's workers all keep seeing one namespace.
"""

from flinkstate.cli.app import main

main()
