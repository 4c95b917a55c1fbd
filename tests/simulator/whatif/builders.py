"""Small training steps with the field layout `lumos convert` writes (CPU-only and GPU).

Per rank: a main thread runs data loading, `layers` forward blocks (layer norm, a GEMM
through `aten::linear` -> `aten::addmm`, GELU), the loss, the backward blocks in reverse
(autograd-engine wrappers, an `mm` per block) each issuing one gloo/NCCL all-reduce of
the layer's gradients on a communication thread or stream, then an optimizer step per
layer. Durations are functions of the work so re-timing has a line to follow.
"""

from __future__ import annotations

import json

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import make_attr
from lumos.proto import pb
from lumos.simulator.whatif.etset import EtSet, RankEt

MAIN, COMM_TID, COMPUTE_STREAM, COMM_STREAM = 100, 101, 7, 13


class _Rank:
    def __init__(self, rank: int, gpu: bool) -> None:
        self.rank, self.gpu = rank, gpu
        self.nodes: list[pb.Node] = []
        self.t = 0
        self.last: dict[object, int] = {}
        self.rf = 0

    def add(
        self,
        name: str,
        dur: int,
        *,
        shapes: object = None,
        types: object = None,
        values: object = None,
        ntype: int = pb.COMP_NODE,
        proc: tuple[str, int] = ("tid", MAIN),
        data: tuple[int, ...] = (),
        attrs: tuple[tuple[str, object], ...] = (),
        rf: int | None = None,
    ) -> int:
        n = pb.Node(id=len(self.nodes) + 1, name=name, type=ntype)
        n.duration_micros = round(dur / 1000)
        prev = self.last.get(proc)
        if prev is not None:
            n.ctrl_deps.append(prev)
        n.data_deps.extend(data)
        if shapes is not None:
            n.inputs.shapes = json.dumps(shapes, separators=(",", ":"))
            n.inputs.types = json.dumps(types)
        if values is not None:
            n.inputs.values = json.dumps(values, separators=(",", ":"))
        cpu = proc[0] == "tid"
        items: list[tuple[str, object]] = [(cv.DUR_NS, dur)]
        if ntype == pb.COMP_NODE:
            items.append(("is_cpu_op", cpu))
        items.append((cv.START_NS, self.t))
        items.append((cv.TID if cpu else cv.STREAM, proc[1]))
        if cpu and ntype == pb.COMP_NODE:
            self.rf += rf is None
            items += [(cv.CATEGORY, "cpu_op"), ("rf_id", self.rf if rf is None else rf)]
        elif not cpu:
            items.append((cv.CATEGORY, "kernel"))
        n.attr.extend(make_attr(k, v) for k, v in (*items, *attrs))
        self.nodes.append(n)
        self.last[proc] = n.id
        if proc == ("tid", MAIN):
            self.t += dur
        return n.id


def _gemm(r: _Rank, m: int, k: int, n: int) -> int:
    flops = 2 * m * k * n
    dur = 20_000 + flops // 100
    types = ["Tensor(float)"] * 3 + ["Int", "Int"]
    r.add("aten::linear", 2_000)
    launch = r.add(
        "aten::addmm",
        dur if not r.gpu else 6_000,
        shapes=[[n], [m, k], [k, n], [], []],
        types=types,
    )
    if r.gpu:
        r.add("sm80_xmma_gemm_f16f16_f32", dur, proc=("stream", COMPUTE_STREAM), data=(launch,))
    r.add("aten::linear", 1_000)
    return launch


def _ew(r: _Rank, name: str, shape: list[int]) -> int:
    numel = 1
    for d in shape:
        numel *= d
    dur = 8_000 + numel // 10
    launch = r.add(name, dur if not r.gpu else 5_000, shapes=[shape], types=["Tensor(float)"])
    if r.gpu:
        r.add(
            f"vectorized_elementwise_kernel<{name}>",
            dur,
            proc=("stream", COMPUTE_STREAM),
            data=(launch,),
        )
    return launch


