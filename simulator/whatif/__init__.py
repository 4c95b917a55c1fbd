"""What-if from a trace: structure recovery and graph edits (layers, width, DP/PP/TP, hardware).

Each edit is a pure function of per-rank graphs (and hardware) returning new ones; they
compose. Imports the simulator core, the cost model and the network model; nothing imports it
but the CLI, the facade and `sweep`.
"""
