"""The ``flink`` tier for pass-through: Flink's own savepoints written back by our writer, their
Kryo, POJO and SQL RowData states carried as bytes, restored by real Flink 2.3 on both state
backends. The model is Flink's restore of the savepoint it wrote: the written-back savepoint
restores to the same lines (FixtureJob's every keyed, operator, broadcast and window state;
SqlJob's Kryo state and the rows and aggregates its SQL operators restored).

Runs only where ``$FLINK_VENV`` names a virtualenv holding ``apache-flink==2.3.0``
(``make test-flink``); each restore takes 20-60 s of CPU.
"""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from flink_model import FIXTURES, KEYS
from flink_restore import JOB, compile_job, flink_lib, restore
from window_model import WINDOWS_JOB

from flinkstate.checkpoint import SavepointEdits
from flinkstate.checkpoint.flink import edit_savepoint, read_savepoint, write_savepoint
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group

pytestmark = [
    pytest.mark.flink,
    pytest.mark.skipif(
        flink_lib() is None, reason="needs $FLINK_VENV with apache-flink 2.3 (make test-flink)"
    ),
]

HERE = JOB.parent
TTL_MS = 3650 * 24 * 3600 * 1000
#: FixtureJob's stateful operators but window-sum (PassThroughRestoreJob declares that one), as
#: RestoreJob's spec: keyed-states with every state FixtureJob declares, Kryo and POJO included.
_STATES = [
    "v_long\tVALUE\tLONG\t-\t0",
    "v_int\tVALUE\tINT\t-\t0",
    "v_short\tVALUE\tSHORT\t-\t0",
    "v_byte\tVALUE\tBYTE\t-\t0",
    "v_bool\tVALUE\tBOOLEAN\t-\t0",
    "v_double\tVALUE\tDOUBLE\t-\t0",
    "v_float\tVALUE\tFLOAT\t-\t0",
    "v_char\tVALUE\tCHAR\t-\t0",
    "v_string\tVALUE\tSTRING\t-\t0",
    "v_bytes\tVALUE\tBYTES\t-\t0",
    "v_tuple\tVALUE\tTUPLE<LONG,STRING>\t-\t0",
    "v_row\tVALUE\tROW<LONG,STRING>\t-\t0",
    "v_pojo\tVALUE\tCLASS:FixtureJob$Pojo\t-\t0",
    "v_list\tVALUE\tLIST<LONG>\t-\t0",
    "v_map\tVALUE\tMAP<STRING,LONG>\t-\t0",
    "v_kryo\tVALUE\tCLASS:FixtureJob$Opaque\t-\t0",
    "l_long\tLIST\tLONG\t-\t0",
    "l_string\tLIST\tSTRING\t-\t0",
    "m_string_long\tMAP\tLONG\tSTRING\t0",
    "m_int_string\tMAP\tSTRING\tINT\t0",
    f"ttl_value\tVALUE\tSTRING\t-\t{TTL_MS}",
    f"ttl_list\tLIST\tLONG\t-\t{TTL_MS}",
    f"ttl_map\tMAP\tINT\tSTRING\t{TTL_MS}",
    "r_sum\tREDUCING\tLONG\t-\t0",
]


def fixture_spec(parallelism: int = 2, max_parallelism: int = 128) -> str:
    """The spec of FixtureJob's operators (keyed-states at the layout given)."""
    lines = [f"operator\tkeyed-states\tLONG\t{parallelism}\t{max_parallelism}"]
    lines += [f"state\t{s}" for s in _STATES]
    lines += ["operator\toperator-states\tLONG\t2\t128", "opstate\top_list\tSPLIT_DISTRIBUTE\tLONG\t-"]
    lines += ["opstate\top_union\tUNION\tSTRING\t-", "operator\tbroadcast\tLONG\t2\t128"]
    lines += ["opstate\trules\tBROADCAST\tLONG\tSTRING"]
    return "\n".join(lines) + "\n"


@pytest.fixture(scope="module")
def classpath(tmp_path_factory: pytest.TempPathFactory) -> str:
    lib = flink_lib()
    assert lib is not None
    more = [WINDOWS_JOB, HERE / "FixtureJob.java", HERE / "SqlJob.java", HERE / "PassThroughRestoreJob.java"]
    more.append(
        HERE / "compat" / "v2" / "Compat.java"
    )  # FixtureJob's and SqlJob's API spellings in Flink 2.x
    return compile_job(lib, tmp_path_factory.mktemp("passthrough-job"), *more)


def restore_fixture(classpath: str, backend: str, savepoint: Path, work: Path, spec: str) -> list[str]:
    return restore(classpath, backend, savepoint, spec, work, "PassThroughRestoreJob")


