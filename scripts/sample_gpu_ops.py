"""Measure the kernels the trace-free estimator prices, on a real GPU, and fit its table.

Run on the GPU you want a `hwconfigs/kernels/<gpu>.yaml` for (needs torch with CUDA):

    python scripts/sample_gpu_ops.py --gpu h100_sxm -o hwconfigs/kernels/h100_sxm.yaml

What it samples (CUDA events around N timed repetitions after warm-up, median of
repeats; run one copy per GPU of the node at once, each with its own CUDA_VISIBLE_DEVICES,
so the clocks are those of a node at its power limit):
  * GEMMs C = A·B over a grid of (M, N, K) from transformer layers (M tokens 512-32768,
    N and K 1024-53248) in BF16, and FP8 (`torch._scaled_mm`, e4m3) where supported;
    weight-gradient shapes also with an FP32 accumulate (`addmm_` into an FP32 C);
  * flash attention forward and backward (`scaled_dot_product_attention`, causal,
    head_dim 128, 8-128 heads, 1K-32K tokens);
  * memory-bound kernels: copy, add, RMS-norm-like reductions over 1 MB-4 GB;
  * the SM clock while the GEMMs ran (`nvidia-smi --query-gpu=clocks.sm`), over the
    boost clock, as `sustained_clock_fraction`.
It then fits the table's parameters the way `scripts/fit_kernels.py` does (main-loop
efficiency per dtype by least squares in log time with the model's own wave quantisation
and epilogue, HBM efficiency as the median of the large copies, kernel overhead as the
median of the tiny ones) and writes the YAML with the measurements as its sources.
Measured points are also written as CSV (`--csv`) for inspection.

Not yet run: no GPU was available when it was written; the shipped tables say where
each of their numbers comes from instead.
"""

from __future__ import annotations

import argparse
import csv
import dataclasses
import math
import statistics
import subprocess
import sys
from pathlib import Path
from typing import Any

GEMM_M = (512, 2048, 8192, 16384, 32768)
GEMM_NK = (1024, 4096, 8192, 12288, 16384, 28672, 53248)
ATTN = [(h, s) for h in (8, 32, 128) for s in (1024, 4096, 8192, 32768)]
MEM_BYTES = [1 << p for p in range(20, 33, 2)]


def _torch() -> Any:
    try:
        import torch
    except ImportError:
        sys.exit("error: needs torch with CUDA (pip install torch)")
    if not torch.cuda.is_available():
        sys.exit("error: no CUDA device")
    return torch


def _time_ms(torch: Any, fn: Any, reps: int = 20) -> float:
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(5):
        start.record()
        for _ in range(reps):
            fn()
        end.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(end) / reps)
    return statistics.median(samples)


def sample_gemms(torch: Any, fp8: bool) -> list[dict[str, Any]]:
    rows = []
    for m in GEMM_M:
        for n in GEMM_NK:
            for k in GEMM_NK:
                if m * n + n * k + m * k > 1.5e9:
                    continue
                a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16)
                b = torch.randn(k, n, device="cuda", dtype=torch.bfloat16)
                rows.append(
                    {
                        "op": "gemm",
                        "dtype": "bf16",
                        "m": m,
                        "n": n,
                        "k": k,
                        "ms": _time_ms(torch, lambda a=a, b=b: a @ b),
                    }
                )
                c = torch.zeros(m, n, device="cuda", dtype=torch.float32)
                rows.append(
                    {
                        "op": "gemm_acc32",
                        "dtype": "bf16",
                        "m": m,
                        "n": n,
                        "k": k,
                        "ms": _time_ms(torch, lambda a=a, b=b, c=c: c.addmm_(a, b)),
                    }
                )
                if fp8:
                    a8 = a.to(torch.float8_e4m3fn)
                    b8 = b.t().contiguous().to(torch.float8_e4m3fn).t()
                    one = torch.ones((), device="cuda")
                    mm = lambda a8=a8, b8=b8, one=one: torch._scaled_mm(  # noqa: E731
                        a8, b8, scale_a=one, scale_b=one, out_dtype=torch.bfloat16
                    )
                    rows.append(
                        {
                            "op": "gemm",
                            "dtype": "fp8",
                            "m": m,
                            "n": n,
                            "k": k,
                            "ms": _time_ms(torch, mm),
                        }
                    )
                del a, b, c
    return rows


def sample_attention(torch: Any) -> list[dict[str, Any]]:
    import torch.nn.functional as F

    rows = []
    for heads, seq in ATTN:
        q, k, v = (
            torch.randn(1, heads, seq, 128, device="cuda", dtype=torch.bfloat16, requires_grad=True)
            for _ in range(3)
        )
        fwd = lambda q=q, k=k, v=v: F.scaled_dot_product_attention(q, k, v, is_causal=True)  # noqa: E731
        out = fwd()
        grad = torch.randn_like(out)
        bwd = lambda out=out, grad=grad: out.backward(grad, retain_graph=True)  # noqa: E731
        rows.append({"op": "attention_fwd", "heads": heads, "seq": seq, "ms": _time_ms(torch, fwd)})
        rows.append({"op": "attention_bwd", "heads": heads, "seq": seq, "ms": _time_ms(torch, bwd)})
    return rows


