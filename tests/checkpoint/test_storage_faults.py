"""Object-store faults on every public path: exact or a typed error, nothing committed lost.

Each operation runs against the loopback S3 server through the fault proxy
(:mod:`support.faults`), once clean to count its requests, then with one request failing
(500, 503 SlowDown, a reset before or in the answer, a truncated body, an answer later than
the read timeout) at six request indexes spread over them, the kind turning with the index
(``FAULTS=all``, as ``make faults`` runs it: every kind at every index), and under an outage
from the middle request on. After each run, with the proxy quiet: the run raised nothing
but our errors; every completed checkpoint under the root verifies whole; the latest
restores exactly (the model before the operation, or after it when it committed); what the
operation wrote elsewhere (a savepoint) is, when the run succeeded, the model, and else
absent or whole. The Spark paths are swept in ``tests/connector/test_spark_storage_faults.py``.
"""

from __future__ import annotations

import tempfile
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from checkpoint_data import VALUE, contents, fill
from support.faults import FaultProxy, Faults, cases, proxied, proxy_with_bucket
from typer.testing import CliRunner

from flinkstate.checkpoint import CheckpointStorage, Storage, check_files, open_checkpoint
from flinkstate.checkpoint.flink import read_savepoint, write_savepoint
from flinkstate.cli import app
from flinkstate.state import FlinkStateError, HeapKeyedStateBackend, Types

pytestmark = [pytest.mark.s3, pytest.mark.slow]

KEYS = range(40)
READ_TIMEOUT = 1.0
FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "flink" / "timers_heap"
Options = dict[str, Any]


@pytest.fixture(scope="module")
def proxy() -> Iterator[FaultProxy]:
    yield from proxy_with_bucket()


def _options(proxy: FaultProxy, outage: bool = False) -> Options:
    return proxied(proxy.endpoint, READ_TIMEOUT, outage)


def _args(options: Options, flag: str = "-o") -> list[str]:
    """``options`` as the command line's storage options."""
    config = options["config_kwargs"]
    pairs = [
        f"key={options['key']}", f"secret={options['secret']}",
        f"client_kwargs.endpoint_url={options['client_kwargs']['endpoint_url']}",
        *(f"config_kwargs.{k}={v}" for k, v in config.items() if k != "retries"),
        *(f"config_kwargs.retries.{k}={v}" for k, v in config.get("retries", {}).items()),
    ]  # fmt: skip
    return [a for pair in pairs for a in (flag, pair)]


def _cli(*args: str) -> None:
    """Run the command; an exit with a ``[CODE]`` line of ours is our error, anything else fails."""
    result = CliRunner().invoke(app, list(args))
    if result.exit_code == 0:
        return
    lines = (result.stderr or result.output).strip().splitlines()
    text = lines[-1] if lines else ""
    typed = result.exit_code == 3 and text.startswith("[") and not text.startswith("[UNEXPECTED]")
    assert typed, f"flinkstate {args[0]} exit {result.exit_code}: {result.output}"
    raise FlinkStateError(text, code=text[1 : text.index("]")])


def _backend(version: int) -> HeapKeyedStateBackend:
    return fill(HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=16), KEYS, version)


def _plain(version: int) -> HeapKeyedStateBackend:
    """Value state in the void namespace only (what a Flink savepoint can hold)."""
    backend = HeapKeyedStateBackend(key_type=Types.LONG(), max_parallelism=16)
    state = backend.get_state(VALUE)
    for k in KEYS:
        backend.set_current_key(k)
        state.update(k * 10 + version)
    return backend


def _commit(
    root: str, options: Options, version: int, incremental: bool = False, backend: Any = _backend
) -> None:
    storage = CheckpointStorage(root, options, incremental=incremental, retain=10)
    pending = storage.begin()
    pending.write_keyed("op", backend(version))
    pending.commit()


def _restored(root: str, options: Options) -> Any:
    storage = CheckpointStorage(root, options)
    if storage.latest_id() is None:
        return None
    return contents(storage.load().keyed_backend("op", 0, 1))  # type: ignore[arg-type]


def _over_one(version: int) -> HeapKeyedStateBackend:
    """Version ``version`` written over version 1 in the same backend (what :class:`Native` holds)."""
    return fill(_backend(1), KEYS, version) if version > 1 else _backend(1)


class Native:
    """A RocksDB backend committing native checkpoints: version 1 in the setup, 2 in the run."""

    def __init__(self, root: str, options: Options) -> None:
        from flinkstate.state.rocksdb import RocksDBKeyedStateBackend

        self.storage = CheckpointStorage(root, options, incremental=True, retain=10, rocksdb_format="native")
        self.work = tempfile.TemporaryDirectory()
        self.backend = RocksDBKeyedStateBackend(self.work.name, Types.LONG(), 16)
        self.commit(1)

    def commit(self, version: int, options: Options | None = None) -> None:
        if options is not None:  # the run's storage: the same root through the armed proxy
            self.storage = CheckpointStorage(
                self.storage.storage.url, options, incremental=True, retain=10, rocksdb_format="native"
            )
        pending = self.storage.begin()
        pending.write_keyed("op", fill(self.backend, KEYS, version))
        pending.commit()

    def close(self) -> None:
        self.backend.close()
        self.work.cleanup()


def _flink_values(target: str, options: Options) -> Any:
    """The written savepoint's keyed values (``None``: no savepoint there)."""
    if not Storage(target, options).exists("_metadata"):
        return None
    sp = read_savepoint(target, options)
    return sorted(str(r) for r in sp.keyed_state("op", "value").to_pylist())


