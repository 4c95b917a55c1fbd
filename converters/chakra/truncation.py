"""Signs that a foreign `.et` was cut short at a frame boundary.

A file lumos writes states its `node_count`, so a short one is an error at read time
(`stream.EtReader`). A file another tool wrote has no count, and one cut exactly between
two frames reads as a valid, smaller graph. Two signs still give such a cut away, and
each becomes a warning naming the file (never an error: a foreign graph may be odd on
purpose):

- dependencies on ids above the last id in the file: nodes that were written after the
  cut (producers number nodes in order, so a node never waits for a later id otherwise);
- an unfinished last `ProfilerStep#N`: no recorded work after `UNFINISHED` of its span,
  though the step's own node says it went on (the rest of the step was cut off).
"""

from __future__ import annotations

import re

import numpy as np

STEP_NAME = re.compile(r"^ProfilerStep#\d+$")
#: the last step counts as unfinished when its recorded work ends before this share of it
UNFINISHED = 0.8


def is_step_name(name: str) -> bool:
    """Whether a node name is Kineto's `ProfilerStep#N`."""
    return name.startswith("ProfilerStep#") and STEP_NAME.match(name) is not None


def cut_signs(
    ids: np.ndarray,
    steps: dict[int, str],
    start_ns: np.ndarray,
    dur_ns: np.ndarray,
    missing_deps: np.ndarray,
) -> list[str]:
    """Why a file looks cut short, one line per sign (empty when nothing says so).

    Per node: `ids`, `start_ns` (-1: not recorded), `dur_ns` (<= 0: none); `steps`: the
    positions and names of its `ProfilerStep#N` nodes; `missing_deps`: the dependency
    ids that no node of the file has.
    """
    out: list[str] = []
    if not len(ids):
        return out
    last = int(ids.max())
    beyond = np.unique(missing_deps[missing_deps > last]) if len(missing_deps) else missing_deps
    if len(beyond):
        shown = ", ".join(str(int(i)) for i in beyond[:5])
        out.append(
            f"looks cut short: {len(beyond)} dependenc{'y' if len(beyond) == 1 else 'ies'}"
            f" name ids above its last id {last} ({shown}{' ...' if len(beyond) > 5 else ''}); "
            "the file states no node_count to check it against"
        )
    timed = [(int(start_ns[p]), p) for p in steps if int(start_ns[p]) >= 0 and int(dur_ns[p]) > 0]
    if timed:
        begin, pos = max(timed)
        end = begin + int(dur_ns[pos])
        inside = (start_ns >= begin) & (np.arange(len(ids)) != pos)
        reached = int((start_ns[inside] + np.maximum(dur_ns[inside], 0)).max(initial=begin))
        share = (reached - begin) / (end - begin)
        if share < UNFINISHED:
            out.append(
                f"looks cut short: {steps[pos]} lasts {(end - begin) / 1e3:,.0f} µs but "
                f"its recorded work stops after {max(share, 0.0):.0%} of it; the file states "
                "no node_count to check it against"
            )
    return out
