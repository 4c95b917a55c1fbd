"""The sweep's journal: one JSON line per finished plan, appended as results arrive.

A killed sweep resumes from it without redoing finished plans. Each line is written with
one `write` of a complete, newline-terminated record and flushed to disk, so a kill can at
worst leave one unterminated last line — which the reader ignores (that plan is redone).
The first line names the sweep (its space and lumos version); resuming a journal made for
another space is refused rather than mixing results.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import orjson

from lumos.errors import ConfigError

KIND = "lumos-sweep-journal"


class Journal:
    """Append-only results of one sweep, keyed by plan key."""

    def __init__(self, path: Path, header: dict[str, Any]) -> None:
        self.path = path
        self.header = {"kind": KIND, **header}
        self.done: dict[str, dict[str, Any]] = {}
        self.torn_lines = 0
        if path.exists():
            self._read()
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            self._append([self.header])

    def _read(self) -> None:
        try:
            lines = self.path.read_bytes().split(b"\n")
        except OSError as exc:
            raise ConfigError(
                f"{self.path}: cannot read the sweep journal: {exc.strerror}"
            ) from None
        tail = lines.pop()  # after the last newline: empty, or a record cut by a kill
        self.torn_lines = int(bool(tail.strip()))
        if not lines:
            raise ConfigError(f"{self.path}: empty sweep journal; delete it to start afresh")
        try:
            head = orjson.loads(lines[0])
        except orjson.JSONDecodeError:
            raise ConfigError(f"{self.path}: not a lumos sweep journal") from None
        if not isinstance(head, dict) or head.get("kind") != KIND:
            raise ConfigError(f"{self.path}: not a lumos sweep journal")
        if head.get("space") != self.header.get("space"):
            raise ConfigError(
                f"{self.path}: this journal is for another sweep (its space differs); "
                "use another output or delete it"
            )
        for number, line in enumerate(lines[1:], start=2):
            try:
                row = orjson.loads(line)
            except orjson.JSONDecodeError:
                raise ConfigError(f"{self.path}:{number}: unreadable journal line") from None
            if not isinstance(row, dict) or not isinstance(row.get("key"), str):
                raise ConfigError(f"{self.path}:{number}: a journal line without a plan key")
            self.done[row["key"]] = row
        if self.torn_lines:  # drop the torn tail so later appends start on a fresh line
            with self.path.open("r+b") as fh:
                fh.truncate(len(self.path.read_bytes()) - len(tail))

    def _append(self, rows: Iterable[dict[str, Any]]) -> None:
        data = b"".join(orjson.dumps(r) + b"\n" for r in rows)
        fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o666)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def record(self, row: dict[str, Any]) -> None:
        """Append one finished plan (a result row or an error row)."""
        self._append([row])
        self.done[row["key"]] = row
