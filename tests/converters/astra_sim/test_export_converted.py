"""Export of traces `lumos convert` made from real captures: 8-rank DLRM (V100, NCCL) and
the committed 2-rank gloo DDP / FSDP / pipeline captures. Each bundle passes the pre-flight
and our ASTRA-sim-compatible mode runs it to the end."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.conventions import META_STEP_NS
from lumos.converters.chakra.stream import read_et
from lumos.proto import pb
from tests.conftest import DATA, fixture_path
from tests.converters.astra_sim.test_export import export
from tests.converters.astra_sim.test_export_timing import simulate_bundle

convert_module = pytest.importorskip("lumos.converters.pytorch.convert")
INPUTS = "param/et_replay/tests/inputs"


@pytest.fixture(scope="module")
def dlrm_bundle(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    root = tmp_path_factory.mktemp("dlrm")
    convert_module.convert(
        [
            fixture_path(f"{INPUTS}/dlrm_pytorch_et.tar.gz"),
            fixture_path(f"{INPUTS}/dlrm_kineto.tar.gz"),
        ],
        root / "et",
        prefix="dlrm",
    )
    summary = export(root / "et", root / "b")
    return root / "b", summary


def test_dlrm_exports_gpu_work_and_every_collective(dlrm_bundle: tuple[Path, object]) -> None:
    bundle, summary = dlrm_bundle
    pre = summary.preflight  # type: ignore[attr-defined]
    assert pre.ranks == 8 and pre.collectives == 64  # 8 per rank (all-to-all + all-reduce)
    assert summary.dropped == {"CPU op": 30297}  # type: ignore[attr-defined]
    _, nodes = read_et(bundle / "workload" / "dlrm.0.et")
    assert all(attrs_dict(n)["is_cpu_op"] is False for n in nodes)
    assert all(d < n.id for n in nodes for d in (*n.data_deps, *n.ctrl_deps))
    colls = [n for n in nodes if n.type == pb.COMM_COLL_NODE]
    assert {attrs_dict(n)["comm_type"] for n in colls} == {pb.ALL_REDUCE, pb.ALL_TO_ALL}
    # collectives are chained in recorded order: each waits for the previous one, directly
    # or through the CPU-gap delay node placed just before it
    by_id = {n.id: n for n in nodes}
    for before, after in itertools.pairwise(colls):
        deps = {*after.data_deps, *after.ctrl_deps}
        for d in list(deps):
            if by_id[d].name.startswith("cpu_gap_before:"):
                deps |= {*by_id[d].data_deps, *by_id[d].ctrl_deps}
        assert before.id in deps


def _gpu_idle_ns(bundle: Path, rank: int) -> int:
    """The rank's measured step minus the union of its recorded kernels and collectives."""
    meta, _ = read_et(bundle.parent / "et" / f"dlrm.{rank}.et")
    _, nodes = read_et(bundle / "workload" / f"dlrm.{rank}.et")
    spans = sorted(
        (a["start_ns"], a["start_ns"] + a["dur_ns"])
        for a in map(attrs_dict, nodes)
        if "start_ns" in a  # delay nodes carry none
    )
    busy, reach = 0, 0
    for begin, end in spans:
        busy += max(0, end - max(begin, reach))
        reach = max(reach, end)
    return int(attrs_dict(meta)[META_STEP_NS]) - busy


def test_dlrm_bundle_runs_in_astra_mode_near_native_replay(
    dlrm_bundle: tuple[Path, object],
) -> None:
    bundle, summary = dlrm_bundle
    # The delay nodes stand for the time the GPU sat idle waiting for the CPU, each idle
    # moment once: per rank at most the measured step minus the union of the recorded
    # kernels and collectives (72.1 ms over the 8 ranks). They sum to 71.5 ms. Before, two
    # streams' kernels launched after the same idle stretch each got a delay for it (the
    # delays queue on ASTRA-sim's one compute slot): 75.7 ms, more than the GPU was idle;
    # 135.8 ms before the converter inferred the DLRM's cross-stream waits.
    per_rank = [
        sum(attrs_dict(n)["dur_ns"] for n in read_et(p)[1] if n.name.startswith("cpu_gap"))
        for p in sorted((bundle / "workload").iterdir())
    ]
    assert all(d <= _gpu_idle_ns(bundle, r) for r, d in enumerate(per_rank)), per_rank
    assert 70_000_000 < summary.delay_ns < 72_500_000  # type: ignore[attr-defined]
    times = simulate_bundle(bundle)
    # measured (V100, NCCL as recorded, each rank from its own step start): 12.5-19.9 ms;
    # the ranks entered the step up to 7.5 ms apart, which ASTRA-sim (every rank starts at
    # 0) does not see. The bundle keeps the GPU work and the CPU time the GPU waited for and
    # reprices NCCL on H100 NVLink: 12.55-13.48 ms per rank (docs/export.md).
    assert len(times) == 8
    assert all(11_000_000 < t < 14_000_000 for t in times), times


@pytest.mark.parametrize(
    ("capture", "sends", "collectives", "rank0_ms"),
    # pipeline: 79.9 ms while gloo sends followed their c10d::send (rank 1 sent 3 ms late);
    # 75.6 ms while rank 0's receives of rank 1's previous step paired with this step's
    # sends (now dropped with them: 2 of 4 sends and receives pair inside the window)
    [("ddp", 0, 8, 37.3), ("fsdp", 0, 24, 201.6), ("pipeline", 2, 0, 63.3)],
)
def test_gloo_captures_export_and_run(
    capture: str, sends: int, collectives: int, rank0_ms: float, tmp_path: Path
) -> None:
    convert_module.convert([DATA / "captures" / capture], tmp_path / "et", prefix=capture)
    summary = export(tmp_path / "et", tmp_path / "b")
    assert summary.preflight.sends == summary.preflight.recvs == sends
    assert summary.preflight.collectives == collectives
    # CPU-only training: every compute node is CPU time the step waited for (delays)
    assert summary.preflight.compute == summary.delays > 0
    times = simulate_bundle(tmp_path / "b")
    assert times[0] == pytest.approx(rank0_ms * 1e6, rel=0.01)
