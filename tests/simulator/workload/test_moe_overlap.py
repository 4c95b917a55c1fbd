"""Megatron-Core's EP all-to-all overlap (`a2a_overlap`, `overlap_moe_expert_parallel_comm`):
which passes merge, the merged layer pair's order on the compute and EP streams
(`TransformerLayerSchedulePlan.run`), the same work with less exposed all-to-all, and
Megatron-Core's own refusals."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.graph import COLL, COMP
from lumos.simulator.workload import ParallelPlan, estimate, generate
from lumos.simulator.workload.block import COMPUTE, EP_STREAM
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.schedule import stage_order, units
from lumos.simulator.workload.spec import ModelSpec, model_from_dict

SMALL = {
    "layers": 4,
    "hidden": 256,
    "heads": 4,
    "kv_heads": 2,
    "ffn": 512,
    "vocab": 512,
    "mlp": "swiglu",
    "norm": "rmsnorm",
    "experts": 8,
    "top_k": 2,
    "moe_ffn": 128,
}


def _model(**kw: object) -> ModelSpec:
    return model_from_dict({**SMALL, **kw}, "small", "small-moe")


def _plan(overlap: bool, **kw: object) -> ParallelPlan:
    base: dict[str, object] = {"pp": 2, "vp": 2, "dp": 4, "ep": 4, "gbs": 16, "seq": 1024}
    return ParallelPlan.build(_model(), mbs=1, a2a_overlap=overlap, **{**base, **kw})  # type: ignore[arg-type]


def test_units_merge_each_steady_forward_with_the_next_backward() -> None:
    """Interleaved 1F1B: warm-up forwards and cool-down backwards alone, each steady
    forward with the backward after it; no pipelining: F0, (F1, B0), (F2, B1), ..., B3 —
    a forward never merges with its own micro-batch's backward."""
    order = stage_order(2, 2, 4, 0)
    got = units(order, 2, True)
    assert sorted(pos for u in got for _, pos in u) == list(range(len(order)))
    pairs = [u for u in got if len(u) == 2]
    assert pairs and all(f.forward and not b.forward for (f, _), (b, _) in pairs)
    flat = units(stage_order(1, 1, 4, 0), 1, True)
    names = [[("F" if s.forward else "B") + str(s.microbatch) for s, _ in u] for u in flat]
    assert names == [["F0"], ["F1", "B0"], ["F2", "B1"], ["F3", "B2"], ["B3"]]
    assert all(len(u) == 1 for u in units(order, 2, False))


def test_merged_layer_pair_runs_in_megatron_order() -> None:
    """`TransformerLayerSchedulePlan.run`: comm combine_bwd | dispatch (tokens, then
    probabilities) -> dispatch_bwd (probabilities' gradient, then tokens') | combine; compute attention (forward) | experts' backward, experts' forward | attention
    (backward), the forward's unpermute last."""
    gen = Generator(_model(), _plan(True), KernelModel.for_gpu(load_system("h100").gpu))
    blk = gen.pair_block(0, 1, 0)  # forward of chunk 1 (layer 2), backward of chunk 0 (layer 0)
    names = gen.names.as_list()
    seq = [names[n] for n in blk.name]
    ep = [n for n, s in zip(seq, blk.cols["stream"], strict=True) if s == EP_STREAM]
    assert ep == [
        "layer0.moe.combine_bwd",
        "layer2.moe.dispatch",
        "layer2.moe.dispatch_probs",  # the routing probabilities' all-to-all (moe_meta)
        "layer0.moe.dispatch_probs_bwd",
        "layer0.moe.dispatch_bwd",
        "layer2.moe.combine",
    ]
    comp = [n for n, s in zip(seq, blk.cols["stream"], strict=True) if s == COMPUTE]
    at = comp.index
    assert at("layer0.moe.unpermute_bwd") < at("layer2.norm1") < at("layer2.moe.permute")
    assert at("layer2.moe.permute") < at("layer0.moe.fc2.dgrad") < at("layer0.moe.fc1.wgrad")
    assert at("layer0.moe.fc1.wgrad") < at("layer2.moe.fc1") < at("layer0.moe.permute_bwd")
    assert at("layer0.norm1_bwd") < at("layer2.moe.unpermute") == at("layer2.residual2") - 1
    assert comp[-1] == "embedding_bwd"  # chunk 0's backward ends with the embedding's


def test_overlap_keeps_the_work_and_hides_all_to_all() -> None:
    """The same kernels and collectives (names, durations, sizes) with and without the
    overlap; the step is shorter and the exposed all-to-all time smaller."""
    off, on = (generate(_model(), _plan(o), "h100") for o in (False, True))
    for a, b in zip(off.graphs, on.graphs, strict=True):
        for kind in (COMP, COLL):
            ka, kb = a.type == kind, b.type == kind
            assert sorted(a.dur_ns[ka].tolist()) == sorted(b.dur_ns[kb].tolist())
            assert np.array_equal(np.sort(a.comm_size[ka]), np.sort(b.comm_size[kb]))
    # one grouped kernel: under TE's host loop these tiny layers are bound by the host
    # thread (moe_host), which the overlap does not shorten
    plans = (_plan(o, grouped_gemm="fused") for o in (False, True))
    r_off, r_on = (estimate(_model(), p, "h100", exact=True) for p in plans)
    assert r_on.iteration_time_s < r_off.iteration_time_s
    assert r_on.breakdown.exposed_ep_s < r_off.breakdown.exposed_ep_s
    assert r_on.breakdown.compute_s == pytest.approx(r_off.breakdown.compute_s)


def test_overlap_refused_where_megatron_refuses_it() -> None:
    with pytest.raises(ConfigError, match="ep > 1"):
        _plan(True, ep=1)
    with pytest.raises(ConfigError, match="full"):
        _plan(True, recompute="full")
    with pytest.raises(ConfigError, match="interleaved"):
        _plan(True, vp=1)
    dense = {k: v for k, v in SMALL.items() if k not in ("experts", "top_k", "moe_ffn")}
    m = model_from_dict(dense, "dense")
    with pytest.raises(ConfigError, match="mixture-of-experts"):
        ParallelPlan.build(m, dp=4, gbs=4, a2a_overlap=True)
