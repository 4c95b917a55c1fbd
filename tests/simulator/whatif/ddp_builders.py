"""A DDP step with the host side of DDP's gradient buckets as torch 2.x records it.

Per rank (CPU, gloo): the forward of `layers` blocks (layer norm, two GEMMs H -> 4H -> H),
a head of vocabulary 100, then the backward in reverse. Each parameter's gradient is handed
to DDP when ready, in the converted layout: the `AccumulateGrad` call cut in segments
around `torch::autograd::AccumulateGrad` and `torch::distributed::reducer::mul_out` (the
bucket copy, with the parameter's shape, around an `aten::mul`). A bucket is closed by
DDP's rule (bytes reach `cap`; the rest is the last bucket) and issued at once:
`c10d::allreduce_ [[[numel]], ...]`, then `gloo:all_reduce` on one of two worker threads
in turn. DDP's finalisation views each bucket and copies its gradients back
(`copy_bucket_to_grad`), waiting for the bucket's collective first; then the optimizer.
`buckets` overrides the rule with explicit bucket ends (a trace no cap explains); the
ranks in `late` record each collective after the next two gradients' hand-overs;
`unlinked` collectives have no link to the call that issued them (as the converter left
some gloo ops of the grid's base runs 0 and 4: they follow only their worker thread).
"""

from __future__ import annotations

from lumos.proto import pb
from lumos.simulator.whatif.etset import EtSet, RankEt
from tests.simulator.whatif.builders import _ew, _gemm, _Rank, rank_meta

VOCAB, WORKERS = 100, (201, 202)
GRADS, BUCKETS = 1_000, 500  # storage ids of the gradients and DDP's flat buckets
_ACC = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"


def param_shapes(layers: int, hidden: int) -> list[list[int]]:
    """Parameters in the order their gradients become ready (head first, embedding last)."""
    h, f = hidden, 4 * hidden
    out = [[VOCAB, h]]
    for _ in range(layers):
        out += [[h, f], [f], [f, h], [h], [h]]
    return [*out, [VOCAB, h]]


def ddp_rule(sizes: list[int], cap: int) -> list[int]:
    """Bucket ends (gradient indices) by DDP's rule with one cap."""
    ends, total = [], 0
    for i, s in enumerate(sizes):
        total += s
        if total >= cap:
            ends.append(i)
            total = 0
    return ends if ends and ends[-1] == len(sizes) - 1 else [*ends, len(sizes) - 1]


def _numel(shape: list[int]) -> int:
    out = 1
    for d in shape:
        out *= d
    return out


def _tensor(storage: int, numel: int, offset: int = 0) -> list[object]:
    """A host-ET tensor value `[id, storage, offset, numel, itemsize, device]`."""
    return [storage + 7_000, storage, offset, numel, 4, "cpu"]


def _grad(r: _Rank, shape: list[int], grad: list[object], view: list[object]) -> int:
    """The hand-over of one gradient (`grad`: its tensor value; `view`: its place in the
    bucket); returns the AccumulateGrad call's rf_id."""
    r.add(_ACC, 2_000)
    acc = r.rf
    r.add(
        "torch::autograd::AccumulateGrad",
        3_000,
        shapes=[shape],
        types=["Tensor(float)"],
        values=[grad],
    )
    r.add(_ACC, 1_500, rf=acc)
    r.add("torch::distributed::reducer::mul_out", 2_000, shapes=[shape], types=["T"], values=[view])
    copy = r.rf
    _ew(r, "aten::mul", shape)
    r.add("torch::distributed::reducer::mul_out", 1_500, rf=copy)
    r.add(_ACC, 1_500, rf=acc)
    return acc


def _issue(r: _Rank, acc: int, numel: int, k: int) -> int:
    issue = r.add(
        "c10d::allreduce_",
        30_000,
        shapes=[[[numel]], [], [], [], [], []],
        types=["T"],
        values=[[_tensor(BUCKETS + k, numel)], "<Object>", "<Object>", "<None>", True, -1],
    )
    r.add(_ACC, 2_000, rf=acc)
    return issue


def _collective(r: _Rank, numel: int, k: int, after: int | None) -> int:
    return r.add(
        "gloo:all_reduce",
        200_000 + numel // 10,
        ntype=pb.COMM_COLL_NODE,
        proc=("tid", WORKERS[k % 2]),
        data=(after,) if after is not None else (),
        attrs=(("comm_type", 0), ("comm_size", numel * 4), ("pg_name", "0")),
    )


