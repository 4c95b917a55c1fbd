"""Count the memory passes of Megatron-Core 0.9's `SequentialMLP` copies with PyTorch's
profiler (CPU is enough: the ops, not their speed), for `moe.sequential_passes`.

The pattern (megatron/core/transformer/moe/experts.py, `SequentialMLP.forward`, the
version with `moe_extended_tp`): `output_local = torch.zeros_like(x)`, then per local
expert `h = x[start:end]`, `output_local[start:end] = expert(h)`, with `start` / `end`
0-dim CPU tensors (the capacity-padded dispatcher's `tokens_per_expert` cumulative sum).
Passes are in units of B (the received rows x hidden): a fill writes 1, a copy 2, an
in-place add 3; allocations and the experts' GEMMs are not counted.

    python scripts/sequential_mlp_bytes.py   # n, forward, backward passes for n = 1, 2, 4, 8
"""

from __future__ import annotations

import math

import torch
from torch.profiler import ProfilerActivity, profile

_PASSES = {"aten::zero_": 1, "aten::fill_": 1, "aten::copy_": 2, "aten::add_": 3}


def _passes(prof: profile, elems: int) -> float:
    total = 0
    for ev in prof.events():
        if ev.name in _PASSES:
            total += _PASSES[ev.name] * math.prod(ev.input_shapes[0])
    return total / elems


def count(n: int, rows: int = 64, hidden: int = 32) -> tuple[float, float]:
    """(forward, backward) passes over B of the copies around `n` local experts."""
    x = torch.randn(rows, hidden, requires_grad=True)
    ws = [torch.randn(hidden, hidden, requires_grad=True) for _ in range(n)]
    counts = torch.full((n,), rows // n)
    cuts = torch.cat((torch.zeros(1, dtype=torch.long), torch.cumsum(counts, 0)))
    grad = torch.ones(rows, hidden)
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as fwd:
        out = torch.zeros_like(x)
        for e in range(n):
            out[cuts[e] : cuts[e + 1]] = x[cuts[e] : cuts[e + 1]] @ ws[e]
    with profile(activities=[ProfilerActivity.CPU], record_shapes=True) as bwd:
        out.backward(grad)
    return _passes(fwd, rows * hidden), _passes(bwd, rows * hidden)


if __name__ == "__main__":
    for n in (1, 2, 4, 8):
        f, b = count(n)
        print(f"{n} local experts: forward {f:g} B, backward {b:g} B")
