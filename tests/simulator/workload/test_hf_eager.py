"""The `hf-eager` kernel profile (`--framework hf-eager`): a Hugging Face Transformers model
class trained in eager PyTorch on its flash-attn 2 path (`simulator/workload/framework.py`,
from huggingface/transformers modeling_llama.py), each difference from torchtitan's eager
profile and from Megatron's on a small plan, named after what it changes in the kernels."""

from __future__ import annotations

import dataclasses
import json

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.framework import ATTENTION, EAGER, PROFILES
from tests.simulator.workload.passes import node_value, stage0_pass
from tests.simulator.workload.tiny_models import tiny_llama

KM = KernelModel.for_gpu(load_system("h100").gpu)
TINY = tiny_llama(4096)  # 8 query heads, 2 KV heads of 128
BASE = ParallelPlan(mbs=1, gbs=1, seq=4096, zero=0)
T, QK = 4096, (8 + 2) * 128  # tokens; q and k elements a token


def _pass(framework: str, forward: bool, plan: ParallelPlan = BASE) -> dict:
    return stage0_pass(TINY, dataclasses.replace(plan, framework=framework), KM, forward)


def test_hf_rope_is_the_rotate_half_chain_not_torchtitans_complex_multiply() -> None:
    """`q * cos + rotate_half(q) * sin`: 20 B a q / k element in 5 kernels forward, 30 B in
    9 backward; torchtitan's complex multiply 20 B in 3 both ways; Megatron's fused 4 B."""
    hf_f, hf_b = _pass("hf-eager", True), _pass("hf-eager", False)
    assert node_value(hf_f, "layer0.rope", "nbytes") == 20 * T * QK
    assert node_value(hf_b, "layer0.rope_bwd", "nbytes") == 30 * T * QK
    assert EAGER["rope_rotate_half"][0].kernels == 5
    titan_b = _pass("torchtitan", False)
    assert node_value(titan_b, "layer0.rope_bwd", "nbytes") == 20 * T * QK
    assert node_value(_pass("megatron", True), "layer0.rope", "nbytes") == 4 * T * QK


def test_hf_flash_attention_2_reads_the_kv_heads_without_repeat_kv() -> None:
    """`LlamaFlashAttention2` hands the KV heads to flash-attn as they are: no `repeat_kv`
    copy (torchtitan's SDPA path has one), attention at flash-attn 2's efficiency."""
    hf = _pass("hf-eager", True)
    assert "layer0.repeat_kv" not in set(hf["name"])
    assert "layer0.repeat_kv" in set(_pass("torchtitan", True)["name"])
    over = KM.physics.kernel_overhead_ns
    fused = _pass("megatron", True)
    ratio = (node_value(hf, "layer0.attention") - over) / (
        node_value(fused, "layer0.attention") - over
    )
    assert ratio == pytest.approx(1 / ATTENTION["fa2"][0], rel=1e-3)


def test_hf_norm_mlp_and_loss_are_torchtitans_eager_chains() -> None:
    """`LlamaRMSNorm`, `LlamaMLP` and the FP32 cross-entropy are the same op chains as
    torchtitan's eager Llama (36 / 10 / 14 B an element forward)."""
    hf, titan = _pass("hf-eager", True), _pass("torchtitan", True)
    for name in ("layer0.norm1", "layer0.activation"):
        assert node_value(hf, name, "nbytes") == node_value(titan, name, "nbytes")
    assert node_value(hf, "layer0.norm1", "nbytes") == 36 * T * 1024
    profile = PROFILES["hf-eager"]
    assert profile.eager_loss and profile.vocab_multiple == 1 and not profile.repeat_kv


def test_hf_under_zero3_gathers_into_the_parameters_without_fsdp2_copies() -> None:
    """DeepSpeed's ZeRO-3 and FSDP1 gather into the parameters' own storage: no FSDP2
    copy-out / copy-in and a BF16 gradient reduce-scatter (torchtitan: both copies, FP32)."""
    plan = dataclasses.replace(BASE, dp=8, gbs=8, zero=3)
    fwd, bwd = _pass("hf-eager", True, plan), _pass("hf-eager", False, plan)
    assert "layer1.fsdp_copy_out" not in set(fwd["name"])
    assert "layer1.fsdp_copy_in" not in set(bwd["name"])
    rs = bwd["name"] == "layer1.grad_reduce_scatter"
    assert bwd["csize"][rs][0] == 2 * TINY.layer_params()
    assert "layer1.fsdp_copy_out" in set(_pass("torchtitan", True, plan)["name"])


def test_cli_estimate_takes_framework_hf_eager() -> None:
    """`lumos estimate --framework hf-eager` runs and its plan keeps the profile; the eager
    chains make it slower than Megatron's fused kernels on the same plan."""
    args = ["estimate", "--model", "llama2-7b", "--gpus", "8", "--tp", "1", "--dp", "8"]
    args += ["--mbs", "1", "--gbs", "8", "--seq", "4096", "--zero", "3", "--json"]
    runner = CliRunner()
    hf = runner.invoke(cli, [*args, "--framework", "hf-eager"])
    mega = runner.invoke(cli, args)
    assert hf.exit_code == 0 and mega.exit_code == 0, hf.output
    hf_out, mega_out = json.loads(hf.output)["result"], json.loads(mega.output)["result"]
    assert hf_out["plan"]["framework"] == "hf-eager"
    assert hf_out["iteration_time_s"] > mega_out["iteration_time_s"]
