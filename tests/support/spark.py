"""Spark set-ups: the tests' SparkSession (``session``: one per test session, classic or Spark
Connect), and Spark drivers in subprocesses (a process holds one SparkContext, and the other
tiers hold a local one). A driver script is a body run after a preamble that puts ``tests/`` on
``sys.path`` and builds ``spark`` on the given master and configuration; ``sys.argv[1:]`` are
the arguments given. Masters: ``local[N,F]`` (F attempts per task), ``LOCAL_CLUSTER`` (executor
JVMs of their own, started by the driver) or a standalone cluster's (:mod:`.cluster`)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
import time
import warnings
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from . import TESTS as _TESTS

TESTS = str(_TESTS)
"""``tests/`` as the drivers' preamble puts it on ``sys.path``."""

LOCAL_CLUSTER = "local-cluster[2,1,1024]"
"""Two executor JVMs of one core and 1 GiB each, started by the driver itself."""

PREAMBLE = """\
import os, sys
sys.path.insert(0, {tests!r})
from pyspark.sql import SparkSession
_builder = SparkSession.builder.master({master!r})
for _key, _value in {conf!r}.items():
    _builder = _builder.config(_key, _value)
spark = _builder.getOrCreate()
spark.sparkContext.setLogLevel({log_level!r})
"""

EPILOGUE = "\nspark.stop()\n"


def session(connect: bool = False) -> Any:
    """The tests' session on ``local[2]``: classic, or with ``connect`` a Spark Connect session on a
    local server (the two cannot share a process: a Connect session switches PySpark's functions to
    Connect), whose reads and writes find the data source by PySpark's discovery alone. The
    classic one logs errors only and has the data source registered."""
    from pyspark.sql import SparkSession

    from flinkstate.connector import register

    builder = SparkSession.builder.remote("local[2]") if connect else SparkSession.builder.master("local[2]")
    with warnings.catch_warnings():  # Connect starts its server with these, then warns it cannot set them
        warnings.filterwarnings("ignore", ".*CANNOT_MODIFY_CONFIG", UserWarning)
        spark = (
            builder.appName("flinkstate-tests")
            .config("spark.ui.enabled", "false")
            .config("spark.sql.shuffle.partitions", "2")
            .config("spark.sql.session.timeZone", "UTC")
            .config("spark.driver.memory", "2g")
            .getOrCreate()
        )
    if not connect:
        spark.sparkContext.setLogLevel("ERROR")
        register(spark)  # Connect: the server discovers pyspark_flinkstate (register is tested there too)
    return spark


def driver_script(
    body: str, master: str, conf: Mapping[str, str] | None = None, log_level: str = "ERROR"
) -> str:
    """The full text of a driver: the preamble, ``body`` (dedented), then ``spark.stop()``."""
    preamble = PREAMBLE.format(tests=TESTS, master=master, conf=dict(conf or {}), log_level=log_level)
    return preamble + textwrap.dedent(body) + EPILOGUE


@dataclass(frozen=True)
class DriverResult:
    """What a finished driver left: its exit code and output."""

    returncode: int
    stdout: str
    stderr: str

    def lines(self, prefix: str) -> list[str]:
        """The stdout lines starting with ``prefix``, without it."""
        return [line[len(prefix) :].strip() for line in self.stdout.splitlines() if line.startswith(prefix)]

    def failure(self, tail: int = 6000) -> str:
        """A message for a failed assertion: the exit code and the ends of both outputs."""
        return f"exit {self.returncode}\n--- stdout\n{self.stdout[-2000:]}\n--- stderr\n{self.stderr[-tail:]}"


@dataclass
class Driver:
    """A driver running in the background (``start_driver``); its output goes to files."""

    process: subprocess.Popen[bytes]
    directory: Path
    started: float = field(default_factory=time.monotonic)
    temporary: bool = False
    """The directory was made for it: ``wait`` removes it once it has read the outputs."""

    @property
    def pid(self) -> int:
        return self.process.pid

    def running(self) -> bool:
        return self.process.poll() is None

    def stdout(self) -> str:
        """What it printed so far."""
        return (self.directory / "stdout").read_text(errors="replace")

    def wait(self, timeout: float = 600) -> DriverResult:
        """Wait for the end (killing it after ``timeout`` s) and return what it left."""
        try:
            code = self.process.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.process.kill()
            code = self.process.wait()
        done = DriverResult(code, self.stdout(), (self.directory / "stderr").read_text(errors="replace"))
        if self.temporary:
            shutil.rmtree(self.directory, ignore_errors=True)
        return done


def start_driver(
    body: str,
    *args: str,
    master: str,
    conf: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    log_level: str = "ERROR",
    directory: Path | None = None,
) -> Driver:
    """Start the driver ``body`` on ``master`` with ``args`` in the background.

    ``env`` is added to this process's environment (``PYSPARK_PYTHON`` and
    ``PYSPARK_DRIVER_PYTHON`` are this interpreter); ``directory`` (default: a new temporary
    one, removed by ``wait``) holds the script and its ``stdout``/``stderr``.
    """
    where = directory or Path(tempfile.mkdtemp(prefix="flinkstate-driver-"))
    where.mkdir(parents=True, exist_ok=True)
    script = where / "driver.py"
    script.write_text(driver_script(body, master, conf, log_level))
    full_env = dict(os.environ, PYSPARK_PYTHON=sys.executable, PYSPARK_DRIVER_PYTHON=sys.executable)
    full_env.update(env or {})
    with (where / "stdout").open("wb") as out, (where / "stderr").open("wb") as err:
        process = subprocess.Popen(
            [sys.executable, "-u", str(script), *args], env=full_env, stdout=out, stderr=err, cwd=where
        )
    return Driver(process, where, temporary=directory is None)


def run_driver(
    body: str,
    *args: str,
    master: str,
    conf: Mapping[str, str] | None = None,
    env: Mapping[str, str] | None = None,
    timeout: float = 600,
    log_level: str = "ERROR",
    directory: Path | None = None,
) -> DriverResult:
    """Run the driver ``body`` on ``master`` with ``args`` to its end (see ``start_driver``)."""
    driver = start_driver(
        body, *args, master=master, conf=conf, env=env, log_level=log_level, directory=directory
    )
    return driver.wait(timeout)
