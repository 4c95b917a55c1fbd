"""One generated chunk pass as named columns, for tests that read single kernels of it."""

from __future__ import annotations

import numpy as np

from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.workload import ParallelPlan
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.spec import ModelSpec


def stage0_pass(
    model: ModelSpec, plan: ParallelPlan, km: KernelModel, forward: bool
) -> dict[str, np.ndarray]:
    """Stage 0's first chunk pass: its node columns, with `name` as strings."""
    gen = Generator(model, plan, km)
    blk = gen.block(0, 0, forward)
    out = dict(blk.cols)
    out["name"] = np.asarray(gen.names.as_list())[blk.name]
    return out


def node_value(cols: dict[str, np.ndarray], name: str, col: str = "dur") -> float:
    """Column `col` of the one node called `name` (asserts there is exactly one)."""
    mask = cols["name"] == name
    assert mask.sum() == 1, name
    return float(cols[col][mask][0])
