"""Every optional C accelerator is built where a compiler is (here and in CI): a failed build
would otherwise fall back to Python silently, and the C-versus-Python tests would test one
side only."""

from __future__ import annotations

import importlib

import pytest

ACCELERATORS = [
    "flinkstate.checkpoint.flink.streams._keyed_columns",
    "flinkstate.state.keygroups._hashing",
    "flinkstate.state.heap._tables",
    "flinkstate.state.heap._valuepath",
    "flinkstate.state.process._loop",
    "flinkstate.state.process._timerpath",
    "flinkstate.state.serializers._batch",
]


@pytest.mark.parametrize("name", ACCELERATORS)
def test_the_accelerator_is_built(name: str) -> None:
    module = importlib.import_module(name)
    assert module.__file__ is not None and module.__file__.endswith(".so")


def test_backends_assign_key_groups_with_the_c_functions() -> None:
    """LONG, INT and STRING keys get the hashing module's C functions: the ones the process
    loop (``_loop.c``) recognizes by pointer to compute key groups without a call."""
    from flinkstate.state.keygroups import hashing
    from flinkstate.state.types.typeinfo import BasicTypeInfo

    assert hashing._hashing is not None
    for name in ("LONG", "INT", "STRING"):
        fn = hashing.key_group_assigner(BasicTypeInfo(name))
        assert fn is getattr(hashing._hashing, f"key_group_for_{name.lower()}")
