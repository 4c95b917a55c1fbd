"""Pipeline schedules (exact orders) and the PP edit's stages, send/recv pairs and groups."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.validate import validate_sources
from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.api import recover
from lumos.simulator.whatif.dp import set_dp
from lumos.simulator.whatif.etset import simulate_etset, write_etset
from lumos.simulator.whatif.layers import set_layers
from lumos.simulator.whatif.pp import set_pp
from lumos.simulator.whatif.schedule import chunk_layers, stage_order
from tests.simulator.whatif.builders import training_step


def _fmt(order: list) -> str:  # type: ignore[type-arg]
    return " ".join(f"{p.kind}{p.microbatch}" + (f".{p.chunk}" if p.chunk else "") for p in order)


def test_1f1b_order_per_stage() -> None:
    got = [_fmt(s) for s in stage_order(4, 4, "1f1b")]
    assert got == [
        "F0 F1 F2 F3 B0 B1 B2 B3",
        "F0 F1 F2 B0 F3 B1 B2 B3",
        "F0 F1 B0 F2 B1 F3 B2 B3",
        "F0 B0 F1 B1 F2 B2 F3 B3",
    ]


def test_interleaved_order_matches_megatron() -> None:
    s0, s1 = (_fmt(s) for s in stage_order(2, 4, "interleaved", 2))
    assert s0 == "F0 F1 F0.1 F1.1 F2 B0.1 F3 B1.1 F2.1 B0 F3.1 B1 B2.1 B3.1 B2 B3"
    assert s1 == "F0 F1 F0.1 B0.1 F1.1 B1.1 F2 B0 F3 B1 F2.1 B2.1 F3.1 B3.1 B2 B3"
    with pytest.raises(ConfigError, match="multiple of stages"):
        stage_order(2, 3, "interleaved", 2)


def test_layers_split_evenly_over_virtual_stages() -> None:
    assert chunk_layers(5, 2) == [[0, 1, 2], [3, 4]]
    assert chunk_layers(8, 2, 2) == [[0, 1], [2, 3], [4, 5], [6, 7]]


@pytest.mark.parametrize(("schedule", "vp"), [("1f1b", 1), ("gpipe", 1), ("interleaved", 2)])
def test_pp_edit_stages_pairs_and_groups(schedule: str, vp: int, tmp_path: Path) -> None:
    base = recover(training_step(layers=4, ranks=2, batch=4)).ets
    edited = set_pp(base, 2, schedule, vp, 4)
    assert [r.rank for r in edited.ranks] == [0, 1, 2, 3]  # replica * 2 + stage
    hops = 4 * (2 * vp - 1)  # micro-batches x virtual-stage boundaries, each way
    for r in edited.ranks:
        kinds = Counter(n.type for n in r.nodes)
        assert kinds[pb.COMM_SEND_NODE] == hops and kinds[pb.COMM_RECV_NODE] == hops
        peers = {nd.int_attr(n, "comm_dst") for n in r.nodes if n.type == pb.COMM_SEND_NODE}
        assert peers == {r.rank ^ 1}  # the other stage of the same replica
        colls = [n for n in r.nodes if n.type == pb.COMM_COLL_NODE]
        assert len(colls) == 2  # its two layers' gradients, once per step
        stage = r.rank % 2
        assert {tuple(nd.attr(n, "pg_ranks")) for n in colls} == {(stage, 2 + stage)}
        act = nd.int_attr(next(n for n in r.nodes if n.type == pb.COMM_SEND_NODE), "comm_size")
        assert act == 1 * 16 * 64 * 4  # micro-batch 1 x seq 16 x hidden 64 x fp32
    write_etset(edited, tmp_path)
    report = validate_sources(find_et_sources(tmp_path))
    assert not [p for f in report.files for p in f.problems if p.severity.name == "ERROR"]
    assert simulate_etset(edited).iteration_time_ns > 0


def test_pp_refuses_a_pipelined_trace() -> None:
    base = recover(training_step(layers=4, ranks=2, batch=4)).ets
    with pytest.raises(ConfigError, match="already has a pipeline"):
        set_pp(set_pp(base, 2, "1f1b", 1, 2), 2)


def test_edited_ets_export_to_astra_sim_and_pass_preflight(tmp_path: Path) -> None:
    from lumos.converters.astra_sim.export import ExportRequest, export_astra_sim
    from lumos.converters.astra_sim.preflight import preflight_bundle
    from lumos.simulator.whatif.api import WhatIf, apply_edits

    rec = recover(training_step(layers=4, ranks=2, batch=4, gpu=True))
    edited, _ = apply_edits(rec, WhatIf(layers=6, tp=2, pp=2, microbatches=4))
    assert edited.world_size == 8
    write_etset(edited, tmp_path / "et")
    export_astra_sim(ExportRequest(str(tmp_path / "et"), tmp_path / "bundle", hw="h100"))
    report = preflight_bundle(tmp_path / "bundle")
    assert report.ranks == 8 and report.sends == report.recvs > 0


def test_pp_gradient_sync_host_work_runs_once_per_step() -> None:
    # DDP issues each bucket's all-reduce from a `c10d::allreduce_` call and finalises the
    # backward after the last one; a pipeline of replicated stages accumulates gradients
    # over its micro-batches and synchronises them once, with the last micro-batch's backward
    base = recover(training_step(layers=4, ranks=2, batch=4, ddp=True)).ets
    traced = Counter(n.name for n in base.rank(0).nodes)
    assert traced["c10d::allreduce_"] == 2 * 4
    edited = set_pp(base, 2, "1f1b", 1, 4)
    assert edited.world_size == 4
    for r in edited.ranks:
        stage = r.rank % 2
        names = Counter(n.name for n in r.nodes)
        assert names["c10d::allreduce_"] == 2 * 2  # its two layers, two segments each
        assert names["aten::_to_copy"] == 2  # the bucket copy inside each call
        assert names["gloo:all_reduce"] == 2
        assert names["aten::addmm"] == 4 * (2 + 2 + stage)  # per micro-batch: fwd, bwd, head
        # DDP's finalisation (after the layers' backward) once, on the first stage
        assert names["torch.distributed.ddp.reducer::copy_bucket_to_grad"] == (stage == 0)
    assert simulate_etset(edited).iteration_time_ns > 0


def test_pp_of_one_replica_has_no_gradient_sync_nor_ddp_wrapper() -> None:
    # `--dp 1 --pp 2` asks for the pipeline framework's step: with one replica there is no
    # data-parallel wrapper, so neither DDP's forward work, nor its bucket all-reduces,
    # nor the host work that issues them and waits for them
    base = recover(training_step(layers=4, ranks=2, batch=4, ddp=True, wrapper=True)).ets
    traced = Counter(n.name for n in base.rank(0).nodes)
    assert traced["DistributedDataParallel.forward"] == 1
    edited = set_pp(set_dp(base, 1), 2, "gpipe", 1, 2)
    assert edited.world_size == 2
    for r in edited.ranks:
        names = Counter(n.name for n in r.nodes)
        for gone in (
            "DistributedDataParallel.forward",
            "c10d::allreduce_",
            "gloo:all_reduce",
            "torch.distributed.ddp.reducer::copy_bucket_to_grad",
        ):
            assert names[gone] == 0, gone
        assert names["aten::addmm"] == 2 * (2 + 2 + r.rank)
    assert simulate_etset(edited).iteration_time_ns > 0


def test_pp_after_layers_keeps_every_layers_backward_on_its_stage() -> None:
    # copies of a layer repeat its host calls' rf_ids: the sync work of one layer's
    # `c10d::allreduce_` must not be matched with a copy's and swallow the layers between
    base = recover(training_step(layers=3, ranks=1, batch=4, ddp=True)).ets
    edited = set_pp(set_layers(base, 5), 2, "1f1b", 1, 4)
    total = Counter(n.name for r in edited.ranks for n in r.nodes)
    assert total["aten::gelu_backward"] == 5 * 4  # every layer's backward, every micro-batch


def test_explain_says_what_cannot_be_edited_context_sequence_parallel_restaging() -> None:
    from lumos.simulator.whatif.explain import explain_lines

    base = recover(training_step(layers=4, ranks=2, batch=4))
    lines = explain_lines(base)
    assert "context parallel: no all-to-all inside layers; no edit changes its degree" in "\n".join(
        lines
    )
    assert not any(line.startswith("pipeline:") for line in lines)
    staged = recover(set_pp(base.ets, 2, "1f1b", 1, 2))
    assert "pipeline: already staged; --pp cannot re-stage it" in explain_lines(staged)


def test_pipeline_stage_keeps_the_traced_step_tail() -> None:
    # the first stage keeps only its own layers' optimizer updates, which ran early in the
    # traced optimizer: their recorded end must not be read as the end of its step
    from lumos.converters.chakra import conventions as cv
    from lumos.simulator.whatif.api import WhatIf, apply_edits
    from lumos.simulator.whatif.etset import EtSet, RankEt
    from lumos.simulator.whatif.tails import last_recorded_end, tail_ns

    traced = training_step(layers=4, ranks=2, batch=4)
    ranks = []
    for r in traced.ranks:
        end = last_recorded_end(r)
        assert end is not None
        meta = pb.GlobalMetadata()
        meta.CopyFrom(r.metadata)
        nd.put(meta, cv.META_STEP_NS, end + 50_000, "int64_val")  # type: ignore[arg-type]
        ranks.append(RankEt(r.rank, meta, r.nodes))
    base = recover(EtSet(tuple(ranks), "tail"))
    edited, _ = apply_edits(base, WhatIf(dp=1, pp=2, microbatches=2))
    assert [tail_ns(r) for r in edited.ranks] == [50_000, 50_000]
