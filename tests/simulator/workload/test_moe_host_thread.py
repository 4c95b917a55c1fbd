"""The host thread of a dropless Megatron-Core MoE layer (`moe_host`): what it issues per
layer (counted by hand from the ledger and the kernel file), where it waits, and what it
costs a generated Qwen3-30B-A3B step."""

from __future__ import annotations

import dataclasses

import numpy as np

from lumos.hwconfigs.kernel_tables import KernelPhysics
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload import ParallelPlan, generate
from lumos.simulator.workload.block import MOE_HOST, SYNC_STREAM
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from lumos.simulator.workload.step import estimate
from tests.simulator.workload.tiny_models import SMALL_MOE

US = 1000
#: hwconfigs/kernels/h100_sxm.yaml: an eager op, a TE module forward / backward, an expert GEMM
OP, TE_FWD, TE_BWD, GEMM = 25 * US, 115 * US, 250 * US, 33 * US
#: the ledger (moe_host.HostLedger): 4 TE modules + 47 ops before the copy, 13 ops + FC1 and
#: FC2's per-expert calls after the wait; 4 TE modules + 25 autograd nodes + 4 x experts
#: backward
PRE = 4 * TE_FWD + 47 * OP


def _post(local: int) -> int:
    return 13 * OP + 2 * local * GEMM


def _bwd(local: int) -> int:
    return 4 * TE_BWD + 25 * OP + 4 * local * GEMM


def _tiny() -> ModelSpec:
    return model_from_dict(dict(SMALL_MOE), "small", "small-moe")


def _tiny_plan(**kw: object) -> ParallelPlan:
    kw = {"moe_load_factor": 1.0, "ep": 4, "dp": 4, "gbs": 4, **kw}
    return ParallelPlan.build(_tiny(), mbs=1, seq=16, **kw)  # type: ignore[arg-type]


def _qwen3_30b_plan(**kw: object) -> ParallelPlan:
    """MB2602-Qwen3-30B-A3B's layout without its pipeline: EP 8, 16 local experts, FP8,
    one sequence a micro-batch, two micro-batches a rank."""
    kw = {"dp": 8, "ep": 8, "mbs": 1, "gbs": 16, "seq": 4096, "precision": "fp8", **kw}
    return ParallelPlan.build(load_model("qwen3-30b-a3b"), **kw)  # type: ignore[arg-type]


def _host_nodes(gen: Generator, forward: bool) -> list[tuple[str, int]]:
    blk = gen.block(0, 0, forward)
    names = gen.names.as_list()
    on = np.isin(blk.cols["stream"], (SYNC_STREAM, MOE_HOST))
    return [(names[n], int(d)) for n, d, s in zip(blk.name, blk.cols["dur"], on, strict=True) if s]


def test_qwen3_30b_step_has_one_host_wait_and_its_issue_per_moe_layer() -> None:
    """Every MoE layer's forward: the host issues up to the counts' copy (PRE = 4 TE modules
    at 115 us + 47 eager ops at 25 us = 1,635 us), waits once (`moe.sync`, 10 us) and issues
    the rest (13 ops + 2 x 16 per-expert GEMM calls at 33 us = 1,381 us); its backward one
    issue (4 TE modules at 250 us + 25 autograd nodes + 4 x 16 calls = 3,737 us) and no
    wait. In that order on the host thread, 48 layers."""
    km = KernelModel.for_gpu(load_system("h100").gpu)
    gen = Generator(load_model("qwen3-30b-a3b"), _qwen3_30b_plan(), km)
    fwd, bwd = _host_nodes(gen, True), _host_nodes(gen, False)
    assert len(fwd) == 3 * 48 and len(bwd) == 48
    assert fwd[:3] == [
        ("layer0.moe.host_issue", PRE),
        ("layer0.moe.sync", 10 * US),
        ("layer0.moe.host_issue_post", _post(16)),
    ]
    assert (PRE, _post(16), _bwd(16)) == (1_635 * US, 1_381 * US, 3_737 * US)
    assert [n for n, _ in fwd].count("layer47.moe.sync") == 1
    assert set(bwd) == {(f"layer{i}.moe.host_issue_bwd", _bwd(16)) for i in range(48)}


