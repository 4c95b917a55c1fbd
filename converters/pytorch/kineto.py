"""Loading a Kineto (PyTorch profiler Chrome-trace) file into compact columns.

Events are read in streamed batches and kept only if they matter for the execution
graph: host ops and annotations, CUDA/HIP runtime calls, GPU kernels/memcpy/memset and
CUDA sync events. Each kept event is one row of numpy columns (`KinetoTrace`): times in
integer nanoseconds, names and categories as ids into interned tables; the argument dict
is kept (by row) only where later stages read it (NCCL kernels, sync events, comm ops).
`KinetoTrace.event(i)` gives one row as a `KEvent` record for code that wants objects.
"""

from __future__ import annotations

import enum
import sys
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from lumos.converters.pytorch.duration_pairs import PAIRED, DurationPairs
from lumos.converters.pytorch.json_stream import TraceFile, read_array_document
from lumos.converters.pytorch.kineto_malformed import malformed
from lumos.errors import TraceFormatError

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

_INT_COLUMNS = ("pid", "tid", "ext", "rf", "corr")


@dataclass(slots=True)
class KEvent:
    """One kept Kineto event (row `index`); `tid` is the stream for GPU and sync events."""

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
    index: int = -1


def _empty_i64() -> np.ndarray:
    return np.zeros(0, np.int64)


@dataclass(slots=True)
class KinetoTrace:
    """A Kineto trace: kept events in file order as columns, plus the top-level metadata."""

    path: str
    names: list[str] = field(default_factory=list)
    cats: list[str] = field(default_factory=list)
    kind: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    name: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int32))
    cat: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int16))
    ts: np.ndarray = field(default_factory=_empty_i64)
    dur: np.ndarray = field(default_factory=_empty_i64)
    pid: np.ndarray = field(default_factory=_empty_i64)
    tid: np.ndarray = field(default_factory=_empty_i64)
    ext: np.ndarray = field(default_factory=_empty_i64)
    rf: np.ndarray = field(default_factory=_empty_i64)
    corr: np.ndarray = field(default_factory=_empty_i64)
    args: dict[int, dict[str, Any]] = field(default_factory=dict)
    distributed: dict[str, Any] = field(default_factory=dict)
    device_name: str = ""
    #: `baseTimeNanoseconds`: Kineto (2024+) writes `ts` relative to the wall clock
    #: floored to 3 months, the same on every rank unless their profilers started on both
    #: sides of such a boundary; 0 when absent (`ts` is then the epoch time itself)
    base_ns: int = 0
    #: "B"/"E" duration pairs read as complete events, and halves left without a partner
    paired_events: int = 0
    unpaired_events: int = 0

    @property
    def rank(self) -> int | None:
        rank = self.distributed.get("rank")
        return int(rank) if rank is not None else None

    def __len__(self) -> int:
        return len(self.kind)

    def event(self, i: int) -> KEvent:
        i = int(i)
        return KEvent(
            Kind(int(self.kind[i])),
            self.cats[self.cat[i]],
            self.names[self.name[i]],
            int(self.ts[i]),
            int(self.dur[i]),
            int(self.pid[i]),
            int(self.tid[i]),
            int(self.ext[i]),
            int(self.rf[i]),
            int(self.corr[i]),
            self.args.get(i),
            i,
        )

    @property
    def events(self) -> list[KEvent]:
        """Every row as a record (slow; for small traces and tests)."""
        return [self.event(i) for i in range(len(self))]

    def name_of(self, i: int) -> str:
        return self.names[self.name[i]]


#: |µs| above this overflows int64 nanoseconds (about 292 years).
MAX_US = 9.2e15


class BadNumber(ValueError):
    """A time field holds something that is not a number; `index` is its position."""

    def __init__(self, index: int, value: Any) -> None:
        super().__init__(f"{value!r} is not a number")
        self.index, self.value = index, value


