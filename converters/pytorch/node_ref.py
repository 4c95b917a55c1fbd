"""One Chakra node per finalized task, built as a `pb.Node`: the reference encoding.

`NodeSource` is what the writer formats (a finalized `TaskTable` and the traces its rows
refer to); `node_message` builds node `row + 1` with protobuf, field by field, the way
`chakra_write.encode_nodes` encodes it by hand. The tests hold the two to the same bytes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.pytorch.host_et import HostTrace
from lumos.converters.pytorch.kineto import KinetoTrace
from lumos.converters.pytorch.tasks import COMM_KINDS, TaskKind, TaskTable
from lumos.proto import pb

NODE_TYPE = {
    TaskKind.CPU: pb.COMP_NODE,
    TaskKind.GPU: pb.COMP_NODE,
    TaskKind.COLL: pb.COMM_COLL_NODE,
    TaskKind.SEND: pb.COMM_SEND_NODE,
    TaskKind.RECV: pb.COMM_RECV_NODE,
}


@dataclass(slots=True)
class NodeSource:
    """A finalized task table and what its rows refer to."""

    table: TaskTable
    step_start: int
    estimated: bool
    kineto: KinetoTrace | None = None
    host: HostTrace | None = None


def _int_attr(name: str, value: int) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, int64_val=value)


def node_message(src: NodeSource, row: int) -> pb.Node:
    """Node `row + 1` (the task at position `row` of the id order) as a pb.Node."""
    t = src.table
    task = int(t.order[row])
    kind = TaskKind(int(t.kind[task]))
    start = int(t.start[task]) - src.step_start
    dur = int(t.dur[task])
    attrs: list[pb.AttributeProto] = []
    if kind not in COMM_KINDS:
        attrs.append(pb.AttributeProto(name="is_cpu_op", bool_val=kind is TaskKind.CPU))
    attrs.append(_int_attr(cv.DUR_NS, dur))
    attrs.append(_int_attr(cv.START_NS, start))
    if src.estimated:
        attrs.append(pb.AttributeProto(name=cv.DUR_ESTIMATED, bool_val=True))
    if t.stream[task] >= 0:
        attrs.append(_int_attr(cv.STREAM, int(t.stream[task])))
        attrs.append(_int_attr(cv.DEVICE, int(t.device[task])))
        if t.gap[task] > 0:
            attrs.append(_int_attr(cv.GAP_NS, int(t.gap[task])))
    elif t.tid[task] >= 0:
        attrs.append(_int_attr(cv.TID, int(t.tid[task])))
        attrs.append(_int_attr(cv.GAP_NS, int(t.gap[task])))
    ev, k = int(t.ev[task]), src.kineto
    if ev >= 0 and k is not None:
        attrs.append(pb.AttributeProto(name=cv.CATEGORY, string_val=k.cats[k.cat[ev]]))
        if k.corr[ev] >= 0:
            attrs.append(_int_attr(cv.CORRELATION, int(k.corr[ev])))
    host, h = int(t.host[task]), src.host
    if host >= 0 and h is not None and kind is TaskKind.CPU:
        attrs.append(_int_attr("rf_id", int(h.rf_id[host])))
        attrs.append(_int_attr("seq_id", int(h.seq_id[host])))
        attrs.append(_int_attr("fw_parent", int(h.fw_parent[host])))
        if h.op_schema[host]:
            attrs.append(pb.AttributeProto(name="op_schema", string_val=h.names[h.op_schema[host]]))
    for name, value in t.attrs.get(task, {}).items():
        if not name.startswith("_"):
            attrs.append(make_attr(name, value))
    node = pb.Node(
        id=row + 1,
        name=t.name_of(task),
        type=NODE_TYPE[kind],
        start_time_micros=max(0, start) // 1000,
        duration_micros=max(0, (dur + 500) // 1000),
        attr=attrs,
    )
    ctrl, data = _deps(t, task, node_ids(t))
    node.ctrl_deps.extend(ctrl)
    node.data_deps.extend(data)
    if host >= 0 and h is not None and t.head[task]:
        node.MergeFromString(bytes(h.io[host]))
    return node


def node_ids(t: TaskTable) -> np.ndarray:
    ids = np.empty(len(t), np.int64)
    ids[t.order] = np.arange(1, len(t) + 1)
    return ids


def _deps(t: TaskTable, task: int, ids: np.ndarray) -> tuple[list[int], list[int]]:
    own = int(ids[task])
    ctrl = [int(ids[t.ctrl[task]])] if t.ctrl[task] >= 0 else []
    seen = set(ctrl)
    data = []
    for dep in t.data_of(task):
        dep_id = int(ids[dep])
        if dep_id != own and dep_id not in seen:
            seen.add(dep_id)
            data.append(dep_id)
    return [c for c in ctrl if c != own], data
