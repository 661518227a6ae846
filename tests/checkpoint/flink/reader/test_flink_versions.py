"""Which Flink wrote a savepoint (what its files tell, or flink_version), and the Kryo bytes that
depend on it: Kryo 2 in Flink 1.x, Kryo 5 in 2.x."""

from __future__ import annotations

import math
import random
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from flink_model import ALL, FIELDS_DDL, FLINK_RANGE, KEYS, VERSIONS, fields, fixture, made
from kryo_model import encode

from flinkstate.checkpoint.flink import (
    FlinkVersionRequiredError,
    parse_flink_release,
    read_savepoint,
)
from flinkstate.checkpoint.flink.metadata.versions import from_files
from flinkstate.checkpoint.flink.types.declared_read import parse_type
from flinkstate.checkpoint.flink.types.kryo_read import KryoReader
from flinkstate.state.errors import FlinkStateError, InvalidArgumentError

FIELDS = parse_type(FIELDS_DDL)
JAVA_STREAM = b"\xac\xed\x00\x05"


def _close(got: Any, want: Any) -> bool:
    if isinstance(want, float) and isinstance(got, float):
        return math.isclose(got, want, rel_tol=1e-7)
    return bool(got == want)


def _fits(row: dict[str, Any] | None, k: int) -> bool:
    want = fields(k)
    return row is not None and set(row) == set(want) and all(_close(row[n], v) for n, v in want.items())


@pytest.mark.parametrize(
    ("metadata", "formats", "text", "kryo"),
    [
        (6, [6], "2.1-2.3", 5),
        (5, [], "2.0", 5),
        (4, [], "1.16-1.20", 2),
        (4, [5], "1.16-1.17", 2),
        (4, [6], "1.18-1.20", 2),
        (3, [], "1.13-1.15 or flinkstate's writer", None),
        # our writer writes format 5 for 1.13-1.17 (Kryo 2 either way), 6 for 1.18-2.3
        (3, [5], "1.13-1.15 or flinkstate's writer for 1.13-1.17", 2),
        (3, [6], "flinkstate's writer for 1.18-2.3", None),
        (4, [5, 6], "no known Flink release", None),
    ],
)
def test_what_the_files_tell(metadata: int, formats: list[int], text: str, kryo: int | None) -> None:
    found = from_files(metadata).narrowed(formats)
    assert found.describe() == text and found.kryo == kryo
    if kryo is None:
        with pytest.raises(FlinkVersionRequiredError, match=r"\[FLINK_VERSION_REQUIRED\].*flink_version"):
            found.require_kryo("state s")
    else:
        assert found.require_kryo("state s") == kryo


@pytest.mark.parametrize("version", VERSIONS)
def test_each_fixture_tells_its_range(version: str) -> None:
    for _, kind in made(ALL, [version]):
        found = read_savepoint(str(fixture(version, kind))).flink_versions.describe()
        assert found == FLINK_RANGE[version], kind


@pytest.mark.parametrize("text", ["1.12", "3.0", "1.x", "", "2", "1.20.5.1"])
def test_unknown_releases_are_refused(text: str) -> None:
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_ARGUMENT\].*not a Flink release"):
        parse_flink_release(text)


def test_releases_parse_with_or_without_the_patch() -> None:
    assert parse_flink_release("1.20.5") == parse_flink_release("1.20") == (1, 20)
    assert parse_flink_release(" 2.3 ") == (2, 3)


def test_a_flink_version_the_files_rule_out_is_refused() -> None:
    path = str(fixture("1.20", "heap_canonical"))
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_ARGUMENT\].*2\.3.*_metadata version 4"):
        read_savepoint(path, flink_version="2.3")
    # _metadata allows 1.16-1.20; the operator state streams (format 6) rule out 1.16 and 1.17.
    sp = read_savepoint(path, flink_version="1.16")
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_ARGUMENT\].*operator state format 6"):
        sp.flink_versions  # noqa: B018
    given = read_savepoint(path, flink_version="1.19.1").flink_versions
    assert given.given and given.describe() == "1.19" and given.kryo == 2
    with pytest.raises(InvalidArgumentError, match=r"\[INVALID_ARGUMENT\].*1\.20"):
        read_savepoint(str(fixture("2.3", "heap_canonical")), flink_version="1.20")


@pytest.mark.parametrize(("version", "kind"), made(ALL))
def test_kryo_fields_decode_with_a_declared_struct(version: str, kind: str) -> None:
    # v_kryo declared too: a heap checkpoint may store it before v_kryo_fields.
    types = {"v_kryo_fields": FIELDS_DDL, "v_kryo": "STRUCT<value: BIGINT NOT NULL>"}
    sp = read_savepoint(str(fixture(version, kind)), types=types)
    opaque = {r["key"]: r["value"] for r in sp.keyed_state("keyed-states", "v_kryo").to_pylist()}
    assert opaque == {k: {"value": k} for k in KEYS}
    table = sp.keyed_state("keyed-states", "v_kryo_fields")
    got = {r["key"]: r["value"] for r in table.to_pylist()}
    assert sorted(got) == list(KEYS)
    for k in KEYS:
        assert _fits(got[k], k), (k, got[k], fields(k))