def ns_array(values: list[Any]) -> np.ndarray:
    """µs (ints or floats) → int64 ns, rounding the fraction the way `round` does.

    Raises BadNumber for the first value that is not a number (a bool or string, say).
    """
    if bool in set(map(type, values)):  # numpy would take True as 1 µs
        at = next(i for i, v in enumerate(values) if type(v) is bool)
        raise BadNumber(at, values[at])
    try:
        raw = np.asarray(values)
    except (TypeError, ValueError, OverflowError):
        raw = np.asarray([_float(i, v) for i, v in enumerate(values)], dtype=np.float64)
    if raw.dtype.kind in "iu":
        bad = np.flatnonzero((raw >= MAX_US) | (raw <= -MAX_US))  # x 1000 would wrap
        if len(bad):
            raise BadNumber(int(bad[0]), values[int(bad[0])])
        return raw.astype(np.int64) * 1000
    if raw.dtype.kind != "f":
        raw = np.asarray([_float(i, v) for i, v in enumerate(values)], dtype=np.float64)
    bad = np.flatnonzero(~(np.abs(raw) < MAX_US))  # NaN, infinite, or past int64 ns
    if len(bad):
        raise BadNumber(int(bad[0]), values[int(bad[0])])
    whole = np.trunc(raw)
    return whole.astype(np.int64) * 1000 + np.round((raw - whole) * 1000.0).astype(np.int64)


def _float(index: int, value: Any) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    raise BadNumber(index, value)


def int_array(values: list[Any]) -> np.ndarray:
    """Python values → int64, with -1 for anything `int()` rejects."""
    try:
        return np.asarray(values, dtype=np.int64)
    except (TypeError, ValueError, OverflowError):
        return np.asarray([_int(v) for v in values], dtype=np.int64)


def _int(value: Any) -> int:
    try:
        return int(value)
    except (TypeError, ValueError):
        return -1


def _keep_args_by_name(kind: int, name: str) -> bool:
    if kind == Kind.SYNC:
        return True
    if kind == Kind.GPU:
        return "nccl" in name or "rccl" in name
    if kind == Kind.RUNTIME:
        return False
    return name.startswith(("nccl:", "gloo:", "record_param_comms", "c10d::"))


_UNSEEN = (-1, -1)


def _row_matrix(rows: list[tuple[Any, ...]]) -> np.ndarray:
    """(kind, name, cat, pid, tid, ext, rf, corr) tuples → int64 matrix (bad values: -1)."""
    try:
        return np.asarray(rows, dtype=np.int64).reshape(len(rows), 8)
    except (TypeError, ValueError, OverflowError):
        return np.stack([int_array(list(col)) for col in zip(*rows, strict=True)], axis=1)


