"""`sweep()`: enumerate a space, estimate every plan not yet in the journal, rank them.

The journal (`<output>.journal.jsonl` beside the results table) is the source of truth:
each finished plan is appended the moment it returns, so a killed sweep resumes where
it stopped; the table and plots are rebuilt from the journal at the end of every run.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from lumos import __version__
from lumos.errors import ConfigError, LumosError
from lumos.hwconfigs.load import load_system
from lumos.limits import MAX_WORKERS
from lumos.outputs import output_target
from lumos.simulator.sweep.engines import Work, refuse_in_worker_start, run_local, run_ray
from lumos.simulator.sweep.evaluate import evaluate
from lumos.simulator.sweep.journal import Journal
from lumos.simulator.sweep.space import SweepSpace, enumerate_plans, plan_key
from lumos.simulator.sweep.table import ranked, write_table
from lumos.simulator.sweep.trace_grid import COLUMNS as TRACE_COLUMNS
from lumos.simulator.sweep.trace_grid import TraceSpace, edit_points, evaluate_edit, rank_edits
from lumos.simulator.workload.spec import load_model

Progress = Callable[[int, int], None]


@dataclass(slots=True)
class SweepResult:
    """What a sweep found: ranked rows, what was skipped, and where the outputs are."""

    space: SweepSpace | TraceSpace
    rows: list[dict[str, Any]]
    grid_points: int
    rejected: Counter[str]
    resumed: int
    ran: int
    failed: int
    table: Path
    journal: Path
    wall_s: float
    plots: list[Path] = field(default_factory=list)

    @property
    def best(self) -> dict[str, Any] | None:
        return next((r for r in self.rows if not r.get("error") and r.get("fits", True)), None)

    def to_json(self, top: int | None = None) -> dict[str, Any]:
        rows = self.rows if top is None else self.rows[:top]
        return {
            "space": self.space.to_json(),
            "grid_points": self.grid_points,
            "valid_plans": len(self.rows),
            "rejected": dict(sorted(self.rejected.items())),
            "resumed": self.resumed,
            "estimated": self.ran,
            "failed": self.failed,
            "table": str(self.table),
            "plans": rows,
            "timing": {"wall_s": round(self.wall_s, 3)},
        }


def journal_path(table: Path) -> Path:
    return table.with_name(table.name + ".journal.jsonl")


def check_table(output: Path, force: bool) -> None:
    """The overwrite rule of a sweep's table, checked before any plan runs: a file in the
    way is replaced only when it is this sweep's table (its journal beside it) or with
    `force`. Raises OutputError (a folder or device in the way), LumosError (a refusal)."""
    output_target(output)
    if output.exists() and not journal_path(output).exists() and not force:
        raise LumosError(
            f"{output}: exists and has no sweep journal beside it ({journal_path(output).name}),"
            " so no sweep wrote it; pass --force to replace it"
        )


def run_journaled(
    points: list[dict[str, Any]],
    identity: dict[str, Any],
    output: Path,
    *,
    executor: str,
    workers: int,
    ray_address: str | None,
    progress: Progress | None,
    work: Work,
    force: bool = False,
) -> tuple[list[dict[str, Any]], int, int]:
    """Run the points not yet in `output`'s journal; (rows of these points, resumed, ran).

    Raises ConfigError for a journal of another sweep or an unknown executor, or when
    called by a worker process importing an unguarded script (engines.GUARD);
    ResourceLimitError past `LUMOS_MAX_WORKERS` workers.
    """
    refuse_in_worker_start()
    MAX_WORKERS.check(workers, "sweep: --workers")
    check_table(output, force)
    journal = Journal(journal_path(output), {"space": identity, "lumos": __version__})
    todo = [p for p in points if p["key"] not in journal.done]
    resumed = len(points) - len(todo)
    if executor == "local":
        results = run_local(todo, work, workers)
    elif executor == "ray":
        results = run_ray(todo, work, workers, ray_address)
    else:
        raise ConfigError(f"unknown executor {executor!r} (local or ray)")
    ran = 0
    for _, row in results:
        journal.record(row)
        ran += 1
        if progress:
            progress(resumed + ran, len(points))
    keys = {p["key"] for p in points}
    return [r for k, r in journal.done.items() if k in keys], resumed, ran


def sweep(
    space: SweepSpace,
    output: str | Path,
    *,
    executor: str = "local",
    workers: int = 1,
    ray_address: str | None = None,
    progress: Progress | None = None,
    simulate_infeasible: bool = False,
    work: Work = evaluate,
    force: bool = False,
) -> SweepResult:
    """Estimate every valid plan of `space`; write the ranked table to `output`.

    Plans that do not fit in memory are sized but not simulated unless
    `simulate_infeasible`; a file at `output` that no sweep wrote is replaced only with
    `force`. Raises ConfigError for an unknown model/hardware/option, a
    grid without one valid plan, a journal of another sweep, or an unknown executor; MissingExtraError for Ray or
    Parquet without their extras.
    """
    t0 = time.perf_counter()
    output = Path(output)
    model = load_model(space.model)
    system = load_system(space.hw)
    if "fp8" in [p.lower() for p in space.precision] and not system.gpu.peak_fp8_tflops:
        raise ConfigError(
            f"sweep: --precision fp8 on {system.gpu.name}, which has no FP8 tensor cores"
        )
    found = enumerate_plans(space, model, system.gpus_per_node)
    if not found.plans:
        reasons = "; ".join(f"{k}: {v}" for k, v in sorted(found.rejected.items()))
        raise ConfigError(
            f"sweep: none of the {found.grid_points} grid points is a valid plan of "
            f"{space.model} on {space.gpus} GPUs ({reasons})"
        )
    points = [
        {
            "key": plan_key(p),
            "model": space.model,
            "hw": space.hw,
            "gpus": space.gpus,
            "plan": p.to_dict(),
            "simulate_infeasible": simulate_infeasible,
        }
        for p in found.plans
    ]
    identity = {**space.to_json(), "simulate_infeasible": simulate_infeasible}
    rows, resumed, ran = run_journaled(
        points,
        identity,
        output,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        progress=progress,
        work=work,
        force=force,
    )
    rows = ranked(rows)
    write_table(rows, output)
    return SweepResult(
        space=space,
        rows=rows,
        grid_points=found.grid_points,
        rejected=found.rejected,
        resumed=resumed,
        ran=ran,
        failed=sum(1 for r in rows if r.get("error")),
        table=output,
        journal=journal_path(output),
        wall_s=time.perf_counter() - t0,
    )


def sweep_trace(
    space: TraceSpace,
    output: str | Path,
    *,
    executor: str = "local",
    workers: int = 1,
    ray_address: str | None = None,
    progress: Progress | None = None,
    force: bool = False,
) -> SweepResult:
    """Simulate every what-if edit of `space`'s grid on its trace; rank by step time.

    Raises ConfigError as `sweep` does; an edit the trace cannot take is an error row.
    """
    t0 = time.perf_counter()
    output = Path(output)
    points = edit_points(space)
    rows, resumed, ran = run_journaled(
        points,
        space.to_json(),
        output,
        executor=executor,
        workers=workers,
        ray_address=ray_address,
        progress=progress,
        work=evaluate_edit,
        force=force,
    )
    rows = rank_edits(rows)
    write_table(rows, output, TRACE_COLUMNS)
    return SweepResult(
        space=space,
        rows=rows,
        grid_points=len(points),
        rejected=Counter(),
        resumed=resumed,
        ran=ran,
        failed=sum(1 for r in rows if r.get("error")),
        table=output,
        journal=journal_path(output),
        wall_s=time.perf_counter() - t0,
    )
