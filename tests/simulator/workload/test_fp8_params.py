"""FP8 parameters (`fp8_param_gather`: Megatron-Core's `--fp8-param-gather`, NeMo's
`fp8_params`, MLPerf NVIDIA's `FP8_PARAMS=True`): the linear weights all-gathered in FP8
beside the BF16 embedding, the optimizer's FP8 cast, the weights' memory; refused where it
is not modelled."""

from __future__ import annotations

import json

import numpy as np
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.errors import ConfigError
from lumos.simulator.graph import COLL, RankGraph
from lumos.simulator.network.api import ALL_GATHER
from lumos.simulator.workload import ParallelPlan, estimate, generate
from lumos.simulator.workload.block import DP
from lumos.simulator.workload.fp8_params import QUANTIZE_EXTRA_BYTES, gather_bytes
from lumos.simulator.workload.generate import OPTIMIZER_BYTES_PER_PARAM
from lumos.simulator.workload.spec import ModelSpec, model_from_dict
from tests.simulator.workload.tiny_models import TINY_LLAMA

MODEL: ModelSpec = model_from_dict({**TINY_LLAMA, "layers": 4, "seq": 2048}, "tiny4")
DP_SIZE = 2


def _plan(**kw: object) -> ParallelPlan:
    opts: dict[str, object] = dict(dp=DP_SIZE, gbs=4, zero=1, precision="fp8")
    opts.update(kw)
    return ParallelPlan.build(MODEL, **opts)  # type: ignore[arg-type]


def _rank0(plan: ParallelPlan) -> tuple[RankGraph, np.ndarray]:
    step = generate(MODEL, plan, "h100")
    g = step.graphs[0]
    return g, step.nbytes[g.rank]


def _gathered(g: RankGraph) -> int:
    mask = (g.type == COLL) & (g.group == DP) & (g.comm_type == ALL_GATHER)
    return int(g.comm_size[mask].sum())


def test_the_linear_weights_are_all_gathered_in_fp8_the_embedding_in_bf16() -> None:
    layers = MODEL.layers * MODEL.layer_params()
    emb = 2 * MODEL.vocab * MODEL.hidden  # untied: embedding and output layer
    bf16, _ = _rank0(_plan())
    fp8, _ = _rank0(_plan(fp8_param_gather=True))
    assert _gathered(bf16) == (layers + emb) * 2 // DP_SIZE
    assert _gathered(fp8) == pytest.approx((layers * 1 + emb * 2) / DP_SIZE, abs=8)


def test_gather_bytes_split_each_bucket_by_dtype() -> None:
    """Buckets (lowest layer, weights) in backward order, cut from per-layer weights whose
    first entry also holds the embedding (100) and a trailing entry the output layer."""
    params = [110, 10, 10, 100]  # layer 0 + embedding, layers 1-2, output layer alone
    linear = [10, 10, 10]
    buckets = [(2, 110), (0, 130)]
    assert gather_bytes(buckets, params, linear, on=False) == [220, 260]
    assert gather_bytes(buckets, params, linear, on=True) == [10 + 200, 20 + 220]


def test_the_optimizer_casts_its_shard_of_main_weights_to_fp8() -> None:
    """3 bytes a linear weight of the shard more: the amax read (4) and the FP8 write (1)
    against the BF16 write (2)."""
    names = ("optimizer_step",)
    shard_bytes = []
    for on in (False, True):
        g, nbytes = _rank0(_plan(fp8_param_gather=on))
        idx = [i for i, n in enumerate(g.name_idx) if g.names[n] in names]
        shard_bytes.append(int(nbytes[idx[0]]))
    linear_shard = MODEL.layers * MODEL.layer_params() // DP_SIZE
    assert QUANTIZE_EXTRA_BYTES == 3
    assert shard_bytes[1] - shard_bytes[0] == linear_shard * QUANTIZE_EXTRA_BYTES
    assert shard_bytes[0] % OPTIMIZER_BYTES_PER_PARAM == 0


def test_fp8_weights_hold_half_the_bytes_of_bf16_plus_their_fp8_copies() -> None:
    """BF16 weight + TE's cached FP8 cast and transpose (4 B) -> the FP8 weight and its
    transpose (2 B)."""
    bf16 = estimate(MODEL, _plan(), "h100").memory
    fp8 = estimate(MODEL, _plan(fp8_param_gather=True), "h100").memory
    assert bf16 is not None and fp8 is not None
    assert fp8.weights_gb == pytest.approx(bf16.weights_gb / 2)
    assert fp8.gradients_gb == bf16.gradients_gb and fp8.optimizer_gb == bf16.optimizer_gb


@pytest.mark.parametrize(
    "options",
    [
        {"precision": "bf16"},
        {"framework": "torchtitan"},
        {"zero": 3},
    ],
)
def test_fp8_parameters_are_refused_where_not_modelled(options: dict[str, object]) -> None:
    with pytest.raises(ConfigError, match="fp8_param_gather"):
        _plan(fp8_param_gather=True, **options)


def test_the_cli_flag_reaches_the_plan() -> None:
    args = ["estimate", "--model", "llama3-8b", "--dp", "8", "--gbs", "8", "--seq", "4096"]
    args += ["--precision", "fp8", "--fp8-param-gather", "--json"]
    out = CliRunner().invoke(cli, args)
    assert out.exit_code == 0, out.output
    assert json.loads(out.stdout)["result"]["plan"]["fp8_param_gather"] is True
    bad = CliRunner().invoke(cli, [*args[:-4], "--fp8-param-gather"])
    assert bad.exit_code == 4 and "fp8_param_gather" in bad.output
