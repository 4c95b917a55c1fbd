"""Collectives of sub-groups (tensor- and data-parallel groups on their own NCCL streams),
named only by Kineto's NCCL arguments (`Collective name`, `dtype`, `In msg nelems`,
`Group size`, `Process Group Name`, `Process Group Ranks`, as HTA's nccl_data trace holds
them on `record_param_comms` and on the kernel): the group's members come from those
arguments when `distributedInfo` has no `pg_config`, and from the enclosing
`record_param_comms` when the kernel carries none (older Kineto copied nothing onto it).
A collective's size uses the width of its `dtype`, FP8 included."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.comm import group_ranks
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import Mode, SimOptions, simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace

ALL_REDUCE = "ncclDevKernel_AllReduce_Sum_bf16_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
ALL_GATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
#: 2 × 2 mesh: tensor-parallel groups "1" = {0, 1}, "2" = {2, 3}; data-parallel "3" = {0, 2},
#: "4" = {1, 3} (PyTorch names groups "0", "1", ... in the order `new_group` made them)
TP = {0: ("1", [0, 1]), 1: ("1", [0, 1]), 2: ("2", [2, 3]), 3: ("2", [2, 3])}
DP = {0: ("3", [0, 2]), 1: ("4", [1, 3]), 2: ("3", [0, 2]), 3: ("4", [1, 3])}
TP_STREAM, DP_STREAM = 30, 40


def _comms(name: str, pg: str, ranks: list[int], nelems: int, dtype: str) -> dict[str, Any]:
    return {
        "Collective name": name,
        "dtype": dtype,
        "In msg nelems": nelems,
        "Out msg nelems": nelems * (len(ranks) if name == "_allgather_base" else 1),
        "In split size": "[]",
        "Out split size": "[]",
        "Group size": len(ranks),
        "Process Group Name": pg,
        "Process Group Description": "undefined",
        "Process Group Ranks": str(ranks),
    }


def _collective(
    k: Snippet,
    ts: float,
    kernel: str,
    stream: int,
    span: tuple[float, float],
    comms: dict[str, Any],
    on_kernel: bool,
) -> None:
    """`c10d::` op ⊃ `record_param_comms` ⊃ `nccl:*` ⊃ launch, as ProcessGroupNCCL nests
    them; the kernel carries the NCCL arguments too when `on_kernel`."""
    k.op(f"c10d::{comms['Collective name']}_", ts, 30.0)
    k.op("record_param_comms", ts + 2.0, 26.0, args=comms)
    k.annotation(f"nccl:{comms['Collective name']}", ts + 4.0, 20.0)
    k.launch(kernel, ts + 6.0, stream, span[0], span[1] - span[0])
    if on_kernel:
        k.events[-2]["args"].update(comms)  # the GPU op (the last event is its flow end)


def _mesh_rank(rank: int, pg_config: bool, on_kernel: bool) -> Snippet:
    """A TP all-reduce then a DP all-reduce. Rank 2's host is 150 µs late to its DP
    all-reduce: its DP peer, rank 0, waits for it; ranks 1 and 3 (the other DP group) do
    not, and finish their step 100 µs sooner."""
    k = _rank_trace(rank, 4)
    if not pg_config:
        k.distributed = {"backend": "nccl", "rank": rank, "world_size": 4}
    else:
        assert k.distributed is not None
        k.distributed["pg_config"] += [
            {"pg_name": n, "pg_desc": "undefined", "pg_size": 2, "ranks": r}
            for n, r in (TP[0], TP[2], DP[0], DP[1])
        ]
    dp_start = 1420.0 if rank == 2 else 1260.0
    dp_end = 1500.0 if rank in (0, 2) else 1400.0
    k.step(1, 1000.0, dp_end + 10.0 - 1000.0)
    k.launch("gemm", 1005.0, 7, 1015.0, 100.0)
    tp = _comms("allreduce", *TP[rank], 1 << 20, "BFloat16")
    _collective(k, 1020.0, ALL_REDUCE, TP_STREAM, (1120.0 + 4 * rank, 1250.0), tp, on_kernel)
    t = 1060.0
    if rank == 2:
        k.op("aten::slow_host", t, 150.0)
        t += 155.0
    dp = _comms("allreduce", *DP[rank], 1 << 22, "BFloat16")
    _collective(k, t, ALL_REDUCE, DP_STREAM, (dp_start, dp_end), dp, on_kernel)
    k.runtime("cudaDeviceSynchronize", t + 40.0, dp_end - t - 38.0)
    k.op("aten::zero_", dp_end + 4.0, 5.0)
    return k


def _groups_and_errors(tmp_path: Path, pg_config: bool, on_kernel: bool):
    paths = [
        _mesh_rank(r, pg_config, on_kernel).write(tmp_path / f"rank{r}.json.gz") for r in range(4)
    ]
    result = convert(paths, tmp_path / "et", prefix="t")
    groups = []
    for summary in result.ranks:
        colls = [n for n in read_et(summary.path)[1] if n.type == pb.COMM_COLL_NODE]
        groups.append([(attrs_dict(n)["pg_name"], attrs_dict(n)["pg_ranks"]) for n in colls])
    prefix = tmp_path / "et" / "t"
    errors = [r.error_pct for r in compare(simulate(prefix), read_measured(prefix)).ranks]
    return result, groups, errors


MESH = [
    [("1", [0, 1]), ("3", [0, 2])],
    [("1", [0, 1]), ("4", [1, 3])],
    [("2", [2, 3]), ("3", [0, 2])],
    [("2", [2, 3]), ("4", [1, 3])],
]


@pytest.mark.parametrize("pg_config", [True, False])
def test_sub_group_members_come_from_the_kernels_nccl_args(tmp_path: Path, pg_config: bool) -> None:
    """Without `pg_config` every group was taken as all 4 ranks: ranks 1 and 3 waited for
    rank 2's late DP all-reduce, +4.88 % each (no note). Now each collective has its
    group's two ranks (from `Process Group Ranks`) and every rank replays within 0.01 %."""
    result, groups, errors = _groups_and_errors(tmp_path, pg_config, on_kernel=True)
    assert groups == MESH
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors
    assert result.problems == [] and all(s.notes == [] for s in result.ranks)


