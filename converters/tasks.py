"""The execution graph's records: a `Task` is one node to be written, on one processor.

Builders (`exec_graph` from Kineto, `host_graph` from a host ET alone) create tasks and
link them by object; `finalize` then numbers them deterministically (by start time,
processor and creation order), fills `gap_ns` on CPU threads and turns references into
node ids, so the writer only formats.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from lumos.converters.host_et import HostOp
from lumos.converters.kineto import KEvent


class TaskKind(enum.IntEnum):
    """What a task becomes in Chakra."""

    CPU = 0
    GPU = 1
    COLL = 2
    SEND = 3
    RECV = 4


@dataclass(slots=True, eq=False)
class Task:
    """One node of the execution graph (times in ns, absolute until `finalize`)."""

    kind: TaskKind
    name: str
    start: int
    dur: int
    tid: int = -1  # CPU thread, -1 if on a stream or nowhere
    stream: int = -1  # GPU stream, -1 if on a thread or nowhere
    device: int = -1
    ev: KEvent | None = None
    host: HostOp | None = None
    head: bool = True  # first segment of its op: carries the op's inputs/outputs
    ctrl: list[Task] = field(default_factory=list)
    data: list[Task] = field(default_factory=list)
    attrs: dict[str, Any] = field(default_factory=dict)
    gap: int = 0
    order: int = 0
    id: int = 0

    @property
    def end(self) -> int:
        return self.start + self.dur


@dataclass(slots=True)
class Graph:
    """All tasks of one rank, numbered, plus what the writer puts in the metadata."""

    tasks: list[Task]
    step_start: int
    step_ns: int | None
    step_name: str


def finalize(tasks: list[Task], step_start: int) -> list[Task]:
    """Number tasks deterministically and fill `gap` on CPU threads; returns them in id order."""
    for i, task in enumerate(tasks):
        task.order = i
    tasks.sort(key=lambda t: (t.start, t.kind != TaskKind.CPU, t.tid, t.stream, t.order))
    last_end: dict[int, int] = {}
    for i, task in enumerate(tasks):
        task.id = i + 1
        if task.tid >= 0 and task.stream < 0:
            prev = last_end.get(task.tid)
            task.gap = max(0, task.start - (step_start if prev is None else prev))
            last_end[task.tid] = max(task.end, prev or 0)
    return tasks
