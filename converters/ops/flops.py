"""FLOPs and bytes moved by one ATen op, from its name and input shapes and dtypes.

The operator-level decomposition of fine-grained GPU performance models (Zhang et al.,
"Efficient Fine-Grained GPU Performance Modeling for Distributed Deep Learning of LLM"):
every op is a matmul-like kernel priced by its FLOPs, or a memory-bound kernel priced by
the bytes it moves, or no kernel at all (views, allocations, metadata). A cost model then
turns `OpCost` into time on a given GPU (`lumos.simulator.costmodel.roofline`).

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

from typing import Any

from lumos.converters.ops.args import Arg, all_tensors, parse_args
from lumos.converters.ops.cost import CostFn, CostKind, OpCost, Unpriced
from lumos.converters.ops.formulas import CONV_ARGS, attention, conv, conv_backward, mm
from lumos.converters.ops.memory_bound import (
    cat,
    copy,
    elementwise,
    embedding,
    foreach,
    gather,
    no_kernel,
    passes,
    reduction,
)

__all__ = [
    "CostFn",
    "CostKind",
    "OpCost",
    "Unpriced",
    "base_name",
    "has_kernel_formula",
    "has_no_kernel",
    "op_cost",
    "op_cost_from_args",
]


def _table() -> dict[str, CostFn]:
    t: dict[str, CostFn] = {}
    for n in ("mm", "addmm", "bmm", "baddbmm", "addbmm", "matmul", "linear", "_addmm_activation"):
        t[n] = mm
    for n in CONV_ARGS:
        t[n] = conv
    for n in (
        "convolution_backward",
        "cudnn_convolution_backward",
        "convolution_backward_overrideable",
        "mkldnn_convolution_backward",
    ):
        t[n] = conv_backward
    for n in (
        "_scaled_dot_product_flash_attention",
        "_scaled_dot_product_efficient_attention",
        "_scaled_dot_product_cudnn_attention",
        "_flash_attention_forward",
        "_efficient_attention_forward",
        "scaled_dot_product_attention",
    ):
        t[n] = t[n + "_backward"] = attention
    t["_flash_attention_backward"] = attention
    t["_efficient_attention_backward"] = attention
    cheap = (
        "add sub mul div neg abs relu threshold clamp clamp_min clamp_max fill zero sign "
        "maximum minimum where eq ne lt le gt ge logical_not logical_and masked_fill "
        "threshold_backward reciprocal hardtanh hardtanh_backward leaky_relu bitwise_and "
        "bitwise_or floor ceil round remainder fmod lerp addcmul addcdiv copysign "
        "relu_ mul_ add_ sub_ div_ zeros_like ones_like full_like"
    )
    for n in cheap.split():
        t[n] = elementwise(1.0)
    transcendental = (
        "gelu gelu_backward silu silu_backward sigmoid sigmoid_backward tanh tanh_backward "
        "exp log log1p sqrt rsqrt pow sin cos erf softplus elu mish hardswish "
        "native_dropout native_dropout_backward dropout bernoulli uniform normal "
        "mse_loss mse_loss_backward nll_loss_forward nll_loss_backward "
        "binary_cross_entropy_with_logits"
    )
    for n in transcendental.split():
        t[n] = elementwise(8.0)
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
        t[n] = passes(2.0, 3.0)
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
        t[n] = passes(3.0, 4.0)
    for n in [
        "softmax",
        "_softmax",
        "log_softmax",
        "_log_softmax",
        "_softmax_backward_data",
        "_log_softmax_backward_data",
    ]:
        t[n] = passes(2.0, 3.0)
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
        t[n] = reduction
    for n in ("copy_", "_to_copy", "clone", "contiguous_copy", "_copy_from"):
        t[n] = copy
    for n in ("cat", "stack", "cat", "index_select", "gather", "scatter", "scatter_add"):
        t[n] = cat if n in ("cat", "stack", "cat") else gather
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
        t[n] = gather
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
        t[n] = embedding
    view_ops = (
        "view as_strided reshape _reshape_alias t transpose permute expand slice select "
        "squeeze unsqueeze detach alias empty empty_strided empty_like result_type size "
        "stride resize_ _unsafe_view unbind split split_with_sizes chunk narrow contiguous "
        "to lift_fresh set_ numpy_T _local_scalar_dense item is_nonzero flatten unflatten "
        "view_as _to_dense type_as record_stream zeros ones new_empty new_empty_strided "
        "new_zeros diagonal movedim unfold_copy_ sym_size dim"
    )
    for n in view_ops.split():
        t[n] = no_kernel
    return t


COST_TABLE: dict[str, CostFn] = _table()


#: Namespaces whose ops are priced by `lumos.converters.ops.fbgemm`.
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
        return foreach
    if name.endswith("_") and name[:-1] in COST_TABLE:
        return COST_TABLE[name[:-1]]
    if name[:1].isupper() and "Backward" in name:
        return no_kernel  # an autograd node with no children passes gradients through
    if name.startswith(CUSTOM_OP_PREFIXES):
        # Imported here: the fbgemm formulas build on this module's types.
        from lumos.converters.ops.fbgemm import fbgemm_formula

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
    return fn is not None and fn is not no_kernel


def has_no_kernel(op_name: str) -> bool:
    """True when `op_name` is known to launch no kernel (a view, an allocation, metadata)."""
    return _formula(base_name(op_name)) is no_kernel
