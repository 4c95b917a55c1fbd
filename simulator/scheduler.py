"""The simulation loop: runs a `Plan` on the event kernel and returns every node's times.

Events are node finishes (and, rarely, delayed starts of special nodes, processor
dispatches in ASTRA-sim mode, and the first nodes of ranks that start late). When a node
finishes, its processor frees and its successors' counters drop; a successor whose
enqueueing dependencies are all done joins its processor's queue, and a queue's head
starts when its processor is free and all its dependencies are done. A chain of nodes on
one thread therefore costs one heap push and pop per node and nothing else. Processors
are FIFO queues, or, in ASTRA-sim mode, lowest-id-first among ready nodes, dispatched
after every event of the same instant. A node's gap (`Plan.gap`) holds its start back:
on a thread, to the thread's previous end plus the untraced time; on a stream (negated),
to the moment it could start plus the dispatch delay (or its hold: `Plan.held`). Hot
path: memoryviews, local names, bit masks (`key & 7`: KIND_BITS); sim_golden checks it.
"""

from __future__ import annotations

from array import array
from collections import deque
from heapq import heappop, heappush
from typing import Any

import numpy as np

from lumos.simulator.blocking import returns_after_op
from lumos.simulator.engine import PRIO_SHIFT, TIME_SHIFT
from lumos.simulator.plan import (
    COLLECTIVE,
    EVENT_RECORD,
    HELD,
    LAUNCH,
    P2P_RECV,
    P2P_SEND,
    PLAIN,
    STREAM_WAIT,
    SYNC_WAIT,
    Plan,
)
from lumos.simulator.result import Schedule
from lumos.simulator.sync import RuntimeSync

# Event kinds in the low bits of the heap item (`node << KIND_BITS | kind`); their order
# breaks ties at one instant for one node. A PLAIN node's finish is told apart from a
# special node's so the hot path skips what only special nodes need (their end time
# and waits); a PLAIN node's end is its start plus its duration, filled in at the end.
FINISH, FINISH_SPECIAL, START, FREE, DISPATCH, RELEASE = 0, 1, 2, 3, 4, 6
KIND_BITS = 3


def _view(values: np.ndarray) -> Any:
    """A numpy array's memory as a flat memoryview: indexing reads or writes one Python
    int in place (as fast as a list here, without its ~40 bytes a node of int objects)."""
    raw: Any = memoryview(np.ascontiguousarray(values).data).cast("B")
    return raw.cast(values.dtype.char)


