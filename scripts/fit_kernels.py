"""Fit the H100 kernel physics (hwconfigs/kernels/h100_sxm.yaml) to measured kernels.

Data: the TraceLens perf report of a Qwen1.5-0.5B BF16 run on one H100
(`../shared/fixtures/TraceLens/tests/traces/compare_test_e2e/reference/h100_perf_report_csvs/`,
made from a Kineto trace with shapes from its CPU ops): per GEMM shape (M, N, K) the
median kernel time; per element-wise kernel the bytes moved and the achieved TB/s.

Fitted: the GEMM main-loop efficiency η and the pipeline-fill K-equivalent k0, by a
grid search minimising the squared log error of `KernelModel.gemm_ns` over the GEMM
shapes (the model's own wave quantisation and epilogue included); the memory
efficiency as the median achieved bandwidth of element-wise kernels moving at
least 50 MB, over the datasheet HBM bandwidth; the per-kernel overhead as the median
time of kernels moving under 1 MB. Prints the fitted values and each shape's error.

    python scripts/fit_kernels.py
"""

from __future__ import annotations

import csv
import dataclasses
import math
import statistics
import sys
from pathlib import Path

from lumos.hwconfigs.kernel_tables import load_kernel_physics
from lumos.hwconfigs.load import load_gpu
from lumos.simulator.costmodel.kernels import KernelModel

REPORT = (
    Path(__file__).resolve().parents[2]
    / "shared/fixtures/TraceLens/tests/traces/compare_test_e2e/reference/h100_perf_report_csvs"
)


def _gemms() -> list[tuple[int, int, int, float]]:
    out = []
    for r in csv.DictReader((REPORT / "GEMM.csv").open()):
        m, n, k = int(r["param: M"]), int(r["param: N"]), int(r["param: K"])
        if min(m, n, k) >= 256:  # skip degenerate bmm (K = 1)
            out.append((m, n, k, float(r["Kernel Time (µs)_median"]) * 1e3))
    return out


def _elementwise() -> tuple[list[float], list[float]]:
    big, small = [], []
    for name in ("BinaryElementwise.csv", "UnaryElementwise.csv"):
        for r in csv.DictReader((REPORT / name).open()):
            mb = float(r["Data Moved (MB)_first"])
            if mb >= 50:
                big.append(float(r["TB/s_median"]))
            if mb < 1:
                small.append(float(r["Kernel Time (µs)_median"]) * 1e3)
    return big, small


def main() -> int:
    gpu = load_gpu("h100_sxm")
    # the fixture ran one lightly loaded GPU: fit at the clock it ran at (fraction 1)
    base = dataclasses.replace(load_kernel_physics("h100_sxm"), sustained_clock_fraction=1.0)
    gemms = _gemms()
    bw, small = _elementwise()
    mem_eff = statistics.median(bw) * 1e3 / gpu.hbm_bandwidth_gbps
    overhead = statistics.median(small)
    best = (math.inf, 0.0, 0.0)
    for eta in [x / 100 for x in range(55, 101)]:
        for k0 in range(0, 801, 10):
            phys = dataclasses.replace(
                base,
                gemm_efficiency_bf16=eta,
                gemm_k_overhead=float(k0),
                memory_efficiency=mem_eff,
                kernel_overhead_ns=overhead,
            )
            km = KernelModel(gpu, phys)
            err = sum(math.log(km.gemm_ns(m, n, k) / t) ** 2 for m, n, k, t in gemms)
            if err < best[0]:
                best = (err, eta, float(k0))
    _, eta, k0 = best
    print(f"memory_efficiency {mem_eff:.3f} (median of {len(bw)} kernels >= 50 MB)")
    print(f"kernel_overhead_ns {overhead:.0f} (median of {len(small)} kernels < 1 MB)")
    print(f"gemm_efficiency_bf16 {eta:.2f}, gemm_k_overhead {k0:.0f} ({len(gemms)} GEMM shapes)")
    phys = dataclasses.replace(
        base,
        gemm_efficiency_bf16=eta,
        gemm_k_overhead=k0,
        memory_efficiency=mem_eff,
        kernel_overhead_ns=overhead,
    )
    km = KernelModel(gpu, phys)
    shipped = KernelModel(gpu, base)
    for m, n, k, t in gemms:
        print(
            f"  {m}x{n}x{k}: measured {t / 1e3:7.1f} us, fitted {km.gemm_ns(m, n, k) / 1e3:7.1f} us, "
            f"shipped {shipped.gemm_ns(m, n, k) / 1e3:7.1f} us"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
