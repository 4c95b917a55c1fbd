"""What a host ET says about communication: `record_param_comms` arguments, process groups.

`comm_args` reads one `record_param_comms` node through its schema row (node attributes
in 1.1.0+, positional inputs before); `parse_groups` the JSON list of the
`## process_group:init ##` node; `tensor_nelems` the size of a node's first tensor input.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from typing import Any

import orjson

from lumos.converters.pytorch.host_et_schema import COMM_ATTRS, HostEtSchema
from lumos.errors import TraceFormatError

_intern = sys.intern


@dataclass(frozen=True, slots=True)
class CommArgs:
    """What `record_param_comms` says about one collective or point-to-point op."""

    collective: str  # "allreduce", "all_gather", "send", "wait", ...
    pg_name: str
    pg_desc: str
    in_nelems: int
    out_nelems: int
    elem_bytes: int
    pg_ranks: tuple[int, ...]  # empty = unknown or all ranks
    dtype: str


def tensor_nelems(values: Any, types: Any) -> tuple[int, int]:
    """(elements, bytes per element) of the first tensor (or tensor list) in values."""
    for value, typ in zip(values, types, strict=False):
        if not isinstance(typ, str) or "Tensor" not in typ:
            continue
        tensors = value if typ.startswith("GenericList") else [value]
        total, elem = 0, 0
        for t in tensors:
            if isinstance(t, list) and len(t) >= 5:
                total += int(t[3])
                elem = int(t[4])
        return total, elem
    return 0, 0


def comm_args(
    schema: HostEtSchema, ins: tuple[Any, ...], outs: tuple[Any, ...], attrs: dict[str, Any]
) -> CommArgs:
    values, _, types = ins
    in_n, elem = tensor_nelems(values, types)
    out_n, out_elem = tensor_nelems(outs[0], outs[2])
    if schema.comm_attrs and "collective_name" in attrs:
        a = {k: attrs.get(k) for k in COMM_ATTRS}
        size = int(a["pg_size"] or 0)
        start, stride = a["global_rank_start"], a["global_rank_stride"]
        ranks: tuple[int, ...] = (
            tuple(int(start) + int(stride) * i for i in range(size))
            if start is not None and stride is not None and size > 1
            else ()
        )
        return CommArgs(
            collective=_intern(str(a["collective_name"])),
            pg_name=str(a["pg_name"] or ""),
            pg_desc=str(a["pg_desc"] or ""),
            in_nelems=int(a["in_msg_nelems"] or in_n),
            out_nelems=int(a["out_msg_nelems"] or out_n),
            elem_bytes=elem or out_elem,
            pg_ranks=ranks,
            dtype=str(a["dtype"] or ""),
        )
    strings = [v for v, t in zip(values, types, strict=False) if t == "String"]
    pair = next(
        (v for v, t in zip(values, types, strict=False) if t == "Tuple[String,String]"), None
    )
    pg_name, pg_desc = (str(pair[0]), str(pair[1])) if pair else ("", "")
    ints = [v for v, t in zip(values, types, strict=False) if t == "Int"]
    ranks = ()
    if schema.pg_in_inputs and len(ints) >= 4:
        start, stride, size = ints[-3], ints[-2], ints[-1]
        if start >= 0 and stride > 0 and size > 1:
            ranks = tuple(start + stride * i for i in range(size))
    return CommArgs(
        collective=_intern(str(strings[0]) if strings else ""),
        pg_name=pg_name,
        pg_desc=pg_desc,
        in_nelems=in_n,
        out_nelems=out_n,
        elem_bytes=elem or out_elem,
        pg_ranks=ranks,
        dtype="",
    )


def parse_groups(values: Any, path: str) -> list[dict[str, Any]]:
    text = values[0] if isinstance(values, list) and values else "[]"
    try:
        groups = orjson.loads(text) if isinstance(text, str) else text
    except orjson.JSONDecodeError:
        raise TraceFormatError(path, "## process_group:init ## holds invalid JSON") from None
    return [g for g in groups if isinstance(g, dict)]
