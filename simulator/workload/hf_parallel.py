"""Whether a config's decoder block runs attention and MLP in parallel, and through how many
norms: lumos' `parallel_block` / `parallel_norms` from the names each framework uses.

A parallel block computes `x + attn(norm_a(x)) + mlp(norm_m(x))` instead of the sequential
`h = x + attn(norm1(x)); h + mlp(norm2(h))`. Read from each framework's modeling code:

- Hugging Face `gpt_neox`: `use_parallel_residual` (GPTNeoXConfig default true), two norms
  (GPTNeoXLayer: attention on `input_layernorm(x)`, MLP on `post_attention_layernorm(x)`);
- `stablelm`: `use_parallel_residual` (default false), one norm (StableLmDecoderLayer has no
  `post_attention_layernorm` then and feeds the MLP the attention's normed input);
- `falcon`: `parallel_attn` (FalconConfig default true) with one `input_layernorm`;
  `new_decoder_architecture` means parallel with `num_ln_in_parallel_attn` norms, 2 when
  unset (FalconDecoderLayer: `ln_attn` / `ln_mlp`; Falcon-11B sets 1);
- `gptj`, `phi` (Phi-1 / 1.5 / 2), `cohere`: always parallel with one norm (GPTJBlock's
  `ln_1`, PhiDecoderLayer's and CohereDecoderLayer's `input_layernorm`): a family trait;
- GPT-NeoX library (Megatron-based) configs: `gpt_j_residual` (parallel) and `gpt_j_tied`
  (one norm; GPT-NeoX-20B trained untied, two: megatron/model/transformer.py,
  ParallelTransformerLayer.forward); NeMo's Falcon `parallel_attention` (one norm) and
  `new_decoder_architecture` (two).
"""

from __future__ import annotations

from typing import Any

from lumos.errors import ConfigError
from lumos.simulator.workload.hf_families import Family

#: names this module reads (lumos' own first)
PARALLEL_NAMES = frozenset(
    (
        "parallel_block",
        "parallel_norms",
        "use_parallel_residual",
        "parallel_attn",
        "parallel_attention",
        "new_decoder_architecture",
        "num_ln_in_parallel_attn",
        "gpt_j_residual",
        "gpt_j_tied",
    )
)


def _flag(data: dict[str, Any], key: str, where: str) -> bool | None:
    value = data.pop(key, None)
    if value is not None and not isinstance(value, bool):
        raise ConfigError(f"{where}: {key} must be true or false, got {value!r}")
    return value


def parallel_traits(data: dict[str, Any], family: Family | None, where: str) -> dict[str, Any]:
    """`data` with the names above turned into `parallel_block` / `parallel_norms` (module
    doc); a sequential block sets neither. Raises ConfigError naming `where` for a value
    that is not a flag or a norm count other than 1 or 2."""
    data = dict(data)
    lumos = _flag(data, "parallel_block", where)
    norms = data.pop("parallel_norms", None)
    residual = _flag(data, "use_parallel_residual", where)
    attn = _flag(data, "parallel_attn", where)
    nemo = _flag(data, "parallel_attention", where)
    new = _flag(data, "new_decoder_architecture", where)
    count = data.pop("num_ln_in_parallel_attn", None)
    neox = _flag(data, "gpt_j_residual", where)
    tied = _flag(data, "gpt_j_tied", where)
    if lumos is not None:
        parallel, given = lumos, 2 if norms is None else norms
    elif new:  # Falcon's new decoder: parallel, `num_ln_in_parallel_attn` norms (2 unset)
        parallel, given = True, 2 if count is None else count
    elif neox is not None:
        parallel, given = neox, 1 if tied else 2
    elif nemo is not None:
        parallel, given = nemo, 1
    else:
        said = residual if residual is not None else attn
        parallel = said if said is not None else bool(family and family.parallel)
        given = family.norms if family else norms
    if not parallel:
        return data
    if given not in (1, 2) or isinstance(given, bool):
        raise ConfigError(f"{where}: a parallel block has 1 or 2 norms, got {given!r}")
    return {**data, "parallel_block": True, "parallel_norms": given}
