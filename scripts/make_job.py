"""Make a many-rank job from one real converted rank: every rank a jittered copy of it.

    python scripts/make_job.py BASE.et OUT_DIR --ranks 128 [--jitter 0.05] [--seed 0]

BASE is a `.et` that `lumos convert` wrote for one real rank (DLRM rank 0 with N copies
of its iteration, which `bench_simulate.py --scaling ... --copies N` converts, or a
converted capture from tests/data/captures). Each of
the N ranks `OUT_DIR/job.<r>.et` is that rank with every duration — `duration_micros`,
the `dur_ns`, `gap_ns` and `comm_dur_ns` attributes — multiplied by its own factor in
[1 - jitter, 1 + jitter] (a fresh draw per node and rank, seeded by rank), so no two
ranks are identical and symmetry folding cannot apply. Every collective becomes a
collective of all N ranks (its `pg_ranks` dropped, the metadata's process groups
rewritten to all ranks: a member list per node would grow with N² over the job), so
collectives match across ranks as in data parallelism: each rank runs the same program
in the same order. Ranks with point-to-point sends or receives are refused (their peers
would need a pipeline layout, not a copy).

Durations are patched in place: a varint keeps its byte length (protobuf accepts a
varint padded with continuation bytes), so the bulk of a rank is one copy of the base
bytes plus a vectorised patch; only collective nodes are re-encoded by protobuf.
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

from lumos.converters.chakra import conventions as cv
from lumos.converters.chakra.attrs import set_attr
from lumos.converters.chakra.varint import decode_varint, encode_varint
from lumos.proto import pb
from lumos.simulator.et_columns import frame_offsets
from lumos.simulator.et_wire import PAD, varints, walk

DURATION_ATTRS = (cv.DUR_NS, cv.GAP_NS, cv.COMM_DUR_NS)
INT64_VAL_TAG = 0x48


class Base:
    """The base rank: its bytes, frames, and where every duration varint sits."""

    def __init__(self, path: Path) -> None:
        self.data = path.read_bytes()
        offsets = frame_offsets(self.data, 0, True, str(path))
        self.frames = np.asarray(offsets, np.int64)  # node frames, then the end
        size, body = decode_varint(self.data, 0, len(self.data))
        self.metadata = pb.GlobalMetadata.FromString(self.data[body : body + size])
        buf = np.frombuffer(self.data + bytes(PAD), np.uint8)
        starts = self.frames[1:-1] + varints(buf, self.frames[1:-1])[1]
        ends = self.frames[2:]
        f = walk(buf, starts, ends)
        if f.bad.any():
            raise SystemExit(f"{path}: {int(f.bad.sum())} nodes the wire walk cannot read")
        node = np.zeros(len(starts), np.uint64)
        sel = f.tag == 0x18
        node[f.msg[sel]] = f.value[sel]
        self.types = node
        if np.isin(node, [pb.COMM_SEND_NODE, pb.COMM_RECV_NODE]).any():
            raise SystemExit(f"{path}: point-to-point nodes; use a rank with collectives only")
        self.comm = np.flatnonzero(node == pb.COMM_COLL_NODE)
        at, owner = [], []
        sel = f.tag == 0x38  # duration_micros
        at.append(f.at[sel])
        owner.append(f.msg[sel])
        sel = np.flatnonzero(f.tag == 0x52)  # attributes named like a duration, int64_val
        a_at = f.at[sel]
        for name in DURATION_ATTRS:
            raw = np.frombuffer(b"\x0a" + bytes([len(name)]) + name.encode(), np.uint8)
            match = np.ones(len(a_at), bool)
            for k, byte in enumerate(raw.tolist()):
                match &= buf[a_at + k] == byte
            match &= buf[a_at + len(raw)] == INT64_VAL_TAG
            at.append(a_at[match] + len(raw) + 1)
            owner.append(f.msg[sel][match])
        self.at = np.concatenate(at)  # where each duration varint starts (file offsets)
        self.owner = np.concatenate(owner)  # its node
        self.value, self.width = varints(buf, self.at)
        keep = self.value < np.uint64(1 << 62)  # negative int64 values are left alone
        self.at, self.owner, self.value, self.width = (
            a[keep] for a in (self.at, self.owner, self.value, self.width)
        )
        self.nodes = len(starts)


def write_rank(base: Base, rank: int, ranks: int, jitter: float, seed: int, out: Path) -> None:
    rng = np.random.default_rng([seed, rank])
    factor = 1.0 + jitter * rng.uniform(-1.0, 1.0, base.nodes)
    value = np.rint(base.value.astype(np.float64) * factor[base.owner])
    top = np.exp2(7.0 * base.width) - 1
    new = np.minimum(np.maximum(value, 0), top).astype(np.uint64)
    patched = np.frombuffer(bytearray(base.data), np.uint8)
    for k in range(int(base.width.max(initial=0))):
        sel = base.width > k
        byte = (new[sel] >> np.uint64(7 * k)) & np.uint64(0x7F)
        more = base.width[sel] - 1 > k
        patched[base.at[sel] + k] = (byte | (more.astype(np.uint64) << np.uint64(7))).astype(
            np.uint8
        )
    data = memoryview(patched)
    with open(out / f"job.{rank}.et", "wb") as handle:
        handle.write(_frame(_metadata(base.metadata, rank, ranks).SerializeToString()))
        at = int(base.frames[1])
        for m in base.comm.tolist():
            lo, hi = int(base.frames[1 + m]), int(base.frames[2 + m])
            handle.write(data[at:lo])
            handle.write(_frame(_collective(bytes(data[lo:hi]))))
            at = hi
        handle.write(data[at : int(base.frames[-1])])


def _frame(payload: bytes) -> bytes:
    return encode_varint(len(payload)) + payload


def _collective(frame: bytes) -> bytes:
    """The collective node of `frame` (durations already patched) without `pg_ranks`: its
    `pg_name` names a group of all ranks in the metadata."""
    _, body = decode_varint(frame, 0, len(frame))
    node = pb.Node.FromString(frame[body:])
    keep = [a for a in node.attr if a.name != cv.PG_RANKS]
    del node.attr[:]
    node.attr.extend(keep)
    return node.SerializeToString(deterministic=True)


def _metadata(meta: pb.GlobalMetadata, rank: int, ranks: int) -> pb.GlobalMetadata:
    out = pb.GlobalMetadata()
    out.CopyFrom(meta)
    set_attr(out, cv.META_RANK, rank)
    set_attr(out, cv.META_WORLD_SIZE, ranks)
    for attr in out.attr:
        if attr.name == cv.META_PROCESS_GROUPS:
            groups = json.loads(attr.string_val or "{}")
            attr.string_val = json.dumps({k: list(range(ranks)) for k in groups})
    return out


def make_job(base_path: Path, out: Path, ranks: int, jitter: float = 0.05, seed: int = 0) -> int:
    """Write the job; returns its node count."""
    base = Base(base_path)
    out.mkdir(parents=True, exist_ok=True)
    for old in out.glob("job.*.et"):
        old.unlink()
    for rank in range(ranks):
        write_rank(base, rank, ranks, jitter, seed, out)
    return base.nodes * ranks


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("base", type=Path)
    ap.add_argument("out", type=Path)
    ap.add_argument("--ranks", type=int, required=True)
    ap.add_argument("--jitter", type=float, default=0.05)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    t0 = time.perf_counter()
    nodes = make_job(args.base, args.out, args.ranks, args.jitter, args.seed)
    print(f"{args.ranks} ranks, {nodes} nodes in {args.out} ({time.perf_counter() - t0:.1f} s)")


if __name__ == "__main__":
    main()