@pytest.mark.parametrize("version", VERSIONS)
def test_the_kryo_model_gives_flinks_bytes(version: str) -> None:
    """Our model of Kryo 2 (1.x) and Kryo 5 (2.x) encodes every value to the bytes Flink wrote (class
    id as Flink's), and the other major's bytes differ."""
    raw = read_savepoint(str(fixture(version, "heap_canonical"))).keyed_state("keyed-states", "v_kryo_fields")
    stored = {r["key"]: r["value"] for r in raw.to_pylist()}
    class_id = stored[0][0] - 2  # a one-byte varint: the registration id + 2
    kryo, other = (5, 2) if version == "2.3" else (2, 5)
    for k in KEYS:
        assert stored[k] == encode(FIELDS, fields(k), class_id, kryo=kryo), k
    assert all(stored[k] != encode(FIELDS, fields(k), class_id, kryo=other) for k in KEYS)


def test_kryo_2_and_5_readers_against_the_model_on_random_values() -> None:
    t = pa.struct(
        [
            pa.field("a", pa.int16(), False),
            pa.field("b", pa.float32(), False),
            pa.field("c", pa.float64(), False),
            ("d", pa.int16()),
            ("e", pa.float32()),
            ("f", pa.float64()),
            pa.field("g", pa.int64(), False),
            ("h", pa.string()),
        ]
    )
    rng = random.Random(36)
    for kryo in (2, 5):
        reader = KryoReader(t, "x.Y", "state s", kryo)
        for _ in range(300):
            value = {
                "a": rng.randint(-(1 << 15), (1 << 15) - 1),
                "b": float(pa.scalar(rng.uniform(-1e6, 1e6), pa.float32()).as_py()),
                "c": rng.uniform(-1e300, 1e300),
                "d": rng.choice([None, rng.randint(-(1 << 15), (1 << 15) - 1)]),
                "e": rng.choice([None, float(pa.scalar(rng.random(), pa.float32()).as_py())]),
                "f": rng.choice([None, rng.random()]),
                "g": rng.randint(-(1 << 63), (1 << 63) - 1),
                "h": rng.choice([None, "", "x", "\u00e9\u6f22"]),
            }
            assert reader.from_bytes(encode(t, value, 12, kryo)) == value
    # The same bytes read with the other Kryo's rules are other numbers (or do not fit at all).
    value = {"a": 3, "b": 0.5, "c": 0.25, "d": -3, "e": 1.5, "f": 2.0, "g": 1, "h": None}
    other = KryoReader(t, "x.Y", "state s", 5)
    try:
        misread = other.from_bytes(encode(t, value, 12, 2))
    except FlinkStateError:
        misread = None
    assert misread != value


def _as_metadata_v3(version: str, kind: str, target: Path) -> Path:
    """The fixture with its _metadata rewritten as version 3 (no CheckpointProperties), as Flink
    1.13-1.15 and flinkstate's writer write it: the operators' bytes are the same."""
    source = fixture(version, kind)
    shutil.copytree(source, target)
    data = (source / "_metadata").read_bytes()
    trailer = data.rindex(JAVA_STREAM)
    assert data[4:8] == (4).to_bytes(4, "big")
    (target / "_metadata").write_bytes(data[:4] + (3).to_bytes(4, "big") + data[8:trailer])
    return target


def test_kryo_under_metadata_v3_asks_for_the_flink_version(tmp_path: Path) -> None:
    """1.20's files as V3: its operator state format 6 leaves only flinkstate's writer, which
    carries any release's Kryo bytes: the Kryo read is a typed error until flink_version says."""
    path = str(_as_metadata_v3("1.20", "heap_canonical", tmp_path / "v3"))
    sp = read_savepoint(path, types={"v_kryo_fields": FIELDS_DDL})
    assert sp.properties["metadata_version"] == "3"
    assert sp.flink_versions.describe() == "flinkstate's writer for 1.18-2.3"
    assert {r["key"]: r["value"] for r in sp.keyed_state("keyed-states", "v_long").to_pylist()}[3] == 3007
    with pytest.raises(
        FlinkVersionRequiredError, match=r"\[FLINK_VERSION_REQUIRED\].*v_kryo_fields.*flinkVersion"
    ):
        sp.keyed_state("keyed-states", "v_kryo_fields")
    told = read_savepoint(path, types={"v_kryo_fields": FIELDS_DDL}, flink_version="1.20")
    got = {r["key"]: r["value"] for r in told.keyed_state("keyed-states", "v_kryo_fields").to_pylist()}
    assert all(_fits(got[k], k) for k in KEYS)
    # Told 2.x, the Kryo 5 rules read the Kryo 2 bytes: wrong numbers, or bytes that do not fit.
    wrong = read_savepoint(path, types={"v_kryo_fields": FIELDS_DDL}, flink_version="2.3")
    try:
        rows = wrong.keyed_state("keyed-states", "v_kryo_fields").to_pylist()
        assert not all(_fits(r["value"], r["key"]) for r in rows)
    except FlinkStateError as exc:
        assert exc.code == "INVALID_OPTION"


