"""Object-store faults on the Spark paths: the reader, the batch writer, the streaming sink
and ``process``, each against the loopback S3 server through the fault proxy
(:mod:`support.faults`): once clean to count its requests, then with one request failing at
a few indexes spread over them (``FAULTS=all``, as ``make faults`` runs it: every kind at
every index) and under an outage from the middle on. Each run gives the model or fails with
an error of ours (Spark carries the task's error in its message); afterwards, with the
proxy quiet, every completed checkpoint under the root verifies whole and the latest holds
the model before or after the run (after, when it succeeded). The library's paths:
``tests/checkpoint/test_storage_faults.py``.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from support.faults import FaultProxy, Faults, cases, proxied, proxy_with_bucket

from flinkstate.checkpoint import CheckpointStorage, Storage, check_files, open_checkpoint
from flinkstate.connector import process
from flinkstate.state import FlinkStateError

from process_functions import WordCount, word_count_model

pytestmark = [pytest.mark.s3, pytest.mark.slow]

READ_TIMEOUT = 2.0
ROWS = [(i, f"v-{i}-ü") for i in range(30)]
WORDS = ["a", "b", "a", "ç", "a"]
Options = dict[str, Any]
_CODE = re.compile(r"\[([A-Z][A-Z0-9_]+)\]")
_TABLE = Path(__file__).resolve().parents[2] / "docs" / "errors.md"
OUR_CODES = set(re.findall(r"^\| `([A-Z0-9_]+)` \|", _TABLE.read_text(), re.MULTILINE))
"""The codes of our errors (the error table of the docs)."""


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultProxy]:
    yield from proxy_with_bucket()


def _fs(options: Options) -> dict[str, str]:
    """Storage options as the data source's ``fs.`` options."""
    config = options["config_kwargs"]
    out = {"fs.key": options["key"], "fs.secret": options["secret"]}
    out["fs.client_kwargs.endpoint_url"] = options["client_kwargs"]["endpoint_url"]
    out |= {f"fs.config_kwargs.{k}": str(v) for k, v in config.items() if k != "retries"}
    out |= {f"fs.config_kwargs.retries.{k}": str(v) for k, v in config.get("retries", {}).items()}
    return out


def _write(spark: Any, root: str, options: Options, rows: list[tuple[int, str]], mode: str) -> None:
    df = spark.createDataFrame(rows, "key long, value string")
    writer = df.write.format("flinkstate").mode(mode).options(**_fs(options))
    writer = writer.option("operator", "op").option("state", "value").option("stateType", "value")
    writer.option("keyColumns", "key").option("valueColumns", "value").save(root)


def _read(spark: Any, root: str, options: Options) -> list[tuple[Any, ...]]:
    reader = spark.read.format("flinkstate").options(**_fs(options))
    df = reader.option("operator", "op").option("state", "value").load(root)
    return sorted((r.key, r.value) for r in df.collect())


def _stream(spark: Any, root: str, options: Options, source: Path) -> None:
    query = (
        spark.readStream.schema("key long, value string").json(str(source))
        .writeStream.format("flinkstate").options(**_fs(options))
        .option("checkpointLocation", str(source.parent / f"chk-{uuid.uuid4().hex[:8]}"))
        .option("operator", "op").option("state", "value").option("stateType", "value")
        .option("keyColumns", "key").option("valueColumns", "value")
        .trigger(availableNow=True).start(root)
    )  # fmt: skip
    query.awaitTermination()


def _count(spark: Any, root: str, options: Options) -> list[tuple[Any, ...]]:
    df = spark.createDataFrame([(w,) for w in WORDS], "word string")
    out = process(df, "word", WordCount(), "word string, count bigint", root, "op", parallelism=2,
                  storage_options=options)  # fmt: skip
    return sorted(map(tuple, out.collect()))


def _words(spark: Any, root: str, options: Options) -> Any:
    """What the latest checkpoint of the word count holds (``None``: none)."""
    if CheckpointStorage(root, options).latest_id() is None:
        return None
    reader = spark.read.format("flinkstate").options(**_fs(options)).option("operator", "op")
    return sorted((r.key, r.value) for r in reader.option("state", "count").load(root).collect())


def _values(spark: Any, root: str, options: Options) -> Any:
    return _read(spark, root, options) if CheckpointStorage(root, options).latest_id() is not None else None


