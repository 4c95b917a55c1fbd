"""DDP's gradient buckets as the trace shows them, and the rule that forms them.

PyTorch DDP (torch 2.x) hands each parameter's gradient to its reducer when the gradient
is ready (`torch::distributed::reducer::mul_out`, or `reducer::copy_` with a comm hook:
the bucket copy, with the parameter's shape); from the second step on the buckets are the
ones rebuilt in that ready order: a bucket is closed when its bytes reach its limit
(`compute_bucket_assignment_by_size`: the first bucket's limit `first_bucket_bytes_cap`,
every later one `bucket_bytes_cap`; torch 2.13 sets the first to 1 MiB only when
`bucket_cap_mb` is left at its default of 25 MiB, else both are the cap), and what is left
at the end is the last bucket. Each closed bucket is issued at once as one all-reduce
(`c10d::allreduce_` with the flat bucket `[[numel]]`, then the collective on a worker
thread or stream).

`recover_layout` reads, on one rank, the gradients in ready order and which bucket each
went to; `infer_cap` finds the cap range that explains the buckets seen (or says why none
does), `assign` re-forms buckets with the rule for new gradient sizes.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass

from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import RankEt

#: the reducer's per-gradient bucket copy (divides by the world size while copying)
_READY = ("torch::distributed::reducer::mul_out", "torch::distributed::reducer::copy_")
ISSUE = "c10d::allreduce_"
_ACCUMULATE = "autograd::engine::evaluate_function: torch::autograd::AccumulateGrad"
_NO_COPIES = "rank {rank}: no DDP gradient bucket copies (reducer::mul_out) in the backward"
#: DDP's defaults in torch 2.x (`dist._DEFAULT_FIRST_BUCKET_BYTES`, 25 MiB)
MIB = 1 << 20
DEFAULT_FIRST, DEFAULT_CAP = MIB, 25 * MIB


@dataclass(frozen=True, slots=True)
class Grad:
    """One parameter's gradient handed to DDP: `at` the node that copies it into its
    bucket (with the shape), `end` the last node of that hand-over (an all-reduce issued
    for its bucket follows it), `numel` its elements."""

    at: int
    end: int
    numel: int


@dataclass(frozen=True, slots=True)
class Layout:
    """A rank's buckets: the gradients in ready order, the index of each bucket's last
    gradient, each bucket's issuing call (`issue`: its segments) and collective."""

    grads: tuple[Grad, ...]
    ends: tuple[int, ...]
    issue: tuple[tuple[int, ...], ...]
    colls: tuple[int, ...]

    def bucket_numels(self) -> list[int]:
        out, lo = [], 0
        for e in self.ends:
            out.append(sum(g.numel for g in self.grads[lo : e + 1]))
            lo = e + 1
        return out


@dataclass(frozen=True, slots=True)
class CapRange:
    """Caps (bytes) that explain the buckets: `lo < cap <= hi` (hi None: unbounded), and
    the first bucket's own range when one cap does not explain it (torch's default)."""

    lo: int
    hi: int | None
    first_lo: int | None = None
    first_hi: int | None = None

    def describe(self) -> str:
        def rng(lo: int, hi: int | None) -> str:
            return f"({lo:,}, {hi:,}] B" if hi is not None else f"> {lo:,} B"

        text = "bucket cap " + rng(self.lo, self.hi)
        if self.first_lo is not None:
            text += ", first bucket " + rng(self.first_lo, self.first_hi)
        return text


def _numel(shapes: str, nested: bool) -> int | None:
    try:
        value = json.loads(shapes)
    except ValueError:
        return None
    dims = value[0] if isinstance(value, list) and value else None
    if nested and isinstance(dims, list) and len(dims) == 1 and isinstance(dims[0], list):
        dims = dims[0]
    if not isinstance(dims, list) or not all(isinstance(d, int) for d in dims):
        return None
    return math.prod(dims)


def recover_layout(
    r: RankEt, dp_colls: list[int], check: bool = True, pair: bool = True
) -> Layout | str:
    """The rank's buckets (`dp_colls`: positions of its gradient all-reduces, in issue
    order), or why they cannot be read. `check`: each issued bucket must hold exactly its
    gradients' elements (off for a resized trace whose shapes were rewritten); `pair` off:
    the calls only (`colls` empty), however many collectives there are."""
    grads: list[Grad] = []
    ends: list[int] = []
    issue: list[tuple[int, ...]] = []
    copying: tuple[int, str] | None = None  # the bucket copy being read (rf_id, name)
    thread: nd.Proc | None = None
    for i, n in enumerate(r.nodes):
        if nd.tags(n)[0] != "bwd" or nd.is_comm(n):
            continue
        if n.name in _READY and n.inputs.shapes:
            numel = _numel(n.inputs.shapes, nested=False)
            if numel is None:
                return f"rank {r.rank}: bucket copy {n.id} without a tensor shape"
            grads.append(Grad(i, i, numel))
            copying, thread = (nd.int_attr(n, "rf_id"), n.name), nd.processor(n)
        elif (
            copying is not None
            and nd.processor(n) == thread
            and ((nd.int_attr(n, "rf_id"), n.name) == copying or n.name == _ACCUMULATE)
        ):  # the copy's later segments, then the AccumulateGrad call it runs in
            grads[-1] = Grad(grads[-1].at, i, grads[-1].numel)
            copying = None if n.name == _ACCUMULATE else copying
        if n.name != ISSUE:
            continue
        copying = None
        if n.inputs.shapes:
            if not grads:
                return _NO_COPIES.format(rank=r.rank)
            if ends and ends[-1] == len(grads) - 1:
                return f"rank {r.rank}: all-reduce {n.id} issued with no new gradient"
            ends.append(len(grads) - 1)
            issue.append((i,))
        elif issue and nd.int_attr(n, "rf_id") == nd.int_attr(r.nodes[issue[-1][0]], "rf_id"):
            issue[-1] = (*issue[-1], i)
    if not grads:
        return _NO_COPIES.format(rank=r.rank)
    if not pair:
        return Layout(tuple(grads), tuple(ends), tuple(issue), ())
    if len(ends) != len(dp_colls):
        return f"rank {r.rank}: {len(ends)} bucket all-reduce calls, {len(dp_colls)} collectives"
    layout = Layout(tuple(grads), tuple(ends), tuple(issue), tuple(dp_colls))
    if check:
        for k, (numel, at) in enumerate(zip(layout.bucket_numels(), issue, strict=True)):
            issued = _numel(r.nodes[at[0]].inputs.shapes, nested=True)
            if issued != numel:
                return (
                    f"rank {r.rank}: bucket {k} issues {issued} elements, its gradients "
                    f"hold {numel}"
                )
    return layout


