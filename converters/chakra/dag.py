"""Cycles in a dependency graph given as edge arrays `before[k] -> after[k]` over nodes 0..n-1.

One implementation for every place that must refuse a cycle with a useful message: the ET
validator, the ASTRA-sim export and the simulator's load-time check.
"""

from __future__ import annotations

import numpy as np


def blocked_nodes(n: int, before: np.ndarray, after: np.ndarray) -> list[bool]:
    """Kahn's algorithm: True for each node that never becomes ready (on or behind a cycle)."""
    deg = np.bincount(after, minlength=n).tolist()
    perm = np.argsort(before, kind="stable")
    heads = np.searchsorted(before[perm], np.arange(n + 1)).tolist()
    succ = after[perm].tolist()
    stack = [i for i in range(n) if deg[i] == 0]
    while stack:
        i = stack.pop()
        for k in range(heads[i], heads[i + 1]):
            j = succ[k]
            deg[j] -= 1
            if deg[j] == 0:
                stack.append(j)
    return [d > 0 for d in deg]


def one_cycle(
    n: int, before: np.ndarray, after: np.ndarray, blocked: list[bool]
) -> tuple[list[int], int]:
    """One explicit cycle (in execution order) among the blocked nodes, and how many nodes
    lie on or between cycles (the rest of the blocked nodes only wait behind them)."""
    stuck = np.array(blocked)
    keep = stuck[before] & stuck[after]
    src, dst = before[keep], after[keep]
    # Prune stuck nodes with no stuck successor: what remains lies on or between cycles.
    outdeg = np.bincount(src, minlength=n).tolist()
    perm = np.argsort(dst, kind="stable")
    heads = np.searchsorted(dst[perm], np.arange(n + 1)).tolist()
    preds = src[perm].tolist()
    alive = list(blocked)
    stack = [i for i in range(n) if alive[i] and outdeg[i] == 0]
    while stack:
        i = stack.pop()
        alive[i] = False
        for k in range(heads[i], heads[i + 1]):
            j = preds[k]
            outdeg[j] -= 1
            if outdeg[j] == 0 and alive[j]:
                stack.append(j)
    core = sum(alive)
    succ: dict[int, int] = {}
    for a, b in zip(src.tolist(), dst.tolist(), strict=True):
        if alive[a] and alive[b] and a not in succ:
            succ[a] = b
    order: dict[int, int] = {}
    walk: list[int] = []
    node = next(i for i in range(n) if alive[i])
    while node not in order:
        order[node] = len(walk)
        walk.append(node)
        node = succ[node]
    return walk[order[node] :], core
