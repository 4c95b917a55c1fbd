"""DeepSpeed's 2021 ZeRO-3 (`fsdp_unit="tensor"`): per-tensor, blocking fetches, per-tensor
gradient reduce-scatters, per-peer host work, re-fetches by reuse distance — each checked
on the generated graph, and its cost growing with the DP group where the flat FSDP's
does not."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.hwconfigs.load import load_gpu
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.graph import COLL
from lumos.simulator.network.api import ALL_GATHER, REDUCE_SCATTER
from lumos.simulator.network.collectives import Kind
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload import ParallelPlan, Recompute, estimate, generate
from lumos.simulator.workload import zero3_tensor as z3
from lumos.simulator.workload.block import COMPUTE, DP, HOST
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.spec import load_model

PLAN = ParallelPlan(dp=16, mbs=1, gbs=16, seq=2048, zero=3, fsdp_unit="tensor")
LAYERS = 24  # gpt3-1.3b


def _ctx(model: str, plan: ParallelPlan) -> Ctx:
    return Ctx.make(load_model(model), plan, KernelModel.for_gpu(load_gpu("a100_sxm_80gb")))


def _names(g: object, mask: np.ndarray) -> list[str]:
    return [g.name(int(i)) for i in np.flatnonzero(mask)]  # type: ignore[attr-defined]


def test_each_weight_tensor_is_fetched_alone_and_norms_biases_persist() -> None:
    g = generate("gpt3-1.3b", PLAN, "a100").graphs[0]
    dp_coll = (g.type == COLL) & (g.group == DP)
    gathers = _names(g, dp_coll & (g.comm_type == ALL_GATHER))
    scatters = _names(g, dp_coll & (g.comm_type == REDUCE_SCATTER))
    # 4 weight matrices a layer, forward and backward, + the embedding (lookup, output
    # layer forward and backward): biases and norms (< 1e5 elements) are never gathered
    assert len(gathers) == 2 * 4 * LAYERS + 3
    assert not [n for n in gathers if "bias" in n or "norm" in n]
    assert sum(n.startswith("layer0.") for n in gathers) == 8
    # every tensor's gradient alone: 4 weights + 4 biases + 4 norm tensors, + embedding
    assert len(scatters) == 12 * LAYERS + 1
    # one host pass of views per collective, sized by the group: n x host_view_ns
    views = (g.stream == HOST) & np.char.endswith(np.array(g.names)[g.name_idx], "views")
    assert int(views.sum()) == len(gathers) + len(scatters)
    assert set(g.dur_ns[views].tolist()) == {16 * 4000}


def test_fetch_is_blocking_nothing_overlaps_compute() -> None:
    step = generate("gpt3-1.3b", PLAN, "a100")
    result = simulate(step.graphs, SimOptions(mode=Mode.MODEL, pricer=pricer_for_job("a100", 16)))
    g, r = step.graphs[0], result.ranks[0]
    t = r.tasks
    nodes = t.node_id
    comp = np.isin(nodes, np.flatnonzero(g.stream == COMPUTE))
    gath = np.isin(nodes, np.flatnonzero((g.type == COLL) & (g.comm_type == ALL_GATHER)))
    busy = sorted(zip(t.start_ns[comp].tolist(), t.end_ns[comp].tolist(), strict=True))
    for s, e in zip(t.start_ns[gath].tolist(), t.end_ns[gath].tolist(), strict=True):
        assert not any(bs < e and s < be for bs, be in busy), (s, e)


def test_refetch_for_backward_follows_the_reuse_distance() -> None:
    """After the recomputed forward a tensor is fetched again when >= 1e9 elements of
    other tensors are used before its backward: GPT-3 175B's QKV, projection and FC1
    (FC2 is used right away); none of a 1.3B model's (its layer has 25M elements)."""
    full = dataclasses.replace(PLAN, recompute=Recompute.FULL)
    refetch = z3.regathered_for_backward(_ctx("gpt3-175b", full))
    assert [t.name for t in refetch] == ["qkv.weight", "proj.weight", "fc1.weight"]
    assert z3.regathered_for_backward(_ctx("gpt3-1.3b", full)) == []
    big = [t for t in z3.layer_tensors(_ctx("gpt3-175b", full)) if t.gathered]
    assert sum(t.elements for t in z3.layer_tensors(_ctx("gpt3-175b", full))) == (
        load_model("gpt3-175b").layer_params()
    )
    assert len(big) == 4


