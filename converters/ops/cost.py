"""What one op costs, as a typed record: FLOPs, bytes, kind of bound, or why it is unpriced."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import Enum

from lumos.converters.ops.args import Arg, DType


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


def bad(name: str, what: str) -> Unpriced:
    return Unpriced(f"{name}: {what}")
