"""Linking host-ET ops to Kineto CPU events, with a report of what linked and why not.

Two rules, tried in this order:
1. `rf_id`: the Kineto event's "Record function id" equals the op's `rf_id` (newer
   traces captured together);
2. `order`: older traces (schema 1.0.1) have no such id, but each thread's ops appear in
   the same order with the same names in both files. Threads are paired by their name
   overlap, then the two name sequences are aligned greedily with a bounded look-ahead
   (linear time), and a match is kept only if the time nesting agrees with the host
   ET's call tree (a child must lie inside its linked parent).

An exact `rf_id` match is kept even where the nesting disagrees: the id is unique per
op, and the host ET's call tree is what is wrong there (torch 2.13 records sibling
autograd `evaluate_function` ops as children of the one before them). Those links are
counted (`nesting_differs`), not dropped.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lumos.converters.pytorch.host_et import HostOp, HostTrace
from lumos.converters.pytorch.host_et_schema import PROCESS_GROUP_INIT, ROOT_NAMES
from lumos.converters.pytorch.kineto import Kind, KinetoTrace
from lumos.errors import LinkError

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
    #: exact rf_id links kept although the event lies outside its linked parent's event.
    nesting_differs: int = 0

    @property
    def linked(self) -> int:
        return sum(self.by_rule.values())

    @property
    def rate(self) -> float:
        return self.linked / self.host_ops if self.host_ops else 1.0

    def note(self, reason: str, host: HostTrace, rows: Iterable[int]) -> None:
        """Count host rows `rows` as unmatched for `reason` (the first few as examples)."""
        rows = list(rows)
        if not rows:
            return
        self.unmatched[reason] = self.unmatched.get(reason, 0) + len(rows)
        for row in rows[: max(0, 20 - len(self.examples))]:
            self.examples.append(
                f"{reason}: host op {int(host.id[row])} {host.name_of(row)!r} "
                f"(tid {int(host.tid[row])})"
            )

    def to_json(self) -> dict[str, Any]:
        return {
            "host_ops": self.host_ops,
            "kineto_cpu_events": self.kineto_cpu_events,
            "linked": self.linked,
            "rate": round(self.rate, 4),
            "by_rule": dict(sorted(self.by_rule.items())),
            "unmatched": dict(sorted(self.unmatched.items())),
            "nesting_differs": self.nesting_differs,
            "examples": self.examples,
        }


@dataclass(slots=True)
class Linked:
    """Result of linking: `host_row[i]` is the host row linked to Kineto event i, or -1."""

    host_row: np.ndarray
    report: LinkReport
    host: HostTrace

    @property
    def host_of(self) -> dict[int, HostOp]:
        """Kineto event index → linked host op (records; for small traces and tests)."""
        return {int(i): self.host.op(self.host_row[i]) for i in np.flatnonzero(self.host_row >= 0)}


def linkable_rows(host: HostTrace) -> np.ndarray:
    """Rows that stand for real ops (not roots or the process-group init node)."""
    skip = np.array(
        [n in ROOT_NAMES or n == PROCESS_GROUP_INIT for n in host.names] or [False], bool
    )
    return np.flatnonzero(~skip[host.name])


def kineto_names_of(host: HostTrace, kineto: KinetoTrace) -> np.ndarray:
    """Each host row's name as a Kineto name id (-1: no Kineto event has that name)."""
    kid = {name: i for i, name in enumerate(kineto.names)}
    table = np.array([kid.get(n, -1) for n in host.names] or [-1], np.int64)
    return table[host.name]


def link(host: HostTrace, kineto: KinetoTrace) -> Linked:
    """Link every host op that can be linked; never raises on a partial link."""
    ops = linkable_rows(host)
    kind = kineto.kind
    cpu = np.flatnonzero((kind == Kind.CPU_OP) | (kind == Kind.ANNOTATION))
    report = LinkReport(host_ops=len(ops), kineto_cpu_events=len(cpu))
    host_row = np.full(len(kineto), -1, np.int64)
    hk = kineto_names_of(host, kineto)
    rest = ops
    with_rf = cpu[kineto.rf[cpu] >= 0]
    if len(with_rf):
        rest = _link_by_rf(ops, with_rf, host, kineto, hk, host_row)
        report.by_rule["rf_id"] = int((host_row >= 0).sum())
    exact = host_row >= 0
    if len(rest):
        free = cpu[host_row[cpu] < 0]
        _link_by_order(rest, free, host, kineto, hk, host_row, report)
    _check_nesting(host, kineto, host_row, exact, report)
    return Linked(host_row, report, host)


