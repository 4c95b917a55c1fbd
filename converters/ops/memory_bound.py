"""Cost formulas of memory-bound op classes: element-wise, reductions, copies, gathers.

Each formula takes the parsed arguments and the op name and returns an `OpCost` (or
`Unpriced` with the reason). `lumos.converters.ops.flops` maps op names to them.
"""

from __future__ import annotations

import math

from lumos.converters.ops.args import (
    ELEM_BYTES,
    Arg,
    DType,
    Tensor,
    TensorList,
    all_tensors,
    tensors,
)
from lumos.converters.ops.cost import CostFn, CostKind, OpCost, Unpriced
from lumos.converters.ops.cost import bad as _bad


def _memory(
    reads: float, writes: float, flops: float, dt: DType, kind: CostKind = CostKind.MEMORY
) -> OpCost:
    return OpCost(kind, float(flops), float(reads + writes), dt)


def _broadcast_numel(ts: list[Tensor]) -> int:
    width = max(len(t.shape) for t in ts)
    dims = [1] * width
    for t in ts:
        for i, d in enumerate(reversed(t.shape)):
            dims[width - 1 - i] = max(dims[width - 1 - i], d)
    return math.prod(dims)


def elementwise(flops_per_elem: float) -> CostFn:
    def cost(args: list[Arg], name: str) -> OpCost | Unpriced:
        ts = tensors(args)
        if not ts:
            return _bad(name, "no tensor argument")
        out = _broadcast_numel(ts)
        dt = max(ts, key=lambda t: t.numel).dtype
        reads = sum(t.nbytes for t in ts)
        return _memory(reads, out * ELEM_BYTES[dt], flops_per_elem * out, dt)

    return cost


def passes(forward: float, backward: float) -> CostFn:
    """Row-wise ops (norms, softmax): `forward` (or `backward`) passes over the input."""

    def cost(args: list[Arg], name: str) -> OpCost | Unpriced:
        ts = tensors(args)
        if not ts:
            return _bad(name, "no tensor argument")
        x = max(ts, key=lambda t: t.numel)
        n = backward if "backward" in name else forward
        params = sum(t.nbytes for t in ts if t is not x and t.numel < x.numel)
        return _memory(n * x.nbytes, params, 5.0 * x.numel, x.dtype, CostKind.REDUCTION)

    return cost


def reduction(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    x = ts[0]
    return _memory(x.nbytes, ELEM_BYTES[x.dtype], x.numel, x.dtype, CostKind.REDUCTION)


def copy(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    src = ts[1] if name == "copy_" and len(ts) > 1 else ts[0]
    dst = ts[0] if name == "copy_" else src
    devices = {t.device.split(":")[0] for t in ts[:2] if t.device}
    kind = CostKind.TRANSFER if len(devices) > 1 else CostKind.MEMORY
    return OpCost(kind, 0.0, float(src.nbytes + dst.numel * ELEM_BYTES[dst.dtype]), dst.dtype)


def cat(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = all_tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    total = sum(t.nbytes for t in ts)
    return _memory(total, total, 0, ts[0].dtype)


def embedding(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if len(ts) < 2:
        return _bad(name, "needs weight and indices")
    weight, index = ts[0], ts[1]
    if "backward" in name:
        grad = ts[0]
        return _memory(2 * grad.nbytes + index.nbytes, grad.nbytes, grad.numel, grad.dtype)
    row = math.prod(weight.shape[1:]) * ELEM_BYTES[weight.dtype]
    rows = index.numel
    if "bag" in name and len(ts) > 2:
        bags = ts[2].numel
        return _memory(rows * row + index.nbytes, bags * row, rows * row, weight.dtype)
    return _memory(rows * row + index.nbytes, rows * row, 0, weight.dtype)


def foreach(args: list[Arg], name: str) -> OpCost | Unpriced:
    lists = [a for a in args if isinstance(a, TensorList)]
    if not lists:
        return elementwise(1.0)(args, name)
    reads = sum(tl.nbytes for tl in lists) + sum(t.nbytes for t in tensors(args))
    written = 3 if name.startswith("_fused_adam") else 1
    writes = sum(tl.nbytes for tl in lists[:written])
    dt = lists[0].tensors[0].dtype
    return _memory(reads, writes, 10.0 * lists[0].numel, dt)


def gather(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = all_tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    small = min(ts, key=lambda t: t.numel)
    moved = 2 * sum(t.nbytes for t in ts if t is not small) if len(ts) > 1 else 2 * ts[0].nbytes
    return _memory(moved + small.nbytes, 0, 0, max(ts, key=lambda t: t.numel).dtype)


def no_kernel(args: list[Arg], name: str) -> OpCost | Unpriced:
    return OpCost(CostKind.NO_KERNEL, 0.0, 0.0, DType.UNKNOWN)
