"""GPU ops queued on a stream start 1-5 µs after the op before them (the GPU's dispatch
delay), whatever API launched them: `cudaLaunchKernel`, `cudaLaunchKernelExC` (cuBLAS,
NCCL), `cuLaunchKernel` / `cuLaunchKernelEx` (Triton, `cat: cuda_driver`),
`cudaMemcpyAsync`, `cudaMemsetAsync`. Each op links to its launch and keeps that delay
as its `gap_ns`, counted in replay from when it could start."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.tasks import GPU_GAP_MAX_NS
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet

#: (launch call, GPU op) as PyTorch 2.x traces on H100 show them
LAUNCHES = [
    ("cuLaunchKernel", "triton_poi_fused_add_0"),
    ("cudaLaunchKernelExC", "sm90_xmma_gemm_bf16bf16_bf16f32_f32_tn_n_tilesize128x128x64"),
    ("cuLaunchKernelEx", "triton_red_fused_native_layer_norm_1"),
    ("cudaMemcpyAsync", "Memcpy DtoD (Device -> Device)"),
    ("cudaMemsetAsync", "Memset (Device)"),
    ("cudaLaunchKernel", "void at::native::vectorized_elementwise_kernel<4>"),
]


def _queued_step() -> Snippet:
    """Six ops launched 10 µs apart, each 50 µs long: all but the first queue behind the
    one before and start 2 µs after it ends; then a blocking sync."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.op("aten::linear", 1005.0, 65.0)
    gpu = 1018.0
    for i, (call, op) in enumerate(LAUNCHES):
        k.launch(op, 1010.0 + 10.0 * i, stream=7, start=gpu, dur=50.0, call=call)
        gpu += 52.0
    k.runtime("cudaStreamSynchronize", 1072.0, gpu - 1072.0 + 1.0)
    k.op("aten::add", gpu + 5.0, 10.0)
    return k


def test_queued_ops_of_every_launch_api_keep_their_dispatch_gap(tmp_path: Path) -> None:
    """Every launch API links its op (data dep = the call, `cuda_driver` ones too); the
    first op, launched on an idle stream, starts 3 µs after its call returned, the others
    2 µs after the op before them. Replay dropped the 5 gaps (−2.50% of the 400 µs
    step); now exact."""
    path = _queued_step().write(tmp_path / "rank0.json.gz")
    result = convert([path], tmp_path / "et", prefix="t")
    _, nodes = read_et(tmp_path / "et" / "t.0.et")
    by_id = {n.id: n for n in nodes}
    gpu = [n for n in nodes if not attrs_dict(n)["is_cpu_op"]]
    assert [n.name for n in gpu] == [op for _, op in LAUNCHES]
    assert [by_id[n.data_deps[0]].name for n in gpu] == [call for call, _ in LAUNCHES]
    assert [attrs_dict(n)["cat"] for n in gpu] == ["kernel"] * 3 + ["gpu_memcpy", "gpu_memset"] + [
        "kernel"
    ]
    # the first op's 3 µs: its hold (`simulator.backlog`), written since replay round 5
    assert [attrs_dict(n).get("gap_ns", 0) for n in gpu] == [3000] + [2000] * 5
    driver = [n for n in nodes if n.name.startswith("cuLaunch")]
    assert [attrs_dict(n)["cat"] for n in driver] == ["cuda_driver"] * 2
    assert result.ranks[0].gpu == 6 and result.ranks[0].syncs["inferred"] == 1
    sim = simulate(tmp_path / "et" / "t")
    row = compare(sim, read_measured(tmp_path / "et" / "t")).ranks[0]
    assert row.error_pct is not None and abs(row.error_pct) < 0.01
    assert row.gpu_error_pct is not None and abs(row.gpu_error_pct) < 0.01


def test_gap_counts_from_when_the_op_could_start(tmp_path: Path) -> None:
    """An op whose launch returned after the op before it ended waits for the launch,
    then its 3 µs launch latency (not the stream's idle time before it); an idle time
    longer than GPU_GAP_MAX_NS that nothing explains is not a dispatch delay and is cut
    to it."""
    k = Snippet()
    k.step(1, 1000.0, 200.0)
    k.launch("kernel_a", 1010.0, stream=7, start=1018.0, dur=20.0)  # ends 1038
    k.launch("kernel_b", 1060.0, stream=7, start=1068.0, dur=20.0)  # call ends 1065: +3 µs
    k.launch("kernel_c", 1070.0, stream=7, start=1150.0, dur=20.0)  # 62 µs idle, unexplained
    _, nodes = read_et(
        convert([k.write(tmp_path / "r.json.gz")], tmp_path, prefix="t").ranks[0].path
    )
    gaps = {n.name: attrs_dict(n).get("gap_ns", 0) for n in nodes if n.name.startswith("kernel")}
    # kernel_a, first on its stream: its 3 µs hold after its launch returned (not capped)
    assert gaps == {"kernel_a": 3000, "kernel_b": 3000, "kernel_c": GPU_GAP_MAX_NS}
    sim = simulate(tmp_path / "t")
    tasks, g = sim.ranks[0].tasks, sim.graphs[0]
    start = {g.name(i): int(tasks.start_ns[i]) for i in range(len(g))}
    assert start["kernel_b"] == 68_000  # its call ended at 65 µs, +3
    assert start["kernel_c"] == 88_000 + GPU_GAP_MAX_NS  # kernel_b ends at 88 µs
