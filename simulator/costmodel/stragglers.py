"""The slowest GPU of a job: synchronous training runs at its pace.

GPUs of one model and SKU do not sustain the same tensor-core throughput: manufacturing
spread and power management give each its own sustained clock under load (Sinha et al.,
"Not All GPUs Are Created Equal", SC'22: 8 % average spread between the fastest and the
slowest GPU of clusters of hundreds to tens of thousands of GPUs, on every application and
cooling method studied). A data-, tensor- or pipeline-parallel step synchronises every rank
at least once, so it runs at the pace of its slowest GPU, and the expected slowest of N GPUs
drifts further from the mean as N grows: this is why published weak-scaling tables lose a
few percent from one node to thousands while a model of one mean GPU stays flat.

`clock_spread` (`hwconfigs/kernels/<gpu>.yaml`) is the relative standard deviation of the
sustained tensor throughput across GPUs; the slowest of N runs at
`1 - clock_spread * z(N)` of the mean, `z(N)` the expected largest of N standard normal
draws (integrated numerically, cached per N). The file's `sustained_clock_fraction` is the
pace of `clock_reference_gpus` GPUs (8 for the shipped files: a busy node's clock, a
bound; 1 for a clock measured on one GPU), so a job of N GPUs runs at
`(1 - clock_spread * z(N)) / (1 - clock_spread * z(reference))` of it. Memory-bound
kernels keep their speed (HBM bandwidth does not follow the SM clock).
"""

from __future__ import annotations

import dataclasses
import math
from functools import lru_cache

from lumos.hwconfigs.kernel_tables import KernelPhysics

#: integration grid of `expected_max_normal`: [-LIMIT, LIMIT] in STEPS midpoints
_LIMIT, _STEPS = 9.0, 3600


@lru_cache(maxsize=256)
def expected_max_normal(n: int) -> float:
    """Expected largest of `n` independent standard normal draws (0 for n <= 1):
    the integral of x * d/dx Phi(x)^n, by the midpoint rule (error < 1e-6 up to n = 10^7)."""
    if n <= 1:
        return 0.0
    h = 2 * _LIMIT / _STEPS
    total = 0.0
    for i in range(_STEPS):
        x = -_LIMIT + (i + 0.5) * h
        cdf = 0.5 * math.erfc(-x / math.sqrt(2))
        pdf = math.exp(-0.5 * x * x) / math.sqrt(2 * math.pi)
        total += x * n * pdf * cdf ** (n - 1)
    return total * h


def slowest_gpu_fraction(physics: KernelPhysics, gpus: int) -> float:
    """Tensor throughput of the slowest of `gpus` GPUs, as a fraction of the pace
    `sustained_clock_fraction` describes (the slowest of `clock_reference_gpus`: above 1
    for a job smaller than that)."""
    spread = physics.clock_spread
    reference = 1.0 - spread * expected_max_normal(physics.clock_reference_gpus)
    return max(0.0, 1.0 - spread * expected_max_normal(gpus)) / reference


def slowest_gpu(physics: KernelPhysics, gpus: int) -> KernelPhysics:
    """`physics` with the sustained clock of the slowest of `gpus` GPUs."""
    if physics.clock_spread <= 0 or gpus == physics.clock_reference_gpus:
        return physics
    clock = physics.sustained_clock_fraction * slowest_gpu_fraction(physics, gpus)
    return dataclasses.replace(physics, sustained_clock_fraction=min(1.0, clock), clock_spread=0.0)
