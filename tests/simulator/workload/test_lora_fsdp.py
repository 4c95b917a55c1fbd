"""LoRA on PyTorch FSDP2 (`zero` 3 with a torchtitan profile; NeMo AutoModel, HF PEFT):
every frozen base weight is still all-gathered before its layer's forward and backward,
but only the adapters' gradients are reduce-scattered (and copied into FSDP2's FP32
reduce buffer), only they reach the optimizer, and no base weight-gradient GEMM runs."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.errors import ConfigError
from lumos.simulator.graph import COLL, RankGraph
from lumos.simulator.network.api import ALL_GATHER, REDUCE_SCATTER
from lumos.simulator.workload import ParallelPlan, estimate, generate, lora
from lumos.simulator.workload.block import DP
from lumos.simulator.workload.chunk import fsdp_layer_params
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.spec import ModelSpec, model_from_dict
from tests.simulator.workload.heldout_files import parse_all, row_error
from tests.simulator.workload.tiny_models import TINY_LLAMA

MODEL: ModelSpec = model_from_dict({**TINY_LLAMA, "layers": 4, "seq": 2048}, "tiny4")
RANK = 16
DP_SIZE = 2


def _plan(**kw: object) -> ParallelPlan:
    opts: dict[str, object] = dict(dp=DP_SIZE, gbs=2, zero=3, framework="torchtitan")
    opts.update(kw)
    return ParallelPlan.build(MODEL, **opts)  # type: ignore[arg-type]


def _rank0(plan: ParallelPlan) -> tuple[RankGraph, list[str], np.ndarray]:
    step = generate(MODEL, plan, "h100")
    g = step.graphs[0]
    return g, [g.names[i] for i in g.name_idx], step.nbytes[g.rank]


def _ctx(plan: ParallelPlan) -> Ctx:
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.costmodel.kernels import KernelModel

    return Ctx.make(MODEL, plan, KernelModel.for_gpu(load_system("h100").gpu))


def _dp_bytes(g: RankGraph, kind: int) -> int:
    sel = (g.type == COLL) & (g.group == DP) & (g.comm_type == kind)
    return int(g.comm_size[sel].sum())


def test_no_base_weight_gradient_gemm_runs_under_fsdp2() -> None:
    _, full, _ = _rank0(_plan())
    _, names, _ = _rank0(_plan(lora_rank=RANK))
    assert "layer0.qkv.wgrad" in full and "output.wgrad" in full
    wgrads = [n for n in names if n.endswith(".wgrad")]
    assert len(wgrads) == 2 * 4 * MODEL.layers  # A and B of four adapters a layer
    assert all(".lora_" in n for n in wgrads)


def test_frozen_weights_are_gathered_and_only_adapters_reduced() -> None:
    """The all-gathers carry the frozen weights plus the adapters (FSDP2 groups the whole
    block), forward and backward; the reduce-scatters carry the adapters alone, in FP32."""
    plan = _plan(lora_rank=RANK)
    ctx = _ctx(plan)
    base, adapters = ctx.layer_params_local(), lora.layer_params(ctx)
    assert fsdp_layer_params(ctx) == (base + adapters, adapters)
    full_g, _, _ = _rank0(_plan())
    g, _, nbytes = _rank0(plan)
    layers, emb = MODEL.layers, MODEL.vocab * MODEL.hidden
    # two gathers a layer (forward, backward), each a DP shard of BF16 weights
    assert _dp_bytes(g, ALL_GATHER) - _dp_bytes(full_g, ALL_GATHER) == 2 * layers * adapters
    assert _dp_bytes(g, ALL_GATHER) >= 2 * layers * base
    assert _dp_bytes(g, REDUCE_SCATTER) == layers * adapters * 4  # FP32 reduce dtype
    assert _dp_bytes(full_g, REDUCE_SCATTER) == (layers * base + 2 * emb) * 4
    # FSDP2's copy-in reads the BF16 gradient and writes FP32: the adapters' only
    _, names, _ = _rank0(plan)
    copy_in = [nbytes[i] for i, n in enumerate(names) if n.endswith(".fsdp_copy_in")]
    assert len(copy_in) == layers and all(b == adapters * 6 for b in copy_in)
    copy_out = [nbytes[i] for i, n in enumerate(names) if n.endswith(".fsdp_copy_out")]
    assert copy_out and all(b == (base + adapters) * 4 for b in copy_out)


def test_the_optimizer_steps_only_a_dp_shard_of_the_adapters() -> None:
    plan = _plan(lora_rank=RANK)
    adapters = lora.layer_params(_ctx(plan)) * MODEL.layers
    _, names, nbytes = _rank0(plan)
    step = nbytes[names.index("optimizer_step")]
    assert step == pytest.approx(adapters // DP_SIZE * 32, rel=1e-6)
    _, full_names, full_bytes = _rank0(_plan())
    assert full_bytes[full_names.index("optimizer_step")] > 100 * step


def test_fsdp2_lora_memory_keeps_sharded_frozen_weights_and_adapter_states() -> None:
    full = estimate(MODEL, _plan(), "h100")
    plan = _plan(lora_rank=RANK)
    tuned = estimate(MODEL, plan, "h100")
    adapters = lora.layer_params(_ctx(plan)) * MODEL.layers
    m, f = tuned.memory, full.memory
    assert m.weights_gb == pytest.approx(f.weights_gb + adapters * 2 / DP_SIZE / 1e9)
    assert m.gradients_gb == pytest.approx(adapters * 2 / DP_SIZE / 1e9)
    assert m.optimizer_gb == pytest.approx(adapters * 12 / DP_SIZE / 1e9)
    # all four linears adapted: each adapter keeps the input its frozen linear no longer
    # keeps, plus its r-wide middle; with qkv alone, the MLP keeps neither FC2's input nor
    # its norm's output
    middles = MODEL.layers * MODEL.seq * RANK * 2 * 4
    assert m.activations_gb - f.activations_gb == pytest.approx(middles / 1e9)
    qkv = estimate(MODEL, _plan(lora_rank=RANK, lora_targets="qkv"), "h100").memory
    assert qkv.activations_gb < f.activations_gb
    assert tuned.iteration_time_s < full.iteration_time_s  # the gathers stay: a few % only


def test_the_zero3_assumption_says_frozen_weights_are_still_gathered() -> None:
    text = " ".join(estimate(MODEL, _plan(lora_rank=RANK), "h100").assumptions)
    assert "frozen weights are still all-gathered" in text


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"framework": "llm-foundry"}, "llm-foundry"),
        ({"pp": 2}, "pp 1"),
        ({"fsdp_unit": "tensor", "framework": "megatron"}, "fsdp_unit 'layer'"),
    ],
)
def test_fsdp_lora_plans_not_modelled_are_refused(options: dict[str, object], field: str) -> None:
    with pytest.raises(ConfigError, match=field):
        _plan(lora_rank=RANK, **options)


def test_every_automodel_lora_row_parses_as_fsdp2_lora() -> None:
    parsed = parse_all("AUTOMODEL_LORA", 6, ("HELDOUT3", "HELDOUT5"))
    for row_id, row in parsed.items():
        p = row.plan
        assert (p.zero, p.lora_rank, p.lora_targets) == (3, 16, "qkv,proj,fc1,fc2"), row_id
        # TP 1: the Hugging Face class with Liger's fused kernels and loss (`olmo-core`'s
        # switches); TP 2: AutoModel's own model compiled per block, every layer recomputed
        compiled = p.tp == 2
        assert p.framework == ("torchtitan-compile" if compiled else "olmo-core"), row_id
        assert (p.recompute.value == "full") == compiled, row_id


#: NeMo AutoModel's LoRA rows (docs/estimate.md, "LoRA fine-tuning"): each within 25 %
@pytest.mark.slow
@pytest.mark.parametrize(
    "row_id",
    ["AM-LORA-LLAMA3-8B-1", "AM-LORA-QWEN25-7B-1", "AM-LORA-QWEN25-32B-16"],
)
def test_automodel_lora_runs_estimate_within_25_percent(row_id: str) -> None:
    assert abs(row_error("AUTOMODEL_LORA", row_id)) < 0.25
