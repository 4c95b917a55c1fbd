"""What a simulated step rests on: refuse a step made of nothing, and say what was priced.

A replay adds up recorded durations. An ET converted from a host ET alone records none
(its compute nodes are marked `dur_estimated`), so its replay would be a step of 0 ns
that looks like a result; `check_durations` refuses it and says which inputs would
give one. When only some nodes lack a duration, the step is kept and a note says how
many nodes counted as 0 ns. `pricing_notes` states what `--hw` changed: in model mode
communication only (compute keeps its recorded time until the what-if re-times it), in
replay only the collectives that had no recorded time.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from lumos.errors import SimulationError
from lumos.simulator.graph import COMM_TYPES, RankGraph


@dataclass(frozen=True, slots=True)
class Durations:
    """Of one rank: nodes with no measured duration the cost model would price, and
    whether anything at all (compute or communication) carries a recorded time."""

    rank: int
    nodes: int
    missing: int
    any_recorded: bool


def durations(g: RankGraph) -> Durations:
    """Count the nodes of `g` without a measured duration (`dur_estimated`, or a compute
    node with `num_ops`/`tensor_size` and no duration)."""
    missing = len(set(g.op_inputs) | set(g.op_work))
    comm = np.isin(g.type, COMM_TYPES)
    recorded = bool((g.dur_ns > 0).any()) or bool((g.comm_dur_ns[comm] >= 0).any())
    return Durations(g.rank, len(g), missing, recorded)


def check_durations(graphs: Sequence[RankGraph]) -> list[str]:
    """Notes for a replay that keeps nodes without a duration at 0 ns.

    Raises SimulationError when a rank has such nodes and no recorded time at all:
    its step would be 0 ns, a number made of nothing.
    """
    counts = [durations(g) for g in graphs]
    empty = [d for d in counts if d.missing and not d.any_recorded]
    if empty:
        d = empty[0]
        others = f" (and {len(empty) - 1} more rank(s))" if len(empty) > 1 else ""
        raise SimulationError(
            f"rank {d.rank}{others}: {d.missing} of {d.nodes} nodes carry no measured "
            "duration (an ET converted from a host ET without its Kineto trace), so a "
            "replay would report a step of 0 ns. Price them with the cost model: "
            "--hw NAME (model mode) or --estimate-missing --hw NAME (replay), or convert "
            "the host ETs together with their Kineto traces"
        )
    partial = [d for d in counts if d.missing]
    if not partial:
        return []
    total = sum(d.missing for d in partial)
    return [
        f"{total} node(s) on {len(partial)} rank(s) have no measured duration and count "
        "as 0 ns; --estimate-missing --hw NAME prices them with the cost model"
    ]


def pricing_notes(mode: str, priced: int, estimated: int, gpu: str | None) -> list[str]:
    """What the network pricer and the cost model changed, in words.

    `priced`: collective/p2p instances the pricer timed; `estimated`: nodes given a
    cost-model duration; `gpu`: the cost model's GPU name.
    """
    notes = []
    if mode == "model":
        notes.append(
            f"communication re-priced by the network model ({priced} collective/p2p "
            "instance(s)); recorded compute durations are kept as they are, so a "
            "different --hw changes only communication"
        )
    elif mode == "replay" and priced:
        notes.append(
            f"replay: recorded durations throughout; the network model priced only the "
            f"{priced} communication instance(s) that had no recorded time"
        )
    if estimated:
        on = f" for {gpu}" if gpu else ""
        notes.append(
            f"{estimated} node(s) without a measured duration priced by the cost model{on}"
        )
    return notes
