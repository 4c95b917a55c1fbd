"""The interval bookkeeping behind the export's delay nodes: each idle moment counted once."""

from __future__ import annotations

from lumos.converters.astra_sim.cpu_gaps import Covered


def test_free_time_is_counted_once_and_then_covered() -> None:
    covered = Covered([(10, 20), (30, 40), (15, 25)])  # busy 10-25, 30-40
    assert covered.free_then_cover(0, 50) == 50 - 15 - 10
    assert covered.free_then_cover(5, 45) == 0  # all of it handed out already
    assert covered.free_then_cover(50, 60) == 10  # touching: merged, not lost
    assert (covered.begins, covered.ends) == ([0], [60])


def test_ranges_outside_or_between_busy_intervals() -> None:
    covered = Covered([(100, 200), (400, 500)])
    assert covered.free_then_cover(250, 300) == 50  # between the two, nothing touched
    assert covered.free_then_cover(150, 450) == 50 + 100  # 200-250 and 300-400
    assert covered.free_then_cover(600, 600) == 0  # empty range
    assert covered.free_then_cover(0, 50) == 50  # before everything
    assert (covered.begins, covered.ends) == ([0, 100], [50, 500])
