"""Writing numbered tasks as Chakra nodes, encoded straight into protobuf wire format.

`encode_nodes` turns a block of finalized tasks into the bytes of their length-prefixed
`Node` messages with numpy (`pb_wire`), field by field, exactly as protobuf's
deterministic serializer would write them; `node_message` builds the same node as a
`pb.Node` (the reference the encoder is tested against). Standard attributes keep their
standard value fields (`attrs.STANDARD_FIELDS`); our extra ones are those of
`conventions`. Attribute order is fixed, so output bytes are deterministic. The file is
written atomically (temp file, then rename).
"""

from __future__ import annotations

import itertools
import os
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import orjson

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra import wire as w
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.stream import ET_SCHEMA_VERSION
from lumos.converters.chakra.varint import encode_varint
from lumos.converters.pytorch import forked
from lumos.converters.pytorch.node_ref import NODE_TYPE, NodeSource, node_ids, node_message
from lumos.converters.pytorch.tasks import TaskKind, TaskTable
from lumos.errors import OutputError, TraceFormatError
from lumos.outputs import AtomicFile, describe
from lumos.proto import pb

__all__ = ["NodeSource", "encode_nodes", "metadata", "node_message", "write_et_file"]

_TYPE_OF_KIND = np.array([NODE_TYPE[TaskKind(k)] for k in range(len(TaskKind))], np.uint8)
BLOCK_ROWS = 8192
_INT64_VAL, _BOOL_VAL, _STRING_VAL = 9, 27, 29


def metadata(
    rank: int,
    world_size: int,
    groups: dict[str, tuple[int, ...]],
    step_ns: int | None,
    sources: list[str],
    producer: str,
    step_start_ns: int | None = None,
) -> pb.GlobalMetadata:
    meta = pb.GlobalMetadata(version=ET_SCHEMA_VERSION)
    items: list[tuple[str, Any]] = [
        (cv.META_RANK, rank),
        (cv.META_WORLD_SIZE, world_size),
        (
            cv.META_PROCESS_GROUPS,
            orjson.dumps({k: list(v) for k, v in sorted(groups.items())}).decode(),
        ),
    ]
    if step_ns is not None:
        items.append((cv.META_STEP_NS, step_ns))
    if step_start_ns is not None:
        items.append((cv.META_STEP_START_NS, step_start_ns))
    items += [(cv.META_SOURCE, list(sources)), (cv.META_PRODUCER, producer)]
    meta.attr.extend(make_attr(k, v) for k, v in items)
    return meta


# --- the encoder ----------------------------------------------------------------------


def _attr_col(name: str, value_tag: int, value: w.Mat, present: np.ndarray) -> list:
    """One attribute on the present rows: `attr` tag and length, name, value tag, value."""
    key = name.encode()
    head = b"\n" + encode_varint(len(key)) + key + encode_varint(value_tag << 3)
    body_lens = np.where(present, len(head) + value.lens, 0)
    if len(body_lens) and int(body_lens.max()) >= 128:
        return [*w.tag_len(10 << 3 | 2, body_lens, present), w.const(head, present), value]
    fixed = 2 + len(head)
    mat = np.empty((len(present), fixed + value.mat.shape[1]), np.uint8)
    mat[:, 0] = 10 << 3 | 2
    mat[:, 1] = body_lens
    mat[:, 2:fixed] = np.frombuffer(head, np.uint8)
    mat[:, fixed:] = value.mat
    return [w.Mat(mat, np.where(present, fixed + value.lens, 0))]


def _int_attr_col(name: str, values: np.ndarray, present: np.ndarray) -> list:
    return _attr_col(name, _INT64_VAL, w.varints(values, present), present)


def _bool_attr_col(name: str, values: np.ndarray, present: np.ndarray) -> list:
    return _attr_col(name, _BOOL_VAL, w.column(values.astype(np.uint8), present), present)


def _string_attr_table(name: str, strings: list[str]) -> list[bytes]:
    return [make_attr(name, s, "string_val").SerializeToString() for s in strings]


