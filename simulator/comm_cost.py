"""How long each joint communication event takes, per mode.

replay: a collective's recorded time without the wait for late peers — the shortest
`comm_dur_ns` over its members, else the shortest recorded duration; a send/recv pair
likewise; with nothing recorded, the pricer (if any) or 0. When the members' recorded
starts lie on one clock (ranks aligned on their step starts), each member instead keeps
its own exit: it leaves its recorded end minus the recorded last arrival after the
simulated last arrival (`member_exits`). Members do not leave together — a gloo rank
stalls locally inside its `all_reduce`, an NCCL rank leaves by its ring position — and
one member's local stall must not hold the others. model: the pricer. astra: the
pricer for the collective types ASTRA-sim simulates (all-reduce, all-gather, all-to-all,
reduce-scatter) and for send/recv; other types wait their `duration_micros`.
Pricer answers are memoised: a step repeats the same (type, size, group) many times.
"""

from __future__ import annotations

from collections.abc import Sequence

from lumos.simulator.graph import RankGraph
from lumos.simulator.network.api import CollectivePricer
from lumos.simulator.rendezvous import Instance

#: ASTRA-sim simulates these collective types; others only wait their duration.
ASTRA_PRICED = (0, 2, 6, 7)


class CommCoster:
    """Transfer time of instances over the simulated `graphs` for one mode."""

    def __init__(
        self,
        graphs: Sequence[RankGraph],
        mode: str,
        pricer: CollectivePricer | None,
        clock: Sequence[int] | None = None,
    ) -> None:
        self.mode = mode
        self.pricer = pricer
        # clock[k]: absolute step start of graph k when the ranks share a clock
        self._clock = list(clock) if clock is not None else None
        # the graphs' columns, read one member at a time (`.item`): whole-column lists
        # would cost ~40 bytes a node of the job for the few nodes that communicate
        self._start = [g.start_ns for g in graphs]
        self._comm_dur = [g.comm_dur_ns for g in graphs]
        self._dur = [g.dur_ns for g in graphs]
        self._dur_us = [g.dur_us_ns for g in graphs]
        self._cache: dict[tuple[str, int, int, tuple[int, ...]], int] = {}
        #: instances whose time came from the pricer (for the result's notes)
        self.priced = 0

    def price(self, inst: Instance) -> int:
        """The pricer's time for an instance (memoised)."""
        self.priced += 1
        key = (inst.kind, inst.comm_type, inst.size, inst.group)
        cached = self._cache.get(key)
        if cached is None:
            assert self.pricer is not None
            if inst.kind == "p2p":
                cached = int(self.pricer.p2p_ns(inst.size, inst.group[0], inst.group[1]))
            else:
                cached = int(self.pricer.collective_ns(inst.comm_type, inst.size, inst.group))
            self._cache[key] = cached
        return cached

    def instance_ns(self, inst: Instance) -> int:
        if self.mode == "model":
            return self.price(inst)
        if self.mode == "astra":
            if inst.kind == "p2p" or inst.comm_type in ASTRA_PRICED:
                return self.price(inst)
            return min(self._dur_us[k].item(i) for k, i in inst.members)
        best = -1
        for k, i in inst.members:
            d = self._comm_dur[k].item(i)
            if d >= 0 and (best < 0 or d < best):
                best = d
        if best >= 0:
            return best
        for k, i in inst.members:
            d = self._dur[k].item(i)
            if d >= 0 and (best < 0 or d < best):
                best = d
        if best >= 0:
            return best
        return self.price(inst) if self.pricer is not None else 0

    def member_exits(self, inst: Instance) -> list[int] | None:
        """Per member, its time from the last arrival to its own exit; None when every
        member leaves at last arrival + `instance_ns` (not replay, no shared clock, a
        `comm_dur_ns` given, a member without recorded times, or all exits equal).

        Member i arrived at a_i = clock + start_ns and left at e_i = a_i + dur_ns; with
        L = max a_i (the recorded last arrival), it leaves L_sim + max(e_i - L, 0). When
        every recorded end lies before L the clocks disagree and None is returned.
        """
        if self.mode != "replay" or self._clock is None or inst.kind != "coll":
            return None
        if len(inst.members) < 2:
            return None
        arrive, leave = [], []
        for k, i in inst.members:
            start, dur = self._start[k].item(i), self._dur[k].item(i)
            if start < 0 or dur < 0 or self._comm_dur[k].item(i) >= 0:
                return None
            arrive.append(self._clock[k] + start)
            leave.append(self._clock[k] + start + dur)
        last = max(arrive)
        if max(leave) <= last:
            return None
        exits = [max(e - last, 0) for e in leave]
        return None if min(exits) == max(exits) else exits
