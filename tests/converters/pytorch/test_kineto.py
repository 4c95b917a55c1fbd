"""Kineto loading: kept events by category, steps and distributed info."""

from __future__ import annotations

from collections import Counter

from lumos.converters.pytorch.json_stream import expand_inputs
from lumos.converters.pytorch.kineto import Kind, load_kineto, ns_array
from lumos.converters.pytorch.steps import choose_step, step_rows
from tests.conftest import fixture_path


def _dlrm_worker0():  # type: ignore[no-untyped-def]
    files = expand_inputs([fixture_path("param/et_replay/tests/inputs/dlrm_kineto.tar.gz")])
    return load_kineto(next(f for f in files if f.name.startswith("worker0_")))


def test_dlrm_event_counts_by_category() -> None:
    trace = _dlrm_worker0()
    assert len(trace) == 2459  # of 3290 events: flows, metadata and "Trace" dropped
    kinds = Counter(Kind(k).name for k in trace.kind.tolist())
    assert kinds == {"CPU_OP": 1633, "RUNTIME": 525, "GPU": 261, "ANNOTATION": 40}
    cats = Counter(trace.cats[c] for c in trace.cat.tolist())
    assert cats["kernel"] == 245 and cats["gpu_memcpy"] == 16
    assert trace.distributed == {"backend": "nccl", "rank": 0, "world_size": 8}
    assert trace.rank == 0 and trace.device_name == "Tesla V100-SXM2-32GB"
    nccl = [i for i in trace.args if "nccl" in trace.name_of(i)]
    assert nccl  # NCCL kernels keep their args
    gpu = trace.kind == Kind.GPU
    assert (trace.tid[gpu] == 7).sum() > 0  # GPU events sit on their stream


def test_dlrm_profiler_step() -> None:
    trace = _dlrm_worker0()
    (row,) = step_rows(trace).tolist()
    assert trace.name_of(row) == "ProfilerStep#10"
    window = choose_step(trace, "dlrm")
    assert (window.name, window.end - window.start, window.measured) == (
        "ProfilerStep#10",
        14_455_000,
        True,
    )
    assert trace.event(row).dur == 14_455_000


def test_microsecond_floats_to_exact_nanoseconds() -> None:
    values = [1694128201435418, 1.5, 0.0005, 2.0015, 1694128201435418.25, 7]
    expected = [int(v) * 1000 + round((float(v) - int(v)) * 1000.0) for v in values]
    assert ns_array(values).tolist() == expected
    assert expected[0] == 1694128201435418000 and expected[4] == 1694128201435418250
    assert ns_array([3, 4]).tolist() == [3000, 4000]  # ints stay exact


def test_bool_times_and_times_past_int64_ns_are_not_numbers() -> None:
    """Audit finding: `"dur": true` became 1 µs (numpy takes a bool mixed with floats as
    1.0), and an integer `ts` of 1e17 µs wrapped past int64 ns into a negative time."""
    import pytest

    from lumos.converters.pytorch.kineto import BadNumber

    for values, at in (([20.0, True, 5.0], 1), ([3, False], 1), ([1, 10**17], 1)):
        with pytest.raises(BadNumber) as caught:
            ns_array(values)
        assert caught.value.index == at
    assert ns_array([1, 9 * 10**15]).tolist() == [1000, 9 * 10**18]  # the largest that fit
