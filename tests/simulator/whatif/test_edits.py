"""Each edit on small steps: exact new structure, sizes, groups; round trips; composition."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.validate import validate_sources
from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.api import WhatIf, apply_edits, recover
from lumos.simulator.whatif.dims import hidden_map
from lumos.simulator.whatif.dp import set_dp
from lumos.simulator.whatif.etset import EtSet, RankEt, simulate_etset, write_etset
from lumos.simulator.whatif.faults import slow_link, slow_rank
from lumos.simulator.whatif.layers import layer_sources, set_layers
from lumos.simulator.whatif.netfit import fit_network
from lumos.simulator.whatif.reshape import reshape
from lumos.simulator.whatif.tp import set_tp
from tests.simulator.whatif.builders import training_step


def _time(ets: EtSet) -> int:
    return simulate_etset(ets).iteration_time_ns


def _durations(ets: EtSet) -> list[list[int]]:
    return [[nd.duration(n) for n in r.nodes] for r in ets.ranks]


def _colls(ets: EtSet, rank: int = 0) -> list[pb.Node]:
    return [n for n in ets.rank(rank).nodes if n.type == pb.COMM_COLL_NODE]


def _valid(ets: EtSet, tmp: Path) -> None:
    write_etset(ets, tmp)
    report = validate_sources(find_et_sources(tmp))
    errors = [p for f in report.files for p in f.problems if p.severity.name == "ERROR"]
    assert not errors and not [p for p in report.cross_rank if p.severity.name == "ERROR"]


def test_layer_sources_keep_first_and_last() -> None:
    assert layer_sources(3, 5) == [0, 1, 1, 1, 2]
    assert layer_sources(3, 2) == [0, 2]
    assert layer_sources(2, 4) == [0, 0, 0, 1]


@pytest.mark.parametrize("gpu", [False, True])
def test_layers_add_copies_whole_layers_with_their_collectives(gpu: bool, tmp_path: Path) -> None:
    rec = recover(training_step(layers=3, gpu=gpu))
    base = rec.ets
    per_layer = Counter(nd.tags(n)[1] for n in base.rank(0).nodes)[1]
    edited = set_layers(base, 5)
    for r_old, r_new in zip(base.ranks, edited.ranks, strict=True):
        assert len(r_new.nodes) == len(r_old.nodes) + 2 * per_layer
        assert [n.id for n in r_new.nodes] == list(range(1, len(r_new.nodes) + 1))
    assert len(_colls(edited)) == 5
    assert [nd.tags(n)[1] for n in _colls(edited)] == [4, 3, 2, 1, 0]
    # one chain per thread: every CPU node but the first follows exactly one on its thread
    main = [n for n in edited.rank(0).nodes if nd.processor(n) == ("tid", 100)]
    ids = {n.id: n for n in edited.rank(0).nodes}
    for n in main[1:]:
        same = [d for d in nd.deps(n) if nd.processor(ids[d]) == ("tid", 100)]
        assert len(same) == 1
    _valid(edited, tmp_path)
    assert _time(edited) > _time(base)


def test_layers_round_trip_returns_the_same_step() -> None:
    base = recover(training_step(layers=3)).ets
    back = set_layers(set_layers(base, 6), 3)
    assert abs(_time(back) - _time(base)) <= 0.005 * _time(base)
    fewer = set_layers(base, 1)
    assert len(_colls(fewer)) == 1


def test_dp_resize_groups_sizes_and_fitted_times() -> None:
    base = recover(training_step(layers=2, ranks=2)).ets
    fit = fit_network(base).for_group((0, 1))
    edited = set_dp(base, 4)
    assert [r.rank for r in edited.ranks] == [0, 1, 2, 3]
    for r in edited.ranks:
        for old, new in zip(
            _colls(base), [n for n in r.nodes if n.type == pb.COMM_COLL_NODE], strict=True
        ):
            assert nd.attr(new, "pg_ranks") == [0, 1, 2, 3]
            assert nd.int_attr(new, "comm_size") == nd.int_attr(old, "comm_size")
            size = nd.int_attr(old, "comm_size")
            want = nd.comm_duration(old) + fit.time_ns(0, size, 4) - fit.time_ns(0, size, 2)
            assert abs(nd.comm_duration(new) - want) <= 1
    back = set_dp(edited, 2)
    assert abs(_time(back) - _time(base)) <= 0.005 * _time(base)


def test_dp_at_the_traced_degree_leaves_the_collectives_as_traced() -> None:
    # a real 2-rank gloo capture's all-reduces carry no comm_dur_ns: the replay lets each
    # member leave at its own recorded exit. Rewriting their duration as comm_dur_ns (an
    # identity re-pricing) dropped that and moved the step by 1.3 %.
    from lumos.converters.pytorch.convert import convert
    from lumos.simulator.whatif.etset import load_etset
    from tests.conftest import DATA

    out = Path(__import__("tempfile").mkdtemp()) / "et"
    convert([DATA / "captures" / "ddp"], out, prefix="ddp")
    base = recover(load_etset(out)).ets
    same = set_dp(base, 2)
    for rank in (0, 1):
        before, after = _colls(base, rank), _colls(same, rank)
        assert [nd.duration(n) for n in after] == [nd.duration(n) for n in before]
        dur = [nd.int_attr(n, "comm_dur_ns") for n in before]
        assert [nd.int_attr(n, "comm_dur_ns") for n in after] == dur and -1 in dur
    assert _time(same) == _time(base)


def test_dp_resize_reprices_the_transfer_and_keeps_the_wait() -> None:
    # gloo on a busy host: one all-reduce took 3 ms more than its transfer (it waited for
    # a core); four replicas move more bytes per rank, the wait stays as measured, and
    # one replica has no transfer and no one to wait for
    base = recover(training_step(layers=4, ranks=2)).ets
    fit = fit_network(base).for_group((0, 1))
    ranks = []
    for r in base.ranks:
        nodes = list(r.nodes)
        k = next(i for i, n in enumerate(nodes) if n.type == pb.COMM_COLL_NODE)
        slow = nd.clone(nodes[k])
        nd.set_duration(slow, nd.comm_duration(slow) + 3_000_000)
        nodes[k] = slow
        ranks.append(RankEt(r.rank, r.metadata, tuple(nodes)))
    noisy = EtSet(tuple(ranks), "noisy")
    envelope = fit_network(noisy).for_group((0, 1))  # the slow instance is not the transfer
    assert (envelope.alpha_ns, envelope.ns_per_byte) == pytest.approx(
        (fit.alpha_ns, fit.ns_per_byte)
    )
    slow = _colls(noisy)[0]
    size = nd.int_attr(slow, "comm_size")
    four = _colls(set_dp(noisy, 4))[0]
    transfer = fit.time_ns(0, size, 4) - fit.time_ns(0, size, 2)
    assert abs(nd.comm_duration(four) - (nd.comm_duration(slow) + transfer)) <= 1
    assert all(nd.comm_duration(n) == 0 for n in _colls(set_dp(noisy, 1)))


def test_dp_fit_recovers_the_builders_alpha_beta() -> None:
    # the builder times an all-reduce as 50 us + size/20 ns: ring on 2 ranks moves `size`
    fit = fit_network(recover(training_step(layers=3)).ets).for_group((0, 1))
    assert fit.alpha_ns == pytest.approx(25_000, rel=0.01)
    assert fit.ns_per_byte == pytest.approx(1 / 20, rel=0.01)


def test_hidden_rewrites_shapes_and_retimes_from_the_trace_fit() -> None:
    rec = recover(training_step(layers=2))
    assert rec.dims is not None
    wide = reshape(rec.ets, hidden_map(rec.dims, 96))
    addmm = [n for n in wide.rank(0).nodes if n.name == "aten::addmm"]
    assert addmm[0].inputs.shapes == "[[384],[48,96],[96,384],[],[]]"
    old = [n for n in rec.ets.rank(0).nodes if n.name == "aten::addmm"]
    # builder GEMMs take 20 us + flops/100 ns: 4x the FLOPs, on that line
    f_old = 2 * 48 * 64 * 256
    assert nd.duration(addmm[0]) == pytest.approx(
        nd.duration(old[0]) * (20_000 + 2.25 * f_old / 100) / (20_000 + f_old / 100), rel=0.02
    )
    back = reshape(wide, hidden_map(rec.dims.__class__(3, 16, 96, 1), 64))
    assert abs(_time(back) - _time(rec.ets)) <= 0.005 * _time(rec.ets)


def test_edits_compose_in_either_order() -> None:
    rec = recover(training_step(layers=3))
    a, _ = apply_edits(rec, WhatIf(layers=5, hidden=96))
    rec2 = recover(set_layers(rec.ets, 5))
    rec2.dims = rec.dims
    b, _ = apply_edits(rec2, WhatIf(hidden=96))
    assert abs(_time(a) - _time(b)) <= 0.005 * _time(a)


def test_slow_rank_stretches_its_compute_and_the_step() -> None:
    base = recover(training_step(layers=2, gpu=True)).ets
    slow = slow_rank(base, 1, 2.0)
    k_old = [nd.duration(n) for n in base.rank(1).nodes if nd.on_gpu(n) and not nd.is_comm(n)]
    k_new = [nd.duration(n) for n in slow.rank(1).nodes if nd.on_gpu(n) and not nd.is_comm(n)]
    assert k_new == [2 * d for d in k_old]
    assert [nd.duration(n) for n in slow.rank(0).nodes] == [
        nd.duration(n) for n in base.rank(0).nodes
    ]
    assert _time(slow) > _time(base)
    assert _time(slow_link(base, 0, 3.0)) > _time(base)
    with pytest.raises(ConfigError, match="rank 5 is not in the trace"):
        slow_rank(base, 5, 2.0)


@pytest.mark.parametrize("gpu", [False, True])
def test_tp_adds_megatron_all_reduces_and_shards_gemms(gpu: bool, tmp_path: Path) -> None:
    base = recover(training_step(layers=3, ranks=2, gpu=gpu)).ets
    edited = set_tp(base, 2)
    assert [r.rank for r in edited.ranks] == [0, 1, 2, 3]  # replica * 2 + tp index
    for r in edited.ranks:
        groups = Counter(
            tuple(nd.attr(n, "pg_ranks")) for n in r.nodes if n.type == pb.COMM_COLL_NODE
        )
        tp = tuple(r.rank // 2 * 2 + k for k in range(2))
        dp = (r.rank % 2, 2 + r.rank % 2)
        # fwd: 1 per layer (the builder's layer has one GEMM pair), bwd: 1 per layer; DP: 3
        assert groups == {tp: 6, dp: 3}
        tp_size = {nd.int_attr(n, "comm_size") for n in r.nodes if n.name == "whatif:tp_all_reduce"}
        assert tp_size == {3 * 16 * 64 * 4}
    gemm = "sm80_xmma_gemm_f16f16_f32" if gpu else "aten::addmm"
    old = [nd.duration(n) for n in base.rank(0).nodes if n.name == gemm and nd.tags(n)[1] >= 0]
    new = [nd.duration(n) for n in edited.rank(0).nodes if n.name == gemm and nd.tags(n)[1] >= 0]
    assert all(b < a for a, b in zip(old, new, strict=True))
    _valid(edited, tmp_path)
    # 1 -> 2 -> 1 and 2 -> 4 -> 2 return the same step; TP and layers commute
    assert _time(set_tp(edited, 1)) == _time(base)
    assert _time(set_tp(set_tp(edited, 4), 2)) == _time(edited)
    assert _time(set_tp(set_layers(base, 5), 2)) == _time(set_layers(edited, 5))


@pytest.mark.parametrize("gpu", [False, True])
def test_round_trips_return_the_base_step_on_cpu_and_gpu_shaped_steps(gpu: bool) -> None:
    # A -> B -> A within 0.5 % for every resizing edit, on a CPU-only step and on a
    # multi-stream GPU step (kernels launched by CPU ops, NCCL on its own stream)
    rec = recover(training_step(layers=3, ranks=2, gpu=gpu))
    base = _time(rec.ets)
    for there, back in (
        (WhatIf(layers=6), WhatIf(layers=3)),
        (WhatIf(dp=4), WhatIf(dp=2)),
        (WhatIf(hidden=96), WhatIf(hidden=64)),
        (WhatIf(seq=32), WhatIf(seq=16)),
        (WhatIf(tp=2), WhatIf(tp=1)),
    ):
        edited, _ = apply_edits(rec, there)
        assert _durations(edited) != _durations(rec.ets), there
        again = recover(edited)
        again.dims = (
            rec.dims.__class__(
                rec.dims.batch,
                there.seq or rec.dims.seq,
                there.hidden or rec.dims.hidden,
                rec.dims.heads,
            )
            if rec.dims
            else None
        )
        returned, _ = apply_edits(again, back)
        assert abs(_time(returned) - base) <= 0.005 * base, (there, back)


@pytest.mark.parametrize("gpu", [False, True])
def test_layers_and_tp_compose_in_either_order(gpu: bool) -> None:
    rec = recover(training_step(layers=3, ranks=2, gpu=gpu))
    a, _ = apply_edits(rec, WhatIf(layers=5, tp=2))  # layers, then TP
    b = set_layers(apply_edits(rec, WhatIf(tp=2))[0], 5)
    assert [len(r.nodes) for r in a.ranks] == [len(r.nodes) for r in b.ranks]
    assert abs(_time(a) - _time(b)) <= 0.005 * _time(a)


def _with_comm_seq(ets: EtSet, order: dict[int, list[int]]) -> EtSet:
    """Each rank's collectives numbered by `comm_seq` in `order[rank]` (node order on
    ranks not named), each sized by its sequence number so a mismatch shows, and run on
    two worker threads in turn (as gloo does)."""
    ranks = []
    for r in ets.ranks:
        nodes, k = [], 0
        seqs = order.get(r.rank)
        for n in r.nodes:
            if n.type == pb.COMM_COLL_NODE:
                n = nd.clone(n)
                seq = seqs[k] if seqs else k
                nd.put(n, "comm_seq", seq, "int64_val")
                nd.put(n, "comm_size", 4096 * (seq + 1), "int64_val")
                nd.put(n, "tid", nd.int_attr(n, "tid") + k % 2, "int64_val")
                del n.ctrl_deps[:]  # no order across the two threads: each waits for its call
                k += 1
            nodes.append(n)
        ranks.append(RankEt(r.rank, r.metadata, tuple(nodes)))
    return EtSet(tuple(ranks), ets.source)


def test_layers_edit_keeps_collectives_matched_when_ranks_list_them_in_another_order() -> None:
    # gloo runs a rank's collectives on two worker threads: rank 1's ET lists its second
    # and third all-reduce the other way round; comm_seq (the issue order) still matches
    base = training_step(layers=4, ranks=2, ddp=True)
    ets = _with_comm_seq(base, {1: [0, 2, 1, 3]})
    assert simulate_etset(ets).iteration_time_ns > 0  # the trace itself matches by comm_seq
    for layers in (2, 3, 6):
        edited, _ = apply_edits(recover(ets, normalise=False), WhatIf(layers=layers))
        by_seq = [
            sorted(
                (nd.int_attr(n, "comm_seq"), nd.int_attr(n, "comm_size"))
                for n in r.nodes
                if n.type == pb.COMM_COLL_NODE
            )
            for r in edited.ranks
        ]
        assert by_seq[0] == by_seq[1] and len(by_seq[0]) == layers
        assert simulate_etset(edited).iteration_time_ns > 0


def test_dp_from_one_rank_says_the_network_was_not_measured() -> None:
    # a one-rank trace has no transfer to fit: the edit must say its new all-reduces are free
    one = training_step(layers=2, ranks=1)
    _, notes = apply_edits(recover(one, normalise=False), WhatIf(dp=2))
    assert any("no collective between two ranks" in n for n in notes)
    _, notes = apply_edits(recover(training_step(layers=2, ranks=2), normalise=False), WhatIf(dp=4))
    assert not any("no collective between two ranks" in n for n in notes)
