"""`simulate --ranks`: an explicit subset of a rank set, on purpose, with a stated rule.

A 4-rank job where rank 3 computes 1 ms before the all-reduce every rank joins, and rank
0 sends to rank 3. Simulating ranks 0 and 1 drops rank 3's wait (the rule: a collective
reaching outside the subset starts when its members inside arrive; a send whose peer is
outside runs unpaired), counts both in a note, and refuses ranks the set does not hold.
A set with a missing rank is still refused without --ranks, and runs with it.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.api import simulate
from lumos.cli.main import cli
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.stream import with_node_count, write_et
from lumos.errors import RankSetError
from lumos.proto import pb

WORLD = 4


def gpu_node(nid: int, name: str, ntype: int, dur_ns: int, *attrs: pb.AttributeProto) -> pb.Node:
    node = pb.Node(id=nid, name=name, type=ntype, duration_micros=dur_ns // 1000)
    node.attr.extend(
        [make_attr("is_cpu_op", False), make_attr("stream", 7), make_attr("dur_ns", dur_ns)]
    )
    node.attr.extend(attrs)
    return node


def rank_nodes(rank: int) -> list[pb.Node]:
    work = gpu_node(1, "gemm", pb.COMP_NODE, 1_000_000 if rank == 3 else 10_000)
    allreduce = gpu_node(
        2, "allreduce", pb.COMM_COLL_NODE, 5_000,
        make_attr("comm_type", pb.ALL_REDUCE), make_attr("comm_size", 1 << 20),
    )  # fmt: skip
    allreduce.data_deps.append(1)
    tail = gpu_node(3, "gemm2", pb.COMP_NODE, 10_000)
    tail.data_deps.append(2)
    nodes = [work, allreduce, tail]
    if rank in (0, 3):
        kind = pb.COMM_SEND_NODE if rank == 0 else pb.COMM_RECV_NODE
        p2p = gpu_node(
            4, "send" if rank == 0 else "recv", kind, 2_000,
            make_attr("comm_src", 0, "int32_val"), make_attr("comm_dst", 3, "int32_val"),
            make_attr("comm_tag", 9, "int32_val"), make_attr("comm_size", 4096),
        )  # fmt: skip
        p2p.data_deps.append(3)
        nodes.append(p2p)
    return nodes


@pytest.fixture
def job(tmp_path: Path) -> Path:
    for rank in range(WORLD):
        nodes = rank_nodes(rank)
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend([make_attr("rank", rank), make_attr("world_size", WORLD)])
        write_et(tmp_path / f"t.{rank}.et", with_node_count(meta, len(nodes)), nodes)
    return tmp_path / "t"


def step_us(trace: Path, *args: str) -> tuple[dict[int, float], list[str]]:
    result = CliRunner().invoke(cli, ["simulate", str(trace), "--json", *args])
    assert result.exit_code == 0, result.output
    doc = json.loads(result.stdout)["result"]
    return {r["rank"]: r["iteration_time_ns"] / 1e3 for r in doc["ranks"]}, doc["notes"]


def test_whole_set_waits_for_the_slow_rank(job: Path) -> None:
    times, _ = step_us(job)
    assert times[0] == pytest.approx(1000 + 5 + 10 + 2, abs=0.01)  # waits for rank 3


@pytest.mark.parametrize("spec", ["0,1", "0-1", " 1 , 0 "])
def test_subset_starts_collectives_when_its_members_arrive(job: Path, spec: str) -> None:
    times, notes = step_us(job, "--ranks", spec)
    assert sorted(times) == [0, 1]
    assert times[0] == pytest.approx(10 + 5 + 10 + 2, abs=0.01)  # the send runs unpaired
    assert times[1] == pytest.approx(10 + 5 + 10, abs=0.01)
    (note,) = [n for n in notes if n.startswith("simulated ranks 0, 1 only")]
    assert "2 collective node(s) have members outside" in note
    assert "1 send/recv node(s) have their peer outside" in note


def test_subset_closed_under_communication_has_no_note(job: Path) -> None:
    sim = simulate(job, ranks=[0, 1, 2, 3])
    assert not [n for n in sim.raw.notes if n.startswith("simulated ranks")]
    assert len(sim.raw.ranks) == WORLD


def test_ranks_not_in_the_set_are_refused(job: Path) -> None:
    with pytest.raises(RankSetError, match=r"rank\(s\) 7-8 asked for are not in the set"):
        simulate(job, ranks=[0, 7, 8])
    bad = CliRunner().invoke(cli, ["simulate", str(job), "--ranks", "3-1"])
    assert bad.exit_code == 2 and "runs backwards" in bad.output
    bad = CliRunner().invoke(cli, ["simulate", str(job), "--ranks", "one"])
    assert bad.exit_code == 2 and "give ranks like 0,1,5" in bad.output


def test_set_with_a_missing_rank_needs_ranks_or_allow_partial(job: Path) -> None:
    (job.parent / "t.2.et").unlink()
    refused = CliRunner().invoke(cli, ["simulate", str(job)])
    assert refused.exit_code == 1 and "1 of 4 ranks are missing: 2" in refused.output
    times, _ = step_us(job, "--ranks", "0,1")
    assert sorted(times) == [0, 1]
    refused = CliRunner().invoke(cli, ["simulate", str(job), "--ranks", "1-2"])
    assert refused.exit_code == 1 and "rank(s) 2 asked for are not in the set" in refused.output
