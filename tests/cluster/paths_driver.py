"""The driver of ``test_cluster_paths``: one Spark application on the standalone cluster that
reads a diff of two checkpoints (``diffAgainst``), writes Flink savepoints for chosen releases
(``flinkVersion``) and reads them back, and runs the batch sink and the reader through the fault
proxy (:mod:`support.faults`, started here: executors reach it on loopback). It prints what
Spark returned as ``<SECTION> <json>`` lines; the test holds the models and the checks.

Everything is on the loopback S3 server (a local root is refused on a cluster).
"""

from __future__ import annotations

import json
import re
import traceback
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from support.faults import KINDS, FaultProxy, Faults, cases, proxied
from support.storages import fs_options

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)

DIFF_KEYS = [f"k{i}-ü" for i in range(240)]
DIFF_PAIRS = {"incremental": ("a", 1, "a", 2, ("value", "map")), "rescaled": ("a", 1, "b", 1, ("list",))}
"""Diff name -> (old root, its checkpoint, new root, its checkpoint, the states compared): ``a``
(max parallelism 32, incremental: checkpoint 2 shares the files of key groups it did not
change) and ``b`` (max parallelism 48: units are residues of 16) holding ``a``'s second state."""
FLINK_VERSIONS = ("1.17", "2.3")
FLINK_ROWS = [(i, f"n{i}-漢字", i / 4) for i in range(300)]
FLINK_SCHEMA = "user bigint, name string, score double"
FLINK_RULES = [(f"t{i}-ü", f"rule {i}") for i in range(40)]
FAULT_ROWS = [(i, f"v-{i}-ü") for i in range(300)]
FAULT_MORE = [(i, f"w-{i}") for i in range(150, 420)]
FAULT_PARALLELISM = 3
READ_TIMEOUT = 2.0
_CODE = re.compile(r"\[([A-Z][A-Z0-9_]+)\]")
OUR_CODES = frozenset(
    re.findall(r"^\| `([A-Z0-9_]+)` \|", (Path(__file__).parents[2] / "docs" / "errors.md").read_text(), re.M)
)
"""The codes of our errors (the error table of the docs)."""


def _descriptors() -> tuple[ValueStateDescriptor, ListStateDescriptor, MapStateDescriptor]:
    return (
        ValueStateDescriptor("value", Types.LONG()),
        ListStateDescriptor("list", Types.STRING()),
        MapStateDescriptor("map", Types.STRING(), Types.LONG()),
    )


def _apply(backend: HeapKeyedStateBackend, step: int) -> None:
    """Step 1: every key gets a value, a list and a map. Step 2: 16 keys change one
    state each or (every tenth) all, 4 new keys arrive; the others (and whole key groups) stay."""
    value, lists, maps = _descriptors()
    keys = DIFF_KEYS if step == 1 else [*DIFF_KEYS[:16], *(f"new-{i}" for i in range(4))]
    for i, key in enumerate(keys):
        backend.set_current_key(key)
        if step == 1 or key.startswith("new-"):
            backend.get_state(value).update(i)
            backend.get_list_state(lists).update([f"e{j}" for j in range(i % 3 + 1)])
            backend.get_map_state(maps).put_all({f"u{j}": i * j for j in range(i % 4 + 1)})
        elif i % 10 == 0:
            backend.get_state(value).clear()
            backend.get_list_state(lists).clear()
            backend.get_map_state(maps).clear()
        elif i % 3 == 0:
            backend.get_state(value).update(-i)
        elif i % 3 == 1:
            backend.get_list_state(lists).add("more")
        else:
            backend.get_map_state(maps).put("u0", 7)


def diff_roots(bucket: str, options: dict[str, Any]) -> dict[str, str]:
    """Root ``a`` with checkpoints 1 and 2 (steps 1 and 2) and root ``b`` with the state of ``a``'s
    second at another max parallelism, written by the library (the diff is what Spark reads)."""
    roots = {name: f"s3://{bucket}/diff/{name}" for name in ("a", "b")}
    a = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=32)
    storage = CheckpointStorage(roots["a"], options, incremental=True)
    for step in (1, 2):
        _apply(a, step)
        pending = storage.begin()
        pending.write_keyed("op", a)
        pending.commit()
    b = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=48)
    for step in (1, 2):
        _apply(b, step)
    pending = CheckpointStorage(roots["b"], options).begin()
    pending.write_keyed("op", b)
    pending.commit()
    return roots


