"""Pipeline schedules: the order in which one stage runs its forward and backward passes.

`stage_order(pp, vp, m, stage)` is Megatron-LM's 1F1B (vp = 1: `pp - stage - 1` warm-up
forwards, then one-forward-one-backward, then the cool-down backwards) and its
interleaved 1F1B with `vp` model chunks per stage (virtual micro-batch k runs chunk
`(k mod pp·vp) div pp`, reversed for backward, on micro-batch `(k div pp·vp)·pp + k mod pp`;
warm-up `2·(pp - stage - 1) + (vp - 1)·pp`). `check_order` verifies that an order is a
valid pipeline schedule: every (chunk, micro-batch) runs forward once, then backward once.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.errors import ConfigError


@dataclass(frozen=True, slots=True)
class Step:
    """One pass of one model chunk on one micro-batch."""

    forward: bool
    chunk: int
    microbatch: int


def _virtual(k: int, pp: int, vp: int, forward: bool) -> tuple[int, int]:
    group = pp * vp
    chunk = (k % group) // pp
    if not forward:
        chunk = vp - 1 - chunk
    return chunk, (k // group) * pp + k % pp


def stage_order(pp: int, vp: int, m: int, stage: int) -> list[Step]:
    """The passes of `stage` in issue order (see module doc).

    Raises ConfigError when interleaving gets a micro-batch count not divisible by pp.
    """
    if vp > 1 and m % pp:
        raise ConfigError(f"interleaved 1F1B needs micro-batches ({m}) divisible by pp ({pp})")
    total = m * vp
    if vp == 1:
        warmup = min(pp - stage - 1, total)
    else:
        warmup = min(2 * (pp - stage - 1) + (vp - 1) * pp, total)
    out = [Step(True, *_virtual(k, pp, vp, True)) for k in range(warmup)]
    for i in range(total - warmup):
        out.append(Step(True, *_virtual(warmup + i, pp, vp, True)))
        out.append(Step(False, *_virtual(i, pp, vp, False)))
    out.extend(Step(False, *_virtual(k, pp, vp, False)) for k in range(total - warmup, total))
    return out


def check_order(order: list[Step], vp: int, m: int) -> list[str]:
    """Problems with an order: a pass missing or repeated, a backward before its forward."""
    problems = []
    seen_f: set[tuple[int, int]] = set()
    seen_b: set[tuple[int, int]] = set()
    for pos, st in enumerate(order):
        key = (st.chunk, st.microbatch)
        target = seen_f if st.forward else seen_b
        if key in target:
            problems.append(f"position {pos}: {st} repeated")
        if not st.forward and key not in seen_f:
            problems.append(f"position {pos}: backward of {key} before its forward")
        target.add(key)
    want = {(c, j) for c in range(vp) for j in range(m)}
    if seen_f != want or seen_b != want:
        problems.append(
            f"missing passes: {len(want - seen_f)} forward, {len(want - seen_b)} backward"
        )
    return problems


def in_flight(order: list[Step], weights: list[float] | None = None) -> float:
    """Most chunk activations alive at once (forwards done, backwards not yet); with
    `weights`, each chunk's pass counts its weight (e.g. its layers) instead of 1."""
    live = peak = 0.0
    for st in order:
        w = 1.0 if weights is None else weights[st.chunk]
        live += w if st.forward else -w
        peak = max(peak, live)
    return peak


def units(order: list[Step], pp: int, overlap: bool) -> list[tuple[tuple[Step, int], ...]]:
    """The passes of `order` (with their positions) as the rank issues them: one by one,
    or with `overlap` (EP all-to-all overlap) each steady-state forward merged with the
    backward after it — without pipelining, Megatron-Core merges the forward of micro-batch
    i + 1 with the backward of micro-batch i (`combined_1f1b_schedule_for_no_pipelining`)."""
    indexed = list(zip(order, range(len(order)), strict=True))
    if not overlap:
        return [(p,) for p in indexed]
    if pp == 1:  # order is F0 B0 F1 B1 ...: F0, (F1, B0), (F2, B1), ..., B_last
        fwd = [p for p in indexed if p[0].forward]
        bwd = [p for p in indexed if not p[0].forward]
        return [(fwd[0],), *zip(fwd[1:], bwd[:-1], strict=True), (bwd[-1],)]
    out: list[tuple[tuple[Step, int], ...]] = []
    i = 0
    while i < len(indexed):
        if i + 1 < len(indexed) and indexed[i][0].forward and not indexed[i + 1][0].forward:
            out.append((indexed[i], indexed[i + 1]))
            i += 2
        else:
            out.append((indexed[i],))
            i += 1
    return out
