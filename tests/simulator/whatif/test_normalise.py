"""Normalising a traced step before editing it: waits anchored on what they waited for,
preempted op instances trimmed (hand-made ranks with the fields `lumos convert` writes)."""

from __future__ import annotations

import json

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import make_attr
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.api import WhatIf, apply_edits, recover
from lumos.simulator.whatif.etset import EtSet, RankEt, simulate_etset
from lumos.simulator.whatif.preemption import trim_preemptions
from lumos.simulator.whatif.waits import anchor_waits
from tests.simulator.whatif.builders import rank_meta, training_step

MAIN, GLOO = 2365, 2369
US = 1_000


class _Thread:
    """Nodes of one rank laid out on recorded times, each with its `gap_ns` as the
    converter computes it (start minus the previous end on the same thread)."""

    def __init__(self) -> None:
        self.nodes: list[pb.Node] = []
        self.end: dict[int, int] = {}

    def add(
        self,
        name: str,
        start: int,
        dur: int,
        *,
        tid: int = MAIN,
        ntype: int = pb.COMP_NODE,
        data: tuple[int, ...] = (),
        shapes: object = None,
        attrs: tuple[tuple[str, object], ...] = (),
    ) -> int:
        n = pb.Node(id=len(self.nodes) + 1, name=name, type=ntype)
        n.duration_micros = dur // US
        prev = [m.id for m in self.nodes if nd.int_attr(m, cv.TID) == tid]
        if prev:
            n.ctrl_deps.append(prev[-1])
        n.data_deps.extend(data)
        if shapes is not None:
            n.inputs.shapes = json.dumps(shapes, separators=(",", ":"))
        gap = max(0, start - self.end.get(tid, 0))
        items: list[tuple[str, object]] = [
            (cv.DUR_NS, dur),
            (cv.START_NS, start),
            (cv.TID, tid),
            (cv.GAP_NS, gap),
        ]
        if ntype == pb.COMP_NODE:
            items += [("is_cpu_op", True), (cv.CATEGORY, "cpu_op"), ("rf_id", n.id)]
        n.attr.extend(make_attr(k, v) for k, v in (*items, *attrs))
        self.nodes.append(n)
        self.end[tid] = start + dur
        return n.id


def _ddp_tail(allreduce_ns: int, late_close_ns: int = 0, linked: bool = True) -> EtSet:
    """Two DDP ranks at the end of backward: the main thread issues a bucket's gloo
    all-reduce (run on a gloo worker thread) and then waits for it, idle, before DDP
    copies the bucket back (`aten::as_strided`) and the optimizer runs. `late_close_ns`:
    the all-reduce's event closes that long after the main thread resumed."""
    ranks = []
    for rank in range(2):
        t = _Thread()
        t.add("aten::linear", 0, 100 * US)
        t.add("autograd::engine::evaluate_function: MmBackward0", 100 * US, 10 * US)
        t.add("aten::mm", 110 * US, 290 * US, shapes=[[64, 128], [128, 128]])
        issue = t.add("c10d::allreduce_", 400 * US, 20 * US)
        coll_start = 430 * US
        coll_end = coll_start + allreduce_ns
        coll = t.add(
            "gloo:all_reduce",
            coll_start,
            allreduce_ns,
            tid=GLOO,
            ntype=pb.COMM_COLL_NODE,
            data=(issue,),
            attrs=(("comm_type", 0), ("comm_size", 1 << 20), ("pg_name", "0")),
        )
        resume = coll_end + 20 * US - late_close_ns
        t.add("aten::as_strided", resume, 10 * US, data=(coll,) if linked else ())
        t.add("aten::add_", resume + 10 * US, 300 * US, shapes=[[128, 128], [128, 128]])
        ranks.append(RankEt(rank, rank_meta(rank, 2), tuple(t.nodes)))
    return EtSet(tuple(ranks), "ddp-tail")


def _gap(ets: EtSet, name: str) -> int:
    return next(nd.int_attr(n, cv.GAP_NS) for n in ets.ranks[0].nodes if n.name == name)


def test_gap_waiting_for_a_gloo_all_reduce_keeps_only_the_wake_up() -> None:
    traced = _ddp_tail(5_000 * US)
    assert _gap(traced, "aten::as_strided") == (430 + 5_000 + 20 - 420) * US  # idle, waiting
    anchored, stats = anchor_waits(traced)
    assert _gap(anchored, "aten::as_strided") == 20 * US  # the wake-up after the all-reduce
    assert stats.anchored >= 2 and stats.found == 0
    # the traced step replays as before, less the wake-ups (gloo's 10 us after the call
    # that issued the all-reduce, the main thread's 20 us after it), now spent in the wait
    before = simulate_etset(traced).iteration_time_ns
    after = simulate_etset(anchored).iteration_time_ns
    assert before - after == 30 * US


