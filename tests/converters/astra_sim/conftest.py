"""The real ASTRA-sim binaries, found or built once per machine and cached.

Looked up in order: $ASTRA_SIM_BIN_DIR (the folder holding both analytical binaries), the
folder of $ASTRA_SIM_BIN, and build.sh's cache ($HOME/.cache/astra-sim). When none holds
them, `../shared/tools/astra-sim/build.sh` builds them (minutes, once; a file lock keeps
parallel test workers from building twice). Tests that need a binary skip, with the
reason, only when it cannot be found or built.
"""

from __future__ import annotations

import fcntl
import os
import subprocess
from pathlib import Path

import pytest

from lumos.converters.astra_sim.run_script import BACKEND_BINARY
from tests.conftest import REPO

BUILD_SCRIPT = REPO.parent / "shared" / "tools" / "astra-sim" / "build.sh"
CACHE = Path.home() / ".cache" / "astra-sim"
BUILT = CACHE / "astra-sim" / "build" / "astra_analytical" / "build" / "bin"


def _candidates() -> list[Path]:
    found = []
    if os.environ.get("ASTRA_SIM_BIN_DIR"):
        found.append(Path(os.environ["ASTRA_SIM_BIN_DIR"]))
    if os.environ.get("ASTRA_SIM_BIN"):
        found.append(Path(os.environ["ASTRA_SIM_BIN"]).parent)
    found.append(BUILT)
    return found


def _complete(folder: Path) -> bool:
    return all(os.access(folder / name, os.X_OK) for name in BACKEND_BINARY.values())


def _find_or_build() -> tuple[Path | None, str]:
    for folder in _candidates():
        if _complete(folder):
            return folder, ""
    if not BUILD_SCRIPT.is_file():
        return None, f"no ASTRA-sim binaries and no build script at {BUILD_SCRIPT}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lumos-build.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)  # a parallel worker may be building it
        if _complete(BUILT):
            return BUILT, ""
        proc = subprocess.run(
            ["bash", str(BUILD_SCRIPT), str(CACHE)], capture_output=True, text=True, check=False
        )
    if proc.returncode != 0 or not _complete(BUILT):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
        return None, "ASTRA-sim could not be built: " + " | ".join(tail)
    return BUILT, ""


@pytest.fixture(scope="session")
def astra_bin_dir() -> Path:
    """Folder of the real AstraSim_Analytical_Congestion_{Unaware,Aware} binaries."""
    folder, reason = _find_or_build()
    if folder is None:
        pytest.skip(reason)
    return folder


@pytest.fixture(scope="session")
def astra_bin(astra_bin_dir: Path) -> dict[str, str]:
    """{backend: binary path} for both analytical backends."""
    return {backend: str(astra_bin_dir / name) for backend, name in BACKEND_BINARY.items()}
