"""The manifest's indented JSON writer gives exactly what ``json.dumps(indent=1)`` gives (the
model), so manifests stay byte for byte what earlier versions wrote and read."""

from __future__ import annotations

import enum
import json
from collections import OrderedDict
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from flinkstate.checkpoint.jsontext import dumps_indented
from flinkstate.checkpoint.manifest import FileRef, Manifest, OperatorEntry, SubtaskEntry
from flinkstate.state import Types
from flinkstate.state.descriptors import StateKind
from flinkstate.state.keyed.snapshot import StateMetaInfo


def _model(doc: Any) -> str:
    return json.dumps(doc, indent=1, ensure_ascii=True)


class Level(enum.IntEnum):
    LOW = 3


scalars = (
    st.none() | st.booleans() | st.integers() | st.integers(-(2**70), 2**70)
    | st.floats(allow_nan=True, allow_infinity=True) | st.text()
    | st.sampled_from(["", "é", "键🔑", "a\x00b\n\"\\", "\ud800"])
)  # fmt: skip
keys = st.text() | st.integers() | st.floats() | st.booleans() | st.none()
docs = st.recursive(
    scalars,
    lambda inner: (
        st.lists(inner, max_size=6)
        | st.lists(st.integers(), max_size=5)
        | st.lists(inner, max_size=4).map(tuple)
        | st.dictionaries(keys, inner, max_size=5)
    ),
    max_leaves=60,
)


@settings(max_examples=250, deadline=None)
@given(docs)
def test_any_document_is_the_model(doc: Any) -> None:
    assert dumps_indented(doc) == _model(doc)


def test_edge_values_are_the_model() -> None:
    deep: Any = [1]
    for _ in range(80):  # deeper than the cached indents
        deep = {"d": [deep, "x"]}
    docs = [
        [], {}, [[]], {"a": {}}, [1, True, False, None, 2], (1, 2), [Level.LOW, 1],
        {Level.LOW: Level.LOW, 1.5: float("nan"), True: -0.0, None: float("-inf")},
        OrderedDict([("z", 1), ("a", [1, [2, [3]]])]), deep, "top", 7, None,
    ]  # fmt: skip
    for doc in docs:
        assert dumps_indented(doc) == _model(doc)


@pytest.mark.parametrize("bad", [{(1, 2): 1}, [object()], {"a": {1, 2}}, [b"bytes"]])
def test_what_json_refuses_is_refused(bad: Any) -> None:
    with pytest.raises(TypeError):
        _model(bad)
    with pytest.raises(TypeError):
        dumps_indented(bad)


def test_a_manifest_with_long_chains_is_what_json_writes() -> None:
    meta = StateMetaInfo("s ✓", StateKind.MAP, Types.STRING(), Types.LONG(), Types.STRING())
    chain = tuple(
        FileRef(f"../chk-{i}/f{i}.parquet", 100 + i, "ab" * 32, 5 * i,
                {kg: (n, kg + 1) for n, kg in enumerate(range(0, 256, 1 + i))},
                "cd" * 32, i, i > 0)
        for i in range(11)
    )  # fmt: skip
    subtask = SubtaskEntry(0, (0, 255), {"s ✓": chain}, {}, {}, None, None, {"s ✓": chain[-1:]})
    op = OperatorEntry("op", 1, 256, Types.LONG(), (meta,), (), (subtask,))
    manifest = Manifest(12, "checkpoint", (op,), {"ключ": "значение"}, 1_700_000_000_000, True)
    data = manifest.to_bytes()
    doc = json.loads(data)
    assert data == _model(doc).encode()
    assert Manifest.from_bytes(data) == manifest
