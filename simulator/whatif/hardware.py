"""Edit: another GPU (and its network): compute re-timed per kernel class.

Each GPU kernel is classed by its name (GEMM, convolution, attention, reduction/norm,
copy, element-wise) and re-timed by the compute cost model's ratio between the two GPUs
for the work it did: the work is found by inverting the traced GPU's roofline at the
measured duration (`CostModel.time_ns` is monotonic in the work), then priced on the
new GPU — so a 40 µs GEMM scales with the tensor-core peaks and a 5 µs element-wise
kernel mostly with the fixed kernel overheads. CPU ops stay as traced (the host does not
change). Collectives and send/recv are re-timed by the ratio of the two systems'
network models (`lumos.simulator.network.nccl`) for the same size and group.
"""

from __future__ import annotations

import re
from collections import defaultdict
from dataclasses import dataclass, field

from lumos.converters.ops.args import DType
from lumos.converters.ops.cost import CostKind, OpCost
from lumos.proto import pb
from lumos.simulator.costmodel.roofline import CostModel
from lumos.simulator.network.api import CollectivePricer
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups
from lumos.simulator.whatif.groups import members_of

_CLASSES = (
    (re.compile(r"conv|implicit_gemm|winograd|fprop|dgrad|wgrad", re.I), CostKind.CONV),
    (re.compile(r"flash|fmha|attention|attn", re.I), CostKind.ATTENTION),
    (
        re.compile(r"gemm|gemv|cutlass|cublas|wgmma|xmma|\b[sh]\d{3,5}|matmul|dot_", re.I),
        CostKind.MATMUL,
    ),
    (re.compile(r"memcpy|memset", re.I), CostKind.TRANSFER),
    (
        re.compile(r"reduce|norm|softmax|sum|mean|max|argmax|topk|scan|sort", re.I),
        CostKind.REDUCTION,
    ),
)


def kernel_class(name: str) -> CostKind:
    """The cost class of a GPU kernel from its name (element-wise when nothing matches)."""
    for pattern, kind in _CLASSES:
        if pattern.search(name):
            if kind is CostKind.TRANSFER and "dtod" in name.lower().replace(" ", ""):
                return CostKind.MEMORY
            return kind
    return CostKind.MEMORY


def _dtype(name: str) -> DType:
    low = name.lower()
    if "bf16" in low:
        return DType.BF16
    if any(t in low for t in ("f16", "fp16", "half", "h884", "h1688", "h16816")):
        return DType.FP16
    if "tf32" in low:
        return DType.TF32
    return DType.FP32 if ("sgemm" in low or "f32" in low) else DType.FP16


def _cost(kind: CostKind, work: float, dtype: DType) -> OpCost:
    if kind in (CostKind.MATMUL, CostKind.CONV, CostKind.ATTENTION):
        return OpCost(kind, work, 0.0, dtype, True)
    return OpCost(kind, 0.0, work, dtype, True)


def invert_work(model: CostModel, kind: CostKind, dtype: DType, dur_ns: int) -> float:
    """The work (FLOPs or bytes) whose time on `model`'s GPU is `dur_ns` (bisection)."""
    lo, hi = 0.0, 1.0
    while model.time_ns(_cost(kind, hi, dtype)) < dur_ns and hi < 1e20:
        hi *= 4
    for _ in range(60):
        mid = (lo + hi) / 2
        if model.time_ns(_cost(kind, mid, dtype)) < dur_ns:
            lo = mid
        else:
            hi = mid
    return hi


@dataclass(slots=True)
class ClassRatios:
    """Per kernel class: kernels, traced ns and new ns (summed)."""

    kernels: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    old_ns: dict[str, int] = field(default_factory=lambda: defaultdict(int))
    new_ns: dict[str, int] = field(default_factory=lambda: defaultdict(int))


def kernel_ratio(old: CostModel, new: CostModel, name: str, dur_ns: int) -> float:
    """new/old time of one traced kernel (see module doc)."""
    kind, dtype = kernel_class(name), _dtype(name)
    work = invert_work(old, kind, dtype, dur_ns)
    base = old.time_ns(_cost(kind, work, dtype))
    return new.time_ns(_cost(kind, work, dtype)) / base if base > 0 else 1.0


def swap_gpu(
    ets: EtSet,
    old: CostModel,
    new: CostModel,
    old_net: CollectivePricer | None = None,
    new_net: CollectivePricer | None = None,
    summary: ClassRatios | None = None,
) -> EtSet:
    """Every rank with its kernels (and, given both pricers, its communication) re-timed."""
    groups, world = process_groups(ets), ets.world_size
    ranks = []
    for r in ets.ranks:
        nodes = []
        for n in r.nodes:
            c = nd.clone(n)
            if nd.is_comm(c) and old_net is not None and new_net is not None:
                _retime_comm(c, r, old_net, new_net, groups, world)
            elif c.type == pb.COMP_NODE and nd.on_gpu(c) and nd.duration(c) > 0:
                dur = nd.duration(c)
                new_dur = round(dur * kernel_ratio(old, new, c.name, dur))
                nd.set_duration(c, new_dur)
                if summary is not None:
                    k = kernel_class(c.name).value
                    summary.kernels[k] += 1
                    summary.old_ns[k] += dur
                    summary.new_ns[k] += new_dur
            nodes.append(c)
        ranks.append(RankEt(r.rank, r.metadata, tuple(nodes)))
    return ets.with_ranks(ranks)


def _retime_comm(
    c: pb.Node,
    r: RankEt,
    old_net: CollectivePricer,
    new_net: CollectivePricer,
    groups: dict[str, tuple[int, ...]],
    world: int,
) -> None:
    size = nd.int_attr(c, "comm_size", 0)
    if c.type == pb.COMM_COLL_NODE:
        members = members_of(c, groups, world)
        t = nd.int_attr(c, "comm_type", 0)
        a, b = old_net.collective_ns(t, size, members), new_net.collective_ns(t, size, members)
    else:
        src, dst = nd.int_attr(c, "comm_src", r.rank), nd.int_attr(c, "comm_dst", r.rank)
        a, b = old_net.p2p_ns(size, src, dst), new_net.p2p_ns(size, src, dst)
    if a > 0:
        nd.set_duration(c, round(nd.comm_duration(c) * b / a))