def _backward(
    r: _Rank,
    shapes: list[list[int]],
    ends: list[int],
    numels: list[int],
    layers: int,
    h: int,
    late: bool,
    unlinked: bool = False,
) -> list[int]:
    """The backward in reverse, each gradient handed over when its layer produces it;
    returns the collectives of the buckets (`late`: each recorded after the next two
    gradients' hand-overs, linked to the op running then, as the converter links a worker
    thread's op that woke up late; `unlinked`: with no link to the main thread at all)."""
    colls: list[int] = []
    ready = iter(range(len(shapes)))
    waiting: list[list[int]] = []  # [numel, hand-overs still to wait]

    def hand_over(count: int) -> None:
        for _ in range(count):
            g = next(ready)
            k = sum(e < g for e in ends)
            offset = sum(_numel(s) for s in shapes[ends[k - 1] + 1 if k else 0 : g])
            numel = _numel(shapes[g])
            view = _tensor(BUCKETS + k, numel, offset)
            acc = _grad(r, shapes[g], _tensor(GRADS + g, numel), view)
            for w in waiting:
                w[1] -= 1
            while waiting and waiting[0][1] == 0:
                colls.append(_collective(r, waiting.pop(0)[0], len(colls), len(r.nodes)))
            if g in ends:
                k = len(colls) + len(waiting)
                issue = _issue(r, acc, numels[k], k)
                if late and g != ends[-1]:
                    waiting.append([numels[k], 2])
                else:
                    colls.append(_collective(r, numels[k], k, None if unlinked else issue))

    r.add("autograd::engine::evaluate_function: MmBackward0", 4_000)
    _gemm(r, 32, VOCAB, h)
    hand_over(1)
    for _ in range(layers):
        r.add("autograd::engine::evaluate_function: AddmmBackward0", 4_000)
        _gemm(r, 32, h, 4 * h)
        hand_over(3)
        _ew(r, "aten::native_layer_norm_backward", [2, 16, h])
        hand_over(2)
    r.add("autograd::engine::evaluate_function: EmbeddingBackward0", 4_000)
    hand_over(1)
    return colls


def ddp_step(
    layers: int = 3,
    hidden: int = 64,
    cap: int = 80_000,
    ranks: int = 2,
    buckets: list[int] | None = None,
    late: tuple[int, ...] = (),
    unlinked: bool = False,
) -> EtSet:
    """The step (see module doc); every rank the same."""
    shapes = param_shapes(layers, hidden)
    ends = buckets or ddp_rule([_numel(s) * 4 for s in shapes], cap)
    act = [2, 16, hidden]
    out = []
    for rank in range(ranks):
        r = _Rank(rank, gpu=False)
        r.add("aten::embedding", 20_000, shapes=[[VOCAB, hidden], [2, 16]], types=["T", "L"])
        for _ in range(layers):
            r.add("aten::layer_norm", 3_000)
            _ew(r, "aten::native_layer_norm", act)
            _gemm(r, 32, hidden, 4 * hidden)
            _ew(r, "aten::gelu", [2, 16, 4 * hidden])
            _gemm(r, 32, 4 * hidden, hidden)
        _gemm(r, 32, hidden, VOCAB)
        numels, lo = [], 0
        for e in ends:
            numels.append(sum(_numel(s) for s in shapes[lo : e + 1]))
            lo = e + 1
        colls = _backward(r, shapes, ends, numels, layers, hidden, rank in late, unlinked)
        lo = 0
        for k, e in enumerate(ends):
            for j in range(lo, e + 1):
                r.add(
                    "aten::as_strided",
                    5_000,
                    shapes=[[numels[k]], [[]], [[]], []],
                    types=["T"],
                    data=(colls[k],) if j == lo else (),
                )
            for j in range(lo, e + 1):
                r.add(
                    "torch.distributed.ddp.reducer::copy_bucket_to_grad",
                    2_000,
                    shapes=[shapes[j]],
                    types=["T"],
                )
            lo = e + 1
        r.add("Optimizer.step#AdamW.step", 10_000)
        for s in shapes:
            _ew(r, "aten::lerp_", s)
        out.append(RankEt(rank, rank_meta(rank, ranks), tuple(r.nodes)))
    return EtSet(tuple(out), "ddp-builder")
