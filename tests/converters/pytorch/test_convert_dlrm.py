"""DLRM 8×V100 (host ET schema 1.0.1 + Kineto without rf ids): link, comm nodes, validity."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.stream import read_et
from lumos.converters.chakra.validate import validate_sources
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.host_et import load_host_et
from lumos.converters.pytorch.json_stream import expand_inputs
from lumos.converters.pytorch.kineto import load_kineto
from lumos.converters.pytorch.link import link
from lumos.proto import pb
from tests.conftest import fixture_path

INPUTS = "param/et_replay/tests/inputs"


@pytest.fixture(scope="module")
def dlrm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, object]:
    out = tmp_path_factory.mktemp("dlrm")
    result = convert(
        [
            fixture_path(f"{INPUTS}/dlrm_pytorch_et.tar.gz"),
            fixture_path(f"{INPUTS}/dlrm_kineto.tar.gz"),
        ],
        out,
        prefix="dlrm",
    )
    return out, result


def test_every_rank_links_at_least_99_percent(dlrm: tuple[Path, object]) -> None:
    _, result = dlrm
    assert [s.rank for s in result.ranks] == list(range(8))  # type: ignore[attr-defined]
    for summary in result.ranks:  # type: ignore[attr-defined]
        assert summary.link.host_ops == 1672
        assert summary.link.rate >= 0.99
        assert summary.link.by_rule.keys() == {"order"}
        assert summary.step == "ProfilerStep#10"
    assert result.ranks[0].step_ns == 14_455_000  # type: ignore[attr-defined]


def test_nccl_kernels_are_comm_nodes_matching_across_ranks(dlrm: tuple[Path, object]) -> None:
    out, result = dlrm
    assert result.problems == []  # type: ignore[attr-defined]
    sequences = []
    for rank in range(8):
        meta, nodes = read_et(out / f"dlrm.{rank}.et")
        assert attrs_dict(meta)["world_size"] == 8
        assert attrs_dict(meta)["measured_step_ns"] > 10_000_000
        nccl = [n for n in nodes if n.name.startswith("ncclKernel")]
        assert nccl and all(n.type == pb.COMM_COLL_NODE for n in nccl)
        seq = []
        for n in nccl:
            a = attrs_dict(n)
            assert a["pg_name"] == "0" and a["pg_ranks"] == list(range(8))
            assert "is_cpu_op" not in a and a["stream"] >= 0
            seq.append(a["comm_type"])
        sequences.append(seq)
    a2a, ar = pb.ALL_TO_ALL, pb.ALL_REDUCE
    assert sequences[0] == [a2a, a2a, a2a, a2a, ar, a2a, ar, ar]
    assert all(s == sequences[0] for s in sequences)


def test_output_passes_validator(dlrm: tuple[Path, object]) -> None:
    out, _ = dlrm
    report = validate_sources(find_et_sources(out / "dlrm"))
    assert [str(p) for p in report.errors] == []


def test_linking_agrees_with_old_merged_reference() -> None:
    """Our order-based link gives the same Kineto times as PARAM's old trace_link output."""
    host = next(
        f
        for f in expand_inputs([fixture_path(f"{INPUTS}/dlrm_pytorch_et.tar.gz")])
        if f.name == "dlrm_eg_0.json"
    )
    kin = next(
        f
        for f in expand_inputs([fixture_path(f"{INPUTS}/dlrm_kineto.tar.gz")])
        if f.name.startswith("worker0_")
    )
    h, k = load_host_et(host), load_kineto(kin)
    linked = link(h, k)
    ref_path = fixture_path("astra-sim/my_test/inputs/workload/et_plus/dlrm_eg_0_plus.json.gz")
    with gzip.open(ref_path) as handle:
        ref = json.load(handle)
    ref_ts = {
        (n["rf_id"], n["name"]): (n["ts"], n["dur"])
        for n in ref["nodes"]
        if "rf_id" in n and "ts" in n
    }
    both = [(i, op) for i, op in linked.host_of.items() if (op.rf_id, op.name) in ref_ts]
    assert len(both) == 1670
    for i, op in both:
        ts, dur = ref_ts[(op.rf_id, op.name)]
        assert (k.events[i].ts, k.events[i].dur) == (ts * 1000, dur * 1000)
