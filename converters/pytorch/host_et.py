"""Loading a PyTorch host execution trace (ExecutionTraceObserver JSON) into compact records.

Nodes are read in streamed batches (`json_stream`) through the schema table
(`host_et_schema`), so every version in the wild loads the same way. Nodes become rows of
numpy columns (`HostTrace`, sorted by id) with names as ids into an interned table; each
node's inputs/outputs are kept already encoded as the Chakra `IOInfo` message the writer
copies; `record_param_comms` nodes also get a parsed `CommArgs`. `HostTrace.op(i)` gives
one row as a `HostOp` record.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from operator import itemgetter
from typing import Any

import numpy as np

from lumos.converters.pytorch.host_et_comm import CommArgs, comm_args, parse_groups, tensor_nelems
from lumos.converters.pytorch.host_et_schema import (
    PROCESS_GROUP_INIT,
    HostEtSchema,
    Layout,
    schema_for,
)
from lumos.converters.pytorch.host_ids import FIELDS, int_matrix
from lumos.converters.pytorch.host_io import ByteRows, encode_io, io_field, no_rows
from lumos.converters.pytorch.host_tree import check_host_tree
from lumos.converters.pytorch.json_stream import TraceFile, read_array_document
from lumos.errors import TraceFormatError
from lumos.proto import pb

_intern = sys.intern
__all__ = ["ByteRows", "CommArgs", "HostOp", "HostTrace", "IoJson", "load_host_et", "tensor_nelems"]


@dataclass(frozen=True, slots=True)
class IoJson:
    """A node's inputs or outputs, as the JSON strings of Chakra's IOInfo."""

    values: str
    shapes: str
    types: str


@dataclass(slots=True)
class HostOp:
    """One host-ET node (row `index` of its `HostTrace`)."""

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
    index: int = -1


def _empty_i64() -> np.ndarray:
    return np.zeros(0, np.int64)


@dataclass(slots=True)
class HostTrace:
    """A whole host ET as columns sorted by node id, and the process groups it declares.

    `io` holds each node's inputs and outputs already encoded as the `inputs` (8) and
    `outputs` (9) fields of a Chakra `Node` (b"" when it has neither); `comm` the parsed
    `record_param_comms` arguments by row. `op(i)` gives one row as a `HostOp`.
    """

    path: str
    schema: HostEtSchema
    pid: int
    names: list[str] = field(default_factory=list)
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    op_schema: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    id: np.ndarray = field(default_factory=_empty_i64)
    parent: np.ndarray = field(default_factory=_empty_i64)
    rf_id: np.ndarray = field(default_factory=_empty_i64)
    tid: np.ndarray = field(default_factory=_empty_i64)
    seq_id: np.ndarray = field(default_factory=_empty_i64)
    fw_parent: np.ndarray = field(default_factory=_empty_i64)
    io: ByteRows = field(default_factory=no_rows)
    comm: dict[int, CommArgs] = field(default_factory=dict)
    process_groups: list[dict[str, Any]] = field(default_factory=list)
    #: the schema version the file declares ("" when it gives none); `schema` is the
    #: version lumos read it as, the closest it lists
    declared_schema: str = ""

    def __len__(self) -> int:
        return len(self.id)

    def name_of(self, i: int) -> str:
        return self.names[self.name[i]]

    def io_of(self, i: int) -> tuple[IoJson | None, IoJson | None]:
        """(inputs, outputs) of row i as JSON strings."""
        node = pb.Node.FromString(bytes(self.io[int(i)]))
        return (
            IoJson(node.inputs.values, node.inputs.shapes, node.inputs.types)
            if node.HasField("inputs")
            else None,
            IoJson(node.outputs.values, node.outputs.shapes, node.outputs.types)
            if node.HasField("outputs")
            else None,
        )

    def op(self, i: int) -> HostOp:
        i = int(i)
        io_in, io_out = self.io_of(i)
        return HostOp(
            int(self.id[i]),
            self.names[self.name[i]],
            int(self.parent[i]),
            int(self.rf_id[i]),
            int(self.tid[i]),
            int(self.seq_id[i]),
            int(self.fw_parent[i]),
            self.names[self.op_schema[i]],
            io_in,
            io_out,
            self.comm.get(i),
            i,
        )

    @property
    def ops(self) -> list[HostOp]:
        """Every row as a record (slow; for small traces and tests)."""
        return [self.op(i) for i in range(len(self))]

    def by_id(self) -> dict[int, HostOp]:
        return {op.id: op for op in self.ops}

    def row_of_id(self) -> dict[int, int]:
        return {int(v): i for i, v in enumerate(self.id.tolist())}


_INT_FIELDS = FIELDS
_FLAT_IDS = itemgetter("id", "parent", "rf_id", "tid", "seq_id", "fw_parent")
_FLAT_REST = itemgetter(
    "name", "inputs", "input_shapes", "input_types", "outputs", "output_shapes", "output_types"
)


class _Columns:
    """Accumulates nodes batch by batch: ids as tuples, names as ids, IO already encoded."""

    def __init__(self, schema: HostEtSchema, path: str) -> None:
        self.schema, self.path = schema, path
        self.name_ids: dict[str, int] = {"": 0}
        self.names: list[str] = [""]
        self.nums: list[tuple[Any, ...]] = []
        self.name: list[int] = []
        self.op_schema: list[int] = []
        self.io: list[bytes] = []  # this batch's
        self.io_parts: list[bytes] = []
        self.io_lens: list[np.ndarray] = []
        self.comm: dict[int, CommArgs] = {}
        self.groups: tuple[int, Any] | None = None
        self.parts: list[tuple[np.ndarray, np.ndarray, np.ndarray]] = []
        self.row0 = 0

    def _nid(self, name: str) -> int:
        nid = self.name_ids.get(name)
        if nid is None:
            nid = self.name_ids[name] = len(self.names)
            self.names.append(_intern(name))
        return nid

    def add_batch(self, batch: list[Any]) -> None:
        self._add_batch(batch)
        self._freeze_batch()

    def _row_name(self, k: int) -> str:
        """This batch's row k's node name."""
        return self.names[self.name[k]]

    def _freeze_batch(self) -> None:
        """Turn this batch's Python ints into arrays, so their memory is reused."""
        if self.nums:
            self.parts.append(
                (
                    int_matrix(self.nums, self.path, self._row_name),
                    np.asarray(self.name, np.int32),
                    np.asarray(self.op_schema, np.int32),
                )
            )
            self.row0 += len(self.nums)
            self.nums, self.name, self.op_schema = [], [], []
        if self.io:
            self.io_lens.append(np.fromiter(map(len, self.io), np.int64, len(self.io)))
            self.io_parts.append(b"".join(self.io))
            self.io = []

    def _add_batch(self, batch: list[Any]) -> None:
        node: Any = None
        try:
            if self.schema.layout is Layout.FLAT:
                self._add_flat(batch)
            else:
                for node in batch:
                    self._add(node, False)
        except (KeyError, TypeError, ValueError, AttributeError) as exc:
            bad = node if node is not None else self._last_bad
            node_id = bad.get("id") if isinstance(bad, dict) else None
            node_name = bad.get("name") if isinstance(bad, dict) else None
            raise TraceFormatError(
                self.path, f"node {node_id!r} ({node_name!r}) is malformed: {exc}"
            ) from None

    _last_bad: Any = None

    def _add_flat(self, batch: list[Any]) -> None:
        """The 1.0.1 layout: every field at top level (the common, fast case)."""
        nums, name_l, schema_l = self.nums, self.name, self.op_schema
        io, name_ids = self.io, self.name_ids
        for node in batch:
            self._last_bad = node
            try:
                ids = _FLAT_IDS(node)
                name, iv, ish, ity, ov, osh, oty = _FLAT_REST(node)
            except KeyError:
                self._add(node, True)
                continue
            if name in _SPECIAL or type(name) is not str:
                self._add(node, True)
                continue
            nid = name_ids.get(name)
            if nid is None:
                nid = self._nid(name)
            nums.append(ids)
            name_l.append(nid)
            op_schema = node.get("op_schema")
            schema_l.append(self._schema_id(op_schema) if op_schema else 0)
            field = io_field(b"B", iv, ish, ity) if ity else b""
            io.append(field + io_field(b"J", ov, osh, oty) if oty else field)
        self._last_bad = None

    def _schema_id(self, value: Any) -> int:
        text = value if value.__class__ is str else str(value)
        return self._nid(text) if text else 0

    def _add(self, node: dict[str, Any], flat: bool) -> None:
        """Any layout, any missing field (the general, slower case)."""
        name = node["name"]
        nid = self._nid(name)
        if flat:
            ids = node
            in_types, out_types = node.get("input_types"), node.get("output_types")
            attrs: dict[str, Any] = {}
            ins = (node.get("inputs", []), node.get("input_shapes", []), in_types or [])
            outs = (node.get("outputs", []), node.get("output_shapes", []), out_types or [])
        else:
            attrs = {a["name"]: a.get("value") for a in node.get("attrs", ())}
            ids = attrs
            i, o = node.get("inputs") or {}, node.get("outputs") or {}
            ins = (i.get("values", []), i.get("shapes", []), i.get("types", []))
            outs = (o.get("values", []), o.get("shapes", []), o.get("types", []))
        row = self.row0 + len(self.nums)
        self.nums.append(
            (
                node["id"],
                node.get(self.schema.parent_key) or 0,
                ids.get("rf_id", -1),
                ids.get("tid", 0),
                ids.get("seq_id", -1),
                ids.get("fw_parent", 0),
            )
        )
        self.name.append(nid)
        self.op_schema.append(self._schema_id(ids.get("op_schema", "")))
        field = encode_io(b"B", *ins) if ins[2] else b""
        self.io.append(field + encode_io(b"J", *outs) if outs[2] else field)
        if name == "record_param_comms":
            self.comm[row] = comm_args(self.schema, ins, outs, attrs)
        elif name == PROCESS_GROUP_INIT and ins[2]:
            node_id = int(node["id"])
            if self.groups is None or node_id >= self.groups[0]:
                self.groups = (node_id, ins[0])

    def finish(self, trace: HostTrace) -> None:
        self._freeze_batch()
        parts = self.parts or [
            (
                np.zeros((0, len(_INT_FIELDS)), np.int64),
                np.zeros(0, np.int32),
                np.zeros(0, np.int32),
            )
        ]
        nums = np.concatenate([p[0] for p in parts])
        order = np.argsort(nums[:, 0], kind="stable")
        trace.names = self.names
        for col, key in enumerate(_INT_FIELDS):
            setattr(trace, key, np.ascontiguousarray(nums[order, col]))
        trace.name = np.concatenate([p[1] for p in parts])[order]
        trace.op_schema = np.concatenate([p[2] for p in parts])[order]
        part = np.concatenate(
            [np.full(len(lens), i, np.int32) for i, lens in enumerate(self.io_lens)]
            or [np.zeros(0, np.int32)]
        )
        ends = np.concatenate([np.cumsum(lens) for lens in self.io_lens] or [_empty_i64()])
        starts = ends - np.concatenate(self.io_lens or [_empty_i64()])
        trace.io = ByteRows(self.io_parts, part[order], starts[order], ends[order])
        if np.array_equal(order, np.arange(len(order))):
            trace.comm = self.comm
        else:
            new_row = {old: new for new, old in enumerate(order.tolist())}
            trace.comm = {new_row[r]: args for r, args in self.comm.items()}
        if self.groups is not None:
            trace.process_groups = parse_groups(self.groups[1], self.path)


_SPECIAL = frozenset({"record_param_comms", PROCESS_GROUP_INIT})


def load_host_et(source: TraceFile) -> HostTrace:
    """Read a host ET file. Raises TraceFormatError for an unknown schema or bad JSON."""
    found: list[_Columns] = []

    def on_header(head: dict[str, Any]) -> None:
        schema = schema_for(str(head.get("schema", "")), source.path)
        found.append(_Columns(schema, source.path))

    def on_batch(batch: list[Any]) -> None:
        if not found:
            raise TraceFormatError(source.path, "no 'schema' before 'nodes'")
        found[0].add_batch(batch)

    meta = read_array_document(source, "nodes", on_batch, on_header=on_header)
    if not found:
        raise TraceFormatError(source.path, "no 'nodes': not a PyTorch host execution trace")
    columns = found[0]
    trace = HostTrace(source.path, columns.schema, int(meta.get("pid", 0)))
    columns.finish(trace)
    trace.declared_schema = str(meta.get("schema", columns.schema.version))
    check_host_tree(
        source.path, trace.id, trace.parent, trace.declared_schema, columns.schema.version
    )
    return trace
