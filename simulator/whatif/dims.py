"""The model's sizes as the trace shows them, and the shape rewrites that change them.

`infer_dims` reads batch, sequence and hidden size from the activations that enter the
layers' layer norms (`[B, S, H]`) and the head count from the attention inputs
(`[B, heads, S, H/heads]`). `DimMap` rewrites tensor shapes dimension by dimension: a
dimension equal to a traced size becomes the new size (hidden: H, 3H for fused QKV, 4H
for the MLP, H/heads; sequence: S and the flattened B·S), so every op's new shapes — and
from them its FLOPs and bytes — follow from the traced ones.

Sizes can coincide (a sequence of 128 at hidden 128; B·S = 4·128 = 512 = the MLP's 4H;
a head size equal to S), so a value alone does not say which axis a dimension is. Two
rules settle the common layouts: an activation `[B, S, X]` (leading B) has the sequence
in its middle dimension and features in its last, an attention tensor `[B, heads, S, D]`
the sequence in its third (its fourth only when D is not S); and a sequence or batch
edit leaves alone the weight-shaped tensors (parameters and their gradients: `frozen`,
read from the host ET's tensor ids by `param_storages`), whatever their shape, and a
hidden edit rewrites them by value.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd


@dataclass(frozen=True, slots=True)
class ModelDims:
    """Batch (per rank, per micro-batch as traced), sequence, hidden size, heads."""

    batch: int
    seq: int
    hidden: int
    heads: int


def _shapes(n: pb.Node) -> list[object]:
    try:
        value = json.loads(n.inputs.shapes) if n.inputs.shapes else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def infer_dims(nodes: Iterable[pb.Node]) -> ModelDims | None:
    """Sizes from the layers' layer-norm inputs and attention inputs; None if not found."""
    acts: Counter[tuple[int, int, int]] = Counter()
    heads: Counter[int] = Counter()
    for n in nodes:
        if nd.tags(n)[1] < 0:
            continue
        shapes = _shapes(n)
        first = shapes[0] if shapes else None
        if not isinstance(first, list) or not all(isinstance(d, int) for d in first):
            continue
        if "layer_norm" in n.name and len(first) == 3:
            acts[(first[0], first[1], first[2])] += 1
        elif "attention" in n.name and len(first) == 4:
            heads[first[1]] += 1
    if not acts:
        return None
    b, s, h = acts.most_common(1)[0][0]
    return ModelDims(b, s, h, heads.most_common(1)[0][0] if heads else 1)


@dataclass(frozen=True, slots=True)
class DimMap:
    """Rewrite of tensor dimensions: {old size: new size} (other sizes stay).

    `axis` ("hidden", "seq" or "batch") and `dims` turn on the layout rules of the module
    doc; `frozen` holds the storage ids whose tensors keep their shapes (see
    `with_frozen`)."""

    sizes: Mapping[int, int]
    leading_only: bool = False  # rewrite only each tensor's first dimension (batch)
    axis: str = ""
    dims: ModelDims | None = None
    frozen: Mapping[int, int] = field(default_factory=dict)

    def with_frozen(self, storages: Mapping[int, int]) -> DimMap:
        """This map for one rank whose parameters live in these storages: a sequence or
        batch edit leaves them as they are, a hidden edit rewrites them by value."""
        return DimMap(self.sizes, self.leading_only, self.axis, self.dims, storages)

    def _is_frozen(self, value: object) -> bool:
        """A parameter (or a view of the same size: a transpose), not a broadcast of one."""
        sid = _storage(value)
        return sid is not None and self.frozen.get(sid, -2) == _numel(value)

    def _axes(self, dims: list[object]) -> set[int] | None:
        """The positions this map may rewrite in `dims` (None: any, by value)."""
        d = self.dims
        if d is None or not self.axis or not dims:
            return None
        tokens = d.batch * d.seq
        if len(dims) == 2 and tokens in dims:  # [B·S, X] rows, or [X, B·S] (weight grads)
            at = 0 if dims[0] == tokens else 1
            return {at} if self.axis == "seq" else {1 - at}
        if dims[0] != d.batch:
            return None
        if len(dims) == 3 and self.axis != "batch" and dims[1] == d.seq:  # [B, S, X]
            return {1} if self.axis == "seq" else {2}
        if len(dims) == 4 and dims[1] == d.heads and d.heads > 1:  # [B, heads, S, D]
            head = d.hidden // d.heads
            if self.axis == "seq":
                return {2} if head == d.seq else {2, 3}
            return {3} if self.axis == "hidden" else None
        return None

    def shape(self, dims: list[object], by_value: bool = False) -> list[object]:
        axes = None if by_value else self._axes(dims)
        return [
            self.sizes.get(d, d)
            if isinstance(d, int)
            and not isinstance(d, bool)
            and (k == 0 or not self.leading_only)
            and (axes is None or k in axes)
            else d
            for k, d in enumerate(dims)
        ]

    def rewrite(self, shapes_text: str, values_text: str = "") -> str:
        """The shapes string of an op with every tensor's dimensions rewritten (tensors
        whose value, in `values_text`, names a frozen storage stay)."""
        try:
            shapes = json.loads(shapes_text)
        except ValueError:
            return shapes_text
        values = _json_list(values_text)

        def walk(x: object, v: object) -> object:
            if isinstance(x, list) and x and all(isinstance(d, int) for d in x):
                if not self._is_frozen(v):
                    return self.shape(x)
                return x if self.axis in ("seq", "batch") else self.shape(x, by_value=True)
            if isinstance(x, list):
                vs = v if isinstance(v, list) and len(v) == len(x) else [None] * len(x)
                return [walk(y, w) for y, w in zip(x, vs, strict=True)]
            return x

        return json.dumps(walk(shapes, values), separators=(",", ":"))


