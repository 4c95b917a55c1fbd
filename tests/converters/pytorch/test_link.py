"""Linking host ops to Kineto events: counts per rule, unmatched ops with their reason."""

from __future__ import annotations

import numpy as np

from lumos.converters.pytorch.host_et import load_host_et
from lumos.converters.pytorch.json_stream import expand_inputs
from lumos.converters.pytorch.kineto import load_kineto
from lumos.converters.pytorch.link import link
from tests.conftest import DATA, fixture_path

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


def test_rf_id_rule_on_capture_and_nesting_check() -> None:
    files = expand_inputs([DATA / "captures" / "pipeline"])
    host = load_host_et(next(f for f in files if f.name == "rank0.host_et.json.gz"))
    kineto = load_kineto(next(f for f in files if f.name == "rank0.kineto.json.gz"))
    linked = link(host, kineto)
    assert linked.report.by_rule == {"rf_id": 1350}
    # in Kineto the gloo:send/recv events end after their c10d::send/recv_ parent:
    # unlinked, with the reason
    assert linked.report.unmatched == {"outside its parent's time span": 4}
    assert linked.report.examples[0] == (
        "outside its parent's time span: host op 283 'gloo:send' (tid 1)"
    )
    for i, op in linked.host_of.items():
        assert kineto.rf[i] == op.rf_id and kineto.name_of(i) == op.name
