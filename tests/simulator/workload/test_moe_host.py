"""Mixture-of-experts mechanisms of the second round, each on a small hand-checked case:
FP8 grouped-GEMM inputs kept as Transformer Engine keeps them (one byte per element),
and the all-to-all dispatcher's device-to-host synchronisation with the host launches
that follow it."""

from __future__ import annotations

import pytest

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import ModelSpec, model_from_dict
from lumos.simulator.workload.step import plan_memory
from tests.conftest import script_module
from tests.simulator.workload.tiny_models import SMALL_MOE

#: SMALL_MOE in lumos' own key names
SMALL = {
    **{k: v for k, v in SMALL_MOE.items() if not k.startswith(("num_experts", "moe_"))},
    "experts": 8,
    "top_k": 2,
    "moe_ffn": 32,
}
SEQ = 16


def _model() -> ModelSpec:
    return model_from_dict(dict(SMALL), "small", "small-moe")


def _plan(ep: int = 4, dp: int = 4, **kw: object) -> ParallelPlan:
    """A plan at the mean expert load (`moe_load_factor` 1: the hand counts' balance)."""
    kw = {"moe_load_factor": 1.0, **kw}
    return ParallelPlan.build(_model(), mbs=1, dp=dp, gbs=dp, seq=SEQ, ep=ep, **kw)  # type: ignore[arg-type]


def _gen(plan: ParallelPlan) -> Generator:
    return Generator(_model(), plan, KernelModel.for_gpu(load_system("h100").gpu))


def test_fp8_expert_gemm_inputs_are_kept_in_one_byte() -> None:
    """TE's GroupedLinear keeps its FP8-quantised input (column-wise copy only) for the
    weight gradient: the permuted tokens (rows x hidden) and the activation output (rows x
    moe_ffn) cost 1 byte per element under FP8 instead of 2; FC1's output (the
    activation's input, rows x 2 moe_ffn) stays BF16; dense layers keep their TE linears'
    inputs in one byte too (two norm outputs and FC2's input, less the projection's FP8 copy
    of the attention output: test_memory_published)."""
    bf16 = plan_memory(_gen(_plan(precision="bf16")))
    fp8 = plan_memory(_gen(_plan(precision="fp8")))
    rows = SEQ * 2  # tokens x top_k on one rank (balanced routing)
    per_layer = rows * (64 + 32) * (2 - 1)
    assert (bf16.activations_gb - fp8.activations_gb) * 1e9 == pytest.approx(2 * per_layer)
    dense = {k: v for k, v in SMALL.items() if k not in ("experts", "top_k", "moe_ffn")}
    m = model_from_dict(dense, "dense")
    km = KernelModel.for_gpu(load_system("h100").gpu)
    acts = [
        plan_memory(Generator(m, ParallelPlan.build(m, dp=4, gbs=4, seq=SEQ, precision=p), km))
        for p in ("bf16", "fp8")  # type: ignore[arg-type]
    ]
    per_dense_layer = SEQ * (2 * 64 + 128 - 64)
    assert (acts[0].activations_gb - acts[1].activations_gb) * 1e9 == pytest.approx(
        2 * per_dense_layer
    )


def _nodes(gen: Generator, forward: bool) -> dict[str, tuple[int, int]]:
    blk = gen.block(0, 0, forward)
    names = gen.names.as_list()
    return {names[n]: (int(blk.cols["nbytes"][i]), i) for i, n in enumerate(blk.name)}


def test_received_rows_sorted_by_local_expert_only_with_several() -> None:
    """Megatron-Core's second permutation (`sort_chunks_by_idxs`): with 2 local experts
    (8 experts over EP 4) the received rows are sorted before FC1 and unsorted after FC2,
    and both again on the gradients — each one read and one write of rows x hidden BF16;
    with one local expert (EP 8) there is nothing to sort."""
    rows = SEQ * 2
    fwd, bwd = _nodes(_gen(_plan(ep=4)), True), _nodes(_gen(_plan(ep=4)), False)
    for nodes, names in ((fwd, ("sort", "unsort")), (bwd, ("unsort_bwd", "sort_bwd"))):
        for n in names:
            assert nodes[f"layer0.moe.{n}"][0] == 2 * rows * 64 * 2
    assert fwd["layer0.moe.sort"][1] < fwd["layer0.moe.fc1"][1] < fwd["layer0.moe.unsort"][1]
    one = _nodes(_gen(_plan(ep=8, dp=8)), True)
    assert not any(n.endswith(("sort", "unsort")) for n in one)


