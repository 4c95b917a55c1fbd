"""Our own matched captures (tests/data/captures) and the capture API that made them.

The committed traces are read with orjson, so these run without torch; only the live
capture test needs torch and is skipped where it is not installed.
"""

from __future__ import annotations

import collections
import importlib.util
import subprocess
import sys
from pathlib import Path

import orjson
import pytest

from lumos.converters.pytorch.capture import (
    CapturePaths,
    capture_paths,
    check_capture,
    et_ops_by_rf_id,
    kineto_ops_by_rf_id,
    load_json,
)
from lumos.errors import LinkError, LumosError, MissingExtraError, TraceFormatError

CAPTURES = Path(__file__).resolve().parents[2] / "data" / "captures"
MODES = ("ddp", "fsdp", "pipeline")
HAS_TORCH = importlib.util.find_spec("torch") is not None


def _et_names(path: Path) -> collections.Counter[str]:
    return collections.Counter(node["name"] for node in load_json(path)["nodes"])


def _kineto_annotations(path: Path) -> collections.Counter[str]:
    return collections.Counter(
        ev["name"] for ev in load_json(path)["traceEvents"] if ev.get("cat") == "user_annotation"
    )


@pytest.mark.parametrize("mode", MODES)
def test_each_rank_pair_is_matched(mode: str) -> None:
    for rank in (0, 1):
        check = check_capture(capture_paths(CAPTURES / mode, rank))
        assert check.schema == "1.1.1-chakra.0.0.4"
        assert check.world_size == 2
        assert [s.name for s in check.steps] == ["ProfilerStep#2"]
        assert 1_000_000 < check.steps[0].dur_ns < 2_000_000_000
        # every Kineto id is an ET id; the ET has one more: `## process_group:init ##`
        assert check.shared_rf_ids == check.kineto_rf_ids == check.et_rf_ids - 1
        assert check.link_fraction >= 0.99


@pytest.mark.parametrize("mode", MODES)
def test_capture_folder_stays_small(mode: str) -> None:
    files = sorted((CAPTURES / mode).iterdir())
    assert [f.name for f in files] == [
        "rank0.host_et.json.gz",
        "rank0.kineto.json.gz",
        "rank1.host_et.json.gz",
        "rank1.kineto.json.gz",
    ]
    assert sum(f.stat().st_size for f in files) < 1_000_000


def test_distributed_info_names_gloo_and_both_ranks() -> None:
    for rank in (0, 1):
        info = load_json(capture_paths(CAPTURES / "ddp", rank).kineto)["distributedInfo"]
        assert (info["backend"], info["rank"], info["world_size"]) == ("gloo", rank, 2)
        assert info["pg_config"][0]["ranks"] == [0, 1]


def test_ddp_all_reduces_four_buckets_covering_every_parameter() -> None:
    host_et = load_json(capture_paths(CAPTURES / "ddp", 0).host_et)
    buckets = sorted(
        node["inputs"]["shapes"][0][0][0]
        for node in host_et["nodes"]
        if node["name"] == "c10d::allreduce_"
    )
    assert buckets == [10368, 33344, 33408, 41408]
    assert sum(buckets) == 118528
    assert _kineto_annotations(capture_paths(CAPTURES / "ddp", 0).kineto)["gloo:all_reduce"] == 4


def test_fsdp_gathers_twice_and_reduce_scatters_once_per_unit() -> None:
    for rank in (0, 1):
        paths = capture_paths(CAPTURES / "fsdp", rank)
        names = _et_names(paths.host_et)
        assert names["c10d::_allgather_base_"] == 8
        assert names["c10d::_reduce_scatter_base_"] == 4
        # gloo runs reduce-scatter as an all-reduce of the full gradient
        annotations = _kineto_annotations(paths.kineto)
        assert (annotations["gloo:all_gather"], annotations["gloo:all_reduce"]) == (8, 4)


def test_pipeline_sends_activations_forward_and_gradients_back() -> None:
    for rank in (0, 1):
        paths = capture_paths(CAPTURES / "pipeline", rank)
        names = _et_names(paths.host_et)
        assert (names["c10d::send"], names["c10d::recv_"]) == (2, 2)
        assert "c10d::allreduce_" not in names
        annotations = _kineto_annotations(paths.kineto)
        assert (annotations["gloo:send"], annotations["gloo:recv"]) == (2, 2)
    host_et = load_json(capture_paths(CAPTURES / "pipeline", 0).host_et)
    first = next(n for n in host_et["nodes"] if n["name"] == "c10d::send")
    assert first["inputs"]["shapes"][0] == [[2, 32, 64]]  # one micro-batch of activations


def test_pair_from_two_runs_is_rejected_by_process_id() -> None:
    mixed = CapturePaths(
        0,
        capture_paths(CAPTURES / "ddp", 0).host_et,
        capture_paths(CAPTURES / "pipeline", 0).kineto,
    )
    with pytest.raises(LinkError, match="different processes"):
        check_capture(mixed)


def test_rf_ids_naming_other_ops_are_not_counted_as_linked(tmp_path: Path) -> None:
    paths = capture_paths(CAPTURES / "ddp", 0)
    kineto = load_json(paths.kineto)
    for ev in kineto["traceEvents"]:
        if "Record function id" in ev.get("args", {}):
            ev["args"]["Record function id"] += 1  # an off-by-one window
    shifted = tmp_path / "kineto.json"
    shifted.write_bytes(orjson.dumps(kineto))
    with pytest.raises(LinkError, match="one window"):
        check_capture(CapturePaths(0, paths.host_et, shifted))