def _numel(value: object) -> int:
    return (
        int(value[3])
        if isinstance(value, list) and len(value) == 6 and isinstance(value[3], int)
        else -1
    )


def _storage(value: object) -> int | None:
    """The storage id of a host-ET tensor value `[id, storage, offset, numel, size, device]`."""
    if isinstance(value, list) and len(value) == 6 and isinstance(value[1], int):
        return int(value[1])
    return None


def _storages(values_text: str) -> set[int]:
    """The storage ids of every tensor value of an op's inputs."""
    out: set[int] = set()
    stack: list[object] = [_json_list(values_text)]
    while stack:
        v = stack.pop()
        sid = _storage(v)
        if sid is not None:
            out.add(sid)
        elif isinstance(v, list):
            stack.extend(v)
    return out


def param_storages(nodes: Iterable[pb.Node], seq: int = -1) -> dict[int, int]:
    """Storages of the parameters and optimizer states: the tensor an optimizer's in-place
    update takes first (`addcdiv_`, `lerp_`, `addcmul_`, `mul_`, ...; not `add_`, which
    AdamW also applies to a temporary — ids are reused once a tensor is freed, so a
    temporary can carry a freed activation's storage id), where ops outside the
    optimizer take it too. Views of a parameter (a weight's transpose in a GEMM) share
    its storage. A learned position table (`seq` rows, looked up by an embedding op)
    grows with the sequence: not counted. Returns {storage: the parameter's elements}."""
    outside: set[int] = set()
    updated: dict[int, int] = {}
    tables: set[int] = set()
    for n in nodes:
        if not n.inputs.values:
            continue
        first = _json_list(n.inputs.values)[:1]
        sid = _storage(first[0]) if first else None
        if nd.tags(n)[0] == "optim":
            if sid is not None and n.name.endswith("_") and not n.name.endswith("add_"):
                updated[sid] = _numel(first[0])
            continue
        outside.update(_storages(n.inputs.values))
        if sid is not None and ("embedding" in n.name or "index_select" in n.name):
            shapes = _shapes(n)
            if shapes and isinstance(shapes[0], list) and shapes[0][:1] == [seq]:
                tables.add(sid)
    return {k: v for k, v in updated.items() if k in outside and k not in tables}


def _json_list(text: str) -> list[object]:
    """`text` parsed as a JSON list ([] when empty, malformed or not a list)."""
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def hidden_map(d: ModelDims, hidden: int, ffn: int | None = None) -> DimMap:
    """Hidden size H -> `hidden` (FFN 4H -> `ffn`, default 4·hidden; heads kept)."""
    sizes = {d.hidden: hidden, 3 * d.hidden: 3 * hidden, 4 * d.hidden: ffn or 4 * hidden}
    if d.heads > 1 and d.hidden % d.heads == 0 and hidden % d.heads == 0:
        sizes.setdefault(d.hidden // d.heads, hidden // d.heads)
    return DimMap({k: v for k, v in sizes.items() if k != v}, axis="hidden", dims=d)


def seq_map(d: ModelDims, seq: int) -> DimMap:
    """Sequence length S -> `seq` (and the flattened batch·S rows of the GEMMs)."""
    sizes = {d.seq: seq, d.batch * d.seq: d.batch * seq}
    return DimMap({k: v for k, v in sizes.items() if k != v}, axis="seq", dims=d)


def batch_map(d: ModelDims, batch: int) -> DimMap:
    """Batch B -> `batch` (micro-batching; also the flattened B·S rows), on leading
    dimensions only (a head count equal to B stays)."""
    sizes = {d.batch: batch, d.batch * d.seq: batch * d.seq}
    return DimMap({k: v for k, v in sizes.items() if k != v}, leading_only=True, axis="batch")
