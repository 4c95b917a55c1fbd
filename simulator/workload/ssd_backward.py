"""The SSD scan's backward as mamba_ssm runs it in training: its Triton kernels and the
PyTorch ops between them, each with the bytes it moves.

`_mamba_chunk_scan_combined_bwd` (state-spaces/mamba mamba_ssm/ops/triton/ssd_combined.py;
the wrappers in ssd_chunk_scan.py @ 1e6aa5e1, ssd_chunk_state.py, ssd_state_passing.py
@ 07429724) first recomputes the forward's cumsum, C·B^T, chunk states and their passing —
the passing without an output dtype, so the passed states stay FP32 here (`out_dtype`
defaults to the input's) where the forward writes BF16. Then: dz and the ungated dout
(`_chunk_scan_bwd_dz`), the states' gradient in the states' dtype, FP32
(`_chunk_scan_bwd_dstates`), their backward passing, which reads the FP32 states and
dstates and writes both in BF16 (`_state_passing_bwd`, `dstates_dtype` / `states_dtype`
x.dtype: `states_converted`), dx with ddt (`_chunk_scan_chunk_state_bwd_dx`, reading the
BF16 dstates), dB and dC (`_chunk_state_bwd_db`, `_chunk_scan_bwd_dC`, reading the BF16
dstates / states) and d(C·B^T) (`_chunk_scan_bwd_dcb`) — those three write `splits` partial
FP32 copies (`ssd.head_splits`: a group's heads split over programs by the SM count) that a
`.sum(2)` folds —, C·B^T's two products into dB and dC (`_bmm_chunk_bwd`, the folded FP32
dB / dC as residual, BF16 out), the decay gradient (`_chunk_scan_bwd_ddAcs_stable`, one FP32
row per query block, summed after) and the dt / A / dt_bias gradients (`_chunk_cumsum_bwd`).
The PyTorch ops: `dt.clone()`, the partial sums above, dD's partial sums (sum, cast) after
dz and after dx, the passing's ddA partials summed, the zero-fill of the decay gradient
the db kernel accumulates into (its autotune `init_to_zero` pre-hook), `ddA_cumsum_prev[..., -1]
+= ddA_chunk_cumsum`, the reverse cumsum (`flip`, `cumsum`, `flip`), `ddA += ddA_next +
ddA_prev` (two adds), and the backward of A = -exp(A_log) (two element-wise kernels).
"""

from __future__ import annotations

import math

from lumos.simulator.workload.ssd import FP32, ScanShape

#: query rows a block of `_chunk_scan_bwd_ddAcs_stable` takes: its autotune list holds 32,
#: 64 and 128 (ssd_chunk_scan.py @ 1e6aa5e1); the middle one assumed (not measured), so a
#: chunk of Q writes Q / 64 partial rows
DDA_BLOCK_ROWS = 64
#: query rows a block of `_chunk_scan_bwd_dz` / the dx kernel keeps a dD partial for
#: (`BLOCK_SIZE_min = 32`, ssd_chunk_scan.py)
DD_BLOCK_ROWS = 32


def backward_kernels(z: ScanShape) -> list[tuple[float, float]]:
    """(FLOPs, bytes) of the fifteen Triton kernels in order (module doc): four recomputed,
    dz, dstates, their passing, dx, dB, dC, d(C·B^T), its two products, the decay gradient,
    the dt / A / dt_bias gradients."""
    state, intra, cb = z.flops()
    s32, s16 = z.states, z.states / 2
    partial = z.splits * 2 * z.bc  # dB / dC partials: FP32, `splits` of them
    return [
        (0.0, z.dt / 2 + 2 * z.dt),
        (cb, 2 * z.bc + z.cb),
        (state, z.x + z.bc + 2 * z.dt + s32),
        (0.0, 2 * s32),
        (0.0, 6 * z.x),
        (state, z.bc + z.x + z.dt + s32),
        (0.0, 3 * s32),
        (intra + state, 3 * z.x + z.cb + s16 + z.bc + 3 * z.dt),
        (state, z.x + s16 + z.bc + 3 * z.dt + partial),
        (state, z.x + s16 + z.bc + 2 * z.dt + partial),
        (intra, 2 * z.x + 2 * z.dt + z.splits * z.cb),
        (cb, 4 * z.bc + z.cb),
        (cb, 4 * z.bc + z.cb),
        (intra, 2 * z.x + z.cb + 2 * z.dt + _dda_rows(z) * z.dt),
        (0.0, 3 * z.dt),
    ]


def _dda_rows(z: ScanShape) -> int:
    return math.ceil(z.chunk / DDA_BLOCK_ROWS)


def backward_torch_ops(z: ScanShape) -> tuple[float, ...]:
    """Bytes of each PyTorch op of the scan's backward (module doc), in order."""
    chunk_heads = z.chunks * z.heads * FP32  # one FP32 value a chunk and head
    dd = math.ceil(z.chunk / DD_BLOCK_ROWS) * chunk_heads
    passing = math.ceil(z.head_dim * z.state / 64) * chunk_heads  # its ddA partials
    a = float(z.heads * FP32 * 2)
    return (
        z.dt,  # dt.clone(), BF16 read and written
        dd + z.heads * FP32,  # dz's dD partials summed
        float(z.heads * FP32 * 2),  # and cast
        passing + chunk_heads,  # the passing's ddA partials summed
        dd + z.heads * FP32,  # dx's dD partials summed
        float(z.heads * FP32 * 2),  # and cast
        z.dt,  # zero-fill of ddA_next (init_to_zero)
        (z.splits + 1) * 2 * z.bc,  # dB.sum(2)
        (z.splits + 1) * 2 * z.bc,  # dC.sum(2)
        (z.splits + 1) * z.cb,  # dcb.sum(2)
        3 * chunk_heads,  # ddA_cumsum_prev[..., -1] += ddA_chunk_cumsum
        2 * z.dt,  # flip
        2 * z.dt,  # cumsum
        2 * z.dt,  # flip
        (_dda_rows(z) + 1) * z.dt,  # the decay gradient's rows summed
        3 * z.dt,  # ddA_next + ddA_prev
        3 * z.dt,  # ddA += that
        a,  # A = -exp(A_log) backward: the neg's
        a,  # and the exp's
    )