@pytest.fixture(scope="module")
def flinks_restore(classpath: str, tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """What Flink restores of heap_canonical, the savepoint it wrote."""
    work = tmp_path_factory.mktemp("flinks-restore")
    return restore_fixture(classpath, "hashmap", FIXTURES / "heap_canonical", work, fixture_spec())


def _without_placement(lines: list[str]) -> list[str]:
    """The lines without subtask and key group (columns 2 and 3)."""
    return sorted("\t".join([f[0], *f[3:]]) for f in (line.split("\t") for line in lines))


@pytest.mark.parametrize(
    ("backend", "layout"), [("hashmap", "same"), ("rocksdb", "same"), ("hashmap", "rescaled")]
)
def test_flink_restores_its_savepoint_written_back(
    classpath: str, flinks_restore: list[str], tmp_path: Path, backend: str, layout: str
) -> None:
    """heap_canonical read and written back (every operator; keyed-states' Kryo state carried as
    bytes; rescaled: keyed-states at parallelism 3, max parallelism 256): Flink restores every
    value it restores of its own savepoint, each key in the subtask owning its key group."""
    types = {"v_kryo": "STRUCT<value: BIGINT NOT NULL>"}
    source = read_savepoint(str(FIXTURES / "heap_canonical"), types=types)
    p, max_p = (3, 256) if layout == "rescaled" else (2, 128)
    target = tmp_path / "savepoint"
    write_savepoint(
        source, str(target), parallelism={"keyed-states": p}, max_parallelism={"keyed-states": max_p}
    )
    lines = restore_fixture(classpath, backend, target, tmp_path / "work", fixture_spec(p, max_p))
    if layout == "same":
        assert lines == flinks_restore
    else:
        assert _without_placement(lines) == _without_placement(flinks_restore)
        keyed = [f for f in (line.split("\t") for line in lines) if f[0] == "keyed-states"]
        assert all(int(f[1]) == compute_operator_index_for_key_group(256, 3, int(f[2])) for f in keyed)
    kryo = {f[4]: f[6] for f in (line.split("\t") for line in lines) if f[3] == "v_kryo"}
    ours = source.keyed_state("keyed-states", "v_kryo").to_pylist()
    assert kryo == {str(r["key"]): f"Opaque({r['value']['value']})" for r in ours}
    assert sorted(int(k) for k in kryo) == list(KEYS)
    states = {f[3] for f in (line.split("\t") for line in lines)}
    assert {"v_pojo", "op_list", "op_union", "window", "r_sum", "ttl_map"} <= states


def sql_restore(classpath: str, backend: str, savepoint: Path, work: Path) -> list[str]:
    """SqlJob restored from ``savepoint`` and fed its numbers again: the lines it wrote, sorted."""
    work.mkdir(parents=True, exist_ok=True)
    out = work / f"sql-{backend}.tsv"
    cmd = ["java", "-cp", classpath, "SqlJob", backend, "restore", str(savepoint.resolve()), str(out)]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise AssertionError(
            f"Flink's restore failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
    return sorted(out.read_text(encoding="utf-8").splitlines())


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_restores_its_sql_savepoint_written_back(classpath: str, tmp_path: Path, backend: str) -> None:
    """sql_heap read and written back (the SQL operators' RowData keys, rows and aggregates and
    the Kryo state carried as bytes): the restored job retracts the same restored rows and
    aggregates and reads the same Kryo values as it does from Flink's own savepoint."""
    source = read_savepoint(str(FIXTURES / "sql_heap"))
    target = tmp_path / "savepoint"
    write_savepoint(source, str(target))
    flinks = sql_restore(classpath, "hashmap", FIXTURES / "sql_heap", tmp_path / "flinks")
    lines = sql_restore(classpath, backend, target, tmp_path / "ours")
    assert lines == flinks
    fields = [line.split("\t") for line in lines]
    restored = [f for f in fields if f[0] == "kryo-states" and int(f[2]) < 20]  # the first element of a key
    assert len(restored) == 20 and all(f[3] != "null" and f[4] == f"a{f[1]}" for f in restored)
    for operator in ("deduplicate", "group-aggregate"):
        assert len([f for f in fields if f[0] == operator and f[1].startswith("-U")]) >= 20


@pytest.mark.parametrize("backend", ["hashmap", "rocksdb"])
def test_flink_restores_a_kryo_state_set_from_rows(classpath: str, tmp_path: Path, backend: str) -> None:
    """heap_canonical's Kryo state v_kryo set from rows by an offline edit (read with its
    declaration; values Kryo-encoded, its Kryo serializer snapshot carried as read): Flink
    restores exactly the values given (extreme longs, a key the fixture lacks)."""
    source = read_savepoint(
        str(FIXTURES / "heap_canonical"), types={"v_kryo": "STRUCT<value: BIGINT NOT NULL>"}
    )
    extremes = [-(2**63), 2**63 - 1, 0, -1]
    values = {k: extremes[i % 4] if i < 4 else k * 1000 - 7 for i, k in enumerate([*KEYS, 10**12])}
    rows = [{"key": k, "value": {"value": v}} for k, v in values.items()]
    target = tmp_path / "savepoint"
    edit_savepoint(source, str(target), SavepointEdits().set_keyed_state("keyed-states", "v_kryo", rows))
    lines = restore_fixture(classpath, backend, target, tmp_path / "work", fixture_spec())
    kryo = {f[4]: f[6] for f in (line.split("\t") for line in lines) if f[3] == "v_kryo"}
    assert kryo == {str(k): f"Opaque({v})" for k, v in values.items()}
