"""Restoring a savepoint in a PyFlink 2.3 job (the ``flink`` tier and the fixture generator): runs
``tests/fixtures/flink/pyflink_restore_job.py`` with the Python of the virtualenv ``$FLINK_VENV``."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from flink_restore import flink_lib

JOB = Path(__file__).resolve().parents[2] / "fixtures" / "flink" / "pyflink_restore_job.py"


def restore_pyflink(
    savepoint: Path, spec: str, backend: str, mode: str, work: Path, venv: str | None = None
) -> list[str]:
    """Run the PyFlink restore job in ``mode`` on ``backend`` from ``savepoint``: its lines, sorted."""
    lib = flink_lib(venv)
    assert lib is not None, "needs a virtualenv with apache-flink 2.3 ($FLINK_VENV)"
    python = lib.parents[4] / "bin" / "python"
    work.mkdir(parents=True, exist_ok=True)
    (work / "spec.json").write_text(spec, encoding="utf-8")
    out = work / f"restored-{backend}-{mode}.txt"
    cmd = [str(python), str(JOB), str(savepoint.resolve()), str(work / "spec.json"), str(out), backend, mode]
    env = {k: v for k, v in os.environ.items() if k != "VIRTUAL_ENV"}
    # Thread mode's embedded interpreter (pemja) sees the base Python's path only.
    env["PYTHONPATH"] = os.pathsep.join([str(lib.parents[1]), str(JOB.parent)])
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=900, check=False, env=env)
    if done.returncode != 0 or not out.exists():
        raise AssertionError(
            f"PyFlink's restore failed ({done.returncode}):\n{done.stdout[-4000:]}\n{done.stderr[-6000:]}"
        )
    return sorted(out.read_text(encoding="utf-8").splitlines())
