"""Linking host-ET ops to Kineto CPU events, with a report of what linked and why not.

Two rules, tried in this order:
1. `rf_id`: the Kineto event's "Record function id" equals the op's `rf_id` (newer
   traces captured together);
2. `order`: older traces (schema 1.0.1) have no such id, but each thread's ops appear in
   the same order with the same names in both files. Threads are paired by their name
   overlap, then the two name sequences are aligned greedily with a bounded look-ahead
   (linear time), and a match is kept only if the time nesting agrees with the host
   ET's call tree (a child must lie inside its linked parent).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any

from lumos.converters.host_et import HostOp, HostTrace
from lumos.converters.host_et_schema import PROCESS_GROUP_INIT, ROOT_NAMES
from lumos.converters.kineto import KEvent, Kind, KinetoTrace

LOOKAHEAD = 32
ANCHOR_LEN = 16
TIME_SLACK_NS = 1000  # Kineto's older traces round to whole µs


@dataclass(slots=True)
class LinkReport:
    """How host-ET ops were linked to Kineto events."""

    host_ops: int = 0
    kineto_cpu_events: int = 0
    by_rule: dict[str, int] = field(default_factory=dict)
    unmatched: dict[str, int] = field(default_factory=dict)
    examples: list[str] = field(default_factory=list)

    @property
    def linked(self) -> int:
        return sum(self.by_rule.values())

    @property
    def rate(self) -> float:
        return self.linked / self.host_ops if self.host_ops else 1.0

    def note(self, reason: str, op: HostOp) -> None:
        self.unmatched[reason] = self.unmatched.get(reason, 0) + 1
        if len(self.examples) < 20:
            self.examples.append(f"{reason}: host op {op.id} {op.name!r} (tid {op.tid})")

    def to_json(self) -> dict[str, Any]:
        return {
            "host_ops": self.host_ops,
            "kineto_cpu_events": self.kineto_cpu_events,
            "linked": self.linked,
            "rate": round(self.rate, 4),
            "by_rule": dict(sorted(self.by_rule.items())),
            "unmatched": dict(sorted(self.unmatched.items())),
            "examples": self.examples,
        }


@dataclass(slots=True)
class Linked:
    """Result of linking: Kineto event (by index in `trace.events`) → host op."""

    host_of: dict[int, HostOp]
    report: LinkReport


def linkable(op: HostOp) -> bool:
    return op.name not in ROOT_NAMES and op.name != PROCESS_GROUP_INIT


def link(host: HostTrace, kineto: KinetoTrace) -> Linked:
    """Link every host op that can be linked; never raises on a partial link."""
    ops = [op for op in host.ops if linkable(op)]
    cpu = [i for i, e in enumerate(kineto.events) if e.kind in (Kind.CPU_OP, Kind.ANNOTATION)]
    report = LinkReport(host_ops=len(ops), kineto_cpu_events=len(cpu))
    host_of: dict[int, HostOp] = {}
    by_rf = {kineto.events[i].rf: i for i in cpu if kineto.events[i].rf >= 0}
    rest = ops
    if by_rf:
        rest = []
        for op in ops:
            index = by_rf.get(op.rf_id)
            if index is not None and kineto.events[index].name == op.name:
                host_of[index] = op
            else:
                rest.append(op)
        report.by_rule["rf_id"] = len(host_of)
    if rest:
        _link_by_order(rest, kineto.events, [i for i in cpu if i not in host_of], host_of, report)
    _check_nesting(host, kineto.events, host_of, report)
    return Linked(host_of, report)


def _link_by_order(
    ops: list[HostOp],
    events: list[KEvent],
    cpu: list[int],
    host_of: dict[int, HostOp],
    report: LinkReport,
) -> None:
    host_threads: dict[int, list[HostOp]] = defaultdict(list)
    for op in ops:
        host_threads[op.tid].append(op)
    k_threads: dict[int, list[int]] = defaultdict(list)
    for i in cpu:
        k_threads[events[i].tid].append(i)
    for seq in host_threads.values():
        seq.sort(key=lambda op: (op.rf_id, op.id))
    for seq_k in k_threads.values():
        seq_k.sort(key=lambda i: (events[i].ts, -events[i].dur, events[i].ext, i))
    count = 0
    for htid, ktid in _pair_threads(host_threads, k_threads, events):
        if ktid is None:
            for op in host_threads[htid]:
                report.note("thread not in Kineto", op)
            continue
        count += _align(host_threads[htid], k_threads[ktid], events, host_of, report)
    report.by_rule["order"] = report.by_rule.get("order", 0) + count


def _pair_threads(
    host_threads: dict[int, list[HostOp]], k_threads: dict[int, list[int]], events: list[KEvent]
) -> list[tuple[int, int | None]]:
    """Pair host threads with Kineto threads by shared op names (greedy, best first)."""
    scores = []
    for htid, ops in host_threads.items():
        hc = Counter(op.name for op in ops)
        for ktid, idx in k_threads.items():
            kc = Counter(events[i].name for i in idx)
            scores.append((-sum((hc & kc).values()), htid, ktid))
    scores.sort()
    pairs: dict[int, int | None] = {}
    used: set[int] = set()
    for score, htid, ktid in scores:
        if score < 0 and htid not in pairs and ktid not in used:
            pairs[htid] = ktid
            used.add(ktid)
    return [(h, pairs.get(h)) for h in sorted(host_threads)]


def _anchor(names: list[str], knames: list[str]) -> int:
    """Where in the Kineto sequence the host sequence starts (it may cover more steps)."""
    if len(knames) <= len(names) * 3 // 2 or not names:
        return 0
    k = min(ANCHOR_LEN, len(names))
    head = names[:k]
    for j in range(len(knames) - k + 1):
        if knames[j] == head[0] and knames[j : j + k] == head:
            return j
    return 0


def _align(
    ops: list[HostOp],
    idx: list[int],
    events: list[KEvent],
    host_of: dict[int, HostOp],
    report: LinkReport,
) -> int:
    names = [op.name for op in ops]
    knames = [events[i].name for i in idx]
    i, j, n, m = 0, _anchor(names, knames), len(names), len(knames)
    linked = 0
    while i < n and j < m:
        if names[i] == knames[j]:
            host_of[idx[j]] = ops[i]
            linked += 1
            i += 1
            j += 1
            continue
        dk = next((d for d in range(1, LOOKAHEAD) if j + d < m and knames[j + d] == names[i]), 0)
        de = next((d for d in range(1, LOOKAHEAD) if i + d < n and names[i + d] == knames[j]), 0)
        if dk and (not de or dk <= de):
            j += dk
        elif de:
            for skipped in ops[i : i + de]:
                report.note("not in Kineto", skipped)
            i += de
        else:
            report.note("name differs at this position", ops[i])
            i += 1
            j += 1
    for op in ops[i:]:
        report.note("past the end of the Kineto thread", op)
    return linked


def _check_nesting(
    host: HostTrace, events: list[KEvent], host_of: dict[int, HostOp], report: LinkReport
) -> None:
    """Unlink a child whose Kineto event lies outside its linked parent's event."""
    event_of = {op.id: i for i, op in host_of.items()}
    for index, op in list(host_of.items()):
        parent = event_of.get(op.parent)
        if parent is None:
            continue
        c, p = events[index], events[parent]
        if c.tid != p.tid:  # e.g. gloo work issued on one thread, run on another
            continue
        if c.ts + TIME_SLACK_NS < p.ts or c.ts + c.dur > p.ts + p.dur + TIME_SLACK_NS:
            del host_of[index]
            rule = "rf_id" if c.rf >= 0 else "order"
            report.by_rule[rule] -= 1
            report.note("outside its parent's time span", op)
