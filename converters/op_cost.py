"""FLOPs and bytes moved by one ATen op, from its name and input shapes and dtypes.

The operator-level decomposition of fine-grained GPU performance models (Zhang et al.,
"Efficient Fine-Grained GPU Performance Modeling for Distributed Deep Learning of LLM"):
every op is a matmul-like kernel priced by its FLOPs, or a memory-bound kernel priced by
the bytes it moves, or no kernel at all (views, allocations, metadata). A cost model then
turns `OpCost` into time on a given GPU (`lumos.simulator.costmodel`).

Pure functions, no simulator import. Formulas (forward; backward noted):

* mm / addmm / bmm / baddbmm / matmul / linear: 2·M·N·K per batch; bytes = A + B + C.
  Backward ops of autograd appear as these same ops (one mm per gradient: ≈ 2× forward).
* convolution (1-D/2-D/3-D, any of `aten::convolution`, `_convolution`, `conv2d`,
  `cudnn_convolution`, ...): 2·N·O·prod(out)·(C/g)·prod(kernel); `convolution_backward`:
  2× forward (grad input + grad weight).
* attention (`_scaled_dot_product_{flash,efficient,cudnn}_attention`, `_flash_attention_forward`,
  `scaled_dot_product_attention`): 4·B·H·L·S·D (QKᵀ and PV), halved when causal;
  backward 2.5× forward (5 matmuls, one recomputed).
* everything else by bytes: elementwise (inputs + broadcast output), reductions (input),
  norms and softmax (2 passes forward, 3 backward), embedding (gathered rows in and out),
  copies (in + out; across devices a PCIe transfer), optimizer `_foreach_*` / `_fused_*`
  (all tensors of all lists read, the first list — or params and moments — written).

Unknown ops give `Unpriced(reason)`; callers decide what to do with them.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum
from typing import Any

from lumos.converters.op_args import (
    ELEM_BYTES,
    Arg,
    DType,
    Scalar,
    Tensor,
    TensorList,
    all_tensors,
    parse_args,
    parse_text,
    tensors,
)


class CostKind(Enum):
    """How an op's time is bounded: its FLOPs (matmul-like), its bytes, or nothing."""

    MATMUL = "matmul"
    CONV = "conv"
    ATTENTION = "attention"
    MEMORY = "memory"
    REDUCTION = "reduction"  # memory-bound with a row/block reduction (norms, softmax, sum)
    TRANSFER = "transfer"  # host <-> device copy over PCIe
    NO_KERNEL = "no_kernel"


@dataclass(slots=True, frozen=True)
class OpCost:
    """Work of one op: FLOPs, bytes moved through HBM, the dtype of its math, where it runs.

    `on_gpu` is True when a tensor argument is on a CUDA device, False when all are on the
    CPU, None when the trace does not say.
    """

    kind: CostKind
    flops: float
    bytes: float
    dtype: DType
    on_gpu: bool | None = None


@dataclass(slots=True, frozen=True)
class Unpriced:
    """An op with no cost formula (or unusable arguments), and why."""

    reason: str


CostFn = Callable[[list[Arg], str], "OpCost | Unpriced"]


def _bad(name: str, what: str) -> Unpriced:
    return Unpriced(f"{name}: {what}")


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