def training_step(
    layers: int = 3,
    ranks: int = 2,
    hidden: int = 64,
    seq: int = 16,
    batch: int = 3,
    gpu: bool = False,
    ddp: bool = False,
    wrapper: bool = False,
) -> EtSet:
    """A data-parallel step of `layers` identical blocks on `ranks` ranks (`ddp`: the
    host side of DDP's gradient sync too: each all-reduce issued by a `c10d::allreduce_`
    call cut in two segments around a bucket copy, and after the layers a finalisation op
    that waits on the last all-reduce; `wrapper`: DDP's own forward time before the
    embedding, a `DistributedDataParallel.forward` segment)."""
    out = []
    act = [batch, seq, hidden]
    for rank in range(ranks):
        r = _Rank(rank, gpu)
        r.add("aten::randint", 30_000)
        if wrapper:
            r.add("DistributedDataParallel.forward", 40_000)
        r.add(
            "aten::embedding",
            20_000,
            shapes=[[128, hidden], [batch, seq]],
            types=["Tensor(float)", "Tensor(long)"],
        )
        for _ in range(layers):
            r.add("aten::layer_norm", 3_000)
            _ew(r, "aten::native_layer_norm", act)
            _gemm(r, batch * seq, hidden, 4 * hidden)
            _ew(r, "aten::gelu", [batch, seq, 4 * hidden])
        _gemm(r, batch * seq, hidden, 128)  # LM head (vocabulary 128)
        _ew(r, "aten::_log_softmax", [batch * seq, 128])
        comm_proc = ("stream", COMM_STREAM) if gpu else ("tid", COMM_TID)
        for k in range(layers):
            r.add("autograd::engine::evaluate_function: AddmmBackward0", 4_000)
            r.add("AddmmBackward0", 2_000)
            launch = _gemm(r, batch * seq, 4 * hidden, hidden)
            _ew(r, "aten::gelu_backward", [batch, seq, 4 * hidden])
            size = (4 * hidden * hidden + 4 * hidden) * 4
            size += 128 * hidden * 4 if k == layers - 1 else 0  # the last bucket: embedding too
            if ddp:
                r.add("c10d::allreduce_", 6_000)
                r.add("aten::_to_copy", 3_000)
                launch = r.add("c10d::allreduce_", 2_000, rf=r.rf - 1)
            coll = r.add(
                "nccl:all_reduce" if gpu else "gloo:all_reduce",
                50_000 + size // 20,
                ntype=pb.COMM_COLL_NODE,
                proc=comm_proc,
                data=(launch,),
                attrs=(("comm_type", 0), ("comm_size", size), ("pg_name", "0")),
            )
        if ddp:
            r.add("aten::as_strided", 4_000, data=(coll,))
            r.add("torch.distributed.ddp.reducer::copy_bucket_to_grad", 3_000)
        r.add("Optimizer.step#AdamW.step", 10_000)
        for _ in range(layers):
            _ew(r, "aten::addcdiv_", [4 * hidden, hidden])
            _ew(r, "aten::lerp_", [4 * hidden, hidden])
        r.add("Optimizer.zero_grad#AdamW.zero_grad", 5_000)
        out.append(RankEt(rank, rank_meta(rank, ranks), tuple(r.nodes)))
    return EtSet(tuple(out), "builder")


def rank_meta(rank: int, ranks: int) -> pb.GlobalMetadata:
    """A converted rank's metadata: its rank, the world size, one group of every rank."""
    meta = pb.GlobalMetadata(version="0.0.4")
    meta.attr.extend(
        [
            make_attr(cv.META_RANK, rank),
            make_attr(cv.META_WORLD_SIZE, ranks),
            make_attr(cv.META_PROCESS_GROUPS, json.dumps({"0": list(range(ranks))})),
        ]
    )
    return meta
