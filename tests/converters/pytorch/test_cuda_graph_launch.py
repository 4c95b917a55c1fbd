"""CUDA graphs (torch.compile mode="reduce-overhead", Megatron/TE graphs): one
`cudaGraphLaunch` whose ops all carry its correlation, on the streams the graph executor
chose; the graph's forks and joins, and its place in the launch stream, are not in the
trace. Replay keeps every op, in order, on its stream, launched by the one call."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import RankSummary, convert
from lumos.proto import pb
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import SimOptions, simulate
from tests.conftest import fixture_path
from tests.converters.pytorch.kineto_snippet import Snippet

#: one rank of a larger job (a DLRM worker, an HTA rank): a partial set on purpose
PART = SimOptions(allow_partial=True)

HTA = "HolisticTraceAnalysis/tests/data"


def _convert(path: Path, out: Path) -> tuple[dict[str, pb.Node], dict[int, pb.Node], RankSummary]:
    result = convert([path], out, prefix="t")
    _, nodes = read_et(out / "t.0.et")
    return {n.name: n for n in nodes}, {n.id: n for n in nodes}, result.ranks[0]


def _replay(out: Path) -> tuple[float, float, dict[str, tuple[int, int]]]:
    """(step error %, GPU-inclusive error %, name → simulated (start, end) in ns)."""
    result = simulate(out / "t")
    row = compare(result, read_measured(out / "t")).ranks[0]
    assert row.error_pct is not None and row.gpu_error_pct is not None
    tasks, g = result.ranks[0].tasks, result.graphs[0]
    times = {g.name(i): (int(tasks.start_ns[i]), int(tasks.end_ns[i])) for i in range(len(g))}
    return row.error_pct, row.gpu_error_pct, times


def _compiled_step() -> Snippet:
    """One graph of 12 Triton kernels on stream 7, queued 1.5 µs apart, then `.item()`."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("CompiledFunction", 1005.0, 30.0)
    ops = [(f"triton_poi_fused_{i}", 7, 1030.0 + 26.5 * i, 25.0) for i in range(12)]
    k.graph_launch(1010.0, 18.0, ops)
    k.op("aten::item", 1040.0, 330.0)
    k.runtime("cudaStreamSynchronize", 1042.0, 328.0)  # returns 2 µs after the last op
    k.op("aten::add", 1380.0, 10.0)
    return k


def test_graph_ops_stay_in_order_behind_their_one_launch(tmp_path: Path) -> None:
    """Every op keeps its launch (the one cudaGraphLaunch) and its place on the stream;
    the 1.5 µs between queued kernels is each op's dispatch gap. Replay was −4.1% (the
    11 gaps dropped: 16.5 µs of 400) and is now exact."""
    path = _compiled_step().write(tmp_path / "rank0.json.gz")
    by_name, _, _ = _convert(path, tmp_path / "et")
    launch = by_name["cudaGraphLaunch"]
    kernels = [by_name[f"triton_poi_fused_{i}"] for i in range(12)]
    assert all(list(k.data_deps) == [launch.id] for k in kernels)
    assert [list(k.ctrl_deps) for k in kernels[1:]] == [[k.id] for k in kernels[:-1]]
    # the first, on an idle stream 2 µs after the launch returned, carries its hold
    assert [attrs_dict(k).get("gap_ns", 0) for k in kernels] == [2000] + [1500] * 11
    assert kernels[-1].id in by_name["cudaStreamSynchronize"].data_deps
    step, gpu, times = _replay(tmp_path / "et")
    starts = [times[f"triton_poi_fused_{i}"][0] for i in range(12)]
    assert starts == sorted(starts) and starts[1] - times["triton_poi_fused_0"][1] == 1500
    assert abs(step) < 0.01 and abs(gpu) < 0.01


def _branched_graph(k: Snippet, replay: int, ts: float, at: float) -> float:
    """A graph captured from two streams, replayed at `ts` with its first op at GPU time
    `at`, on streams 31/32 (not the launch stream 7): g0 forks g1 (stream 32) off
    stream 31, g3 joins it back. Returns when g3 ends."""
    ops = [
        (f"triton_g0_r{replay}", 31, at, 100.0),
        (f"triton_g1_r{replay}", 32, at + 102.0, 150.0),  # fork: waited for g0
        (f"triton_g2_r{replay}", 31, at + 102.0, 60.0),
        (f"triton_g3_r{replay}", 31, at + 254.0, 80.0),  # join: waited for g1
    ]
    k.graph_launch(ts, 20.0, ops)
    return at + 334.0


def _two_replays() -> Snippet:
    """An input copy on stream 7, the graph replayed twice (the second replay queued behind
    the first), then an eager kernel on stream 7 that waited for the second replay."""
    k = Snippet()
    k.step(1, 1000.0, 790.0)
    k.launch("Memcpy HtoD (Pinned -> Device)", 1002.0, stream=7, start=1008.0, dur=4.0)
    k.op("CompiledFunction", 1008.0, 50.0)
    first = _branched_graph(k, 1, 1010.0, 1034.0)
    last = _branched_graph(k, 2, 1032.0, first + 2.0)
    k.op("aten::mul", 1060.0, 15.0)
    k.launch("elementwise_kernel", 1065.0, stream=7, start=last + 2.0, dur=40.0)
    k.runtime("cudaStreamSynchronize", 1080.0, last + 44.0 - 1080.0)  # returns 2 µs after
    k.op("aten::add", last + 50.0, 10.0)
    return k


