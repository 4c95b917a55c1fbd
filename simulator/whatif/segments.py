"""A tagged rank cut into pieces: per phase, what comes before the layer stack, each
layer, and what comes after, in trace order.

Pieces are keyed `(phase, layer, part)`: a layer's piece has `part` 0; nodes outside the
stack (`layer` -1) fall in part 0 before the phase's first layered node and part 1 after
it. Every node of a rank is in exactly one piece, and pieces are listed in the order of
their first node, so emitting them as listed (`assemble`) rebuilds the traced step.
"""

from __future__ import annotations

from dataclasses import dataclass

from lumos.errors import LumosError
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.etset import RankEt

Key = tuple[str, int, int]


@dataclass(frozen=True, slots=True)
class Segments:
    """The pieces of one rank: `order` (keys, trace order) and `pieces[key]` (positions)."""

    order: tuple[Key, ...]
    pieces: dict[Key, list[int]]
    layers: int

    def phases(self) -> list[str]:
        return list(dict.fromkeys(k[0] for k in self.order))

    def layer_keys(self, phase: str) -> list[Key]:
        return [k for k in self.order if k[0] == phase and k[1] >= 0]


def segment(r: RankEt) -> Segments:
    """Cut a tagged rank into pieces. Raises LumosError when the nodes carry no tags."""
    pieces: dict[Key, list[int]] = {}
    seen_layer: set[str] = set()
    tagged = False
    for i, n in enumerate(r.nodes):
        phase, layer, _ = nd.tags(n)
        tagged = tagged or bool(phase)
        if layer >= 0:
            seen_layer.add(phase)
            key = (phase, layer, 0)
        else:
            key = (phase, -1, 1 if phase in seen_layer else 0)
        pieces.setdefault(key, []).append(i)
    if not tagged and r.nodes:
        raise LumosError(f"rank {r.rank}: nodes carry no phase/layer tags (run recovery first)")
    layers = 1 + max((k[1] for k in pieces), default=-1)
    return Segments(tuple(pieces), pieces, layers)
