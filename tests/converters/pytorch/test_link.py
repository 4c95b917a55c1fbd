"""Linking host ops to Kineto events: counts per rule, unmatched ops with their reason."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.host_et import load_host_et
from lumos.converters.pytorch.json_stream import expand_inputs
from lumos.converters.pytorch.kineto import load_kineto
from lumos.converters.pytorch.link import link
from tests.conftest import DATA, fixture_path
from tests.converters.pytorch.kineto_snippet import Snippet, write_host_et

INPUTS = "param/et_replay/tests/inputs"


def _dlrm_rank0():  # type: ignore[no-untyped-def]
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
    return load_host_et(host), load_kineto(kin)


def test_order_rule_on_dlrm_with_reasons() -> None:
    host, kineto = _dlrm_rank0()
    report = link(host, kineto).report
    assert report.host_ops == 1672 and report.kineto_cpu_events == 1673
    assert report.by_rule == {"order": 1670}
    assert report.unmatched == {"not in Kineto": 2}
    assert report.examples == [
        "not in Kineto: host op 1920 'aten::select' (tid 2)",
        "not in Kineto: host op 1928 'aten::select' (tid 2)",
    ]


def test_event_missing_from_kineto_is_reported() -> None:
    host, kineto = _dlrm_rank0()
    names = [kineto.name_of(i) for i in range(len(kineto))]
    victim = names.index("aten::zeros")
    keep = np.ones(len(kineto), bool)
    keep[victim] = False
    for key in ("kind", "name", "cat", "ts", "dur", "pid", "tid", "ext", "rf", "corr"):
        setattr(kineto, key, getattr(kineto, key)[keep])
    kineto.args = {}
    report = link(host, kineto).report
    assert report.by_rule["order"] < 1670
    assert report.unmatched.get("not in Kineto", 0) > 2
    assert any("aten::zeros" in e for e in report.examples)


def test_order_rule_on_simple_add() -> None:
    files = expand_inputs([fixture_path("HolisticTraceAnalysis/tests/data/execution_trace")])
    host = load_host_et(next(f for f in files if "_et" in f.name))
    kineto = load_kineto(next(f for f in files if "trace" in f.name and "_et" not in f.name))
    linked = link(host, kineto)
    assert linked.report.by_rule == {"order": 36} and linked.report.unmatched == {}
    for i, op in linked.host_of.items():
        assert kineto.name_of(i) == op.name


def test_rf_id_rule_on_capture_keeps_exact_links_whatever_the_nesting() -> None:
    files = expand_inputs([DATA / "captures" / "pipeline"])
    host = load_host_et(next(f for f in files if f.name == "rank0.host_et.json.gz"))
    kineto = load_kineto(next(f for f in files if f.name == "rank0.kineto.json.gz"))
    linked = link(host, kineto)
    # in Kineto the gloo:send/recv events end after their c10d::send/recv_ parent; their
    # rf_id is exact, so they stay linked (they were dropped as "outside its parent's
    # time span" before) and are counted
    assert linked.report.by_rule == {"rf_id": 1354}
    assert linked.report.unmatched == {} and linked.report.nesting_differs == 4
    for i, op in linked.host_of.items():
        assert kineto.rf[i] == op.rf_id and kineto.name_of(i) == op.name


def test_exact_rf_id_link_kept_when_host_et_nests_siblings() -> None:
    """torch 2.13's host ET makes the next autograd evaluate_function a child of the one
    before it; Kineto has them one after another. 31 of rank 0's and 44 of rank 1's ops
    of the DDP capture lost their link (and shapes) to the nesting check."""
    for rank, differs in ((0, 31), (1, 44)):
        files = expand_inputs([DATA / "captures" / "ddp"])
        host = load_host_et(next(f for f in files if f.name == f"rank{rank}.host_et.json.gz"))
        kineto = load_kineto(next(f for f in files if f.name == f"rank{rank}.kineto.json.gz"))
        report = link(host, kineto).report
        assert report.by_rule == {"rf_id": 2113} and report.rate == 1.0
        assert report.unmatched == {} and report.nesting_differs == differs


def test_exact_rf_id_link_kept_when_host_et_nests_a_sibling(tmp_path: Path) -> None:
    """A hand-made pair: the host ET makes ViewBackward0's evaluate_function a child of
    AccumulateGrad's, which Kineto recorded (with the same rf ids) before it."""
    k = Snippet()
    k.step(1, 1000.0, 200.0)
    k.op("autograd::engine::evaluate_function: AccumulateGrad", 1010.0, 30.0, rf=10)
    k.op("autograd::engine::evaluate_function: ViewBackward0", 1050.0, 20.0, rf=11)
    k.op("aten::view", 1055.0, 5.0, rf=12)
    k.write(tmp_path / "rank0.kineto.json.gz")
    ops = [
        (3, "autograd::engine::evaluate_function: AccumulateGrad", 2, 10),
        (4, "autograd::engine::evaluate_function: ViewBackward0", 3, 11),  # wrong parent
        (5, "aten::view", 4, 12),
    ]
    write_host_et(tmp_path / "rank0.host_et.json.gz", ops)
    result = convert([tmp_path], tmp_path / "et", prefix="t")
    report = result.ranks[0].link
    assert report is not None
    assert report.by_rule == {"rf_id": 3} and report.unmatched == {}
    assert report.nesting_differs == 1
    nodes = read_et(tmp_path / "et" / "t.0.et")[1]
    name = "autograd::engine::evaluate_function: ViewBackward0"
    backward = next(n for n in nodes if n.name == name)  # its first segment
    assert attrs_dict(backward)["rf_id"] == 11
    assert backward.inputs.shapes == "[[4,64]]"  # its shapes are kept


def test_order_link_outside_its_parent_is_still_dropped() -> None:
    """Without rf ids (schema 1.0.1) a name-order match is a guess; the nesting check
    still drops one whose event lies outside its parent's."""
    host, kineto = _dlrm_rank0()
    names = [kineto.name_of(i) for i in range(len(kineto))]
    linked = link(host, kineto)
    child = next(
        i
        for i in np.flatnonzero(linked.host_row >= 0).tolist()
        if names[i] == "aten::empty" and linked.host.parent[linked.host_row[i]] > 1
    )
    parent_id = int(linked.host.parent[linked.host_row[child]])
    parent = int(np.flatnonzero(linked.host.id[linked.host_row] == parent_id)[0])
    kineto.dur[child] = kineto.ts[parent] + kineto.dur[parent] + 50_000 - kineto.ts[child]
    report = link(host, kineto).report
    assert report.unmatched.get("outside its parent's time span") == 1
    assert report.by_rule["order"] == 1669 and report.nesting_differs == 0