def test_wait_for_a_removed_all_reduce_goes_with_it() -> None:
    # one replica instead of two: the all-reduce has no peer, and the main thread no
    # longer waits 5 ms for it (the recorded gap held that wait)
    traced = _ddp_tail(5_000 * US)
    raw = simulate_etset(apply_edits(recover(traced, normalise=False), WhatIf(dp=1))[0])
    fixed = simulate_etset(apply_edits(recover(traced), WhatIf(dp=1))[0])
    assert raw.iteration_time_ns > 5_000 * US
    assert fixed.iteration_time_ns < 800 * US


def test_wait_missed_because_the_all_reduce_event_closed_after_the_waiter_resumed() -> None:
    # gloo wakes the waiting thread, then closes its annotation ~100 us later: the
    # converter found no task ending in the gap, so the op carries no dependency
    traced = _ddp_tail(5_000 * US, late_close_ns=120 * US, linked=False)
    waiter = next(n for n in traced.ranks[0].nodes if n.name == "aten::as_strided")
    assert not waiter.data_deps
    anchored, stats = anchor_waits(traced)
    waiter = next(n for n in anchored.ranks[0].nodes if n.name == "aten::as_strided")
    coll = next(n for n in anchored.ranks[0].nodes if n.name == "gloo:all_reduce")
    assert list(waiter.data_deps) == [coll.id]
    assert nd.int_attr(waiter, cv.GAP_NS) == 0
    assert stats.found == 2  # on both ranks


def test_gap_after_a_blocking_recv_is_the_recv_wait() -> None:
    # a pipeline stage posts a gloo recv and then blocks in `wait()` (untraced) until the
    # activation arrives: the next op's gap is that wait, which the simulator already
    # gives the recv by pairing it with the peer's send
    t = _Thread()
    t.add("c10d::recv_", 0, 40 * US)
    t.add(
        "gloo:recv",
        40 * US,
        10 * US,
        ntype=pb.COMM_RECV_NODE,
        attrs=(("comm_src", 1), ("comm_dst", 0), ("comm_tag", 0), ("comm_size", 4096)),
    )
    t.add("aten::layer_norm", 7_000 * US, 100 * US)
    rank = RankEt(0, rank_meta(0, 1), tuple(t.nodes))
    anchored, stats = anchor_waits(EtSet((rank,), "recv"))
    assert _gap(anchored, "aten::layer_norm") == 0
    assert stats.removed_ns == 7_000 * US - 50 * US


def _addmm_rank(rank: int, durations: list[int], gpu_reads: bool = False) -> RankEt:
    t = _Thread()
    at = 0
    for d in durations:
        t.add("aten::addmm", at, d, shapes=[[128], [64, 128], [128, 128], [], []])
        at += d
    t.add("aten::embedding_dense_backward", at, 5_000 * US, shapes=[[64, 128]])  # seen once
    at += 5_000 * US
    t.add("aten::item", at, 4_000 * US if gpu_reads else 5 * US, shapes=[[]])
    return RankEt(rank, rank_meta(rank, 2), tuple(t.nodes))


def test_preempted_op_instance_is_trimmed_to_its_typical_time() -> None:
    # rank 1's second addmm lost a 4 ms time slice; the typical addmm takes 100 us
    ets = EtSet(
        (
            _addmm_rank(0, [100 * US, 105 * US, 98 * US]),
            _addmm_rank(1, [101 * US, 4_100 * US, 99 * US]),
        ),
        "preempted",
    )
    trimmed, stats = trim_preemptions(ets)
    durs = [nd.duration(n) for n in trimmed.ranks[1].nodes if n.name == "aten::addmm"]
    assert durs == [101 * US, 100 * US, 99 * US]  # the lower median of the six
    assert stats.ops == 1 and stats.removed_ns == 4_000 * US
    # an op seen once is left as traced
    once = [nd.duration(n) for r in trimmed.ranks for n in r.nodes if "dense" in n.name]
    assert once == [5_000 * US, 5_000 * US]


