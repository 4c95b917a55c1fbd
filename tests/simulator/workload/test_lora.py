"""LoRA fine-tuning (`lora_rank`, `lora_targets`, `lora_a2a`; NeMo / Megatron-Bridge's
`LoRA`): frozen base weights lose their weight-gradient GEMMs, gradient reduction and
optimizer step; the adapters' GEMMs sit on the shapes `ParallelLinearAdapter` shards under
TP; memory keeps only what the data gradients and the adapters need."""

from __future__ import annotations

import dataclasses
import json

import numpy as np
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.graph import COLL, RankGraph
from lumos.simulator.network.api import ALL_GATHER, ALL_REDUCE, ALL_TO_ALL, REDUCE_SCATTER
from lumos.simulator.workload import ParallelPlan, estimate, generate, lora
from lumos.simulator.workload.block import DP, TP
from lumos.simulator.workload.dims import Ctx
from lumos.simulator.workload.spec import ModelSpec, load_model, model_from_dict
from lumos.simulator.workload.step import model_flops_per_step
from tests.simulator.workload.heldout_files import row_error
from tests.simulator.workload.tiny_models import TINY_LLAMA

MODEL: ModelSpec = model_from_dict({**TINY_LLAMA, "layers": 4, "seq": 2048}, "tiny4")
RANK = 16


def _plan(**kw: object) -> ParallelPlan:
    opts: dict[str, object] = dict(tp=2, dp=2, gbs=4, zero=1, precision="fp8")
    opts.update(kw)
    return ParallelPlan.build(MODEL, **opts)  # type: ignore[arg-type]


def _rank0(plan: ParallelPlan) -> tuple[RankGraph, np.ndarray]:
    step = generate(MODEL, plan, "h100")
    g = step.graphs[0]
    return g, step.flops[g.rank]


def _names(g: RankGraph) -> list[str]:
    return [g.names[i] for i in g.name_idx]


def _ctx(plan: ParallelPlan) -> Ctx:
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.costmodel.kernels import KernelModel

    return Ctx.make(MODEL, plan, KernelModel.for_gpu(load_system("h100").gpu))


def test_a_lora_step_has_no_base_weight_gradient_gemms() -> None:
    full, _ = _rank0(_plan())
    tuned, _ = _rank0(_plan(lora_rank=RANK))
    base = [n for n in _names(full) if n.endswith(".wgrad")]
    assert any(n.startswith("layer0.qkv") for n in base) and "output.wgrad" in base
    wgrads = [n for n in _names(tuned) if n.endswith(".wgrad")]
    assert wgrads and all(".lora_" in n for n in wgrads)  # only the adapters' own
    # the data gradients stay: every base dgrad of the full step is still there
    assert {n for n in _names(full) if n.endswith(".dgrad")} <= set(_names(tuned))
    assert "embedding_bwd" in _names(full) and "embedding_bwd" not in _names(tuned)