def test_kernel_without_nccl_args_takes_them_from_record_param_comms(tmp_path: Path) -> None:
    """The kernels carry no NCCL arguments, only their `record_param_comms` does: every
    collective was put in group "0" (all ranks, one sequence) and ranks 1 and 3 replayed
    +4.88 %. Now the enclosing op's arguments name the group: within 0.01 %."""
    result, groups, errors = _groups_and_errors(tmp_path, True, on_kernel=False)
    assert groups == MESH
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors
    assert result.problems == []


def test_group_named_by_no_source_is_a_note(tmp_path: Path) -> None:
    """A group that no `pg_config`, host ET or NCCL argument lists is taken as every
    rank, and each rank's notes say so."""
    k = _rank_trace(0, 2)
    k.distributed = {"backend": "nccl", "rank": 0, "world_size": 2}
    k.step(1, 1000.0, 200.0)
    comms = _comms("allreduce", "7", [0, 1], 1024, "Float")
    del comms["Process Group Ranks"]
    _collective(k, 1010.0, ALL_REDUCE, TP_STREAM, (1020.0, 1100.0), comms, on_kernel=True)
    k.runtime("cudaDeviceSynchronize", 1050.0, 52.0)
    result = convert([k.write(tmp_path / "rank0.json.gz")], tmp_path / "et", prefix="t")
    assert result.ranks[0].notes == [
        f"{tmp_path / 'rank0.json.gz'}: 1 communication op(s): group '7' named by no source: "
        "taken as all 2 ranks"
    ]


def test_fp8_all_gather_is_sized_one_byte_an_element(tmp_path: Path) -> None:
    """An FP8 all-gather (`dtype` "Float8_e4m3fn", as torchao's float8 FSDP2 all-gather
    writes it) of 8 Mi elements a rank: was sized 4 bytes an element (33.6 MB, the
    default for an unknown dtype, without a note) and model mode (H100 pricer) priced
    it 4 × too big; now 8,388,608 bytes. An unknown dtype is still sized 4 bytes, with a
    note."""
    paths = []
    for rank, dtype in ((0, "Float8_e4m3fn"), (1, "Float8_e4m3fn")):
        k = _rank_trace(rank, 2)
        k.step(1, 1000.0, 400.0)
        comms = _comms("_allgather_base", "0", [0, 1], 8 << 20, dtype)
        _collective(k, 1010.0, ALL_GATHER, TP_STREAM, (1030.0, 1380.0), comms, on_kernel=True)
        k.runtime("cudaDeviceSynchronize", 1050.0, 332.0)
        k.op("aten::zero_", 1390.0, 5.0)
        paths.append(k.write(tmp_path / f"rank{rank}.json.gz"))
    result = convert(paths, tmp_path / "et", prefix="t")
    sizes = [
        attrs_dict(n)["comm_size"]
        for s in result.ranks
        for n in read_et(s.path)[1]
        if n.type == pb.COMM_COLL_NODE
    ]
    assert sizes == [8 << 20, 8 << 20]
    pricer = pricer_for_job("h100", 2)
    model = simulate(tmp_path / "et" / "t", SimOptions(Mode.MODEL, pricer))
    tasks, g = model.ranks[0].tasks, model.graphs[0]
    coll = next(i for i in range(len(g)) if g.type[i] == pb.COMM_COLL_NODE)
    priced = int(tasks.end_ns[coll]) - int(tasks.start_ns[coll]) - int(tasks.wait_ns[coll])
    assert priced == pricer.collective_ns(pb.ALL_GATHER, 8 << 20, (0, 1))
    assert priced < pricer.collective_ns(pb.ALL_GATHER, 32 << 20, (0, 1)) / 2


