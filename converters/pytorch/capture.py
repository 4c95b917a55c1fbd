"""Recording a matched host ET + Kineto pair per rank, and checking that a pair matches.

lumos links a PyTorch host execution trace to its Kineto trace by the record-function id
(`rf_id` in the ET, `"Record function id"` in Kineto), which both carry only when they come
from one profiler run over one window with `record_shapes=True`. `capture_steps` sets that
up: one `torch.profiler.profile` with an `ExecutionTraceObserver`, a `wait/warmup/active`
schedule (one profiled step by default; several let `representative_step` pick a typical
one and measure the steady step), CUDA sync events where a GPU is profiled, and both files written per rank as
`<out>/rank<r>.host_et.json.gz` and `<out>/rank<r>.kineto.json.gz`. torch is imported only
inside the functions that need it (extra `lumos[capture]`); `check_capture` reads the files
with orjson and needs no torch.
"""

from __future__ import annotations

import json
import statistics
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from lumos.converters.pytorch import json_stream
from lumos.errors import LinkError, LumosError, MissingExtraError, TraceFormatError

PROFILER_STEP_PREFIX = "ProfilerStep#"
RF_ID_KEY = "Record function id"


@dataclass(frozen=True, slots=True)
class CapturePaths:
    """Where one rank's pair of traces is written."""

    rank: int
    host_et: Path
    kineto: Path


def capture_paths(out_dir: str | Path, rank: int, *, compress: bool = True) -> CapturePaths:
    """The file names `capture_steps` uses for `rank` under `out_dir`."""
    suffix = ".json.gz" if compress else ".json"
    out = Path(out_dir)
    return CapturePaths(
        rank, out / f"rank{rank}.host_et{suffix}", out / f"rank{rank}.kineto{suffix}"
    )


def _torch() -> Any:
    try:
        import torch
    except ImportError as exc:
        raise MissingExtraError("torch", "capture") from exc
    return torch


def _current_rank(torch: Any) -> int:
    dist = torch.distributed
    if dist.is_available() and dist.is_initialized():
        return int(dist.get_rank())
    return 0


def _experimental_config(torch: Any) -> Any:
    """Profiler config that records CUDA sync events, or None where this torch lacks it."""
    try:
        return torch._C._profiler._ExperimentalConfig(enable_cuda_sync_events=True)
    except (AttributeError, TypeError):
        return None


class StepCapture:
    """Handle yielded by `capture_steps`: call `step()` once at the end of every step."""

    def __init__(
        self,
        profiler: Any,
        paths: CapturePaths,
        steps_needed: int,
        first_active: int = 0,
        metadata: dict[str, Any] | None = None,
    ) -> None:
        self._profiler = profiler
        self.paths = paths
        #: how many `step()` calls complete the captured window (wait + warmup + active).
        self.steps_needed = steps_needed
        self.steps_done = 0
        self._first_active = first_active
        self._metadata = metadata or {}

    @property
    def done(self) -> bool:
        """True once the profiled step has finished and further steps are not recorded."""
        return self.steps_done >= self.steps_needed

    def step(self) -> None:
        """Mark the end of one training step (advances the profiler schedule)."""
        self._profiler.step()
        self.steps_done += 1
        if self.steps_done == self._first_active:
            self.add_metadata()

    def add_metadata(self) -> None:
        """Add the capture's metadata to the Kineto trace (kept only while it records)."""
        for key, value in self._metadata.items():
            self._profiler.add_metadata_json(key, json.dumps(value))