def test_distinct_ranks_by_hand() -> None:
    """8 experts on 4 ranks (2 each), top 2: a token misses a given rank when both its
    experts lie among the other 6: C(6,2)/C(8,2) = 15/28; ranks reached 4 x 13/28."""
    from lumos.simulator.workload.moe import distinct_ranks

    assert distinct_ranks(8, 4, 2) == pytest.approx(4 * 13 / 28)
    assert distinct_ranks(8, 8, 1) == pytest.approx(1.0)  # one expert: one rank
    assert distinct_ranks(128, 8, 8) < 8 * (1 - (7 / 8) ** 8) + 0.1


def test_flex_dispatcher_sends_each_token_once_per_rank_and_permutes_on_arrival() -> None:
    """Megatron-Core's flex dispatcher (DeepEP): no permute before the dispatch, all-to-alls
    of tokens x distinct ranks rows, the arrived tokens permuted into expert rows and back
    (one read of each side), no unpermute after the combine (DeepEP's combine sums each
    token's copies in its kernel), and the same on the gradients."""
    from lumos.simulator.graph import COLL
    from lumos.simulator.workload import generate
    from lumos.simulator.workload.moe import distinct_ranks

    sent = round(SEQ * distinct_ranks(8, 4, 2))
    fwd = _nodes(_gen(_plan(dispatcher="flex")), True)
    bwd = _nodes(_gen(_plan(dispatcher="flex")), False)
    rows = SEQ * 2
    assert not any(n.endswith(("moe.permute", "moe.unpermute", "sort")) for n in fwd)
    assert not any(n.endswith(("permute_bwd", "unpermute_bwd", "sort_bwd")) for n in bwd)
    for n in ("permute_local", "unpermute_local"):
        assert fwd[f"layer0.moe.{n}"][0] == (sent + rows) * 64 * 2
    for n in ("permute_local_bwd", "unpermute_local_bwd"):
        assert bwd[f"layer0.moe.{n}"][0] == (sent + rows) * 64 * 2
    (g,) = generate(_model(), _plan(dispatcher="flex"), "h100").graphs
    a2a = g.comm_size[(g.type == COLL) & (g.stream == 28)]
    assert set(a2a.tolist()) == {sent * 64 * 2} and len(a2a) == 8
    with pytest.raises(Exception, match="flex"):
        _plan(ep=1, dispatcher="flex")


def test_fp8_expert_rows_padded_and_unpadded_around_the_grouped_gemms() -> None:
    """Megatron-Core's TEGroupedMLP under FP8 (dropless routing, `moe_router_padding_for_fp8`
    off): the rows are copied into a 16-aligned buffer before FC1 and out after FC2, and
    the reverse on the gradients — one read and one write of rows x hidden BF16 each;
    nothing of the kind in BF16."""
    rows = SEQ * 2
    fwd = _nodes(_gen(_plan(precision="fp8")), True)
    bwd = _nodes(_gen(_plan(precision="fp8")), False)
    assert fwd["layer0.moe.fp8_pad"][0] == fwd["layer0.moe.fp8_unpad"][0] == 2 * rows * 64 * 2
    assert fwd["layer0.moe.fp8_pad"][1] < fwd["layer0.moe.fc1"][1] < fwd["layer0.moe.fp8_unpad"][1]
    assert {"layer0.moe.fp8_unpad_bwd", "layer0.moe.fp8_pad_bwd"} <= set(bwd)
    assert not any("fp8_pad" in n or "fp8_unpad" in n for n in _nodes(_gen(_plan()), True))


def _durations(gen: Generator, forward: bool) -> dict[str, int]:
    blk = gen.block(0, 0, forward)
    names = gen.names.as_list()
    return {names[n]: int(blk.cols["dur"][i]) for i, n in enumerate(blk.name)}


