"""PyTorch host execution-trace schema versions, as data.

Every version seen in real files is one row of `SCHEMAS`: where a node keeps its parent,
its tensors and its attributes, and whether `record_param_comms` carries the collective
as node attributes (1.1.0+) or only positionally in its inputs. `schema_for` picks the
row; the loader (`host_et`) reads nodes only through it, never by version `if` ladders.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

from lumos.errors import TraceFormatError


class Layout(enum.Enum):
    """How a node stores its fields."""

    FLAT = "flat"  # 1.0.1: parent/rf_id/tid/... at top level; inputs, input_shapes, input_types
    CHAKRA = "chakra"  # 1.0.2+: ctrl_deps = parent; inputs {values, shapes, types}; attrs list


@dataclass(frozen=True, slots=True)
class HostEtSchema:
    """What one host-ET schema version looks like."""

    version: str
    layout: Layout
    parent_key: str
    #: `record_param_comms` has collective_name/pg_name/... node attributes.
    comm_attrs: bool
    #: `record_param_comms` names its process group by (pg_name, pg_desc) in its inputs.
    pg_in_inputs: bool
    note: str


SCHEMAS: tuple[HostEtSchema, ...] = (
    HostEtSchema("1.0.1", Layout.FLAT, "parent", False, False, "PyTorch <= 2.1"),
    HostEtSchema("1.0.2-chakra.0.0.4", Layout.CHAKRA, "ctrl_deps", False, True, "2024"),
    HostEtSchema("1.0.3-chakra.0.0.4", Layout.CHAKRA, "ctrl_deps", False, True, "pg desc"),
    HostEtSchema("1.0.4-chakra.0.0.4", Layout.CHAKRA, "ctrl_deps", False, True, "PT2"),
    HostEtSchema("1.1.0-chakra.0.0.4", Layout.CHAKRA, "ctrl_deps", True, True, "comm attrs"),
    HostEtSchema("1.1.1-chakra.0.0.4", Layout.CHAKRA, "ctrl_deps", True, True, "strides"),
    HostEtSchema("1.1.1-chakra.1.0.0", Layout.CHAKRA, "ctrl_deps", True, True, "newest"),
)

_BY_VERSION = {s.version: s for s in SCHEMAS}

#: Names of the root nodes (older traces say execution_graph).
ROOT_NAMES = frozenset(
    {
        "[pytorch|profiler|execution_trace|thread]",
        "[pytorch|profiler|execution_trace|process]",
        "[pytorch|profiler|execution_graph|thread]",
        "[pytorch|profiler|execution_graph|process]",
    }
)
PROCESS_GROUP_INIT = "## process_group:init ##"
#: comm attributes of 1.1.0+ `record_param_comms` nodes.
COMM_ATTRS = (
    "collective_name",
    "dtype",
    "in_msg_nelems",
    "out_msg_nelems",
    "in_split_size",
    "out_split_size",
    "global_rank_start",
    "global_rank_stride",
    "pg_name",
    "pg_desc",
    "pg_size",
)


def schema_for(version: str, path: str) -> HostEtSchema:
    """The row for `version`; an unlisted version of a known family takes the closest row.

    Raises TraceFormatError if the version is missing or of an unknown family.
    """
    if version in _BY_VERSION:
        return _BY_VERSION[version]
    if not version:
        raise TraceFormatError(path, "no 'schema' field: not a PyTorch host execution trace")
    base = version.split("-", 1)[0]
    family = [s for s in SCHEMAS if s.version.split("-", 1)[0] <= base]
    if not family or not version[0].isdigit():
        known = ", ".join(s.version for s in SCHEMAS)
        raise TraceFormatError(path, f"unknown host-ET schema {version!r} (known: {known})")
    return family[-1]