@contextmanager
def capture_steps(
    out_dir: str | Path,
    *,
    wait: int = 0,
    warmup: int = 2,
    rank: int | None = None,
    cuda: bool | None = None,
    compress: bool = True,
    active: int = 1,
    metadata: dict[str, Any] | None = None,
) -> Iterator[StepCapture]:
    """Profile `active` training steps, after `wait` skipped and `warmup` warm-up steps.

    Writes this rank's host ET and Kineto trace of steps `wait + warmup` to
    `wait + warmup + active - 1` (Kineto names them `ProfilerStep#<n>`) when the block
    exits; `metadata` (JSON-able) is added to the Kineto trace's top level, e.g. the
    host's core count, which the trace does not record otherwise. `rank` defaults to the
    torch.distributed rank (0 when not initialised); `cuda` defaults to whether CUDA is
    available, and turns on CUDA activities and sync events.

    Raises MissingExtraError if torch is not installed, and LumosError if the block ends
    before `wait + warmup + active` calls to `step()` (the profiled window is incomplete).
    """
    torch = _torch()
    from torch.profiler import ExecutionTraceObserver, ProfilerActivity, profile, schedule

    use_cuda = torch.cuda.is_available() if cuda is None else cuda
    paths = capture_paths(
        out_dir, _current_rank(torch) if rank is None else rank, compress=compress
    )
    paths.host_et.parent.mkdir(parents=True, exist_ok=True)
    activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if use_cuda else [])
    observer = ExecutionTraceObserver().register_callback(str(paths.host_et))

    def export_kineto(prof: Any) -> None:
        prof.export_chrome_trace(str(paths.kineto))

    profiler = profile(
        activities=activities,
        record_shapes=True,
        with_stack=False,
        schedule=schedule(wait=wait, warmup=warmup, active=active, repeat=1),
        execution_trace_observer=observer,
        on_trace_ready=export_kineto,
        experimental_config=_experimental_config(torch) if use_cuda else None,
    )
    handle = StepCapture(profiler, paths, wait + warmup + active, wait + warmup, metadata)
    with profiler:
        if wait + warmup == 0:
            handle.add_metadata()
        yield handle
    if not handle.done:
        raise LumosError(
            f"capture into {paths.host_et.parent} ended after {handle.steps_done} step(s); "
            f"call step() {handle.steps_needed} times "
            f"(wait={wait} + warmup={warmup} + active={active})"
        )


@dataclass(frozen=True, slots=True)
class ProfilerStep:
    """One `ProfilerStep#N` annotation of a Kineto trace."""

    name: str
    start_ns: int
    dur_ns: int


@dataclass(frozen=True, slots=True)
class CaptureCheck:
    """What `check_capture` found in one rank's pair."""

    paths: CapturePaths
    schema: str
    et_nodes: int
    kineto_events: int
    et_rf_ids: int
    kineto_rf_ids: int
    #: ids in both files that name the same operator in both
    shared_rf_ids: int
    steps: tuple[ProfilerStep, ...]
    world_size: int | None

    @property
    def link_fraction(self) -> float:
        """Share of record-function ids present in both files (the smaller of the two sides)."""
        return self.shared_rf_ids / max(self.et_rf_ids, self.kineto_rf_ids, 1)


def load_json(path: str | Path) -> dict[str, Any]:
    """Read a whole JSON trace file, gzip or not.

    Raises TraceFormatError if the file is not a JSON object.
    """
    return json_stream.load_json(json_stream.TraceFile(str(path)))


def et_ops_by_rf_id(host_et: dict[str, Any]) -> dict[int, str]:
    """Operator name of each record-function id in a host ET (0, the roots' id, left out)."""
    ops = {}
    for node in host_et.get("nodes", []):
        for attr in node.get("attrs", []):
            if attr.get("name") == "rf_id" and attr.get("value"):
                ops[int(attr["value"])] = str(node.get("name", ""))
    return ops


def kineto_ops_by_rf_id(kineto: dict[str, Any]) -> dict[int, str]:
    """Event name of each record-function id the CPU events of a Kineto trace carry."""
    return {
        int(ev["args"][RF_ID_KEY]): str(ev.get("name", ""))
        for ev in kineto.get("traceEvents", [])
        if RF_ID_KEY in ev.get("args", {})
    }


