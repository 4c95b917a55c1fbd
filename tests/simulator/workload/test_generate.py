"""Generated GPT-3 175B TP8/PP8/DP4 steps: exact ops and collectives per rank, valid
(interleaved) 1F1B orders, collectives and send/recv matching across all 256 ranks."""

from __future__ import annotations

from collections import Counter
from functools import cache

import numpy as np
import pytest

from lumos.simulator.graph import COLL, COMP, RECV, SEND
from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, REDUCE_SCATTER, FixedBandwidthPricer
from lumos.simulator.rendezvous import match_collectives, match_p2p
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload import ParallelPlan, generate
from lumos.simulator.workload.block import DP, EMB, TP
from lumos.simulator.workload.generate import GeneratedStep
from lumos.simulator.workload.ranks import expand
from lumos.simulator.workload.schedule import check_order

M = 8  # micro-batches: gbs 32 / (mbs 1 x dp 4)
LAYERS_PER_STAGE = 12
FWD_KERNELS, BWD_KERNELS = 10, 13  # GPT layer (learned positions: no RoPE)
TP_FWD, TP_BWD = 4, 6  # 2 AG + 2 RS forward; 2 AG (dY) + 2 AG (input) + 2 RS (dgrad) backward


def _plan(vp: int = 1) -> ParallelPlan:
    return ParallelPlan(tp=8, pp=8, dp=4, vp=vp, mbs=1, gbs=32, seq=2048, zero=1)


@cache
def _step(vp: int) -> GeneratedStep:
    return generate("gpt3-175b", _plan(vp), "h100")


def _count(g, kind: int, group: int | None = None, ctype: int | None = None) -> int:  # type: ignore[no-untyped-def]
    mask = g.type == kind
    if group is not None:
        mask &= g.group == group
    if ctype is not None:
        mask &= g.comm_type == ctype
    return int(mask.sum())


def test_only_distinct_ranks_are_generated() -> None:
    step = _step(1)
    # tp 0, dp 0 of each stage; a stage's tp x dp = 32 ranks are contiguous (layout)
    assert [g.rank for g in step.graphs] == [s * 32 for s in range(8)]
    assert len(step.rep) == 256 and step.rep[255] == 7 * 32 and step.rep[32 + 8 * 2 + 3] == 32


@pytest.mark.parametrize("stage", range(8))
def test_exact_ops_and_collectives_per_rank(stage: int) -> None:
    g = _step(1).graphs[stage]
    first, last = stage == 0, stage == 7
    compute = M * LAYERS_PER_STAGE * (FWD_KERNELS + BWD_KERNELS) + 1  # + optimizer step
    compute += M * 2 * first + M * 8 * last  # embedding fwd/bwd; final norm, output, CE, loss
    assert _count(g, COMP) == compute
    tp_ag = M * LAYERS_PER_STAGE * 6 + M * first + 2 * M * last
    tp_rs = M * LAYERS_PER_STAGE * 4 + M * first + M * last
    assert _count(g, COLL, TP, ALL_GATHER) == tp_ag
    assert _count(g, COLL, TP, REDUCE_SCATTER) == tp_rs
    assert _count(g, COLL, TP, ALL_REDUCE) == 3 * M * last  # vocab-parallel cross-entropy
    # ZeRO-1: one bucket per layer (each > 40M parameters): reduce-scatter + all-gather
    assert _count(g, COLL, DP, REDUCE_SCATTER) == LAYERS_PER_STAGE
    assert _count(g, COLL, DP, ALL_GATHER) == LAYERS_PER_STAGE
    assert _count(g, COLL, EMB, ALL_REDUCE) == (1 if first or last else 0)  # tied embedding
    assert _count(g, SEND) == M * (0 if last else 1) + M * (0 if first else 1)
    assert _count(g, RECV) == _count(g, SEND)
    assert set(np.unique(g.comm_size[g.type == SEND]).tolist()) == {2048 * 12288 * 2 // 8}


def test_interleaved_pipeline_transfers() -> None:
    step = _step(3)
    sends = [Counter(step.graphs[s].comm_tag[step.graphs[s].type == SEND] % 2) for s in (0, 7)]
    assert sends[0] == {0: 3 * M, 1: 2 * M}  # stage 0: activations of chunks 0-2, grads of 1-2
    assert sends[1] == {0: 2 * M, 1: 3 * M}  # stage 7: wraps chunks 0-1 to stage 0
    for g in step.graphs:
        assert check_order(step.orders[g.rank], 3, M) == []


@pytest.mark.parametrize("vp", [1, 3])
def test_collectives_match_across_all_ranks(vp: int) -> None:
    graphs = expand(_step(vp), _plan(vp))
    assert len(graphs) == 256
    problems: list[str] = []
    colls = match_collectives(graphs, problems)
    pairs = match_p2p(graphs, {g.rank: g.rank for g in graphs}, problems)
    assert problems == []
    distinct = _step(vp).graphs
    tp_groups = [inst for inst in colls if inst.group[1] - inst.group[0] == 1]
    assert len(tp_groups) == 4 * sum(_count(g, COLL, TP) for g in distinct)  # 4 TP groups a stage
    assert all(len(inst.members) == 8 for inst in tp_groups)
    assert len(pairs) == 32 * sum(_count(g, SEND) for g in distinct)  # every (tp, dp) copy


@pytest.mark.parametrize("vp", [1, 3])
def test_generated_step_simulates_with_the_1f1b_bubble(vp: int) -> None:
    """Runs to the end (no stall) in about compute x (1 + (pp-1)/(vp·m)) — the bubble of
    1F1B, smaller when interleaved — with fast links (100 GB/s, 1 µs)."""
    step = _step(vp)
    pricer = FixedBandwidthPricer(bandwidth_gbps=1000.0, latency_ns=1000)
    result = simulate(step.graphs, SimOptions(mode=Mode.MODEL, pricer=pricer))
    compute = max(int(g.dur_ns[g.type == COMP].sum()) for g in step.graphs)
    ideal = compute * (1 + 7 / (vp * M))
    assert 0.9 * ideal < result.iteration_time_ns < 1.15 * ideal
