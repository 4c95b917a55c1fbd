"""lumos's extra Chakra attributes: names, value fields and meanings, in one table.

Standard Chakra attributes (see `attrs.STANDARD_FIELDS`) keep their standard types. What
Chakra cannot hold natively goes into the attributes below; readers that do not know them
ignore them. `docs/attributes.md` is generated from `NODE_ATTRS` / `META_ATTRS` by a test,
so the documentation cannot drift from the code.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(frozen=True, slots=True)
class AttrSpec:
    """One documented attribute: its name, value field and meaning."""

    name: str
    field: str
    meaning: str


# Node attributes -------------------------------------------------------------------------
DUR_NS = "dur_ns"
START_NS = "start_ns"
GAP_NS = "gap_ns"
DUR_ESTIMATED = "dur_estimated"
HOST_OPS = "host_ops"
DEVICE = "device"
STREAM = "stream"
TID = "tid"
RANK = "rank"
CATEGORY = "cat"
CORRELATION = "correlation"
SYNC_KIND = "sync_kind"
SYNC_STREAM = "sync_stream"
SYNC_EVENT = "sync_event"
EVENT_RECORD = "event_record"
SYNC_WAIT_NS = "sync_wait_ns"
COPY_AFTER_NS = "copy_after_ns"
SYNC_INFERRED = "sync_inferred"
#: event ids from here up are lumos's own: a cudaEventRecord paired with a wait by
#: program order (the trace named no event).
INFERRED_EVENT_BASE = 1 << 40
PG_RANKS = "pg_ranks"
COMM_DUR_NS = "comm_dur_ns"
COMM_SEQ = "comm_seq"
LAYER = "layer"
MICROBATCH = "microbatch"
PHASE = "phase"
FLOPS = "num_ops"
BYTES = "tensor_size"
SOURCE_ID = "source_id"

NODE_ATTRS: tuple[AttrSpec, ...] = (
    AttrSpec(DUR_NS, "int64_val", "duration in nanoseconds (duration_micros is rounded µs)"),
    AttrSpec(START_NS, "int64_val", "start time in ns since the rank's trace start"),
    AttrSpec(
        GAP_NS,
        "int64_val",
        "on a CPU node: untraced CPU time between the previous node on its thread and this one; on a GPU node after another on its stream: its dispatch delay, how much later it started than its stream predecessor, launch and other dependencies allowed (at most 10 µs; absent = 0), counted in replay from when it can start",
    ),
    AttrSpec(
        DUR_ESTIMATED,
        "bool_val",
        "true: no measured duration (host-ET-only input); the simulator must estimate it",
    ),
    AttrSpec(
        HOST_OPS,
        "int64_val",
        "host-ET-only CPU node: leaf ops of the host ET it stands for (itself, or the allocation/view leaves folded into it); absent = 1",
    ),
    AttrSpec(DEVICE, "int64_val", "GPU index of a GPU op"),
    AttrSpec(STREAM, "int64_val", "CUDA stream of a GPU op (standard name)"),
    AttrSpec(TID, "int64_val", "CPU thread of a host op (standard name)"),
    AttrSpec(
        CATEGORY,
        "string_val",
        "Kineto category: cpu_op, cuda_runtime, kernel, gpu_memcpy, gpu_memset, user_annotation, ...",
    ),
    AttrSpec(
        CORRELATION, "int64_val", "Kineto correlation id linking a launch call and its GPU op"
    ),
    AttrSpec(
        SYNC_KIND,
        "string_val",
        "on a synchronize or wait call: device | stream | event | stream_wait_event",
    ),
    AttrSpec(
        SYNC_STREAM,
        "int64_val",
        "the stream a stream sync waits for, or the stream that a cudaStreamWaitEvent makes wait",
    ),
    AttrSpec(
        SYNC_EVENT,
        "int64_val",
        "the CUDA event a cudaEventSynchronize / cudaStreamWaitEvent waits on",
    ),
    AttrSpec(
        SYNC_WAIT_NS,
        "int64_val",
        "on a sync call: ns of its recorded duration spent waiting for the GPU work it depends on, cut from dur_ns (replay derives that wait from the dependency edge); dur_ns + sync_wait_ns is the recorded call, and the next op's gap_ns counts from its recorded end",
    ),
    AttrSpec(
        COPY_AFTER_NS,
        "int64_val",
        "on a blocking copy call (cudaMemcpy, a pageable cudaMemcpyAsync): ns it ran, as recorded, after its one copy ended; replay ends the call that long after its stream has run the copy",
    ),
    AttrSpec(
        SYNC_INFERRED,
        "bool_val",
        "on a sync or wait call: what it waits for was inferred from program order (the stream launched on last before a stream sync; for a stream wait or an event sync, the streams of the launches or event records around it), not named by the trace's cuda_sync events",
    ),
    AttrSpec(
        EVENT_RECORD,
        "int64_val",
        "on cudaEventRecord: the CUDA event id recorded (the stream is in sync_stream); ids from 2**40 up are lumos's own, for a record paired with a wait by program order",
    ),
    AttrSpec(
        PG_RANKS, "int64_list", "global ranks of the collective's process group, in group order"
    ),
    AttrSpec(
        COMM_DUR_NS,
        "int64_val",
        "measured collective time without the wait for late peers (replay mode)",
    ),
    AttrSpec(
        COMM_SEQ,
        "int64_val",
        "index of this collective in its process group's sequence on this rank",
    ),
    AttrSpec(LAYER, "int64_val", "transformer layer index (for what-if edits)"),
    AttrSpec(MICROBATCH, "int64_val", "micro-batch index (for what-if edits)"),
    AttrSpec(PHASE, "string_val", "fwd | bwd | optim | other"),
    AttrSpec(
        SOURCE_ID,
        "int64_val",
        "on a node of an exported ASTRA-sim bundle: its id in the ET it was exported from",
    ),
)

# GlobalMetadata attributes -----------------------------------------------------------------
META_RANK = "rank"
META_WORLD_SIZE = "world_size"
META_PROCESS_GROUPS = "process_groups"
META_STEP_NS = "measured_step_ns"
META_STEP_START_NS = "step_start_ns"
META_SOURCE = "source"
META_PRODUCER = "producer"
META_NODE_COUNT = "node_count"
META_SET_ID = "set_id"
# what-if (lumos.simulator.whatif) ---------------------------------------------------------
META_WHATIF_FIT = "whatif_fit"
META_WHATIF_SHAPES_TP = "whatif_shapes_tp"

META_ATTRS: tuple[AttrSpec, ...] = (
    AttrSpec(
        META_RANK,
        "int64_val",
        "global rank of this file; must equal the rank in the file name (<prefix>.<rank>.et)",
    ),
    AttrSpec(
        META_WORLD_SIZE,
        "int64_val",
        "number of ranks in the job: readers refuse a set that lacks any of ranks 0..world_size-1",
    ),
    AttrSpec(
        META_NODE_COUNT,
        "int64_val",
        "number of Node messages in the file; a file holding fewer was cut short and is refused",
    ),
    AttrSpec(
        META_SET_ID,
        "string_val",
        "id shared by the files of one conversion; a set mixing two ids holds stale ranks",
    ),
    AttrSpec(
        META_PROCESS_GROUPS,
        "string_val",
        "JSON object {pg_name: [global ranks]} of every process group seen",
    ),
    AttrSpec(
        META_STEP_START_NS,
        "int64_val",
        "absolute start of the measured step on the trace clock (Kineto ts, in ns); ranks sharing a clock are aligned by it",
    ),
    AttrSpec(
        META_STEP_NS, "int64_val", "measured iteration time (Kineto ProfilerStep) in ns, when known"
    ),
    AttrSpec(META_SOURCE, "string_list", "input files this ET was converted from"),
    AttrSpec(META_PRODUCER, "string_val", "tool and version that wrote the file"),
    # what-if (lumos.simulator.whatif) ------------------------------------------------------
    AttrSpec(
        META_WHATIF_FIT,
        "string_val",
        "JSON {cost class: [fixed_ns, ns_per_unit_of_work]}: the CPU-only trace's own op "
        "timing lines, fitted on the traced step and kept through what-if edits",
    ),
    AttrSpec(
        META_WHATIF_SHAPES_TP,
        "int64_val",
        "tensor-parallel degree the node shapes were traced at, once a what-if edit changed "
        "the degree (shapes are kept; work scales by traced/new degree)",
    ),
)


def parse_process_groups(text: Any) -> tuple[dict[str, tuple[int, ...]], str | None]:
    """The `process_groups` metadata value as {name: members in their order}, or ({}, why not).

    Every reader (validate, simulate, export, what-if) parses it here, so malformed text
    (not JSON, nested past JSON's depth limit, not {name: [ranks]}, ranks that are not
    whole numbers >= 0) is told apart the same way and never raises.
    """
    try:
        value = orjson.loads(text)
    except (orjson.JSONDecodeError, TypeError):
        return {}, "is not JSON"
    if not isinstance(value, dict) or not all(
        isinstance(v, list) and all(type(r) is int and r >= 0 for r in v) for v in value.values()
    ):
        return {}, "is not an object of rank lists"
    return {str(k): tuple(v) for k, v in value.items()}, None


def attributes_markdown() -> str:
    """The documentation table of our extra attributes (docs/attributes.md)."""
    lines = [
        "# lumos's extra Chakra attributes",
        "",
        "Generated from `converters/chakra/conventions.py` (a test keeps them equal). Standard",
        "Chakra attributes (`is_cpu_op`, `comm_type`, `comm_size`, `comm_src`, `comm_dst`,",
        "`comm_tag`, `pg_name`, `num_ops`, `tensor_size`, `rf_id`, ...) keep their standard",
        "value fields; readers that do not know the names below ignore them.",
        "",
        "## Node attributes",
        "",
        "| name | value field | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| `{a.name}` | {a.field} | {a.meaning} |" for a in NODE_ATTRS]
    lines += [
        "",
        "## GlobalMetadata attributes",
        "",
        "| name | value field | meaning |",
        "|---|---|---|",
    ]
    lines += [f"| `{a.name}` | {a.field} | {a.meaning} |" for a in META_ATTRS]
    return "\n".join(lines) + "\n"
