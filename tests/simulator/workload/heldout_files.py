"""The held-out validation files as tests read them: rows, parsed rows, one row's error."""

from __future__ import annotations

import csv
from typing import Any

from lumos.simulator.workload import estimate
from tests.conftest import script_module


def rows(name: str) -> list[dict[str, str]]:
    """The rows of `validate_published.<name>` (HELDOUT2, HELDOUT3, TITAN, ...)."""
    return list(csv.DictReader(getattr(script_module("validate_published"), name).open()))


def parse_all(name: str, count: int, earlier: tuple[str, ...]) -> dict[str, Any]:
    """Every row of file `name` parsed (a Row, or the row's own `no: ...` reason), after
    checking it holds `count` ids, none repeated and none from the `earlier` files."""
    script = script_module("validate_published")
    table = rows(name)
    seen = {r["row_id"] for f in earlier for r in rows(f)}
    ids = [r["row_id"] for r in table]
    assert len(ids) == len(set(ids)) == count and not set(ids) & seen
    parsed = {r["row_id"]: script.parse(r) for r in table}
    for r in table:
        row = parsed[r["row_id"]]
        if isinstance(row, str):
            assert row == r["expressible"] and row.startswith("no: "), r["row_id"]
    return parsed


def check_launch_columns(name: str, parsed: dict[str, Any]) -> None:
    """Each parsed row of a held-out file (HELDOUT3, HELDOUT4, HELDOUT5) keeps
    its stated TP / PP / DP / CP, batch, sequence and micro-batch, fills its GPU count,
    runs on the system its `hwconfig` names (else the H100) and is dense."""
    for r in rows(name):
        row = parsed[r["row_id"]]
        if isinstance(row, str):
            continue
        p = row.plan
        stated = (r["tp"], r["pp"], r["dp"], r["cp"] or "1", r["gbs_seqs"], r["seq_len"], r["mbs"])
        assert tuple(str(v) for v in (p.tp, p.pp, p.dp, p.cp, p.gbs, p.seq, p.mbs)) == stated
        assert p.world == int(r["gpus"]) and row.published_s > 0, r["row_id"]
        assert row.hw == (r.get("hwconfig") or "h100") and not row.model.moe, r["row_id"]


def row_error(name: str, row_id: str) -> float:
    """lumos' estimate of one row over its published step time, minus 1."""
    script = script_module("validate_published")
    row = script.parse(next(r for r in rows(name) if r["row_id"] == row_id))
    return float(estimate(row.model, row.plan, row.hw).iteration_time_s / row.published_s - 1)