def _ours_values(target: str, options: Options) -> Any:
    if not Storage(target, options).exists("_metadata"):
        return None
    done = open_checkpoint(target, options)
    return {op.uid: sorted(s.name for s in op.keyed_states) for op in done.manifest.operators}


@dataclass(frozen=True)
class Operation:
    """``setup(root, options)`` (no faults; its result is the run's ``context``), then
    ``run(root, options, context)``; ``before``/``after``: the model version the root's latest
    checkpoint holds when the run did not / did commit (``None``: no checkpoint);
    ``written(root, options)``: what the run wrote elsewhere, read back (``None``: nothing),
    compared with the clean run's when the run succeeded."""

    setup: Callable[[str, Options], Any]
    run: Callable[[str, Options, Any], Any]
    before: int | None
    after: int | None
    written: Callable[[str, Options], Any] | None = None
    model: Callable[[int], HeapKeyedStateBackend] = _backend


def _none(root: str, options: Options) -> None:
    return None


def _verify(root: str, options: Options, context: Any) -> None:
    _cli("verify", root, "--all", *_args(options))


def _gc(root: str, options: Options, context: Any) -> None:
    _cli("gc", root, "--retain", "1", "--older-than", "0s", "--force-short-grace", *_args(options))


def _convert_in(root: str, options: Options, context: Any) -> None:
    _cli("convert", str(FIXTURE), f"{root}-ours", "--to", "flinkstate", *_args(options, "--target-option"))


OPERATIONS: dict[str, Operation] = {
    "full commit": Operation(_none, lambda r, o, c: _commit(r, o, 1), None, 1),
    "incremental commit": Operation(
        lambda r, o: _commit(r, o, 1, True), lambda r, o, c: _commit(r, o, 2, True), 1, 2
    ),
    "native commit": Operation(  # version 2 written over version 1 in the same backend
        Native, lambda r, o, c: c.commit(2, o), 1, 2, model=_over_one
    ),
    "restore": Operation(lambda r, o: _commit(r, o, 1), lambda r, o, c: _restored(r, o), 1, 1),
    "verify": Operation(lambda r, o: _commit(r, o, 1), _verify, 1, 1),
    "gc": Operation(
        lambda r, o: (_commit(r, o, 1), _commit(r, o, 2)),
        _gc,
        2, 2,
    ),
    "write flink savepoint": Operation(
        lambda r, o: _commit(r, o, 1, backend=_plain),
        lambda r, o, c: write_savepoint(CheckpointStorage(r, o).load(), f"{r}-flink", storage=o),
        1, 1, lambda r, o: _flink_values(f"{r}-flink", o), _plain,
    ),
    "convert flink to ours": Operation(
        _none,
        _convert_in,
        None, None, lambda r, o: _ours_values(f"{r}-ours", o),
    ),
    "edit": Operation(
        lambda r, o: _commit(r, o, 1),
        lambda r, o, c: _cli("edit", r, f"{r}-edited", "--rename-operator", "op=renamed", *_args(o)),
        1, 1, lambda r, o: _ours_values(f"{r}-edited", o),
    ),
}  # fmt: skip


def _check_whole(root: str, options: Options) -> None:
    """Every completed checkpoint under ``root`` references only whole files."""
    for checkpoint_id in CheckpointStorage(root, options).completed_ids():
        directory = Storage(f"{root}/chk-{checkpoint_id}", options)
        refs = list(open_checkpoint(directory.url, options).manifest.files())
        problems = check_files([(directory, ref) for ref in refs])
        assert problems == [None] * len(refs), (checkpoint_id, problems)


@pytest.mark.parametrize("name", sorted(OPERATIONS))
def test_every_request_failing(proxy: FaultProxy, name: str) -> None:
    op = OPERATIONS[name]
    quiet = _options(proxy)
    models = {v: contents(op.model(v)) for v in (1, 2)}
    bucket = proxy.bucket

    def run(faults: Faults | None) -> tuple[str, str, Any, int]:
        root = f"s3://{bucket}/{name.replace(' ', '-')}-{uuid.uuid4().hex[:8]}"
        proxy.arm(None)
        context = op.setup(root, quiet)
        proxy.arm(faults)
        try:
            op.run(root, _options(proxy, faults is not None and faults.outage), context)
            outcome = "ok"
        except FlinkStateError as exc:
            outcome = exc.code
        finally:
            requests = proxy.requests
            proxy.arm(None)
            if hasattr(context, "close"):
                context.close()
        return root, outcome, op.written(root, quiet) if op.written is not None else None, requests

    root, outcome, clean, count = run(Faults(at=None))
    assert outcome == "ok" and count > 0
    outcomes: dict[str, int] = {}
    for faults in cases(count, 6, READ_TIMEOUT * 1.6):
        root, outcome, written, _ = run(faults)
        _check_whole(root, quiet)
        latest = _restored(root, quiet)
        allowed = [models.get(v) if v is not None else None for v in (op.before, op.after)]
        assert latest in allowed, faults
        if outcome == "ok":
            assert latest == allowed[1], faults
            assert written == clean, faults
        else:
            assert written in (None, clean), faults
        outcomes[outcome] = outcomes.get(outcome, 0) + 1
    print(f"{name}: {count} requests, {sum(outcomes.values())} faults, outcomes {outcomes}")
