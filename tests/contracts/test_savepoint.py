"""The savepoint contract: whoever wrote a Flink savepoint, our reader finds in it what its writer
put there, a read of some key groups is the full read's rows of those key groups, and our writer
writes it back, on every storage, with nothing changed for the reader (or refuses it by code
before writing anything: ``REFUSED_WRITES``). Runs on every writer of savepoints we have
(``SOURCES``):

- ``ours-inline``, ``ours-mixed``: ``write_savepoint`` from our checkpoint of the model of
  ``tests/checkpoint/flink/write_model.py``, in each layout of its ``WRITTEN`` (every stream
  inline at the source's parallelism; rescaled, larger streams in files), written afresh;
- ``restored-inline``, ``restored-mixed``: the same savepoints as committed in
  ``tests/fixtures/flink/written/``, the bytes Flink 2.3 restored on both of its backends (that
  the writer still writes them byte for byte: ``checkpoint/flink/writer/test_flink_write_fixtures.py``);
- ``flink-<fixture>``: Flink 2.3's own savepoints and retained checkpoints of FixtureJob.java
  (``tests/fixtures/flink``): heap and RocksDB, canonical and native, snappy, inline and in files.

What a writer put there is its model: ``write_model.rows`` for ours; for Flink's, the value, list
and map states of ``flink_model`` for every key (a heap checkpoint frames values by serializer, so
the states after its Kryo state are refused by code, never misread).
"""

from __future__ import annotations

import dataclasses
import math
import re
from collections.abc import Iterator
from typing import Any

import pytest
from flink_model import ALL, FIXTURES, HEAP_CHECKPOINT_READABLE, KEYS, LISTS, MAPS, VALUES, made
from write_model import WRITTEN, build_checkpoint, read_rows, rows

from flinkstate.checkpoint import Storage
from flinkstate.checkpoint.errors import CheckpointError
from flinkstate.checkpoint.flink import (
    FlinkSavepoint,
    UnsupportedFlinkWriteError,
    read_savepoint,
    write_savepoint,
)

SOURCES = [
    *(f"ours-{n}" for n in WRITTEN),
    *(f"restored-{n}" for n in WRITTEN),
    *(f"flink-{k}" for _, k in made(ALL, ["2.3"])),
]
REFUSED_CODES = r"\[(UNSUPPORTED_SERIALIZER|FLINK_UNSUPPORTED)\]"
"""How the reader refuses a state it cannot decode (never a wrong value)."""

REFUSED_WRITES = {"flink-heap_checkpoint": "cannot be carried as bytes"}
"""Sources the writer refuses to write back, by code and before any file is written: a heap
checkpoint frames its entries by their serializers, so its Kryo state can be neither encoded
again nor carried as bytes."""

View = dict[tuple[str, str], Any]
"""(operator id, state) -> the state's rows as compared (sorted reprs), or the code it is refused with."""


