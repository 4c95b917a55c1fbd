"""Which host-ET ops become tasks when a host ET is converted alone (no Kineto).

Without Kineto nothing says which op launched a kernel, so the call tree decides. Every
op name gets a role from one table (`ROLE_RULES`, then the cost formulas of `op_cost`):

* KERNEL — has a kernel cost formula. On each path of a call tree the innermost such op
  is the task (`aten::linear` → `aten::addmm`; `aten::conv2d` → … → `cudnn_convolution`);
  the ops below it (allocations, views, metadata, unknown helpers) fold into it;
* OWN_KERNEL — launches kernels itself besides those of the kernel ops it calls
  (`max_pool2d_with_indices_backward` zeroes its output with `zero_`, then scatters;
  fbgemm ops): always a task, placed after the ops it calls, which keep their own tasks;
* SYNC — makes the CPU wait for the GPU (`_local_scalar_dense`, `nonzero`): always a
  task of its own (the innermost one), so the simulator can block on it;
* COMM — `nccl:*` / `gloo:*`: always a task, as before;
* FOLD — no kernel (`aten::empty*`, views, `as_strided`, `resize_`, ...): part of the op
  that calls it; a task only when no task encloses it;
* OTHER — wrappers (annotations, autograd nodes, `c10d::*`, `record_param_comms`) and
  ops without a formula: their children decide; a leaf is a task (host time only) unless
  a task encloses it.

`select_tasks` returns the task rows, an order key for each, and how many host ops each
task stands for (the leaf ops it replaces), so host time can be charged per leaf op as
the cost model's `host_gap_ns` is calibrated.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

import numpy as np

from lumos.converters.ops.flops import base_name, has_kernel_formula, has_no_kernel
from lumos.converters.pytorch.host_et import HostTrace


class OpRole(Enum):
    """What a host-ET op is in a host-only graph (see the module doc)."""

    KERNEL = "kernel"
    OWN_KERNEL = "own_kernel"
    SYNC = "sync"
    COMM = "comm"
    FOLD = "fold"
    OTHER = "other"


#: (how to match, pattern, role), first match wins; names not matched fall back to the
#: cost formulas: a kernel formula -> KERNEL, a no-kernel one -> FOLD, none -> OTHER.
#: "name": the full name or its `op_cost.base_name`; "prefix": the full name's start.
ROLE_RULES: tuple[tuple[str, str, OpRole], ...] = (
    ("prefix", "nccl:", OpRole.COMM),
    ("prefix", "gloo:", OpRole.COMM),
    # CUDA ops that zero or fill an output through a child op, then run their own kernels.
    ("name", "max_pool2d_with_indices_backward", OpRole.OWN_KERNEL),
    ("name", "max_pool3d_with_indices_backward", OpRole.OWN_KERNEL),
    ("name", "nll_loss_backward", OpRole.OWN_KERNEL),
    ("name", "nll_loss2d_backward", OpRole.OWN_KERNEL),
    ("name", "embedding_dense_backward", OpRole.OWN_KERNEL),
    ("name", "_embedding_bag_dense_backward", OpRole.OWN_KERNEL),
    ("name", "_index_put_impl_", OpRole.OWN_KERNEL),
    # Custom CUDA ops (fbgemm: embedding tables, sparse permutes, jagged tensors) and the
    # backward of fbgemm's C++ autograd functions launch their kernels directly.
    ("prefix", "fbgemm::", OpRole.OWN_KERNEL),
    ("prefix", "torch::autograd::CppNode<SplitLookupFunction", OpRole.OWN_KERNEL),
    ("name", "_local_scalar_dense", OpRole.SYNC),
    ("name", "item", OpRole.SYNC),
    ("name", "is_nonzero", OpRole.SYNC),
    ("name", "nonzero", OpRole.SYNC),
    ("name", "unique", OpRole.SYNC),
    ("name", "_unique2", OpRole.SYNC),
    # Wrappers that have a formula of their own but never a kernel of their own.
    ("prefix", "c10d::", OpRole.OTHER),
    ("name", "record_param_comms", OpRole.OTHER),
)


#: Ops that prepare arguments or outputs (copies, casts, fills). A KERNEL op whose kernel
#: descendants are all such preparation (`aten::index` casting its indices with `to`,
#: `max_pool2d_with_indices_backward` zeroing its output) still launches its own kernel
#: after them: it is a task too. An op in this set whose kernel is its child's
#: (`clone` -> `copy_`, `zeros_like` -> `zero_`) is not.
_PREP = "copy_ _to_copy to contiguous clone fill_ zero_ zeros zeros_like ones ones_like full"
PREP_OPS = frozenset((_PREP + " full_like new_zeros new_ones new_full").split(" "))


def role_of(name: str) -> OpRole:
    """The role of op `name` (see `ROLE_RULES`)."""
    base = base_name(name)
    for how, pattern, role in ROLE_RULES:
        if (how == "prefix" and name.startswith(pattern)) or (
            how == "name" and pattern in (name, base)
        ):
            return role
    if has_kernel_formula(name):
        return OpRole.KERNEL
    return OpRole.FOLD if has_no_kernel(name) else OpRole.OTHER


@dataclass(frozen=True, slots=True)
class TaskSelection:
    """The host rows that become tasks, in thread then call order, and what they cover.

    `host_ops[k]`: leaf ops of the host ET task k stands for (itself if a leaf, and the
    leaves folded into it; at least 1), the unit `host_gap_ns` is calibrated per;
    `folded`: rows folded into some task; the remaining rows of the step (wrappers,
    composites whose kernels are their children's) are neither.
    """

    rows: np.ndarray
    host_ops: np.ndarray
    folded: np.ndarray


_ALWAYS = (OpRole.OWN_KERNEL, OpRole.COMM)


def select_tasks(host: HostTrace, rows: np.ndarray, never: np.ndarray) -> TaskSelection:
    """Tasks among `rows` (one step of `host`); `never[name id]` marks names that are
    never tasks themselves (trace roots, `ProfilerStep#N`), only their children."""
    rows = np.asarray(rows, np.int64)
    n = len(rows)
    names = host.names
    role_of_name = [role_of(x) for x in names]
    roles = [role_of_name[k] for k in host.name[rows].tolist()]
    skip = never[host.name[rows]].tolist()
    rf = host.rf_id[rows]
    local = {int(v): i for i, v in enumerate(host.id[rows].tolist())}
    parent = np.array([local.get(int(p), -1) for p in host.parent[rows].tolist()] or [], np.int64)
    parent[parent == np.arange(n)] = -1
    kids = _children(parent, rf, host.id[rows])
    pre = _preorder(parent, kids)
    prep = [base_name(names[k]) in PREP_OPS for k in host.name[rows].tolist()]
    kernel_below = np.zeros(n, bool)
    work_below = np.zeros(n, bool)  # a kernel below that is not argument preparation
    sync_below = np.zeros(n, bool)
    last_rf = rf.copy()
    for i in reversed(pre):
        p = int(parent[i])
        if p < 0:
            continue
        role = roles[i]
        own = role in (OpRole.KERNEL, OpRole.OWN_KERNEL)
        kernel_below[p] |= kernel_below[i] or own
        work_below[p] |= not prep[i] and (own or work_below[i])
        sync_below[p] |= sync_below[i] or role is OpRole.SYNC
        last_rf[p] = max(last_rf[p], last_rf[i])
    owner = np.full(n, -1, np.int64)  # the task a non-task op folds into, or -1
    inherit = np.full(n, -1, np.int64)  # the owner passed to an op's children
    task = np.zeros(n, bool)
    for i in pre:
        p = int(parent[i])
        up = int(inherit[p]) if p >= 0 else -1
        role = roles[i]
        task[i] = (
            role in _ALWAYS
            or (role is OpRole.KERNEL and not kernel_below[i])
            or (role is OpRole.KERNEL and not work_below[i] and not prep[i])
            or (role is OpRole.SYNC and not sync_below[i])
            or (not kids[i] and up < 0 and not skip[i])
        )
        if task[i]:
            inherit[i] = -1 if role is OpRole.COMM else i
        else:
            owner[i] = inherit[i] = up
    late = task & kernel_below  # own kernels run after those of the ops they call
    return _selection(host, rows, task, late, owner, parent, rf, last_rf)


def _children(parent: np.ndarray, rf: np.ndarray, ids: np.ndarray) -> list[list[int]]:
    """Each op's children in call order (rf_id, then id)."""
    kids: list[list[int]] = [[] for _ in range(len(parent))]
    for i in np.lexsort((ids, rf, parent)).tolist():
        if parent[i] >= 0:
            kids[int(parent[i])].append(i)
    return kids


def _preorder(parent: np.ndarray, kids: list[list[int]]) -> list[int]:
    """Every op, parents before children, trees in the order of their roots' rows."""
    order: list[int] = []
    stack = [int(i) for i in np.flatnonzero(parent < 0)[::-1]]
    while stack:
        i = stack.pop()
        order.append(i)
        stack.extend(reversed(kids[i]))
    return order


def _selection(
    host: HostTrace,
    rows: np.ndarray,
    task: np.ndarray,
    late_task: np.ndarray,
    owner: np.ndarray,
    parent: np.ndarray,
    rf: np.ndarray,
    last_rf: np.ndarray,
) -> TaskSelection:
    """Order the tasks per thread by call order; a task with kernel ops below it goes
    after them (its own kernels run last). Count the leaf ops each task stands for."""
    picked = np.flatnonzero(task)
    late = late_task[picked]
    key = np.where(late, last_rf[picked], rf[picked])
    order = np.lexsort((host.id[rows[picked]], late, key, host.tid[rows[picked]]))
    picked = picked[order]
    leaf = np.ones(len(task), bool)
    leaf[parent[parent >= 0]] = False
    count = (task & leaf).astype(np.int64)
    folded = owner >= 0
    np.add.at(count, owner[folded & leaf], 1)
    count = np.maximum(count, 1)
    return TaskSelection(rows[picked], count[picked], rows[folded])
