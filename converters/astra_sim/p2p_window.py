"""Send/receive pairs that cross the edge of the exported window.

A trace is a window cut out of a running job. In a pipeline a stage may receive, early in
its step, what its peer sent in the step before, and send, late in its step, what the peer
receives in the next one. ASTRA-sim pairs the k-th send of (src, dst, tag, size) with the
k-th receive of that key (`CallbackTracker`, analytical frontend), so exporting the window
as it is pairs each such receive with a send of the *same* step and makes the receiver
wait for it (the gloo pipeline capture: rank 0 waited 13.6 ms for a message it had
received in 16 µs).

With the ranks on one clock (each ET's `step_start_ns` plus each node's `start_ns`, the
clock the replay aligns ranks with) a receive that ended before its send started cannot
be that send's: per (src, dst, tag) the receives are shifted against the sends by the
smallest j that makes every pair causal (receive end ≥ send start). The first j receives
were satisfied by messages already in flight when the window opened, and the sends left
over at the end are received after it closed. Neither has a partner inside the window;
the export drops them (their dependencies re-pointed, like a CPU op's) and says so.
Without a shared clock (a foreign ET without `step_start_ns` or `start_ns`) nothing is
shifted, and a send or receive without a partner is refused as before.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from lumos.converters.astra_sim.nodes import Kind, classify, duration_ns, start_ns
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.conventions import META_STEP_START_NS
from lumos.proto import pb


@dataclass(frozen=True, slots=True)
class _P2P:
    """One send or receive on the shared clock (ns)."""

    rank: int
    node_id: int
    start: int
    end: int


@dataclass(slots=True)
class Carried:
    """The sends and receives whose partner lies outside the window, by rank."""

    #: rank -> source node ids to drop
    nodes: dict[int, set[int]] = field(default_factory=dict)
    early_recvs: int = 0  # received from a send before the window
    late_sends: int = 0  # received after the window

    def of(self, rank: int) -> frozenset[int]:
        return frozenset(self.nodes.get(rank, ()))

    def note(self) -> str | None:
        if not self.early_recvs and not self.late_sends:
            return None
        return (
            f"send/recv across the window's edges dropped (paired per src, dst and tag on "
            f"the ranks' shared clock): {self.early_recvs} receive(s) of messages sent "
            f"before the window, {self.late_sends} send(s) received after it"
        )


def carried_p2p(
    ranks: Sequence[tuple[int, pb.GlobalMetadata | None, Sequence[pb.Node]]],
) -> Carried:
    """The sends/receives of `ranks` ((rank, metadata, nodes) each) that pair across the
    window's edges; empty unless every rank records `step_start_ns` and every send and
    receive its `start_ns`."""
    sends: dict[tuple[int, int, int], list[_P2P]] = {}
    recvs: dict[tuple[int, int, int], list[_P2P]] = {}
    for rank, meta, nodes in ranks:
        base = get_attr(meta, META_STEP_START_NS) if meta is not None else None
        if base is None:
            return Carried()
        for node in nodes:
            kind = classify(node)
            if kind not in (Kind.SEND, Kind.RECV):
                continue
            peer = get_attr(node, "comm_dst" if kind is Kind.SEND else "comm_src")
            start = start_ns(node)
            if peer is None or start is None:
                return Carried()
            tag = int(get_attr(node, "comm_tag", 0))
            at = int(base) + start
            item = _P2P(rank, int(node.id), at, at + duration_ns(node))
            if kind is Kind.SEND:
                sends.setdefault((rank, int(peer), tag), []).append(item)
            else:
                recvs.setdefault((int(peer), rank, tag), []).append(item)
    carried = Carried()
    for key in set(sends) | set(recvs):
        s_list = sorted(sends.get(key, []), key=lambda p: p.start)
        r_list = sorted(recvs.get(key, []), key=lambda p: p.start)
        shift = _causal_shift(s_list, r_list)
        early = r_list[:shift]
        late = s_list[len(r_list) - shift :]
        for item in (*early, *late):
            carried.nodes.setdefault(item.rank, set()).add(item.node_id)
        carried.early_recvs += len(early)
        carried.late_sends += len(late)
    return carried


def _causal_shift(sends: Sequence[_P2P], recvs: Sequence[_P2P]) -> int:
    """The smallest j such that receive k + j never ends before send k starts."""
    for shift in range(len(recvs) + 1):
        pairs = zip(sends, recvs[shift:], strict=False)
        if all(r.end >= s.start for s, r in pairs):
            return shift
    return len(recvs)  # unreachable: shift = len(recvs) leaves no pair
