"""Reports on real simulated runs: ASTRA-sim microbenchmarks, a SEND/RECV ring, ResNet DP.

Numbers that belong to the network model are taken from the pricer, not hard-coded here;
the report's own invariants (parts sum to the step, critical path = step time, one
timeline event per task) are asserted exactly.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import pytest

from lumos.errors import ValidationError
from lumos.simulator.network.astra import AstraPricer
from lumos.simulator.report.critical_path import critical_path
from lumos.simulator.report.summary import build_report
from lumos.simulator.report.timeline import write_timeline
from lumos.simulator.result import SimResult
from lumos.simulator.run import Mode, SimOptions, simulate
from tests.conftest import fixture_path

EXAMPLES = "astra-sim/examples/"


def hgx_pricer() -> AstraPricer:
    return AstraPricer.from_files(
        fixture_path(EXAMPLES + "system/native_collectives/HGX-H100-validated.json"),
        fixture_path(EXAMPLES + "network/analytical/HGX-H100-validated.yml"),
    )


def astra_run(relative: str) -> tuple[SimResult, AstraPricer]:
    pricer = hgx_pricer()
    return simulate(fixture_path(relative), SimOptions(mode=Mode.ASTRA, pricer=pricer)), pricer


def assert_report_invariants(result: SimResult) -> None:
    report = build_report(result)
    for rank in report.ranks:
        assert sum(rank.breakdown.parts().values()) == rank.iteration_time_ns
    path = report.critical_path
    assert path is not None
    assert path.total_ns == result.iteration_time_ns == sum(s.dur_ns for s in path.steps)
    assert all(a.end_ns == b.start_ns for a, b in zip(path.steps, path.steps[1:], strict=False))


def test_all_reduce_microbenchmark_is_all_exposed_communication(tmp_path: Path) -> None:
    result, pricer = astra_run(EXAMPLES + "workload/microbenchmarks/all_reduce/8npus_1MB")
    expected = pricer.collective_ns(0, 1 << 20, list(range(8)))
    assert result.iteration_time_ns == expected > 0
    report = build_report(result)
    assert len(report.ranks) == 8
    for rank in report.ranks:
        assert rank.breakdown.exposed_comm_ns == rank.iteration_time_ns == expected
        assert rank.breakdown.exposed_compute_ns == rank.breakdown.idle_ns == 0
    path = report.critical_path
    assert path is not None and path.total_ns == expected
    assert [(c.name, c.total_ns) for c in path.by_category()] == [("communication", expected)]
    out = orjson.loads(orjson.dumps(report.to_dict()))
    assert out["iteration_time_ns"] == expected
    assert [r["iteration_time_ns"] for r in out["ranks"]] == [expected] * 8

    trace_file = tmp_path / "ar.json"
    assert write_timeline(result, trace_file) == 8
    events = [e for e in orjson.loads(trace_file.read_bytes())["traceEvents"] if e["ph"] == "X"]
    assert sorted(e["pid"] for e in events) == list(range(8))
    assert {e["name"] for e in events} == {"all_reduce_8npus_1MB"}
    assert all(e["dur"] == expected / 1000 for e in events)


def test_send_recv_ring_report_invariants(tmp_path: Path) -> None:
    result, _ = astra_run(EXAMPLES + "system/custom_collectives/custom_ring_allreduce_8npus_1MB")
    assert_report_invariants(result)
    report = build_report(result)
    b = report.ranks[0].breakdown
    assert b.exposed_compute_ns > 0 and b.exposed_comm_ns > 0
    path = report.critical_path
    assert path is not None
    cats = {c.name for c in path.by_category()}
    assert {"gpu compute", "communication"} <= cats
    n_tasks = sum(len(r.tasks) for r in result.ranks)
    count = write_timeline(result, tmp_path / "ring.json.gz", flows=True)
    assert 0 < count <= n_tasks == 280


def test_resnet_64_ranks_refused_in_astra_mode() -> None:
    """resnet_dp.tar as shipped has collectives without comm_size: the real binary never
    finishes a rank, so astra mode refuses it with the export pre-flight's rule."""
    tar = fixture_path("astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar")
    with pytest.raises(ValidationError, match="no comm_size"):
        simulate(tar, SimOptions(mode=Mode.ASTRA, pricer=hgx_pricer()))


@pytest.mark.parametrize("mode", [Mode.REPLAY])
def test_resnet_64_ranks(mode: Mode, tmp_path: Path) -> None:
    tar = fixture_path("astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar")
    result = simulate(tar, SimOptions(mode=mode))
    assert len(result.ranks) == 64
    assert_report_invariants(result)
    path = critical_path(result)
    assert len(path.steps) >= 161  # the 161 compute nodes of one rank, plus communication
    assert write_timeline(result, tmp_path / "resnet.json") == 13_760
