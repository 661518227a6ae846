"""The Python blocks of README.md and docs/ that need no Spark run (tests/connector/test_docs_spark.py
runs the others); few are skipped, each with its reason; the site's sources are all listed."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from doc_blocks import MAX_SKIPPED, PAGES, ROOT, blocks, needs_spark, page_id, run_page, runnable

LOCAL = [p for p in PAGES if runnable(p) and not needs_spark(p)]


@pytest.mark.parametrize("page", LOCAL, ids=page_id)
def test_page_blocks_run(page: Path, tmp_path: Path) -> None:
    assert run_page(page, tmp_path) > 0


def test_the_pages_have_blocks_and_few_are_skipped() -> None:
    found = [b for p in PAGES for b in blocks(p)]
    skipped = [b.name for b in found if b.skip is not None]
    assert len(found) >= 20 and len(skipped) <= MAX_SKIPPED, skipped
    assert any(needs_spark(p) for p in PAGES) and LOCAL


def test_a_failing_block_fails_with_its_page_and_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# t\n\n```python\nx = 1\n```\n\ntext\n\n```python\nimport pathlib\n"
        'pathlib.Path("/tmp/made").write_text("y")\nassert x == 2\n```\n'
    )
    with pytest.raises(AssertionError) as failed:
        run_page(page, tmp_path)
    assert failed.traceback[-1].path == page and failed.traceback[-1].lineno + 1 == 12
    assert (tmp_path / "made").read_text() == "y", '"/tmp/ points into the working directory'


def test_every_page_is_in_the_site_nav() -> None:
    nav = (ROOT / "mkdocs.yml").read_text(encoding="utf-8")
    for page in PAGES[1:]:
        assert str(page.relative_to(ROOT / "docs")) in nav, page


@pytest.mark.slow
def test_the_site_builds_strict_with_every_public_name(tmp_path: Path) -> None:
    """``make docs`` in a temporary directory (a few seconds): no warning (``--strict``), and
    each API page documents every name its module exports."""
    import importlib
    import os
    import subprocess
    import sys

    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}
    build = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path)]
    done = subprocess.run(build, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "WARNING" not in done.stderr, done.stderr
    pages = {"state": "flinkstate.state", "checkpoint": "flinkstate.checkpoint",
             "flink": "flinkstate.checkpoint.flink", "connector": "flinkstate.connector"}  # fmt: skip
    for page, module in pages.items():
        html = (tmp_path / "api" / page / "index.html").read_text(encoding="utf-8")
        face = importlib.import_module(module)
        names = face.__all__
        missing = [n for n in names if not any(f'id="{at}.{n}"' in html for at in _homes(face, n))]
        assert names and not missing, (module, missing)


def _homes(face: Any, name: str) -> set[str]:
    """Where an API page may document ``name`` of the module ``face``: under the module, under
    a submodule of the same name (griffe documents ``process`` in the function's place), or
    under the module defining it."""
    module = face.__name__
    return {module, f"{module}.{name}", getattr(getattr(face, name), "__module__", module)}


def test_skipped_blocks_and_other_shells_do_not_run_but_flinkstate_commands_do(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "<!-- docs-test: skip (a reason) -->\n```python\nraise SystemExit\n```\n\n"
        "```bash\nmake demo\n```\n\n```bash\nflinkstate list /tmp/nothing-here\n```\n"
    )
    assert [b.skip for b in blocks(page)] == ["a reason", None]
    with pytest.raises(AssertionError, match=r"page.md:11: flinkstate list /tmp/nothing-here"):
        run_page(page, tmp_path)
