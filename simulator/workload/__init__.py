"""Generated training steps: model specs + parallel plans → per-rank graphs, no trace needed.

`estimate(model, plan, hw)` is the trace-free estimator (`step`): model specs (`spec`,
built-ins in `models.yaml`), parallel plans and rank placement (`plan`), pipeline orders
(`schedule`), per-rank graph generation of only the distinct ranks (`generate`, from
`chunk` / `layer` / `attention` blocks), memory per GPU (`memory`), the time breakdown
(`breakdown`) and Chakra ET output (`etwrite`). `synthetic` builds small GPT-like steps
for the simulator's benchmarks and folding tests.
"""

from lumos.simulator.workload.plan import ParallelPlan, Precision, Recompute
from lumos.simulator.workload.spec import ModelSpec, builtin_models, load_model
from lumos.simulator.workload.step import EstimateResult, estimate, generate

__all__ = [
    "EstimateResult",
    "ModelSpec",
    "ParallelPlan",
    "Precision",
    "Recompute",
    "builtin_models",
    "estimate",
    "generate",
    "load_model",
]
