"""The check that a rank's converted graph has no cycle, made before its file is written.

Every edge the converter adds goes forward in time on consistent timestamps (program and
stream order, launches, sync and wait edges, graph-launch joins), so a cycle means the
input contradicts itself or an inference rule used a time that is not the recorded one.
Either way the ET could never be replayed (`lumos simulate` and `lumos et validate`
refuse it), so convert fails here, naming the rank, its files and the nodes of one cycle
with the kind of each edge, and writes nothing.
"""

from __future__ import annotations

import numpy as np

from lumos.converters.chakra.dag import blocked_nodes, one_cycle
from lumos.converters.pytorch.tasks import TaskTable
from lumos.errors import ValidationError

#: cycle nodes shown in the message, data edges (the inferred ones) listed, name length
SHOWN_NODES = 8
SHOWN_DATA_EDGES = 4
NAME_CHARS = 60


def task_edges(table: TaskTable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Every dependency edge as task indices (before, after, is_ctrl), self-edges left out
    (the writer drops them too)."""
    n = len(table)
    task = np.arange(n, dtype=np.int64)
    has_ctrl = table.ctrl >= 0
    has_data = table.data1 >= 0
    extra_after = [t for t, deps in table.extra.items() for _ in deps]
    extra_before = [d for deps in table.extra.values() for d in deps]
    before = np.r_[table.ctrl[has_ctrl], table.data1[has_data], extra_before].astype(np.int64)
    after = np.r_[task[has_ctrl], task[has_data], extra_after].astype(np.int64)
    n_ctrl = int(has_ctrl.sum())
    is_ctrl = np.r_[np.ones(n_ctrl, bool), np.zeros(len(before) - n_ctrl, bool)]
    keep = before != after
    return before[keep], after[keep], is_ctrl[keep]


def check_acyclic(table: TaskTable, rank: int, path: str, sources: list[str]) -> None:
    """Raise ValidationError naming one cycle of `table` (finalized: node ids assigned), if
    it has one. `path` is the ET it was to be written to, `sources` the rank's inputs."""
    n = len(table)
    before, after, is_ctrl = task_edges(table)
    blocked = blocked_nodes(n, before, after)
    if not any(blocked):
        return
    cycle, core = one_cycle(n, before, after, blocked)
    node_id = np.empty(n, np.int64)
    node_id[table.order] = np.arange(1, n + 1)
    ctrl_pairs = set(zip(before[is_ctrl].tolist(), after[is_ctrl].tolist(), strict=True))

    def label(task: int) -> str:
        name = table.name_of(task)
        short = name if len(name) <= NAME_CHARS else name[: NAME_CHARS - 3] + "..."
        return f"{int(node_id[task])} {short!r}"

    shown = " -> ".join(label(t) for t in cycle[:SHOWN_NODES])
    more = f" -> ... ({len(cycle)} nodes)" if len(cycle) > SHOWN_NODES else ""
    pairs = list(zip(cycle, cycle[1:] + cycle[:1], strict=True))
    data = [f"{label(a)} -> {label(b)}" for a, b in pairs if (a, b) not in ctrl_pairs]
    data_text = "; ".join(data[:SHOWN_DATA_EDGES]) + (
        f"; ... ({len(data)} in all)" if len(data) > SHOWN_DATA_EDGES else ""
    )
    raise ValidationError(
        [
            f"rank {rank} ({', '.join(sources)}): the converted graph for {path} has a "
            f"dependency cycle: {shown}{more} -> back to {label(cycle[0])}; its "
            f"launch/sync/wait edges on the cycle: {data_text or 'none'}; {core} node(s) "
            "lie on cycles: the trace's timestamps contradict the edges inferred from them"
        ],
        header="convert: nothing written, a rank's graph cannot be replayed",
    )
