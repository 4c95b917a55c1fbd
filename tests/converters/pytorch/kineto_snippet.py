"""Hand-made Kineto traces (and host ETs) with the field layout PyTorch writes.

Events are Chrome-trace complete events (`ph: "X"`, µs floats) with Kineto's categories
and argument names: host ops (`cpu_op`, `user_annotation` incl. `ProfilerStep#N`), runtime
calls (`cuda_runtime`, `correlation`, `cbid`), GPU work (`kernel` / `gpu_memcpy` on
`pid` = device, `tid` = stream, `args.stream`), `ac2g` flow pairs from a launch to its
kernel, and `cuda_sync` events (only when the profiler enabled them) with
`cuda_sync_kind`, `wait_on_stream`, `wait_on_cuda_event_record_corr_id`,
`wait_on_cuda_event_id`, as in HTA's `cuda_event_sync` fixture.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PID, TID, DEVICE = 4242, 4242, 0
#: CUPTI callback ids as the real traces carry them (HTA, TraceLens fixtures; CUPTI's
#: cuLaunchKernelEx and cudaStreamQuery).
CBID = {
    "cudaLaunchKernel": 211,
    "cudaLaunchKernelExC": 430,
    "cudaMemcpyAsync": 41,
    "cudaMemsetAsync": 51,
    "cudaGraphLaunch": 311,
    "cudaStreamSynchronize": 131,
    "cudaStreamQuery": 132,
    "cudaEventRecord": 135,
    "cudaEventSynchronize": 137,
    "cudaEventQuery": 138,
    "cudaStreamWaitEvent": 147,
    "cudaDeviceSynchronize": 165,
    "cuLaunchKernel": 307,
    "cuLaunchKernelEx": 652,
}
#: driver-API calls: Kineto files them under `cuda_driver` (Triton launches its kernels so).
DRIVER_CALLS = ("cuLaunchKernel", "cuLaunchKernelEx")


@dataclass
class Snippet:
    """A growing Kineto trace of one process; `ts` / `dur` in µs like the real files."""

    events: list[dict[str, Any]] = field(default_factory=list)
    corr: int = 1000
    #: Kineto's `distributedInfo` (backend, rank, world_size, pg_config), when distributed
    distributed: dict[str, Any] | None = None
    #: other top-level keys (`baseTimeNanoseconds`, `displayTimeUnit`)
    meta: dict[str, Any] = field(default_factory=dict)

    def _next(self) -> int:
        self.corr += 1
        return self.corr

    def step(self, n: int, ts: float, dur: float) -> None:
        self.events.append(_x("user_annotation", f"ProfilerStep#{n}", PID, TID, ts, dur, {}))

    def op(
        self,
        name: str,
        ts: float,
        dur: float,
        tid: int = TID,
        rf: int | None = None,
        args: dict[str, Any] | None = None,
    ) -> None:
        """A host op (`cpu_op`); `args` adds to its arguments (`Concrete Inputs`, NCCL's)."""
        body: dict[str, Any] = {"External id": self._next(), **(args or {})}
        if rf is not None:  # traces captured together with a host ET
            body["Record function id"] = rf
        self.events.append(_x("cpu_op", name, PID, tid, ts, dur, body))

    def annotation(self, name: str, ts: float, dur: float, tid: int = TID) -> None:
        """A `user_annotation` (record_function ranges, ProcessGroupNCCL's `nccl:*`)."""
        args = {"External id": self._next()}
        self.events.append(_x("user_annotation", name, PID, tid, ts, dur, args))

    def runtime(self, name: str, ts: float, dur: float, tid: int = TID) -> int:
        """A runtime call without GPU work (sync, record, wait); returns its correlation."""
        corr = self._next()
        args = {"External id": corr, "cbid": CBID.get(name, 0), "correlation": corr}
        cat = "cuda_driver" if name in DRIVER_CALLS else "cuda_runtime"
        self.events.append(_x(cat, name, PID, tid, ts, dur, args))
        return corr

    def launch(
        self,
        kernel: str,
        ts: float,
        stream: int,
        start: float,
        dur: float,
        call: str = "cudaLaunchKernel",
        tid: int = TID,
    ) -> int:
        """A launch call (5 µs) and its GPU op on `stream` at `start`; returns the correlation."""
        corr = self.runtime(call, ts, 5.0, tid)
        self._flow_start(corr, ts, tid)
        self.gpu_op(kernel, corr, stream, start, dur)
        return corr

    def graph_launch(
        self, ts: float, dur: float, ops: list[tuple[str, int, float, float]], tid: int = TID
    ) -> int:
        """A `cudaGraphLaunch` and its graph's ops, `(kernel, stream, start, dur)` each, all
        with the launch's correlation (CUPTI gives a replayed graph's ops the streams the
        graph executor chose); returns the correlation."""
        corr = self.runtime("cudaGraphLaunch", ts, dur, tid)
        self._flow_start(corr, ts, tid)
        for kernel, stream, start, op_dur in ops:
            self.gpu_op(kernel, corr, stream, start, op_dur)
        return corr

    def _flow_start(self, corr: int, ts: float, tid: int) -> None:
        flow = {"id": corr, "cat": "ac2g", "name": "ac2g"}
        self.events.append({"ph": "s", "pid": PID, "tid": tid, "ts": ts, **flow})

    def gpu_op(self, kernel: str, corr: int, stream: int, start: float, dur: float) -> None:
        """A GPU op of the launch `corr` on `stream` (kernel, memcpy or memset by name)."""
        cat = {"Memcpy": "gpu_memcpy", "Memset": "gpu_memset"}.get(kernel[:6], "kernel")
        args = {
            "External id": corr,
            "queued": 0,
            "device": DEVICE,
            "context": 1,
            "stream": stream,
            "correlation": corr,
        }
        self.events.append(_x(cat, kernel, DEVICE, stream, start, dur, args))
        flow = {"id": corr, "cat": "ac2g", "name": "ac2g"}
        self.events.append(
            {"ph": "f", "pid": DEVICE, "tid": stream, "ts": start, "bp": "e", **flow}
        )

    def cuda_sync(self, kind: str, corr: int, ts: float, dur: float, **args: Any) -> None:
        """The `cuda_sync` event Kineto writes for the sync or wait call `corr`."""
        body = {"External id": corr, "cuda_sync_kind": kind, **args, "correlation": corr}
        stream = int(args.get("stream", -1))
        self.events.append(_x("cuda_sync", kind, DEVICE, stream, ts, dur, body))

    def write(self, path: Path) -> Path:
        doc = {
            "schemaVersion": 1,
            "deviceProperties": [{"id": 0, "name": "NVIDIA A100-SXM4-80GB"}],
            "traceEvents": self.events,
        }
        if self.distributed is not None:
            doc["distributedInfo"] = self.distributed
        doc |= self.meta
        path.write_bytes(gzip.compress(json.dumps(doc).encode()))
        return path


def write_host_et(path: Path, ops: list[tuple[int, str, int, int]]) -> Path:
    """A host ET (schema 1.1.1-chakra.0.0.4) of `ops` = (id, name, parent id, rf_id) under
    the thread root (id 2), each with one float tensor input of shape [4, 64]."""
    nodes = [_host_node(2, "[pytorch|profiler|execution_trace|thread]", 1, 0, False)]
    nodes += [_host_node(i, name, parent, rf, True) for i, name, parent, rf in ops]
    doc = {"schema": "1.1.1-chakra.0.0.4", "pid": PID, "time": "2026-11-21 12:40:13"}
    doc |= {"start_ts": 0, "finish_ts": 1, "nodes": nodes}
    path.write_bytes(gzip.compress(json.dumps(doc).encode()))
    return path


def _host_node(node_id: int, name: str, parent: int, rf: int, tensor: bool) -> dict:
    empty = {"values": [], "shapes": [], "types": [], "strides": []}
    inputs = (
        {
            "values": [[node_id, node_id, 0, 256, 4, "cpu"]],
            "shapes": [[4, 64]],
            "types": ["Tensor(float)"],
            "strides": [[64, 1]],
        }
        if tensor
        else empty
    )
    attrs = [
        ("rf_id", "uint64", rf),
        ("fw_parent", "uint64", 0),
        ("seq_id", "int64", -1),
        ("scope", "uint64", 0),
        ("tid", "uint64", 1),
        ("fw_tid", "uint64", 0),
        ("op_schema", "string", ""),
    ]
    return {
        "id": node_id,
        "name": name,
        "ctrl_deps": parent,
        "inputs": inputs,
        "outputs": empty,
        "attrs": [{"name": n, "type": t, "value": v} for n, t, v in attrs],
    }


def _x(cat: str, name: str, pid: int, tid: int, ts: float, dur: float, args: dict) -> dict:
    return {
        "ph": "X",
        "cat": cat,
        "name": name,
        "pid": pid,
        "tid": tid,
        "ts": ts,
        "dur": dur,
        "args": args,
    }