@pytest.fixture(scope="module", params=SOURCES)
def savepoint(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> tuple[str, FlinkSavepoint]:
    """(source name, the savepoint read by our reader)."""
    name: str = request.param
    writer, _, which = name.partition("-")
    if writer == "ours":
        checkpoint = build_checkpoint(str(tmp_path_factory.mktemp("model") / "checkpoint"))
        written = str(tmp_path_factory.mktemp(name) / "savepoint")
        return name, write_savepoint(checkpoint, written, **WRITTEN[which])
    if writer == "restored":
        return name, read_savepoint(str(FIXTURES / "written" / which / "savepoint"))
    return name, read_savepoint(str(FIXTURES / which))


def _shape(sp: FlinkSavepoint) -> set[tuple[str, int, int]]:
    """Each operator's id (the uid's hash), parallelism and max parallelism."""
    return {(o.operator_id, o.parallelism, o.max_parallelism) for o in sp.operators}


def _states(sp: FlinkSavepoint) -> list[str]:
    """Every state's operator id, name, kind and types (the uid and name of its operator left
    out: the writer writes ``_metadata`` version 3, which records neither)."""
    return sorted(repr(dataclasses.replace(s, operator_uid="", operator_name="")) for s in sp.states())


def _compared(table: Any) -> list[str]:
    """A table's rows as compared: reprs keep NaN equal to itself and -0.0 apart from 0.0."""
    return sorted(repr(row) for row in table.to_pylist())


def _view(sp: FlinkSavepoint) -> View:
    """Every keyed and operator state of ``sp`` as the reader gives it (or refuses it)."""
    out: View = {}
    for s in sp.states():
        try:
            out[s.operator_id, s.name] = _compared(sp.state(s.operator_id, s.name))
        except CheckpointError as exc:
            refused = re.search(REFUSED_CODES, str(exc))
            assert refused, exc
            out[s.operator_id, s.name] = refused.group(1)
    return out


def _flink_readable(fixture: str, state: str) -> bool:
    return fixture != "heap_checkpoint" or state in HEAP_CHECKPOINT_READABLE


def _flink_found(sp: FlinkSavepoint, fixture: str) -> dict[str, dict[int, Any]]:
    """State -> key -> value of FixtureJob's keyed states, in flink_model's terms."""
    found: dict[str, dict[int, Any]] = {}
    for state in (*VALUES, *LISTS, *MAPS):
        if not _flink_readable(fixture, state):
            with pytest.raises(CheckpointError, match=REFUSED_CODES):
                sp.keyed_state("keyed-states", state)
            continue
        table = sp.keyed_state("keyed-states", state).to_pylist()
        if state in LISTS:
            by_key: dict[int, Any] = {}
            for r in sorted(table, key=lambda r: (r["key"], r["position"])):
                by_key.setdefault(r["key"], []).append(r["value"])
        elif state in MAPS:
            by_key = {}
            for r in table:
                by_key.setdefault(r["key"], {})[r["user_key"]] = r["value"]
        else:
            by_key = {r["key"]: sorted(r["value"]) if state == "v_map" else r["value"] for r in table}
            assert len(by_key) == len(table), f"{state}: a key twice"
        found[state] = by_key
    return found


def _flink_model(fixture: str) -> dict[str, dict[int, Any]]:
    models = {**VALUES, **LISTS, **MAPS}
    return {s: {k: models[s](k) for k in KEYS} for s in models if _flink_readable(fixture, s)}


def test_the_reader_finds_what_the_writer_put_there(savepoint: tuple[str, FlinkSavepoint]) -> None:
    name, sp = savepoint
    writer, _, which = name.partition("-")
    if writer != "flink":
        assert read_rows(sp) == set(rows())
        return
    found, want = _flink_found(sp, which), _flink_model(which)
    assert sorted(found) == sorted(want)
    for state, by_key in want.items():
        for key, value in by_key.items():
            got = found[state].get(key)
            close = isinstance(value, float) and got is not None and math.isclose(got, value)
            assert close or got == value, (state, key, got, value)


def _keyed_tables(sp: FlinkSavepoint) -> Iterator[tuple[str, str, Any]]:
    """(operator, state, table) of every keyed state the reader decodes (the others it refuses by code)."""
    for s in sp.states():
        if not s.key_type:  # operator state
            continue
        operator = s.operator_uid or s.operator_id
        try:
            yield operator, s.name, sp.keyed_state(operator, s.name)
        except CheckpointError as exc:
            assert re.search(REFUSED_CODES, str(exc)), exc


def test_a_read_of_some_key_groups_is_the_full_reads_rows_of_them(
    savepoint: tuple[str, FlinkSavepoint],
) -> None:
    _, sp = savepoint
    checked = 0
    for operator, state, table in _keyed_tables(sp):
        full = table.to_pylist()
        chosen = set(sorted({r["key_group"] for r in full})[::2])
        part = sp.keyed_state(operator, state, key_groups=chosen).to_pylist()
        assert sorted(map(repr, part)) == sorted(repr(r) for r in full if r["key_group"] in chosen), state
        checked += bool(chosen)
    assert checked > 0


def test_written_back_on_every_storage_it_reads_the_same(
    savepoint: tuple[str, FlinkSavepoint], location: tuple[str, dict[str, Any]]
) -> None:
    name, sp = savepoint
    root, options = location
    target = f"{root}/written-back"
    if name in REFUSED_WRITES:
        with pytest.raises(
            UnsupportedFlinkWriteError, match=rf"\[FLINK_UNSUPPORTED\].*{REFUSED_WRITES[name]}"
        ):
            write_savepoint(sp, target, storage=options)
        assert list(Storage(target, options).walk_files()) == []
        return
    write_savepoint(sp, target, storage=options)
    back = read_savepoint(target, storage=options)
    assert _shape(back) == _shape(sp)
    assert _states(back) == _states(sp)
    assert _view(back) == _view(sp)
