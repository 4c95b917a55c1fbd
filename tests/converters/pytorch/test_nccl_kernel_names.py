"""NCCL kernels of every naming: before 2.7 the collective came first
(`ncclAllReduceRingLLKernel_sum_f32(ncclColl)`, as PaddlePaddle's profiler tables and
NCCL 2.4-2.6's `src/collectives/device` show it), 2.7-2.18 `ncclKernel_<Coll>_<ALGO>_<PROTO>_<op>_<type>`
(PARAM's DLRM, HTA's fixtures), 2.19+ `ncclDevKernel_<Coll>_...`. Each is a collective
with its type; a `record_param_comms` without sizes leaves the size to the
`c10d::allreduce_` op's input dims."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace

ELEMENTS = 1_048_576  # fp32


def _all_reduce_rank(rank: int, kernel: str) -> Snippet:
    """A GEMM, one all-reduce whose `record_param_comms` names no sizes (rank 1 enters
    3 µs later), a device sync."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 300.0)
    k.op("aten::mm", 1005.0, 10.0)
    k.launch("gemm", 1007.0, 7, 1015.0, 100.0)
    k.op(
        "c10d::allreduce_", 1020.0, 10.0, args={"Input Dims": [[ELEMENTS]], "Input type": ["float"]}
    )
    comms = {
        "Collective name": "allreduce",
        "dtype": "Float",
        "Group size": 2,
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": "[0, 1]",
    }
    k.op("record_param_comms", 1021.0, 8.0, args=comms)
    start = 1120.0 + 3.0 * rank
    k.launch(kernel, 1023.0, 30, start, 1270.0 - start)
    k.runtime("cudaDeviceSynchronize", 1032.0, 240.0)
    k.op("aten::zero_", 1275.0, 5.0)
    return k


@pytest.mark.parametrize(
    "kernel",
    [
        "ncclAllReduceRingLLKernel_sum_f32(ncclColl)",
        "ncclAllReduceTreeLL128Kernel_sum_f32(ncclColl)",
        "ncclKernel_AllReduce_RING_LL_Sum_float(ncclWorkElem)",
        "ncclDevKernel_AllReduce_Sum_f32_RING_LL(ncclDevKernelArgsStorage<4096ul>)",
    ],
)
def test_nccl_kernel_of_any_version_is_a_collective(tmp_path: Path, kernel: str) -> None:
    """Pre-2.7 names were plain compute kernels (no COMM node, no cross-rank check, model
    mode priced them as compute); now one 4 MiB ALL_REDUCE per rank in group 0. Replay
    0.00 % on both ranks either way."""
    paths = [_all_reduce_rank(r, kernel).write(tmp_path / f"rank{r}.json.gz") for r in range(2)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert result.problems == [] and [r.unknown_comm for r in result.ranks] == [0, 0]
    for summary in result.ranks:
        colls = [n for n in read_et(summary.path)[1] if n.type == pb.COMM_COLL_NODE]
        got = [(attrs_dict(n)["comm_type"], attrs_dict(n)["comm_size"]) for n in colls]
        assert got == [(pb.ALL_REDUCE, 4 * ELEMENTS)]
        assert attrs_dict(colls[0])["pg_name"] == "0"
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    assert all(r.error_pct is not None and abs(r.error_pct) < 0.005 for r in rows)
