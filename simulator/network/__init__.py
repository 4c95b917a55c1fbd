"""How long communication takes: topology, the pricer interface, collective algorithms.

`api` is the interface the simulator prices through; `nccl` the NCCL-like pricer over the
machine's topology; `collectives/` one module per algorithm; `astra` ASTRA-sim's
congestion-unaware analytical formulas, exactly; `comm_cost` picks per mode. Imports only
`lumos.hwconfigs` and `lumos.errors` (plus the simulator's graph records).
"""
