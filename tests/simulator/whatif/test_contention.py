"""Host CPU contention (`whatif.contention`): the lost time slices a normalised step had,
given back to an edited step at the traced rate per oversubscribed-host millisecond
(hand-made CPU ranks with the fields `lumos convert` writes)."""

from __future__ import annotations

from dataclasses import replace

import pytest

from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.api import Recovered, WhatIf, apply_edits, recover
from lumos.simulator.whatif.contention import Contention, full_time, measure, recontend
from lumos.simulator.whatif.etset import EtSet, RankEt, simulate_etset
from tests.simulator.whatif.builders import training_step

US = 1_000


def _with_slice(ets: EtSet, rank: int, op: str, k: int, extra_ns: int) -> EtSet:
    """`ets` with the k-th `op` of `rank` longer by a lost time slice."""
    ranks = []
    for r in ets.ranks:
        nodes = list(r.nodes)
        if r.rank == rank:
            at = [i for i, n in enumerate(nodes) if n.name == op][k]
            slow = nd.clone(nodes[at])
            nd.set_duration(slow, nd.duration(slow) + extra_ns)
            nodes[at] = slow
        ranks.append(RankEt(r.rank, r.metadata, tuple(nodes)))
    return EtSet(tuple(ranks), "sliced")


def _uncontended(rec: Recovered) -> Recovered:
    return replace(rec, normalised=replace(rec.normalised, contention=Contention()))


def _step(ets: EtSet) -> int:
    return simulate_etset(ets).iteration_time_ns


def _busy_step() -> EtSet:
    # two ranks whose main threads overlap for most of the step, and whose gloo transfers
    # (about 0.85 ms each) run beside their backward: the host (2 cores) is oversubscribed
    return training_step(layers=6, ranks=2, hidden=1024, seq=64, batch=4)


def test_host_contention_rate_is_the_lost_time_over_the_full_host_time() -> None:
    traced = _with_slice(_busy_step(), 0, "aten::gelu", 2, 1_500 * US)
    rec = recover(traced)
    c = rec.normalised.contention
    assert c.active and c.cores == 2
    assert c.lost_ns == _step(traced) - _step(rec.ets) == 1_500 * US
    full = full_time(rec.ets, 2)
    assert c.full_ns == full and 0 < full <= _step(rec.ets)
    assert c.rate == pytest.approx(1_500 * US / full)
    # the base the what-if prints is the normalised step with its expected loss back
    base = _step(recontend(rec.ets, c))
    assert _step(rec.ets) + 0.8 * c.lost_ns <= base <= _step(rec.ets) + 1.2 * c.lost_ns


def test_expected_loss_follows_the_edited_full_host_time() -> None:
    rec = recover(_with_slice(_busy_step(), 0, "aten::gelu", 2, 1_500 * US))
    c = rec.normalised.contention
    plain = apply_edits(_uncontended(rec), WhatIf(layers=12))[0]
    loaded = apply_edits(rec, WhatIf(layers=12))[0]
    expected = c.rate * full_time(plain, 2)
    assert expected > 1.5 * c.lost_ns  # twice the layers: about twice the oversubscribed time
    assert _step(loaded) - _step(plain) == pytest.approx(expected, rel=0.2)


def test_one_rank_edit_loses_nothing_to_contention() -> None:
    rec = recover(_with_slice(_busy_step(), 0, "aten::gelu", 2, 1_500 * US))
    assert rec.normalised.contention.active
    alone = apply_edits(rec, WhatIf(dp=1))[0]
    assert _step(alone) == _step(apply_edits(_uncontended(rec), WhatIf(dp=1))[0])


def test_gpu_trace_has_no_host_contention() -> None:
    traced = _with_slice(training_step(layers=6, ranks=2, gpu=True), 0, "aten::gelu", 2, 1_500 * US)
    assert measure(traced, traced) == Contention()


def test_one_slice_in_a_short_step_is_bounded() -> None:
    traced = _with_slice(training_step(layers=3, ranks=2), 0, "aten::gelu", 1, 4_000 * US)
    c = recover(traced).normalised.contention
    assert c.lost_ns == 4_000 * US and c.full_ns < c.lost_ns
    assert c.rate == 1.0  # MAX_RATE: at most half speed while the host is full


def test_pipeline_stages_computing_without_a_transfer_beside_them_lose_nothing() -> None:
    """Two stages busy on the two cores do not oversubscribe the host; the DDP base lost
    its slices while gloo transfers ran beside both backwards. Before, the edited pipeline
    got the base's rate over every ms both stages computed (+4.6 / +4.5 % on the grid's
    PP rows; measured pipelines lose 2-3 %)."""
    rec = recover(_with_slice(_busy_step(), 0, "aten::gelu", 2, 1_500 * US))
    assert rec.normalised.contention.active
    pipeline = WhatIf(dp=1, pp=2, schedule="gpipe", microbatches=2)
    loaded = apply_edits(rec, pipeline)[0]
    assert full_time(loaded, 2) < 0.05 * _step(loaded)
    assert _step(loaded) == pytest.approx(_step(apply_edits(_uncontended(rec), pipeline)[0]))
