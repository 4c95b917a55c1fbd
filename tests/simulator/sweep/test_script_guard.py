"""`sweep()` from a user script: local workers import the main script (forkserver), so an
unguarded call fails with the reason and the fix, and the journal gets no rows from the
re-imported copies (the guarded call is what every other local-pool test makes)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import orjson

REPO = Path(__file__).parents[3]
BODY = (
    "from lumos.simulator.sweep.runner import sweep\n"
    "from tests.simulator.sweep.test_sweep import SMALL, fake_work\n"
)
CALL = "r = sweep(SMALL, {out!r}, workers=2, work=fake_work); print('rows', len(r.rows))\n"


def _run(script: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(script)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_unguarded_script_gets_the_main_guard_error(tmp_path: Path) -> None:
    out = tmp_path / "r.csv"
    script = tmp_path / "unguarded.py"
    script.write_text(BODY + CALL.format(out=str(out)))
    proc = _run(script)
    assert proc.returncode != 0
    assert "SimulationError: a sweep worker process died" in proc.stderr
    assert 'if __name__ == "__main__":' in proc.stderr
    assert "ConfigError: sweep() called inside a starting worker process" in proc.stderr
    journal = out.with_name("r.csv.journal.jsonl")
    rows = [x for x in journal.read_bytes().split(b"\n")[1:] if x.strip()]
    assert rows == []  # the re-imported copies wrote nothing
    assert "space" in orjson.loads(journal.read_bytes().split(b"\n")[0])