def sample_memory(torch: Any) -> list[dict[str, Any]]:
    rows = []
    for nbytes in MEM_BYTES:
        x = torch.empty(nbytes // 2, device="cuda", dtype=torch.bfloat16)
        y = torch.empty_like(x)
        rows.append(
            {"op": "copy", "bytes": 2 * nbytes, "ms": _time_ms(torch, lambda x=x, y=y: y.copy_(x))}
        )
    tiny = torch.empty(256, device="cuda")
    rows.append({"op": "tiny", "bytes": 2048, "ms": _time_ms(torch, lambda: tiny.add_(1.0))})
    return rows


def sm_clock_fraction() -> float:
    """Current SM clock over the maximum, from nvidia-smi (read while the GPU is busy)."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=clocks.sm,clocks.max.sm", "--format=csv,noheader,nounits"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.splitlines()[0]
    now, top = (float(x) for x in out.split(","))
    return now / top


def fit(gpu: str, rows: list[dict[str, Any]], clock: float) -> dict[str, Any]:
    """Kernel-physics values from the samples (see module doc)."""
    from lumos.hwconfigs.kernel_tables import load_kernel_physics
    from lumos.hwconfigs.load import load_gpu
    from lumos.simulator.costmodel.kernels import KernelModel

    spec = load_gpu(gpu)
    base = dataclasses.replace(load_kernel_physics(gpu), sustained_clock_fraction=1.0)
    copies = [r for r in rows if r["op"] == "copy" and r["bytes"] >= 1 << 28]
    mem = statistics.median(r["bytes"] / (r["ms"] * 1e6) for r in copies) / spec.hbm_bandwidth_gbps
    overhead = statistics.median(r["ms"] * 1e6 for r in rows if r["op"] == "tiny")
    out: dict[str, Any] = {
        "memory_efficiency": round(mem, 3),
        "kernel_overhead_ns": round(overhead),
    }
    for dtype in ("bf16", "fp8"):
        pts = [r for r in rows if r["op"] == "gemm" and r["dtype"] == dtype]
        if not pts:
            continue
        best = (math.inf, 0.0)
        for eta in [x / 100 for x in range(40, 101)]:
            key = "gemm_efficiency_bf16" if dtype == "bf16" else "gemm_efficiency_fp8"
            phys = dataclasses.replace(
                base, memory_efficiency=mem, kernel_overhead_ns=overhead, **{key: eta}
            )
            km = KernelModel(spec, phys)
            err = sum(
                math.log(km.gemm_ns(r["m"], r["n"], r["k"], dtype) / (r["ms"] * 1e6)) ** 2
                for r in pts
            )
            best = min(best, (err, eta))
        out["gemm_efficiency_" + dtype] = best[1]
    for phase in ("fwd", "bwd"):
        pts = [r for r in rows if r["op"] == f"attention_{phase}"]
        flops = [
            4 * r["heads"] * r["seq"] ** 2 * 128 * 0.5 * (2.5 if phase == "bwd" else 1) for r in pts
        ]
        eff = [f / (r["ms"] * 1e9) / spec.peak_bf16_tflops for f, r in zip(flops, pts, strict=True)]
        out[f"attention_{phase}_efficiency"] = round(max(eff), 3)
    out["sustained_clock_fraction"] = round(clock, 3)
    out["clock_reference_gpus"] = 1  # measured on this one GPU (stragglers.py)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--gpu", required=True, help="hwconfigs GPU name, e.g. h100_sxm")
    ap.add_argument("-o", "--output", type=Path, required=True, help="kernel-physics YAML to write")
    ap.add_argument("--csv", type=Path, default=None, help="also write the raw samples")
    args = ap.parse_args()
    torch = _torch()
    fp8 = torch.cuda.get_device_capability() >= (8, 9)
    rows = sample_gemms(torch, fp8)
    clock = sm_clock_fraction()
    rows += sample_attention(torch) + sample_memory(torch)
    values = fit(args.gpu, rows, clock)
    if args.csv:
        keys = sorted({k for r in rows for k in r})
        with args.csv.open("w", newline="") as f:
            writer = csv.DictWriter(f, keys)
            writer.writeheader()
            writer.writerows(rows)
    import yaml

    from lumos.hwconfigs.kernel_tables import load_kernel_physics

    shipped = dataclasses.asdict(load_kernel_physics(args.gpu))
    shipped.update(values)
    name = torch.cuda.get_device_name()
    shipped["sources"] = [
        f"measured by scripts/sample_gpu_ops.py on {name}, torch {torch.__version__}: "
        f"{len(rows)} kernels; fitted: {', '.join(sorted(values))}",
        *[s for s in shipped["sources"] if not any(k in s for k in values)],
    ]
    shipped["gemm_tile"] = list(shipped["gemm_tile"])
    args.output.write_text(yaml.safe_dump(shipped, sort_keys=False))
    print(f"wrote {args.output}: {values}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
