"""The traced step as edits start from it: its waits anchored, its preemptions trimmed.

A traced step mixes what the job does with what happened to it once: waits for a peer
that was late that time, time slices the operating system took from a thread. Replay
keeps them, as it should; an edit must not copy them into every layer or micro-batch it
adds, nor keep a wait for a task it removed. `normalise_step` applies `waits.anchor_waits`
and `preemption.trim_preemptions` to a traced (not yet tagged) step and says what each
changed, so the base the what-if prints is the step the edits start from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from lumos.simulator.whatif.contention import Contention, measure
from lumos.simulator.whatif.etset import EtSet
from lumos.simulator.whatif.preemption import PreemptionStats, trim_preemptions
from lumos.simulator.whatif.waits import WaitStats, anchor_waits


@dataclass(frozen=True, slots=True)
class Normalised:
    """What normalisation changed in the traced step."""

    waits: WaitStats = field(default_factory=WaitStats)
    preemptions: PreemptionStats = field(default_factory=PreemptionStats)
    contention: Contention = field(default_factory=Contention)

    def notes(self) -> list[str]:
        out = []
        w, p = self.waits, self.preemptions
        if w.anchored or w.found:
            out.append(
                f"waits: {w.anchored + w.found} gap(s) that waited for another thread's task "
                f"re-anchored on it ({w.found} dependency(ies) added), "
                f"{w.removed_ns / 1e6:.2f} ms of recorded wait left to the simulation"
            )
        if p.ops or p.gaps or p.collectives:
            out.append(
                f"preemption: {p.ops} op(s), {p.gaps} gap(s) before an op and "
                f"{p.collectives} collective(s) on CPU threads that lost time slices trimmed "
                f"to their typical time ({p.removed_ns / 1e6:.2f} ms)"
            )
        if self.contention.active:
            out.append(self.contention.note())
        return out


def normalise_step(ets: EtSet) -> tuple[EtSet, Normalised]:
    """The traced step with its waits anchored and its preempted ops trimmed, and the
    host contention the trimmed slices measure (`contention.measure`)."""
    anchored, waits = anchor_waits(ets)
    trimmed, preemptions = trim_preemptions(anchored)
    contention = measure(anchored, trimmed) if preemptions.removed_ns else Contention()
    return trimmed, Normalised(waits, preemptions, contention)
