"""The token dispatcher's routing metadata (`moe_meta`), each mechanism on a tiny MoE plan
(8 experts, top 2, hidden 64, 16 tokens a rank, 2 MoE layers) checked by hand: the
per-expert token counts and their EP all-gather, the host's wait for them (once per MoE
layer's forward, none in the backward, none under drop-and-pad routing), the routing
probabilities' all-to-all and its gradient's, DeepEP's layout and wait."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.graph import COLL
from lumos.simulator.network.api import ALL_GATHER, ALL_TO_ALL
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload import ParallelPlan, generate
from lumos.simulator.workload.block import COUNTS_STREAM, EP, EP_STREAM, SYNC_STREAM
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import ModelSpec, model_from_dict
from tests.simulator.workload.tiny_models import SMALL_MOE

SEQ = 16
HOST_COPY_NS = 10_000  # hwconfigs/kernels/h100_sxm.yaml host_copy_ns


def _model() -> ModelSpec:
    return model_from_dict(dict(SMALL_MOE), "small", "small-moe")


def _plan(ep: int = 4, dp: int = 4, **kw: object) -> ParallelPlan:
    kw = {"moe_load_factor": 1.0, **kw}
    return ParallelPlan.build(_model(), mbs=1, dp=dp, gbs=dp, seq=SEQ, ep=ep, **kw)  # type: ignore[arg-type]


def _block(plan: ParallelPlan, forward: bool) -> list[tuple[str, int, int, int, int]]:
    """(name, stream, type, duration, collective bytes) of chunk 0's block, in order."""
    gen = Generator(_model(), plan, KernelModel.for_gpu(load_system("h100").gpu))
    blk = gen.block(0, 0, forward)
    names = gen.names.as_list()
    c = blk.cols
    return [
        (names[n], int(c["stream"][i]), int(c["type"][i]), int(c["dur"][i]), int(c["csize"][i]))
        for i, n in enumerate(blk.name)
    ]


def _named(nodes: list[tuple[str, int, int, int, int]], suffix: str) -> list[int]:
    return [i for i, n in enumerate(nodes) if n[0].endswith(suffix)]


def test_dropless_all_to_all_waits_on_the_host_once_per_moe_layer_forward() -> None:
    """`_maybe_dtoh_and_synchronize`: the counts copied to the host after the preprocess
    and waited for before the dispatch all-to-all — one wait (host_copy_ns long, on the
    host-sync stream) per MoE layer's forward, after the counts' last reduction and before
    the dispatch; no wait in the backward (the host's split sizes are reused)."""
    fwd, bwd = _block(_plan(), True), _block(_plan(), False)
    waits = _named(fwd, ".moe.sync")
    assert [fwd[i][0] for i in waits] == ["layer0.moe.sync", "layer1.moe.sync"]
    assert {fwd[i][1] for i in waits} == {SYNC_STREAM}
    assert {fwd[i][3] for i in waits} == {HOST_COPY_NS}
    for layer in ("layer0", "layer1"):
        at = [n[0] for n in fwd].index
        assert at(f"{layer}.moe.splits") < at(f"{layer}.moe.sync") < at(f"{layer}.moe.dispatch")
    assert not _named(bwd, ".moe.sync")
    (g,) = generate(_model(), _plan(), "h100").graphs
    assert int((g.stream == SYNC_STREAM).sum()) == 2  # 2 MoE layers x 1 micro-batch


def test_dispatch_starts_only_after_the_host_has_its_counts() -> None:
    """Simulated: each dispatch all-to-all starts no earlier than its layer's wait ends,
    and each wait starts no earlier than the counts' last reduction ends (the copy needs
    the GPU there)."""
    step = generate(_model(), _plan(), "h100")
    options = SimOptions(mode=Mode.MODEL, pricer=pricer_for_job("h100", 4))
    (rank, *_) = simulate(step.graphs, options).ranks
    g, t = step.graphs[0], rank.tasks
    names = np.array(g.names)[g.name_idx]
    spans = zip(t.node_id, t.start_ns, t.end_ns, strict=True)
    when = {str(names[n]): (int(s), int(e)) for n, s, e in spans}
    for layer in ("layer0", "layer1"):
        sync = when[f"{layer}.moe.sync"]
        assert sync[0] >= when[f"{layer}.moe.splits"][1]
        assert sync[1] - sync[0] == HOST_COPY_NS
        assert when[f"{layer}.moe.dispatch"][0] >= sync[1]


