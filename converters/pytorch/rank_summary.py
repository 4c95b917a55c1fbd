"""What a conversion reports: one `RankSummary` per rank and the `ConvertResult` of a set.

The summaries carry what each rank's ET was built from and what the converter had to
infer, repair or leave out, so a user (or `--json`) can judge the ET before simulating it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from lumos.converters.pytorch.link import LinkReport
from lumos.converters.pytorch.steps import StepInfo


@dataclass(slots=True)
class RankSummary:
    """What converting one rank produced."""

    rank: int
    path: str
    nodes: int
    cpu: int
    gpu: int
    comm: int
    step: str
    step_ns: int | None
    link: LinkReport | None
    unknown_comm: int
    sources: list[str]
    #: sync and wait calls by how what they wait for was found (`sync_edges`).
    syncs: dict[str, int] = field(default_factory=dict)
    #: launches of more than one GPU op (CUDA graphs): `launches`, their `ops`, and the
    #: `joins` inferred between them and around them (`graph_launch`).
    graph_launches: dict[str, int] = field(default_factory=dict)
    #: NCCL kernels read as a batch of P2P ops (`p2p_batch`): `batches`, their `ops`.
    p2p_batches: dict[str, int] = field(default_factory=dict)
    #: GPU op records the trace got wrong: `without_launch` (kept, `orphan_ops`), of them
    #: `without_stand_in` (no CPU task before them), `duplicates` (dropped, `duplicate_ops`).
    gpu_records: dict[str, int] = field(default_factory=dict)
    #: every ProfilerStep of the Kineto trace (`steps.StepInfo`) and why `step` was chosen.
    steps: tuple[StepInfo, ...] = ()
    step_chosen_by: str = ""
    #: what was read other than as declared (an unlisted host-ET schema), one line each
    notes: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {
            "rank": self.rank,
            "path": self.path,
            "nodes": self.nodes,
            "cpu_nodes": self.cpu,
            "gpu_nodes": self.gpu,
            "comm_nodes": self.comm,
            "step": self.step,
            "measured_step_ns": self.step_ns,
            "link": self.link.to_json() if self.link else None,
            "unknown_comm": self.unknown_comm,
            "sources": self.sources,
            "syncs": self.syncs,
            "graph_launches": self.graph_launches,
            "p2p_batches": self.p2p_batches,
            "gpu_records": self.gpu_records,
            "step_chosen_by": self.step_chosen_by,
            "notes": self.notes,
            "steps": [
                {"name": x.name, "measured_ns": x.dur, "complete": x.complete} for x in self.steps
            ],
        }


@dataclass(slots=True)
class ConvertResult:
    ranks: list[RankSummary] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def to_json(self) -> dict[str, Any]:
        return {"ranks": [r.to_json() for r in self.ranks], "problems": self.problems}
