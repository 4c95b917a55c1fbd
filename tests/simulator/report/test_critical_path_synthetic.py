"""Critical path and breakdown on a synthetic GPT-like step (TP all-reduces on a comm
stream, pipeline send/recv between stages, DP all-reduces), folded and unfolded."""

from __future__ import annotations

from lumos.simulator.report.breakdown import breakdown
from lumos.simulator.report.critical_path import critical_path
from lumos.simulator.run import SimOptions, simulate
from lumos.simulator.workload.synthetic import StepShape, synthetic_step


def test_path_crosses_pipeline_stages_and_matches_the_step_time() -> None:
    result = simulate(synthetic_step(StepShape()), SimOptions())
    path = critical_path(result)
    assert path.total_ns == result.iteration_time_ns == sum(s.dur_ns for s in path.steps)
    assert all(a.end_ns == b.start_ns for a, b in zip(path.steps, path.steps[1:], strict=False))
    # stage 0 finishes last (backward ends there) but waits on stage 1 for its gradients
    stage_of = {r: (r // 2) % 2 for r in range(8)}
    assert {stage_of[r] for r in path.ranks} == {0, 1}
    cats = {c.name: c.share for c in path.by_category()}
    assert cats["gpu compute"] > 0.3 and cats["communication"] > 0.3
    for b in breakdown(result):
        assert b.basis == "gpu" and b.overlapped_ns > 0
        assert sum(b.parts().values()) == b.iteration_ns


def test_folded_and_unfolded_runs_report_the_same() -> None:
    shape = StepShape(dp=4)
    full = simulate(synthetic_step(shape), SimOptions())
    folded = simulate(synthetic_step(shape), SimOptions(fold=True))
    assert [b.parts() for b in breakdown(folded)] == [b.parts() for b in breakdown(full)]
    assert critical_path(folded).total_ns == critical_path(full).total_ns
