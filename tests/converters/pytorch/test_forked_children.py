"""Worker processes die with their parent: no orphan blocked on a pipe, no hung pool.

Each test starts a small parent program in a child interpreter, lets it fork workers
that would run for a minute, kills the parent (SIGKILL or SIGTERM) and checks that the
workers are gone within seconds.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lumos.converters.pytorch import forked

if not forked.available():
    pytest.skip("fork is not available here", allow_module_level=True)

PARENT = """
import os, sys, time
from concurrent.futures import ProcessPoolExecutor
import multiprocessing
from lumos.converters.pytorch import forked

def worker(folder, k):
    open(os.path.join(folder, f"w{k}"), "w").write(str(os.getpid()))
    time.sleep(60)
    return b"x" * (8 << 20)  # bigger than a pipe: the send would block forever

folder, mode = sys.argv[1], sys.argv[2]
if mode == "forked":
    job = forked.start(worker, folder, 0)
    time.sleep(60)
else:
    ctx = multiprocessing.get_context("fork")
    pool = ProcessPoolExecutor(2, mp_context=ctx, initializer=forked.die_with_parent)
    futures = [pool.submit(worker, folder, k) for k in range(2)]
    time.sleep(60)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/status").read_text()
    except FileNotFoundError:
        return False
    return "\nState:\tZ" not in state  # a zombie has exited; only reaping is left


def _worker_pids(folder: Path, count: int) -> list[int]:
    deadline = time.time() + 20
    while time.time() < deadline:
        files = sorted(folder.glob("w*"))
        if len(files) == count and all(f.read_text() for f in files):
            return [int(f.read_text()) for f in files]
        time.sleep(0.05)
    raise AssertionError("workers did not start")


@pytest.mark.parametrize(("mode", "workers"), [("forked", 1), ("pool", 2)])
@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM])
def test_workers_die_when_the_parent_is_killed(
    tmp_path: Path, mode: str, workers: int, sig: int
) -> None:
    parent = subprocess.Popen([sys.executable, "-c", PARENT, str(tmp_path), mode])
    try:
        pids = _worker_pids(tmp_path, workers)
        parent.send_signal(sig)
        parent.wait(10)
        deadline = time.time() + 5
        while time.time() < deadline and any(_alive(p) for p in pids):
            time.sleep(0.05)
        assert not [p for p in pids if _alive(p)], "a worker outlived its parent"
    finally:
        parent.kill()
        for pid in [int(f.read_text()) for f in tmp_path.glob("w*") if f.read_text()]:
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)


def _sleep_then_return(seconds: float) -> int:
    time.sleep(seconds)
    return 1


def test_interrupt_while_waiting_kills_the_child() -> None:
    job = forked.start(_sleep_then_return, 60)
    pid = job._proc.pid
    assert pid is not None

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    old = signal.signal(signal.SIGALRM, interrupt)
    signal.setitimer(signal.ITIMER_REAL, 0.3)
    try:
        with pytest.raises(KeyboardInterrupt):
            job.result()
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, old)
    assert not _alive(pid)


def _blocked_signals() -> set[int]:
    return {int(s) for s in signal.pthread_sigmask(signal.SIG_BLOCK, [])}


def test_sigterm_while_forking_arrives_after_the_fork_not_inside_it() -> None:
    """Fuzz finding: a SIGTERM handled inside os.fork's at-fork callbacks (logging's lock
    release) raised SystemExit where Python swallows it ("Exception ignored in
    _releaseLock"): the conversion went on. Held while forking, it arrives after."""
    from lumos.converters.pytorch.forked import held_signals, start

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(143)

    reached = []
    old = signal.signal(signal.SIGTERM, stop)
    try:
        with pytest.raises(SystemExit), held_signals():
            os.kill(os.getpid(), signal.SIGTERM)
            child = start(_blocked_signals)  # forks with the signal noted, not handled
            reached.append(child.result())
        after = signal.getsignal(signal.SIGTERM)
    finally:
        signal.signal(signal.SIGTERM, old)
    assert len(reached) == 1  # the fork completed; the stop came after it
    assert after is stop  # the handler is restored
