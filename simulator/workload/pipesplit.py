"""Which decoder layers each model chunk (virtual pipeline stage) holds.

Model chunk `v = chunk * pp + stage` (Megatron-Core's virtual stage order); chunk 0 starts
with the embedding, the last chunk ends with the multi-token-prediction layers and the
loss head. Four ways to split, as Megatron-Core has them
(megatron/core/transformer/transformer_block.py `get_num_layers_to_build`,
megatron/core/transformer/pipeline_parallel_layer_layout.py):

- even (default): layers / (pp x vp) per chunk, the first `layers mod (pp x vp)` chunks
  one more (lumos's lenient form of Megatron's even split, which needs them to divide);
  under a framework whose profile splits as torchtitan does (`Profile.pp_split`), its
  default split points instead (`torchtitan_split`);
- `first_stage_layers` / `last_stage_layers` (`--decoder-first-pipeline-num-layers`,
  `--decoder-last-pipeline-num-layers`): the first (last) pipeline stage holds that
  many, the other stages share the rest evenly (it must divide); with vp every stage's
  count must divide by vp and each of its chunks holds count / vp. Not combinable with
  the two below (Megatron asserts so). A count of 0 is refused as Megatron-Core's
  `TransformerConfig.__post_init__` refuses it ("num_layers_in_first_pipeline_stage must
  be larger than 0", megatron/core/transformer/transformer_config.py): an embedding- or
  loss-only stage is what the two below or `pp_layout` ("E|t*8|...") build;
- `embedding_in_split` / `loss_in_split` (`--account-for-embedding-in-pipeline-split`,
  `--account-for-loss-in-pipeline-split`): the embedding (loss) counts as one layer:
  layers + 1 (+ 1) must divide by pp, each stage's share by vp, and the first (last)
  chunk builds one decoder layer fewer (94 layers, PP 32, VP 3: 96 slots, 1 per chunk,
  chunk 0 holds the embedding alone and chunk 95 the loss alone);
- `pp_layout` (`--pipeline-model-parallel-layout`): one string naming every chunk's
  contents, `|` between chunks, `E` embedding, `t` decoder layer, `m` MTP layer,
  `L` loss, `(...)*n` and `x*n` repeat, commas cosmetic; e.g. DeepSeek-V3 on PP 8 x VP 4
  "Et|(tt|)*30mL": chunk 0 the embedding and 1 layer, chunks 1-30 two layers each,
  chunk 31 the MTP layer and the loss. Megatron's checks: E once and first, L once and
  last, the decoder and MTP counts those of the model, MTP layers after every decoder
  layer. lumos runs the MTP layers in the loss chunk only (Megatron's "standalone" MTP
  on another stage is not modelled: ConfigError).

A chunk may hold no decoder layer (an embedding- or loss-only stage); Megatron then
builds a no-op layer, lumos a zero-cost node (`chunk`).
"""

from __future__ import annotations

import re
from typing import Protocol

from lumos.errors import ConfigError
from lumos.limits import MAX_LAYERS
from lumos.simulator.workload.framework import profile


class SplitPlan(Protocol):
    """The plan fields a split reads (`plan.ParallelPlan`)."""

    @property
    def pp(self) -> int: ...
    @property
    def vp(self) -> int: ...
    @property
    def first_stage_layers(self) -> int | None: ...
    @property
    def last_stage_layers(self) -> int | None: ...
    @property
    def embedding_in_split(self) -> bool: ...
    @property
    def loss_in_split(self) -> bool: ...
    @property
    def pp_layout(self) -> str: ...
    @property
    def framework(self) -> str: ...


def uneven(plan: SplitPlan) -> bool:
    """Whether `plan` asks for anything but the even split."""
    return bool(
        plan.pp_layout
        or plan.first_stage_layers is not None
        or plan.last_stage_layers is not None
        or plan.embedding_in_split
        or plan.loss_in_split
    )