def test_branched_graph_keeps_its_fork_join_and_exit(tmp_path: Path) -> None:
    """Each replay's fork and join are inferred from the held starts, and the eager kernel
    launched on stream 7 during the graph waits for the second replay's last op (its
    exit). Without them replay ran the second fork right after the first one's, each join
    right after g2, and the eager kernel at its launch, so the stream sync that waits for
    it returned early: −80.5% on the step (GPU-inclusive −34.9%); now exact."""
    path = _two_replays().write(tmp_path / "rank0.json.gz")
    by_name, by_id, summary = _convert(path, tmp_path / "et")
    launches = [n.id for n in by_id.values() if n.name == "cudaGraphLaunch"]
    deps = {
        name: sorted(by_id[d].name for d in node.data_deps)
        for name, node in by_name.items()
        if node.data_deps and not attrs_dict(node)["is_cpu_op"]
    }
    joins = {name: [d for d in ds if d != "cudaGraphLaunch"] for name, ds in deps.items()}
    assert {name: d for name, d in joins.items() if d and name.startswith("triton")} == {
        "triton_g1_r1": ["triton_g0_r1"],
        "triton_g3_r1": ["triton_g1_r1"],
        "triton_g1_r2": ["triton_g0_r2"],
        "triton_g3_r2": ["triton_g1_r2"],
    }
    assert deps["elementwise_kernel"] == ["cudaLaunchKernel", "triton_g3_r2"]
    assert len(launches) == 2 and summary.syncs["inferred"] == 1
    assert summary.graph_launches == {"launches": 2, "ops": 8, "joins": 5}
    step, gpu, times = _replay(tmp_path / "et")
    for r in (1, 2):
        assert times[f"triton_g1_r{r}"][0] >= times[f"triton_g0_r{r}"][1]
        assert times[f"triton_g3_r{r}"][0] >= times[f"triton_g1_r{r}"][1]
    assert times["elementwise_kernel"][0] >= times["triton_g3_r2"][1]
    assert abs(step) < 0.01 and abs(gpu) < 0.01


def test_stream_sync_after_a_graph_waits_for_the_graph(tmp_path: Path) -> None:
    """`torch.cuda.synchronize(stream)` right after a graph replay: the sync names stream 7
    (its `cuda_sync` event), where the graph has no op. It waits for the graph's last op,
    an edge; it used to have none and kept its recorded 331 µs as its own duration (0.00%
    in replay, but a faster or slower graph would not have moved it)."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("CompiledFunction", 1005.0, 30.0)
    _branched_graph(k, 1, 1010.0, 1034.0)
    corr = k.runtime("cudaStreamSynchronize", 1040.0, 331.0)  # returns at 1371
    k.cuda_sync("Stream Sync", corr, 1041.0, 330.0, stream=7, device=0, context=1)
    k.op("aten::add", 1375.0, 10.0)
    by_name, by_id, summary = _convert(k.write(tmp_path / "rank0.json.gz"), tmp_path / "et")
    sync = by_name["cudaStreamSynchronize"]
    assert [by_id[d].name for d in sync.data_deps] == ["triton_g3_r1"]
    assert (attrs_dict(sync)["sync_stream"], attrs_dict(sync)["sync_wait_ns"]) == (7, 328_000)
    assert summary.syncs["recorded"] == 1
    assert summary.graph_launches == {"launches": 1, "ops": 4, "joins": 2}
    step, _, times = _replay(tmp_path / "et")
    assert times["cudaStreamSynchronize"][1] >= times["triton_g3_r1"][1]
    assert abs(step) < 0.01


def test_hta_graph_launches_replay_as_measured(tmp_path: Path) -> None:
    """HTA rank 0 of 16 (A100, 2023): 14 `cudaGraphLaunch` in the step, 69 ops (1 to 20
    a graph), all on the launch stream 7 (that CUDA version's CUPTI). Each op depends on
    its launch and nothing else is invented; the step stays within 0.01%."""
    convert([fixture_path(f"{HTA}/negative_queue_length_values_check")], tmp_path, prefix="t")
    _, nodes = read_et(tmp_path / "t.0.et")
    by_id = {n.id: n for n in nodes}
    launches = {n.id for n in nodes if n.name == "cudaGraphLaunch"}
    graph_ops = [n for n in nodes if set(n.data_deps) & launches]
    assert all(len(n.data_deps) == 1 for n in graph_ops)
    assert {attrs_dict(n)["stream"] for n in graph_ops} == {7}
    per_launch = [sum(1 for n in graph_ops if launch in n.data_deps) for launch in launches]
    assert sorted(per_launch) == [1, 1, 1, 1, 1, 2, 2, 2, 3, 3, 3, 9, 20, 20]
    assert all(by_id[n.data_deps[0]].name == "cudaGraphLaunch" for n in graph_ops)
    row = compare(simulate(tmp_path / "t", PART), read_measured(tmp_path / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.01
