"""Coalesced collectives (Megatron's distributed optimizer all-gathers its buckets inside
one `_coalescing_manager`): each `c10d::_allgather_base_` only registers its transfer
(its `record_param_comms` names size and group) and one `ncclDevKernel_AllGather` inside
`nccl:coalesced` runs them all, with no NCCL arguments of its own. Its type comes from
its name; its size is what the registered all-gathers move."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.proto import pb
from lumos.simulator.network.nccl import pricer_for_job
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import Mode, SimOptions, simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace

ALL_GATHER = "ncclDevKernel_AllGather_RING_LL(ncclDevKernelArgsStorage<4096ul>)"
BUCKETS = (4_194_304, 4_194_304, 1_048_576)  # bf16 elements per rank
NCCL = 30


def _bucketed_all_gather(rank: int) -> Snippet:
    """Three buckets all-gathered in one coalescing manager; rank 1 arrives 3 µs later."""
    k = _rank_trace(rank, 2)
    k.step(1, 1000.0, 460.0)
    t = 1005.0
    k.runtime("cudaEventRecord", t, 2.0)  # NCCL stream waits for the compute stream
    k.runtime("cudaStreamWaitEvent", t + 3.0, 2.0)
    t += 6.0
    for n in BUCKETS:
        dims = {"Input Dims": [[2 * n], [n]], "Input type": ["c10::BFloat16"] * 2}
        k.op("c10d::_allgather_base_", t, 8.0, args=dims)
        comms = {
            "Collective name": "_allgather_base",
            "dtype": "BFloat16",
            "In msg nelems": n,
            "Out msg nelems": 2 * n,
            "Group size": 2,
            "Process Group Name": "0",
            "Process Group Description": "default_pg",
            "Process Group Ranks": "[0, 1]",
        }
        k.op("record_param_comms", t + 1.0, 5.0, args=comms)
        t += 9.0
    k.annotation("nccl:coalesced", t, 10.0)
    start = 1040.0 + 3.0 * rank
    k.launch(ALL_GATHER, t + 1.0, NCCL, start, 1440.0 - start, call="cuLaunchKernelEx")
    k.runtime("cudaDeviceSynchronize", t + 12.0, 1443.0 - t - 12.0)
    k.op("aten::zero_", 1446.0, 5.0)
    return k


def test_coalesced_all_gather_moves_what_its_buckets_registered(tmp_path: Path) -> None:
    """One ALL_GATHER node per rank of 2 × 4 Mi + 1 Mi bf16 elements (18,874,368 bytes):
    it was written with comm_size 0, so model mode (H100 pricer) priced a 0-byte
    all-gather: 3.6 µs, now 56.6 µs for its 18.9 MB. Replay keeps its recorded time
    either way (both ranks within 0.01%)."""
    paths = [_bucketed_all_gather(r).write(tmp_path / f"rank{r}.json.gz") for r in range(2)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert result.problems == [] and [r.unknown_comm for r in result.ranks] == [0, 0]
    size = 2 * sum(BUCKETS)
    for summary in result.ranks:
        colls = [n for n in read_et(summary.path)[1] if n.type == pb.COMM_COLL_NODE]
        assert [(attrs_dict(n)["comm_type"], attrs_dict(n)["comm_size"]) for n in colls] == [
            (pb.ALL_GATHER, size)
        ]
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    assert all(r.error_pct is not None and abs(r.error_pct) < 0.01 for r in rows)
    pricer = pricer_for_job("h100", 2)
    model = simulate(prefix, SimOptions(Mode.MODEL, pricer))
    tasks, g = model.ranks[0].tasks, model.graphs[0]
    coll = next(i for i in range(len(g)) if g.type[i] == pb.COMM_COLL_NODE)
    priced = pricer.collective_ns(pb.ALL_GATHER, size, (0, 1))
    assert priced > 10 * pricer.collective_ns(pb.ALL_GATHER, 0, (0, 1))
    assert int(tasks.end_ns[coll]) - int(tasks.start_ns[coll]) - int(tasks.wait_ns[coll]) == priced