def infer_cap(sizes: list[list[int]]) -> CapRange | str:
    """The caps under which DDP's rule forms exactly these buckets (bytes of each
    bucket's gradients in ready order), or why no cap does."""
    if len(sizes) < 2:
        return "one bucket: any cap above the model's gradient bytes would form it"

    def bounds(buckets: list[list[int]], last_open: bool) -> tuple[int, int | None]:
        lo = max(sum(b) - b[-1] for b in buckets)  # closed no earlier than its last grad
        closed = buckets[:-1] if last_open else buckets
        hi = min((sum(b) for b in closed), default=None)  # reached the cap when closed
        return lo, hi

    lo, hi = bounds(sizes, last_open=True)
    if hi is None or lo < hi:
        return CapRange(lo, hi)
    first_lo, first_hi = bounds(sizes[:1], last_open=False)
    lo, hi = bounds(sizes[1:], last_open=True)
    if (hi is None or lo < hi) and first_lo < first_hi:  # type: ignore[operator]
        return CapRange(lo, hi, first_lo, first_hi)
    return "no bucket cap forms these buckets with DDP's size rule"


def _round_caps() -> tuple[list[int], list[int]]:
    """Caps people set, as DDP turns MiB into bytes (`int(mb * 2**20)`): 1, 2, 2.5 or 5
    x 10^k MiB first, then powers of two MiB."""
    decimal = {int(m * 10.0**e * MIB) for m in (1, 2, 2.5, 5) for e in range(-3, 4)}
    binary = {int(2.0**e * MIB) for e in range(-10, 11)} - decimal
    return sorted(decimal), sorted(binary)


def choose_cap(rng: CapRange) -> tuple[int, int]:
    """(first bucket cap, cap) inside the range: DDP's defaults when they fit, else the
    round value (`_round_caps`) nearest the middle of the range on a log scale. The trace
    only bounds the cap: this is a prior, and the range is reported with it."""

    def pick(lo: int, hi: int | None) -> int:
        decimal, binary = _round_caps()
        inside = [c for c in decimal if c > lo and (hi is None or c <= hi)] or [
            c for c in binary if c > lo and (hi is None or c <= hi)
        ]
        if not inside:
            return hi if hi is not None else lo + 1
        mid = math.sqrt(lo * hi) if hi is not None and lo > 0 else float(lo + 1)
        return min(inside, key=lambda c: abs(math.log(c / mid)))

    def fits(c: int, lo: int | None, hi: int | None) -> bool:
        return lo is not None and c > lo and (hi is None or c <= hi)

    if rng.first_lo is not None:
        if fits(DEFAULT_FIRST, rng.first_lo, rng.first_hi) and fits(DEFAULT_CAP, rng.lo, rng.hi):
            return DEFAULT_FIRST, DEFAULT_CAP
        return pick(rng.first_lo, rng.first_hi), pick(rng.lo, rng.hi)
    cap = DEFAULT_CAP if fits(DEFAULT_CAP, rng.lo, rng.hi) else pick(rng.lo, rng.hi)
    return cap, cap


def assign(sizes: list[int], first_cap: int, cap: int) -> list[int]:
    """DDP's rule: the index of each bucket's last gradient (sizes in ready order)."""
    ends: list[int] = []
    total, limit = 0, first_cap
    for i, s in enumerate(sizes):
        total += s
        if total >= limit:
            ends.append(i)
            total, limit = 0, cap
    if not ends or ends[-1] != len(sizes) - 1:
        ends.append(len(sizes) - 1)
    return ends


def dp_all_reduces(r: RankEt, dp_members: set[tuple[int, ...]], members: object) -> list[int]:
    """Positions of the rank's collectives on a data-parallel group, in node order."""
    return [
        i
        for i, n in enumerate(r.nodes)
        if n.type == pb.COMM_COLL_NODE and members(n) in dp_members  # type: ignore[operator]
    ]