def parse_layout(text: str) -> list[str]:
    """The chunks of a layout string, each as its characters (Megatron-Core's
    `PipelineParallelLayerLayout.parse_str_to_list`). Raises ConfigError for an unknown
    character."""
    s = text.replace(",", "").replace(" ", "")

    def repeat(m: re.Match[str]) -> str:  # bounded before it is built
        what, times = m.group(1), m.group(2)
        n = int(times) if len(times) <= 30 else 10**30  # past 30 digits: at least that
        MAX_LAYERS.check(len(s) + len(what) * n, f"plan: pp_layout {text[:40]!r} slots")
        return what * int(times)

    s = re.sub(r"\(([^)]+)\)\*(\d+)", repeat, s)
    s = re.sub(r"(.)\*(\d+)", repeat, s)
    bad = sorted(set(s) - set("ELtm|"))
    if bad:
        raise ConfigError(
            f"plan: pp_layout {text!r}: unknown character {bad[0]!r} "
            "(E embedding, t decoder layer, m MTP layer, L loss, | stage boundary)"
        )
    return s.split("|")


def lenient_note(plan: SplitPlan, layers: int) -> str | None:
    """What the default split assumed when `layers` do not divide over pp x vp chunks, for
    the estimate to state: torchtitan's split points as its profile runs them, or the
    even split Megatron-Core refuses; None when they divide or the split is given."""
    chunks = plan.pp * plan.vp
    if uneven(plan) or chunks == 1 or layers % chunks == 0:
        return None
    if _torchtitan(plan):
        counts = ", ".join(_runs(torchtitan_split(layers, chunks)))
        return (
            f"note: {layers} layers over pp x vp = {chunks} model chunks as torchtitan's "
            f"default split points place them (no pipeline_parallel_split_points): {counts}"
        )
    base, extra = divmod(layers, chunks)
    return (
        f"note: {layers} layers do not divide over pp x vp = {chunks} model chunks: "
        f"estimated with {base + 1} on chunks 0-{extra - 1} and {base} on the others, a split "
        "Megatron-Core refuses (--first-stage-layers / --last-stage-layers / --pp-layout "
        "state one it runs)"
    )


def _runs(counts: list[int]) -> list[str]:
    """`[15, 16, 16, 15]` as `['15', '16 x 2', '15']`."""
    out: list[tuple[int, int]] = []
    for n in counts:
        if out and out[-1][0] == n:
            out[-1] = (n, out[-1][1] + 1)
        else:
            out.append((n, 1))
    return [f"{n}" if k == 1 else f"{n} x {k}" for n, k in out]


def _torchtitan(plan: SplitPlan) -> bool:
    return profile(plan.framework).pp_split == "torchtitan"


def torchtitan_split(layers: int, chunks: int) -> list[int]:
    """Decoder layers per model chunk as torchtitan places them when no split points are
    given (torchtitan/parallelisms/pipeline_llama.py `generate_split_points`, 2024): the
    first stage `layers // chunks`, each middle stage one more while the remainder lasts,
    the last stage what is left. Stage ids are virtual stages in Megatron's order (rank
    `v mod pp` runs stage v: torchtitan's looped `stage_ids_this_rank`)."""
    base, extra = divmod(layers, chunks)
    out = [base]
    for _ in range(chunks - 2):
        out.append(base + (1 if extra > 0 else 0))
        extra -= 1 if extra > 0 else 0
    if chunks > 1:
        out.append(layers - sum(out))
    return out


