"""Hybrid Mamba-2 / Transformer models (Nemotron-H): a small hand-checked pattern runs each
layer kind's kernels and TP collectives with the expected GEMM shapes, forward and backward;
the SSD scan's FLOPs and bytes follow its kernels; weights and activations match a hand
count; the pipeline places layers as Megatron-Core's MambaStack does; the Nemotron-H
config.json and built-ins have the published sizes and NVIDIA's FLOP count; what is not
modelled is refused by name."""

from __future__ import annotations

import json
from collections import Counter
from dataclasses import replace

import jsonschema
import numpy as np
import pytest
from click.testing import CliRunner

from lumos import schemas
from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan, Precision, Recompute, estimate
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.hybrid_memory import hybrid_activation_bytes
from lumos.simulator.workload.hybrid_spec import hybrid_flops_per_sequence
from lumos.simulator.workload.memory import _attention_bytes
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from lumos.simulator.workload.ssd import SSD_HBM_FRACTION, ScanShape, forward_kernels
from lumos.simulator.workload.ssd_backward import backward_kernels
from lumos.simulator.workload.step import model_flops_per_step
from lumos.simulator.workload.userbuffers import gemm_key, ub_kind
from tests.simulator.workload.model_battery import CONFIGS
from tests.simulator.workload.passes import stage0_pass

#: one layer of each kind: hidden 256, 4 heads of 64 (2 KV heads), a squared-ReLU MLP of
#: 512, a Mamba-2 mixer of 8 heads of 32 (d_inner 256), state 16, 2 groups, chunk 64
SMALL = {
    "pattern": "M*-",
    "hidden": 256,
    "heads": 4,
    "kv_heads": 2,
    "ffn": 512,
    "vocab": 1024,
    "mlp": "squared_relu",
    "norm": "rmsnorm",
    "position": "none",
    "mamba_heads": 8,
    "mamba_head_dim": 32,
    "ssm_state": 16,
    "mamba_groups": 2,
    "chunk_size": 64,
}
SEQ = 256
KM = KernelModel.for_gpu(load_system("h100").gpu)


def _model(**extra: object) -> ModelSpec:
    return model_from_dict({**SMALL, **extra}, "small", "small-hybrid")


def _pass(
    plan: ParallelPlan, forward: bool, model: ModelSpec | None = None
) -> dict[str, np.ndarray]:
    return stage0_pass(model or _model(), plan, KM, forward)


def _names(cols: dict[str, np.ndarray], layer: int) -> list[str]:
    prefix = f"layer{layer}."
    return [str(n)[len(prefix) :] for n in cols["name"] if str(n).startswith(prefix)]


def test_small_hybrid_weights_match_a_hand_count() -> None:
    """Mamba layer: in_proj h x (2·d_inner + 2·G·N + heads), conv (d_inner + 2·G·N) x (4 + 1
    bias), dt_bias / A_log / D per head, the gated norm and out_proj, its pre-norm; the
    attention layer its QKV, projection and one norm; the MLP layer two projections and
    one norm; untied embedding and output layer, final norm."""
    m = _model()
    assert (m.layers, m.mamba is not None and m.mamba.inner) == (3, 256)
    mamba = 256 * (2 * 256 + 2 * 2 * 16 + 8) + (256 + 64) * 5 + 3 * 8 + 256 + 256 * 256 + 256
    attention = 256 * (4 + 2 * 2) * 64 + 256 * 256 + 256
    mlp = 2 * 256 * 512 + 256
    assert m.params() == mamba + attention + mlp + 2 * 1024 * 256 + 256