def _link_by_rf(
    ops: np.ndarray,
    with_rf: np.ndarray,
    host: HostTrace,
    kineto: KinetoTrace,
    hk: np.ndarray,
    host_row: np.ndarray,
) -> np.ndarray:
    """Link by rf_id (the last Kineto event of an id wins); returns the rows left over."""
    rev = with_rf[::-1]
    keys, first = np.unique(kineto.rf[rev], return_index=True)
    events = rev[first]
    want = host.rf_id[ops]
    pos = np.minimum(np.searchsorted(keys, want), len(keys) - 1)
    ev = events[pos]
    ok = (keys[pos] == want) & (kineto.name[ev] == hk[ops])
    ev_ok, ops_ok = ev[ok][::-1], ops[ok][::-1]
    _, last = np.unique(ev_ok, return_index=True)  # a later op wins an event
    host_row[ev_ok[last]] = ops_ok[last]
    return ops[~ok]


def _link_by_order(
    ops: np.ndarray,
    cpu: np.ndarray,
    host: HostTrace,
    kineto: KinetoTrace,
    hk: np.ndarray,
    host_row: np.ndarray,
    report: LinkReport,
) -> None:
    h_tid = host.tid[ops]
    ops = ops[np.lexsort((host.id[ops], host.rf_id[ops], h_tid))]
    k_tid = kineto.tid[cpu]
    cpu = cpu[np.lexsort((cpu, kineto.ext[cpu], -kineto.dur[cpu], kineto.ts[cpu], k_tid))]
    host_threads = _split(ops, host.tid[ops])
    k_threads = _split(cpu, kineto.tid[cpu])
    count = 0
    for htid, ktid in _pair_threads(host_threads, k_threads, hk, kineto.name, len(kineto.names)):
        if ktid is None:
            report.note("thread not in Kineto", host, host_threads[htid].tolist())
            continue
        seq = host_threads[htid]
        count += _align(seq, hk[seq], k_threads[ktid], kineto, host, host_row, report)
    report.by_rule["order"] = report.by_rule.get("order", 0) + count


def _split(rows: np.ndarray, tids: np.ndarray) -> dict[int, np.ndarray]:
    """rows (sorted by tid first) → {tid: rows of that tid}, keeping their order."""
    if not len(rows):
        return {}
    cuts = np.flatnonzero(np.diff(tids)) + 1
    return {
        int(part_tids[0]): part
        for part, part_tids in zip(np.split(rows, cuts), np.split(tids, cuts), strict=True)
    }


def _pair_threads(
    host_threads: dict[int, np.ndarray],
    k_threads: dict[int, np.ndarray],
    hk: np.ndarray,
    kname: np.ndarray,
    n_names: int,
) -> list[tuple[int, int | None]]:
    """Pair host threads with Kineto threads by shared op names (greedy, best first)."""
    size = n_names + 1
    k_counts = {t: np.bincount(kname[idx], minlength=size) for t, idx in k_threads.items()}
    scores = []
    for htid, rows in host_threads.items():
        names = hk[rows]
        hc = np.bincount(names[names >= 0], minlength=size)
        for ktid, kc in k_counts.items():
            scores.append((-int(np.minimum(hc, kc).sum()), htid, ktid))
    scores.sort()
    pairs: dict[int, int | None] = {}
    used: set[int] = set()
    for score, htid, ktid in scores:
        if score < 0 and htid not in pairs and ktid not in used:
            pairs[htid] = ktid
            used.add(ktid)
    return [(h, pairs.get(h)) for h in sorted(host_threads)]


