"""Kernels queued on one stream recorded overlapping by a few µs: CUPTI's start and end
stamps of back-to-back kernels disagree (clock skew), so a kernel seems to start before
its stream predecessor ended. A stream runs one op at a time; replayed in order, each
overlap was added to the stream's time once more."""

from __future__ import annotations

from pathlib import Path

from lumos.converters.chakra.attrs import attrs_dict
from lumos.converters.chakra.stream import read_et
from lumos.converters.pytorch.convert import convert
from lumos.simulator.report.compare import compare
from lumos.simulator.report.measured import read_measured
from lumos.simulator.run import simulate
from tests.converters.pytorch.kineto_snippet import Snippet


def _skewed_step() -> Snippet:
    """400 µs: k1 (1020-1120 µs), k2 recorded from 1117 µs (3 µs into k1), k3 from 1215 µs
    (2 µs into k2), then a device sync that returns at 1267 µs."""
    k = Snippet()
    k.step(1, 1000.0, 400.0)
    k.launch("k1", 1010.0, 7, 1020.0, 100.0)
    k.launch("k2", 1016.0, 7, 1117.0, 100.0)
    k.launch("k3", 1022.0, 7, 1215.0, 50.0)
    k.runtime("cudaDeviceSynchronize", 1030.0, 237.0)
    k.op("aten::add", 1270.0, 10.0)
    return k


def test_kernels_overlapping_on_one_stream_end_where_the_next_starts(tmp_path: Path) -> None:
    """Replay read +1.25 % (the 3 + 2 µs of overlap run again); now each overlapped kernel
    ends where the next starts (k1 97 µs, k2 98 µs), 0.00 %, and the summary counts them."""
    result = convert([_skewed_step().write(tmp_path / "rank0.json.gz")], tmp_path, prefix="t")
    records = result.ranks[0].gpu_records
    assert (records["overlapping"], records["overlap_max_ns"]) == (2, 3000)
    durs = {n.name: attrs_dict(n)["dur_ns"] for n in read_et(result.ranks[0].path)[1]}
    assert (durs["k1"], durs["k2"], durs["k3"]) == (97_000, 98_000, 50_000)
    row = compare(simulate(tmp_path / "t"), read_measured(tmp_path / "t")).ranks[0]
    assert row.measured_ns == 400_000
    assert row.error_pct is not None and abs(row.error_pct) < 0.005