def test_metadata_v3_with_operator_format_5_is_flink_1_13_to_1_15(tmp_path: Path) -> None:
    """1.17's files as V3: format 5 operator streams are Flink 1.13-1.15's, or flinkstate's writer's
    for 1.13-1.17: Kryo 2 either way, so the Kryo state reads without flink_version."""
    path = str(_as_metadata_v3("1.17", "heap_canonical", tmp_path / "v3"))
    sp = read_savepoint(path, types={"v_kryo_fields": FIELDS_DDL})
    text = "1.13-1.15 or flinkstate's writer for 1.13-1.17"
    assert sp.flink_versions.describe() == text and sp.properties["flink_version"] == text
    got = {r["key"]: r["value"] for r in sp.keyed_state("keyed-states", "v_kryo_fields").to_pylist()}
    assert all(_fits(got[k], k) for k in KEYS)


def test_the_connector_option_flink_version(tmp_path: Path) -> None:
    from flinkstate.connector.errors import OptionError
    from flinkstate.connector.source import FlinkStateDataSource

    path = str(_as_metadata_v3("1.20", "heap_canonical", tmp_path / "v3"))

    def rows(**options: str) -> list[dict[str, Any]]:
        source = FlinkStateDataSource({"path": path, **options})
        reader = source.reader(source.schema())
        out: list[dict[str, Any]] = []
        for p in reader.partitions():
            for batch in reader.read(p):
                out += pa.Table.from_batches([batch]).to_pylist()
        return out

    declared = {"operator": "keyed-states", "state": "v_kryo_fields", "valueType": FIELDS_DDL}
    with pytest.raises(FlinkStateError, match=r"\[FLINK_VERSION_REQUIRED\]"):
        rows(**declared)
    got = {r["key"]: r["value"] for r in rows(**declared, flinkVersion="1.20")}
    assert all(_fits(got[k], k) for k in KEYS)
    meta = rows(flinkVersion="1.20")
    assert {r["flink_version"] for r in meta} == {"1.20"}
    with pytest.raises(OptionError, match=r"flinkVersion.*not a Flink release"):
        rows(flinkVersion="0.9")
    with pytest.raises(OptionError, match=r"flinkVersion.*contradicts"):
        FlinkStateDataSource({"path": str(fixture("1.20", "heap_canonical")), "flinkVersion": "2.0"}).schema()


def test_a_converted_1x_savepoint_records_the_flink_version(tmp_path: Path) -> None:
    from flinkstate.checkpoint.flink import import_savepoint

    source = read_savepoint(str(fixture("1.17", "heap_canonical")))
    uids = ["operator-states", "broadcast"]
    ours = import_savepoint(source, str(tmp_path / "ours"), uids=uids, operators=uids)
    assert ours.manifest.properties["flinkstate.converted_from_flink_version"] == "1.16-1.17"
    assert sorted(op.uid for op in ours.manifest.operators) == sorted(uids)
    for uid in uids:
        got = ours.operator_backend(uid, 0, 1).snapshot()
        want = source.operator_backend(uid, 0, 1).snapshot()
        assert got and sorted((d.name, repr(d.elements)) for d in got) == sorted(
            (d.name, repr(d.elements)) for d in want
        )


def test_an_edit_sets_a_kryo_state_in_the_target_releases_kryo(tmp_path: Path) -> None:
    """Setting a declared Kryo state of a 1.20 savepoint: Kryo 2's bytes when written for 1.x (the
    default: the oldest release it can be from), Kryo 5's for 2.3 (the other values re-encoded)."""
    from flinkstate.checkpoint import SavepointEdits
    from flinkstate.checkpoint.flink import edit_savepoint

    opaque = "STRUCT<value: BIGINT NOT NULL>"
    types = {"v_kryo": opaque, "v_kryo_fields": FIELDS_DDL}  # both re-encoded for 2.3
    source = read_savepoint(str(fixture("1.20", "heap_canonical")), types=types)
    class_id = source.raw_keyed("keyed-states", "v_kryo")[0].value[0][0] - 2
    edits = SavepointEdits().set_keyed_state("keyed-states", "v_kryo", [{"key": 1, "value": {"value": -5}}])
    for target, kryo in ((None, 2), ("2.3", 5)):
        out = tmp_path / f"sp-{target}"
        edit_savepoint(source, str(out), edits, flink_version=target)
        raw = read_savepoint(str(out)).keyed_state("keyed-states", "v_kryo").to_pylist()
        assert {r["key"]: r["value"] for r in raw} == {
            1: encode(parse_type(opaque), {"value": -5}, class_id, kryo)
        }
        back = read_savepoint(str(out), types=types, flink_version=target or "1.18")
        assert {r["key"]: r["value"] for r in back.keyed_state("keyed-states", "v_kryo").to_pylist()} == {
            1: {"value": -5}
        }
