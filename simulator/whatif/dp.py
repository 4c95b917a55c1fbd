"""Edit: another data-parallel degree.

The job's ranks are `dp` replicas of `m = world / dp` ranks (data parallelism outermost:
rank = replica·m + local, as Megatron and torchrun lay them out). The new job has `n`
replicas: new rank `k·m + local` is a copy of traced rank `(k mod dp)·m + local`. Every
group is moved to the new replica (`+ (k - k_src)·m`), except the data-parallel groups,
which become `[local, m + local, ...]` over all `n` replicas. Each data-parallel
collective keeps its measured time less its transfer on the old group plus its transfer
on the new one (`netfit.LinkFit.retime`: the fitted network prices the transfers; one
replica has none); DDP all-reduces keep their size, FSDP all-gather shards shrink as
`dp/n`.
"""

from __future__ import annotations

from lumos.errors import ConfigError
from lumos.proto import pb
from lumos.simulator.network.api import ALL_GATHER
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import EtSet, RankEt, process_groups
from lumos.simulator.whatif.groups import Members, members_of, relabel, roles_by_members
from lumos.simulator.whatif.netfit import fit_network


def dp_degree(ets: EtSet) -> int:
    """The data-parallel degree: size of the data-parallel groups (1 when none)."""
    dp = [m for m, role in roles_by_members(ets).items() if role == "dp"]
    return max((len(m) for m in dp), default=1)


def set_dp(ets: EtSet, n: int) -> EtSet:
    """The job with `n` data-parallel replicas. Raises ConfigError for a bad degree."""
    if n < 1:
        raise ConfigError(f"--dp must be at least 1, not {n}")
    dp, world = dp_degree(ets), ets.world_size
    if world % dp:
        raise ConfigError(f"{world} ranks do not split into {dp} data-parallel replicas")
    m = world // dp
    roles = roles_by_members(ets)
    groups = process_groups(ets)
    fit = fit_network(ets)
    new_ranks: list[RankEt] = []
    mapping: dict[int, Members] = {}
    for k in range(n):
        for local in range(m):
            src = ets.rank((k % dp) * m + local)
            shift = (k - k % dp) * m
            nodes = []
            for node in src.nodes:
                c = nd.clone(node)
                if c.type == pb.COMM_COLL_NODE:
                    old = members_of(node, groups, world)
                    if roles.get(old) == "dp":
                        new = tuple(j * m + local for j in range(n))
                        _retime(c, fit.for_group(old), len(old), n)
                    else:
                        new = tuple(x + shift for x in old)
                    mapping[id(c)] = new
                elif c.type in (pb.COMM_SEND_NODE, pb.COMM_RECV_NODE):
                    for key in ("comm_src", "comm_dst"):
                        peer = nd.int_attr(c, key)
                        if peer >= 0:
                            nd.put(c, key, peer + shift, "int64_val")
                nodes.append(c)
            meta = pb.GlobalMetadata()
            meta.CopyFrom(src.metadata)
            new_ranks.append(RankEt(k * m + local, meta, tuple(nodes)))
    return ets.with_ranks(relabel(new_ranks, mapping))


def _retime(c: pb.Node, link: object, n_old: int, n_new: int) -> None:
    if n_new == n_old:
        # same group size, same bytes: the collective stays as traced (writing its
        # duration back as `comm_dur_ns` would drop the replay's per-member exits)
        return
    comm_type = nd.int_attr(c, "comm_type", 0)
    size = nd.int_attr(c, "comm_size", 0)
    new_size = round(size * n_old / n_new) if comm_type == ALL_GATHER else size
    new = link.retime(nd.comm_duration(c), comm_type, size, n_old, n_new, new_size)  # type: ignore[attr-defined]
    nd.put(c, "comm_size", new_size, "int64_val")
    nd.set_duration(c, round(new))
