"""Generated training steps: model specs + parallel plans → per-rank graphs, no trace needed.

Today `synthetic` builds GPT-like steps for the benchmarks and folding tests; the
trace-free estimator (model specs, plans, the per-rank ET generator) grows here.
"""
