"""`tasks.ready_ns` reads only the rows of the ops it is asked about: the graph-launch
joins and the wait inference ask for one op at a time, and computing every task's end
(and walking every extra dependency of the table) per call made a CUDA-graph trace's
conversion quadratic (HTA rank 0 replicated 30x: 140 CPU s, now 30). One op asked alone,
the same op in a batch, and a hand-worked answer must all agree."""

from __future__ import annotations

import numpy as np

from lumos.converters.pytorch.tasks import TaskKind, TaskTable, ready_ns


def _table() -> TaskTable:
    """Thread 1: launch A (0-10), blocking copy call B (20-60), launch C (70-75).
    Stream 7: kernel a (12-30, launched by A), copy b (40-50, inside its call B),
    kernel c (90-95, launched by C, also waits for d and e). Stream 9: d (0-80), e (0-85)."""
    t = TaskTable(["A", "B", "C", "a", "b", "c", "d", "e"])
    cpu = TaskKind.CPU
    gpu = TaskKind.GPU
    t.append(
        kind=[cpu, cpu, cpu, gpu, gpu, gpu, gpu, gpu],
        name=list(range(8)),
        start=[0, 20, 70, 12, 40, 90, 0, 0],
        dur=[10, 40, 5, 18, 10, 5, 80, 85],
        tid=[1, 1, 1, -1, -1, -1, -1, -1],
        stream=[-1, -1, -1, 7, 7, 7, 9, 9],
        ctrl=[-1, 0, 1, -1, 3, 4, -1, 6],
        data1=[-1, -1, -1, 0, 1, 2, -1, -1],
    )
    t.add_data(5, 6)
    t.add_data(5, 7)
    t.add_data(4, 6)
    return t


def test_one_op_at_a_time_matches_the_batch_and_the_hand_worked_times() -> None:
    table = _table()
    ops = np.array([3, 4, 5])
    # a: launch A ended at 10; b: its call B blocks (ends 60 > 40), so b counts from its
    # own start 40, but its extra dependency d ends at 80; c: d 80, e 85, C 75, b 50
    expected = [10, 80, 85]
    batch = ready_ns(table, ops)  # more ops than tasks with extra deps: the batch path
    alone = [int(ready_ns(table, np.array([op]))[0]) for op in ops.tolist()]
    assert batch.tolist() == expected
    assert alone == expected


def test_blocking_call_counts_from_the_call_start_when_asked() -> None:
    table = _table()
    # b's call B began at 20 and its stream predecessor a ended at 30: ready at 30,
    # then d (80) still holds it
    assert int(ready_ns(table, np.array([4]), blocking_from_call=True)[0]) == 80
    table.extra.pop(4)
    assert int(ready_ns(table, np.array([4]), blocking_from_call=True)[0]) == 30
    assert int(ready_ns(table, np.array([4]))[0]) == 40