def _wrap_attr(body: bytes) -> bytes:
    return encode_varint(10 << 3 | 2) + encode_varint(len(body)) + body


class _Tables:
    """Per-file lookup tables: encoded name fields, IO fields, string attributes, deps."""

    def __init__(self, src: NodeSource) -> None:
        t = src.table
        self.ids = node_ids(t)
        self.names = [
            (b"\x12" + encode_varint(len(n.encode())) + n.encode()) if n else b"" for n in t.names
        ]
        k, h = src.kineto, src.host
        self.cats = [_wrap_attr(b) for b in _string_attr_table(cv.CATEGORY, k.cats)] if k else []
        self.schemas = (
            [b""] + [_wrap_attr(b) for b in _string_attr_table("op_schema", h.names[1:])]
            if h
            else []
        )
        self.has_attrs = np.zeros(len(t), bool)
        self.has_attrs[np.fromiter(t.attrs.keys(), np.int64, len(t.attrs))] = True
        self.deps = _dep_edges(t, self.ids)


def _dep_edges(t: TaskTable, ids: np.ndarray) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """ctrl and data dependency ids as (node row, dep id) pairs sorted by row, deduplicated."""
    n = len(t)
    rows = ids - 1
    ctrl_id = np.where(t.ctrl >= 0, ids[np.maximum(t.ctrl, 0)], 0)
    has_ctrl = (t.ctrl >= 0) & (ctrl_id != ids)
    data_id = np.where(t.data1 >= 0, ids[np.maximum(t.data1, 0)], 0)
    simple = (t.data1 >= 0) & (data_id != ids) & (data_id != ctrl_id)
    extra_tasks = np.fromiter(t.extra.keys(), np.int64, len(t.extra))
    simple[extra_tasks] = False
    d_rows, d_seq, d_ids = (
        [rows[simple]],
        [np.zeros(int(simple.sum()), np.int64)],
        [data_id[simple]],
    )
    more_rows, more_seq, more_ids = [], [], []
    for task in extra_tasks.tolist():
        own, ctrl = int(ids[task]), int(ctrl_id[task]) if t.ctrl[task] >= 0 else None
        seen = {ctrl}
        for k, dep in enumerate(t.data_of(task)):
            dep_id = int(ids[dep])
            if dep_id != own and dep_id not in seen:
                seen.add(dep_id)
                more_rows.append(own - 1)
                more_seq.append(k)
                more_ids.append(dep_id)
    d_rows.append(np.asarray(more_rows, np.int64))
    d_seq.append(np.asarray(more_seq, np.int64))
    d_ids.append(np.asarray(more_ids, np.int64))
    dr, ds, di = (np.concatenate(x) for x in (d_rows, d_seq, d_ids))
    order = np.lexsort((ds, dr))
    c_rows = rows[has_ctrl]
    c_order = np.argsort(c_rows, kind="stable")
    del n
    return {
        "ctrl": (c_rows[c_order], ctrl_id[has_ctrl][c_order]),
        "data": (dr[order], di[order]),
    }


def _packed(field: int, edges: tuple[np.ndarray, np.ndarray], lo: int, hi: int) -> list:
    """A packed repeated uint64 field for node rows [lo, hi)."""
    rows, dep_ids = edges
    a, b = np.searchsorted(rows, [lo, hi])
    rows, dep_ids = rows[a:b] - lo, dep_ids[a:b]
    values = w.varints(dep_ids)
    body = np.bincount(rows, weights=values.lens, minlength=hi - lo).astype(np.int64)
    present = body > 0
    flat = values.mat[values.mask()]
    return [*w.tag_len(field << 3 | 2, body, present), w.Ragged(flat, body)]


def _row_bytes(field: w.Ragged) -> list[memoryview]:
    """Each row's bytes of a joined field."""
    data = memoryview(field.data.tobytes())
    ends = np.cumsum(field.lens).tolist()
    starts = [0, *ends[:-1]]
    return [data[a:b] for a, b in zip(starts, ends, strict=True)]


