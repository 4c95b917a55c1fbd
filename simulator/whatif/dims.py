"""The model's sizes as the trace shows them, and the shape rewrites that change them.

`infer_dims` reads batch, sequence and hidden size from the activations that enter the
layers' layer norms (`[B, S, H]`) and the head count from the attention inputs
(`[B, heads, S, H/heads]`). `DimMap` rewrites tensor shapes dimension by dimension: a
dimension equal to a traced size becomes the new size (hidden: H, 3H for fused QKV, 4H
for the MLP, H/heads; sequence: S and the flattened B·S), so every op's new shapes — and
from them its FLOPs and bytes — follow from the traced ones.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

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
    """Rewrite of tensor dimensions: {old size: new size} (other sizes stay)."""

    sizes: Mapping[int, int]
    leading_only: bool = False  # rewrite only each tensor's first dimension (batch)

    def shape(self, dims: list[object]) -> list[object]:
        return [
            self.sizes.get(d, d)
            if isinstance(d, int) and not isinstance(d, bool) and (k == 0 or not self.leading_only)
            else d
            for k, d in enumerate(dims)
        ]

    def rewrite(self, shapes_text: str) -> str:
        """The shapes string of an op with every tensor's dimensions rewritten."""
        try:
            shapes = json.loads(shapes_text)
        except ValueError:
            return shapes_text

        def walk(x: object) -> object:
            if isinstance(x, list) and x and all(isinstance(d, int) for d in x):
                return self.shape(x)
            if isinstance(x, list):
                return [walk(y) for y in x]
            return x

        return json.dumps(walk(shapes), separators=(",", ":"))


def hidden_map(d: ModelDims, hidden: int, ffn: int | None = None) -> DimMap:
    """Hidden size H -> `hidden` (FFN 4H -> `ffn`, default 4·hidden; heads kept)."""
    sizes = {d.hidden: hidden, 3 * d.hidden: 3 * hidden, 4 * d.hidden: ffn or 4 * hidden}
    if d.heads > 1 and d.hidden % d.heads == 0 and hidden % d.heads == 0:
        sizes.setdefault(d.hidden // d.heads, hidden // d.heads)
    return DimMap({k: v for k, v in sizes.items() if k != v})


def seq_map(d: ModelDims, seq: int) -> DimMap:
    """Sequence length S -> `seq` (and the flattened batch·S rows of the GEMMs)."""
    sizes = {d.seq: seq, d.batch * d.seq: d.batch * seq}
    return DimMap({k: v for k, v in sizes.items() if k != v})


def batch_map(d: ModelDims, batch: int) -> DimMap:
    """Batch B -> `batch` (micro-batching; also the flattened B·S rows), on leading
    dimensions only (a head count equal to B stays)."""
    sizes = {d.batch: batch, d.batch * d.seq: batch * d.seq}
    return DimMap({k: v for k, v in sizes.items() if k != v}, leading_only=True)