def diff_section(spark: Any, endpoint: str, bucket: str) -> dict[str, Any]:
    """Each pair's diff of its states as Spark reads it (eight key groups, or units, a partition),
    with the partition each row came from."""
    from pyspark.sql.functions import spark_partition_id

    options = _options(endpoint)
    roots = diff_roots(bucket, options)
    diffs = {}
    for name, (old, old_id, new, new_id, states) in DIFF_PAIRS.items():
        for state in states:
            reader = spark.read.format("flinkstate").options(**fs_options(options))
            reader = reader.option("operator", "op").option("state", state).option("diffAgainst", roots[old])
            reader = reader.option("diffAgainstCheckpointId", str(old_id)).option("checkpointId", str(new_id))
            df = reader.option("keyGroupsPerPartition", "8").load(roots[new])
            rows = df.withColumn("partition_", spark_partition_id()).collect()
            diffs[f"{name}/{state}"] = [r.asDict(recursive=True) for r in rows]
    return {"roots": roots, "diffs": diffs}


def flink_section(spark: Any, endpoint: str, bucket: str) -> dict[str, Any]:
    """For each release: a keyed value state of Row values (two value columns), then a broadcast
    state appended, written as a Flink savepoint on the cluster; the keyed state read back there."""
    fs = fs_options(_options(endpoint))
    people = spark.createDataFrame(FLINK_ROWS, FLINK_SCHEMA).repartition(3)
    rules = spark.createDataFrame(FLINK_RULES, "tag string, rule string").repartition(2)
    writes = [
        (people, "overwrite", {"state": "person", "stateType": "value", "keyColumns": "user",
                               "valueColumns": "name,score"}),
        (rules, "append", {"state": "rules", "stateType": "broadcast", "keyColumns": "tag",
                           "valueColumns": "rule"}),
    ]  # fmt: skip
    out: dict[str, Any] = {}
    for version in FLINK_VERSIONS:
        path = f"s3://{bucket}/flink/{version}"
        for df, mode, options in writes:
            writer = df.write.format("flinkstate").mode(mode).options(**fs).option("format", "flink")
            writer = (
                writer.option("operator", "op").option("flinkVersion", version).option("parallelism", "2")
            )
            writer.options(**options).save(path)
        reader = spark.read.format("flinkstate").options(**fs).option("operator", "op")
        read = reader.option("state", "person").load(path).collect()
        out[version] = {"path": path, "person": [r.asDict(recursive=True) for r in read]}
    return out


def _write_values(
    spark: Any, root: str, options: dict[str, Any], rows: list[tuple[int, str]], mode: str
) -> None:
    df = spark.createDataFrame(rows, "key long, value string").repartition(FAULT_PARALLELISM)
    writer = df.write.format("flinkstate").mode(mode).options(**fs_options(options))
    writer = writer.option("operator", "op").option("state", "value").option("stateType", "value")
    writer.option("keyColumns", "key").option("valueColumns", "value").option(
        "parallelism", str(FAULT_PARALLELISM)
    ).save(root)


def _read_values(spark: Any, root: str, options: dict[str, Any]) -> list[list[Any]]:
    reader = spark.read.format("flinkstate").options(**fs_options(options)).option("operator", "op")
    df = reader.option("state", "value").option("keyGroupsPerPartition", "32").load(root)
    return sorted([r.key, r.value] for r in df.collect())


def _outcome(error: BaseException) -> dict[str, Any]:
    """What an error carried: our codes in its message (Spark wraps a task's error) and its start."""
    text = str(error)
    return {"codes": sorted({c for c in _CODE.findall(text) if c in OUR_CODES}), "error": text[:1500]}