def chunk_layers(plan: SplitPlan, layers: int, mtp_layers: int = 0) -> list[int]:
    """Decoder layers of every model chunk, in virtual-stage order (module doc).

    Raises ConfigError for a split that does not add up or that Megatron-Core refuses.
    """
    chunks = plan.pp * plan.vp
    if not uneven(plan):
        if layers < chunks:
            raise ConfigError(f"plan: {layers} layers cannot fill pp x vp = {chunks} model chunks")
        if _torchtitan(plan):
            return torchtitan_split(layers, chunks)
        base, extra = divmod(layers, chunks)
        return [base + (1 if v < extra else 0) for v in range(chunks)]
    if plan.pp < 2:
        raise ConfigError("plan: an uneven pipeline split needs pp > 1")
    if plan.pp_layout:
        others = (plan.first_stage_layers, plan.last_stage_layers)
        if any(x is not None for x in others) or plan.embedding_in_split or plan.loss_in_split:
            raise ConfigError(
                "plan: pp_layout replaces first/last stage layers and the embedding/loss "
                "accounting; give one of them"
            )
        return _from_layout(plan, layers, mtp_layers)
    if plan.first_stage_layers is not None or plan.last_stage_layers is not None:
        if plan.embedding_in_split or plan.loss_in_split:
            raise ConfigError(
                "plan: first/last stage layers cannot be combined with the embedding/loss "
                "accounting (Megatron-Core asserts so)"
            )
        per_stage = _first_last(plan, layers)
    else:
        slots = layers + int(plan.embedding_in_split) + int(plan.loss_in_split)
        if slots % plan.pp:
            raise ConfigError(
                f"plan: {layers} layers + embedding/loss = {slots} slots do not divide over "
                f"pp {plan.pp} stages"
            )
        per_stage = [slots // plan.pp] * plan.pp
    out = _over_vp(plan, per_stage)
    if plan.embedding_in_split:
        out[0] -= 1
    if plan.loss_in_split:
        out[-1] -= 1
    if min(out) < 0:
        end = "first" if out[0] < 0 else "last"
        raise ConfigError(f"plan: not enough layers in the {end} model chunk for the split")
    return out


def _first_last(plan: SplitPlan, layers: int) -> list[int]:
    """Layers per pipeline stage with `first_stage_layers` / `last_stage_layers`."""
    first, last = plan.first_stage_layers, plan.last_stage_layers
    rest, stages = layers, plan.pp
    for given, end in ((first, "first"), (last, "last")):
        if given is not None:
            if given < 1:  # Megatron-Core's TransformerConfig refuses it (module doc)
                raise ConfigError(
                    f"plan: {end}_stage_layers must be >= 1, got {given} (Megatron-Core refuses "
                    f"0: 'num_layers_in_{end}_pipeline_stage must be larger than 0'); for a "
                    f"stage holding only the {'embedding' if end == 'first' else 'loss'} "
                    f"use {'embedding' if end == 'first' else 'loss'}_in_split or a pp_layout"
                )
            rest -= given
            stages -= 1
    if rest < 0 or (stages == 0 and rest != 0) or (stages > 0 and rest % stages):
        raise ConfigError(
            f"plan: first/last stage layers ({first}, {last}) leave {rest} of {layers} layers "
            f"for {stages} other stages: they must divide evenly"
        )
    middle = rest // stages if stages else 0
    out = [middle] * plan.pp
    if first is not None:
        out[0] = first
    if last is not None:
        out[-1] = last
    return out


def _over_vp(plan: SplitPlan, per_stage: list[int]) -> list[int]:
    """Per-chunk layers from per-stage ones: each stage's count / vp (it must divide)."""
    for stage, n in enumerate(per_stage):
        if n % plan.vp:
            raise ConfigError(
                f"plan: stage {stage} holds {n} layer slots, not divisible by vp {plan.vp} "
                "(Megatron-Core; a pp_layout places chunks freely)"
            )
    return [per_stage[v % plan.pp] // plan.vp for v in range(plan.pp * plan.vp)]


def _from_layout(plan: SplitPlan, layers: int, mtp_layers: int) -> list[int]:
    parts = parse_layout(plan.pp_layout)
    chunks = plan.pp * plan.vp
    text = plan.pp_layout
    if len(parts) != chunks:
        raise ConfigError(f"plan: pp_layout {text!r} has {len(parts)} stages; pp x vp = {chunks}")
    flat = "".join(parts)
    if flat.count("E") != 1 or not parts[0].startswith("E"):
        raise ConfigError(f"plan: pp_layout {text!r}: the embedding E must come once, first")
    if flat.count("L") != 1 or not parts[-1].endswith("L"):
        raise ConfigError(f"plan: pp_layout {text!r}: the loss L must come once, last")
    if flat.count("t") != layers:
        raise ConfigError(
            f"plan: pp_layout {text!r} places {flat.count('t')} decoder layers; "
            f"the model has {layers}"
        )
    if flat.count("m") != mtp_layers:
        raise ConfigError(
            f"plan: pp_layout {text!r} places {flat.count('m')} MTP layers; "
            f"the model has {mtp_layers}"
        )
    if mtp_layers and "t" in flat[flat.index("m") :]:
        raise ConfigError(f"plan: pp_layout {text!r}: MTP layers must follow every decoder layer")
    if mtp_layers and parts[-1].count("m") != mtp_layers:
        raise ConfigError(
            f"plan: pp_layout {text!r}: MTP layers outside the loss's stage (Megatron's "
            "standalone MTP) are not modelled"
        )
    return [p.count("t") for p in parts]
