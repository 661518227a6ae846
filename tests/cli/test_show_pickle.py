"""``show --allow-pickle``: as the source's ``allowPickle``, pickled values are loaded only when
allowed (a state whose files are merged needs them); without it, a typed refusal and no
pickle is loaded."""

from __future__ import annotations

import json
import pickle
from pathlib import Path
from typing import Any

import pytest
from conftest import Run

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import HeapKeyedStateBackend, Types, ValueStateDescriptor

PICKLED = ValueStateDescriptor("obj", Types.PICKLED_BYTE_ARRAY())
LOADED: list[str] = []


def _rebuild(label: str, payload: Any) -> Tripwire:
    LOADED.append(label)
    return Tripwire(label, payload)


class Tripwire:
    """A value that records every load from a pickle (loading a pickle runs code)."""

    def __init__(self, label: str, payload: Any) -> None:
        self.label, self.payload = label, payload

    def __reduce__(self) -> tuple[Any, tuple[str, Any]]:
        return (_rebuild, (self.label, self.payload))


def _write(root: str, incremental: bool) -> dict[str, Any]:
    """Two checkpoints: every key, then a few updated and one removed; the second is an
    increment (its files merged when read) or full. Returns the model of the second."""
    storage = CheckpointStorage(root, incremental=incremental)
    backend = HeapKeyedStateBackend(key_type=Types.STRING())
    state = backend.get_state(PICKLED)
    model: dict[str, Any] = {}
    for version, keys in ((1, [f"k-{i}" for i in range(40)] + ["ünï-😀"]), (2, ["k-3", "ünï-😀"])):
        for key in keys:
            backend.set_current_key(key)
            model[key] = {"v": version, "key": key, "set": frozenset({version})}
            state.update(Tripwire(key, model[key]))
        if version == 2:
            backend.set_current_key("k-7")
            state.clear()
            del model["k-7"]
        pending = storage.begin()
        pending.write_keyed("op", backend)
        backend.notify_checkpoint_complete(pending.commit().checkpoint_id)
    return model


def _shown(run: Run, root: str, *args: str) -> dict[str, Any]:
    rows = json.loads(run("show", root, "op", "obj", "--format", "json", *args).stdout)
    values = {r["key"]: pickle.loads(bytes(r["value"])) for r in rows}
    assert len(values) == len(rows)
    return {k: v.payload for k, v in values.items()}


def test_an_incremental_pickled_state_needs_allow_pickle(tmp_path: Path, run: Run) -> None:
    root = str(tmp_path / "root")
    model = _write(root, incremental=True)
    LOADED.clear()
    refused = run("show", root, "op", "obj", "--format", "json", code=3)
    assert "[PICKLE_NOT_ALLOWED]" in refused.stderr and "--allow-pickle" in refused.stderr
    assert LOADED == []  # no pickle was loaded, so no code ran
    LOADED.clear()
    assert _shown(run, root, "--allow-pickle") == model
    assert LOADED  # the merge loaded them (the test's own pickle.loads come after)
    assert _shown(run, root, "--allow-pickle", "--key", "k-3") == {"k-3": model["k-3"]}


@pytest.mark.parametrize("allow", [False, True])
def test_a_full_pickled_state_shows_its_pickles_either_way(tmp_path: Path, run: Run, allow: bool) -> None:
    root = str(tmp_path / "root")
    model = _write(root, incremental=False)
    LOADED.clear()
    args = ["--allow-pickle"] if allow else []
    rows = json.loads(run("show", root, "op", "obj", "--format", "json", *args).stdout)
    assert LOADED == []  # shown as stored: nothing needed loading
    assert {r["key"]: pickle.loads(bytes(r["value"])).payload for r in rows} == model
