"""The Python blocks of README.md and docs/ that use Spark run on the tests' session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from doc_blocks import PAGES, needs_spark, page_id, run_page, runnable


@pytest.mark.parametrize("page", [p for p in PAGES if runnable(p) and needs_spark(p)], ids=page_id)
def test_page_blocks_run(page: Path, tmp_path: Path, spark: Any) -> None:
    assert run_page(page, tmp_path, spark) > 0
