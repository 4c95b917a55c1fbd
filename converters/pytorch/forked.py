"""Running one function in a forked child process, to use a second core on big traces.

`start(fn, *args)` forks (POSIX only), runs `fn` in the child and sends its pickled
result (or exception) back through a pipe; `Forked.result()` waits for it. The child
sees the parent's memory as it was at the fork (copy-on-write), so nothing has to be
sent to it. `available()` says whether fork can be used here; callers fall back to
running `fn` in-process otherwise.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
from collections.abc import Callable
from multiprocessing.connection import Connection
from typing import Any


def available() -> bool:
    return (os.cpu_count() or 1) >= 2 and "fork" in multiprocessing.get_all_start_methods()


def _child(conn: Connection, fn: Callable[..., Any], args: tuple[Any, ...]) -> None:
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
        self._proc = ctx.Process(target=_child, args=(send, fn, args), daemon=True)
        self._proc.start()
        send.close()

    def result(self) -> Any:
        """The function's return value; its exception is raised here."""
        try:
            payload = self._recv.recv_bytes()
        except EOFError:
            self._proc.join()
            raise RuntimeError(f"worker process died (exit code {self._proc.exitcode})") from None
        finally:
            self._recv.close()
        self._proc.join()
        status, value = pickle.loads(payload)
        if status == "err":
            raise _rebuild(*value)
        return value


def start(fn: Callable[..., Any], *args: Any) -> Forked:
    return Forked(fn, args)
