"""A small job's checkpoints (local and S3), its model, and a runner for the ``flinkstate`` command.

The job has three operators: ``counter`` (STRING keys: value, TTL value, list and map
states, one hot key), ``orders`` (ROW keys) and ``source`` (operator state only: split,
union and broadcast). Each checkpoint ``v`` (1, 2, ...) holds what :func:`model` says.
"""

from __future__ import annotations

import datetime
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner, Result

from flinkstate.checkpoint import CheckpointStorage
from flinkstate.cli import app
from flinkstate.state import (
    HeapKeyedStateBackend,
    ListStateDescriptor,
    MapStateDescriptor,
    OperatorStateBackend,
    StateTtlConfig,
    Types,
    ValueStateDescriptor,
    assign_to_key_group,
    compute_key_group_range_for_operator_index,
)

MAX_P = 32
P = 2
USERS = [f"user-{i}" for i in range(60)] + ["hot", "ünï-😀"]
COUNT = ValueStateDescriptor("count", Types.LONG())
EVENTS = ListStateDescriptor("events", Types.STRING())
TOTALS = MapStateDescriptor("totals", Types.STRING(), Types.LONG())
ORDER_KEY = Types.ROW_NAMED(["region", "id"], [Types.STRING(), Types.INT()])
AMOUNT = ValueStateDescriptor("amount", Types.DOUBLE())
OFFSETS = ListStateDescriptor("offsets", Types.LONG())
SOURCES = ListStateDescriptor("sources", Types.STRING())
RULES = MapStateDescriptor("rules", Types.STRING(), Types.STRING())
ORDERS = [("eu", i) for i in range(20)] + [("us", i) for i in range(5)]


def seen_descriptor() -> ValueStateDescriptor:
    """A TTL state (one day, so nothing expires while the tests run)."""
    desc = ValueStateDescriptor("seen", Types.STRING())
    desc.enable_time_to_live(StateTtlConfig.new_builder(datetime.timedelta(days=1)).build())
    return desc


def events_of(user: str, version: int) -> list[str]:
    n = 300 if user == "hot" else 2
    return [f"{user}/{version}/{j}" for j in range(n)]


def model(version: int) -> dict[str, dict[Any, Any]]:
    """What checkpoint ``version`` holds: state -> {key: value}."""
    return {
        "count": {u: i * 10 + version for i, u in enumerate(USERS)},
        "seen": {u: f"v{version}" for u in USERS[::3]},
        "events": {u: events_of(u, version) for u in USERS},
        "totals": {u: {"a": version, "b": i} for i, u in enumerate(USERS)},
        "amount": {k: k[1] * 1.5 + version for k in ORDERS},
    }


def _keyed(version: int, subtask: int) -> tuple[HeapKeyedStateBackend, HeapKeyedStateBackend]:
    rng = compute_key_group_range_for_operator_index(MAX_P, P, subtask)
    users = HeapKeyedStateBackend(key_type=Types.STRING(), max_parallelism=MAX_P, key_group_range=rng)
    orders = HeapKeyedStateBackend(key_type=ORDER_KEY, max_parallelism=MAX_P, key_group_range=rng)
    want = model(version)
    seen = seen_descriptor()
    for user in (u for u in USERS if assign_to_key_group(u, MAX_P, Types.STRING()) in rng):
        users.set_current_key(user)
        users.get_state(COUNT).update(want["count"][user])
        users.get_list_state(EVENTS).add_all(want["events"][user])
        users.get_map_state(TOTALS).put_all(want["totals"][user])
        if user in want["seen"]:
            users.get_state(seen).update(want["seen"][user])
    for key in (k for k in ORDERS if assign_to_key_group(k, MAX_P, ORDER_KEY) in rng):
        orders.set_current_key(key)
        orders.get_state(AMOUNT).update(want["amount"][key])
    return users, orders


def _operator(subtask: int) -> OperatorStateBackend:
    ops = OperatorStateBackend()
    ops.get_list_state(OFFSETS).add_all([subtask * 100 + j for j in range(3)])
    ops.get_union_list_state(SOURCES).add(f"source-{subtask}")
    ops.get_broadcast_state(RULES).put_all({"a": "1", "b": "2"})
    return ops


def write_job(root: str, options: dict[str, Any], versions: int = 1, retain: int = 10) -> None:
    """Checkpoints 1..``versions`` of the job under ``root``."""
    storage = CheckpointStorage(root, options, retain=retain)
    for version in range(1, versions + 1):
        pending = storage.begin()
        for i in range(P):
            users, orders = _keyed(version, i)
            pending.write_subtask("counter", i, P, MAX_P, keyed=users)
            pending.write_subtask("orders", i, P, MAX_P, keyed=orders)
            pending.write_subtask("source", i, P, MAX_P, operator=_operator(i))
        pending.commit()


@dataclass
class Job:
    """Where a job's checkpoints are, and how to reach them from the command line."""

    root: str
    options: dict[str, Any] = field(default_factory=dict)
    args: list[str] = field(default_factory=list)
    """``--storage-option`` arguments that reach ``root``."""


def s3_args(options: dict[str, Any]) -> list[str]:
    return [
        "-o",
        f"key={options['key']}",
        "-o",
        f"secret={options['secret']}",
        "-o",
        f"client_kwargs.endpoint_url={options['client_kwargs']['endpoint_url']}",
    ]


@pytest.fixture(params=["local", "s3"])
def job(request: pytest.FixtureRequest, tmp_path: Path) -> Job:
    """Three checkpoints of the job, on local disk or S3."""
    if request.param == "local":
        found = Job(str(tmp_path / "checkpoints"))
    else:
        request.applymarker(pytest.mark.s3)
        s3 = request.getfixturevalue("s3_options")
        found = Job(f"s3://{s3['bucket']}/checkpoints", s3["options"], s3_args(s3["options"]))
    write_job(found.root, found.options, versions=3)
    return found


@pytest.fixture
def local_job(tmp_path: Path) -> Job:
    found = Job(str(tmp_path / f"checkpoints-{uuid.uuid4().hex[:6]}"))
    write_job(found.root, found.options, versions=3)
    return found


Run = Callable[..., Result]


@pytest.fixture
def run() -> Run:
    """``run(*args, code=0)``: invoke the command, check its exit status, return the result."""
    runner = CliRunner(env={"COLUMNS": "200", "FLINKSTATE_DEBUG": ""})

    def invoke(*args: str, code: int = 0) -> Result:
        result = runner.invoke(app, list(args))
        assert result.exit_code == code, (result.exit_code, result.stdout, result.stderr, result.exception)
        return result

    return invoke
