"""Cost formulas of compute-bound op classes: matmul, convolution, attention.

Each formula takes the parsed arguments and the op name and returns an `OpCost` (or
`Unpriced` with the reason). `lumos.converters.ops.flops` maps op names to them.
"""

from __future__ import annotations

import math
from typing import Any

from lumos.converters.ops.args import (
    ELEM_BYTES,
    Arg,
    Scalar,
    Tensor,
    parse_text,
    tensors,
)
from lumos.converters.ops.cost import CostKind, OpCost, Unpriced
from lumos.converters.ops.cost import bad as _bad


def _mm_cost(kind: CostKind, flops: float, ts: list[Tensor], out_numel: int) -> OpCost:
    dt = ts[0].dtype
    moved = sum(t.nbytes for t in ts) + out_numel * ELEM_BYTES[dt]
    return OpCost(kind, float(flops), float(moved), dt)


def _matmul_dims(a: tuple[int, ...], b: tuple[int, ...]) -> tuple[int, int, int, int] | None:
    """(batch, M, K, N) of torch.matmul(a, b) with broadcasting; None if shapes disagree."""
    if not a or not b:
        return None
    a2 = (1, *a) if len(a) == 1 else a
    b2 = (*b, 1) if len(b) == 1 else b
    m, k = a2[-2], a2[-1]
    k2, n = b2[-2], b2[-1]
    if k != k2:
        return None
    batch_a, batch_b = a2[:-2], b2[:-2]
    width = max(len(batch_a), len(batch_b))
    batch = 1
    for i in range(1, width + 1):
        da = batch_a[-i] if i <= len(batch_a) else 1
        db = batch_b[-i] if i <= len(batch_b) else 1
        batch *= max(da, db)
    return batch, m, k, n


def _matmul(name: str, a: Tensor, b: Tensor, extra: list[Tensor]) -> OpCost | Unpriced:
    dims = _matmul_dims(a.shape, b.shape)
    if dims is None:
        return _bad(name, f"shapes {a.shape} x {b.shape} do not multiply")
    batch, m, k, n = dims
    return _mm_cost(CostKind.MATMUL, 2.0 * batch * m * k * n, [a, b, *extra], batch * m * n)


