"""The simulator's own graph of one rank: compact numpy arrays built from a Chakra ET.

One `RankGraph` per rank, nodes sorted by ET id (so "ascending id" = ascending index).
Dependencies are stored as predecessor lists in CSR form (`dep_ptr`, `dep_idx`: node
*indices*, not ids); `data_deps` and `ctrl_deps` are merged (both are honoured). The
simulator never sees protobuf objects: graphs come from `graph_columns.read_graph` (an
`.et` stream decoded straight into columns), `graph_build.graph_from_et` (protobuf
nodes; the two give identical graphs) or are built directly from arrays
(`RankGraph.from_arrays`, for generators and benchmarks). Missing values are -1 in integer arrays.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from enum import IntEnum

import numpy as np

from lumos.proto import pb

COMP, SEND, RECV, COLL = pb.COMP_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE, pb.COMM_COLL_NODE
METADATA, INVALID = pb.METADATA_NODE, pb.INVALID_NODE
COMM_TYPES = (SEND, RECV, COLL)


class SyncKind(IntEnum):
    """Runtime synchronisation role of a (CPU) node, from `sync_kind` / `event_record`."""

    NONE = 0
    DEVICE = 1
    STREAM = 2
    EVENT = 3
    STREAM_WAIT_EVENT = 4
    EVENT_RECORD = 5


@dataclass(slots=True)
class RankGraph:
    """The nodes of one rank as parallel arrays (length n unless noted).

    - `ids` int64: ET node ids (ascending); `name_idx` int32 into `names`;
    - `type` int8: Chakra NodeType; `is_cpu_op` bool; `stream`, `tid` int64 (-1 = absent);
    - `dur_ns` int64: recorded duration in ns (`dur_ns`, else `duration_micros`×1000),
      -1 when nothing was recorded (no `dur_ns` and `duration_micros` = 0);
      `dur_us_ns` int64: `duration_micros`×1000 exactly as ASTRA-sim reads it;
      `gap_ns` int64: untraced CPU time before a CPU node (0 if absent);
      `start_ns` int64: recorded start relative to the step start (-1 if absent);
    - `dep_ptr` int64 (n+1), `dep_idx` int32: predecessors of node i are
      `dep_idx[dep_ptr[i]:dep_ptr[i+1]]`;
    - communication: `comm_type` int16, `comm_size` int64, `comm_peer` int32 (a send's
      `comm_dst`, a receive's `comm_src`), `comm_tag` int32, `comm_seq` int64,
      `comm_dur_ns` int64, `pg_label` int32 into `pg_labels` (the raw `pg_name`),
      `group` int32 into `groups` (resolved member lists, global ranks in group order;
      filled by `resolve_groups`, -1 until then);
    - sync: `sync_kind` int8 (`SyncKind`), `sync_stream`, `sync_event` int64 (for an
      event record, `sync_event` holds the recorded event id).

    For the compute cost model (`lumos.simulator.costmodel.estimate`): `op_inputs[i]` = the
    (shapes, types, values) strings of a node marked `dur_estimated`, `op_work[i]` =
    (`num_ops`, `tensor_size`) of a compute node with no recorded duration.

    From the metadata: `measured_step_ns` (Kineto ProfilerStep duration) and
    `step_start_ns` (its absolute start on the trace clock, for aligning ranks).
    """

    rank: int
    ids: np.ndarray
    names: list[str]
    name_idx: np.ndarray
    type: np.ndarray
    is_cpu_op: np.ndarray
    stream: np.ndarray
    tid: np.ndarray
    dur_ns: np.ndarray
    dur_us_ns: np.ndarray
    gap_ns: np.ndarray
    start_ns: np.ndarray
    dep_ptr: np.ndarray
    dep_idx: np.ndarray
    comm_type: np.ndarray
    comm_size: np.ndarray
    comm_peer: np.ndarray
    comm_tag: np.ndarray
    comm_seq: np.ndarray
    comm_dur_ns: np.ndarray
    pg_label: np.ndarray
    pg_labels: list[str]
    group: np.ndarray
    sync_kind: np.ndarray
    sync_stream: np.ndarray
    sync_event: np.ndarray
    groups: list[tuple[int, ...]] = field(default_factory=list)
    pg_ranks: dict[int, tuple[int, ...]] = field(default_factory=dict)
    world_size: int | None = None
    process_groups: dict[str, tuple[int, ...]] = field(default_factory=dict)
    measured_step_ns: int | None = None
    step_start_ns: int | None = None
    source: str = ""
    #: the metadata's `node_count` (None: a foreign file that states none)
    node_count: int | None = None
    #: the metadata's Chakra schema version ("" if none given)
    et_version: str = ""
    dropped_deps: int = 0
    op_inputs: dict[int, tuple[str, str, str]] = field(default_factory=dict)
    op_work: dict[int, tuple[float, float]] = field(default_factory=dict)
    #: host ops standing for several leaf ops of the host ET (`host_ops`), by node index
    op_host_ops: dict[int, int] = field(default_factory=dict)
    #: blocking copy calls' recorded time after their copy ended (`copy_after_ns`), by index
    copy_after: dict[int, int] = field(default_factory=dict)

    def __len__(self) -> int:
        return len(self.ids)

    def name(self, i: int) -> str:
        return self.names[int(self.name_idx[i])]

    def where(self, i: int) -> str:
        """'rank R node ID "name"' for error messages."""
        return f"rank {self.rank} node {int(self.ids[i])} {self.name(i)!r}"

    def deps(self, i: int) -> np.ndarray:
        return self.dep_idx[self.dep_ptr[i] : self.dep_ptr[i + 1]]

    @classmethod
    def from_arrays(cls, rank: int, n: int, **arrays: object) -> RankGraph:
        """Build a graph of `n` nodes; arrays not given get their "absent" default.

        Required: `dep_ptr` and `dep_idx` (or none: no dependencies). For generators and
        benchmarks that never write protobuf.
        """
        made: dict[str, object] = dict(arrays)

        def fill(names: tuple[str, ...], make: Callable[[], object]) -> None:
            for name in names:  # only what was not given: big graphs allocate once
                if name not in made:
                    made[name] = make()

        fill(("ids",), lambda: np.arange(n, dtype=np.int64))
        fill(("names",), lambda: ["node"])
        fill(("name_idx",), lambda: np.zeros(n, np.int32))
        fill(("type",), lambda: np.full(n, COMP, np.int8))
        fill(("is_cpu_op",), lambda: np.zeros(n, bool))
        fill(("dur_ns", "gap_ns", "comm_size"), lambda: np.zeros(n, np.int64))
        fill(("dep_ptr",), lambda: np.zeros(n + 1, np.int64))
        fill(("dep_idx",), lambda: np.zeros(0, np.int32))
        fill(("pg_labels",), list)
        fill(
            ("stream", "tid", "start_ns", "comm_type", "comm_peer", "comm_tag", "comm_seq"),
            lambda: np.full(n, -1, np.int64),
        )
        fill(("comm_dur_ns", "sync_stream", "sync_event"), lambda: np.full(n, -1, np.int64))
        fill(("pg_label", "group"), lambda: np.full(n, -1, np.int32))
        fill(("sync_kind",), lambda: np.zeros(n, np.int8))
        fill(("dur_us_ns",), lambda: np.maximum(np.asarray(made["dur_ns"]), 0))
        return cls(rank=rank, **made)  # type: ignore[arg-type]
