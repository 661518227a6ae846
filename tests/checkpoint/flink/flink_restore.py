"""Restoring a savepoint in a real Flink mini-cluster (the ``flink`` test tier and the fixture
generator): compiles ``tests/fixtures/flink/RestoreJob.java`` (with the ``compat/`` shim of the
release) against a release's jars and runs it; no Python of Flink's.

The releases (:func:`runtimes`): 2.3 from the ``apache-flink`` package in the virtualenv
``$FLINK_VENV``, 1.20 from one with ``apache-flink==1.20.5`` in ``$FLINK120_VENV``, 1.17, 1.15
and 1.13 from the jars of the ``apache-flink-libraries`` 1.17.2, 1.15.4 and 1.13.6 sdists in
``$FLINK117_LIB``, ``$FLINK115_LIB`` and ``$FLINK113_LIB`` (their ``deps/lib``); Flink 1.x
runs on Java 17 with ``--add-opens`` (:data:`ADD_OPENS`)."""

from __future__ import annotations

import glob
import json
import os
import struct
import subprocess
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from operator_views import expected_operator_states
from write_model import (
    FLINK_TTL_MS,
    RECORDS,
    OperatorModel,
    OperatorStateModel,
    canonical,
    model,
    rows,
    split_type,
)

from flinkstate.checkpoint.flink import FlinkSavepoint
from flinkstate.state.keygroups.assignment import compute_operator_index_for_key_group

FIXTURE_DIR = Path(__file__).resolve().parents[2] / "fixtures" / "flink"
JOB = FIXTURE_DIR / "RestoreJob.java"
#: What Flink 1.x needs opened to run on Java 17 (the fixture generator's list).
ADD_OPENS = tuple(
    f"--add-opens=java.base/{m}=ALL-UNNAMED"
    for m in ("java.lang", "java.util", "java.lang.reflect", "java.io", "java.net", "java.nio", "sun.nio.ch",
              "java.util.concurrent", "java.util.concurrent.atomic", "java.text", "java.time", "java.math",
              "java.security", "jdk.internal.misc")
)  # fmt: skip


@dataclass(frozen=True)
class FlinkRuntime:
    """A Flink release to restore in: its jars, the ``compat/`` shim of its APIs, its JVM flags."""

    version: str
    lib: Path
    compat: str
    jvm: tuple[str, ...] = ()


def runtimes() -> dict[str, FlinkRuntime | None]:
    """Each release of the tier, None where its environment variable is unset or holds no jars."""
    venv120 = os.environ.get("FLINK120_VENV")
    found = {
        "2.3": (flink_lib(), "v2", ()),
        "1.20": (flink_lib(venv120) if venv120 else None, "v1_19", ADD_OPENS),
        "1.17": (_jars("FLINK117_LIB"), "v1_17", ADD_OPENS),
        "1.15": (_jars("FLINK115_LIB"), "v1_17", ADD_OPENS),
        "1.13": (_jars("FLINK113_LIB"), "v1_13", ADD_OPENS),
    }
    return {v: FlinkRuntime(v, lib, compat, jvm) if lib else None for v, (lib, compat, jvm) in found.items()}


def _jars(variable: str) -> Path | None:
    """The folder of Flink jars the environment variable names, if it holds any."""
    lib = os.environ.get(variable)
    return Path(lib) if lib and glob.glob(os.path.join(lib, "*.jar")) else None


def flink_lib(venv: str | None = None) -> Path | None:
    """``pyflink/lib`` of the virtualenv ``venv`` (default ``$FLINK_VENV``), if there is one."""
    venv = venv or os.environ.get("FLINK_VENV")
    if not venv:
        return None
    found = glob.glob(os.path.join(venv, "lib", "python3*", "site-packages", "pyflink", "lib"))
    return Path(found[0]) if found else None


def compile_job(lib: Path, classes: Path, *more: Path, compat: str = "v2") -> str:
    """Compile the restore job (and the jobs ``more`` beside it) with the ``compat/`` shim of
    the release into ``classes``; the class path to run them with."""
    classpath = os.pathsep.join(sorted(glob.glob(str(lib / "*.jar"))))
    classes.mkdir(parents=True, exist_ok=True)
    sources = [str(JOB), str(FIXTURE_DIR / "compat" / compat / "Compat.java"), *map(str, more)]
    subprocess.run(["javac", "-cp", classpath, "-d", str(classes), *sources], check=True)
    return f"{classes}{os.pathsep}{classpath}"


def spec_text(
    parallelism: dict[str, int],
    max_parallelism: dict[str, int],
    models: dict[str, OperatorModel] | None = None,
) -> str:
    """The restore job's spec of the model's operators and states (TTL states with FLINK_TTL_MS)."""
    lines = []
    for uid, op in (models or model()).items():
        lines.append(f"operator\t{uid}\t{op.key_type}\t{parallelism[uid]}\t{max_parallelism[uid]}")
        for name, o in op.operator_states.items():
            lines.append(f"opstate\t{name}\t{o.mode}\t{o.value_type}\t{o.user_key_type}")
        for name, s in op.states.items():
            lines.append(
                f"state\t{name}\t{s.kind}\t{s.value_type}\t{s.user_key_type}\t{FLINK_TTL_MS if s.ttl else 0}"
            )
    return "\n".join(lines) + "\n"


