"""The time a blocking copy call ran after its copy ended, kept so a what-if can move it.

A synchronous `cudaMemcpy` (or a pageable `cudaMemcpyAsync`, `hipMemcpy*`, `cuMemcpy*`)
queues its copy as it begins and returns once the copy is done. Replay ends such a call
when its stream has run the copy, plus the time the call ran after it
(`simulator.blocking.waits`). Read from the ET's durations, that time is wrong as soon as
a what-if edits the copy (a longer copy reads as a call that returned before its copy
ended, so the call keeps its recorded duration); the converter writes it as recorded
(`copy_after_ns` on the call).
"""

from __future__ import annotations

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.pytorch.tasks import TaskKind, TaskTable

#: in the name of every runtime and driver copy call of CUDA and HIP
_COPY = "Memcpy"


def mark_copy_waits(table: TaskTable) -> int:
    """Write `copy_after_ns` on each copy call whose one GPU op started, as recorded,
    before the call returned and ended no later than it; returns how many."""
    ops = np.flatnonzero((table.kind != TaskKind.CPU) & (table.data1 >= 0) & (table.stream >= 0))
    calls = table.data1[ops]
    ops = ops[table.kind[calls] == TaskKind.CPU]
    calls = table.data1[ops]
    uniq, counts = np.unique(calls, return_counts=True)
    single = set(uniq[counts == 1].tolist())
    call_end = table.start[calls] + table.dur[calls]
    op_end = table.start[ops] + table.dur[ops]
    inside = (table.start[ops] < call_end) & (op_end <= call_end)
    marked = 0
    for call, after in zip(
        calls[inside].tolist(), (call_end - op_end)[inside].tolist(), strict=True
    ):
        if call in single and _COPY in table.name_of(call):
            table.attrs_of(call)[cv.COPY_AFTER_NS] = int(after)
            marked += 1
    return marked
