"""Host memory: first-touch page faults of the step's largest allocations (CPU traces).

PyTorch's default CPU allocator has no cache: every new tensor is a `posix_memalign`
from glibc and every freed one goes back to it. glibc raises its mmap threshold to the
size of each mmapped block freed, and trims the heap top back to the kernel once more
than twice that is free at it (mallopt(3), M_MMAP_THRESHOLD and M_TRIM_THRESHOLD,
dynamic). So the step's largest allocation size sets both, and the temporaries of that
size (AdamW's `exp_avg_sq.sqrt()` and its `/ bias_correction` are two of them, alive
together) are the ones the heap hands back and asks for again: their pages are faulted
in fresh on first touch, while smaller ones reuse pages already mapped.

Measured on the grid's captures (docs/whatif.md, 7 runs x 2 ranks, per op and output
size): AdamW's `sqrt` / `div` take 28 / 13 us at 256 KiB below their step's largest size,
112 / 96 us (mean) at 256 KiB when it is the largest (micro-batch 2), 79 / 38 us at 768
KiB and 342 / 381 us at 1 MiB, the largest, at hidden 256: 0.95 - 1.31 us more per 4 KiB
page, mean over every instance (most, not all, fault); the weight-gradient GEMMs into
1 MiB there and the base's input-gradient GEMM into its largest size (512 KiB) take
160 - 180 us more than GEMMs of the same FLOPs into smaller outputs; GELU at the largest
size is mostly slow too, the forward GEMM into it never. Below the largest size 2 - 4 %
of allocating element-wise instances are over twice their op's median (84 % at it).

The model: an op allocates its outputs whose storage is none of its inputs' (a view or
an in-place op allocates nothing), one `malloc` per tensor; the step's largest
allocation is the largest tensor its priced leaf ops allocate (not modelled below
glibc's initial mmap threshold, 128 KiB). An edit that changes sizes re-classes every op against the edited step's
largest size: an op that now allocates at it and did not pays `PAGE_NS` per page of its
new allocation on top of its re-timed time; an op that no longer does gives back
`PAGE_NS` per page of its traced allocation before the re-timing ratio (keeping at least
`MIN_KEEP` of its re-timed time); an op at it before and after keeps the faults its
traced time holds, scaled with it. Inactive on traces with GPU work (device memory has
a caching allocator; host tensors there are few and pinned).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

from lumos.proto import pb
from lumos.simulator.whatif.weights import json_list

#: bytes per page (x86-64 Linux base page)
PAGE_BYTES = 4096
#: time per page faulted in fresh (ns): the mean excess of the grid's allocating AdamW
#: ops at their step's largest size over the same op below it (module doc)
PAGE_NS = 1_300
#: glibc's initial M_MMAP_THRESHOLD: a step whose allocations are all smaller never
#: raises it (mallopt(3)); not modelled
MIN_LARGEST = 128 * 1024
#: an op leaving the largest size keeps at least this share of its re-timed time
MIN_KEEP = 0.25


@dataclass(slots=True)
class PageTally:
    """What the model did over an edit: the largest allocation before and after (bytes,
    the largest over ranks) and the ops that newly reach it or leave it, with the time."""

    old_largest: int = 0
    new_largest: int = 0
    gained: int = 0
    gained_ns: int = 0
    lost: int = 0
    lost_ns: int = 0

    def note(self) -> str:
        """The notes line (empty when no op reached or left the largest size)."""
        if not (self.gained or self.lost):
            return ""
        return (
            f"host pages: largest allocation {self.old_largest >> 10} KiB -> "
            f"{self.new_largest >> 10} KiB; {self.gained} ops now allocate at it "
            f"(+{self.gained_ns / 1e6:.2f} ms of fresh pages), {self.lost} no longer do "
            f"(-{self.lost_ns / 1e6:.2f} ms), at {PAGE_NS / 1e3:.1f} us per 4 KiB page"
        )


def _tensors(value: object) -> list[list[int]]:
    """The host-ET tensor values `[id, storage, offset, numel, itemsize, device]` in `value`."""
    if isinstance(value, list) and len(value) == 6 and isinstance(value[5], str):
        return [value] if all(isinstance(x, int) for x in value[:5]) else []
    if isinstance(value, list):
        return [t for v in value for t in _tensors(v)]
    return []


def allocations(io: pb.IOInfo, outputs: pb.IOInfo, shapes: str | None = None) -> list[int]:
    """Bytes of each tensor an op allocates (one `malloc` each): its outputs (with
    `shapes` instead of the traced output shapes) whose storage is none of its inputs'."""
    inputs = {t[1] for t in _tensors(json_list(io.values))}
    out: list[int] = []

    def walk(shape: object, value: object) -> None:
        if isinstance(shape, list) and all(isinstance(d, int) for d in shape):
            found = _tensors(value)
            if len(found) == 1 and found[0] is value and found[0][1] not in inputs:
                out.append(math.prod(shape) * found[0][4])
            return
        if isinstance(shape, list) and isinstance(value, list) and len(shape) == len(value):
            for s, v in zip(shape, value, strict=True):
                walk(s, v)

    walk(json_list(outputs.shapes if shapes is None else shapes), json_list(outputs.values))
    return out


def pages(nbytes: int) -> int:
    return math.ceil(nbytes / PAGE_BYTES)


def _largest(sizes: dict[int, list[int]]) -> int:
    return max((b for v in sizes.values() for b in v), default=0)


@dataclass(slots=True)
class PageShift:
    """One rank's allocations before and after a shape rewrite (by the position of the
    node carrying an op's inputs and outputs) and the largest of each."""

    old: dict[int, list[int]]
    new: dict[int, list[int]]
    old_largest: int
    new_largest: int

    @classmethod
    def of(
        cls, nodes: tuple[pb.Node, ...], at: list[int], outputs: Callable[[int], str]
    ) -> PageShift:
        """The allocations of the ops whose inputs/outputs sit at positions `at`, traced
        and with the output shapes `outputs(position)` gives."""
        old: dict[int, list[int]] = {}
        new: dict[int, list[int]] = {}
        for i in at:
            n = nodes[i]
            if n.outputs.values:
                old[i] = allocations(n.inputs, n.outputs)
                new[i] = allocations(n.inputs, n.outputs, outputs(i))
        return cls(old, new, _largest(old), _largest(new))

    @staticmethod
    def _faulted(sizes: list[int], largest: int) -> int:
        """Pages of the allocations at the step's largest size (0: none is)."""
        if largest < MIN_LARGEST:
            return 0
        return sum(pages(b) for b in sizes if pages(b) >= pages(largest))

    def retime(self, i: int, dur: int, ratio: float, tally: PageTally | None = None) -> int:
        """The re-timed duration of the op at position `i` (traced `dur`, re-timing
        `ratio`) with the fresh pages it gains or gives back when its class changes."""
        was = self._faulted(self.old.get(i, []), self.old_largest) * PAGE_NS
        now = self._faulted(self.new.get(i, []), self.new_largest) * PAGE_NS
        if bool(was) == bool(now):
            return round(dur * ratio)
        if tally is not None:
            tally.old_largest = max(tally.old_largest, self.old_largest)
            tally.new_largest = max(tally.new_largest, self.new_largest)
        if now:
            if tally is not None:
                tally.gained, tally.gained_ns = tally.gained + 1, tally.gained_ns + now
            return round(dur * ratio) + now
        kept = max((dur - was) * ratio, MIN_KEEP * dur * ratio)
        if tally is not None:
            tally.lost, tally.lost_ns = tally.lost + 1, tally.lost_ns + round(dur * ratio - kept)
        return round(kept)
