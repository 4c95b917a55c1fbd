"""Symmetry folding: folded and unfolded runs agree exactly; folding refuses unsafe cases."""

from __future__ import annotations

import numpy as np
import pytest

from lumos.simulator.fold import find_folding
from lumos.simulator.network.api import FixedBandwidthPricer
from lumos.simulator.run import Mode, SimOptions, simulate
from lumos.simulator.workload.synthetic import StepShape, synthetic_step


@pytest.mark.parametrize("mode", [Mode.REPLAY, Mode.MODEL])
def test_folded_and_unfolded_runs_agree_exactly(mode: Mode) -> None:
    graphs = synthetic_step(StepShape(tp=2, pp=3, dp=4, layers_per_stage=2, microbatches=3))
    options = SimOptions(mode, FixedBandwidthPricer(100, 1000))
    full = simulate(graphs, options)
    folded = simulate(graphs, SimOptions(mode, FixedBandwidthPricer(100, 1000), fold=True))
    assert folded.stats["ranks_simulated"] == 3  # one per pipeline stage
    assert full.stats["ranks_simulated"] == 24
    assert folded.iteration_time_ns == full.iteration_time_ns
    for a, b in zip(full.ranks, folded.ranks, strict=True):
        assert a.rank == b.rank
        assert a.iteration_time_ns == b.iteration_time_ns
        assert np.array_equal(a.tasks.start_ns, b.tasks.start_ns)
        assert np.array_equal(a.tasks.end_ns, b.tasks.end_ns)
        assert np.array_equal(a.tasks.wait_ns, b.tasks.wait_ns)
    # rank = (dp * 3 + stage) * 2 + tp: rank 13 is stage 0, rank 9 stage 1, rank 23 stage 2
    assert [folded.rank(r).folded_from for r in (13, 9, 23)] == [0, 2, 4]
    assert folded.rank(2).folded_from is None


def test_a_slower_replica_breaks_its_class() -> None:
    graphs = synthetic_step(StepShape(tp=1, pp=2, dp=3))
    slow = graphs[4]
    slow.dur_ns = slow.dur_ns.copy()
    slow.dur_ns[-1] += 1_000_000
    folding = find_folding(graphs)
    assert folding.rep[4] == 4
    full = simulate(graphs)
    folded = simulate(graphs, SimOptions(fold=True))
    assert [r.iteration_time_ns for r in full.ranks] == [r.iteration_time_ns for r in folded.ranks]
