"""Uneven pipeline splits (`pipesplit`): Megatron-Core's first/last stage layer counts,
embedding/loss accounting and layout strings, hand-checked per chunk; the generator places
layers, embedding and loss per the split, and its ETs validate."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.workload import ParallelPlan, estimate, generate, load_model
from lumos.simulator.workload.etwrite import write_ets
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.pipesplit import chunk_layers, parse_layout
from lumos.simulator.workload.spec import model_from_dict


def _split(layers: int, mtp: int = 0, **plan: object) -> list[int]:
    return chunk_layers(ParallelPlan(**plan), layers, mtp)  # type: ignore[arg-type]


def test_qwen3_235b_pp32_vp3_with_embedding_and_loss_accounted_fills_96_slots() -> None:
    """Megatron-MoE-ModelZoo's Qwen3-235B config (--account-for-embedding/loss-in-pipeline-
    split): 94 layers + 2 = 96 slots over PP 32 x VP 3, one a chunk; chunk 0 holds the
    embedding alone, chunk 95 the loss alone. Before: "94 layers cannot fill 96 chunks"."""
    out = _split(94, pp=32, vp=3, embedding_in_split=True, loss_in_split=True)
    assert out == [0] + [1] * 94 + [0]
    with pytest.raises(ConfigError, match="94 layers cannot fill pp x vp = 96"):
        _split(94, pp=32, vp=3)


def test_accounting_splits_slots_per_stage_then_per_chunk() -> None:
    # 7 layers + embedding = 8 slots over PP 4: 2 a stage, the first stage's chunk 1 layer
    assert _split(7, pp=4, embedding_in_split=True) == [1, 2, 2, 2]
    # 94 + 2 = 96 over PP 8 x VP 4: 12 a stage, 3 a chunk; the first and last chunk 2
    out = _split(94, pp=8, vp=4, embedding_in_split=True, loss_in_split=True)
    assert out == [2] + [3] * 30 + [2] and sum(out) == 94


def test_first_and_last_stage_layers() -> None:
    assert _split(10, pp=4, first_stage_layers=1, last_stage_layers=3) == [1, 3, 3, 3]
    assert _split(10, pp=4, last_stage_layers=1) == [3, 3, 3, 1]
    assert _split(5, pp=2, first_stage_layers=3, last_stage_layers=2) == [3, 2]
    # with VP 2 each stage's count is halved over its two chunks (chunk v = c * pp + stage)
    out = _split(16, pp=4, vp=2, first_stage_layers=2, last_stage_layers=2)
    assert out == [1, 3, 3, 1, 1, 3, 3, 1]


def test_deepseek_v3_megatron_bridge_layout() -> None:
    """Megatron-Bridge's DeepSeek-V3 H100 recipe: PP 8 x VP 4, "Et|(tt|)*30mL"."""
    assert parse_layout("Et|(tt|)*2mL") == ["Et", "tt", "tt", "mL"]
    assert parse_layout("Et*3|(tt|)*2,m|L") == ["Ettt", "tt", "tt", "m", "L"]
    out = _split(61, 1, pp=8, vp=4, pp_layout="Et|(tt|)*30mL")
    assert out == [1] + [2] * 30 + [0]


@pytest.mark.parametrize(
    ("layers", "mtp", "plan", "message"),
    [
        (10, 0, {"pp": 4, "first_stage_layers": 2, "last_stage_layers": 1}, "divide evenly"),
        (10, 0, {"pp": 2, "first_stage_layers": 6, "last_stage_layers": 6}, "divide evenly"),
        (12, 0, {"pp": 2, "vp": 2, "first_stage_layers": 3}, "not divisible by vp 2"),
        (9, 0, {"pp": 4, "embedding_in_split": True, "loss_in_split": True}, "do not divide"),
        (1, 0, {"pp": 2, "embedding_in_split": True, "loss_in_split": True}, "do not divide"),
        (8, 0, {"pp": 2, "first_stage_layers": 4, "embedding_in_split": True}, "combined"),
        (8, 0, {"pp": 1, "first_stage_layers": 4}, "pp > 1"),
        (4, 0, {"pp": 2, "pp_layout": "Ett|ttL|"}, "has 3 stages"),
        (4, 0, {"pp": 2, "pp_layout": "tEt|ttL"}, "embedding E"),
        (4, 0, {"pp": 2, "pp_layout": "Ett|tLt"}, "loss L"),
        (5, 0, {"pp": 2, "pp_layout": "Ett|ttL"}, "places 4 decoder layers"),
        (4, 1, {"pp": 2, "pp_layout": "Ett|ttL"}, "places 0 MTP"),
        (4, 1, {"pp": 2, "pp_layout": "Ettm|ttL"}, "follow every decoder"),
        (4, 1, {"pp": 3, "pp_layout": "Ett|ttm|L"}, "standalone"),
        (4, 0, {"pp": 2, "pp_layout": "Ext|ttL"}, "unknown character 'x'"),
        (4, 0, {"pp": 2, "pp_layout": "Ett|ttL", "last_stage_layers": 2}, "replaces"),
    ],
)
def test_impossible_splits_are_config_errors(
    layers: int, mtp: int, plan: dict[str, object], message: str
) -> None:
    with pytest.raises(ConfigError, match=message):
        _split(layers, mtp, **plan)


