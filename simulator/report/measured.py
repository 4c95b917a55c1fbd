"""The measured side of a comparison: each rank's recorded step and node times, read from its ET.

GlobalMetadata `measured_step_ns` (the Kineto `ProfilerStep` duration: the CPU loop's
window) and each node's recorded `start_ns` / `dur_ns` (or `duration_micros`); a rank
without `measured_step_ns` falls back to the span of its recorded nodes (`step_source`
says which). The GPU-inclusive step runs from the step start to the later of the step's
end and the last recorded end of any node (GPU work that outlived the loop).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from lumos.converters.chakra.attrs import attr_value
from lumos.converters.chakra.conventions import DUR_NS, META_STEP_NS, META_STEP_START_NS, START_NS
from lumos.converters.chakra.files import EtSource, find_et_sources


@dataclass(slots=True, frozen=True)
class MeasuredRank:
    """Recorded times of one rank's ET, rows sorted by node id; start -1 when unknown."""

    rank: int
    step_ns: int | None
    node_id: np.ndarray
    start_ns: np.ndarray
    dur_ns: np.ndarray
    step_start_ns: int | None = None

    @property
    def span_ns(self) -> int | None:
        """Last recorded end minus first recorded start, None without start times."""
        known = self.start_ns >= 0
        if not known.any():
            return None
        start = self.start_ns[known]
        return int((start + self.dur_ns[known]).max() - start.min())

    @property
    def iteration_ns(self) -> int | None:
        """The measured step (CPU window), else the recorded span, else None."""
        return self.step_ns if self.step_ns is not None else self.span_ns

    @property
    def step_source(self) -> str:
        """Where `iteration_ns` comes from: "ProfilerStep", "recorded span" or "none"."""
        if self.step_ns is not None:
            return "ProfilerStep"
        return "recorded span" if self.span_ns is not None else "none"

    @property
    def gpu_inclusive_ns(self) -> int | None:
        """Step start to the later of the step's end and the last recorded end."""
        known = self.start_ns >= 0
        if self.step_ns is None or not known.any():
            return self.step_ns
        return max(self.step_ns, int((self.start_ns[known] + self.dur_ns[known]).max()))


def measured_rank(source: EtSource) -> MeasuredRank:
    """Read the recorded times of one rank's ET (streamed, node by node)."""
    ids: list[int] = []
    starts: list[int] = []
    durs: list[int] = []
    with source.open() as reader:
        step = step_start = None
        for attr in reader.metadata.attr:
            if attr.name == META_STEP_NS:
                step = int(attr_value(attr))
            elif attr.name == META_STEP_START_NS:
                step_start = int(attr_value(attr))
        for node in reader:
            start, dur = -1, node.duration_micros * 1000
            for attr in node.attr:
                if attr.name == START_NS:
                    start = int(attr_value(attr))
                elif attr.name == DUR_NS:
                    dur = int(attr_value(attr))
            ids.append(node.id)
            starts.append(start)
            durs.append(dur)
    order = np.argsort(np.asarray(ids, dtype=np.int64), kind="stable")
    return MeasuredRank(
        source.rank,
        step,
        np.asarray(ids, dtype=np.int64)[order],
        np.asarray(starts, dtype=np.int64)[order],
        np.asarray(durs, dtype=np.int64)[order],
        step_start,
    )


def read_measured(target: str | Path) -> list[MeasuredRank]:
    """Recorded times of every rank of a trace (folder, prefix, file or tar)."""
    return [measured_rank(source) for source in find_et_sources(target)]