def _mm(args: list[Arg], name: str) -> OpCost | Unpriced:
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
_CONV_ARGS = {
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
    pos = _CONV_ARGS.get(name, (-1, -1, -1, -1))

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


def _conv(args: list[Arg], name: str) -> OpCost | Unpriced:
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


def _conv_backward(args: list[Arg], name: str) -> OpCost | Unpriced:
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


def _attention(args: list[Arg], name: str) -> OpCost | Unpriced:
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


def _elementwise(flops_per_elem: float) -> CostFn:
    def cost(args: list[Arg], name: str) -> OpCost | Unpriced:
        ts = tensors(args)
        if not ts:
            return _bad(name, "no tensor argument")
        out = _broadcast_numel(ts)
        dt = max(ts, key=lambda t: t.numel).dtype
        reads = sum(t.nbytes for t in ts)
        return _memory(reads, out * ELEM_BYTES[dt], flops_per_elem * out, dt)

    return cost


def _passes(forward: float, backward: float) -> CostFn:
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


def _reduction(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    x = ts[0]
    return _memory(x.nbytes, ELEM_BYTES[x.dtype], x.numel, x.dtype, CostKind.REDUCTION)


def _copy(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    src = ts[1] if name == "copy_" and len(ts) > 1 else ts[0]
    dst = ts[0] if name == "copy_" else src
    devices = {t.device.split(":")[0] for t in ts[:2] if t.device}
    kind = CostKind.TRANSFER if len(devices) > 1 else CostKind.MEMORY
    return OpCost(kind, 0.0, float(src.nbytes + dst.numel * ELEM_BYTES[dst.dtype]), dst.dtype)


def _cat(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = all_tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    total = sum(t.nbytes for t in ts)
    return _memory(total, total, 0, ts[0].dtype)


def _embedding(args: list[Arg], name: str) -> OpCost | Unpriced:
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


def _foreach(args: list[Arg], name: str) -> OpCost | Unpriced:
    lists = [a for a in args if isinstance(a, TensorList)]
    if not lists:
        return _elementwise(1.0)(args, name)
    reads = sum(tl.nbytes for tl in lists) + sum(t.nbytes for t in tensors(args))
    written = 3 if name.startswith("_fused_adam") else 1
    writes = sum(tl.nbytes for tl in lists[:written])
    dt = lists[0].tensors[0].dtype
    return _memory(reads, writes, 10.0 * lists[0].numel, dt)


def _gather(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = all_tensors(args)
    if not ts:
        return _bad(name, "no tensor argument")
    small = min(ts, key=lambda t: t.numel)
    moved = 2 * sum(t.nbytes for t in ts if t is not small) if len(ts) > 1 else 2 * ts[0].nbytes
    return _memory(moved + small.nbytes, 0, 0, max(ts, key=lambda t: t.numel).dtype)


def _no_kernel(args: list[Arg], name: str) -> OpCost | Unpriced:
    return OpCost(CostKind.NO_KERNEL, 0.0, 0.0, DType.UNKNOWN)


def _table() -> dict[str, CostFn]:
    t: dict[str, CostFn] = {}
    for n in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation"):
        t[n] = _mm
    for n in _CONV_ARGS:
        t[n] = _conv
    for n in (
        "convolution_backward",
        "cudnn_convolution_backward",
        "convolution_backward_overrideable",
        "mkldnn_convolution_backward",
    ):
        t[n] = _conv_backward
    for n in (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward",
        "_efficient_attention_forward",
        "scaled_dot_product_attention",
    ):
        t[n] = t[n + "_backward"] = _attention
    t["_flash_attention_backward"] = _attention
    t["_efficient_attention_backward"] = _attention
    cheap = (
        "add sub mul div neg abs relu threshold clamp clamp_min clamp_max fill zero sign "
        "maximum minimum where eq ne lt le gt ge logical_not logical_and masked_fill "
        "threshold_backward reciprocal hardtanh hardtanh_backward leaky_relu bitwise_and "
        "bitwise_or floor ceil round remainder fmod lerp addcmul addcdiv copysign "
        "relu_ mul_ add_ sub_ div_ zeros_like ones_like full_like"
    )
    for n in cheap.split():
        t[n] = _elementwise(1.0)
    transcendental = (
        "gelu gelu_backward silu silu_backward sigmoid sigmoid_backward tanh tanh_backward "
        "exp log log1p sqrt rsqrt pow sin cos erf softplus elu mish hardswish "
        "native_dropout native_dropout_backward dropout bernoulli uniform normal "
        "mse_loss mse_loss_backward nll_loss_forward nll_loss_backward "
        "binary_cross_entropy_with_logits"
    )
    for n in transcendental.split():
        t[n] = _elementwise(8.0)
    for n in [
        "layer_norm",
        "native_layer_norm",
        "native_layer_norm_backward",
        "rms_norm",
        "_fused_rms_norm",
        "_fused_rms_norm_backward",
        "native_group_norm",
        "native_group_norm_backward",
    ]:
        t[n] = _passes(2.0, 3.0)
    for n in [
        "batch_norm",
        "native_batch_norm",
        "cudnn_batch_norm",
        "_batch_norm_impl_index",
        "native_batch_norm_backward",
        "cudnn_batch_norm_backward",
        "batch_norm_backward",
        "_native_batch_norm_legit",
        "_native_batch_norm_legit_no_training",
    ]:
        t[n] = _passes(3.0, 4.0)
    for n in [
        "softmax",
        "_softmax",
        "log_softmax",
        "_log_softmax",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
    ]:
        t[n] = _passes(2.0, 3.0)
    for n in [
        "sum",
        "mean",
        "amax",
        "amin",
        "max",
        "min",
        "norm",
        "linalg_vector_norm",
        "var",
        "std",
        "var_mean",
        "std_mean",
        "argmax",
        "argmin",
        "prod",
        "all",
        "any",
        "cumsum",
    ]:
        t[n] = _reduction
    for n in ("copy_", "_to_copy", "clone", "contiguous_copy", "_copy_from"):
        t[n] = _copy
    for n in ("cat", "stack", "_cat", "index_select", "gather", "scatter", "scatter_add"):
        t[n] = _cat if n in ("cat", "stack", "_cat") else _gather
    for n in [
        "index",
        "index_put_",
        "_index_put_impl_",
        "index_add_",
        "embedding_renorm_",
        "take",
        "nonzero",
        "max_pool2d_with_indices",
        "max_pool2d_with_indices_backward",
        "avg_pool2d",
        "avg_pool2d_backward",
        "adaptive_avg_pool2d",
        "_adaptive_avg_pool2d",
        "_adaptive_avg_pool2d_backward",
        "upsample_nearest2d",
        "sort",
        "topk",
        "unique",
        "_unique2",
        "masked_select",
        "repeat",
        "expand_copy",
    ]:
        t[n] = _gather
    for n in [
        "embedding",
        "embedding_bag",
        "_embedding_bag",
        "_embedding_bag_forward_only",
        "embedding_backward",
        "embedding_dense_backward",
        "_embedding_bag_backward",
        "_embedding_bag_dense_backward",
    ]:
        t[n] = _embedding
    no_kernel = (
        "view as_strided reshape _reshape_alias t transpose permute expand slice select "
        "squeeze unsqueeze detach alias empty empty_strided empty_like result_type size "
        "stride resize_ _unsafe_view unbind split split_with_sizes chunk narrow contiguous "
        "to lift_fresh set_ numpy_T _local_scalar_dense item is_nonzero flatten unflatten "
        "view_as _to_dense type_as record_stream zeros ones new_empty new_empty_strided "
        "new_zeros diagonal movedim unfold_copy_ sym_size dim"
    )
    for n in no_kernel.split():
        t[n] = _no_kernel
    return t


COST_TABLE: dict[str, CostFn] = _table()


#: Namespaces whose ops are priced by `op_cost_fbgemm`.
CUSTOM_OP_PREFIXES = ("fbgemm::", "torch::autograd::CppNode<SplitLookupFunction")


def base_name(op_name: str) -> str:
    """`aten::add_` -> `add_`; `aten::mm.out` -> `mm`; other namespaces kept as-is."""
    name = op_name.split("::", 1)[1] if op_name.startswith("aten::") else op_name
    return name.split(".", 1)[0]


def _formula(name: str) -> CostFn | None:
    fn = COST_TABLE.get(name)
    if fn is not None:
        return fn
    if name.startswith(("_foreach_", "_fused_adam", "_fused_sgd", "_fused_adagrad")):
        return _foreach
    if name.endswith("_") and name[:-1] in COST_TABLE:
        return COST_TABLE[name[:-1]]
    if name[:1].isupper() and "Backward" in name:
        return _no_kernel  # an autograd node with no children passes gradients through
    if name.startswith(CUSTOM_OP_PREFIXES):
        # Imported here: the fbgemm formulas build on this module's types.
        from lumos.converters.op_cost_fbgemm import fbgemm_formula

        return fbgemm_formula(name)
    return None


def _on_gpu(args: list[Arg]) -> bool | None:
    devices = {t.device for t in all_tensors(args) if t.device}
    if any(d.startswith("cuda") for d in devices):
        return True
    return False if devices else None


def op_cost_from_args(op_name: str, args: list[Arg]) -> OpCost | Unpriced:
    """The cost of `op_name` with already parsed arguments."""
    name = base_name(op_name)
    fn = _formula(name)
    if fn is None:
        return Unpriced(f"{op_name}: no cost formula")
    try:
        cost = fn(args, name.rstrip("_") if name.rstrip("_") in COST_TABLE else name)
    except (IndexError, ValueError, TypeError, ZeroDivisionError) as exc:
        return Unpriced(f"{op_name}: unusable arguments ({exc})")
    if isinstance(cost, Unpriced):
        return cost
    on_gpu = _on_gpu(args)
    if on_gpu is None:
        return cost
    return OpCost(cost.kind, cost.flops, cost.bytes, cost.dtype, on_gpu)


def op_cost(op_name: str, shapes: Any, types: Any, values: Any = None) -> OpCost | Unpriced:
    """The cost of one op from its trace strings (host ET / Chakra IOInfo, or Kineto lists).

    `shapes` like `"[[4, 8], [8, 16], []]"`, `types` like `"['Tensor(float)', ...]"`;
    `values` (optional) gives scalar arguments (conv strides) and tensor devices.
    """
    return op_cost_from_args(op_name, parse_args(shapes, types, values))


def has_kernel_formula(op_name: str) -> bool:
    """True when `op_name` is priced as GPU work (not a view/allocation, not unknown).

    For host-ET-only graphs: the innermost such op of a call tree carries the kernel
    (`aten::convolution_backward`, `aten::cudnn_batch_norm` have only allocation
    children), so it, not its leaves, should become the task.
    """
    fn = _formula(base_name(op_name))
    return fn is not None and fn is not _no_kernel


def has_no_kernel(op_name: str) -> bool:
    """True when `op_name` is known to launch no kernel (a view, an allocation, metadata)."""
    return _formula(base_name(op_name)) is _no_kernel
