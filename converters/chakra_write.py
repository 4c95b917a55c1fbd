"""Formatting numbered tasks as Chakra nodes and the rank's GlobalMetadata.

Standard attributes keep their standard value fields (`attrs.STANDARD_FIELDS`); our
extra ones are those of `conventions`. Attribute order is fixed, so output bytes are
deterministic.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from lumos.converters import conventions as cv
from lumos.converters.attrs import make_attr
from lumos.converters.et_io import ET_SCHEMA_VERSION
from lumos.converters.tasks import Task, TaskKind
from lumos.proto import pb

NODE_TYPE = {
    TaskKind.CPU: pb.COMP_NODE,
    TaskKind.GPU: pb.COMP_NODE,
    TaskKind.COLL: pb.COMM_COLL_NODE,
    TaskKind.SEND: pb.COMM_SEND_NODE,
    TaskKind.RECV: pb.COMM_RECV_NODE,
}


def metadata(
    rank: int,
    world_size: int,
    groups: dict[str, tuple[int, ...]],
    step_ns: int | None,
    sources: list[str],
    producer: str,
) -> pb.GlobalMetadata:
    meta = pb.GlobalMetadata(version=ET_SCHEMA_VERSION)
    items: list[tuple[str, Any]] = [
        (cv.META_RANK, rank),
        (cv.META_WORLD_SIZE, world_size),
        (
            cv.META_PROCESS_GROUPS,
            orjson.dumps({k: list(v) for k, v in sorted(groups.items())}).decode(),
        ),
    ]
    if step_ns is not None:
        items.append((cv.META_STEP_NS, step_ns))
    items += [(cv.META_SOURCE, list(sources)), (cv.META_PRODUCER, producer)]
    meta.attr.extend(make_attr(k, v) for k, v in items)
    return meta


def _int_attr(name: str, value: int) -> pb.AttributeProto:
    return pb.AttributeProto(name=name, int64_val=value)


def to_node(task: Task, step_start: int, estimated: bool) -> pb.Node:
    """One Chakra node for a numbered task."""
    start = task.start - step_start
    attrs: list[pb.AttributeProto] = []
    comm = task.kind in (TaskKind.COLL, TaskKind.SEND, TaskKind.RECV)
    if not comm:
        attrs.append(pb.AttributeProto(name="is_cpu_op", bool_val=task.kind is TaskKind.CPU))
    attrs.append(_int_attr(cv.DUR_NS, task.dur))
    attrs.append(_int_attr(cv.START_NS, start))
    if estimated:
        attrs.append(pb.AttributeProto(name=cv.DUR_ESTIMATED, bool_val=True))
    if task.stream >= 0:
        attrs.append(_int_attr(cv.STREAM, task.stream))
        attrs.append(_int_attr(cv.DEVICE, task.device))
    elif task.tid >= 0:
        attrs.append(_int_attr(cv.TID, task.tid))
        attrs.append(_int_attr(cv.GAP_NS, task.gap))
    ev = task.ev
    if ev is not None:
        attrs.append(pb.AttributeProto(name=cv.CATEGORY, string_val=ev.cat))
        if ev.corr >= 0:
            attrs.append(_int_attr(cv.CORRELATION, ev.corr))
    host = task.host
    if host is not None and task.kind is TaskKind.CPU:
        attrs.append(_int_attr("rf_id", host.rf_id))
        attrs.append(_int_attr("seq_id", host.seq_id))
        attrs.append(_int_attr("fw_parent", host.fw_parent))
        if host.op_schema:
            attrs.append(pb.AttributeProto(name="op_schema", string_val=host.op_schema))
    for name, value in task.attrs.items():
        if not name.startswith("_"):
            attrs.append(make_attr(name, value))
    node = pb.Node(
        id=task.id,
        name=task.name,
        type=NODE_TYPE[task.kind],
        start_time_micros=max(0, start) // 1000,
        duration_micros=(task.dur + 500) // 1000,
        attr=attrs,
    )
    ctrl = _ids(task.ctrl, task)
    data = _ids(task.data, task, exclude=set(ctrl))
    if ctrl:
        node.ctrl_deps.extend(ctrl)
    if data:
        node.data_deps.extend(data)
    if host is not None and task.head and host.inputs is not None:
        io = host.inputs
        node.inputs.values, node.inputs.shapes, node.inputs.types = io.values, io.shapes, io.types
    if host is not None and task.head and host.outputs is not None:
        io = host.outputs
        node.outputs.values, node.outputs.shapes, node.outputs.types = (
            io.values,
            io.shapes,
            io.types,
        )
    return node


def _ids(deps: list[Task], task: Task, exclude: set[int] | None = None) -> list[int]:
    seen = set(exclude or ())
    out = []
    for dep in deps:
        if dep.id != task.id and dep.id not in seen and dep.id > 0:
            seen.add(dep.id)
            out.append(dep.id)
    return out


def iter_nodes(tasks: list[Task], step_start: int, estimated: bool) -> Iterator[pb.Node]:
    for task in tasks:
        yield to_node(task, step_start, estimated)
