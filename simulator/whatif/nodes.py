"""Reading and writing the few node fields every edit touches: time, place, tags, deps.

A node's *processor* is where it runs in order: a GPU stream (`stream`) or else a CPU
thread (`tid`), else one catch-all per node kind, as the simulator assigns them. A
node's duration lives twice in a Chakra ET (`duration_micros` and our `dur_ns`); setting
it writes both, and for a collective or send/recv also `comm_dur_ns` (the time the
replay uses for it).
"""

from __future__ import annotations

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import attr_value, make_attr
from lumos.errors import ConfigError
from lumos.proto import pb

#: the longest duration a node can have (64-bit nanoseconds)
MAX_NS = (1 << 63) - 1

COMM_TYPES = (pb.COMM_COLL_NODE, pb.COMM_SEND_NODE, pb.COMM_RECV_NODE)
Proc = tuple[str, int]


def attr(node: pb.Node, name: str, default: object = None) -> object:
    """Value of attribute `name` (first one), or `default`."""
    for a in node.attr:
        if a.name == name:
            return attr_value(a)
    return default


def int_attr(node: pb.Node, name: str, default: int = -1) -> int:
    return _as_int(attr(node, name), default)


def int_attrs(node: pb.Node, names: tuple[str, ...], default: int = -1) -> list[int]:
    """`int_attr` of each of `names`, read in one pass over the node's attributes (for
    loops over every node of a rank)."""
    found: dict[str, object] = {}
    for a in node.attr:
        if a.name in names and a.name not in found:
            found[a.name] = attr_value(a)
    return [_as_int(found.get(name), default) for name in names]


def _as_int(value: object, default: int) -> int:
    if value is None:
        return default
    if isinstance(value, list):
        return int(value[0]) if value else default
    return int(value)  # type: ignore[call-overload]


def put(node: pb.Node, name: str, value: object, field: str | None = None) -> None:
    """Set (replace) attribute `name` on `node`."""
    new = make_attr(name, value, field)
    for a in node.attr:
        if a.name == name:
            a.CopyFrom(new)
            return
    node.attr.append(new)


def drop(node: pb.Node, name: str) -> None:
    """Remove every attribute called `name`."""
    keep = [a for a in node.attr if a.name != name]
    if len(keep) != len(node.attr):
        del node.attr[:]
        node.attr.extend(keep)


def is_comm(node: pb.Node) -> bool:
    return node.type in COMM_TYPES


def is_cpu(node: pb.Node) -> bool:
    return bool(attr(node, "is_cpu_op", False)) and int_attr(node, cv.STREAM) < 0


def on_gpu(node: pb.Node) -> bool:
    """A GPU op: it has a stream, or it is neither a CPU op nor on a CPU thread."""
    return int_attr(node, cv.STREAM) >= 0


def processor(node: pb.Node) -> Proc:
    """Where the node runs in order: ("stream", s), ("tid", t) or a catch-all."""
    stream = int_attr(node, cv.STREAM)
    if stream >= 0:
        return ("stream", stream)
    tid = int_attr(node, cv.TID)
    if tid >= 0:
        return ("tid", tid)
    if is_comm(node):
        return ("comm", 0)
    return ("cpu", 0) if attr(node, "is_cpu_op", False) else ("gpu", 0)


def duration(node: pb.Node) -> int:
    """Recorded duration in ns (`dur_ns`, else `duration_micros` x 1000)."""
    dur = int_attr(node, cv.DUR_NS)
    return dur if dur >= 0 else int(node.duration_micros) * 1000


def comm_duration(node: pb.Node) -> int:
    """Time of a communication node without waiting (`comm_dur_ns`, else its duration)."""
    dur = int_attr(node, cv.COMM_DUR_NS)
    return dur if dur >= 0 else duration(node)


def set_duration(node: pb.Node, dur_ns: int) -> None:
    """Set a node's duration in ns (both fields; `comm_dur_ns` too on communication)."""
    dur_ns = max(0, int(dur_ns))
    if dur_ns > MAX_NS:
        raise DurationOverflowError(node, dur_ns)
    put(node, cv.DUR_NS, dur_ns, "int64_val")
    node.duration_micros = round(dur_ns / 1000)
    if is_comm(node):
        put(node, cv.COMM_DUR_NS, dur_ns, "int64_val")


class DurationOverflowError(ConfigError):
    """An edit scales a node past the scheduler's 64-bit nanoseconds. Raised where the
    node is edited, which does not know its trace; `located` names the file and rank."""

    def __init__(self, node: pb.Node, dur_ns: int) -> None:
        self.node_id, self.node_name, self.dur_ns = int(node.id), node.name, dur_ns
        super().__init__(
            f"the edit makes node {node.id} ({node.name!r}) last {dur_ns:,} ns, past "
            "the 64-bit nanosecond clock (292 years): the edited sizes are too large together"
        )

    def located(self, trace: str, ranks: list[tuple[int, str, tuple[pb.Node, ...]]]) -> ConfigError:
        """The same error naming the file and rank of the traced node (`ranks`: rank,
        file and nodes of each traced rank; the first holding it, and how many more),
        else `trace` (a node the edit made)."""
        held = [
            (rank, path)
            for rank, path, nodes in ranks
            if any(n.id == self.node_id and n.name == self.node_name for n in nodes)
        ]
        where = f"{trace}: "
        if held:
            more = f" (and {len(held) - 1} more rank(s) with it)" if len(held) > 1 else ""
            where = f"{held[0][1]}: rank {held[0][0]}{more}: "
        return ConfigError(where + str(self))  # a ConfigError as before, for --json


def deps(node: pb.Node) -> list[int]:
    """Every dependency id (data then control), without repeats."""
    return list(dict.fromkeys([*node.data_deps, *node.ctrl_deps]))


def tags(node: pb.Node) -> tuple[str, int, int]:
    """(phase, layer, microbatch) as tagged by structure recovery ("", -1, -1 if not)."""
    phase = attr(node, cv.PHASE, "")
    return (str(phase), int_attr(node, cv.LAYER), int_attr(node, cv.MICROBATCH))


def set_tags(node: pb.Node, phase: str, layer: int, microbatch: int) -> None:
    put(node, cv.PHASE, phase, "string_val")
    put(node, cv.LAYER, layer, "int64_val")
    put(node, cv.MICROBATCH, microbatch, "int64_val")


def clone(node: pb.Node) -> pb.Node:
    copy = pb.Node()
    copy.CopyFrom(node)
    return copy