def _anchor(names: np.ndarray, knames: np.ndarray) -> int:
    """Where in the Kineto sequence the host sequence starts (it may cover more steps)."""
    if len(knames) <= len(names) * 3 // 2 or not len(names):
        return 0
    k = min(ANCHOR_LEN, len(names))
    head = names[:k]
    for j in np.flatnonzero(knames[: len(knames) - k + 1] == head[0]).tolist():
        if np.array_equal(knames[j : j + k], head):
            return j
    return 0


def _align(
    ops: np.ndarray,
    names: np.ndarray,
    idx: np.ndarray,
    kineto: KinetoTrace,
    host: HostTrace,
    host_row: np.ndarray,
    report: LinkReport,
) -> int:
    """Greedy alignment of one thread pair; equal runs are compared a block at a time."""
    knames = kineto.name[idx].astype(np.int64)
    names_l, knames_l = names.tolist(), knames.tolist()
    i, j, n, m = 0, _anchor(names, knames), len(names), len(knames)
    linked = 0
    block = 64
    while i < n and j < m:
        size = min(block, n - i, m - j)
        same = names[i : i + size] == knames[j : j + size]
        run = size if same.all() else int(same.argmin())
        if run:
            host_row[idx[j : j + run]] = ops[i : i + run]
            linked += run
            i += run
            j += run
            block = min(block * 2, 1 << 16) if run == size else 64
            continue
        want = names_l[i]
        window = knames_l[j + 1 : j + LOOKAHEAD]
        dk = window.index(want) + 1 if want in window else 0
        got = knames_l[j]
        window = names_l[i + 1 : i + LOOKAHEAD]
        de = window.index(got) + 1 if got in window else 0
        if dk and (not de or dk <= de):
            j += dk
        elif de:
            report.note("not in Kineto", host, ops[i : i + de].tolist())
            i += de
        else:
            report.note("name differs at this position", host, [int(ops[i])])
            i += 1
            j += 1
    report.note("past the end of the Kineto thread", host, ops[i:].tolist())
    return linked


def _check_nesting(
    host: HostTrace,
    kineto: KinetoTrace,
    host_row: np.ndarray,
    exact: np.ndarray,
    report: LinkReport,
) -> None:
    """Unlink a child linked by order whose Kineto event lies outside its parent's event.

    Children linked by exact rf_id (`exact`, per Kineto event) are kept and counted.
    """
    child = np.flatnonzero(host_row >= 0)
    if not len(child):
        return
    ops = host_row[child]
    event_of = np.full(len(host) + 1, -1, np.int64)
    event_of[ops] = child
    parent_ids = host.parent[ops]
    prow = np.minimum(np.searchsorted(host.id, parent_ids), len(host) - 1)
    prow = np.where(host.id[prow] == parent_ids, prow, len(host))
    parent = event_of[prow]
    has = parent >= 0
    c, p = child[has], parent[has]
    ts, end, tid = kineto.ts, kineto.ts + kineto.dur, kineto.tid
    bad = (tid[c] == tid[p]) & ((ts[c] + TIME_SLACK_NS < ts[p]) | (end[c] > end[p] + TIME_SLACK_NS))
    report.nesting_differs += int((bad & exact[c]).sum())
    gone = c[bad & ~exact[c]]
    if not len(gone):
        return
    report.by_rule["order"] = report.by_rule.get("order", 0) - len(gone)
    report.note("outside its parent's time span", host, host_row[gone].tolist())
    host_row[gone] = -1


def check_link_rate(
    rank: int, sources: list[str], report: LinkReport, min_link_rate: float
) -> None:
    """Refuse a rank whose host ET and Kineto trace barely link.

    Raises LinkError naming the files, the rate and the main reasons.
    """
    if report.host_ops == 0 or report.rate >= min_link_rate:
        return
    reasons = ", ".join(
        f"{why}: {n}" for why, n in sorted(report.unmatched.items(), key=lambda kv: -kv[1])[:3]
    )
    raise LinkError(
        f"rank {rank}: only {report.linked}/{report.host_ops} host ops ({report.rate:.1%}) "
        f"link to Kineto events, below the {min_link_rate:.0%} threshold ({reasons}); "
        f"the host ET and the Kineto trace look like different runs or steps "
        f"({' + '.join(sources)}). Capture them together, or pass --min-link-rate 0 to "
        "convert anyway"
    )
