"""Design-space sweeps: enumerate parallel plans or what-if edits, run them on a pool or Ray.

Sits on top of `workload` and `whatif`; each point is one pure simulation.
"""
