"""What-ifs on a stream's first op held past its launch (`simulator.backlog`, replay
round 5 in `docs/accuracy.md`): with `relative_holds` (the what-if pipeline's choice) the
hold is a delay after the moment the op can start, capped at its recorded start, so an
edit that runs its dependencies earlier moves it earlier; replay keeps the stream busy
until the recorded start, as before."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np

from lumos.converters.pytorch.convert import convert
from lumos.simulator.graph import RankGraph
from lumos.simulator.load import load_graphs
from lumos.simulator.run import SimOptions, simulate
from tests.converters.pytorch.kineto_snippet import Snippet
from tests.converters.pytorch.test_blocking_copy import COPY, _copy_step
from tests.converters.pytorch.test_replay_patterns_round4 import (
    _hip_names,
    _kernel_before_its_peers_launch,
)


def _graphs(tmp_path: Path, make: Callable[[int], Snippet], ranks: int) -> list[RankGraph]:
    paths = [make(r).write(tmp_path / f"rank{r}.json.gz") for r in range(ranks)]
    convert(paths, tmp_path / "et", prefix="t")
    return load_graphs(tmp_path / "et" / "t")


def _edit(g: RankGraph, name: str, edit: Callable[[np.ndarray], np.ndarray]) -> None:
    rows = [i for i in range(len(g)) if g.name(i) == name]
    assert rows, name
    g.dur_ns = g.dur_ns.copy()
    g.dur_ns[rows] = edit(g.dur_ns[rows])


def _steps(graphs: list[RankGraph], relative: bool = True) -> list[int]:
    options = SimOptions(align_ranks=False, relative_holds=relative)
    return [r.iteration_time_ns for r in simulate(graphs, options).ranks]


def test_faster_host_moves_a_held_collective_earlier(tmp_path: Path) -> None:
    """Rank 1's all-reduce kernel started 2 µs after its launch returned (180 µs), first
    on its NCCL stream. With rank 1's 150 µs host op at 75 µs, the kernel was held at its
    recorded start (both ranks 320 µs); now it starts 2 µs after its launch, 75 µs
    earlier, and rank 0's kernel, waiting for it, ends with it: 255 µs on both ranks."""
    graphs = _graphs(tmp_path, _kernel_before_its_peers_launch, 2)
    assert _steps(graphs) == [320_000, 320_000]
    _edit(graphs[1], "aten::slow_host", lambda d: d - 75_000)
    assert _steps(graphs) == [255_000, 255_000]
    assert _steps(graphs, relative=False) == [320_000, 320_000]  # replay's pin, as before


def test_halved_gemm_moves_the_side_stream_it_held(tmp_path: Path) -> None:
    """HIP: the side stream's first kernel waits (event) for the 100 µs GEMM and starts
    2 µs after it, its hold, written by the converter as its `gap_ns`. Halving the GEMM
    left it at its recorded start (400 µs); now the step is 50 µs shorter."""
    graphs = _graphs(tmp_path, _hip_names, 1)
    g = graphs[0]
    side = next(i for i in range(len(g)) if g.name(i) == "side_kernel")
    assert g.gap_ns[side] == 2_000
    assert _steps(graphs) == [400_000]
    _edit(g, "Cijk_gemm", lambda d: d // 2)
    assert _steps(graphs) == [350_000]
    assert _steps(graphs, relative=False) == [400_000]


def test_slower_host_absorbs_the_hold(tmp_path: Path) -> None:
    """Rank 1's host 30 µs slower: its launch returns at 210 µs, past the kernel's
    recorded start (182 µs), and the kernel starts then, without its 2 µs hold on top
    (as before this change): both ranks 348 µs."""
    graphs = _graphs(tmp_path, _kernel_before_its_peers_launch, 2)
    _edit(graphs[1], "aten::slow_host", lambda d: d + 30_000)
    assert _steps(graphs) == [348_000, 348_000]


def test_longer_blocking_copy_moves_its_call_end(tmp_path: Path) -> None:
    """A synchronous `cudaMemcpy` whose 3 µs copy runs behind the GEMM, returning 4 µs
    after it: the copy 10x longer (30 µs) ends the call, and the step, 27 µs later
    (427 µs). It stayed at 400 µs while the call's time after its copy was read from the
    ET's durations (a longer copy read as a call that did not wait); the converter now
    writes it as recorded (`copy_after_ns`, replay round 6)."""
    graphs = [_graphs(tmp_path, lambda r: _copy_step(1042.0, 1222.0), 1)[0]]
    assert list(graphs[0].copy_after.values()) == [4_000]
    assert _steps(graphs) == [400_000]
    _edit(graphs[0], COPY, lambda d: d * 10)
    assert _steps(graphs) == [427_000]
