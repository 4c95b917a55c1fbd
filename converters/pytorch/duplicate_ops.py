"""GPU op records that a Kineto trace holds twice.

A stream runs one op at a time, so two records of the same op (same stream, start,
duration, name and correlation) are one execution written twice — by a profiler that
flushed a CUPTI buffer twice, or a trace merged from overlapping windows. Replaying both
ran the op twice back to back and pushed everything queued behind it late by its
duration; the first record is kept and the rest counted (`duplicate_gpu_ops`).
"""

from __future__ import annotations

import numpy as np

from lumos.converters.pytorch.kineto import KinetoTrace


def first_records(trace: KinetoTrace, rows: np.ndarray) -> np.ndarray:
    """Positions in `rows` (GPU ops' Kineto rows) of the first record of each op, in order."""
    if len(rows) < 2:
        return np.arange(len(rows))
    cols = (trace.tid, trace.ts, trace.dur, trace.name, trace.corr)
    keys = np.stack([c[rows].astype(np.int64) for c in cols], axis=1)
    _, first = np.unique(keys, axis=0, return_index=True)
    return np.sort(first)