def test_te_grouped_gemm_is_never_faster_than_its_per_expert_host_loop() -> None:
    """Transformer Engine's GroupedLinear (Megatron-Core's TEGroupedMLP, plan
    `grouped_gemm="te"`) issues one cuBLASLt GEMM per local expert from a host loop: a
    grouped GEMM of tiny experts takes local experts x `grouped_gemm_expert_ns` (the kernel
    file's 33 us), all six of them (FC1, FC2 forward; their data and weight gradients); one
    grouped kernel (`grouped_gemm="fused"`: CUTLASS gmm, torch._grouped_mm) is priced by its
    tiles and waves alone. With 2 local experts (8 over EP 4) of 32 rows x 64 x 32 the GPU
    work is a few microseconds, so the host loop sets the time."""
    per = KernelModel.for_gpu(load_system("h100").gpu).physics.grouped_gemm_expert_ns
    assert per == 33000
    bwd = ("fc1.dgrad", "fc1.wgrad", "fc2.dgrad", "fc2.wgrad")
    for forward, names in ((True, ("fc1", "fc2")), (False, bwd)):
        te = _durations(_gen(_plan()), forward)
        fused = _durations(_gen(_plan(grouped_gemm="fused")), forward)
        gemm = {f"layer{i}.moe.{n}" for i in (0, 1) for n in names}
        for k in gemm:
            assert te[k] == 2 * per
            assert fused[k] < per / 4
        assert all(te[k] == fused[k] for k in te if k not in gemm and "host_issue" not in k)
    with pytest.raises(Exception, match="grouped_gemm"):
        _plan(grouped_gemm="cutlass")


def test_sequential_mlp_zero_fills_and_copies_its_experts_rows() -> None:
    """Megatron-Core 0.9's SequentialMLP (`moe_grouped_gemm` false, plan
    `grouped_gemm="sequential"`) writes its experts' outputs into a zero-filled buffer by
    slice assignment and slices each expert's input: with n = 2 local experts (8 over EP 4)
    and B = 32 received rows x 64 x 2 bytes, forward 3B (zero fill, copies), backward
    (2n + 2 + 3(n-1)/n)B for the slice assignments' gradient (autograd's CopySlices) and
    (4n - 1)B for the input slices'; with one local expert (EP 8) the slices are the whole
    tensor: no CopySlices, 3B. Each expert's GEMM its own kernel; no FP8 row padding
    (capacity-padded rows). The TE grouped path has none of it."""
    b = 32 * 64 * 2
    seq = _nodes(_gen(_plan(grouped_gemm="sequential")), True)
    assert seq["layer0.moe.experts_gather"][0] == 3 * b
    back = _nodes(_gen(_plan(grouped_gemm="sequential")), False)
    assert back["layer0.moe.experts_gather_bwd"][0] == 7.5 * b
    assert back["layer0.moe.experts_slice_bwd"][0] == 7 * b
    assert back["layer0.moe.experts_gather_bwd"][1] < back["layer0.moe.fc2.dgrad"][1]
    assert back["layer0.moe.experts_slice_bwd"][1] > back["layer0.moe.fc1.wgrad"][1]
    one_expert = _nodes(_gen(_plan(ep=8, dp=8, grouped_gemm="sequential")), False)
    assert "layer0.moe.experts_gather_bwd" not in one_expert
    assert one_expert["layer0.moe.experts_slice_bwd"][0] == 3 * b
    te = {**_nodes(_gen(_plan()), True), **_nodes(_gen(_plan()), False)}
    assert not any("experts_" in k for k in te)
    km = KernelModel.for_gpu(load_system("h100").gpu)
    one = km.gemm_ns(32 // 2, 2 * 32, 64, "bf16", out_bytes=2)
    fc1 = _durations(_gen(_plan(grouped_gemm="sequential")), True)["layer0.moe.fc1"]
    assert fc1 == pytest.approx(2 * one, abs=1)
    fp8 = _nodes(_gen(_plan(grouped_gemm="sequential", precision="fp8")), True)
    assert "layer0.moe.fp8_pad" not in fp8
    assert "layer0.moe.fp8_pad" in _nodes(_gen(_plan(precision="fp8")), True)


def test_sequential_mlp_passes_are_what_pytorch_autograd_runs() -> None:
    """`moe.sequential_passes` against PyTorch's own profiler on the SequentialMLP pattern
    (scripts/sequential_mlp_bytes.py): forward and backward passes for 1, 2, 4, 8 experts."""
    pytest.importorskip("torch")
    from lumos.simulator.workload.moe import sequential_passes

    counter = script_module("sequential_mlp_bytes")
    for n in (1, 2, 4, 8):
        f, g, s = sequential_passes(n)
        assert counter.count(n) == pytest.approx((f, g + s))
