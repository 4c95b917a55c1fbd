"""`lumos estimate -o DIR` writes the distinct ranks' ETs — a partial, self-describing rank
set; `lumos simulate DIR --allow-partial` on them gives the estimate's step time back."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli

ARGS = [
    "--model",
    "llama2-7b",
    "--tp",
    "2",
    "--pp",
    "2",
    "--dp",
    "2",
    "--gbs",
    "8",
    "--seq",
    "2048",
]


def test_written_ets_simulate_to_the_estimated_step(tmp_path: Path) -> None:
    out = tmp_path / "ets"
    est = CliRunner().invoke(cli, ["estimate", *ARGS, "--hw", "h100", "-o", str(out), "--json"])
    assert est.exit_code == 0, est.output
    estimated = json.loads(est.stdout)["result"]["iteration_time_s"]
    written = sorted(p.name for p in out.glob("*.et"))
    # tp 0 / dp 0 of the two stages; a stage is its tp x dp = 4 contiguous ranks (layout)
    assert written == ["estimate.0.et", "estimate.4.et"]
    refused = CliRunner().invoke(cli, ["simulate", str(out), "--hw", "h100"])
    assert refused.exit_code != 0 and "6 of 8 ranks are missing" in refused.output
    args = ["simulate", str(out), "--hw", "h100", "--allow-partial", "--json"]
    sim = CliRunner().invoke(cli, args)
    assert sim.exit_code == 0, sim.output
    simulated = json.loads(sim.stdout)["result"]["iteration_time_ns"] / 1e9
    assert simulated == pytest.approx(estimated, rel=1e-3)