def fault_section(spark: Any, endpoint: str, bucket: str) -> dict[str, Any]:
    """The batch write (an append over a first checkpoint) and the read, once clean (to count the
    requests), then under each fault of :func:`support.faults.cases` (the reads' kinds shifted by
    three: they meet a cut body, a truncated one and a late answer, the writes a 500, a 503 and a
    reset): each case's root and what came of it (``ok``, with the rows read; or the error).
    First checkpoints are the library's, written without the proxy; the reads share one."""
    proxy = FaultProxy(endpoint)
    read_root = _first_checkpoint(f"s3://{bucket}/faults/read", endpoint)
    operations: dict[str, tuple[Callable[[int], str], Callable[[str, dict[str, Any]], Any], int]] = {
        "write": (
            lambda n: _first_checkpoint(f"s3://{bucket}/faults/write-{n}", endpoint),
            lambda root, options: _write_values(spark, root, options, FAULT_MORE, "append"),
            0,
        ),
        "read": (lambda n: read_root, lambda root, options: _read_values(spark, root, options), 3),
    }
    runs: list[dict[str, Any]] = []
    try:
        for name, (root_of, operation, shift) in operations.items():
            clean = _fault_run(proxy, root_of(0), operation, None)
            runs.append({"operation": name, **clean})
            for n, faults in enumerate(
                _kinds_shifted(cases(clean["requests"], 2, READ_TIMEOUT * 1.6), shift), 1
            ):
                runs.append({"operation": name, **_fault_run(proxy, root_of(n), operation, faults)})
    finally:
        proxy.stop()
    return {"runs": runs, "injected": proxy.injected}


def _kinds_shifted(found: list[Faults], shift: int) -> list[Faults]:
    """``found`` with each single fault's kind ``shift`` further on in :data:`KINDS` (outages kept)."""
    return [
        f if f.outage else replace(f, kind=KINDS[(KINDS.index(f.kind) + shift) % len(KINDS)]) for f in found
    ]


def _first_checkpoint(root: str, endpoint: str) -> str:
    """``root`` with one checkpoint of ``FAULT_ROWS`` (state ``value`` of operator ``op``), in the
    three subtasks the Spark write appends with."""
    pending = CheckpointStorage(root, _options(endpoint)).begin()
    for subtask in range(FAULT_PARALLELISM):
        owned = compute_key_group_range_for_operator_index(128, FAULT_PARALLELISM, subtask)
        backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=128, key_group_range=owned)
        value = backend.get_state(ValueStateDescriptor("value", Types.STRING()))
        for key, text in FAULT_ROWS:
            if assign_to_key_group(key, 128, Types.LONG()) in owned:
                backend.set_current_key(key)
                value.update(text)
        pending.write_keyed("op", backend, subtask, FAULT_PARALLELISM)
    pending.commit()
    return root


def _fault_run(
    proxy: FaultProxy, root: str, operation: Callable[[str, dict[str, Any]], Any], faults: Faults | None
) -> dict[str, Any]:
    """``operation`` on ``root`` under ``faults`` (its requests through the proxy counted from 0)."""
    proxy.arm(faults)
    run: dict[str, Any] = {"root": root, "faults": repr(faults)}
    try:
        run["result"] = operation(root, proxied(proxy.endpoint, READ_TIMEOUT, bool(faults and faults.outage)))
        run["outcome"] = "ok"
    except Exception as error:
        run["outcome"] = _outcome(error)
    finally:
        run["requests"] = proxy.requests
        proxy.arm(None)
    return run


def _options(endpoint: str) -> dict[str, Any]:
    return {"key": "testing", "secret": "testing", "client_kwargs": {"endpoint_url": endpoint}}


SECTIONS: dict[str, Callable[[Any, str, str], dict[str, Any]]] = {
    "DIFF": diff_section,
    "FLINK": flink_section,
    "FAULTS": fault_section,
}


def drive(spark: Any, argv: list[str]) -> None:
    """``argv``: the S3 server's endpoint, a bucket on it. Prints ``<SECTION> <json>`` for each
    section (``{"error": traceback}`` when one failed) and goes on with the next."""
    import time

    endpoint, bucket = argv
    for name, section in SECTIONS.items():
        started = time.monotonic()
        try:
            result = section(spark, endpoint, bucket)
        except Exception:
            result = {"error": traceback.format_exc()[-6000:]}
        result["seconds"] = round(time.monotonic() - started, 1)
        print(name, json.dumps(result), flush=True)
