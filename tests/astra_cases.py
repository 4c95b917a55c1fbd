"""ASTRA-sim system configs shared by the tests: the ring system of ASTRA-sim's published
regression runs (LIFO, 4 dataset splits, one active chunk, localBWAware)."""

from __future__ import annotations

from typing import Any

RING_SYSTEM: dict[str, Any] = {
    "scheduling-policy": "LIFO",
    "endpoint-delay": 10,
    "active-chunks-per-dimension": 1,
    "preferred-dataset-splits": 4,
    "all-reduce-implementation": ["ring"],
    "all-gather-implementation": ["ring"],
    "reduce-scatter-implementation": ["ring"],
    "all-to-all-implementation": ["ring"],
    "collective-optimization": "localBWAware",
    "local-mem-bw": 1600,
}
#: the same with `boost-mode` spelt out, as the published example files do
RING_4CHUNKS: dict[str, Any] = {**RING_SYSTEM, "boost-mode": 0}
