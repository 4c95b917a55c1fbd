"""Point-to-point transfers in a trace captured without `record_shapes` (the profiler's
default): the `c10d::send` / `c10d::recv_` ops carry no `Concrete Inputs`, so the peer
is only in NCCL's own record, `record_param_comms` (`Rank`: the peer's group rank, as
ProcessGroupNCCL passes it; `Dst Rank` / `Src Rank`: its global rank, from
`saveNcclMeta` in pytorch torch/csrc/profiler/util.cpp). Round 6 of the replay work
(`docs/accuracy.md`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import (
    SENDRECV,
    _rank_trace,
    one_f_one_b_rank,
    pipeline_rank,
)

COMPUTE, NCCL = 7, 30


def _without_shapes(k: Snippet) -> Snippet:
    """The trace as `record_shapes=False` writes it: no `Concrete Inputs` / `Input Dims`
    on the c10d ops; `record_param_comms` keeps NCCL's arguments, with the peer."""
    peer = -1
    for e in k.events:
        args = e.get("args") or {}
        if e.get("name") in ("c10d::send", "c10d::recv_"):
            peer = int(args.pop("Concrete Inputs")[2])
            args.pop("Input Dims", None)
            args.pop("Input type", None)
        elif e.get("name") == "record_param_comms" and args.get("Collective name") in (
            "send",
            "recv",
        ):
            args["Rank"] = peer
            args["Dst Rank" if args["Collective name"] == "send" else "Src Rank"] = peer
    return k


def _comms(name: str, peer: int, world: int) -> dict[str, Any]:
    key = "Dst Rank" if name == "send" else "Src Rank"
    return {
        "Collective name": name,
        "dtype": "BFloat16",
        "In msg nelems": 1 << 20,
        "Out msg nelems": 1 << 20,
        "Group size": world,
        "Process Group Name": "0",
        "Process Group Description": "default_pg",
        "Process Group Ranks": str(list(range(world))),
        "Rank": peer,
        key: peer,
    }


def late_sender_rank(rank: int) -> Snippet:
    """`dist.send` / `dist.recv` (not batched), 2 ranks: rank 1 posts its receive at once
    and its SendRecv kernel waits 300 µs on the NCCL stream for rank 0, whose send
    follows a 300 µs GEMM; rank 1's GEMM after the receive waits for it (event)."""
    k = _rank_trace(rank, 2)
    send = rank == 0
    name = "send" if send else "recv"
    k.launch("gemm_a" if send else "prep", 1005.0, COMPUTE, 1012.0, 300.0 if send else 5.0)
    k.op(f"c10d::{name}" if send else "c10d::recv_", 1020.0, 30.0)
    k.op("record_param_comms", 1022.0, 26.0, args=_comms(name, 1 - rank, 2))
    k.runtime("cudaEventRecord", 1024.0, 2.0)
    k.runtime("cudaStreamWaitEvent", 1027.0, 2.0)
    k.annotation(f"nccl:{name} {rank}{'->' if send else '<-'}{1 - rank}", 1030.0, 12.0)
    start = 1314.0 if send else 1018.0
    k.launch(SENDRECV, 1032.0, NCCL, start, 1334.0 - start, call="cuLaunchKernelEx")
    k.runtime("cudaEventRecord", 1040.0, 2.0)
    k.runtime("cudaStreamWaitEvent", 1052.0, 2.0)  # work.wait(): compute waits for NCCL
    end = 1334.0
    if not send:
        k.launch("gemm_b", 1056.0, COMPUTE, 1336.0, 100.0)
        end = 1436.0
    k.runtime("cudaDeviceSynchronize", 1062.0, end + 2.0 - 1062.0)
    k.op("aten::zero_", end + 5.0, 5.0)
    k.step(1, 1000.0, end + 12.0 - 1000.0)
    return k


def _replay(tmp_path: Path, traces: list[Snippet]) -> tuple[Any, list[float]]:
    paths = [s.write(tmp_path / f"rank{r}.json.gz") for r, s in enumerate(traces)]
    result = convert(paths, tmp_path / "et", prefix="t")
    prefix = tmp_path / "et" / "t"
    rows = compare(simulate(prefix), read_measured(prefix)).ranks
    return result, [r.error_pct for r in rows]


@pytest.mark.parametrize("shapes", [True, False], ids=["record_shapes", "no_shapes"])
def test_send_posted_late_ends_the_early_receive(tmp_path: Path, shapes: bool) -> None:
    """Rank 1's receive waits 296 µs for rank 0's send: replay holds it as a wait for
    the peer, not as its transfer (right already with shapes). Without shapes the peer
    was unknown, converted without a word, and `lumos simulate` refused the set
    ("point-to-point node without comm_dst"). Both ranks within 0.01 % now."""
    traces = [late_sender_rank(r) for r in range(2)]
    if shapes:
        for r, k in enumerate(traces):
            for e in k.events:
                if e.get("name") in ("c10d::send", "c10d::recv_"):
                    e["args"]["Concrete Inputs"] = ["", "", str(1 - r), "0"]
    result, errors = _replay(tmp_path, traces)
    assert result.problems == []
    assert [r.unknown_comm for r in result.ranks] == [0, 0]
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors


@pytest.mark.parametrize("world", [4, 2], ids=["four_stages", "one_f_one_b"])
def test_batched_p2p_without_shapes_pairs_by_nccl_record(tmp_path: Path, world: int) -> None:
    """Megatron's `batch_isend_irecv` (`test_batched_p2p`'s traces) without shapes: each
    batch's ops lacked their peer, the batch stayed one unknown collective of the whole
    group (4 stages: "rank 1 has 4 collectives, rank 0 has 2", not simulated). Now its
    sends and receives, as with shapes; every rank within 0.01 %."""
    make = pipeline_rank if world == 4 else one_f_one_b_rank
    result, errors = _replay(tmp_path, [_without_shapes(make(r)) for r in range(world)])
    assert result.problems == []
    assert [r.unknown_comm for r in result.ranks] == [0] * world
    assert sum(r.p2p_batches["ops"] for r in result.ranks) == (12 if world == 4 else 8)
    assert all(e is not None and abs(e) < 0.01 for e in errors), errors


def test_send_without_any_peer_is_a_note(tmp_path: Path) -> None:
    """NCCL arguments without `Rank` / `Dst Rank` / `Src Rank` (an older PyTorch) and no
    shapes: the peer is unknown; the rank's notes say so (the set is then refused by
    `lumos simulate`, naming the node), where before nothing was said."""
    traces = [late_sender_rank(r) for r in range(2)]
    for k in traces:
        for e in k.events:
            for key in ("Rank", "Dst Rank", "Src Rank"):
                (e.get("args") or {}).pop(key, None)
    paths = [s.write(tmp_path / f"rank{r}.json.gz") for r, s in enumerate(traces)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert [sum("peer named by no source" in n for n in r.notes) for r in result.ranks] == [1, 1]
