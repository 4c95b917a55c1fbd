"""What a hybrid Mamba-2 / Transformer model's layers keep for their backward (`memory`).

Per micro-batch on one rank, by layer kind (`hybrid`): a Mamba-2 layer its input, its
norm's output and the mixer's saved tensors (`mamba.mamba_activation_bytes`); an attention
layer what a transformer layer's attention half keeps (`memory._attention_bytes`: input,
norm output, q k v, the attention output, scores when unfused and not re-computed); an MLP
layer what its MLP half keeps (input, norm output, FC1's output and FC2's input unless the
`mlp` recompute module re-runs it); an MoE layer what a transformer MoE layer's MLP half
keeps (`memory._moe_mlp_bytes`: input, norm output, router logits, the routed rows' FC1
input, output and FC2 input on the busiest EP rank, the shared expert's tensors). Full
recomputation keeps each layer's input only. The
figure is the mean over the pattern (each stage's own mix of kinds is not tracked: a
pipelined hybrid's busiest stage may keep a few percent more).
"""

from __future__ import annotations

from collections import Counter

from lumos.simulator.workload.dims import BF16, Ctx
from lumos.simulator.workload.mamba import mamba_activation_bytes
from lumos.simulator.workload.memory import (
    _attention_bytes,
    _linear_input,
    _moe_mlp_bytes,
    _norm_output,
)
from lumos.simulator.workload.plan import Recompute


def hybrid_activation_bytes(ctx: Ctx) -> float:
    """Mean bytes a hybrid model's layer keeps (module doc)."""
    x = ctx.T_sp * ctx.h * BF16
    if ctx.plan.recompute is Recompute.FULL:
        return float(x)
    counts = Counter(ctx.model.pattern)
    inner = ctx.T * (ctx.up_width * BF16 + ctx.ffn * _linear_input(ctx))
    inner = 0 if "mlp" in ctx.plan.selective_modules else inner
    per_kind = {
        "M": mamba_activation_bytes(ctx, _linear_input(ctx), _norm_output(ctx)),
        "*": _attention_bytes(ctx),
        "-": float(x + _norm_output(ctx) + inner),
    }
    if "E" in counts:
        per_kind["E"] = _moe_mlp_bytes(ctx)
    return sum(n * per_kind[k] for k, n in counts.items()) / ctx.model.layers
