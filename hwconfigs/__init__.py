"""Hardware configs as data: GPUs, nodes, fabrics and whole systems, loaded into typed records.

`load_system("h100")` (or a path to a user's YAML) returns a `SystemSpec`; `shipped_names()`
lists the short names. See docs/hardware.md for the numbers and where they come from.
"""

from lumos.hwconfigs.load import (
    load_fabric,
    load_gpu,
    load_node,
    load_system,
    shipped_names,
    shipped_path,
)
from lumos.hwconfigs.schema import (
    CollectiveChoice,
    EfficiencyPoint,
    FabricSpec,
    FabricTopology,
    GpuSpec,
    LinkSpec,
    NodeSpec,
    SystemSpec,
    Transport,
)

__all__ = [
    "CollectiveChoice",
    "EfficiencyPoint",
    "FabricSpec",
    "FabricTopology",
    "GpuSpec",
    "LinkSpec",
    "NodeSpec",
    "SystemSpec",
    "Transport",
    "load_fabric",
    "load_gpu",
    "load_node",
    "load_system",
    "shipped_names",
    "shipped_path",
]