def run_plan(plan: Plan, sync: RuntimeSync | None = None) -> Schedule:
    """Simulate the plan to completion (or until nothing can move: see `Schedule.end`).

    Uses the plan up: its dependency counters are counted down in place, and the
    durations of non-PLAIN nodes are moved out of `plan.dur` (-1 there afterwards).
    Raises OverflowError when a time passes 64-bit nanoseconds."""
    n = plan.n
    # plain_dur[v]: the duration of a PLAIN node (>= 0: compute_durations), -1 for others (one
    # lookup on the hot path tells both); theirs are in special_dur
    others = np.flatnonzero(plan.role != PLAIN)
    special_dur = dict(zip(others.tolist(), plan.dur[others].tolist(), strict=True))
    plan.dur[others] = -1
    plain_dur = _view(plan.dur)
    gap, proc, role = _view(plan.gap), _view(plan.proc), _view(plan.role)
    succ_ptr, succ = _view(plan.succ_ptr), _view(plan.succ)
    indeg, enq = _view(plan.indeg), _view(plan.enq)
    unlimited, is_stream, by_id = plan.unlimited, plan.is_stream, plan.by_id
    inst_dur, inst_members = plan.inst_dur, plan.inst_members
    inst_exit = plan.inst_exit or [None] * len(inst_dur)
    inst_finish = plan.inst_finish
    has_match = np.flatnonzero(plan.match >= 0)
    match = dict(zip(has_match.tolist(), plan.match[has_match].tolist(), strict=True))
    wait_in_gap = _view(plan.wait_in_gap)
    early_dst = plan.early_dst
    op_waits = plan.early_wait if sync is not None else {}  # `lumos.simulator.blocking`
    waiting_call = returns_after_op(op_waits, special_dur)
    n_procs = len(unlimited)
    busy = [False] * n_procs
    last_end = [0] * n_procs
    queues: list = [[] if by_id else deque() for _ in range(n_procs)]
    dispatching = [False] * n_procs
    # machine-int arrays (a time past 64 bits raises OverflowError), numpy's for free
    start, end, wait = array("q", [-1]) * n, array("q", [-1]) * n, array("q", [0]) * n
    n_inst = len(inst_dur)
    arrived, latest = [0] * n_inst, [0] * n_inst
    msg_at, sent_at, posted = [-1] * n_inst, [-1] * n_inst, [-1] * n_inst
    heap: list[int] = []
    tracking = sync is not None
    stream_procs = is_stream if tracking else [False] * n_procs
    enq_counts = sync.enqueued if sync is not None else [0] * n_procs
    done_counts = sync.done if sync is not None else [0] * n_procs
    waiters = sync.waiters if sync is not None else [[] for _ in range(n_procs)]
    # processors whose enqueue the main loop handles inline: FIFO and bounded
    fifo = [not (by_id or unl) for unl in unlimited]
    shift = TIME_SHIFT
    held_gap, hold = -HELD, plan.held_start  # `Plan.held`

    def finish_at(v: int, t: int) -> None:
        heappush(heap, (t << shift) | (v << 3) | FINISH_SPECIAL)

    def dispatch(pi: int, t: int) -> None:
        if not dispatching[pi]:
            dispatching[pi] = True
            heappush(heap, (t << shift) | (1 << PRIO_SHIFT) | ((n + pi) << 3) | DISPATCH)

    def begin(v: int, pi: int, t: int) -> None:
        s = t
        g = gap[v]
        if g:
            ge = last_end[pi] + g
            s = (ge if ge > s else s) if g > 0 else s - g if g > held_gap else hold(v, s)
        start[v] = s
        if not unlimited[pi]:
            busy[pi] = True
        d = plain_dur[v]
        if d >= 0:
            heappush(heap, ((s + d) << shift) | (v << 3))
        elif s > t:
            heappush(heap, (s << shift) | (v << 3) | START)
        else:
            special(v, s)

    def special(v: int, s: int) -> None:
        r = role[v]
        m = match.get(v, -1)
        if r == COLLECTIVE and m >= 0:
            arrived[m] += 1
            if s > latest[m]:
                latest[m] = s
            members = inst_members[m]
            if arrived[m] == len(members):
                t0 = latest[m]
                ends = inst_finish[m] if inst_finish else None
                exits = inst_exit[m]
                if ends is not None:  # astra mode: each member ends at its own time
                    for u, e in zip(members, ends([start[u] for u in members]), strict=True):
                        wait[u] = t0 - start[u]
                        heappush(heap, (e << shift) | (u << 3) | FINISH_SPECIAL)
                elif exits is None:
                    e = (t0 + inst_dur[m]) << shift
                    for u in members:
                        wait[u] = t0 - start[u]
                        heappush(heap, e | (u << 3) | FINISH_SPECIAL)
                else:
                    for u, x in zip(members, exits, strict=True):
                        wait[u] = t0 - start[u]
                        heappush(heap, ((t0 + x) << shift) | (u << 3) | FINISH_SPECIAL)
        elif r == P2P_SEND and m >= 0:
            msg = s + inst_dur[m]
            finish_at(v, msg)
            rv = inst_members[m][1]
            if posted[m] >= 0:
                wait[rv] = max(0, s - posted[m])
                finish_at(rv, max(posted[m], msg))
            else:
                msg_at[m], sent_at[m] = msg, s
        elif r == P2P_RECV and m >= 0:
            if msg_at[m] >= 0:
                wait[v] = max(0, sent_at[m] - s)
                finish_at(v, max(s, msg_at[m]))
            else:
                posted[m] = s
        elif r == SYNC_WAIT and sync is not None:
            slot, kind, stream, event = plan.sync_args[v]
            if not sync.block(v, slot, kind, stream, event):
                finish_at(v, s + special_dur[v])
        elif r == EVENT_RECORD and sync is not None:
            slot, _, stream, event = plan.sync_args[v]
            sync.record(slot, event, stream)
            finish_at(v, s + special_dur[v])
        elif r == LAUNCH:
            for e, latency in plan.early[v]:
                heappush(heap, ((s + latency) << shift) | ((n + e) << 3) | RELEASE)
            if v not in op_waits:
                finish_at(v, s + special_dur[v])
        elif r == STREAM_WAIT and sync is not None:
            slot, _, stream, event = plan.sync_args[v]
            marker = sync.add_marker(slot, event)
            pw = plan.stream_of[slot].get(stream)
            if marker is not None and pw is not None:
                queues[pw].append(-(marker + 1))
                if not busy[pw]:
                    try_start(pw, s)
            finish_at(v, s + special_dur[v])
        else:
            finish_at(v, s + special_dur[v])

    def try_start(pi: int, t: int) -> None:
        if by_id:
            dispatch(pi, t)
            return
        q = queues[pi]
        while q and not busy[pi]:
            v = q[0]
            if v < 0:
                if sync is not None and sync.marker_blocks(-v - 1, -(pi + 1)):
                    return
                q.popleft()
                continue
            if indeg[v]:
                return
            q.popleft()
            begin(v, pi, t)

    def enqueue(u: int, t: int) -> None:
        pu = proc[u]
        if unlimited[pu]:
            if not indeg[u]:
                begin(u, pu, t)
            return
        if stream_procs[pu]:
            enq_counts[pu] += 1
        q = queues[pu]
        if by_id:
            heappush(q, u)
            dispatch(pu, t)
        else:
            q.append(u)
            if not busy[pu] and len(q) == 1 and not indeg[u]:
                q.popleft()
                begin(u, pu, t)

    def release(token: int, t: int) -> None:
        if token >= 0:
            wait[token] = t - start[token]
            finish_at(token, t + special_dur[token])
        else:
            try_start(-token - 1, t)

    def wait_for_op(call: int, u: int, t: int) -> None:  # u's stream runs up to u, or as recorded
        pu = proc[u]
        blocked = not enq[u] and stream_procs[pu]
        if not (blocked and sync.block_until(call, pu, enq_counts[pu])):  # type: ignore[union-attr]
            finish_at(call, max(t, start[call] + op_waits[call][2]))

    slot_start = plan.slot_start or [0] * (len(plan.offsets) - 1)
    roots = np.flatnonzero(plan.enq == 0)
    first_root = np.searchsorted(roots, plan.offsets).tolist()
    roots_list = roots.tolist()
    for pi, t_free in plan.free_at:  # streams busy with work queued before the step
        busy[pi] = True
        heappush(heap, (t_free << shift) | ((n + pi) << 3) | FREE)
    for k, t0 in enumerate(slot_start):
        for pi in range(plan.proc_offsets[k], plan.proc_offsets[k + 1]):
            last_end[pi] = t0
        for v in roots_list[first_root[k] : first_root[k + 1]]:
            if t0:
                heappush(heap, (t0 << shift) | (v << 3) | RELEASE)
            else:
                enqueue(v, 0)
    other = 0
    vmask = (1 << (PRIO_SHIFT - KIND_BITS)) - 1
    while heap:
        key = heappop(heap)
        v = (key >> 3) & vmask
        t = key >> shift
        low = key & 7
        # a finish frees the processor (unlimited processors are never busy and have
        # no gaps: writing their busy/last_end is harmless)
        if not low:
            pi = proc[v]
            busy[pi] = False
            last_end[pi] = t
        elif low == FINISH_SPECIAL:
            end[v] = t
            pi = proc[v]
            busy[pi] = False
            last_end[pi] = t - wait[v] if wait_in_gap[v] else t
        else:
            other += 1
            if low == START:
                special(v, t)
            elif low == FREE:
                pi = v - n
                busy[pi] = False
                last_end[pi] = t
                try_start(pi, t)
            elif low == RELEASE:
                if v < n:
                    enqueue(v, t)
                    continue
                u = early_dst[v - n]
                indeg[u] -= 1
                enq[u] -= 1
                if not enq[u]:
                    enqueue(u, t)
                if v - n in waiting_call:
                    wait_for_op(waiting_call[v - n], u, t)
            else:
                pi = v - n
                dispatching[pi] = False
                q = queues[pi]
                if q and not busy[pi]:
                    u = heappop(q)
                    begin(u, pi, t)
            continue
        if stream_procs[pi]:
            done = done_counts[pi] + 1
            done_counts[pi] = done
            w = waiters[pi]
            if w and w[0][0] <= done:
                for token in sync.released(pi):  # type: ignore[union-attr]
                    release(token, t)
        for e in succ[succ_ptr[v] : succ_ptr[v + 1]]:
            u = e >> 2
            if e & 2:  # u's only dependency, and it enqueues u
                indeg[u] = 0
                pu = proc[u]
                if not fifo[pu]:
                    enqueue(u, t)
                    continue
                if stream_procs[pu]:
                    enq_counts[pu] += 1
                q = queues[pu]
                if busy[pu] or q:
                    q.append(u)
                    continue
            else:
                r = indeg[u] - 1
                indeg[u] = r
                if e & 1:
                    c = enq[u] - 1
                    enq[u] = c
                    if c:
                        continue
                    pu = proc[u]
                    if not fifo[pu]:
                        enqueue(u, t)
                        continue
                    if stream_procs[pu]:
                        enq_counts[pu] += 1
                    q = queues[pu]
                    if r or busy[pu] or q:
                        q.append(u)
                        continue
                elif r:
                    continue
                else:
                    pu = proc[u]
                    if unlimited[pu]:
                        begin(u, pu, t)
                        continue
                    if busy[pu] or by_id:
                        continue
                    q = queues[pu]
                    if not q or q[0] != u:
                        continue
                    q.popleft()
            s = t
            gp = gap[u]
            if gp:
                ge = last_end[pu] + gp
                s = (ge if ge > s else s) if gp > 0 else s - gp if gp > held_gap else hold(u, s)
            start[u] = s
            busy[pu] = True
            d = plain_dur[u]
            if d >= 0:
                heappush(heap, ((s + d) << shift) | (u << 3))
            elif s > t:
                heappush(heap, (s << shift) | (u << 3) | START)
            else:
                special(u, s)
        q = queues[pi]
        if q and not busy[pi]:
            u = q[0]
            if by_id or u < 0:
                try_start(pi, t)
                continue
            if indeg[u]:
                continue
            q.popleft()
            s = t
            gp = gap[u]
            if gp:
                ge = last_end[pi] + gp
                s = (ge if ge > s else s) if gp > 0 else s - gp if gp > held_gap else hold(u, s)
            start[u] = s
            busy[pi] = True
            d = plain_dur[u]
            if d >= 0:
                heappush(heap, ((s + d) << shift) | (u << 3))
            elif s > t:
                heappush(heap, (s << shift) | (u << 3) | START)
            else:
                special(u, s)
    for view in (plain_dur, gap, proc, role, succ_ptr, succ, indeg, enq, wait_in_gap):
        view.release()  # the loop's closures hold them in cycles: let the plan go when done
    start_ns, end_ns, wait_ns = (np.frombuffer(a, np.int64) for a in (start, end, wait))
    plain = (plan.role == PLAIN) & (start_ns >= 0)
    np.add(start_ns, plan.dur, out=end_ns, where=plain)
    if bool((end_ns[plain] < start_ns[plain]).any()):  # numpy wraps where array("q") raises
        raise OverflowError("a node's end passes 64-bit nanoseconds")
    events = other + int(np.count_nonzero(end_ns >= 0))
    return Schedule(start_ns, end_ns, wait_ns, events)
