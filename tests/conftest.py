"""Shared test fixtures: where the real third-party traces live, and small helpers.

Real traces are read from `../shared/fixtures` (or $LUMOS_FIXTURES), never copied into
the repository. Outside CI a missing fixture folder skips those tests with a reason; in CI
(CI=true) it fails, so a green CI always means the real-trace tests ran.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import tarfile
from functools import cache
from pathlib import Path
from types import ModuleType

import pytest

REPO = Path(__file__).resolve().parents[1]
DATA = REPO / "tests" / "data"


@cache
def script_module(name: str) -> ModuleType:
    """`scripts/<name>.py` imported as module `name` (registered in `sys.modules`: its
    dataclasses look their module up), once per test session."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def _fixtures_root() -> Path:
    env = os.environ.get("LUMOS_FIXTURES")
    return Path(env) if env else REPO.parent / "shared" / "fixtures"


FIXTURES = _fixtures_root()


#: one reason for every skip on a missing fixture, so pytest -ra groups them in one line
MISSING = f"real public traces not found in {FIXTURES} (set LUMOS_FIXTURES)"


def fixture_path(relative: str) -> Path:
    """Path of a shared fixture; skips (or fails in CI) when the folder is absent."""
    path = FIXTURES / relative
    if not path.exists():
        if os.environ.get("CI"):
            pytest.fail(f"shared fixture missing in CI: {path}")
        pytest.skip(MISSING if not FIXTURES.exists() else f"shared fixture not available: {path}")
    return path


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """One line saying why the real-trace tests were skipped, when the folder is absent."""
    if FIXTURES.exists():
        return
    skipped = [r for r in terminalreporter.stats.get("skipped", []) if MISSING in str(r.longrepr)]
    terminalreporter.write_line(
        f"note: {len(skipped)} test(s) skipped: {MISSING} — they need the shared "
        "fixtures folder beside the clone (../shared/fixtures)"
    )


@pytest.fixture
def fixtures() -> Path:
    """Root of the shared real-trace fixtures."""
    if not FIXTURES.exists():
        if os.environ.get("CI"):
            pytest.fail(f"shared fixtures missing in CI: {FIXTURES}")
        pytest.skip(MISSING)
    return FIXTURES


FEEDER_TAR = "chakra/tests/data/feeder_tests_trace.tar.gz"


@pytest.fixture(scope="session")
def chakra_et(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """chakra's 3,664-node converted ET, unpacked from its tarball."""
    out = tmp_path_factory.mktemp("feeder")
    with tarfile.open(fixture_path(FEEDER_TAR)) as tar:
        tar.extractall(out, filter="data")
    return out / "tests" / "data" / "chakra.0.et"
