"""Everything that reads or writes a trace format; never imports `lumos.simulator`.

- `chakra/`    the Chakra ET format: stream I/O, wire encoding, validator, JSON, info,
               graph export, attribute helpers and lumos's attribute conventions.
- `pytorch/`   PyTorch host ETs and Kineto traces: loading, linking, the execution-graph
               build, the Chakra writer, the convert driver and the capture helper.
- `ops/`       what an ATen op is: its arguments, FLOPs and bytes; shared by the converter
               (Chakra `num_ops`, host-only durations) and the simulator's cost model.
- `astra_sim/` the ASTRA-sim exporter: workload mapping, configs, groups, pre-flight, bundle.

Imports flow `chakra` ← `ops` ← `pytorch`, and `chakra` ← `astra_sim`; `tests/test_layering.py`
checks it.
"""