@dataclass(frozen=True)
class Operation:
    """``setup(spark, root, options)`` without faults, ``run(spark, root, options)`` under them;
    ``held(spark, root, options)``: what the root's latest checkpoint holds; ``before``/``after``
    its value when the run did not / did commit; ``result``: what a successful run returns."""

    setup: Callable[[Any, str, Options], Any]
    run: Callable[[Any, str, Options], Any]
    held: Callable[[Any, str, Options], Any]
    before: Any
    after: Any
    result: Any = None


MORE = [(i, f"w-{i}") for i in range(20, 40)]
AFTER = sorted(dict([*ROWS, *MORE]).items())
"""What the streaming sink's upserts of ``MORE`` leave over ``ROWS``."""


def _operations(tmp: Path) -> dict[str, Operation]:
    source = tmp / "stream-in"
    source.mkdir()
    (source / "a.json").write_text("".join(json.dumps({"key": k, "value": v}) + "\n" for k, v in MORE))
    counted = sorted(word_count_model(WORDS).items())
    return {
        "spark read": Operation(lambda s, r, o: _write(s, r, o, ROWS, "overwrite"), _read, _values,
                                sorted(ROWS), sorted(ROWS), sorted(ROWS)),
        "spark write": Operation(lambda s, r, o: _write(s, r, o, ROWS, "overwrite"),
                                 lambda s, r, o: _write(s, r, o, MORE, "append"), _values,
                                 sorted(ROWS), sorted(MORE)),  # an append replaces the state it names
        "streaming sink": Operation(lambda s, r, o: _write(s, r, o, ROWS, "overwrite"),
                                    lambda s, r, o: _stream(s, r, o, source), _values, sorted(ROWS), AFTER),
        "process": Operation(lambda s, r, o: None, _count, _words, None, counted, _increments()),
    }  # fmt: skip


def _increments() -> list[tuple[str, int]]:
    """What the word count emits: each word with its running count."""
    seen: dict[str, int] = {}
    out = []
    for w in WORDS:
        seen[w] = seen.get(w, 0) + 1
        out.append((w, seen[w]))
    return sorted(out)


def _ours(exc: BaseException) -> str:
    """The code of our error ``exc`` carries (Spark wraps a task's error in its own), or fail."""
    if isinstance(exc, FlinkStateError):
        return exc.code
    ours = [c for c in _CODE.findall(str(exc)) if c in OUR_CODES]
    assert ours, f"not an error of ours: {type(exc).__name__}: {str(exc)[:2000]}"
    return ours[0]


def _check_whole(root: str, options: Options) -> None:
    for checkpoint_id in CheckpointStorage(root, options).completed_ids():
        directory = Storage(f"{root}/chk-{checkpoint_id}", options)
        refs = list(open_checkpoint(directory.url, options).manifest.files())
        assert check_files([(directory, ref) for ref in refs]) == [None] * len(refs), checkpoint_id


@pytest.mark.parametrize("name", ["spark read", "spark write", "streaming sink", "process"])
def test_spark_paths_under_faults(spark: Any, proxy: FaultProxy, tmp_path: Path, name: str) -> None:
    op = _operations(tmp_path)[name]
    quiet = proxied(proxy.endpoint, READ_TIMEOUT)
    bucket = proxy.bucket

    def run(faults: Faults | None) -> tuple[str, str, int]:
        root = f"s3://{bucket}/{name.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
        proxy.arm(None)
        op.setup(spark, root, quiet)
        proxy.arm(faults)
        try:
            result = op.run(
                spark, root, proxied(proxy.endpoint, READ_TIMEOUT, bool(faults and faults.outage))
            )
            outcome = "ok"
            if op.result is not None:
                assert result == op.result, faults
        except AssertionError:
            raise
        except Exception as exc:
            outcome = _ours(exc)
        finally:
            requests = proxy.requests
            proxy.arm(None)
        return root, outcome, requests

    root, outcome, count = run(Faults(at=None))
    assert outcome == "ok" and count > 0
    assert op.held(spark, root, quiet) == op.after
    outcomes: dict[str, int] = {}
    for faults in cases(count, 4, READ_TIMEOUT * 1.6):
        root, outcome, _ = run(faults)
        _check_whole(root, quiet)
        held = op.held(spark, root, quiet)
        assert held in (op.before, op.after), faults
        if outcome == "ok":
            assert held == op.after, faults
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(f"{name}: {count} requests, {sum(outcomes.values())} faults, outcomes {outcomes}")