def encode_nodes(src: NodeSource, tables: _Tables, lo: int, hi: int) -> bytes:
    """Length-prefixed `Node` messages for ids lo+1 .. hi.

    Fields in field-number order: (id) (name) (type, deps, start, duration) (inputs,
    outputs) (attributes) (op_schema and own attributes); narrow ones are joined as
    matrices, the others are Python bytes per row, and one join interleaves them.
    """
    t = src.table
    task = t.order[lo:hi]
    n = hi - lo
    every = np.ones(n, bool)
    kind = t.kind[task]
    start = t.start[task] - src.step_start
    dur = t.dur[task]
    names = [tables.names[i] for i in t.name[task].tolist()]
    mid: list[w.Field] = [w.const(b"\x18", every), w.column(_TYPE_OF_KIND[kind], every)]
    mid += _packed(4, tables.deps["ctrl"], lo, hi)
    mid += _packed(5, tables.deps["data"], lo, hi)
    start_us = np.maximum(0, start) // 1000
    dur_us = np.maximum(0, (dur + 500) // 1000)
    mid += [w.const(b"\x30", start_us > 0), w.varints(start_us, start_us > 0)]
    mid += [w.const(b"\x38", dur_us > 0), w.varints(dur_us, dur_us > 0)]
    io = _io_rows(src, task)
    attrs = _attr_fields(src, tables, task, kind, start, dur)
    tail = _tail_rows(src, tables, task, kind)
    long_lens = [np.fromiter(map(len, items), np.int64, n) for items in (names, io, tail) if items]
    node_id = w.varints(np.arange(lo + 1, hi + 1))
    body = 1 + node_id.lens + w.lengths(mid) + w.lengths(attrs) + np.sum(long_lens, axis=0)
    head = w.concat([w.varints(body), w.const(b"\x08", every), node_id])
    columns = [_row_bytes(head), names, _row_bytes(w.concat(mid))]
    if io:
        columns.append(io)
    columns.append(_row_bytes(w.concat(attrs)))
    if tail:
        columns.append(tail)
    return b"".join(itertools.chain.from_iterable(zip(*columns, strict=True)))


def _io_rows(src: NodeSource, task: np.ndarray) -> list[memoryview]:
    """Each task's inputs/outputs fields (its host op's, on its first segment)."""
    t = src.table
    if src.host is None:
        return []
    return src.host.io.views(np.where(t.head[task], t.host[task], -1))


def _tail_rows(src: NodeSource, tables: _Tables, task: np.ndarray, kind: np.ndarray) -> list[bytes]:
    """Each task's op_schema attribute and own attributes (sync, comm), in order."""
    t, h = src.table, src.host
    if h is not None:
        host = np.where(kind == TaskKind.CPU, t.host[task], -1)
        schema = np.where(host >= 0, h.op_schema[np.maximum(host, 0)], 0)
        schemas = tables.schemas
        rows = [schemas[i] for i in schema.tolist()]
    else:
        rows = [b""] * len(task)
    for pos in np.flatnonzero(tables.has_attrs[task]).tolist():
        rows[pos] += b"".join(
            _wrap_attr(_attr_bytes(src, name, value))
            for name, value in t.attrs[int(task[pos])].items()
            if not name.startswith("_")
        )
    return rows


def _attr_bytes(src: NodeSource, name: str, value: Any) -> bytes:
    """One attribute; a value its field cannot hold (a collective of 1e19 elements in a
    damaged host ET: past int64) is a TraceFormatError naming the trace, not a crash."""
    try:
        return make_attr(name, value).SerializeToString()
    except (ValueError, TypeError, OverflowError):
        where = src.host.path if src.host is not None else src.kineto.path if src.kineto else ""
        raise TraceFormatError(
            where, f"attribute {name!r} = {value!r:.60} does not fit a Chakra attribute"
        ) from None


def _attr_fields(
    src: NodeSource,
    tables: _Tables,
    task: np.ndarray,
    kind: np.ndarray,
    start: np.ndarray,
    dur: np.ndarray,
) -> list[w.Field]:
    t = src.table
    n = len(task)
    every = np.ones(n, bool)
    parts = _bool_attr_col("is_cpu_op", kind == TaskKind.CPU, kind < TaskKind.COLL)
    parts += _int_attr_col(cv.DUR_NS, dur, every)
    parts += _int_attr_col(cv.START_NS, start, every)
    if src.estimated:
        parts += _bool_attr_col(cv.DUR_ESTIMATED, every, every)
    stream, tid = t.stream[task], t.tid[task]
    on_stream, on_thread = stream >= 0, (stream < 0) & (tid >= 0)
    parts += _int_attr_col(cv.STREAM, stream, on_stream)
    parts += _int_attr_col(cv.DEVICE, t.device[task], on_stream)
    parts += _int_attr_col(cv.TID, tid, on_thread)
    gap = t.gap[task]
    parts += _int_attr_col(cv.GAP_NS, gap, on_thread | (on_stream & (gap > 0)))
    ev = t.ev[task]
    k = src.kineto
    if k is not None:
        has_ev = ev >= 0
        safe = np.maximum(ev, 0)
        parts += w.lookup(tables.cats, k.cat[safe], has_ev)
        corr = k.corr[safe]
        parts += _int_attr_col(cv.CORRELATION, corr, has_ev & (corr >= 0))
    h = src.host
    if h is not None:
        host = t.host[task]
        safe = np.maximum(host, 0)
        has = (host >= 0) & (kind == TaskKind.CPU)
        parts += _int_attr_col("rf_id", h.rf_id[safe], has)
        parts += _int_attr_col("seq_id", h.seq_id[safe], has)
        parts += _int_attr_col("fw_parent", h.fw_parent[safe], has)
    return parts


def write_et_file(path: Path, meta: pb.GlobalMetadata, src: NodeSource, split: bool = False) -> int:
    """Write `path` atomically: metadata, then every node in id order. Returns the node count.

    With `split`, a forked child encodes the second half of the nodes meanwhile.
    """
    target = AtomicFile(path)
    part = target.tmp.with_name(target.tmp.name + ".part")
    n = len(src.table)
    child = None
    try:
        tables = _Tables(src) if n else None
        starts = list(range(0, n, BLOCK_ROWS))
        middle = starts[len(starts) // 2] if split and len(starts) > 1 else n
        child = forked.start(_write_blocks, part, src, tables, middle, n) if middle < n else None
        out = target.file
        head = meta.SerializeToString(deterministic=True)
        out.write(encode_varint(len(head)) + head)
        _encode_range(out, src, tables, 0, middle)
        if child is not None:
            child.result()
            child = None
            out.flush()
            with open(part, "rb") as rest:
                _append(rest, out)
        target.commit()
    except BaseException as exc:
        if child is not None:
            child.kill()
        target.abort()
        if isinstance(exc, OSError):
            raise OutputError(f"{path}: cannot write: {describe(exc)}") from None
        raise
    finally:
        part.unlink(missing_ok=True)
    return n


def _append(src: Any, dst: Any) -> None:
    """Append file `src` to `dst` (in the kernel where it can)."""
    size = os.fstat(src.fileno()).st_size
    done = 0
    try:
        while done < size:
            sent = os.copy_file_range(src.fileno(), dst.fileno(), size - done)
            if sent == 0:
                break
            done += sent
    except (AttributeError, OSError):
        src.seek(done)
        shutil.copyfileobj(src, dst, 8 << 20)


def _encode_range(out: Any, src: NodeSource, tables: _Tables | None, lo: int, hi: int) -> None:
    for at in range(lo, hi, BLOCK_ROWS):
        assert tables is not None
        out.write(encode_nodes(src, tables, at, min(at + BLOCK_ROWS, hi)))


def _write_blocks(path: Path, src: NodeSource, tables: _Tables, lo: int, hi: int) -> None:
    with open(path, "wb", buffering=1 << 20) as out:
        _encode_range(out, src, tables, lo, hi)
