"""Loading a Kineto (PyTorch profiler Chrome-trace) file into compact per-event records.

Events are read in streamed batches and kept only if they matter for the execution
graph: host ops and annotations, CUDA/HIP runtime calls, GPU kernels/memcpy/memset and
CUDA sync events. Times become integer nanoseconds; names are interned; the argument
dict is kept only where later stages read it (NCCL kernels, sync events, comm ops).
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field
from typing import Any

from lumos.converters.json_stream import TraceFile, read_array_document

_intern = sys.intern


class Kind(enum.IntEnum):
    """What a kept Kineto event is."""

    CPU_OP = 0  # cpu_op
    ANNOTATION = 1  # user_annotation (incl. ProfilerStep#N, gloo:* ops)
    RUNTIME = 2  # cuda_runtime / cuda_driver / HIP runtime
    GPU = 3  # kernel, gpu_memcpy, gpu_memset
    SYNC = 4  # cuda_sync (what a sync call or wait-event waited on)


CATEGORIES: dict[str, Kind] = {
    "cpu_op": Kind.CPU_OP,
    "user_annotation": Kind.ANNOTATION,
    "cuda_runtime": Kind.RUNTIME,
    "cuda_driver": Kind.RUNTIME,
    "hip_runtime": Kind.RUNTIME,
    "kernel": Kind.GPU,
    "gpu_memcpy": Kind.GPU,
    "gpu_memset": Kind.GPU,
    "cuda_sync": Kind.SYNC,
}

#: argument names, by meaning (Kineto spells some differently across versions).
ARG_EXTERNAL = "External id"
ARG_RF_ID = "Record function id"
ARG_CORRELATION = "correlation"
ARG_STREAM = "stream"
ARG_DEVICE = "device"
NCCL_ARG_NAMES = ("Collective name", "In msg nelems", "Out msg nelems", "Group size")


@dataclass(slots=True)
class KEvent:
    """One kept Kineto event; `tid` is the stream for GPU and sync events."""

    kind: Kind
    cat: str
    name: str
    ts: int  # ns
    dur: int  # ns
    pid: int
    tid: int
    ext: int
    rf: int
    corr: int
    args: dict[str, Any] | None = None


@dataclass(slots=True)
class KinetoTrace:
    """A Kineto trace: kept events in file order plus the top-level metadata."""

    path: str
    events: list[KEvent]
    distributed: dict[str, Any] = field(default_factory=dict)
    device_name: str = ""

    @property
    def rank(self) -> int | None:
        rank = self.distributed.get("rank")
        return int(rank) if rank is not None else None


def _ns(value: Any) -> int:
    """µs (int or float) → ns without losing precision on epoch-sized timestamps."""
    if isinstance(value, int):
        return value * 1000
    whole = int(value)
    return whole * 1000 + round((float(value) - whole) * 1000.0)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _keep_args(kind: Kind, name: str, args: dict[str, Any]) -> bool:
    if kind is Kind.SYNC:
        return True
    if kind is Kind.GPU:
        return "nccl" in name or "Collective name" in args or "rccl" in name
    if kind is Kind.RUNTIME:
        return False
    return name.startswith(("nccl:", "gloo:", "record_param_comms", "c10d::"))


def _event(raw: dict[str, Any]) -> KEvent | None:
    if raw.get("ph") != "X":
        return None
    kind = CATEGORIES.get(raw.get("cat", ""))
    if kind is None:
        return None
    args = raw.get("args") or {}
    name = _intern(raw.get("name", ""))
    tid = raw.get("tid", 0)
    if kind in (Kind.GPU, Kind.SYNC):
        tid = args.get(ARG_STREAM, tid)
    return KEvent(
        kind=kind,
        cat=_intern(raw["cat"]),
        name=name,
        ts=_ns(raw.get("ts", 0)),
        dur=_ns(raw.get("dur", 0)),
        pid=_int(raw.get("pid", 0)),
        tid=_int(tid),
        ext=_int(args.get(ARG_EXTERNAL, -1)),
        rf=_int(args.get(ARG_RF_ID, -1)),
        corr=_int(args.get(ARG_CORRELATION, -1)),
        args=args if _keep_args(kind, name, args) else None,
    )


def load_kineto(source: TraceFile) -> KinetoTrace:
    """Read a Kineto Chrome trace. Raises TraceFormatError on invalid JSON."""
    events: list[KEvent] = []

    def on_batch(batch: list[Any]) -> None:
        for raw in batch:
            if isinstance(raw, dict):
                ev = _event(raw)
                if ev is not None:
                    events.append(ev)

    meta = read_array_document(source, "traceEvents", on_batch)
    devices = meta.get("deviceProperties") or []
    name = devices[0].get("name", "") if devices and isinstance(devices[0], dict) else ""
    return KinetoTrace(source.path, events, dict(meta.get("distributedInfo") or {}), name)


def is_kineto(meta: dict[str, Any]) -> bool:
    return "traceEvents" in meta
