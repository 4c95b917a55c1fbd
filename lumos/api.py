"""The Python facade: the CLI's jobs as functions returning typed results.

    import lumos
    conv = lumos.convert(["run/"], "ets/")              # Conversion
    sim = lumos.simulate("ets/", hw="h100")              # Simulation
    sim.step_ns, sim.to_pandas()                         # per-rank breakdown table
    cmp = lumos.compare("ets/")                          # Comparison
    bundle = lumos.export_astra_sim("ets/", "bundle/", hw="h100")   # Export
    est = lumos.estimate("gpt3-175b", tp=8, pp=8, dp=4, gbs=1024, hw="h100")  # no trace
    pred = lumos.whatif("ets/", layers=8, dp=4)          # WhatIfPrediction (api_whatif)

Every result has `.to_json()` (exactly the `result` part of the command's `--json`,
schema in `lumos/schemas/`) and, with the `pandas` extra, `.to_pandas()`. The options
are the CLI's, spelled as keyword arguments. Errors are the typed `lumos.errors`.
Heavy modules load on first call, so `import lumos` stays light.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from lumos.api_whatif import whatif as whatif
from lumos.errors import MissingExtraError, SimulationError

if TYPE_CHECKING:
    import pandas

    from lumos.converters.astra_sim.export import ExportSummary
    from lumos.converters.pytorch.convert import ConvertResult
    from lumos.simulator.report.compare import Comparison as _Comparison
    from lumos.simulator.report.measured import MeasuredRank
    from lumos.simulator.report.summary import Report
    from lumos.simulator.result import SimResult
    from lumos.simulator.workload.step import EstimateResult

#: wall-clock entries of `SimResult.stats`: timings, not results
_TIMING_KEYS = ("load_s", "plan_s", "run_s")


def _pandas() -> Any:
    """The pandas module, or MissingExtraError naming the extra."""
    try:
        import pandas
    except ImportError as exc:
        raise MissingExtraError("pandas", "pandas") from exc
    return pandas


@dataclass(frozen=True, slots=True)
class Conversion:
    """What `convert` wrote: one summary per rank (`raw.ranks`) and cross-rank problems."""

    raw: ConvertResult
    output: Path

    def to_json(self) -> dict[str, Any]:
        """The `result` of `lumos convert --json`."""
        return self.raw.to_json()

    def to_pandas(self) -> pandas.DataFrame:
        """One row per rank: nodes, link rate, measured step, output path."""
        rows = []
        for r in self.raw.ranks:
            row = {k: v for k, v in r.to_json().items() if k not in ("link", "sources")}
            row["link_rate"] = r.link.rate if r.link else None
            rows.append(row)
        return _pandas().DataFrame(rows).set_index("rank")


@dataclass(frozen=True, slots=True)
class Simulation:
    """A simulated step: the raw `SimResult` and its `Report` (breakdown, critical path)."""

    raw: SimResult
    report: Report

    @property
    def step_ns(self) -> int:
        """Simulated step time: last end over ranks minus first start."""
        return self.raw.iteration_time_ns

    @property
    def notes(self) -> list[str]:
        """What the numbers rest on (what --hw re-priced, durations that were missing)."""
        return list(self.raw.notes)

    def timings(self) -> dict[str, float]:
        """Wall-clock seconds of the phases (load, plan, run)."""
        return {k: float(self.raw.stats[k]) for k in _TIMING_KEYS if k in self.raw.stats}

    def to_json(self) -> dict[str, Any]:
        """The `result` of `lumos simulate --json` (timings apart: `timings()`)."""
        report = self.report.to_dict()
        ranks = [
            {**sim, **rep}
            for sim, rep in zip(self.raw.to_json()["ranks"], report["ranks"], strict=True)
        ]
        out: dict[str, Any] = {
            "mode": self.raw.mode,
            "iteration_time_ns": self.raw.iteration_time_ns,
            "slowest_rank": self.report.slowest_rank if self.raw.ranks else None,
            "aligned": self.raw.aligned,
            "align_note": self.raw.align_note,
            "notes": list(self.raw.notes),
            "ranks": ranks,
        }
        if "critical_path" in report:
            out["critical_path"] = report["critical_path"]
        out["stats"] = {k: v for k, v in self.raw.stats.items() if k not in _TIMING_KEYS}
        return out

    def to_pandas(self, table: str = "ranks") -> pandas.DataFrame:
        """`table="ranks"`: step and breakdown per rank; `"ops"`: one row per simulated
        node (rank, name, processor, start/end/wait in ns; none without timelines)."""
        pd = _pandas()
        if table == "ranks":
            rows = []
            for r in self.to_json()["ranks"]:
                parts = {k: v for k, v in r.pop("breakdown").items() if k != "basis"}
                rows.append(r | parts)
            return pd.DataFrame(rows).set_index("rank")
        if table == "ops" and self.raw.timelines:
            frames = []
            for r in self.raw.ranks:
                if r.folded_from is not None:
                    continue
                t = r.tasks
                frames.append(
                    pd.DataFrame(
                        {
                            "rank": r.rank,
                            "node_id": t.node_id,
                            "name": [t.names[i] for i in t.name_idx.tolist()],
                            "processor": [r.processors[p].name for p in t.proc.tolist()],
                            "start_ns": t.start_ns,
                            "end_ns": t.end_ns,
                            "wait_ns": t.wait_ns,
                            "is_comm": t.is_comm,
                        }
                    )
                )
            return pd.concat(frames, ignore_index=True)
        raise ValueError(f"table must be 'ranks' or 'ops' (a run with timelines), not {table!r}")


@dataclass(frozen=True, slots=True)
class Comparison:
    """Simulated vs measured, per rank and per stream/thread."""

    raw: _Comparison
    simulation: Simulation
    measured: Sequence[MeasuredRank]

    @property
    def error_pct(self) -> float | None:
        """Signed error of the overall step (see `raw.overall_label`)."""
        return self.raw.error_pct

    def write_timeline(self, path: str | Path) -> int:
        """Measured and simulated steps side by side in one Perfetto file (one process
        each); returns the number of slices."""
        from lumos.simulator.report.side_by_side import write_comparison_timeline

        return write_comparison_timeline(self.simulation.raw, self.measured, path)

    def to_json(self) -> dict[str, Any]:
        """The `result` of `lumos compare --json`."""
        return self.raw.to_dict() | {"notes": self.simulation.notes}

    def to_pandas(self) -> pandas.DataFrame:
        """One row per rank: measured, simulated, error."""
        rows = [
            {k: v for k, v in r.items() if k != "processors"} for r in self.raw.to_dict()["ranks"]
        ]
        return _pandas().DataFrame(rows).set_index("rank")


@dataclass(frozen=True, slots=True)
class Export:
    """An ASTRA-sim bundle that passed the pre-flight."""

    raw: ExportSummary

    @property
    def bundle(self) -> Path:
        return Path(self.raw.bundle)

    def to_json(self) -> dict[str, Any]:
        """The `result` of `lumos export astra-sim --json`."""
        return self.raw.to_dict()

    def to_pandas(self) -> pandas.DataFrame:
        """One row per exported-node kind: kept and dropped counts."""
        kinds = sorted({*self.raw.kept, *self.raw.dropped})
        rows = [
            {"kind": k, "kept": self.raw.kept.get(k, 0), "dropped": self.raw.dropped.get(k, 0)}
            for k in kinds
        ]
        return _pandas().DataFrame(rows).set_index("kind")


def convert(
    inputs: str | Path | Sequence[str | Path],
    output: str | Path,
    *,
    prefix: str = "trace",
    step: int | str | None = None,
    jobs: int = 1,
    min_link_rate: float | None = None,
    allow_host_only: bool = False,
) -> Conversion:
    """Host ETs and/or Kineto traces of every rank -> `<output>/<prefix>.<rank>.et`.

    `step`: the ProfilerStep to convert (a number, "median" for the typical step of a
    multi-step capture, default the last complete one).

    Raises LinkError (host ET and Kineto from different runs: below `min_link_rate`,
    default 0.5), TraceFormatError (unreadable or wrong kind of input).
    """
    from lumos.converters.pytorch.convert import MIN_LINK_RATE
    from lumos.converters.pytorch.convert import convert as _convert

    paths = [inputs] if isinstance(inputs, (str, Path)) else list(inputs)
    out = Path(output)
    raw = _convert(
        paths,
        out,
        prefix=prefix,
        step=step,
        jobs=jobs,
        min_link_rate=MIN_LINK_RATE if min_link_rate is None else min_link_rate,
        allow_host_only=allow_host_only,
    )
    return Conversion(raw, out)


def simulate(
    trace: str | Path,
    *,
    hw: str | None = None,
    mode: str | None = None,
    astra_sim_system: str | Path | None = None,
    astra_sim_network: str | Path | None = None,
    comm_groups: str | Path | None = None,
    fold: bool = False,
    align_ranks: bool | None = None,
    repair: bool = False,
    estimate_missing: bool = False,
    ablate_sync: bool = False,
    allow_partial: bool = False,
    timelines: bool = True,
    ranks: Sequence[int] | None = None,
) -> Simulation:
    """Simulate every rank of `trace` (folder, prefix, file or tar of .et files).

    `mode`: "replay" (recorded times), "model" (communication priced on `hw`), "astra"
    (ASTRA-sim compatible); default astra with ASTRA-sim configs, model with `hw`, else
    replay. The files must form the whole job unless `allow_partial`, or `ranks` picks a
    subset (docs/simulate.md). `timelines=False`: steps and breakdowns only. Raises
    SimulationError, ValidationError, ConfigError, TraceFormatError, RankSetError."""
    from lumos.api_pricing import cost_model, pricer
    from lumos.converters.astra_sim.config_files import load_pg_ranks
    from lumos.converters.chakra.files import find_et_sources
    from lumos.converters.chakra.rankset import check_rank_set
    from lumos.simulator.report.summary import build_report
    from lumos.simulator.run import Mode, SimOptions
    from lumos.simulator.run import simulate as _simulate

    sources = find_et_sources(trace)
    subset = None if ranks is None else frozenset(ranks)
    partial = check_rank_set(sources, allow_partial=allow_partial, ranks=subset)  # before configs
    if mode is None:
        mode = "astra" if astra_sim_system else "model" if hw else "replay"
    options = SimOptions(
        mode=Mode(mode),
        pricer=pricer(hw, astra_sim_system, astra_sim_network, len(sources)),
        fold=fold,
        ablate_sync=ablate_sync,
        comm_groups=load_pg_ranks(comm_groups) if comm_groups else None,
        repair=repair,
        align_ranks=align_ranks,
        cost_model=cost_model(hw),
        estimate_missing=estimate_missing,
        timelines=timelines,
        ranks=subset,
        allow_partial=allow_partial,
    )
    try:
        result = _simulate(trace, options, checked=partial)
    except OverflowError:
        raise SimulationError(
            "a simulated time exceeds 64-bit nanoseconds (292 years): check the bandwidths "
            "and latencies of the hardware or ASTRA-sim config"
        ) from None
    return Simulation(result, build_report(result))


def compare(
    trace: str | Path,
    *,
    hw: str | None = None,
    align_ranks: bool = True,
    repair: bool = False,
    ablate_sync: bool = False,
    allow_partial: bool = False,
) -> Comparison:
    """Replay `trace` and put simulated and measured times side by side (`hw` prices only
    collectives that have no recorded time). Raises as `simulate`."""
    from lumos.simulator.report.compare import compare as _compare
    from lumos.simulator.report.measured import read_measured

    sim = simulate(
        trace,
        hw=hw,
        mode="replay",
        align_ranks=align_ranks,
        repair=repair,
        ablate_sync=ablate_sync,
        allow_partial=allow_partial,
    )
    measured = read_measured(trace)
    return Comparison(_compare(sim.raw, measured), sim, measured)


def export_astra_sim(
    trace: str | Path,
    output: str | Path,
    *,
    hw: str | None = None,
    astra_sim_system: str | Path | None = None,
    astra_sim_network: str | Path | None = None,
    comm_groups: str | Path | None = None,
    cpu_gaps: str = "delay",
    strict: bool = False,
    replay_unsupported_comms: bool = False,
    backend: str = "congestion-unaware",
    force: bool = False,
    allow_partial: bool = False,
) -> Export:
    """Write an ASTRA-sim bundle for `trace` into `output` (pre-flighted; nothing is
    written on a problem). `backend`: the analytical backend the bundle is for
    ("congestion-unaware" or "congestion-aware"). Raises ExportError, ConfigError,
    TraceFormatError, RankSetError (a partial set, unless `allow_partial`)."""
    from lumos.converters.astra_sim.export import ExportRequest
    from lumos.converters.astra_sim.export import export_astra_sim as _export
    from lumos.converters.astra_sim.workload import CpuGaps, ExportOptions
    from lumos.converters.chakra.files import find_et_sources
    from lumos.converters.chakra.rankset import check_rank_set

    def path(value: str | Path | None) -> Path | None:
        return None if value is None else Path(value)

    check_rank_set(find_et_sources(trace), allow_partial=allow_partial)
    request = ExportRequest(
        target=str(trace),
        out_dir=Path(output),
        hw=hw,
        system_file=path(astra_sim_system),
        network_file=path(astra_sim_network),
        comm_groups_file=path(comm_groups),
        options=ExportOptions(
            cpu_gaps=CpuGaps(cpu_gaps),
            strict=strict,
            replay_unsupported_comms=replay_unsupported_comms,
        ),
        force=force,
        backend=backend,
    )
    return Export(_export(request))


def estimate(
    model: str | Path,
    *,
    hw: str | Path = "h100",
    gpus: int | None = None,
    output: str | Path | None = None,
    all_ranks: bool = False,
    force: bool = False,
    exact: bool = False,
    **plan: Any,
) -> EstimateResult:
    """One training step of `model` (built-in name, spec YAML or config.json) on `hw`, no trace.

    `plan`: `ParallelPlan` fields (tp, pp, dp, mbs, gbs, seq, zero, precision, lora_rank, ...);
    the rest as `lumos estimate` (-o = `output`); `to_json()` is its --json. Raises ConfigError (unknown model, option,
    hardware; a plan that cannot run), LumosError (`output` holds another set, no `force`).
    """
    from lumos.simulator.workload.plan import ParallelPlan
    from lumos.simulator.workload.spec import load_model
    from lumos.simulator.workload.step import estimate as _estimate

    spec = load_model(model)
    p = ParallelPlan.build(spec, **plan)
    return _estimate(
        spec, p, hw, gpus=gpus, et_dir=output, force=force, all_ranks=all_ranks, exact=exact
    )