def test_time_slice_lost_between_two_ops_is_trimmed_from_the_gap() -> None:
    # the slice fell between two addmm calls: no op took it, the untraced gap did
    ranks = []
    for rank in range(2):
        t = _Thread()
        at = 0
        for k in range(3):
            at += 3_900 * US if (rank, k) == (1, 1) else 5 * US  # a 3.9 ms gap, once
            t.add("aten::addmm", at, 100 * US, shapes=[[128], [64, 128], [128, 128], [], []])
            at += 100 * US
        ranks.append(RankEt(rank, rank_meta(rank, 2), tuple(t.nodes)))
    trimmed, stats = trim_preemptions(EtSet(tuple(ranks), "gap"))
    gaps = [nd.int_attr(n, cv.GAP_NS) for n in trimmed.ranks[1].nodes]
    assert gaps == [5 * US, 5 * US, 5 * US]
    assert (stats.ops, stats.gaps, stats.removed_ns) == (0, 1, 3_895 * US)


def test_host_read_of_a_device_value_is_a_wait_on_a_gpu_trace() -> None:
    # `aten::item` blocks until the GPU is done on a GPU trace: its time is a wait, not a slice
    ranks = [_addmm_rank(r, [100 * US] * 3, gpu_reads=r == 1) for r in range(2)]
    kernel = pb.Node(id=100, name="sm80_gemm", type=pb.COMP_NODE)
    kernel.attr.extend([make_attr(cv.STREAM, 7), make_attr(cv.DUR_NS, 50 * US)])
    gpu_rank = RankEt(1, ranks[1].metadata, (*ranks[1].nodes, kernel))
    _, stats = trim_preemptions(EtSet((ranks[0], gpu_rank), "gpu"))
    assert stats.ops == 0
    _, stats = trim_preemptions(EtSet(tuple(ranks), "cpu"))
    assert stats.ops == 1  # on a CPU-only trace the same 4 ms read is a lost slice


def test_layers_edit_does_not_copy_a_preemption_into_every_new_layer() -> None:
    ets = training_step(layers=3, ranks=2)
    r0 = ets.ranks[0]
    nodes = list(r0.nodes)
    gelus = [i for i, n in enumerate(nodes) if n.name == "aten::gelu"]
    stalled = nd.clone(nodes[gelus[1]])  # the interior layer's GELU lost a 4 ms slice
    nd.set_duration(stalled, nd.duration(stalled) + 4_000 * US)
    nodes[gelus[1]] = stalled
    noisy = EtSet((RankEt(0, r0.metadata, tuple(nodes)), ets.ranks[1]), "noisy")
    clean = simulate_etset(apply_edits(recover(ets), WhatIf(layers=6))[0]).iteration_time_ns
    raw = apply_edits(recover(noisy, normalise=False), WhatIf(layers=6))[0]
    fixed = apply_edits(recover(noisy), WhatIf(layers=6))[0]
    assert simulate_etset(raw).iteration_time_ns > clean + 3 * 4_000 * US  # copied 4 times
    # not copied: the slice comes back only as the expected loss while the host is full
    # (`contention`: one slice in a 0.5 ms step reads as the highest rate, half speed)
    assert clean < simulate_etset(fixed).iteration_time_ns <= 2 * clean


def _inflate_first_collective(ets: EtSet, rank: int, extra: int) -> EtSet:
    ranks = []
    for r in ets.ranks:
        nodes = list(r.nodes)
        if r.rank == rank:
            k = next(i for i, n in enumerate(nodes) if n.type == pb.COMM_COLL_NODE)
            slow = nd.clone(nodes[k])
            nd.set_duration(slow, nd.comm_duration(slow) + extra)
            nodes[k] = slow
        ranks.append(RankEt(r.rank, r.metadata, tuple(nodes)))
    return EtSet(tuple(ranks), ets.source)


def _comm_times(ets: EtSet) -> list[int]:
    return [nd.comm_duration(n) for r in ets.ranks for n in r.nodes if nd.is_comm(n)]


def test_gloo_collective_that_waited_for_a_core_is_trimmed_nccl_is_not() -> None:
    # a gloo worker thread needs a core for every step of its transfer: on a busy host
    # one all-reduce took 8 ms more than the others of its size
    clean = training_step(layers=4, ranks=2)
    noisy = _inflate_first_collective(clean, 1, 8_000 * US)
    trimmed, stats = trim_preemptions(noisy)
    assert stats.collectives == 1 and stats.removed_ns == 8_000 * US
    assert _comm_times(trimmed) == _comm_times(clean)
    gpu = _inflate_first_collective(training_step(layers=4, ranks=2, gpu=True), 1, 8_000 * US)
    assert trim_preemptions(gpu)[1].collectives == 0  # NCCL on a stream: not a host's core
