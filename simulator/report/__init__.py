"""What a simulated run means to a person: breakdown, critical path, timeline, plots, compare.

Everything here reads a finished `SimResult` (and, for `compare`, the measured trace's
attributes); nothing here changes a simulation.
"""
