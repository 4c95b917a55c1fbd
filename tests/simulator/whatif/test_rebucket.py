"""DDP's buckets re-formed after edits that change gradient sizes or the layer stack."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.validate import validate_sources
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.api import WhatIf, apply_edits, recover
from lumos.simulator.whatif.etset import EtSet, load_etset, simulate_etset, write_etset
from lumos.simulator.whatif.rebucket import rebucket
from tests.simulator.whatif.ddp_builders import WORKERS, ddp_step


def _colls(ets: EtSet, rank: int = 0) -> list[pb.Node]:
    return [n for n in ets.rank(rank).nodes if n.type == pb.COMM_COLL_NODE]


def _sizes(ets: EtSet) -> list[int]:
    return [nd.int_attr(n, "comm_size") for n in _colls(ets)]


def _valid(ets: EtSet, tmp: Path) -> None:
    write_etset(ets, tmp)
    report = validate_sources(find_et_sources(tmp))
    errors = [p for f in report.files for p in f.problems if p.severity.name == "ERROR"]
    assert not errors and not [p for p in report.cross_rank if p.severity.name == "ERROR"]


def test_hidden_edit_splits_buckets_where_a_gradient_crosses_the_cap(tmp_path: Path) -> None:
    # hidden 64, cap 80,000 B: fc1's weight (65,536 B) shares a bucket with the layer
    # below; at hidden 128 it is 262,144 B, over the cap, and closes its own bucket
    rec = recover(ddp_step(hidden=64, cap=80_000))
    assert _sizes(rec.ets) == [91136, 132608, 132608, 92672]
    edited, notes = apply_edits(rec, WhatIf(hidden=128))
    assert "DDP buckets: 4 -> 7 all-reduces" in notes[-1]
    assert "(67,072, 91,136]" in notes[-1]
    expected = [313344, 264192, 263168, 264192, 263168, 264192, 52224]
    assert _sizes(edited) == expected == _sizes(ddp_step(hidden=128, cap=80_000))
    for r in edited.ranks:
        issued = [n for n in r.nodes if n.name == "c10d::allreduce_" and n.inputs.shapes]
        assert [int(n.inputs.shapes.split("]")[0].strip("[")) * 4 for n in issued] == expected
        # the worker threads in turn, as gloo's pool
        assert [nd.int_attr(c, "tid") for c in _colls(edited, r.rank)] == [
            WORKERS[k % 2] for k in range(7)
        ]
    _valid(edited, tmp_path)
    assert simulate_etset(edited).iteration_time_ns > simulate_etset(rec.ets).iteration_time_ns


def test_new_bucket_is_issued_after_its_last_gradient_and_awaited_by_finalisation() -> None:
    edited, _ = apply_edits(recover(ddp_step(hidden=64, cap=80_000)), WhatIf(hidden=128))
    r = edited.rank(0)
    ids = {n.id: k for k, n in enumerate(r.nodes)}
    for c in _colls(edited):
        issue = [r.nodes[ids[d]] for d in c.data_deps]
        assert [n.name for n in issue] == ["c10d::allreduce_"]
        before = r.nodes[ids[issue[0].id] - 1]  # right after the gradient's hand-over
        assert before.name.endswith("torch::autograd::AccumulateGrad")
    waits = [
        n
        for n in r.nodes
        if n.name == "torch.distributed.ddp.reducer::copy_bucket_to_grad"
        and any(d in {c.id for c in _colls(edited)} for d in n.data_deps)
    ]
    assert len(waits) >= 3  # the new buckets' first copies wait for their collectives


def test_resized_collectives_are_priced_on_the_fitted_line() -> None:
    rec = recover(ddp_step(hidden=64, cap=80_000))
    edited, _ = apply_edits(rec, WhatIf(hidden=128))
    durations = [nd.comm_duration(c) for c in _colls(edited)]
    by_size = dict(zip(_sizes(edited), durations, strict=True))
    assert by_size[313344] > by_size[264192] > by_size[52224] > 0


def test_layers_edit_forms_the_buckets_of_a_deeper_model() -> None:
    # a cap holding about one and a half layers: copies of a layer's collectives alone
    # would give 5 all-reduces for 6 layers; DDP's rule on the new stack gives 4
    rec = recover(ddp_step(layers=3, cap=200_000))
    assert _sizes(rec.ets) == [223744, 225280]
    for layers, count in ((2, 2), (6, 4)):
        edited, notes = apply_edits(rec, WhatIf(layers=layers))
        assert _sizes(edited) == _sizes(ddp_step(layers=layers, cap=200_000))
        assert len(_colls(edited)) == count and f"-> {count} all-reduces" in notes[-1]


def test_a_cap_the_range_leaves_open_is_said() -> None:
    # two buckets bound the cap to (290,816, 356,352]; at 6 layers caps in that range
    # split the gradients differently: the note says so
    edited, notes = apply_edits(recover(ddp_step(cap=300_000)), WhatIf(layers=6))
    assert "other caps in the range form other buckets" in notes[-1]
    assert len(_colls(edited)) == 3


def test_cap_not_inferred_keeps_the_scaled_all_reduces() -> None:
    # buckets cut by hand where no cap explains them: the hidden edit scales sizes as before
    sizes_64 = ddp_step(hidden=64, buckets=[0, 5, 6, 16]).ranks[0]
    rec = recover(EtSet((sizes_64,), "one").with_ranks([sizes_64]))
    before = _sizes(rec.ets)
    edited, notes = apply_edits(rec, WhatIf(hidden=128))
    assert "DDP buckets kept as traced (cap not inferred" in notes[-1]
    assert _sizes(edited) == [4 * s for s in before]


def test_trace_without_ddp_copies_is_left_alone() -> None:
    rec = recover(ddp_step())
    plain = EtSet(
        tuple(
            r.__class__(
                r.rank,
                r.metadata,
                tuple(n for n in r.nodes if "reducer::mul_out" not in n.name),
            )
            for r in rec.ets.ranks
        ),
        "plain",
    )
    same, note = rebucket(plain, plain)
    assert same is plain and note == ""


def test_collectives_stay_in_issue_order_when_a_rank_records_them_late() -> None:
    # rank 1's worker thread picked each bucket up two gradients' hand-overs later: a
    # new bucket issued there must still come after the traced one on both ranks
    rec = recover(ddp_step(hidden=64, cap=80_000, late=(1,)))
    edited, _ = apply_edits(rec, WhatIf(hidden=128))
    for r in edited.ranks:
        colls = sorted(
            (n for n in r.nodes if n.type == pb.COMM_COLL_NODE),
            key=lambda n: nd.int_attr(n, "comm_seq"),
        )
        assert [nd.int_attr(n, "comm_size") for n in colls] == [
            313344, 264192, 263168, 264192, 263168, 264192, 52224,
        ]  # fmt: skip
    assert simulate_etset(edited).iteration_time_ns > simulate_etset(rec.ets).iteration_time_ns


def test_tensor_parallel_shards_the_layers_gradients_before_bucketing() -> None:
    # TP 2: the FC weights and FC1's bias halve (Megatron), layer norms, head and
    # embedding stay whole: head 25,600 + FC2 32,768 + bias 512 + FC1 32,768 reach the cap,
    # the next bucket holds a layer and a half
    edited, notes = apply_edits(recover(ddp_step(hidden=64, cap=80_000)), WhatIf(tp=2))
    assert "DDP buckets: 4 -> 3 all-reduces" in notes[-1]
    dp = [c for c in _colls(edited) if c.name == "gloo:all_reduce"]
    assert [nd.int_attr(c, "comm_size") for c in dp] == [91648, 99840, 59392]


def test_layers_edit_pairs_collectives_the_trace_did_not_link_to_their_calls() -> None:
    # the collectives follow only their worker thread (tagged outside the layers): a layer
    # copy takes its bucket calls but not them; each call gets its collective back
    rec = recover(ddp_step(layers=3, cap=80_000, unlinked=True))
    edited, _ = apply_edits(rec, WhatIf(layers=6))
    assert _sizes(edited) == _sizes(ddp_step(layers=6, cap=80_000))
    r = edited.rank(0)
    ids = {n.id: n for n in r.nodes}
    for c in _colls(edited):
        assert [ids[d].name for d in c.data_deps] == ["c10d::allreduce_"]
    assert simulate_etset(edited).iteration_time_ns > simulate_etset(rec.ets).iteration_time_ns


CAPTURES = Path(__file__).resolve().parents[2] / "data" / "captures"


def test_committed_ddp_capture_at_hidden_128_has_the_grids_measured_buckets(
    tmp_path: Path,
) -> None:
    # the committed tiny GPT (hidden 64, sequence 32, bucket_cap_mb 0.1, torch 2.x, gloo):
    # 4 buckets; edited to hidden 128 it has the 7 buckets the grid's base (hidden 128,
    # sequence 64) was measured with, but the last: its position table is half as long
    convert([CAPTURES / "ddp"], tmp_path)
    rec = recover(load_etset(tmp_path))
    assert len(_colls(rec.ets)) == 4
    edited, notes = apply_edits(rec, WhatIf(hidden=128))
    assert "(100,096, 133,376]" in notes[-1]
    grid = [329216, 264192, 265216, 263680, 264192, 265216, 99328 - 32 * 128 * 4]
    assert _sizes(edited) == grid


def test_hidden_edit_reads_bucket_views_as_gradients_when_tokens_equal_the_hidden_size() -> None:
    # batch 2 x sequence 16 = 32 tokens = hidden 32 (the grid's hidden-256 trace: 4 x 64 =
    # 256): a gradient [H, 4H] = [32, 128] in its bucket looks like activation rows
    # [B.S, 4H]; read as a weight it is [16, 64] at hidden 16, and DDP's rule forms the
    # buckets of a hidden-16 step (read as rows: 3 buckets of the wrong sizes)
    rec = recover(ddp_step(hidden=32, cap=20_000))
    assert rec.dims is not None and rec.dims.batch * rec.dims.seq == rec.dims.hidden == 32
    assert _sizes(rec.ets) == [29184, 33536, 33536, 29952]
    edited, notes = apply_edits(rec, WhatIf(hidden=16))
    assert "DDP buckets: 4 -> 2 all-reduces" in notes[-1]
    truth = ddp_step(hidden=16, cap=20_000)
    assert _sizes(edited) == [23424, 15104] == _sizes(truth)

    def copies(ets: EtSet) -> list[str]:
        return [
            n.inputs.shapes
            for n in ets.rank(0).nodes
            if n.name == "torch::distributed::reducer::mul_out" and n.inputs.shapes
        ]

    assert copies(edited) == copies(truth)
