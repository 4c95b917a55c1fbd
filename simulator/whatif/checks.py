"""What a what-if edit may ask for, checked once before any edit runs.

Every degree and size is a whole number >= 1; straggler and link factors are positive
finite numbers small enough that the slowest node they scale still fits the scheduler's
64-bit nanoseconds; the kernel jitter's spread is finite and at most `MAX_JITTER`; and
the edited step's ranks, layers and nodes stay under lumos' resource limits
(`lumos.limits`), counted from the traced step before anything is copied. A NaN factor
or a million-fold DP edit used to end in an internal error or run for minutes.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from lumos.errors import ConfigError
from lumos.limits import MAX_LAYERS, MAX_NODES, MAX_RANKS, MAX_WIDTH
from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd

if TYPE_CHECKING:
    from lumos.simulator.whatif.api import Recovered, WhatIf

#: the largest log-normal spread (sigma) `--jitter` takes: the draws have mean 1, but past
#: sigma 2 the median draw is below e^-2 = 0.14 and the mean rests on rare draws (the
#: variance e^(sigma^2) - 1 is 8,100 at sigma 3), so a step of a few thousand kernels
#: comes out faster than traced instead of jittered
MAX_JITTER = 2.0
#: the scheduler's clock: signed 64-bit nanoseconds
_MAX_NS = (1 << 63) - 1

_COUNTS = ("layers", "hidden", "ffn", "seq", "tp", "dp", "pp", "vp", "microbatches")


def check_edits(rec: Recovered, spec: WhatIf) -> None:
    """Raise ConfigError naming the first edit `spec` cannot apply to any trace, or
    ResourceLimitError if the edited step of `rec` would pass a limit."""
    for name in _COUNTS:
        value = getattr(spec, name)
        if value is not None and (isinstance(value, bool) or not isinstance(value, int)):
            raise ConfigError(f"--{name} must be a whole number, not {value!r}")
        if value is not None and value < 1:
            raise ConfigError(f"--{name} must be at least 1, not {value}")
    longest = max((_duration(n) for r in rec.ets.ranks for n in r.nodes), default=0)
    for flag, pairs in (("--slow-rank", spec.slow_ranks), ("--slow-link", spec.slow_links)):
        for _, factor in pairs:
            if not math.isfinite(factor) or factor <= 0:
                raise ConfigError(f"{flag} factor must be a positive finite number, not {factor}")
            if longest * factor > _MAX_NS:
                raise ConfigError(
                    f"{flag} factor {factor:g} makes the trace's longest node "
                    f"({longest:,} ns) exceed the 64-bit nanosecond clock"
                )
    if isinstance(spec.seed, bool) or not isinstance(spec.seed, int) or spec.seed < 0:
        raise ConfigError(f"--seed must be a whole number >= 0, not {spec.seed!r}")
    if not math.isfinite(spec.jitter) or not 0 <= spec.jitter <= MAX_JITTER:
        raise ConfigError(
            f"--jitter must be a spread (sigma) between 0 and {MAX_JITTER:g}, not {spec.jitter}"
        )
    _check_size(rec, spec)


def _duration(node: pb.Node) -> int:
    return nd.comm_duration(node) if nd.is_comm(node) else nd.duration(node)


def _check_size(rec: Recovered, spec: WhatIf) -> None:
    """The edited step's ranks, layers and nodes under the limits, from the traced ones:
    nodes grow with the layers (per layer), the replicas and the micro-batches; a
    pipeline edit spreads a replica's layers over its stages. An edit that does not grow
    the step is not refused for the size the trace already has."""
    from lumos.simulator.whatif.dp import dp_degree

    before = rec.ets.world_size
    ranks = before
    if spec.dp is not None:
        ranks = ranks // max(1, dp_degree(rec.ets)) * spec.dp
    replicas = ranks / max(1, before)
    ranks *= spec.pp or 1
    MAX_RANKS.check(ranks, "ranks of the edited step")
    if spec.layers is not None:
        MAX_LAYERS.check(spec.layers, "--layers")
    for name in ("hidden", "ffn", "seq"):  # past it, a rescaled duration leaves 64 bits
        if getattr(spec, name) is not None:
            MAX_WIDTH.check(getattr(spec, name), f"--{name}")
    traced = max((s.layers for s in rec.structures), default=0)
    deeper = (spec.layers or traced) / traced if traced else 1.0
    growth = deeper * replicas * (spec.microbatches or 1)
    if growth > 1:
        nodes = sum(len(r.nodes) for r in rec.ets.ranks) * growth
        MAX_NODES.check(int(nodes), "nodes of the edited step")
