"""What one ATen (or fbgemm) op does: typed arguments, FLOPs and bytes moved.

Shared by the converter (Chakra `num_ops`, which host-only ops become tasks) and the
simulator's cost model, which turns these counts into time. Imports only `lumos.errors`.
"""
