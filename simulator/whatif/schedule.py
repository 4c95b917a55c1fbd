"""Pipeline schedules: the order of forward and backward passes on each stage.

`stage_order(stages, microbatches, kind, vp)` gives, for every stage, its list of
`Pass(kind "F"/"B", microbatch, chunk)`:

* `gpipe`: all forwards, then all backwards;
* `1f1b` (PipeDream-Flush / Megatron): `stages - s - 1` warm-up forwards, then one
  forward one backward, then the remaining backwards;
* `interleaved` (Megatron virtual pipeline, `vp` chunks per stage, micro-batches a
  multiple of stages): forwards walk the chunks in groups of `stages` micro-batches,
  warm-up `2·(stages - s - 1) + (vp - 1)·stages`, backwards walk the chunks in reverse.

Chunk `c` of stage `s` is virtual stage `c·stages + s`; layers are split evenly over the
`stages·vp` virtual stages (`chunk_layers`).
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.errors import ConfigError

KINDS = ("1f1b", "interleaved", "gpipe")


@dataclass(frozen=True, slots=True)
class Pass:
    """One forward ("F") or backward ("B") pass of a micro-batch through a chunk."""

    kind: str
    microbatch: int
    chunk: int = 0


def _chunk_of(i: int, stages: int, vp: int, forward: bool) -> tuple[int, int]:
    group = i // stages
    chunk = group % vp
    mb = (group // vp) * stages + i % stages
    return (chunk if forward else vp - 1 - chunk), mb


def stage_order(
    stages: int, microbatches: int, kind: str = "1f1b", vp: int = 1
) -> list[list[Pass]]:
    """Every stage's passes in order. Raises ConfigError for an impossible schedule."""
    if kind not in KINDS:
        raise ConfigError(f"unknown schedule {kind!r}; have {', '.join(KINDS)}")
    if stages < 1 or microbatches < 1 or vp < 1:
        raise ConfigError("stages, micro-batches and vp must be at least 1")
    if kind != "interleaved":
        vp = 1
    elif microbatches % stages:
        raise ConfigError(
            f"interleaved needs micro-batches ({microbatches}) a multiple of stages ({stages})"
        )
    out = []
    for s in range(stages):
        if kind == "gpipe":
            order = [Pass("F", m) for m in range(microbatches)]
            order += [Pass("B", m) for m in range(microbatches)]
            out.append(order)
            continue
        total = microbatches * vp
        if kind == "1f1b":
            warm = min(stages - s - 1, total)
        else:
            warm = min(2 * (stages - s - 1) + (vp - 1) * stages, total)
        fwd = [Pass("F", mb, c) for c, mb in (_chunk_of(i, stages, vp, True) for i in range(total))]
        bwd = [
            Pass("B", mb, c) for c, mb in (_chunk_of(i, stages, vp, False) for i in range(total))
        ]
        order = fwd[:warm]
        for i in range(total - warm):
            order += [fwd[warm + i], bwd[i]]
        order += bwd[total - warm :]
        out.append(order)
    return out


def chunk_layers(layers: int, stages: int, vp: int = 1) -> list[list[int]]:
    """Layers of each virtual stage (`chunk·stages + stage`), split as evenly as possible."""
    virtual = stages * vp
    if layers < virtual:
        raise ConfigError(f"{layers} layers cannot fill {virtual} pipeline stages")
    base, extra = divmod(layers, virtual)
    out, start = [], 0
    for v in range(virtual):
        n = base + (1 if v < extra else 0)
        out.append(list(range(start, start + n)))
        start += n
    return out
