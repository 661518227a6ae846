"""Hostile bytes in our own checkpoints: a fixed-seed hunt (``tests/support/hunt.py``) over a small
checkpoint's manifest and data files; every read ends in exactly the clean value (every file is
checksummed) or one of our errors, in bounded time and memory."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

HUNT = Path(__file__).resolve().parents[2] / "support" / "hunt.py"


def test_mutated_checkpoint_files_end_in_their_value_or_a_typed_error() -> None:
    done = subprocess.run(
        [sys.executable, str(HUNT), "--seed", "5", "--count", "1200", "--only", "ours", "--json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode in (0, 1), done.stderr
    result = json.loads(done.stdout)
    assert result["findings"] == []
    formats = {k.split(":")[0] for k in result["mutations"]}
    assert {"manifest", "parquet"} <= formats
    assert sum(result["mutations"].values()) == 1200
    assert result["reads"].get("keyed files:typed", 0) > 0