def test_token_counts_are_all_gathered_over_the_ep_group() -> None:
    """`preprocess`: `routing_map.sum(dim=0)` (read the 16 x 8 boolean map, write 8 int64
    counts), their all-gather over the EP group (8 x 8 bytes a rank, on its own stream),
    and the split sizes' reductions (5 kernels)."""
    fwd = _block(_plan(), True)
    gathers = [n for n in fwd if n[0].endswith("counts_all_gather")]
    assert len(gathers) == 2
    assert {(n[1], n[2], n[4]) for n in gathers} == {(COUNTS_STREAM, COLL, 8 * 8)}
    (g,) = generate(_model(), _plan(), "h100").graphs
    mask = (g.stream == COUNTS_STREAM) & (g.type == COLL)
    assert set(g.comm_type[mask].tolist()) == {ALL_GATHER} and set(g.group[mask].tolist()) == {EP}
    km = KernelModel.for_gpu(load_system("h100").gpu)
    (counts,) = [n for n in fwd if n[0] == "layer0.moe.tokens_per_expert"]
    assert counts[3] == round(km.memory_ns(SEQ * 8 + 8 * 8))
    (splits,) = [n for n in fwd if n[0] == "layer0.moe.splits"]
    assert splits[3] == round(5 * km.memory_ns(4 * 8 * 8 * 2))


def test_routing_probabilities_have_their_own_all_to_all() -> None:
    """`token_dispatch`: the probabilities (16 tokens x top 2, FP32) go over the EP group
    after the tokens; the backward sends their gradient before the tokens' gradient."""
    fwd, bwd = _block(_plan(), True), _block(_plan(), False)
    ep_fwd = [(n[0], n[4]) for n in fwd if n[1] == EP_STREAM and n[0].startswith("layer0")]
    assert ep_fwd == [
        ("layer0.moe.dispatch", SEQ * 2 * 64 * 2),
        ("layer0.moe.dispatch_probs", SEQ * 2 * 4),
        ("layer0.moe.combine", SEQ * 2 * 64 * 2),
    ]
    ep_bwd = [n[0] for n in bwd if n[1] == EP_STREAM and n[0].startswith("layer0")]
    assert ep_bwd == [
        "layer0.moe.combine_bwd",
        "layer0.moe.dispatch_probs_bwd",
        "layer0.moe.dispatch_bwd",
    ]
    at = [n[0] for n in fwd].index
    assert at("layer0.moe.dispatch_probs") < at("layer0.moe.sort")  # sort needs both
    (g,) = generate(_model(), _plan(), "h100").graphs
    probs = (g.type == COLL) & (g.comm_type == ALL_TO_ALL) & (g.comm_size == SEQ * 2 * 4)
    assert int(probs.sum()) == 4  # 2 layers x (forward, backward)


def test_drop_and_pad_routing_has_no_counts_and_no_host_wait() -> None:
    """`moe_token_drop` (capacity factor 1, padded): the counts are host constants — no
    reduction, no all-gather, no wait — and every expert gets its capacity (load factor 1
    even without one stated); the probabilities still go over the EP group."""
    fwd = _block(_plan(moe_token_drop=True, moe_load_factor=0.0), True)
    names = [n[0] for n in fwd]
    assert not any(
        n.endswith(("tokens_per_expert", "counts_all_gather", "splits", "moe.sync")) for n in names
    )
    assert "layer0.moe.dispatch_probs" in names
    (sort,) = [n for n in fwd if n[0] == "layer0.moe.sort"]
    km = KernelModel.for_gpu(load_system("h100").gpu)
    assert sort[3] == round(km.memory_ns(2 * SEQ * 2 * 64 * 2))  # 32 rows: the mean
    with pytest.raises(Exception, match="moe_token_drop"):
        _plan(moe_token_drop=True, dispatcher="flex")


def test_deepep_dispatch_waits_for_its_counts_without_gathers() -> None:
    """The flex dispatcher: DeepEP's dispatch layout (one small kernel over the [16, 2]
    expert indices), the host's wait for the received-token count before the dispatch,
    no counts all-gather and no probabilities all-to-all (DeepEP sends them with the
    tokens)."""
    fwd = _block(_plan(dispatcher="flex"), True)
    names = [n[0] for n in fwd]
    at = names.index
    assert at("layer0.moe.topk") < at("layer0.moe.dispatch_layout") < at("layer0.moe.sync")
    assert at("layer0.moe.sync") < at("layer0.moe.dispatch")
    assert not any(n.endswith(("counts_all_gather", "dispatch_probs")) for n in names)


def test_without_expert_parallelism_the_experts_wait_for_the_counts() -> None:
    """EP 1: no all-to-all, but dropless routing still copies the counts to the host
    (`cuda_sync_point` "before_finish": the grouped GEMM's splits); the first expert op
    runs after the wait."""
    gen = Generator(_model(), _plan(ep=1), KernelModel.for_gpu(load_system("h100").gpu))
    blk = gen.block(0, 0, True)
    names = gen.names.as_list()
    seq = [names[n] for n in blk.name]
    sync = seq.index("layer0.moe.sync")
    sort_or_fc1 = (
        seq.index("layer0.moe.sort") if "layer0.moe.sort" in seq else seq.index("layer0.moe.fc1")
    )
    deps = set(zip(blk.dep_dst.tolist(), blk.dep_src.tolist(), strict=True))
    assert (sort_or_fc1, sync) in deps
    assert "layer0.moe.counts_all_gather" not in seq
