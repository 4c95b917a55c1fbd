"""Cost formulas of fbgemm's CUDA ops (DLRM / TorchRec embedding tables), by bytes.

All are memory-bound gathers and scatters of embedding rows, read from the arguments a
host ET records (names and positions of fbgemm_gpu's schemas):

* `split_embedding_codegen_lookup_*_function` / `dense_embedding_codegen_lookup_function`
  (pooled forward): the first two Int arguments are `total_D`, `max_D`; the tensor just
  before them is `D_offsets` (T tables + 1); `indices`, `offsets` are the two 1-D integer
  tensors just before the Int `pooling_mode`. Reads every looked-up row (`len(indices)`
  rows of `total_D / T` elements) plus indices and offsets, writes `B·total_D`
  (B = (len(offsets) − 1) / T);
* the backward of those lookups (`torch::autograd::CppNode<SplitLookupFunction_*>`,
  whose only recorded input is grad_output [B, total_D]): reads the gradient, and for an
  optimizer-fused table (`_adagrad_`, `_sgd_`, `_adam_`, ...) reads and writes the updated
  rows and their state (≈ 4 gradient-sized passes), for the dense one writes the
  weight gradient (2 passes). It runs several kernels (sort, segment reduce, update)
  but is priced as one: the kernel overheads it pays are not modelled;
* `permute_2D_sparse_data`, `asynchronous_complete_cumsum`, `bounds_check_indices`:
  read and write their tensors once.
"""

from __future__ import annotations

from lumos.converters.ops.args import ELEM_BYTES, Arg, DType, Scalar, Tensor, all_tensors
from lumos.converters.ops.cost import CostFn, CostKind, OpCost, Unpriced

_INT_TYPES = (DType.INT64, DType.INT32)


def _int_scalars(args: list[Arg]) -> list[tuple[int, int]]:
    """(position, value) of the recorded Int arguments."""
    return [
        (i, a.value)
        for i, a in enumerate(args)
        if isinstance(a, Scalar) and isinstance(a.value, int) and not isinstance(a.value, bool)
    ]


def _lookup(args: list[Arg], name: str) -> OpCost | Unpriced:
    ints = _int_scalars(args)
    if len(ints) < 2 or ints[0][0] == 0:
        return Unpriced(f"{name}: no total_D / max_D arguments")
    at, total_d = ints[0]
    d_offsets = args[at - 1]
    pair: tuple[Tensor, Tensor] | None = None
    for i in range(at + 2, len(args) - 2):
        a, b, c = args[i], args[i + 1], args[i + 2]
        if not (isinstance(a, Tensor) and isinstance(b, Tensor) and isinstance(c, Scalar)):
            continue
        if a.dtype in _INT_TYPES and b.dtype in _INT_TYPES and len(b.shape) == 1:
            pair = (a, b)
            break
    if not isinstance(d_offsets, Tensor) or pair is None or d_offsets.numel < 2:
        return Unpriced(f"{name}: no D_offsets / indices / offsets arguments")
    tables = d_offsets.numel - 1
    weights = max(
        (t for t in all_tensors(args) if t.dtype not in _INT_TYPES),
        key=lambda t: t.numel,
        default=None,
    )
    elem = ELEM_BYTES[weights.dtype] if weights is not None else 4
    indices, offsets = pair
    batch = max(offsets.numel - 1, 0) // tables
    rows = indices.numel * (total_d / tables) * elem
    reads = rows + indices.nbytes + offsets.nbytes
    writes = batch * total_d * elem
    dtype = weights.dtype if weights is not None else DType.FP32
    return OpCost(CostKind.MEMORY, rows / elem, float(reads + writes), dtype)


def _lookup_backward(args: list[Arg], name: str) -> OpCost | Unpriced:
    grads = [t for t in all_tensors(args) if t.dtype not in _INT_TYPES]
    if not grads:
        return Unpriced(f"{name}: no grad_output argument")
    grad = grads[0]
    passes = 2 if "_Dense_" in name else 5
    return OpCost(CostKind.MEMORY, float(grad.numel), float(passes * grad.nbytes), grad.dtype)


def _read_write(args: list[Arg], name: str) -> OpCost | Unpriced:
    ts = all_tensors(args)
    if not ts:
        return Unpriced(f"{name}: no tensor argument")
    moved = 2 * sum(t.nbytes for t in ts)
    return OpCost(CostKind.MEMORY, 0.0, float(moved), max(ts, key=lambda t: t.numel).dtype)


def fbgemm_formula(name: str) -> CostFn | None:
    """The formula of fbgemm op `name` (full name), or None."""
    if name.startswith("torch::autograd::CppNode<SplitLookupFunction"):
        return _lookup_backward
    if not name.startswith("fbgemm::"):
        return None
    op = name.split("::", 1)[1]
    if op.endswith("_embedding_codegen_lookup_function") or (
        op.startswith("split_embedding_codegen_lookup_") and op.endswith("_function")
    ):
        return _lookup
    if op in ("permute_2D_sparse_data", "permute_1D_sparse_data", "permute_sparse_data"):
        return _read_write
    if op in ("asynchronous_complete_cumsum", "asynchronous_exclusive_cumsum"):
        return _read_write
    if op in ("asynchronous_inclusive_cumsum", "bounds_check_indices"):
        return _read_write
    return None
