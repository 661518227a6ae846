"""A Spark standalone cluster on loopback, as users run one: a Master and Workers started with
``spark-class`` from the installed pyspark (``SPARK_HOME`` is its package directory), each
Worker with one core, its own work directory and its own ``SPARK_LOCAL_DIRS``. Drivers run in
subprocesses (see :mod:`.spark`) against ``spark://127.0.0.1:<port>``."""

from __future__ import annotations

import json
import os
import shlex
import signal
import subprocess
import sys
import time
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pyspark

from . import free_port, procs
from .spark import Driver, DriverResult, start_driver

SPARK_HOME = str(Path(pyspark.__file__).parent)
MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"

DRIVER_CONF = {
    "spark.executor.cores": "1",
    "spark.cores.max": "2",
    "spark.executor.memory": "1500m",
    "spark.driver.host": "127.0.0.1",
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
"""What every driver on the cluster sets: one executor of one core per Worker."""


@dataclass
class Worker:
    """One Worker JVM: its process, directories and log."""

    index: int
    process: subprocess.Popen[bytes]
    work_dir: Path
    local_dir: Path
    log: Path

    @property
    def pid(self) -> int:
        return self.process.pid

    def executors(self) -> list[int]:
        """The executor JVMs this Worker runs now (``CoarseGrainedExecutorBackend``)."""
        return [p for p in procs.children(self.pid) if procs.is_executor(p)]

    def python_workers(self) -> list[int]:
        """The Python processes (``pyspark.daemon`` and its forked workers) under its executors."""
        return [p for e in self.executors() for p in procs.descendants(e) if procs.is_python_worker(p)]


class StandaloneCluster:
    """A Master and ``workers`` Workers under ``base`` (logs, work and local directories)."""

    def __init__(
        self,
        base: Path,
        workers: int = 2,
        worker_memory: str = "2g",
        private: Mapping[int, Path] | None = None,
    ) -> None:
        """``private``: Worker index -> a directory that Worker (with its executors and Python
        workers) sees as an empty directory of its own (a tmpfs mounted over it in a mount
        namespace of its own, as root): a host whose filesystem differs from the others'."""
        self.base = base
        self.worker_memory = worker_memory
        self.private = dict(private or {})
        self.port = free_port()
        self.webui_port = free_port()
        self.master_log = base / "master.log"
        self.master = self._spawn([MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port),
                                   "--webui-port", str(self.webui_port)], self.master_log, {})  # fmt: skip
        self.workers: list[Worker] = []
        try:
            self._wait(lambda: self.state() is not None, 60, "the Master did not answer")
            for i in range(workers):
                self.workers.append(self._start_worker(i))
            self.wait_for_workers(workers)
        except BaseException:
            self.stop()
            raise

    @property
    def url(self) -> str:
        """The master URL drivers connect to."""
        return f"spark://127.0.0.1:{self.port}"

    def _spawn(
        self, args: list[str], log: Path, env: Mapping[str, str], private: Path | None = None
    ) -> subprocess.Popen[bytes]:
        full_env = dict(os.environ, SPARK_HOME=SPARK_HOME, SPARK_LOCAL_IP="127.0.0.1",
                        PYSPARK_PYTHON=sys.executable, **env)  # fmt: skip
        command = [f"{SPARK_HOME}/bin/spark-class", *args]
        if private is not None:  # the same pid: unshare and sh exec what follows
            mount = f"mount -t tmpfs flinkstate-private {shlex.quote(str(private))}"
            command = ["unshare", "-m", "sh", "-c", f'{mount} && exec "$@"', "sh", *command]
        with log.open("ab") as out:
            return subprocess.Popen(command, env=full_env, stdout=out, stderr=subprocess.STDOUT,
                                    cwd=self.base)  # fmt: skip

    def _start_worker(self, index: int) -> Worker:
        work_dir, local_dir = self.base / f"worker{index}-work", self.base / f"worker{index}-local"
        work_dir.mkdir(exist_ok=True)
        local_dir.mkdir(exist_ok=True)
        log = self.base / f"worker{index}.log"
        args = [WORKER_CLASS, "--host", "127.0.0.1", "--cores", "1", "--memory", self.worker_memory,
                "--webui-port", str(free_port()), "--work-dir", str(work_dir), self.url]  # fmt: skip
        process = self._spawn(args, log, {"SPARK_LOCAL_DIRS": str(local_dir)}, self.private.get(index))
        return Worker(index, process, work_dir, local_dir, log)

    # -- state -------------------------------------------------------------------------

    def state(self) -> dict[str, Any] | None:
        """The Master's JSON (``/json/``: workers, apps), or None when it does not answer."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.webui_port}/json/", timeout=2) as answer:
                return dict(json.load(answer))
        except (OSError, ValueError):
            return None

    def alive_workers(self) -> int:
        """How many Workers the Master counts as alive."""
        state = self.state() or {}
        return sum(1 for w in state.get("workers", []) if w.get("state") == "ALIVE")

    def wait_for_workers(self, n: int | None = None, timeout: float = 120) -> None:
        """Wait until ``n`` (default: all) Workers are registered and alive."""
        want = len(self.workers) if n is None else n
        self._wait(lambda: self.alive_workers() >= want, timeout, f"fewer than {want} Workers registered")

    def _wait(self, ready: Any, timeout: float, what: str) -> None:
        deadline = time.monotonic() + timeout
        while not ready():
            dead = [p for p in (self.master, *(w.process for w in self.workers)) if p.poll() is not None]
            if dead or time.monotonic() > deadline:
                exited = [str(p.args[1]) for p in dead if isinstance(p.args, list)]
                raise RuntimeError(f"{what} (exited: {exited}); logs in {self.base}")
            time.sleep(0.25)

    def restart_worker(self, index: int, timeout: float = 180) -> Worker:
        """SIGKILL Worker ``index`` if it still runs, start it again on its directories and wait
        until every Worker is registered (4 s with no app; up to ~45 s were seen)."""
        old = self.workers[index]
        if old.process.poll() is None:
            old.process.kill()
        old.process.wait()
        self.workers[index] = self._start_worker(index)
        self.wait_for_workers(timeout=timeout)
        return self.workers[index]

    def executors(self) -> list[int]:
        """Every executor JVM on the cluster now."""
        return [e for w in self.workers for e in w.executors()]

    def python_workers(self) -> list[int]:
        """Every Python worker process under an executor now."""
        return [p for w in self.workers for p in w.python_workers()]

    # -- drivers -----------------------------------------------------------------------

    def start_driver(
        self,
        body: str,
        *args: str,
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        directory: Path | None = None,
        log_level: str = "ERROR",
    ) -> Driver:
        """Start a driver on this cluster in the background (``DRIVER_CONF`` plus ``conf``)."""
        return start_driver(body, *args, master=self.url, conf={**DRIVER_CONF, **(conf or {})},
                            env={"SPARK_LOCAL_IP": "127.0.0.1", **(env or {})},
                            log_level=log_level, directory=directory)  # fmt: skip

    def run_driver(
        self,
        body: str,
        *args: str,
        conf: Mapping[str, str] | None = None,
        env: Mapping[str, str] | None = None,
        timeout: float = 600,
        directory: Path | None = None,
        log_level: str = "ERROR",
    ) -> DriverResult:
        """Run a driver on this cluster to its end."""
        driver = self.start_driver(body, *args, conf=conf, env=env, directory=directory, log_level=log_level)
        return driver.wait(timeout)

    # -- end ---------------------------------------------------------------------------

    def stop(self, timeout: float = 20) -> None:
        """Terminate the Workers, then the Master; kill whatever is left, their executors and
        Python workers too."""
        below = [(p, procs.start_time(p)) for w in self.workers for p in procs.descendants(w.pid)]
        for process in [*(w.process for w in self.workers), self.master]:
            if process.poll() is None:
                process.terminate()
        for process in [*(w.process for w in self.workers), self.master]:
            try:
                process.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
        left = [p for p, started in below if started is not None and procs.start_time(p) == started]
        procs.kill(procs.wait_gone(left, 5), signal.SIGKILL)
