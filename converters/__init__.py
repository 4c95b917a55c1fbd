"""Everything that reads or writes a trace format.

The Chakra ET format layer (`et_io`, `et_files`, `attrs`, `validate`, `et_json`) is
imported by the simulator and the exporters; the PyTorch host ET and Kineto readers,
the linker and the graph builder sit beside it and are only imported by `lumos convert`.
"""
