"""Loading a PyTorch host execution trace (ExecutionTraceObserver JSON) into compact records.

Nodes are read in streamed batches (`json_stream`) through the schema table
(`host_et_schema`), so every version in the wild loads the same way. Each node becomes a
`HostOp` with interned names and its inputs/outputs kept as the JSON strings Chakra's
`IOInfo` wants; `record_param_comms` nodes also get a parsed `CommArgs`.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import orjson
from lumos.converters.host_et_schema import (
    COMM_ATTRS,
    PROCESS_GROUP_INIT,
    HostEtSchema,
    Layout,
    schema_for,
)
from lumos.converters.json_stream import TraceFile, read_array_document

from lumos.errors import TraceFormatError

_intern = sys.intern


@dataclass(frozen=True, slots=True)
class IoJson:
    """A node's inputs or outputs, as the JSON strings of Chakra's IOInfo."""

    values: str
    shapes: str
    types: str


@dataclass(frozen=True, slots=True)
class CommArgs:
    """What `record_param_comms` says about one collective or point-to-point op."""

    collective: str  # "allreduce", "all_gather", "send", "wait", ...
    pg_name: str
    pg_desc: str
    in_nelems: int
    out_nelems: int
    elem_bytes: int
    pg_ranks: tuple[int, ...]  # empty = unknown or all ranks
    dtype: str


@dataclass(slots=True)
class HostOp:
    """One host-ET node."""

    id: int
    name: str
    parent: int
    rf_id: int
    tid: int
    seq_id: int
    fw_parent: int
    op_schema: str
    inputs: IoJson | None
    outputs: IoJson | None
    comm: CommArgs | None


@dataclass(slots=True)
class HostTrace:
    """A whole host ET: its ops sorted by id, and the process groups it declares."""

    path: str
    schema: HostEtSchema
    pid: int
    ops: list[HostOp]
    process_groups: list[dict[str, Any]]

    def by_id(self) -> dict[int, HostOp]:
        return {op.id: op for op in self.ops}


def is_host_et(meta: dict[str, Any]) -> bool:
    return "schema" in meta and "traceEvents" not in meta


def load_host_et(source: TraceFile) -> HostTrace:
    """Read a host ET file. Raises TraceFormatError for an unknown schema or bad JSON."""
    ops: list[HostOp] = []
    found: list[HostEtSchema] = []

    def on_header(head: dict[str, Any]) -> None:
        found.append(schema_for(str(head.get("schema", "")), source.path))

    def on_batch(batch: list[Any]) -> None:
        if not found:
            raise TraceFormatError(source.path, "no 'schema' before 'nodes'")
        ops.extend(_op(found[0], node) for node in batch)

    meta = read_array_document(source, "nodes", on_batch, on_header=on_header)
    if not found:
        raise TraceFormatError(source.path, "no 'nodes': not a PyTorch host execution trace")
    schema = found[0]
    ops.sort(key=lambda op: op.id)
    groups: list[dict[str, Any]] = []
    for op in ops:
        if op.name == PROCESS_GROUP_INIT and op.inputs is not None:
            groups = _parse_groups(op.inputs.values, source.path)
    return HostTrace(source.path, schema, int(meta.get("pid", 0)), ops, groups)


def _dumps(value: Any) -> str:
    return orjson.dumps(value).decode()


def _op(schema: HostEtSchema, node: dict[str, Any]) -> HostOp:
    try:
        if schema.layout is Layout.FLAT:
            ids = node
            ins = (
                node.get("inputs", []),
                node.get("input_shapes", []),
                node.get("input_types", []),
            )
            outs = (
                node.get("outputs", []),
                node.get("output_shapes", []),
                node.get("output_types", []),
            )
            attrs: dict[str, Any] = {}
        else:
            attrs = {a["name"]: a.get("value") for a in node.get("attrs", ())}
            ids = attrs
            i, o = node.get("inputs") or {}, node.get("outputs") or {}
            ins = (i.get("values", []), i.get("shapes", []), i.get("types", []))
            outs = (o.get("values", []), o.get("shapes", []), o.get("types", []))
        name = _intern(node["name"])
        comm = _comm_args(schema, ins, outs, attrs) if name == "record_param_comms" else None
        return HostOp(
            id=int(node["id"]),
            name=name,
            parent=int(node.get(schema.parent_key) or 0),
            rf_id=int(ids.get("rf_id", -1)),
            tid=int(ids.get("tid", 0)),
            seq_id=int(ids.get("seq_id", -1)),
            fw_parent=int(ids.get("fw_parent", 0)),
            op_schema=_intern(str(ids.get("op_schema", ""))),
            inputs=IoJson(_dumps(ins[0]), _dumps(ins[1]), _dumps(ins[2])) if ins[2] else None,
            outputs=IoJson(_dumps(outs[0]), _dumps(outs[1]), _dumps(outs[2])) if outs[2] else None,
            comm=comm,
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise TraceFormatError(
            "host ET", f"node {node.get('id')!r} ({node.get('name')!r}) is malformed: {exc}"
        ) from None


def _tensor_nelems(values: Any, types: Any) -> tuple[int, int]:
    """(elements, bytes per element) of the first tensor (or tensor list) in values."""
    for value, typ in zip(values, types, strict=False):
        if not isinstance(typ, str) or "Tensor" not in typ:
            continue
        tensors = value if typ.startswith("GenericList") else [value]
        total, elem = 0, 0
        for t in tensors:
            if isinstance(t, list) and len(t) >= 5:
                total += int(t[3])
                elem = int(t[4])
        return total, elem
    return 0, 0


def _comm_args(
    schema: HostEtSchema, ins: tuple[Any, ...], outs: tuple[Any, ...], attrs: dict[str, Any]
) -> CommArgs:
    values, _, types = ins
    in_n, elem = _tensor_nelems(values, types)
    out_n, out_elem = _tensor_nelems(outs[0], outs[2])
    if schema.comm_attrs and "collective_name" in attrs:
        a = {k: attrs.get(k) for k in COMM_ATTRS}
        size = int(a["pg_size"] or 0)
        start, stride = a["global_rank_start"], a["global_rank_stride"]
        ranks: tuple[int, ...] = (
            tuple(int(start) + int(stride) * i for i in range(size))
            if start is not None and stride is not None and size > 1
            else ()
        )
        return CommArgs(
            collective=_intern(str(a["collective_name"])),
            pg_name=str(a["pg_name"] or ""),
            pg_desc=str(a["pg_desc"] or ""),
            in_nelems=int(a["in_msg_nelems"] or in_n),
            out_nelems=int(a["out_msg_nelems"] or out_n),
            elem_bytes=elem or out_elem,
            pg_ranks=ranks,
            dtype=str(a["dtype"] or ""),
        )
    strings = [v for v, t in zip(values, types, strict=False) if t == "String"]
    pair = next(
        (v for v, t in zip(values, types, strict=False) if t == "Tuple[String,String]"), None
    )
    pg_name, pg_desc = (str(pair[0]), str(pair[1])) if pair else ("", "")
    ints = [v for v, t in zip(values, types, strict=False) if t == "Int"]
    ranks = ()
    if schema.pg_in_inputs and len(ints) >= 4:
        start, stride, size = ints[-3], ints[-2], ints[-1]
        if start >= 0 and stride > 0 and size > 1:
            ranks = tuple(start + stride * i for i in range(size))
    return CommArgs(
        collective=_intern(str(strings[0]) if strings else ""),
        pg_name=pg_name,
        pg_desc=pg_desc,
        in_nelems=in_n,
        out_nelems=out_n,
        elem_bytes=elem or out_elem,
        pg_ranks=ranks,
        dtype="",
    )


def _parse_groups(values_json: str, path: str) -> list[dict[str, Any]]:
    values = orjson.loads(values_json)
    text = values[0] if values else "[]"
    try:
        groups = orjson.loads(text) if isinstance(text, str) else text
    except orjson.JSONDecodeError:
        raise TraceFormatError(path, "## process_group:init ## holds invalid JSON") from None
    return [g for g in groups if isinstance(g, dict)]
