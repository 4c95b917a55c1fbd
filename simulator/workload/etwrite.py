"""Generated graphs → Chakra ET files (`<prefix>.<rank>.et`), one per written rank.

Each node keeps its generated name, type, stream, duration (`duration_micros` and
`dur_ns`), `num_ops` / `tensor_size` (so ASTRA-sim's roofline mode can price compute),
and for communication `comm_type` / `comm_size` / `comm_src` / `comm_dst` / `comm_tag`
and its process group as `pg_name` (an integer id, as ASTRA-sim wants) plus `pg_ranks`;
the metadata lists every group (`process_groups`) and states the file's place in the job
(`rank`, `world_size`, `node_count`, and a `set_id` derived from the model and plan). By
default only the distinct ranks are written — a partial set, which readers take with
`--allow-partial` (the simulator then prices every collective over its full group and
gives the estimate's step time back); `all_ranks` writes every rank (relabelled copies,
see `ranks.expand`). The set is written all at once, replacing only an earlier one
lumos wrote, and that only with `force` (`converters.chakra.set_output`).
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.set_output import rank_set_output
from lumos.converters.chakra.stream import ET_SCHEMA_VERSION, with_node_count, write_et
from lumos.proto import pb
from lumos.simulator.graph import COLL, COMP, RECV, SEND, RankGraph
from lumos.simulator.workload.generate import GeneratedStep
from lumos.simulator.workload.plan import ParallelPlan
from lumos.simulator.workload.spec import ModelSpec

PREFIX = "estimate"


def _group_ids(graphs: list[RankGraph]) -> dict[tuple[int, ...], int]:
    ids: dict[tuple[int, ...], int] = {}
    for g in graphs:
        for grp in g.groups:
            if len(grp) > 1:
                ids.setdefault(tuple(grp), len(ids) + 1)
    return ids


def _nodes(
    g: RankGraph, flops: np.ndarray, nbytes: np.ndarray, gid: dict[tuple[int, ...], int]
) -> Iterator[pb.Node]:
    ptr, idx = g.dep_ptr.tolist(), g.dep_idx.tolist()
    types, streams, durs = g.type.tolist(), g.stream.tolist(), g.dur_ns.tolist()
    for i in range(len(g)):
        node = pb.Node(id=i, name=g.name(i), type=types[i])
        node.data_deps.extend(idx[ptr[i] : ptr[i + 1]])
        node.duration_micros = durs[i] // 1000
        attrs = [
            make_attr(cv.DUR_NS, durs[i], "int64_val"),
            make_attr(cv.STREAM, streams[i], "int64_val"),
            make_attr("is_cpu_op", False, "bool_val"),
        ]
        if types[i] == COMP:
            attrs.append(make_attr(cv.FLOPS, int(flops[i]), "int64_val"))
            attrs.append(make_attr(cv.BYTES, int(nbytes[i]), "uint64_val"))
        elif types[i] == COLL:
            grp = g.groups[int(g.group[i])]
            attrs.append(make_attr("comm_type", int(g.comm_type[i]), "int64_val"))
            attrs.append(make_attr("comm_size", int(g.comm_size[i]), "int64_val"))
            if len(grp) > 1:
                attrs.append(make_attr("pg_name", str(gid[tuple(grp)]), "string_val"))
            attrs.append(make_attr(cv.PG_RANKS, list(grp), "int64_list"))
        elif types[i] in (SEND, RECV):
            peer = int(g.comm_peer[i])
            src, dst = (g.rank, peer) if types[i] == SEND else (peer, g.rank)
            attrs.append(make_attr("comm_size", int(g.comm_size[i]), "int64_val"))
            attrs.append(make_attr("comm_src", src, "int32_val"))
            attrs.append(make_attr("comm_dst", dst, "int32_val"))
            attrs.append(make_attr("comm_tag", int(g.comm_tag[i]), "int32_val"))
        node.attr.extend(attrs)
        yield node


def write_ets(
    step: GeneratedStep,
    model: ModelSpec,
    plan: ParallelPlan,
    out_dir: str | Path,
    all_ranks: bool = False,
    *,
    force: bool = False,
) -> list[Path]:
    """Write the step's ETs into `out_dir`, all at once; return the paths written.

    Raises LumosError if `out_dir` already holds this prefix's ETs and `force` is off
    (or lumos did not write them), OutputError if they cannot be written
    (`converters.chakra.set_output`).
    """
    from lumos.simulator.workload.ranks import expand

    out = Path(out_dir)
    graphs = expand(step, plan) if all_ranks else step.graphs
    gid = _group_ids(graphs)
    groups_json = json.dumps({str(v): list(k) for k, v in gid.items()})
    key = json.dumps([model.name, plan.to_dict(), all_ranks], sort_keys=True)
    set_id = "estimate-" + hashlib.sha1(key.encode()).hexdigest()[:12]
    paths = []
    with rank_set_output(out, PREFIX, force=force, prefix_option=False) as stage:
        for g in graphs:
            rep = step.rep[g.rank]
            meta = pb.GlobalMetadata(version=ET_SCHEMA_VERSION)
            meta.attr.extend(
                [
                    make_attr(cv.META_RANK, g.rank, "int64_val"),
                    make_attr(cv.META_SET_ID, set_id, "string_val"),
                    make_attr(cv.META_WORLD_SIZE, plan.world, "int64_val"),
                    make_attr(cv.META_PROCESS_GROUPS, groups_json, "string_val"),
                    make_attr("model", model.name, "string_val"),
                ]
            )
            name = f"{PREFIX}.{g.rank}.et"
            meta = with_node_count(meta, len(g))
            write_et(stage / name, meta, _nodes(g, step.flops[rep], step.nbytes[rep], gid))
            paths.append(out / name)
    return paths