def test_unknown_dtype_is_a_note(tmp_path: Path) -> None:
    k = _rank_trace(0, 1)
    k.step(1, 1000.0, 200.0)
    comms = _comms("allreduce", "0", [0], 1024, "Float4_e9m9")
    _collective(k, 1010.0, ALL_REDUCE, TP_STREAM, (1020.0, 1100.0), comms, on_kernel=True)
    k.runtime("cudaDeviceSynchronize", 1050.0, 52.0)
    result = convert([k.write(tmp_path / "rank0.json.gz")], tmp_path / "et", prefix="t")
    assert result.ranks[0].notes == [
        f"{tmp_path / 'rank0.json.gz'}: 1 communication op(s): dtype 'Float4_e9m9' of "
        "unknown width: sized at 4 bytes an element"
    ]


def test_truncated_rank_lists_are_completed() -> None:
    """Kineto cuts `Process Group Ranks` after 30 ranks ("[0, 8, ..., 232, ...]"): a
    64-rank data-parallel group of a 512-rank job was unreadable (taken as all 512
    ranks). It is completed from `Global rank start` / `stride` when given, else from
    the even step of the ranks shown; an uneven cut list stays unknown."""
    shown = ", ".join(str(8 * i + 3) for i in range(30))
    cut = {"Process Group Ranks": f"[{shown}, ...]", "Group size": 64}
    assert group_ranks(cut) == tuple(8 * i + 3 for i in range(64))
    given = cut | {"Global rank start": 3, "Global rank stride": 8}
    assert group_ranks(given) == tuple(8 * i + 3 for i in range(64))
    uneven = {"Process Group Ranks": "[0, 1, 4, 5, ...]", "Group size": 8}
    assert group_ranks(uneven) == ()
    assert group_ranks({"Process Group Ranks": "[0, 2]", "Group size": 2}) == (0, 2)


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("allgather_into_tensor_coalesced", pb.ALL_GATHER),
        ("reduce_scatter_tensor_coalesced", pb.REDUCE_SCATTER),
        ("allreduce_coalesced", pb.ALL_REDUCE),
        ("_reduce_scatter_base", pb.REDUCE_SCATTER),
        ("all_to_all", pb.ALL_TO_ALL),
    ],
)
def test_coalesced_collective_names_have_a_type(tmp_path: Path, name: str, kind: int) -> None:
    """`Collective name` of ProcessGroupNCCL's coalesced ops: the type comes from it when
    the kernel's name says nothing (a SendRecv kernel, which all-to-all also runs on).
    The two `_tensor_coalesced` names were unknown (written as all-reduce, counted as
    unknown type)."""
    k = _rank_trace(0, 1)
    k.step(1, 1000.0, 200.0)
    comms = _comms(name, "0", [0], 1024, "Float")
    kernel = "ncclDevKernel_SendRecv(ncclDevKernelArgsStorage<4096ul>)"
    _collective(k, 1010.0, kernel, TP_STREAM, (1020.0, 1100.0), comms, on_kernel=True)
    k.runtime("cudaDeviceSynchronize", 1050.0, 52.0)
    result = convert([k.write(tmp_path / "rank0.json.gz")], tmp_path / "et", prefix="t")
    colls = [n for n in read_et(result.ranks[0].path)[1] if n.type == pb.COMM_COLL_NODE]
    assert [attrs_dict(n)["comm_type"] for n in colls] == [kind]
    assert result.ranks[0].unknown_comm == 0


def test_collective_replayed_in_a_cuda_graph_without_a_size_is_a_note(tmp_path: Path) -> None:
    """An all-reduce captured in a CUDA graph: its replay runs the NCCL kernel with no
    `record_param_comms` around it, so nothing names its size or group. It was written as
    a 0-byte collective of group "0" without a word (model mode priced it empty); now
    each rank's notes count it (replay keeps its recorded time: 0.00 %)."""
    paths = []
    for rank in range(2):
        k = _rank_trace(rank, 2)
        k.step(1, 1000.0, 400.0)
        start = 1122.0 + 5.0 * rank
        ops = [("gemm", 7, 1020.0, 100.0), (ALL_REDUCE, 7, start, 1300.0 - start)]
        k.graph_launch(1010.0, 8.0, [*ops, ("gemm2", 7, 1302.0, 50.0)])
        k.runtime("cudaStreamSynchronize", 1030.0, 323.0)
        k.op("aten::zero_", 1360.0, 5.0)
        paths.append(k.write(tmp_path / f"rank{rank}.json.gz"))
    result = convert(paths, tmp_path / "et", prefix="t")
    assert [s.notes for s in result.ranks] == [
        [
            f"{tmp_path / f'rank{r}.json.gz'}: 1 communication op(s): size named by no "
            "source (a CUDA graph's replay carries none): 0 bytes"
        ]
        for r in range(2)
    ]
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    assert all(r.error_pct is not None and abs(r.error_pct) < 0.01 for r in rows)