TINY = {"layers": 6, "hidden": 256, "heads": 8, "kv_heads": 4, "ffn": 512, "vocab": 1024}
TINY |= {"mlp": "swiglu", "norm": "rmsnorm", "seq": 128}


def test_generator_places_embedding_and_loss_on_layerless_chunks() -> None:
    spec = model_from_dict(TINY, "tiny")
    plan = ParallelPlan.build(
        spec, tp=2, pp=4, vp=2, gbs=8, embedding_in_split=True, loss_in_split=True
    )
    gen = Generator(spec, plan, _km())
    assert gen.chunk_layers == [0, 1, 1, 1, 1, 1, 1, 0]
    assert gen.first_layer == [0, 0, 1, 2, 3, 4, 5, 6]
    emb = spec.vocab * spec.hidden // 2
    assert gen.chunk_params(0) == [emb] and gen.chunk_params(7) == [emb]
    assert gen.buckets(0) == [(0, emb)]
    fwd0 = gen.block(0, 0, True)
    last = gen.block(3, 1, True)
    names = gen.names.as_list()
    assert "embedding" in {names[i] for i in fwd0.name}
    assert not any(names[i].startswith("layer") for i in fwd0.name)
    assert "loss" in {names[i] for i in last.name}
    # every stage still runs the same 1F1B / interleaved order: only the chunks' contents move
    step = gen.step()
    assert len(step.graphs) == 4


def test_uneven_plan_estimates_and_memory_follows_the_stages() -> None:
    spec = model_from_dict(TINY, "tiny")
    even = ParallelPlan.build(spec, tp=1, pp=2, gbs=8)
    heavy = dataclasses.replace(even, first_stage_layers=5, last_stage_layers=1)
    a, b = estimate(spec, even, "h100", exact=True), estimate(spec, heavy, "h100", exact=True)
    assert b.iteration_time_s > a.iteration_time_s  # stage 0 runs 5 of 6 layers
    assert b.memory.stage == 0 and b.memory.total_gb > a.memory.total_gb


def test_moe_overlap_pairs_run_layerless_chunks() -> None:
    """EP all-to-all overlap merges a forward with a backward: a chunk with no decoder layer
    (the loss-only chunk) is a no-op layer there, its pipeline marks still set."""
    shape = TINY | {"layers": 6, "experts": 4, "top_k": 2, "moe_ffn": 128}
    spec = model_from_dict(shape, "tiny-moe")
    plan = ParallelPlan.build(
        spec, tp=1, pp=2, vp=2, dp=2, ep=2, gbs=8, a2a_overlap=True, pp_layout="Et|tt|tt|tL"
    )
    assert plan.chunk_layers(spec) == [1, 2, 2, 1]
    plan = dataclasses.replace(plan, pp_layout="Ett|ttt|t|L")
    assert plan.chunk_layers(spec) == [2, 3, 1, 0]
    result = estimate(spec, plan, "h100", exact=True)
    assert result.iteration_time_s > 0