class _Columns:
    """Accumulates kept events batch by batch; each batch becomes numpy arrays."""

    def __init__(self, path: str) -> None:
        self.path = path
        self.name_ids: dict[str, int] = {}
        self.names: list[str] = []
        self.cat_info: dict[Any, tuple[int, int] | None] = {}
        self.cats: list[str] = []
        self.keep: dict[int, bool] = {}
        self.parts: list[dict[str, np.ndarray]] = []
        self.args: dict[int, dict[str, Any]] = {}
        self.count = 0
        self.pairs = DurationPairs()

    def _cat(self, cat: Any) -> tuple[int, int] | None:
        kind = CATEGORIES.get(cat) if isinstance(cat, str) else None
        if kind is None:
            self.cat_info[cat] = None
            return None
        self.cat_info[cat] = info = (int(kind), len(self.cats))
        self.cats.append(_intern(cat))
        return info

    def add_batch(self, batch: list[Any]) -> None:
        """Append a batch of raw events. Raises TraceFormatError naming a malformed event
        (a name or category that is not a string, args that are not an object)."""
        try:
            self._add_batch(batch)
        except (TypeError, AttributeError, ValueError, OverflowError) as exc:
            if isinstance(exc, TraceFormatError):
                raise
            index, reason = malformed(batch)
            raise TraceFormatError(
                self.path, reason or f"malformed event: {exc}", where=f"event #{index} of a batch"
            ) from None

    def _add_batch(self, batch: list[Any]) -> None:
        rows: list[tuple[Any, ...]] = []
        ts: list[Any] = []
        dur: list[Any] = []
        name_ids, cat_info, keep, args_out = self.name_ids, self.cat_info, self.keep, self.args
        empty: dict[str, Any] = {}
        row = self.count
        gpu = int(Kind.GPU)
        for raw in batch:
            if type(raw) is not dict:
                continue
            ph = raw.get("ph")
            if ph != "X" and (ph not in PAIRED or (raw := self.pairs.feed(raw)) is None):
                continue
            cat = raw.get("cat", "")
            info = cat_info.get(cat, _UNSEEN)
            if info is _UNSEEN:
                info = self._cat(cat)
            if info is None:
                continue
            kind, cid = info
            args = raw.get("args") or empty
            name = raw.get("name", "")
            nid = name_ids.get(name)
            if nid is None:
                nid = name_ids[name] = len(self.names)
                self.names.append(_intern(name))
            t = raw.get("tid", 0)
            if kind >= gpu:
                t = args.get(ARG_STREAM, t)
            rows.append(
                (
                    kind,
                    nid,
                    cid,
                    raw.get("pid", 0),
                    t,
                    args.get(ARG_EXTERNAL, -1),
                    args.get(ARG_RF_ID, -1),
                    args.get(ARG_CORRELATION, -1),
                )
            )
            ts.append(raw.get("ts"))  # an X event without a start is malformed
            dur.append(raw.get("dur", 0))
            key = nid * 8 + kind
            kept = keep.get(key)
            if kept is None:
                kept = keep[key] = _keep_args_by_name(kind, name)
            if kept or (kind == gpu and "Collective name" in args):
                args_out[row] = args
            row += 1
        if not rows:
            return
        self.count = row
        ints = _row_matrix(rows)
        part: dict[str, np.ndarray] = {
            "kind": ints[:, 0].astype(np.int8),
            "name": ints[:, 1].astype(np.int32),
            "cat": ints[:, 2].astype(np.int16),
            "ts": self._times(ts, "ts", rows),
            "dur": self._times(dur, "dur", rows),
        }
        for col, key_name in enumerate(_INT_COLUMNS, start=3):
            part[key_name] = np.ascontiguousarray(ints[:, col])
        self.parts.append(part)

    def _times(self, values: list[Any], field: str, rows: list[tuple[Any, ...]]) -> np.ndarray:
        """µs → ns; a value that is not a number is an error naming the event."""
        try:
            out = ns_array(values)
        except BadNumber as exc:
            name = self.names[rows[exc.index][1]]
            index = self.count - len(rows) + exc.index
            raise TraceFormatError(
                self.path,
                f"event {name!r}: {field!r} is {exc.value!r}, not a number of µs",
                where=f"complete event #{index}",
            ) from None
        if field == "dur" and len(out) and int(out.min()) < 0:
            k = int(out.argmin())
            raise TraceFormatError(
                self.path,
                f"event {self.names[rows[k][1]]!r}: negative 'dur' ({values[k]!r} µs)",
                where=f"complete event #{self.count - len(rows) + k}",
            )
        return out

    def finish(self, trace: KinetoTrace) -> None:
        trace.names, trace.cats, trace.args = self.names, self.cats, self.args
        trace.paired_events, trace.unpaired_events = self.pairs.paired, self.pairs.unpaired
        for key in ("kind", "name", "cat", "ts", "dur", *_INT_COLUMNS):
            if self.parts:
                setattr(trace, key, np.concatenate([p[key] for p in self.parts]))


def load_kineto(source: TraceFile) -> KinetoTrace:
    """Read a Kineto Chrome trace. Raises TraceFormatError on invalid JSON."""
    columns = _Columns(source.path)
    meta = read_array_document(source, "traceEvents", columns.add_batch)
    devices = meta.get("deviceProperties") or []
    name = devices[0].get("name", "") if devices and isinstance(devices[0], dict) else ""
    info = meta.get("distributedInfo") or {}
    if not isinstance(info, dict):
        raise TraceFormatError(source.path, f"distributedInfo is {info!r:.60}, not an object")
    trace = KinetoTrace(source.path, distributed=dict(info))
    trace.device_name = name
    trace.base_ns = _base_ns(source.path, meta.get(BASE_TIME_KEY, 0))
    columns.finish(trace)
    return trace


#: the top-level key of the time `ts` counts from (libkineto output_json.cpp)
BASE_TIME_KEY = "baseTimeNanoseconds"


def _base_ns(path: str, value: Any) -> int:
    """The trace's base time in ns. Raises TraceFormatError if it is not a whole number
    of ns from 0 up to MAX_US µs."""
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if type(value) is not int or not 0 <= value < MAX_US * 1000:
        raise TraceFormatError(path, f"{BASE_TIME_KEY} is {value!r:.60}, not a time in ns")
    return value