def restore(
    classpath: str,
    backend: str,
    savepoint: Path,
    spec: str,
    work: Path,
    main: str = "RestoreJob",
    jvm: Sequence[str] = (),
) -> list[str]:
    """Run the restore job (class ``main``, JVM flags ``jvm``) on ``backend`` from ``savepoint``:
    the lines it wrote, sorted."""
    work.mkdir(parents=True, exist_ok=True)
    (work / "spec.tsv").write_text(spec, encoding="utf-8")
    out = work / f"restored-{backend}.tsv"
    cmd = [
        "java",
        *jvm,
        "-cp",
        classpath,
        main,
        backend,
        str(savepoint.resolve()),
        str(work / "spec.tsv"),
        str(out),
    ]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    if done.returncode != 0:
        raise AssertionError(
            f"Flink's restore failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
        )
    return sorted(out.read_text(encoding="utf-8").splitlines())


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        if text[i] == "\\":
            out.append({"t": "\t", "n": "\n", "r": "\r", "\\": "\\"}[text[i + 1]])
            i += 2
        else:
            out.append(text[i])
            i += 1
    return "".join(out)


def _atomic(text: str, type_name: str) -> Any:
    """An atomic value from its Java ``toString`` (floats canonical)."""
    if type_name in ("LONG", "INT", "SHORT", "BYTE"):
        return int(text)
    if type_name == "BOOLEAN":
        return {"true": True, "false": False}[text]
    if type_name in ("DOUBLE", "FLOAT"):
        value = float(text)
        return canonical(
            struct.unpack(">f", struct.pack(">f", value))[0] if type_name == "FLOAT" else value, type_name
        )
    return text


def _from_json(value: Any, type_name: str) -> Any:
    """A value RestoreJob rendered as JSON (numbers and byte[] hex as strings, map keys as
    strings), canonical."""
    if value is None:
        return None
    outer, args = split_type(type_name)
    if outer == "LIST":
        return tuple(_from_json(v, args[0]) for v in value)
    if outer == "MAP":
        return tuple(sorted((_atomic(k, args[0]), _from_json(v, args[1])) for k, v in value.items()))
    if outer in RECORDS:
        return tuple(_from_json(v, t) for v, t in zip(value, args, strict=True))
    if outer == "BYTES":
        return bytes.fromhex(value)
    return (
        _atomic(value, type_name) if isinstance(value, str) and type_name not in ("STRING", "CHAR") else value
    )


def _parse(text: str, type_name: str) -> Any:
    """A key or value as RestoreJob wrote it, canonical: atomic ones escaped, others as JSON."""
    if text == "\\N":
        return None
    if split_type(type_name)[0] in ("BYTES", "LIST", "MAP", *RECORDS):
        return _from_json(json.loads(text), type_name)
    return _atomic(_unescape(text), type_name)


def parse_lines(
    lines: list[str], models: dict[str, OperatorModel] | None = None
) -> tuple[set[tuple[Any, ...]], set[tuple[str, int, int]], dict[tuple[str, int, str], Any]]:
    """(uid, state, key, position or user key, value) of each keyed state line, in the model's
    terms; the (uid, subtask, key group) triples Flink reported; the operator states each
    subtask restored (as :func:`write_model.restored_view` gives them)."""
    ops = models or model()
    rows = set()
    placed = set()
    restored: dict[tuple[str, int, str], Any] = {}
    for line in lines:
        uid, subtask, kg, name, key, extra, value = line.split("\t")
        op = ops[uid]
        state = _unescape(name)
        if kg == "op":
            o = op.operator_states[state]
            where = (uid, int(subtask), state)
            if o.mode == "BROADCAST":
                found = restored.setdefault(where, {})
                found[_parse(extra, o.user_key_type)] = _parse(value, o.value_type)
            else:
                restored.setdefault(where, []).append((int(extra), _parse(value, o.value_type)))
            continue
        s = op.states[state]
        if s.kind == "LIST":
            extra_value: Any = int(extra)
        elif s.kind == "MAP":
            extra_value = _parse(extra, s.user_key_type)
        else:
            extra_value = None
        k = _parse(key, op.key_type)
        rows.add((uid, state, k, extra_value, _parse(value, s.value_type)))
        placed.add((uid, int(subtask), int(kg)))
    for (uid, _, state), found in restored.items():
        if ops[uid].operator_states[state].mode != "BROADCAST":
            values = [v for _, v in sorted(found)]
            found[:] = sorted(values) if ops[uid].operator_states[state].mode == "UNION" else values
    return rows, placed, restored


def check_restored(
    lines: list[str],
    parallelism: dict[str, int],
    max_parallelism: dict[str, int],
    models: dict[str, OperatorModel] | None = None,
) -> None:
    """What Flink printed is the model's live rows, each in the subtask owning its key group,
    and the model's operator states as a job restored at ``parallelism`` holds them."""
    got, placed, restored = parse_lines(lines, models)
    assert len(lines) == len(got) + sum(len(v) for v in restored.values())
    assert got == {r[:5] for r in rows(live_only=True, models=models)}
    for uid, subtask, kg in placed:
        assert subtask == compute_operator_index_for_key_group(max_parallelism[uid], parallelism[uid], kg)
    assert restored == expected_operator_states(parallelism, models)


def operator_state_models(sp: FlinkSavepoint, uids: list[str]) -> dict[str, OperatorModel]:
    """Models of the operator states of ``uids`` in a savepoint read (atomic types only), as
    our reader finds them per subtask; the restore job declares each with a Long key."""
    out = {}
    for uid in uids:
        op, states = sp.operator(uid), {}
        for info in sp.operator_infos(uid):
            parts = [sp.operator_values(uid, info.name, i) for i in range(op.parallelism)]
            value = str(info.value.type_info)
            key = str(info.user_key.type_info) if info.user_key is not None else "-"
            states[info.name] = OperatorStateModel(info.kind, value, parts, key)
        out[uid] = OperatorModel("LONG", operator_states=states)
    return out