def test_pair_from_two_ranks_of_one_run_is_rejected_by_process_id() -> None:
    crossed = CapturePaths(
        0,
        capture_paths(CAPTURES / "ddp", 0).host_et,
        capture_paths(CAPTURES / "ddp", 1).kineto,
    )
    with pytest.raises(LinkError, match="different processes"):
        check_capture(crossed)


def test_check_rejects_a_kineto_without_profiler_step(tmp_path: Path) -> None:
    kineto = tmp_path / "k.json"
    kineto.write_text('{"traceEvents": [{"ph": "X", "name": "aten::mm", "ts": 1, "dur": 2}]}')
    paths = CapturePaths(0, capture_paths(CAPTURES / "ddp", 0).host_et, kineto)
    with pytest.raises(TraceFormatError, match="ProfilerStep"):
        check_capture(paths)


def test_importing_the_module_does_not_import_torch() -> None:
    code = "import sys, lumos.converters.pytorch.capture; print('torch' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_capture_without_torch_names_the_extra(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lumos.converters.pytorch.capture import capture_steps

    monkeypatch.setitem(sys.modules, "torch", None)  # makes `import torch` fail
    with pytest.raises(MissingExtraError, match=r"lumos\[capture\]"), capture_steps(tmp_path):
        pass


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed (extra lumos[capture])")
def test_live_capture_of_one_process_writes_a_matched_pair(tmp_path: Path) -> None:
    import torch

    from lumos.converters.pytorch.capture import capture_steps

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    opt = torch.optim.SGD(model.parameters(), lr=0.1)
    with capture_steps(tmp_path, warmup=1, cuda=False) as cap:
        for _ in range(cap.steps_needed):
            model(torch.randn(8, 16)).square().mean().backward()
            opt.step()
            opt.zero_grad()
            cap.step()
    assert cap.done and cap.steps_needed == 2
    check = check_capture(cap.paths)
    assert check.paths.host_et == tmp_path / "rank0.host_et.json.gz"
    assert [s.name for s in check.steps] == ["ProfilerStep#1"]
    assert check.world_size is None
    assert check.link_fraction >= 0.99
    mm = {n["name"] for n in load_json(cap.paths.host_et)["nodes"]}
    assert {"aten::addmm", "aten::mm", "ProfilerStep#1"} <= mm
    et_ops = et_ops_by_rf_id(load_json(cap.paths.host_et))
    assert kineto_ops_by_rf_id(load_json(cap.paths.kineto)).items() <= et_ops.items()


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed (extra lumos[capture])")
def test_live_capture_that_stops_early_says_how_many_steps(tmp_path: Path) -> None:
    import torch

    from lumos.converters.pytorch.capture import capture_steps

    with (
        pytest.raises(LumosError, match=r"call step\(\) 3 times"),
        capture_steps(tmp_path, wait=1, warmup=1, cuda=False) as cap,
    ):
        torch.ones(2).sum()
        cap.step()


def _kineto_steps(path: Path, steps: dict[int, float]) -> Path:
    events = [
        {"ph": "X", "name": f"ProfilerStep#{n}", "ts": 1000.0 * n, "dur": dur, "pid": 1, "tid": 1}
        for n, dur in steps.items()
    ]
    path.write_bytes(orjson.dumps({"traceEvents": events}))
    return path


def test_representative_step_is_the_median_of_the_slowest_rank_after_the_first(
    tmp_path: Path,
) -> None:
    from lumos.converters.pytorch.capture import representative_step

    # step 2 carries the profiler's start on rank 0 (30 ms); steps 3-6 are the steady ones
    r0 = _kineto_steps(tmp_path / "r0.json", {2: 72.9, 3: 36.0, 4: 41.0, 5: 35.0, 6: 39.0})
    r1 = _kineto_steps(tmp_path / "r1.json", {2: 41.3, 3: 37.0, 4: 40.0, 5: 45.0, 6: 38.0})
    # slowest rank per step: 3: 37, 4: 41, 5: 45, 6: 39 -> lower median 39 (step 6)
    assert representative_step([r0, r1]) == 6
    one = _kineto_steps(tmp_path / "one.json", {2: 50.0})
    assert representative_step([one]) == 2
    with pytest.raises(TraceFormatError):
        representative_step([_kineto_steps(tmp_path / "none.json", {})])


@pytest.mark.skipif(not HAS_TORCH, reason="torch not installed (extra lumos[capture])")
def test_live_capture_of_several_steps_records_them_all_and_the_metadata(tmp_path: Path) -> None:
    import torch

    from lumos.converters.pytorch.capture import capture_steps, representative_step

    model = torch.nn.Sequential(torch.nn.Linear(16, 32), torch.nn.GELU(), torch.nn.Linear(32, 4))
    with capture_steps(tmp_path, warmup=1, active=3, cuda=False, metadata={"cores": 2}) as cap:
        for _ in range(cap.steps_needed):
            model(torch.randn(8, 16)).square().mean().backward()
            cap.step()
    assert cap.steps_needed == 4
    check = check_capture(cap.paths)
    assert [s.name for s in check.steps] == ["ProfilerStep#1", "ProfilerStep#2", "ProfilerStep#3"]
    assert load_json(cap.paths.kineto)["cores"] == 2
    assert representative_step([cap.paths.kineto]) in (2, 3)
