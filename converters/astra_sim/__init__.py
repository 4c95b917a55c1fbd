"""The ASTRA-sim exporter: per-rank Chakra ETs + a hardware config → a bundle ASTRA-sim runs.

`export` drives it: `workload` maps each rank's ET (`graph`, `nodes`), `groups` writes the
communicator groups, `config` and `hw` the system/network/memory configs, `preflight` and
`crossrank` refuse what ASTRA-sim would fail or hang on, `bundle` and `readme` write the
folder. May import `lumos.converters.chakra` and `lumos.hwconfigs`; never the simulator.
"""
