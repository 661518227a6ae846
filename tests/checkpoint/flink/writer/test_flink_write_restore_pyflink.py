"""The ``flink`` tier for PyFlink Python state: savepoints our writer wrote (process and thread
mode), restored by a PyFlink 2.3 job on both state backends, every value compared with the
model (PyFlink 1.20 too, where ``$FLINK120_VENV`` names one, restoring what was written for
it); and the PyFlink fixture written back, restored with the values its job wrote.

Runs only where ``$FLINK_VENV`` names a virtualenv holding ``apache-flink==2.3.0``; each
restore takes about a minute of CPU.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from flink_model import FIXTURES
from flink_restore import flink_lib
from pyflink_restore import restore_pyflink
from pyflink_write_model import LAYOUT, build_checkpoint, expected_lines, modes, render, spec

from flinkstate.checkpoint.flink import read_savepoint, write_savepoint

pytestmark = [
    pytest.mark.flink,
    pytest.mark.skipif(
        flink_lib() is None, reason="needs $FLINK_VENV with apache-flink 2.3 (make test-flink)"
    ),
]


_RELEASES = {"2.3": "FLINK_VENV", "1.20": "FLINK120_VENV"}


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
@pytest.mark.parametrize("mode", sorted(LAYOUT))
@pytest.mark.parametrize("release", sorted(_RELEASES))
def test_pyflink_restores_every_value(tmp_path: Path, mode: str, backend: str, release: str) -> None:
    """Written for the release (``flink_version``), restored by that release's PyFlink."""
    venv = os.environ.get(_RELEASES[release])
    if not venv:
        pytest.skip(f"needs ${_RELEASES[release]} for PyFlink {release} (make test-flink)")
    source = build_checkpoint(str(tmp_path / "checkpoint"), mode)
    layout = LAYOUT[mode]
    target = tmp_path / "savepoint"
    write_savepoint(
        source, str(target), pyflink_mode=modes(mode), parallelism=layout["parallelism"],
        max_parallelism=layout["max_parallelism"], flink_version=release,
    )  # fmt: skip
    lines = restore_pyflink(target, spec(mode), backend, mode, tmp_path / "work", venv=venv)
    assert lines == expected_lines(mode)


_FIXTURE_STATES = [
    ("py_long", "VALUE", "LONG", None, lambda k: k * 11),
    ("py_string", "VALUE", "STRING", None, lambda k: f"py{k}"),
    ("py_pickled", "VALUE", "PICKLED", None, lambda k: {"k": k}),
    ("py_list", "LIST", "LONG", None, lambda k: [k, k + 1]),
    ("py_map", "MAP", "LONG", "STRING", lambda k: {"a": k}),
    (
        "py_row", "VALUE", ["ROW", ["a", "b", "c"], ["LONG", "STRING", "DOUBLE"]], None,
        lambda k: (k * 7, None if k % 3 == 0 else f"r{k}\u00e9", k / 2),
    ),
]  # fmt: skip


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_pyflink_fixture_written_back_restores(tmp_path: Path, backend: str) -> None:
    """tests/fixtures/flink/pyflink (Flink 2.3 wrote it, process mode), read and written back at
    parallelism 2 and max parallelism 256: PyFlink restores the values its job wrote."""
    written = write_savepoint(
        read_savepoint(str(FIXTURES / "pyflink")), str(tmp_path / "sp"), parallelism=2, max_parallelism=256
    )
    states = [
        {"name": n, "kind": kind, "value_type": t, "user_key_type": u, "ttl": False}
        for n, kind, t, u, _ in _FIXTURE_STATES
    ]
    op = {"uid": "py-states", "key_type": "LONG", "parallelism": 2, "keys": list(range(10)), "states": states}
    lines = restore_pyflink(
        Path(written.directory), json.dumps({"max_parallelism": 256, "operators": [op]}), backend, "process",
        tmp_path / "work",
    )  # fmt: skip
    expected = {
        (name, render(k), render(value(k))) for name, _, _, _, value in _FIXTURE_STATES for k in range(10)
    }
    assert {tuple(json.loads(line)[2:]) for line in lines} == expected
    assert len(lines) == len(expected)