def test_each_layer_kind_runs_its_kernels_and_collectives_under_tp() -> None:
    """TP 2 with sequence parallelism: the Mamba layer gathers in_proj's input, runs the
    conv, the SSD scan and the grouped norm, and reduce-scatters out_proj's output; the
    attention layer has no RoPE (position none) and no MLP; the MLP layer no attention.
    GEMM FLOPs are the local shapes: in_proj [T, 584 / 2, 256], out_proj [T, 256, 128]."""
    plan = ParallelPlan(tp=2, seq=SEQ, sequence_parallel=True)
    cols = _pass(plan, forward=True)
    mamba = _names(cols, 0)
    assert mamba == [
        "norm", "in_proj.all_gather", "in_proj", "conv1d", "ssd_scan", "mixer_norm",
        "out_proj", "out_proj.reduce_scatter", "residual",
    ]  # fmt: skip
    assert _names(cols, 1) == [
        "norm1", "qkv.all_gather", "qkv", "attention", "proj", "proj.reduce_scatter", "residual1",
    ]  # fmt: skip
    assert _names(cols, 2) == [
        "norm2", "fc1.all_gather", "fc1", "activation", "fc2", "fc2.reduce_scatter", "residual2",
    ]  # fmt: skip
    flops = {str(n): float(f) for n, f in zip(cols["name"], cols["flops"], strict=True)}
    assert flops["layer0.in_proj"] == 2 * SEQ * (584 // 2) * 256
    assert flops["layer0.out_proj"] == 2 * SEQ * 256 * 128


def test_backward_mirrors_the_mamba_layer() -> None:
    """out_proj's data and weight gradients (its gradient gathered), the norm's and the
    scan's backward, the conv's (recomputed inside), in_proj's gradients with its input
    re-gathered and its data gradient reduce-scattered, the fused norm's backward; under
    full recompute the layer's forward runs again first."""
    plan = ParallelPlan(tp=2, seq=SEQ, sequence_parallel=True)
    names = _names(_pass(plan, forward=False), 0)
    order = ["residual_bwd", "out_proj.dgrad", "out_proj.wgrad", "mixer_norm_bwd"]
    order += ["ssd_scan_bwd", "conv1d_bwd", "in_proj.dgrad", "in_proj.wgrad", "norm_bwd"]
    assert [n for n in names if n in order] == order
    assert Counter(names)["in_proj.input_all_gather"] == 1
    assert Counter(names)["in_proj.dgrad_reduce"] == 1
    full = _names(_pass(replace(plan, recompute=Recompute.FULL), forward=False), 0)
    assert full[: full.index("residual_bwd")][-1] == "recompute.residual"


def test_scan_flops_and_bytes_follow_its_kernels() -> None:
    """Five forward kernels, fifteen backward (four of them the forward's recomputed); the
    state products 2·T·d_inner·N, the causal intra-chunk product T·d_inner·Q, C·B^T
    2·T·Q·N·G; the forward writes the gated and the ungated output."""
    z = ScanShape(tokens=SEQ, chunks=SEQ // 64, heads=8, head_dim=32, state=16, groups=2, chunk=64)
    state, intra, cb = z.flops()
    assert (state, intra, cb) == (2 * SEQ * 256 * 16, SEQ * 256 * 64, 2 * SEQ * 64 * 16 * 2)
    fwd, bwd = forward_kernels(z), backward_kernels(z)
    assert (len(fwd), len(bwd)) == (5, 15)
    assert sum(f for f, _ in fwd) == 2 * state + intra + cb
    assert sum(f for f, _ in bwd) == 5 * state + 3 * intra + 3 * cb
    assert z.states == (SEQ // 64) * 8 * 32 * 16 * 4


def test_the_56b_scan_is_bandwidth_bound_at_the_stated_fraction() -> None:
    """Nemotron-H 56B on TP 8, one 8K sequence: the scan's node takes its bytes at
    SSD_HBM_FRACTION of the HBM bandwidth (the FP32 chunk states dominate), not its FLOPs
    at the attention rate; five kernel launches and A's two element-wise ops besides."""
    m = load_model("nemotron-h-56b")
    plan = ParallelPlan(tp=8, seq=8192, sequence_parallel=True, precision=Precision.FP8)
    cols = stage0_pass(m, plan, KM, forward=True)
    mask = cols["name"] == "layer0.ssd_scan"
    ns, nbytes = float(cols["dur"][mask][0]), float(cols["nbytes"][mask][0])
    floor = nbytes / (KM.gpu.hbm_bandwidth_gbps * SSD_HBM_FRACTION)
    assert floor < ns < floor + 7 * KM.physics.kernel_overhead_ns + 1


def test_activations_are_the_mean_over_kinds() -> None:
    """A Mamba layer keeps its input, the norm output, in_proj's output, the scan's ungated
    output, the grouped norm's input and out_proj's input; the attention layer what a
    transformer's attention half keeps; the MLP layer its input, norm output, FC1 output
    and FC2 input; full recompute keeps each layer's input."""
    m = _model()
    ctx = Ctx.make(m, ParallelPlan(seq=SEQ), KM)
    x = SEQ * 256 * 2
    mamba = x + x + SEQ * 584 * 2 + 3 * SEQ * 256 * 2
    mlp = x + x + SEQ * 512 * 2 * 2
    expected = (mamba + _attention_bytes(ctx) + mlp) / 3
    assert hybrid_activation_bytes(ctx) == pytest.approx(expected)
    full = Ctx.make(m, ParallelPlan(seq=SEQ, recompute=Recompute.FULL), KM)
    assert hybrid_activation_bytes(full) == x


def test_pipeline_stages_hold_their_layers_kinds() -> None:
    """MambaStack gives each of pp stages num_layers / pp consecutive layers: "MMMM----" on
    PP 2 puts the four Mamba layers on stage 0 and the four MLP layers on stage 1, and each
    stage's pass runs its own kinds' kernels."""
    m = _model(pattern="MMMM----")
    plan = ParallelPlan(pp=2, gbs=2, seq=SEQ)
    assert plan.chunk_layers(m) == [4, 4]
    from lumos.simulator.workload.generate import Generator

    gen = Generator(m, plan, KM)
    names = gen.names.as_list()
    stage = [[names[i] for i in gen.block(s, 0, True).name] for s in (0, 1)]
    assert sum(n.endswith(".in_proj") for n in stage[0]) == 4
    assert not any(n.endswith(".fc1") for n in stage[0])
    assert sum(n.endswith(".fc1") for n in stage[1]) == 4
    assert not any(n.endswith(".in_proj") for n in stage[1])


def test_nemotron_h_config_json_reads_as_the_8b() -> None:
    """nvidia/Nemotron-H-8B-Base-8K's config.json (model_type nemotron_h, was refused):
    24 Mamba-2, 4 attention and 24 MLP layers, 128 Mamba heads of 64, state 128, 8 groups,
    RMSNorm, squared ReLU, no position embedding; the built-in's shape and 8.10 B weights,
    within 1.5 % of the model card's "8B" (a rounded label)."""
    spec = load_model(CONFIGS / "Nemotron-H-8B-Base-8K.json")
    assert Counter(spec.pattern) == {"M": 24, "*": 4, "-": 24}
    m = spec.mamba
    assert m is not None and (m.heads, m.head_dim, m.state, m.groups) == (128, 64, 128, 8)
    assert (m.conv_kernel, m.chunk, spec.head_dim, spec.position) == (4, 128, 128, "none")
    assert spec.params() == load_model("nemotron-h-8b").params()
    assert spec.params() == pytest.approx(8.0e9, rel=0.015)


@pytest.mark.parametrize(("name", "billions"), [("nemotron-h-56b", 56), ("nemotron-h-47b", 47)])
def test_builtins_have_the_published_size(name: str, billions: float) -> None:
    """The model cards' 56B and 47B (nvidia/Nemotron-H-{56,47}B-Base-8K), within 1 %."""
    assert load_model(name).params() == pytest.approx(billions * 1e9, rel=0.01)


def test_model_flops_are_nvidias_nemotron_h_count() -> None:
    """dgxc-benchmarking nemotronh/README.md: 2.816e15 FLOPs per 8K sequence of the 56B
    (its formula with chunk_size 256), and its MFU example: GBS 768 in 15.892 s on 256 H100s
    at 1979 TFLOP/s is 26.86 %. lumos counts with the model's own chunk (128): 0.2 % less."""
    m = load_model("nemotron-h-56b")
    at_256 = replace(m, mamba=replace(m.mamba, chunk=256))
    assert hybrid_flops_per_sequence(at_256, 8192) == pytest.approx(2.816e15, rel=1e-4)
    plan = ParallelPlan(tp=8, dp=32, gbs=768, seq=8192)
    mfu = model_flops_per_step(at_256, plan) / 15.892 / 256 / 1979e12
    assert mfu == pytest.approx(0.2686, abs=5e-5)
    assert model_flops_per_step(m, plan) / model_flops_per_step(at_256, plan) == pytest.approx(
        0.9978, abs=5e-4
    )


@pytest.mark.parametrize(
    ("extra", "match"),
    [
        ({"pattern": "ME*"}, "E layers need experts"),
        ({"pattern": "M*-", "layers": 4}, "pattern has 3 layers, not 4"),
        ({"pattern": None, "hybrid_attention_ratio": 0.1}, "give hybrid_override_pattern"),
        ({"pattern": None}, "'mamba_heads' needs a hybrid layer pattern"),
        ({"mamba_proj_bias": True}, "biases on the Mamba in/out projections"),
        ({"experts": 4, "top_k": 1}, "experts need E layers"),
    ],
)
def test_unmodelled_hybrids_are_refused(extra: dict[str, object], match: str) -> None:
    data = {k: v for k, v in {**SMALL, **extra}.items() if v is not None}
    with pytest.raises(ConfigError, match=match):
        model_from_dict(data, "small")


@pytest.mark.parametrize(
    ("plan", "match"),
    [
        ({"cp": 2}, "without context parallelism"),
        ({"lora_rank": 16}, "ZeRO-3 or LoRA"),
        ({"tp": 4}, "must divide the 8 Mamba heads and 2 groups"),
        ({"pp": 2, "vp": 2}, "without virtual stages"),
        ({"pp": 2}, "give a pp that divides them"),
    ],
)
def test_plans_megatron_refuses_for_a_hybrid_are_refused(plan: dict[str, int], match: str) -> None:
    """MambaMixer's TP asserts, MambaStack's even split without virtual stages (the small
    model's 3 layers do not divide over 2 stages), no CP / ZeRO-3 model."""
    model = _model(kv_heads=4, ffn=1024) if plan.get("tp") == 4 else _model()
    gbs = 2 * plan.get("pp", 1) * plan.get("vp", 1)
    with pytest.raises(ConfigError, match=match):
        estimate(model, ParallelPlan(seq=SEQ, gbs=gbs, **plan), "h100")


def test_mamba_gemms_use_the_mlps_userbuffers() -> None:
    """MambaMixer builds in_proj with tp_comm_buffer_name "fc1" and out_proj with "fc2"."""
    assert (ub_kind("layer3.out_proj"), ub_kind("layer3.in_proj")) == ("fc2", "fc1")
    assert (gemm_key("layer3.in_proj"), gemm_key("layer3.out_proj.dgrad")) == (
        "fc1.fprop",
        "fc2.dgrad",
    )
    assert gemm_key("layer3.qkv") == "qkv.fprop"


def test_cli_estimates_a_nemotron_h_config_json(tmp_path: object) -> None:
    """`lumos estimate --model <Nemotron-H config.json> --json`: the envelope the schema
    allows, the file's name, a positive step, the hybrid's assumption line and NVIDIA's
    FLOP count in the MFU."""
    args = ["estimate", "--model", str(CONFIGS / "Nemotron-H-8B-Base-8K.json"), "--tp", "2"]
    args += ["--dp", "4", "--gbs", "16", "--seq", "4096", "--hw", "h100", "--json"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)
    jsonschema.validate(doc, schemas.load("envelope"))
    jsonschema.validate(doc["result"], schemas.load("estimate"))
    res = doc["result"]
    assert res["model"] == "Nemotron-H-8B-Base-8K" and res["iteration_time_s"] > 0
    assert any(a.startswith("hybrid Mamba-2 layers") for a in res["assumptions"])
    spec = load_model(CONFIGS / "Nemotron-H-8B-Base-8K.json")
    flops = 16 * hybrid_flops_per_sequence(spec, 4096)
    tflops = flops / res["iteration_time_s"] / 8 / 1e12
    assert res["model_tflops_per_gpu"] == pytest.approx(tflops, rel=1e-3)
