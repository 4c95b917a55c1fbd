"""Where sweep points run: an embedded local process pool, or a Ray cluster.

Both yield `(point, row)` pairs as points finish, so the runner journals each result the
moment it exists and a killed sweep loses at most the points in flight. Ray is an
optional extra (`lumos[ray]`), imported only when asked for.
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import signal
import sys
from collections.abc import Callable, Iterator
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from concurrent.futures.process import BrokenProcessPool
from typing import Any

from lumos.errors import ConfigError, MissingExtraError, SimulationError

#: why a sweep called from a script needs the `__main__` guard (forkserver workers)
GUARD = (
    "the local executor's worker processes start by importing the main script (Python's "
    "forkserver/spawn start methods), so a script that calls sweep() must do it under "
    "`if __name__ == \"__main__\":` (docs/sweep.md, 'From a script')"
)

Point = dict[str, Any]
Row = dict[str, Any]
Work = Callable[[Point], Row]


def _worker_init() -> None:
    # Ctrl-C goes to the parent, which shuts the pool down; workers never see it.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    if sys.platform.startswith("linux"):  # die with the parent (PR_SET_PDEATHSIG = 1)
        with contextlib.suppress(OSError):
            ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)


def refuse_in_worker_start() -> None:
    """Raise ConfigError when called while a worker process imports the main script.

    A script without the `__main__` guard would otherwise run its sweep again inside
    every worker (opening the same journal) before multiprocessing refuses to start
    processes there; failing first, with the reason, keeps the files untouched.
    """
    if getattr(multiprocessing.current_process(), "_inheriting", False):
        raise ConfigError(f"sweep() called inside a starting worker process: {GUARD}")


def run_local(points: list[Point], work: Work, workers: int) -> Iterator[tuple[Point, Row]]:
    """Run `work` over `points` in `workers` processes (in this process when 1).

    Never starts more processes than there are points. Raises SimulationError when a
    worker process dies (killed, out of memory, or a script without the `__main__` guard:
    see GUARD).
    """
    workers = min(workers, len(points))
    if workers <= 1:
        for point in points:
            yield point, work(point)
        return
    ctx = multiprocessing.get_context("forkserver" if os.name == "posix" else "spawn")
    with ProcessPoolExecutor(workers, mp_context=ctx, initializer=_worker_init) as pool:
        pending: dict[Future[Row], Point] = {}
        queue = iter(points)
        try:
            for point in queue:
                pending[pool.submit(work, point)] = point
                if len(pending) >= 2 * workers:
                    break
            while pending:
                done, _ = wait(pending, return_when=FIRST_COMPLETED)
                for future in done:
                    point = pending.pop(future)
                    try:
                        row = future.result()
                    except BrokenProcessPool:
                        raise SimulationError(
                            f"a sweep worker process died (plan {point.get('key')}): killed, "
                            f"out of memory, or it failed to start; {GUARD}"
                        ) from None
                    yield point, row
                    nxt = next(queue, None)
                    if nxt is not None:
                        pending[pool.submit(work, nxt)] = nxt
        finally:
            for future in pending:
                future.cancel()


def run_ray(
    points: list[Point], work: Work, workers: int, address: str | None
) -> Iterator[tuple[Point, Row]]:
    """Run `work` over `points` as Ray tasks, at most `workers` in flight.

    `address`: `ray://host:port`, `auto` or None (start a local Ray instance).
    Raises MissingExtraError without Ray installed, ConfigError if it cannot connect.
    """
    try:
        import ray
    except ImportError:
        raise MissingExtraError("ray", "ray") from None
    started = not ray.is_initialized()
    if started:
        try:
            ray.init(
                address=address,
                num_cpus=None if address else workers,
                include_dashboard=False,
                log_to_driver=False,
                ignore_reinit_error=True,
                configure_logging=False,
            )
        except (ConnectionError, RuntimeError, ValueError) as exc:
            raise ConfigError(
                f"cannot reach the Ray cluster at {address or 'local'}: {exc}"
            ) from None
    remote = ray.remote(num_cpus=1, max_retries=0)(work)
    try:
        pending: dict[Any, Point] = {}
        queue = iter(points)
        for point in queue:
            pending[remote.remote(point)] = point
            if len(pending) >= 2 * max(workers, 1):
                break
        while pending:
            done, _ = ray.wait(list(pending), num_returns=1)
            for ref in done:
                point = pending.pop(ref)
                yield point, ray.get(ref)
                nxt = next(queue, None)
                if nxt is not None:
                    pending[remote.remote(nxt)] = nxt
    finally:
        for ref in pending:
            ray.cancel(ref, force=True)
        if started:
            ray.shutdown()
