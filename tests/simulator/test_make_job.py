"""`scripts/make_job.py`: a many-rank benchmark job from one real converted rank.

Every rank is the base with each duration jittered on its own, its collectives those of
all ranks through the metadata's process group (no per-node member lists), and the job
replays like the base."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from lumos.converters.pytorch.convert import convert
from lumos.simulator.graph import COLL
from lumos.simulator.load import load_graphs
from lumos.simulator.run import SimOptions, simulate
from tests.conftest import script_module

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def base(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Rank 0 of our gloo DDP capture, converted (all-reduces on CPU threads)."""
    out = tmp_path_factory.mktemp("ddp")
    convert([REPO / "tests" / "data" / "captures" / "ddp"], out, prefix="t")
    return out / "t.0.et"


def test_job_of_jittered_copies_with_world_collectives(base: Path, tmp_path: Path) -> None:
    nodes = script_module("make_job").make_job(base, tmp_path, 5, jitter=0.05, seed=1)
    (ref,) = load_graphs(base)
    graphs = load_graphs(tmp_path / "job")
    assert [g.rank for g in graphs] == [0, 1, 2, 3, 4]
    assert nodes == 5 * len(ref) == sum(len(g) for g in graphs)
    colls = np.flatnonzero(ref.type == COLL)
    assert len(colls) > 2
    for g in graphs:
        assert not g.pg_ranks  # members come from the metadata's group, once per rank
        assert g.groups == [(0, 1, 2, 3, 4)]
        np.testing.assert_array_equal(g.dep_idx, ref.dep_idx)
        timed = ref.dur_ns > 1000
        ratio = g.dur_ns[timed] / ref.dur_ns[timed]
        assert 0.95 - 1e-3 <= ratio.min() < 0.99 and 1.01 < ratio.max() <= 1.05 + 1e-3
    assert not np.array_equal(graphs[0].dur_ns, graphs[1].dur_ns)
    result = simulate(tmp_path / "job", SimOptions(timelines=False, fold=True))
    assert result.stats["ranks_simulated"] == 5  # jitter: no two ranks fold together
    base_step = simulate(base, SimOptions(allow_partial=True)).iteration_time_ns
    assert abs(result.iteration_time_ns - base_step) <= 0.1 * base_step
