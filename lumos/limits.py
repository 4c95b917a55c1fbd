"""Upper bounds on what input can make lumos allocate, each overridable from the environment.

A hostile or corrupt trace can claim a billion ranks, a 3 GB protobuf frame or a gzip
stream that expands a thousandfold. Every reader asks `check` before it sizes anything
by such a number; the error names the limit's environment variable, so a genuine giant
input is one `export LUMOS_MAX_...=N` away from working.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

from lumos.errors import ConfigError, ResourceLimitError


@dataclass(frozen=True, slots=True)
class Limit:
    """One bound: what it limits, its default, and the variable that overrides it."""

    env: str
    default: int
    what: str

    @property
    def value(self) -> int:
        """The limit: the variable's value if set, else the default.

        Raises ConfigError if the variable is set to anything but a whole number >= 1
        (`1e6` and `1_000_000` are whole numbers; `abc`, `0`, `-1`, `2.5` are not), rather
        than falling back to the default silently or refusing every input.
        """
        raw = os.environ.get(self.env)
        if raw is None or not raw.strip():
            return self.default
        try:
            number = float(raw) if any(c in raw for c in ".eE") else int(raw)
            value = int(number)
            if value != number or value < 1:
                raise ValueError
        except (ValueError, OverflowError):
            raise ConfigError(
                f"{self.env}={raw!r}: not a whole number >= 1 (unset it for the default, "
                f"{self.default:,})"
            ) from None
        return value

    def check(self, value: int, what: str | None = None) -> int:
        """`value` itself. Raises ResourceLimitError if it is above the limit."""
        limit = self.value
        if value > limit:
            raise ResourceLimitError(what or self.what, value, limit, self.env)
        return value


#: ranks of one job (world size, rank numbers, process-group members).
MAX_RANKS = Limit("LUMOS_MAX_RANKS", 1 << 17, "world size")
#: bytes of one protobuf frame of a `.et` stream (protobuf itself stops at 2 GiB).
MAX_FRAME_BYTES = Limit("LUMOS_MAX_FRAME_BYTES", 256 << 20, "size of one .et frame (bytes)")
#: decompressed / compressed bytes of a gzip input, checked once past `GZIP_RATIO_AFTER`.
MAX_GZIP_RATIO = Limit("LUMOS_MAX_GZIP_RATIO", 200, "gzip expansion ratio")
GZIP_RATIO_AFTER = 64 << 20
#: ASTRA-sim `active-chunks-per-dimension` and `preferred-dataset-splits`.
MAX_CHUNKS = Limit("LUMOS_MAX_CHUNKS", 4096, "chunks per collective")
#: micro-batches of one generated step (gbs / (mbs x dp)); published runs use < 10,000.
MAX_MICROBATCHES = Limit("LUMOS_MAX_MICROBATCHES", 1 << 20, "micro-batches per step")
#: layers of a generated model (decoder + multi-token prediction), and the slots a pipeline
#: layout string expands to; published models have < 200.
MAX_LAYERS = Limit("LUMOS_MAX_LAYERS", 1 << 14, "layers of a model")
#: one dimension of a model or batch (hidden, FFN, vocabulary, heads, experts, sequence):
#: the shipped models reach a vocabulary of 256,000, 384 experts and FFN 73,728 (Nemotron-4
#: 340B); 1-million-token contexts exist (from memory). Past 2^24 the products of three
#: dimensions leave 64-bit FLOP and byte counts (hidden 10^12 was "exceeds 64 bits", naming
#: no key; a vocabulary of 10^12 was "estimated" at a 30,749 s step).
#: A micro-batch's tokens (mbs x seq) are one too: `--mbs 10^9` left the 64-bit FLOP counts.
MAX_WIDTH = Limit(
    "LUMOS_MAX_WIDTH", 1 << 24, "one model or batch dimension (hidden, vocab, seq, mbs x seq)"
)
#: nodes of a step generated whole (`estimate --exact` or `-o`: every micro-batch of every
#: distinct rank), counted from one block per chunk before any rank is built; ~290 bytes
#: a node at peak (8.3 million: 2.4 GB; 18.7 million, GPT-3 125M with 65,536
#: micro-batches: MemoryError at 3.5 GB). Also the traced step `whatif` holds whole (every
#: rank's nodes as protobuf messages, ~600 B to 1 KB each), counted as it is read. Published plans need < 1 million (DeepSeek-V3 on
#: 1,024 GPUs 646,016; GPT-3 175B on 1,024 GPUs 611,712).
MAX_NODES = Limit("LUMOS_MAX_NODES", 1 << 22, "nodes of a step generated or edited whole")
#: nodes of the ETs `estimate -o --all-ranks` writes (every rank a relabelled copy): ~120
#: bytes a node on disk and ~6.5 us to write (256 ranks of Llama 3.1 8B, 2.3 million
#: nodes: 278 MB, 15 s); the default is ~4 GB and ~4 minutes.
MAX_ET_NODES = Limit("LUMOS_MAX_ET_NODES", 1 << 25, "nodes of the ETs one estimate writes")
#: nodes of one rank's ET read to simulate or edit: refused from the metadata's
#: `node_count` when the file states one (before a node is read), else counted as frames
#: are decoded; ~565 bytes a node at simulate's peak (2 million 11-byte nodes, a 22 MB file: 1.1 GB, 20 CPU s),
#: so a 2 MB .et.gz of tiny nodes could ask for 10 GB; the largest real rank we hold has
#: 405k nodes and `estimate -o` writes at most `LUMOS_MAX_NODES` a step.
MAX_RANK_NODES = Limit(
    "LUMOS_MAX_RANK_NODES", 1 << 23, "nodes of one rank's ET read to simulate or edit"
)
#: bytes of one YAML config (model spec, hardware, kernel physics) read whole before it is
#: parsed: PyYAML builds ~100 bytes of objects per byte (a 34 MB file of keys took 84 CPU s
#: and 3.2 GB); the shipped ones are < 20 KB.
MAX_CONFIG_BYTES = Limit("LUMOS_MAX_CONFIG_BYTES", 1 << 20, "size of one YAML config (bytes)")
#: points of a sweep's grid (the product of its axes' lengths), counted before any is built;
#: a rejected point costs ~1 us, so the default is a second of enumeration.
MAX_SWEEP_POINTS = Limit("LUMOS_MAX_SWEEP_POINTS", 1 << 20, "points of a sweep's grid")
#: worker processes of a local sweep (each holds a model and a kernel model, ~100 MB).
MAX_WORKERS = Limit("LUMOS_MAX_WORKERS", 128, "sweep worker processes")


def check_environment() -> None:
    """Read every limit once, so a garbage LUMOS_MAX_* value is refused before any work
    (raises ConfigError naming the variable)."""
    for limit in all_limits():
        _ = limit.value


def all_limits() -> tuple[Limit, ...]:
    """Every limit, for the documentation and `--help`."""
    return (
        MAX_RANKS,
        MAX_FRAME_BYTES,
        MAX_GZIP_RATIO,
        MAX_CHUNKS,
        MAX_MICROBATCHES,
        MAX_LAYERS,
        MAX_WIDTH,
        MAX_NODES,
        MAX_ET_NODES,
        MAX_RANK_NODES,
        MAX_CONFIG_BYTES,
        MAX_SWEEP_POINTS,
        MAX_WORKERS,
    )