def test_uneven_plan_ets_validate(tmp_path: Path) -> None:
    spec = dataclasses.replace(load_model("qwen3-30b-a3b"), layers=4)
    plan = ParallelPlan.build(
        spec, tp=2, pp=2, vp=2, dp=2, ep=2, etp=1, gbs=8, seq=256, pp_layout="E|tt|t|tL"
    )
    step = generate(spec, plan, "h100")
    write_ets(step, spec, plan, tmp_path / "ets", all_ranks=True)
    result = CliRunner().invoke(cli, ["et", "validate", str(tmp_path / "ets"), "--json"])
    assert result.exit_code == 0, result.output
    report = json.loads(result.output)["result"]
    assert (report["files"], report["errors"], report["problems"]) == (8, 0, [])
    from lumos.converters.astra_sim.export import ExportRequest, export_astra_sim

    summary = export_astra_sim(ExportRequest(str(tmp_path / "ets"), tmp_path / "b", hw="h100"))
    assert summary.ranks == 8 and summary.preflight.sends == summary.preflight.recvs > 0


def test_cli_flags(tmp_path: Path) -> None:
    args = ["estimate", "--model", "llama3-8b", "--pp", "4", "--gbs", "8", "--seq", "512"]
    two = [*args[:4], "2", *args[5:]]
    out = CliRunner().invoke(cli, [*two, "--embedding-in-split", "--loss-in-split", "--json"])
    assert out.exit_code == 0, out.output
    plan = json.loads(out.output)["result"]["plan"]
    assert plan["embedding_in_split"] and plan["loss_in_split"]
    out = CliRunner().invoke(cli, [*args, "--first-stage-layers", "5", "--json"])
    assert out.exit_code == 0, out.output
    assert json.loads(out.output)["result"]["plan"]["first_stage_layers"] == 5
    text = CliRunner().invoke(cli, [*args, "--pp-layout", "Et*8|t*8|t*8|t*8L"])
    assert text.exit_code == 0 and "layout Et*8|t*8|t*8|t*8L" in text.output, text.output
    bad = CliRunner().invoke(cli, [*args, "--pp-layout", "Et*8|t*8|t*8|t*7L"])
    assert bad.exit_code == 4 and "places 31 decoder layers" in bad.output


def _km():  # type: ignore[no-untyped-def]
    from lumos.hwconfigs.load import load_system
    from lumos.simulator.costmodel.kernels import KernelModel

    return KernelModel.for_gpu(load_system("h100").gpu)


def test_activation_memory_counts_each_chunks_own_layers() -> None:
    """Stage 0 of PP 2 x VP 2 runs 4 layers either way, but its first chunk (the one the
    warm-up fills, 3 of its 5 passes in flight at the peak: 13 layer-passes with 3 + 1 and
    9 with 1 + 3 against the mean chunk's 10) holds more or fewer of them."""
    from lumos.simulator.workload.schedule import in_flight, stage_order
    from lumos.simulator.workload.step import plan_memory

    order = stage_order(2, 2, 4, 0)
    assert (in_flight(order), in_flight(order, [3, 1]), in_flight(order, [1, 3])) == (5, 13, 9)
    spec = model_from_dict(TINY | {"layers": 8}, "tiny8")
    base = ParallelPlan.build(spec, pp=2, vp=2, gbs=4, pp_layout="Ettt|t|t|tttL")
    light = dataclasses.replace(base, pp_layout="Et|ttt|ttt|tL")
    heavy_mem = plan_memory(Generator(spec, base, _km()))
    light_mem = plan_memory(Generator(spec, light, _km()))
    assert heavy_mem.stage == 0
    assert heavy_mem.activations_gb > light_mem.activations_gb


def test_zero_layer_first_or_last_stage_is_refused() -> None:
    """`--first-stage-layers 0` / `--last-stage-layers 0`: Megatron-Core's TransformerConfig
    refuses a count of 0 ("must be larger than 0"); exit 4 naming the field and what builds
    an embedding- or loss-only stage (was priced: a stage holding the embedding alone)."""
    args = ["estimate", "--model", "llama3-8b", "--pp", "4", "--gbs", "8", "--seq", "512"]
    for flag, names in (("--first-stage-layers", "embedding"), ("--last-stage-layers", "loss")):
        out = CliRunner().invoke(cli, [*args, flag, "0"])
        assert out.exit_code == 4, out.output
        assert "must be >= 1, got 0" in out.output and f"{names}_in_split" in out.output
    ok = CliRunner().invoke(cli, [*args, "--first-stage-layers", "2", "--json"])
    assert ok.exit_code == 0, ok.output
