"""`distinct` is `np.unique` of a 1-d array, without numpy 2's hash path (and its numpy.ma)."""

from __future__ import annotations

import subprocess
import sys

import numpy as np

from lumos.simulator.distinct import distinct


def test_distinct_is_np_unique() -> None:
    rng = np.random.default_rng(3)
    cases = [np.zeros(0, np.int64), np.array([5]), np.array([-1, -1, 7, 3, 7]), np.array([2, 2])]
    cases += [rng.integers(-5, 50, int(rng.integers(1, 200))) for _ in range(50)]
    for values in cases:
        got = distinct(values)
        assert got.dtype == values.dtype and got.tolist() == np.unique(values).tolist()


def test_simulate_start_up_does_not_import_numpy_ma() -> None:
    code = (
        "import sys, lumos.simulator.run, lumos.simulator.report.summary\n"
        "from lumos.simulator.workload.synthetic import StepShape, synthetic_step\n"
        "from lumos.simulator.report.summary import build_report\n"
        "r = lumos.simulator.run.simulate(synthetic_step(StepShape(tp=2, pp=2, dp=1, "
        "layers_per_stage=1, microbatches=2)))\n"
        "build_report(r)\n"
        "print('numpy.ma' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"