def test_gpt530b_layer_refetches_like_gpt3_175b() -> None:
    """Narayanan et al.'s GPT 530B (h 20480, ffn 81920) under full recompute: 4 gathers for
    the forward, 4 for the recomputed forward and 3 before the backward (FC2, used first in
    the backward, stays within DeepSpeed's 1e9 reuse distance), 11 a layer as for GPT-3
    175B, each of 2-byte elements (the FP16 model weights DeepSpeed partitions)."""
    full = dataclasses.replace(PLAN, recompute=Recompute.FULL)
    gpt530b = dataclasses.replace(
        load_model("gpt3-175b"), layers=105, hidden=20480, heads=128, kv_heads=128, ffn=81920
    )
    ctx = Ctx.make(gpt530b, full, KernelModel.for_gpu(load_gpu("a100_sxm_80gb")))
    big = [t for t in z3.layer_tensors(ctx) if t.gathered]
    refetch = z3.regathered_for_backward(ctx)
    assert [t.name for t in refetch] == ["qkv.weight", "proj.weight", "fc1.weight"]
    assert 2 * len(big) + len(refetch) == 11
    assert [t.elements for t in big] == [3 * 20480**2, 20480**2, 4 * 20480**2, 4 * 20480**2]
    g = generate("gpt3-1.3b", full, "a100").graphs[0]
    gathers = (g.type == COLL) & (g.group == DP) & (g.comm_type == ALL_GATHER)
    per_layer = [n for n in _names(g, gathers) if n.startswith("layer0.")]
    assert len(per_layer) == 4 + 4  # 1.3B: nothing past the reuse distance
    qkv = [i for i in np.flatnonzero(gathers) if g.name(int(i)).startswith("layer0.qkv")]
    assert {int(g.comm_size[i]) for i in qkv} == {3 * 2048**2 * 2 // 16}  # per rank, 2 B


def test_ring_at_2240_ranks_pays_every_step_latency() -> None:
    """A tiny all-gather over the 2,240 GPUs of NAR-T2-12 costs its n - 1 ring steps, each
    at least the NIC latency (3 us): latency, not bandwidth, at this size."""
    pricer = pricer_for_job("a100", 2240)
    ranks = list(range(2240))
    algo, ns = pricer.price(Kind.ALL_GATHER, 2, ranks)
    assert algo == "ring"
    assert ns >= 2239 * 3000
    assert pricer.collective_ns(ALL_GATHER, 2, ranks) >= 2239 * 3000


def test_per_peer_cost_grows_with_the_group_flat_fsdp_does_not() -> None:
    """Same work per GPU on 64 and 512 GPUs: DeepSpeed's per-peer views and copies and
    the ring's (n - 1) latencies on every small tensor grow with n; the flat per-layer
    FSDP pays the ring latency once per layer (NCCL's all-gather is a ring: it grows too,
    far less)."""

    def step(unit: str, dp: int) -> float:
        plan = dataclasses.replace(PLAN, dp=dp, gbs=dp, fsdp_unit=unit)
        return estimate("gpt3-1.3b", plan, "a100").iteration_time_s

    tensor_growth = step("tensor", 512) / step("tensor", 64)
    assert tensor_growth > 2
    assert step("layer", 512) / step("layer", 64) < tensor_growth / 2
    assert step("tensor", 64) > step("layer", 64)


def test_cli_fsdp_unit_option_is_the_plan_field() -> None:
    args = ["estimate", "--model", "gpt3-1.3b", "--dp", "16", "--gbs", "16", "--zero", "3"]
    out = CliRunner().invoke(cli, [*args, "--fsdp-unit", "tensor", "--hw", "a100", "--json"])
    assert out.exit_code == 0, out.output
    result = json.loads(out.output)["result"]
    assert result["plan"]["fsdp_unit"] == "tensor"
    assert "DeepSpeed 2021" in result["assumptions"][-1]
    direct = estimate("gpt3-1.3b", PLAN, "a100")
    assert result["iteration_time_s"] == pytest.approx(
        direct.iteration_time_s, abs=1e-6
    )  # JSON: 6 decimals
    bad = CliRunner().invoke(cli, [*args, "--fsdp-unit", "param"])
    assert bad.exit_code != 0 and "'param' is not one of" in bad.output