def test_the_adapter_gemms_sit_on_the_tp_shapes_of_parallel_linear_adapter() -> None:
    """TP 2: beside qkv (column) A is r / 2 x h and B qkv_out / 2 x r; beside proj (row)
    A is r x in / 2 and B h / 2 x r; FLOPs of one micro-batch's forward and backward."""
    plan = _plan(lora_rank=RANK)
    ctx = _ctx(plan)
    g, flops = _rank0(plan)
    names = _names(g)
    T, h, t = ctx.T, MODEL.hidden, 2

    def flops_of(name: str) -> set[float]:
        return {float(flops[i]) for i, n in enumerate(names) if n == name}

    qkv_out = (MODEL.heads + 2 * MODEL.kv_heads) * MODEL.head_dim // t
    assert flops_of("layer0.qkv.lora_a") == {2.0 * T * (RANK // t) * h}
    assert flops_of("layer0.qkv.lora_b") == {2.0 * T * qkv_out * RANK}
    assert flops_of("layer0.qkv.lora_b.dgrad") == {2.0 * T * RANK * qkv_out}
    assert flops_of("layer0.qkv.lora_a.wgrad") == {2.0 * (RANK // t) * h * T}
    proj_in = MODEL.heads * MODEL.head_dim // t
    assert flops_of("layer0.proj.lora_a") == {2.0 * T * RANK * proj_in}
    assert flops_of("layer0.proj.lora_b") == {2.0 * T * (h // t) * RANK}
    assert flops_of("layer0.fc2.lora_a.dgrad") == {2.0 * T * MODEL.ffn // t * RANK}
    # the TP collectives of the adapters: A's r-wide gather / reduce, B's output gather
    # (sequence parallel: the scattered output's gather back in the backward)
    kinds = {names[i]: int(g.comm_type[i]) for i in np.flatnonzero(g.type == COLL)}
    assert kinds["layer0.qkv.lora_a.all_gather"] == ALL_GATHER
    assert kinds["layer0.proj.lora_a.all_reduce"] == ALL_REDUCE
    assert kinds["layer0.proj.lora_b.all_gather"] == ALL_GATHER
    assert kinds["layer0.proj.lora_b.grad.all_gather"] == ALL_GATHER
    a2a, _ = _rank0(_plan(lora_rank=RANK, lora_a2a=True))
    kinds = {_names(a2a)[i]: int(a2a.comm_type[i]) for i in np.flatnonzero(a2a.type == COLL)}
    assert kinds["layer0.proj.lora_b.all_to_all"] == ALL_TO_ALL


def test_targets_choose_the_adapted_linears_and_default_to_all_four() -> None:
    assert lora.targets("") == ("qkv", "proj", "fc1", "fc2")
    assert lora.targets("fc2, qkv") == ("qkv", "fc2")
    g, _ = _rank0(_plan(lora_rank=RANK, lora_targets="qkv"))
    adapted = {n.split(".")[1] for n in _names(g) if ".lora_" in n}
    assert adapted == {"qkv"}


def test_dp_collectives_move_only_the_adapters() -> None:
    """ZeRO-1, DP 2: the gradient reduce-scatters add up to the adapters' BF16 bytes, the
    parameter all-gathers to a DP shard of them; nothing of the frozen weights."""
    plan = _plan(lora_rank=RANK)
    adapters = lora.layer_params(_ctx(plan)) * MODEL.layers
    g, _ = _rank0(plan)
    dp = (g.type == COLL) & (g.group == DP)
    rs = dp & (g.comm_type == REDUCE_SCATTER)
    ag = dp & (g.comm_type == ALL_GATHER)
    assert int(g.comm_size[rs].sum()) == adapters * 2
    assert int(g.comm_size[ag].sum()) == pytest.approx(adapters * 2 / 2, abs=8)
    full, _ = _rank0(_plan())
    full_rs = (full.type == COLL) & (full.group == DP) & (full.comm_type == REDUCE_SCATTER)
    assert int(full.comm_size[full_rs].sum()) > 100 * adapters * 2


def test_memory_drops_by_the_base_gradients_and_optimizer_states() -> None:
    full = estimate(MODEL, _plan(), "h100").memory
    plan = _plan(lora_rank=RANK)
    tuned = estimate(MODEL, plan, "h100").memory
    adapters = lora.layer_params(_ctx(plan)) * MODEL.layers
    assert tuned.gradients_gb == pytest.approx(adapters * 2 / 1e9)
    assert tuned.optimizer_gb == pytest.approx(adapters * 12 / 2 / 1e9)  # ZeRO-1 over DP 2
    assert tuned.weights_gb == pytest.approx(full.weights_gb + adapters * 2 / 1e9)
    saved = (full.gradients_gb + full.optimizer_gb) - (tuned.gradients_gb + tuned.optimizer_gb)
    assert saved > 0.95 * (full.gradients_gb + full.optimizer_gb)
    # the frozen linears keep no input of their own: with qkv alone adapted the MLP keeps
    # neither FC2's input nor the norm output, so less than full training keeps
    qkv = estimate(MODEL, _plan(lora_rank=RANK, lora_targets="qkv"), "h100").memory
    assert qkv.activations_gb < full.activations_gb


def test_lora_is_faster_than_full_training_and_counts_its_model_flops() -> None:
    model = load_model("llama2-7b")
    full = ParallelPlan.build(model, dp=8, gbs=32, seq=4096, precision="fp8")
    tuned = dataclasses.replace(full, lora_rank=8, lora_targets="qkv")
    a, b = estimate(model, full, "h100"), estimate(model, tuned, "h100")
    assert b.iteration_time_s < 0.8 * a.iteration_time_s
    tokens = full.gbs * full.seq
    attention = model_flops_per_step(model, full) / tokens - 6 * model.params(active=True)
    adapters = lora.model_params(model, 8, "qkv")
    expected = tokens * (4 * model.params(active=True) + 6 * adapters + attention)
    assert model_flops_per_step(model, tuned) == pytest.approx(expected)


@pytest.mark.parametrize(
    ("options", "field"),
    [
        ({"lora_rank": -1}, "lora_rank"),
        ({"lora_targets": "qkv"}, "lora_rank > 0"),
        ({"lora_rank": 8, "lora_targets": "q_proj"}, "lora_targets"),
        ({"lora_rank": 9}, "multiple of tp"),
        ({"lora_rank": 8, "zero": 3, "pp": 2, "framework": "torchtitan"}, "pp 1"),
        ({"lora_rank": 8, "defer_embedding_wgrad": 2}, "defer_embedding_wgrad"),
    ],
)
def test_plans_lora_cannot_take_are_refused_naming_the_field(
    options: dict[str, object], field: str
) -> None:
    with pytest.raises(ConfigError, match=field):
        _plan(**options)


def test_lora_refuses_mixture_of_experts() -> None:
    with pytest.raises(ConfigError, match="dense models"):
        ParallelPlan.build(load_model("qwen3-30b-a3b"), lora_rank=8)


#: published LoRA runs (NeMo 24.12 performance summary; MLPerf Training v4.0 NVIDIA and
#: v5.1 Cisco Llama 2 70B LoRA): each within 25 % (docs/estimate.md, "LoRA fine-tuning")
LORA_ROWS = [
    ("HELDOUT3", "NEMO2412-LoRA-LLAMA2-7B"),
    ("HELDOUT3", "NEMO2412-LoRA-LLAMA2-13B"),
    ("HELDOUT3", "NEMO2412-LoRA-LLAMA2-70B"),
    ("HELDOUT5", "MLP51-CISCO-L2-70B-LORA-64"),
    ("HELDOUT5", "MLP40-NV-L2-70B-LORA-1024"),
]


@pytest.mark.parametrize(("name", "row_id"), LORA_ROWS)
def test_published_lora_runs_estimate_within_25_percent(name: str, row_id: str) -> None:
    assert abs(row_error(name, row_id)) < 0.25


def test_cli_prices_lora_and_names_it_in_the_header_and_the_json() -> None:
    args = ["estimate", "--model", "llama2-7b", "--dp", "8", "--gbs", "32", "--seq", "4096"]
    args += ["--precision", "fp8", "--lora-rank", "8", "--lora-targets", "qkv"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert "LoRA rank 8 on qkv" in out.output.splitlines()[0]
    js = CliRunner().invoke(cli, [*args, "--json"])
    result = json.loads(js.stdout)["result"]
    assert result["plan"]["lora_rank"] == 8 and result["plan"]["lora_targets"] == "qkv"
    assert any(a.startswith("LoRA fine-tuning") for a in result["assumptions"])
    assert result["memory"]["gradients_gb"] < 0.01
    bad = CliRunner().invoke(cli, [*args[:-2], "--lora-targets", "attention"])
    assert bad.exit_code == 4 and "lora_targets" in bad.output


def test_api_takes_the_lora_keywords() -> None:
    import lumos

    est = lumos.estimate("llama2-7b", dp=8, gbs=32, seq=4096, lora_rank=8, lora_targets="qkv")
    assert est.plan.lora_rank == 8 and est.to_json()["plan"]["lora_targets"] == "qkv"


def test_tp_without_sequence_parallelism_reduces_the_column_adapters_input_gradient() -> None:
    g, _ = _rank0(_plan(lora_rank=RANK, sequence_parallel=False))
    names = _names(g)
    reduced = {names[i] for i in np.flatnonzero((g.type == COLL) & (g.group == TP))}
    assert "layer0.qkv.lora_a.dgrad_reduce" in reduced
    sp, _ = _rank0(_plan(lora_rank=RANK))
    assert "layer0.qkv.lora_a.dgrad_reduce" not in _names(sp)  # folded into TE's reduce


def test_rank_past_an_adapted_linear_is_refused() -> None:
    """A rank above an adapted linear's smaller side (Llama 3 8B: hidden 4,096) cannot
    raise the update's rank: exit 4 naming the linear and the limit (was priced: a 16,384
    rank adapter with more weights than the model's linears). The limit itself passes."""
    args = ["estimate", "--model", "llama3-8b", "--seq", "512", "--gbs", "1"]
    bad = CliRunner().invoke(cli, [*args, "--lora-rank", "16384"])
    assert bad.exit_code == 4, bad.output
    assert "lora_rank 16384 is larger than the qkv linear's smaller side (4096 in" in bad.output
    fc2 = CliRunner().invoke(cli, [*args, "--lora-rank", "8192", "--lora-targets", "fc2"])
    assert fc2.exit_code == 4 and "fc2 linear's smaller side (14336 in, 4096 out)" in fc2.output
    with pytest.raises(ConfigError, match="lora_rank 1026 is larger than the proj"):
        _plan(lora_rank=1026, lora_targets="proj").check(MODEL)
    _plan(lora_rank=1024, lora_targets="proj").check(MODEL)  # the tiny model's hidden
