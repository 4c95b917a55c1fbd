"""The docs site builds with warnings as errors (when mkdocs is installed: `make docs`)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import REPO


def test_docs_build_strict(tmp_path: Path) -> None:
    pytest.importorskip("mkdocs", reason="mkdocs not installed (pip install 'lumos[docs]')")
    pytest.importorskip("mkdocstrings", reason="mkdocstrings not installed")
    out = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "-q", "-d", str(tmp_path)],
        cwd=REPO,
        capture_output=True,
        text=True,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    assert (tmp_path / "api" / "index.html").read_text().count("lumos.api.simulate") > 0
    assert (tmp_path / "newcomer" / "index.html").is_file()


def test_every_doc_page_is_in_the_nav() -> None:
    nav = (REPO / "mkdocs.yml").read_text()
    pages = sorted(p.name for p in (REPO / "docs").glob("*.md"))
    assert [p for p in pages if p not in nav] == []