def profiler_steps(kineto: dict[str, Any]) -> tuple[ProfilerStep, ...]:
    """The `ProfilerStep#N` spans of a Kineto trace, in time order."""
    steps = [
        ProfilerStep(ev["name"], round(ev["ts"] * 1000), round(ev["dur"] * 1000))
        for ev in kineto.get("traceEvents", [])
        if ev.get("ph") == "X" and str(ev.get("name", "")).startswith(PROFILER_STEP_PREFIX)
    ]
    return tuple(sorted(steps, key=lambda s: s.start_ns))


def check_capture(paths: CapturePaths, *, min_link: float = 0.99) -> CaptureCheck:
    """Check that a host ET and a Kineto trace come from one window of one run.

    A record-function id counts as shared when both files carry it on an op of the same
    name, and the ET's process id must be Kineto's. Raises TraceFormatError if the ET has no schema or Kineto no `ProfilerStep#N`,
    and LinkError if fewer than `min_link` of the ids are shared.
    """
    host_et, kineto = load_json(paths.host_et), load_json(paths.kineto)
    schema = str(host_et.get("schema", ""))
    if not schema:
        raise TraceFormatError(str(paths.host_et), "no 'schema' key: not a host execution trace")
    steps = profiler_steps(kineto)
    if not steps:
        raise TraceFormatError(str(paths.kineto), "no ProfilerStep#N: not a scheduled capture")
    et_pid = host_et.get("pid")
    k_pids = {ev.get("pid") for ev in kineto.get("traceEvents", []) if ev.get("ph") == "X"}
    if isinstance(et_pid, int) and et_pid not in k_pids:
        raise LinkError(
            f"rank {paths.rank}: host ET {paths.host_et} is from process {et_pid}, "
            f"Kineto {paths.kineto} is not; the pair comes from different processes or runs"
        )
    et_ops, k_ops = et_ops_by_rf_id(host_et), kineto_ops_by_rf_id(kineto)
    shared = sum(1 for rf_id, name in k_ops.items() if et_ops.get(rf_id) == name)
    dist = kineto.get("distributedInfo")
    check = CaptureCheck(
        paths=paths,
        schema=schema,
        et_nodes=len(host_et.get("nodes", [])),
        kineto_events=len(kineto.get("traceEvents", [])),
        et_rf_ids=len(et_ops),
        kineto_rf_ids=len(k_ops),
        shared_rf_ids=shared,
        steps=steps,
        world_size=int(dist["world_size"]) if isinstance(dist, dict) else None,
    )
    if check.link_fraction < min_link:
        raise LinkError(
            f"rank {paths.rank}: only {check.shared_rf_ids} of {check.et_rf_ids} ET rf_ids "
            f"and {check.kineto_rf_ids} Kineto record-function ids name the same op "
            f"({check.link_fraction:.1%} < {min_link:.0%}); were both captured in one window?"
        )
    return check


def representative_step(kineto_paths: Sequence[str | Path | json_stream.TraceFile]) -> int:
    """The number N of the typical profiled step of a job, the same for every rank.

    Each step's time is its slowest rank's `ProfilerStep#N`; the first profiled step is
    left out when there are at least three (the profiler starts inside it: ranks enter it
    skewed by the execution-trace observer's setup), and the step at the lower median of
    the rest is returned. Raises TraceFormatError if a trace has no ProfilerStep.
    """
    slowest: dict[int, int] = {}
    for path in kineto_paths:
        source = (
            path if isinstance(path, json_stream.TraceFile) else json_stream.TraceFile(str(path))
        )
        steps = profiler_steps(json_stream.load_json(source))
        if not steps:
            raise TraceFormatError(source.path, "no ProfilerStep#N: not a scheduled capture")
        for s in steps:
            n = int(s.name[len(PROFILER_STEP_PREFIX) :])
            slowest[n] = max(slowest.get(n, 0), s.dur_ns)
    numbers = sorted(slowest)
    if len(numbers) >= 3:
        numbers = numbers[1:]
    times = [slowest[n] for n in numbers]
    typical = statistics.median_low(times)
    return numbers[times.index(typical)]
