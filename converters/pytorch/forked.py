"""Running one function in a forked child process, to use a second core on big traces.

`start(fn, *args)` forks (POSIX only), runs `fn` in the child and sends its pickled
result (or exception) back through a pipe; `Forked.result()` waits for it. The child
sees the parent's memory as it was at the fork (copy-on-write), so nothing has to be
sent to it. `available()` says whether fork can be used here; callers fall back to
running `fn` in-process otherwise.

A child never outlives its parent: it asks the kernel for SIGKILL when the parent dies
(`die_with_parent`, Linux), closes its copy of the pipe's read end (else a child whose
parent was killed blocks forever writing into a pipe only it can read), and ignores
Ctrl-C, which the parent handles by killing it. Pool workers call `die_with_parent` too.
Ctrl-C and SIGTERM are held while the parent forks (`held_signals`).
"""

from __future__ import annotations

import contextlib
import ctypes
import multiprocessing
import os
import pickle
import signal
import sys
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ProcessPoolExecutor
from multiprocessing.connection import Connection
from typing import Any


def available() -> bool:
    return (os.cpu_count() or 1) >= 2 and "fork" in multiprocessing.get_all_start_methods()


PR_SET_PDEATHSIG = 1
#: signals that stop a run; held while forking (see `held_signals`)
_STOPS = frozenset({signal.SIGINT, signal.SIGTERM})


@contextlib.contextmanager
def held_signals() -> Iterator[None]:
    """Hold Ctrl-C and SIGTERM while forking; their handlers run right after, here.

    `os.fork` runs at-fork callbacks (logging's lock release among them) in which Python
    swallows an exception ("Exception ignored in ..."): a SIGTERM handled there would be
    lost and the run would go on. Inside, a stop signal is only noted; on the way out
    the original handler gets it. From the main thread only (where handlers live).
    """
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    arrived: list[signal.Signals] = []

    def hold(signum: int, frame: Any) -> None:
        arrived.append(signal.Signals(signum))

    old = {s: signal.signal(s, hold) for s in _STOPS}
    try:
        yield
    finally:
        for s, handler in old.items():
            signal.signal(s, handler)
        if arrived:
            first = arrived[0]
            handler = old[first]
            if callable(handler):
                handler(first, None)
            elif handler == signal.SIG_DFL:
                signal.raise_signal(first)


def die_with_parent() -> None:
    """In a child process: be killed with the parent, and leave Ctrl-C to the parent."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    signal.signal(signal.SIGTERM, signal.SIG_DFL)
    with contextlib.suppress(OSError, AttributeError):
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(1)


def _child(
    conn: Connection, other: Connection, fn: Callable[..., Any], args: tuple[Any, ...]
) -> None:
    die_with_parent()
    other.close()
    try:
        payload = pickle.dumps(("ok", fn(*args)), protocol=pickle.HIGHEST_PROTOCOL)
    except BaseException as exc:
        error = (type(exc).__module__, type(exc).__qualname__, str(exc))
        payload = pickle.dumps(("err", error), protocol=pickle.HIGHEST_PROTOCOL)
    conn.send_bytes(payload)
    conn.close()


def _rebuild(module: str, name: str, text: str) -> BaseException:
    """The child's exception, same class (message only) when it can be found here."""
    cls = getattr(sys.modules.get(module), name, None)
    if isinstance(cls, type) and issubclass(cls, Exception):
        err = cls.__new__(cls)
        Exception.__init__(err, text)
        return err
    return RuntimeError(f"{module}.{name}: {text}")


class Forked:
    """A function running in a forked child."""

    def __init__(self, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
        ctx = multiprocessing.get_context("fork")
        self._recv, send = ctx.Pipe(duplex=False)
        self._proc = ctx.Process(target=_child, args=(send, self._recv, fn, args), daemon=True)
        with held_signals():
            self._proc.start()
        send.close()

    def result(self) -> Any:
        """The function's return value; its exception is raised here.

        Raises RuntimeError if the child died; an interrupt kills the child first.
        """
        try:
            payload = self._recv.recv_bytes()
        except EOFError:
            self._proc.join()
            raise RuntimeError(f"worker process died (exit code {self._proc.exitcode})") from None
        except BaseException:
            self.kill()
            raise
        finally:
            self._recv.close()
        self._proc.join()
        status, value = pickle.loads(payload)
        if status == "err":
            raise _rebuild(*value)
        return value

    def kill(self) -> None:
        """Stop the child now (on an error or interrupt in the parent)."""
        with contextlib.suppress(OSError, ValueError, AttributeError):
            self._proc.kill()
            self._proc.join(5)


def start(fn: Callable[..., Any], *args: Any) -> Forked:
    return Forked(fn, args)


def ordered_map(fn: Callable[[Any], Any], items: list[Any], jobs: int) -> Iterator[Any]:
    """`fn(item)` for every item, in order, computed by up to `jobs` forked workers.

    The workers die with this process; an error or interrupt here kills them at once
    instead of waiting for the items they are working on.
    """
    ctx = multiprocessing.get_context("fork")
    pool = ProcessPoolExecutor(
        max_workers=min(jobs, len(items)), mp_context=ctx, initializer=die_with_parent
    )
    try:
        with held_signals():  # the workers fork on submit
            futures = [pool.submit(fn, item) for item in items]
        for future in futures:
            yield future.result()
    except BaseException:
        _kill_pool(pool)
        raise
    pool.shutdown()


def _kill_pool(pool: ProcessPoolExecutor) -> None:
    """Stop a pool's workers now instead of waiting for their tasks."""
    procs = list((getattr(pool, "_processes", None) or {}).values())  # no public handle
    pool.shutdown(wait=False, cancel_futures=True)
    for proc in procs:
        with contextlib.suppress(OSError, ValueError, AttributeError):
            proc.kill()
