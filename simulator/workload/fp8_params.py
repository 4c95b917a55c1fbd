"""FP8 parameters: the linear layers' weights kept in FP8 and all-gathered in FP8.

Megatron-Core's `--fp8-param-gather` (NeMo's `fp8_params`, MLPerf NVIDIA's
`FP8_PARAMS=True`; Transformer Engine's `fp8_model_init`) makes every Transformer Engine
linear's weight a `Float8Tensor`: the model holds no BF16 copy of it, the distributed
optimizer keeps the FP32 main weights, and after each step it casts its shard of them to
FP8 (`quantize_param_shard` / TE `cast_master_weights_to_fp8`: the shard's amax, an
all-reduce of the scales over the data-parallel group, then the cast) and all-gathers the
FP8 bytes. What changes against BF16 weights (plan `fp8_param_gather`):

* the parameter all-gather moves 1 byte a linear weight instead of 2; the embedding and
  the output layer stay BF16 (`gather_bytes`; Megatron's buffers group parameters by
  dtype, so each dtype is gathered in its own buckets — priced here as one bucket of mixed
  bytes; a layer's few norm weights, BF16 too, are counted with its linears);
* the optimizer step writes FP8 (1 byte) instead of the BF16 copy (2) and reads each main
  weight once more for its amax: 3 bytes a weight more (`QUANTIZE_EXTRA_BYTES`; the scale
  all-reduce, a few bytes a tensor, is not priced);
* memory: the FP8 weight and its cached FP8 transpose (1 + 1 bytes) instead of BF16 plus
  Transformer Engine's cached FP8 cast and transpose (2 + 2; `memory._weight_bytes`);
  the embedding's BF16 2 bytes are the same 2.

Modelled for Megatron-Core's Transformer Engine linears (framework `megatron`) with plain
data parallelism or the distributed optimizer (`zero` 0 or 1).
"""

from __future__ import annotations

BF16 = 2
#: bytes of an FP8 weight
FP8 = 1
#: optimizer-step bytes a weight more under FP8 parameters: the amax read of the FP32 main
#: weight (4) and the FP8 write (1) against the BF16 write (2)
QUANTIZE_EXTRA_BYTES = 4 + FP8 - BF16


def gather_bytes(
    buckets: list[tuple[int, int]], params: list[int], fp8: list[int], on: bool
) -> list[int]:
    """Bytes each gradient bucket's parameter all-gather moves (before the split over the
    group): `buckets` as `Generator.buckets` gives them ((lowest layer index, weights),
    backward order), `params` the weights per layer index they were cut from, `fp8` the
    linear weights among them (a shorter list where trailing entries are embedding or
    output only). BF16 for every weight unless `on`."""
    if not on:
        return [n * BF16 for _, n in buckets]
    out, top = [], len(params)
    for low, total in buckets:
        low8 = sum(fp8[low:top])
        out.append(low8 * FP8 + (total - low8) * BF16)
        top = low
    return out
