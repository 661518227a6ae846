"""The ``flink`` tier of the 1.x → 2.x migration: Flink 2.3 restores MigrateJob's 1.20 savepoint
(its Kryo classes' ``double``/``short``/``float``/``char`` fields and ``List`` fields of String, Long,
Integer and Double, its POJO's ``List`` field) as
converted by ``write_savepoint(..., flink_version="2.3")`` with every value equal to the job's,
and, beside it, restores the original 1.20 savepoint wrong (the Kryo values) or not at all
(the POJO: ``StateMigrationException``). Needs ``$FLINK_VENV`` (2.3); ~1-2 min of CPU.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from flink_restore import FIXTURE_DIR, compile_job, runtimes
from migrate_model import KEYS, TYPES, counted, listed, pojo

from flinkstate.checkpoint.flink import read_savepoint, write_savepoint

pytestmark = pytest.mark.flink
FLINK = runtimes()["2.3"]
ORIGINAL = FIXTURE_DIR / "1.20" / "migrate_heap"


def _java(v: object, char: bool = False) -> str:
    """A value as Java's ``toString`` prints it (``List``: ``[a, b]``; a ``char`` as its code, as
    ``Listed.toString`` prints it)."""
    if v is None:
        return "null"
    if char:
        assert isinstance(v, str)
        return str(ord(v))
    if isinstance(v, list):
        return "[" + ", ".join(_java(x) for x in v) + "]"
    return str(v)


#: By the restore job's argument: the state's class and fields (in its toString) and model.
PRINTED = {
    "kryo": ("Listed", ("id", "d", "s", "f", "tags", "c", "boxedChar"), listed),
    "counted": ("Counted", ("id", "counts", "weights", "ints"), counted),
    "pojo": ("PojoListed", ("id", "tags"), pojo),
}
CHARS = {"c", "boxedChar"}


def _expected(state: str) -> list[str]:
    """What the restore job prints of ``state`` (``key<TAB>toString()``) where the values are the job's."""
    name, fields, model = PRINTED[state]
    return [f"{k}\t{name}({','.join(_java(model(k)[f], f in CHARS) for f in fields)})" for k in KEYS]


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    if FLINK is None:
        pytest.skip("needs $FLINK_VENV for Flink 2.3 (make test-flink)")
    more = (FIXTURE_DIR / "FixtureJob.java", FIXTURE_DIR / "MigrateJob.java")
    return compile_job(FLINK.lib, tmp_path_factory.mktemp("migrate-job"), *more, compat=FLINK.compat)


def _restore(
    classpath: str, backend: str, savepoint: Path, state: str, out: Path
) -> subprocess.CompletedProcess[str]:
    cmd = [
        "java",
        "-cp",
        classpath,
        "MigrateJob",
        "restore",
        backend,
        str(savepoint.resolve()),
        state,
        str(out),
    ]
    return subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)


@pytest.fixture(scope="module")
def migrated(tmp_path_factory: pytest.TempPathFactory) -> Path:
    target = tmp_path_factory.mktemp("migrated") / "savepoint"
    write_savepoint(read_savepoint(str(ORIGINAL), types=TYPES), str(target), flink_version="2.3")
    return target


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_2_3_restores_the_migrated_savepoint_with_every_value(
    classpath: str, migrated: Path, tmp_path: Path, backend: str
) -> None:
    for state in PRINTED:
        out = tmp_path / f"{state}.txt"
        done = _restore(classpath, backend, migrated, state, out)
        assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
        assert sorted(out.read_text(encoding="utf-8").splitlines()) == sorted(_expected(state))


def test_flink_2_3_restores_the_original_wrong(classpath: str, tmp_path: Path) -> None:
    out = tmp_path / "kryo.txt"
    done = _restore(classpath, "rocksdb", ORIGINAL, "kryo", out)  # heap would read every state at once
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    restored = dict(line.split("\t", 1) for line in out.read_text(encoding="utf-8").splitlines())
    # Kryo 2's big-endian double 0.5, float -2, short -3 and chars 'A' (0x41) and U+03B1 read as Kryo 5's
    # little-endian ones (0x4100, 0xB103); a List of 2 (Kryo 2: size n) read as one of 1 (Kryo 5: n + 1)
    assert restored["0"] == f"Listed(0,2.8363E-319,-513,2.69E-43,[a0],{0x4100},{0xB103})"
    assert all(
        restored[str(k)] != line.split("\t", 1)[1] for k, line in zip(KEYS, _expected("kryo"), strict=True)
    )
    out = tmp_path / "counted.txt"
    done = _restore(classpath, "rocksdb", ORIGINAL, "counted", out)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert not set(out.read_text(encoding="utf-8").splitlines()) & set(_expected("counted"))
    done = _restore(classpath, "rocksdb", ORIGINAL, "pojo", tmp_path / "pojo.txt")
    assert done.returncode != 0
    assert "StateMigrationException" in done.stdout + done.stderr
