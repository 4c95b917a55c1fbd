"""Capture matched host ET + Kineto traces of a tiny GPT under DDP, FSDP or a 2-stage pipeline.

Run with torchrun, one process per rank; each rank writes its pair with
`lumos.converters.pytorch.capture.capture_steps` after a few warm-up steps:

    torchrun --nproc-per-node 2 scripts/capture_gpt.py --mode ddp --out out/ddp
    torchrun --nproc-per-node 2 scripts/capture_gpt.py --mode pipeline --device cuda --out out/pp

CPU uses the gloo backend, `--device cuda` uses NCCL (one GPU per rank). The model is
small on purpose (vocabulary 128, 2 blocks, hidden 64, sequence 32, batch 4) so the
traces stay small enough to commit as test data; the shapes can be raised by flags.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.distributed as dist
import torch.nn.functional as F
from torch import nn

from lumos.converters.pytorch.capture import capture_steps, check_capture


@dataclass(frozen=True, slots=True)
class GptShape:
    """Sizes of the tiny GPT and of one training batch."""

    vocab: int
    layers: int
    hidden: int
    heads: int
    seq: int
    batch: int


class Block(nn.Module):
    """Pre-norm transformer block: causal self-attention then a 4x MLP."""

    def __init__(self, shape: GptShape) -> None:
        super().__init__()
        self.heads = shape.heads
        self.ln1 = nn.LayerNorm(shape.hidden)
        self.qkv = nn.Linear(shape.hidden, 3 * shape.hidden)
        self.proj = nn.Linear(shape.hidden, shape.hidden)
        self.ln2 = nn.LayerNorm(shape.hidden)
        self.fc1 = nn.Linear(shape.hidden, 4 * shape.hidden)
        self.fc2 = nn.Linear(4 * shape.hidden, shape.hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, t, c = x.shape
        q, k, v = self.qkv(self.ln1(x)).split(c, dim=2)
        q, k, v = (z.view(b, t, self.heads, c // self.heads).transpose(1, 2) for z in (q, k, v))
        att = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        x = x + self.proj(att.transpose(1, 2).reshape(b, t, c))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class Embed(nn.Module):
    """Token plus learned position embedding."""

    def __init__(self, shape: GptShape) -> None:
        super().__init__()
        self.tok = nn.Embedding(shape.vocab, shape.hidden)
        self.pos = nn.Embedding(shape.seq, shape.hidden)

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.tok(idx) + self.pos(torch.arange(idx.shape[1], device=idx.device))


class Head(nn.Module):
    """Final LayerNorm and the language-model projection."""

    def __init__(self, shape: GptShape) -> None:
        super().__init__()
        self.ln = nn.LayerNorm(shape.hidden)
        self.out = nn.Linear(shape.hidden, shape.vocab, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(self.ln(x))


def gpt_layers(shape: GptShape) -> list[nn.Module]:
    """The model as a flat list of stages-to-be: embed, blocks, head."""
    return [Embed(shape), *(Block(shape) for _ in range(shape.layers)), Head(shape)]


def lm_loss(logits: torch.Tensor, targets: torch.Tensor) -> torch.Tensor:
    return F.cross_entropy(logits.flatten(0, 1), targets.flatten())


def make_batch(shape: GptShape, step: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """The same batch on every rank of a pipeline; data-parallel ranks offset by rank."""
    gen = torch.Generator().manual_seed(1000 + step)
    tokens = torch.randint(shape.vocab, (shape.batch, shape.seq + 1), generator=gen)
    return tokens[:, :-1].to(device), tokens[:, 1:].to(device)


def data_parallel_step(
    model: nn.Module, opt: torch.optim.Optimizer, shape: GptShape, step: int, dev: torch.device
) -> None:
    """One DDP/FSDP step: each rank a different batch; gradients synchronised by the wrapper."""
    idx, targets = make_batch(shape, step * dist.get_world_size() + dist.get_rank(), dev)
    lm_loss(model(idx), targets).backward()
    opt.step()
    opt.zero_grad(set_to_none=True)


def build_data_parallel(
    mode: str, shape: GptShape, dev: torch.device, bucket_mb: float
) -> nn.Module:
    model = nn.Sequential(*gpt_layers(shape)).to(dev)
    if mode == "ddp":
        from torch.nn.parallel import DistributedDataParallel

        ids = [dev.index] if dev.type == "cuda" else None
        return DistributedDataParallel(model, device_ids=ids, bucket_cap_mb=bucket_mb)
    from torch.distributed.fsdp import fully_shard

    for layer in model:
        fully_shard(layer)
    fully_shard(model)
    return model


class PipelineStage:
    """One of two pipeline stages; GPipe schedule (all forwards, then all backwards)."""

    def __init__(self, shape: GptShape, dev: torch.device, micro_batches: int) -> None:
        layers = gpt_layers(shape)
        cut = 1 + shape.layers // 2
        self.rank = dist.get_rank()
        self.first = self.rank == 0
        self.module = nn.Sequential(*(layers[:cut] if self.first else layers[cut:])).to(dev)
        self.shape, self.dev, self.micro = shape, dev, micro_batches
        self.opt = torch.optim.AdamW(self.module.parameters(), lr=1e-3)

    def _act_shape(self) -> tuple[int, int, int]:
        s = self.shape
        return (s.batch // self.micro, s.seq, s.hidden)

    def step(self, step: int) -> None:
        idx, targets = make_batch(self.shape, step, self.dev)
        kept = []
        for mb, (x, y) in enumerate(
            zip(idx.chunk(self.micro), targets.chunk(self.micro), strict=True)
        ):
            if self.first:
                out = self.module(x)
                dist.send(out.detach(), dst=1, tag=mb)
                kept.append(out)
            else:
                act = torch.empty(self._act_shape(), device=self.dev)
                dist.recv(act, src=0, tag=mb)
                act.requires_grad_(True)
                kept.append((act, lm_loss(self.module(act), y) / self.micro))
        for mb, item in enumerate(kept):
            if self.first:
                grad = torch.empty(self._act_shape(), device=self.dev)
                dist.recv(grad, src=1, tag=100 + mb)
                item.backward(grad)
            else:
                act, loss = item
                loss.backward()
                dist.send(act.grad, dst=0, tag=100 + mb)
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)


def local_numel(module: nn.Module) -> int:
    """Parameters this rank holds (an FSDP shard counts its local part only)."""
    return sum(getattr(p, "to_local", lambda p=p: p)().numel() for p in module.parameters())


def parse_args() -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=["ddp", "fsdp", "pipeline"], required=True)
    p.add_argument("--out", required=True, help="folder for rank<r>.{host_et,kineto}.json.gz")
    p.add_argument("--device", choices=["cpu", "cuda"], default="cpu")
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--seq", type=int, default=32)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--vocab", type=int, default=128)
    p.add_argument("--micro-batches", type=int, default=2)
    p.add_argument("--bucket-mb", type=float, default=0.1, help="DDP gradient bucket size")
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument("--steps", type=int, default=1, help="profiled steps (after the warm-up)")
    return p.parse_args()


def host_info() -> dict[str, object]:
    """What the trace does not record about the host: its cores, what this rank may use,
    how many ranks share it, and its load when the capture started."""
    return {
        "cpu_count": os.cpu_count(),
        "affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "torch_threads": torch.get_num_threads(),
        "local_world_size": int(os.environ.get("LOCAL_WORLD_SIZE", "1")),
        "loadavg": list(os.getloadavg()),
    }


def main() -> None:
    args = parse_args()
    shape = GptShape(args.vocab, args.layers, args.hidden, args.heads, args.seq, args.batch)
    if args.device == "cuda":
        dev = torch.device("cuda", int(os.environ.get("LOCAL_RANK", "0")))
        torch.cuda.set_device(dev)
        dist.init_process_group("nccl", device_id=dev)
    else:
        dev = torch.device("cpu")
        torch.set_num_threads(1)
        dist.init_process_group("gloo")
    if args.mode == "pipeline" and dist.get_world_size() != 2:
        raise SystemExit("--mode pipeline needs exactly 2 ranks")
    torch.manual_seed(0)
    run_step: Callable[[int], None]
    if args.mode == "pipeline":
        stage = PipelineStage(shape, dev, args.micro_batches)
        run_step, local = stage.step, stage.module
    else:
        model = build_data_parallel(args.mode, shape, dev, args.bucket_mb)
        opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
        local = model

        def run_step(step: int) -> None:
            data_parallel_step(model, opt, shape, step, dev)

    dist.barrier()
    with capture_steps(
        args.out,
        warmup=args.warmup,
        active=args.steps,
        cuda=args.device == "cuda",
        metadata={"lumos_host": host_info()},
    ) as cap:
        for step in range(cap.steps_needed):
            run_step(step)
            if args.device == "cuda":
                torch.cuda.synchronize()
            cap.step()
    dist.barrier()
    check = check_capture(cap.paths)
    step_ms = [f"{s.name} {s.dur_ns / 1e6:.2f} ms" for s in check.steps]
    print(
        f"rank {check.paths.rank}: schema {check.schema}, {check.et_nodes} ET nodes, "
        f"{check.kineto_events} Kineto events, rf_id link {check.link_fraction:.2%}, "
        f"{', '.join(step_ms)}, {local_numel(local)} local parameters"
    )
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
