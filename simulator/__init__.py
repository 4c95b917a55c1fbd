"""lumos's native discrete-event simulator of all ranks of a Chakra trace.

`simulate(graphs_or_path, SimOptions(...))` (in `lumos.simulator.run`) is the entry point;
`lumos.simulator.result` holds what it returns. The event core sits at this level: `load`
and `graph_build` (per-rank compact arrays from Chakra ETs, validated at load), `plan`,
`processors` (CPU threads and GPU streams as in-order queues), `sync` (runtime
synchronisation), `rendezvous` (collectives and send/recv across ranks), `scheduler` and
`engine` (the event loop), `fold` (one of each set of identical ranks), `align`.

Sub-packages: `network/` (how long communication takes), `costmodel/` (how long compute
takes), `report/` (what a run means to a person), `whatif/` (graph edits), `workload/`
(generated steps), `sweep/` (many runs). The simulator may import `lumos.converters.chakra`
and `lumos.converters.ops` (it reads Chakra ETs), never the PyTorch readers or exporters.
"""
