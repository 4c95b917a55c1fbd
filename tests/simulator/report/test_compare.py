"""Simulated vs measured: a two-rank ET written with recorded times, replayed and compared."""

from __future__ import annotations

import io
from pathlib import Path

from click.testing import CliRunner
from rich.console import Console

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import add_attrs, set_attr
from lumos.converters.chakra.conventions import (
    DUR_NS,
    META_STEP_NS,
    PG_RANKS,
    START_NS,
    STREAM,
    TID,
)
from lumos.converters.chakra.stream import write_et
from lumos.proto import pb
from lumos.simulator.report.compare import compare, render_comparison
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate

#: rank → (gemm duration, recorded all-reduce duration incl. waiting for the late peer)
RECORDED = {0: (50_000, 30_000), 1: (60_000, 20_000)}
STEP_NS = 95_000


def _node(nid: int, name: str, ntype: int, start: int, dur: int, deps: list[int]) -> pb.Node:
    node = pb.Node(id=nid, name=name, type=ntype, duration_micros=dur // 1000)
    node.ctrl_deps.extend(deps)
    add_attrs(node, [(START_NS, start), (DUR_NS, dur)])
    return node


def write_two_ranks(folder: Path) -> Path:
    """Host op, kernel launch, a gemm on stream 7, then an all-reduce on stream 20.

    Rank 1's gemm is 10 µs longer, so rank 0's all-reduce waits 10 µs for it; replay
    takes the shorter recorded all-reduce (20 µs): both ranks' GPU work ends at
    12 + 60 + 20 = 92 µs. The step (95 µs) ends 83 µs after thread 1's last op: that
    untraced tail is replayed too, so both ranks end at 12 + 83 = 95 µs.
    """
    for rank, (gemm, allreduce) in RECORDED.items():
        meta = pb.GlobalMetadata(version="0.0.4")
        set_attr(meta, META_STEP_NS, STEP_NS)
        set_attr(meta, "rank", rank)
        mm = _node(1, "aten::mm", pb.COMP_NODE, 0, 10_000, [])
        launch = _node(2, "cudaLaunchKernel", pb.COMP_NODE, 10_000, 2_000, [1])
        for host in (mm, launch):
            add_attrs(host, [(TID, 1), ("is_cpu_op", True)])
        kernel = _node(3, "gemm", pb.COMP_NODE, 12_000, gemm, [2])
        add_attrs(kernel, [(STREAM, 7), ("is_cpu_op", False)])
        ar = _node(4, "nccl:all_reduce", pb.COMM_COLL_NODE, 12_000 + 50_000, allreduce, [3])
        add_attrs(
            ar,
            [(STREAM, 20), ("comm_type", 0), ("comm_size", 1 << 20), ("pg_name", "0")],
        )
        set_attr(ar, PG_RANKS, [0, 1], "int64_list")
        write_et(folder / f"toy.{rank}.et", meta, [mm, launch, kernel, ar])
    return folder / "toy"


def test_measured_side_reads_step_and_recorded_nodes(tmp_path: Path) -> None:
    measured = read_measured(write_two_ranks(tmp_path))
    assert [m.rank for m in measured] == [0, 1]
    assert measured[0].step_ns == STEP_NS
    assert measured[0].node_id.tolist() == [1, 2, 3, 4]
    assert measured[1].dur_ns.tolist() == [10_000, 2_000, 60_000, 20_000]
    assert measured[0].span_ns == 62_000 + 30_000


def test_replay_compared_per_rank_and_per_stream(tmp_path: Path) -> None:
    prefix = write_two_ranks(tmp_path)
    result = simulate(prefix)
    assert result.iteration_time_ns == 95_000
    assert int(result.ranks[0].tasks.end_ns.max()) == 92_000
    comparison = compare(result, read_measured(prefix))
    assert comparison.measured_ns == STEP_NS and comparison.simulated_ns == 95_000
    assert comparison.error_pct == 0.0
    assert comparison.mean_abs_error_pct == 0.0
    rank0 = {p.name: p for p in comparison.ranks[0].processors}
    assert set(rank0) == {"thread 1", "stream 7", "stream 20"}
    assert (rank0["thread 1"].measured_busy_ns, rank0["thread 1"].simulated_busy_ns) == (
        12_000,
        12_000,
    )
    # rank 0 recorded 30 µs of all-reduce (10 of them waiting); simulated 20 + 10 waiting
    assert rank0["stream 20"].measured_busy_ns == 30_000
    assert rank0["stream 20"].simulated_busy_ns == 30_000
    rank1 = {p.name: p for p in comparison.ranks[1].processors}
    assert rank1["stream 7"].error_pct == 0.0
    out = comparison.to_dict()
    assert out["ranks"][1]["processors"][0]["name"] == "thread 1"
    console = Console(file=io.StringIO(), width=120, record=True)
    render_comparison(comparison, console)
    assert "+0.00%" in console.export_text()


def test_compare_cli_json(tmp_path: Path) -> None:
    prefix = write_two_ranks(tmp_path)
    run = CliRunner().invoke(cli, ["compare", str(prefix), "--json"])
    assert run.exit_code == 0, run.output
    assert '"simulated_ns": 95000' in run.output and '"measured_ns": 95000' in run.output
