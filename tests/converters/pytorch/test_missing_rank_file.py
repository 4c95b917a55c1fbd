"""A job whose traces come without one rank's file (lost, or left out of the folder):
the conversion says which ranks have no trace, and the set then simulates only as the
stated subset."""

from __future__ import annotations

from pathlib import Path

import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.run import SimOptions, simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_batched_p2p import _rank_trace


def _rank(rank: int) -> Snippet:
    k = _rank_trace(rank, 4)  # distributedInfo: world_size 4
    k.step(1, 1000.0, 300.0)
    k.launch("gemm", 1007.0, 7, 1015.0, 100.0)
    return k


def test_a_rank_without_a_trace_is_named(tmp_path: Path) -> None:
    """Ranks 0, 1 and 3 of a 4-rank job: converted before without a word (exit 0, no
    warning); now a problem names rank 2 and the way to simulate the ranks given."""
    paths = [_rank(r).write(tmp_path / f"rank{r}.json.gz") for r in (0, 1, 3)]
    result = convert(paths, tmp_path / "et", prefix="t")
    assert [s.rank for s in result.ranks] == [0, 1, 3]
    assert result.problems == [
        "no trace for 1 of the job's 4 ranks (2): the set holds ranks 0-1, 3 only; "
        "simulate it with --ranks or --allow-partial"
    ]
    run = simulate(tmp_path / "et" / "t", SimOptions(ranks=frozenset({0, 1, 3})))
    assert [r.rank for r in run.ranks] == [0, 1, 3]


@pytest.mark.parametrize("ranks", [(0, 1, 2, 3), (0,)], ids=["whole", "one_of_4"])
def test_a_whole_set_has_no_such_problem_and_one_rank_says_so(
    tmp_path: Path, ranks: tuple[int, ...]
) -> None:
    paths = [_rank(r).write(tmp_path / f"rank{r}.json.gz") for r in ranks]
    problems = convert(paths, tmp_path / "et", prefix="t").problems
    assert problems == (
        []
        if len(ranks) == 4
        else [
            "no trace for 3 of the job's 4 ranks (1-3): the set holds ranks 0 only; "
            "simulate it with --ranks or --allow-partial"
        ]
    )
