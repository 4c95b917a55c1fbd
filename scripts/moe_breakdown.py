"""Where a mixture-of-experts row's priced step goes, by op class (issue 15, round `moesmall`).

For rows of the validation sets (`validate_published.py`, found by id in any of its sets)
this prints the compute-stream time of one layer pass — the forward and backward of one
layer on one micro-batch, taken from the first pipeline stage's second chunk (its first
without virtual stages, whose embedding then lands in `other`) — by op class, the step's
breakdown (compute, exposed all-to-all, bubble, ...) and the time per layer pass that the
published step leaves unexplained. Nothing here changes an estimate.

    python scripts/moe_breakdown.py MB2511-Qwen3-30B-A3B [ROW_ID ...]
"""

from __future__ import annotations

import argparse
import csv
import re
import sys
from collections import defaultdict
from pathlib import Path

from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.kernels import KernelModel
from lumos.simulator.costmodel.stragglers import slowest_gpu
from lumos.simulator.workload.block import COMPUTE
from lumos.simulator.workload.generate import Generator
from lumos.simulator.workload.step import estimate

sys.path.insert(0, str(Path(__file__).resolve().parent))
import validate_published as vp

#: op classes by node name, first match wins (names as `moe.py`, `layer.py`, `fp8.py` write them)
CLASSES = (
    ("expert GEMMs", re.compile(r"moe\.fc\d(\.dgrad|\.wgrad)?$")),
    ("expert FP8 casts", re.compile(r"moe\.fc\d.*cast_fp8$")),
    ("sort / pad passes", re.compile(r"moe\.(un)?sort|fp8_(un)?pad|permute_local")),
    ("permute / unpermute", re.compile(r"moe\.(un)?permute")),
    ("expert activation", re.compile(r"moe\.activation")),
    ("router, top-k, counts", re.compile(r"moe\.(router|topk|splits|tokens_per_expert)")),
    ("core attention", re.compile(r"attention")),
    ("attention GEMMs", re.compile(r"(qkv|proj)(\.dgrad|\.wgrad)?$")),
    ("other FP8 casts", re.compile(r"cast_fp8|transpose_fp8")),
    ("shared expert", re.compile(r"shared")),
)


def op_class(name: str) -> str:
    """The class of a node named `name` (`CLASSES`), `other` where none matches."""
    return next((label for label, pat in CLASSES if pat.search(name)), "other")


def layer_pass_ns(gen: Generator) -> tuple[dict[str, float], int]:
    """Compute-stream nanoseconds by class of one chunk's forward and backward on stage 0,
    divided by its layers, and those layers."""
    chunk = min(1, gen.plan.vp - 1)
    layers = gen.chunk_layers[gen.vstage(0, chunk)]
    names = gen.names.as_list()
    total: dict[str, float] = defaultdict(float)
    for forward in (True, False):
        blk = gen.block(0, chunk, forward)
        for i in range(len(blk)):
            if int(blk.cols["stream"][i]) == COMPUTE:
                total[op_class(names[blk.name[i]])] += int(blk.cols["dur"][i]) / layers
    return dict(total), layers


def find_row(row_id: str) -> vp.Row:
    """The validation row `row_id`, from whichever set holds it. Raises KeyError if none
    does, ValueError if lumos cannot estimate it (the reason as message)."""
    for path in (vp.CSV, *vp.SETS.values()):
        for r in csv.DictReader(path.open()):
            if r["row_id"] == row_id:
                row = vp.parse(r)
                if isinstance(row, str):
                    raise ValueError(f"{row_id}: {row}")
                return row
    raise KeyError(row_id)


def generator(row: vp.Row) -> Generator:
    """The step generator `estimate` builds for `row`: its GPU's kernels at the clock of the
    slowest of the job's GPUs (`stragglers.slowest_gpu`). Rows state their recompute
    (`validate_published.py`'s default), so none is resolved here."""
    file = KernelModel.for_gpu(load_system(row.hw).gpu)
    km = KernelModel(file.gpu, slowest_gpu(file.physics, row.plan.world))
    return Generator(row.model, row.plan, km)


def report(row_id: str) -> str:
    """The breakdown of `row_id` as text."""
    row = find_row(row_id)
    gen = generator(row)
    classes, layers = layer_pass_ns(gen)
    res = estimate(row.model, row.plan, row.hw)
    b, p = res.breakdown, gen.plan
    passes = p.microbatches * sum(gen.chunk_layers[gen.vstage(0, c)] for c in range(p.vp))
    missing = (row.published_s - res.iteration_time_s) / passes * 1e3
    err = 100 * (res.iteration_time_s / row.published_s - 1)
    lines = [
        f"{row_id}: published {row.published_s:.2f} s, lumos {res.iteration_time_s:.2f} s "
        f"({err:+.1f} %); {passes} layer passes on rank 0, {layers} layer(s) a chunk",
        f"  step: compute {b.compute_s:.2f} s, exposed all-to-all {b.exposed_ep_s:.2f} s, "
        f"MoE host {b.exposed_host_s:.2f} s, "
        f"bubble {b.bubble_s:.2f} s, exposed pp {b.exposed_pp_s:.2f} s, "
        f"dp {b.exposed_dp_s:.2f} s, tp {b.exposed_tp_s:.2f} s",
        f"  unexplained by lumos: {missing:.2f} ms a layer pass",
    ]
    for label, ns in sorted(classes.items(), key=lambda kv: -kv[1]):
        lines.append(f"  {label:24s} {ns / 1e6:7.3f} ms a layer pass")
    lines.append(f"  {'compute, all classes':24s} {sum(classes.values()) / 1e6:7.3f} ms")
    return "\n".join(lines)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("rows", nargs="+", help="row ids of the validation sets")
    for row_id in ap.parse_args().rows:
        print(report(row_id))
    return 0


if __name__ == "__main__":
    sys.exit(main())