def mm(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if name in ("addmm", "baddbmm", "addbmm"):
        if len(ts) < 3:
            return _bad(name, "needs bias and two matrices")
        return _matmul(name, ts[1], ts[2], [ts[0]])
    if name == "linear":
        if len(ts) < 2:
            return _bad(name, "needs input and weight")
        w = ts[1]
        wt = Tensor(w.shape[::-1], w.dtype, w.device)
        return _matmul(name, ts[0], wt, ts[2:3])
    if len(ts) < 2:
        return _bad(name, "needs two matrices")
    return _matmul(name, ts[0], ts[1], [])


def _scalar(args: list[Arg], i: int) -> Any:
    """The recorded value of scalar argument `i` (None if absent or not a scalar)."""
    arg = args[i] if 0 <= i < len(args) else None
    return arg.value if isinstance(arg, Scalar) else None


def _ints(value: Any) -> list[int] | None:
    v = parse_text(value) if isinstance(value, str) else value
    if isinstance(v, int) and not isinstance(v, bool):
        return [v]
    if isinstance(v, list) and v and all(isinstance(x, int) for x in v):
        return list(v)
    return None


# Position of (stride, padding, dilation, groups) among the arguments, by op name.
CONV_ARGS = {
    "convolution": (3, 4, 5, 8),
    "_convolution": (3, 4, 5, 8),
    "conv1d": (3, 4, 5, 6),
    "conv2d": (3, 4, 5, 6),
    "conv3d": (3, 4, 5, 6),
    "cudnn_convolution": (3, 2, 4, 5),
    "miopen_convolution": (4, 3, 5, 6),
    "mkldnn_convolution": (4, 3, 5, 6),
    "_convolution_mode": (3, -1, 5, 6),
}


def _conv_geometry(args: list[Arg], name: str, x: Tensor, w: Tensor) -> tuple[list[int], int]:
    """Output spatial sizes and groups, from the recorded stride/padding/dilation."""
    spatial = len(x.shape) - 2
    pos = CONV_ARGS.get(name, (-1, -1, -1, -1))

    def at(i: int, default: int) -> list[int]:
        got = _ints(_scalar(args, i)) or [default]
        return (got * spatial)[:spatial] if len(got) == 1 else got[:spatial]

    stride, padding, dilation = at(pos[0], 1), at(pos[1], 0), at(pos[2], 1)
    groups = at(pos[3], 1)[0] if pos[3] >= 0 else 1
    out = []
    for i in range(spatial):
        size, k = x.shape[2 + i], w.shape[2 + i]
        out.append(max(1, (size + 2 * padding[i] - dilation[i] * (k - 1) - 1) // stride[i] + 1))
    return out, max(groups, 1)


def conv(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if len(ts) < 2 or len(ts[0].shape) < 3 or len(ts[1].shape) != len(ts[0].shape):
        return _bad(name, "needs input [N, C, ...] and weight [O, C/g, ...]")
    x, w = ts[0], ts[1]
    out, groups = _conv_geometry(args, name, x, w)
    if w.shape[1] * groups != x.shape[1]:
        groups = max(1, x.shape[1] // max(w.shape[1], 1))
    n, o = x.shape[0], w.shape[0]
    flops = 2.0 * n * o * math.prod(out) * w.shape[1] * math.prod(w.shape[2:])
    return _mm_cost(CostKind.CONV, flops, ts[:3], n * o * math.prod(out))


def conv_backward(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if len(ts) < 3 or len(ts[0].shape) < 3:
        return _bad(name, "needs grad_output, input, weight")
    gy, x, w = ts[0], ts[1], ts[2]
    flops = 2.0 * gy.shape[0] * gy.shape[1] * math.prod(gy.shape[2:])
    flops *= w.shape[1] * math.prod(w.shape[2:]) * 2  # grad input + grad weight
    return _mm_cost(CostKind.CONV, flops, [gy, x, w], x.numel + w.numel)


# Position of `is_causal` among the arguments, by op name.
_CAUSAL_ARG = {
    "_scaled_dot_product_flash_attention": 4,
    "_scaled_dot_product_efficient_attention": 6,
    "_scaled_dot_product_cudnn_attention": 6,
    "scaled_dot_product_attention": 5,
    "_flash_attention_forward": 8,
    "_efficient_attention_forward": 10,
    "_scaled_dot_product_flash_attention_backward": 11,
    "_scaled_dot_product_efficient_attention_backward": 11,
    "_flash_attention_backward": 11,
}


def attention(args: list[Arg], name: str) -> OpCost | Unpriced:
    backward = name.endswith("_backward")
    ts = [t for t in tensors(args) if len(t.shape) == 4]
    if backward and len(ts) > 3:
        ts = ts[1:]  # grad_out first
    if len(ts) < 3:
        return _bad(name, "needs 4-D query, key, value")
    q, k, v = ts[0], ts[1], ts[2]
    if name.startswith("_flash_attention"):
        b, lq, h, d = q.shape  # [B, L, H, D]
        s = k.shape[1]
    else:
        b, h, lq, d = q.shape  # [B, H, L, D]
        s = k.shape[2]
    pos = _CAUSAL_ARG.get(name, -1)
    flag = _scalar(args, pos)
    causal = flag is True or (isinstance(flag, str) and flag.lower() == "true")
    flops = 4.0 * b * h * lq * s * d * (0.5 if causal else 1.0) * (2.5 if backward else 1.0)
    moved = (q.nbytes + k.nbytes + v.nbytes + q.nbytes) * (2.5 if backward else 1.0)
    return OpCost(CostKind.ATTENTION, flops, moved, q.dtype)
