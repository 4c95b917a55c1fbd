"""lumos's native discrete-event simulator of all ranks of a Chakra trace.

`simulate(graphs_or_path, SimOptions(...))` (in `lumos.simulator.run`) is the entry point;
`lumos.simulator.result` holds what it returns. The layers below it: `engine` (a
domain-free event heap), `graph` (per-rank compact arrays built from Chakra ETs, validated
at load), `processors` (CPU threads and GPU streams as in-order queues), `sync` (runtime
synchronisation), `rendezvous` (collectives and send/recv across ranks), `fold`
(simulating one of each set of identical ranks).
"""
