"""`lumos et ...` end to end on real fixtures: counts, exit codes, outputs."""

from __future__ import annotations

import json
from pathlib import Path

from click.testing import CliRunner

from lumos import __version__
from lumos.cli.main import cli
from tests.conftest import fixture_path

RESNET = "astra-sim/inputs/workload/ASTRA-sim-2.0/resnet_dp.tar"
T2D = "astra-sim-artifacts/examples/T2D-analytical/trace"


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    return result.exit_code, result.output


def test_version() -> None:
    code, out = run("--version")
    assert code == 0 and __version__ in out


def test_version_is_the_installed_packages() -> None:
    """`lumos.__version__` is written out (no importlib.metadata at start-up): it must
    stay equal to pyproject's version, as installed."""
    from importlib.metadata import version

    assert __version__ == version("lumos")


def test_info_json_reports_true_counts(chakra_et: Path) -> None:
    code, out = run("et", "info", str(chakra_et), "--json")
    assert code == 0
    (info,) = json.loads(out)["result"]["traces"]
    assert info["total_nodes"] == 3664
    assert info["by_type"] == {"COMM_COLL_NODE": 21, "COMP_NODE": 3643}
    comm = info["communication"]
    assert comm["ALL_REDUCE"]["count"] == 5 and comm["BROADCAST"]["count"] == 2
    assert comm["UNKNOWN"] == {"count": 14, "bytes": 0, "unsized": 14}
    assert info["ranks"][0]["schema"] == "1.0.1"


def test_info_on_tar_and_t2d() -> None:
    code, out = run("et", "info", str(fixture_path(RESNET)), str(fixture_path(T2D)), "--json")
    assert code == 0
    resnet, t2d = json.loads(out)["result"]["traces"]
    assert resnet["num_ranks"] == 64 and resnet["total_nodes"] == 13760
    assert resnet["communication"]["ALL_REDUCE"] == {"count": 3456, "bytes": 0, "unsized": 3456}
    assert t2d["num_ranks"] == 16 and t2d["total_nodes"] == 48
    assert t2d["ranks"][5]["process_groups"]


def test_info_human_output_mentions_ranks() -> None:
    code, out = run(
        "et",
        "info",
        str(fixture_path("astra-sim/examples/workload/microbenchmarks/all_gather/16npus_1MB")),
    )
    assert code == 0 and "16 rank(s)" in out and "ALL_GATHER" in out


def test_validate_exit_codes() -> None:
    code, out = run("et", "validate", str(fixture_path(T2D)))
    assert code == 0 and "16 file(s), 48 nodes: OK" in out
    code, out = run("et", "validate", str(fixture_path(RESNET)), "--json")
    assert code == 1
    report = json.loads(out)["result"]
    assert report["errors"] == 3456
    assert {p["code"] for p in report["problems"]} == {"comm-size-missing"}


def test_unreadable_input_exit_code(tmp_path: Path) -> None:
    (tmp_path / "bad.0.et").write_bytes(b"\x05ab")
    code, out = run("et", "info", str(tmp_path / "bad.0.et"))
    assert code == 3 and "truncated message" in out


def test_to_json_from_json_and_graph(tmp_path: Path) -> None:
    et = fixture_path(
        "astra-sim/examples/system/custom_collectives/custom_ring_allreduce_8npus_1MB/custom_allreduce.0.et"
    )
    code, _ = run("et", "to-json", str(et), "-o", str(tmp_path / "a.jsonl"))
    assert code == 0
    code, _ = run("et", "from-json", str(tmp_path / "a.jsonl"), "-o", str(tmp_path / "a.0.et"))
    assert code == 0 and (tmp_path / "a.0.et").read_bytes() == et.read_bytes()
    code, out = run("et", "graph", str(et), "-o", str(tmp_path / "g.graphml"))
    assert code == 0 and "35 nodes" in out
    code, out = run("et", "graph", str(et), "-o", str(tmp_path / "g.dot"))
    assert code == 0 and (tmp_path / "g.dot").read_text().startswith("digraph")
    code, out = run("et", "graph", str(et), "-o", str(tmp_path / "h.dot"), "--max-nodes", "10")
    assert code == 5 and "more than 10 nodes" in out


def test_hw_help_lists_every_shipped_system_without_the_loader() -> None:
    """`--hw` help lists the systems from the folder (the YAML loader stays unimported)."""
    from lumos.cli.options import shipped_systems
    from lumos.hwconfigs.load import shipped_names

    assert shipped_systems() == shipped_names("systems") and "h100" in shipped_systems()
