"""The sweep's results table: every plan parameter and every figure, ranked by throughput.

Rows come from the journal. Feasible plans (they fit in memory) rank first, by tokens/s/GPU
(ties by shorter step, then the plan key, so the order is stable); plans that do not fit
follow (simulated ones first, then those only sized, by memory); plans that failed are
listed last with their error. Written as CSV (standard
library) or Parquet (`.parquet`, with the `parquet` extra's pyarrow), atomically.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from lumos.errors import MissingExtraError
from lumos.outputs import atomic_write
from lumos.simulator.sweep.evaluate import FIGURES

PLAN_COLUMNS = (
    "tp",
    "pp",
    "vp",
    "cp",
    "dp",
    "ep",
    "mbs",
    "gbs",
    "seq",
    "zero",
    "precision",
    "recompute",
    "sequence_parallel",
    "tp_comm_overlap",
    "overlap_grad_reduce",
    "overlap_param_gather",
    "flash_attention",
    "framework",
)
COLUMNS = ("rank", "key", *PLAN_COLUMNS, *FIGURES, "error")


def ranked(rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows sorted best first (see module doc), each with its 1-based `rank`."""

    def order(row: dict[str, Any]) -> tuple[int, float, float, str]:
        if row.get("error"):
            return (3, 0.0, 0.0, row["key"])
        if row.get("tokens_per_s_per_gpu") is None:  # did not fit, not simulated
            return (2, float(row.get("memory_gb_per_gpu", 0.0)), 0.0, row["key"])
        return (
            0 if row.get("fits") else 1,
            -float(row["tokens_per_s_per_gpu"]),
            float(row["iteration_time_s"]),
            row["key"],
        )

    out = sorted(rows, key=order)
    return [{**row, "rank": i} for i, row in enumerate(out, start=1)]


def write_atomic(path: Path, data: bytes) -> None:
    """`path` holds `data` whole or is untouched (`lumos.outputs.atomic_write`: through a
    symlink, never over a device, a killed run's temporary swept by the next writer).

    Raises OutputError on a full disk, a read-only folder or a folder in the way.
    """
    with atomic_write(path) as out:
        out.write(data)


def write_table(rows: list[dict[str, Any]], path: Path, columns: tuple[str, ...] = COLUMNS) -> None:
    """Write ranked `rows` to `path` (.csv or .parquet). Raises MissingExtraError for
    Parquet without pyarrow."""
    if path.suffix == ".parquet":
        try:
            import pyarrow as pa
            import pyarrow.parquet as pq
        except ImportError:
            raise MissingExtraError("pyarrow", "parquet") from None
        table = pa.table({c: [r.get(c) for r in rows] for c in columns})
        sink = pa.BufferOutputStream()
        pq.write_table(table, sink)
        write_atomic(path, sink.getvalue().to_pybytes())
        return
    text = io.StringIO()
    writer = csv.DictWriter(text, fieldnames=columns, extrasaction="ignore", lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({c: _cell(row.get(c)) for c in columns})
    write_atomic(path, text.getvalue().encode())


def _cell(value: Any) -> Any:
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else value