def test_the_wait_follows_the_issue_and_the_layer_ends_after_the_host() -> None:
    """Simulated, a tiny MoE layer (GPU work of microseconds): each wait starts no earlier
    than the host has issued the copy, the rest is issued after the wait, and the layer's
    residual add ends after that issue: the GPU runs at the host's pace."""
    step = generate(_tiny(), _tiny_plan(), "h100")
    options = SimOptions(mode=Mode.MODEL, pricer=pricer_for_job("h100", 4))
    (rank, *_) = simulate(step.graphs, options).ranks
    g, t = step.graphs[0], rank.tasks
    names = np.array(g.names)[g.name_idx]
    at = {
        str(names[i]): (int(s), int(e))
        for i, s, e in zip(t.node_id, t.start_ns, t.end_ns, strict=True)
    }
    # the second layer's issue follows the first's wait: named so (what the breakdown counts)
    for layer, issue in (("layer0", "host_issue"), ("layer1", "host_issue_chained")):
        issued, sync = at[f"{layer}.moe.{issue}"], at[f"{layer}.moe.sync"]
        post, resid = at[f"{layer}.moe.host_issue_post"], at[f"{layer}.residual2"]
        assert issued[1] <= sync[0] and sync[1] <= post[0] and post[1] <= resid[1]
        assert post[1] - post[0] == _post(2)
    assert at["layer0.moe.host_issue_post"][1] <= at["layer1.moe.host_issue_chained"][0]


def test_qwen3_30b_exposed_host_time_grows_as_the_micro_batch_shrinks_a_gpu() -> None:
    """The host thread's cost on Qwen3-30B-A3B (EP 8, ETP 1, FP8, one sequence a micro-batch,
    two a rank, 48 layers: 96 layer passes): the step with the shipped host times minus the same
    step with them at 0. From one wait to the next the host needs 1,635 + 10 + 1,381 =
    3,026 us. At TP 1 (4,096 tokens a GPU) the GPU needs more there: under 5 ms shows
    in the step. At TP 4 (1,024 tokens a GPU) it needs about 1 ms: ~2 ms a pass shows,
    0.15-0.25 s of the ~0.9 s step (measured 0.195 s), never more than 3,026 us a pass."""
    free = dataclasses.replace(
        base_physics(), host_torch_op_ns=0.0, host_te_module_ns=0.0, host_te_module_bwd_ns=0.0
    )
    shown, reported = [], []
    for kw in ({"precision": "fp8"}, {"tp": 4, "etp": 1}):
        plan = _qwen3_30b_plan(**kw)
        gpus = plan.tp * plan.dp
        with_host = estimate(load_model("qwen3-30b-a3b"), plan, "h100", gpus=gpus)
        without = estimate(load_model("qwen3-30b-a3b"), plan, "h100", gpus=gpus, physics=free)
        shown.append(with_host.iteration_time_s - without.iteration_time_s)
        assert without.breakdown.exposed_host_s == 0.0
        reported.append(with_host.breakdown.exposed_host_s)  # the breakdown's own class
    tp1, tp4 = shown
    # the breakdown counts the host after a wait (the rest can show as bubble): at most all
    assert 0.0 <= reported[0] <= tp1 + 1e-3 and 0.5 * tp4 <= reported[1] <= tp4 + 1e-3
    assert 0.0 <= tp1 < 0.005
    assert 0.15 < tp4 < 0.25 and tp4 <= 96 * (PRE + 10 * US + _post(16)) / 1e9


def test_without_te_grouped_gemm_there_is_no_host_thread() -> None:
    """The ledger is Megatron-Core's (TE's GroupedLinear): one grouped kernel
    (`grouped_gemm="fused"`, AutoModel, torchtitan) carries no host issue nodes, only the
    dropless wait."""
    gen = Generator(
        _tiny(), _tiny_plan(grouped_gemm="fused"), KernelModel.for_gpu(load_system("h100").gpu)
    )
    assert [n for n, _ in _host_nodes(gen, True)] == ["layer0.moe.sync", "layer1.moe.sync"]
    assert _host_nodes(gen, False) == []


def base_physics() -> KernelPhysics:
    return KernelModel.for_gpu(load_system("h100").gpu).physics
