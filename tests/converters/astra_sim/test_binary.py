"""Exported bundles run on the real ASTRA-sim binary (built from ../shared/tools/astra-sim):
every rank finishes, and lumos's astra mode gives the binary's per-rank finish times."""

from __future__ import annotations

import json
import os
import stat
import subprocess
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.export import simulate_bundle
from lumos.cli.main import cli
from lumos.converters.astra_sim.binary import run_bundle
from lumos.converters.astra_sim.config_files import load_astra_network
from lumos.converters.astra_sim.workload import ExportOptions
from lumos.converters.chakra.stream import read_et, write_et
from lumos.proto import pb
from tests.astra_cases import RING_SYSTEM
from tests.conftest import DATA, fixture_path
from tests.converters.astra_sim.test_export import (
    MICRO,
    RING,
    T2D,
    T2D_GROUPS,
    all_reduce,
    export,
    node,
    write_trace,
)

UNAWARE = "congestion-unaware"
FIXTURES = [
    *[(MICRO.format(kind=k, n=n), None) for k in ("all_reduce", "all_to_all") for n in (4, 16)],
    *[(MICRO.format(kind=k, n=n), None) for k in ("all_gather", "reduce_scatter") for n in (8,)],
    (RING, None),
    (T2D, T2D_GROUPS),
]


def both(bundle: Path, binary: str, ranks: int) -> tuple[list[int], list[int]]:
    """(binary's finish per rank, astra mode's finish per rank) on one bundle."""
    real = run_bundle(bundle, binary, ranks).finish_ns
    ours, _ = simulate_bundle(bundle)
    return real, ours


@pytest.mark.parametrize(("trace", "groups"), FIXTURES, ids=lambda v: str(v).split("/")[-1])
def test_fixture_bundles_equal_the_binary_per_rank(
    trace: str, groups: str | None, astra_bin: dict[str, str], tmp_path: Path
) -> None:
    kw = {"comm_groups_file": fixture_path(groups)} if groups else {}
    summary = export(fixture_path(trace), tmp_path / "b", **kw)
    real, ours = both(tmp_path / "b", astra_bin[UNAWARE], summary.ranks)
    assert min(real) > 0 and ours == real


def test_pipeline_capture_equals_the_binary_per_rank(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """gloo send/recv between two stages, CPU gaps as delay nodes: exact per rank (75.6 /
    50.8 ms before the receives of the previous step's sends were dropped)."""
    convert = pytest.importorskip("lumos.converters.pytorch.convert").convert
    convert([DATA / "captures" / "pipeline"], tmp_path / "et", prefix="pipeline")
    export(tmp_path / "et", tmp_path / "b")
    real, ours = both(tmp_path / "b", astra_bin[UNAWARE], 2)
    assert real == ours == [63_256_288, 50_839_644]


@pytest.mark.parametrize("capture", ["ddp", "fsdp"])
def test_gloo_collective_captures_with_uneven_arrivals_equal_the_binary(
    capture: str, astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """Ranks reach each all-reduce at different times; the binary finishes the members one
    after another by ring position and astra mode does the same, exactly."""
    convert = pytest.importorskip("lumos.converters.pytorch.convert").convert
    convert([DATA / "captures" / capture], tmp_path / "et", prefix=capture)
    export(tmp_path / "et", tmp_path / "b")
    real, ours = both(tmp_path / "b", astra_bin[UNAWARE], 2)
    assert ours == real and real[0] != real[1]


@pytest.mark.parametrize("splits", [1, 4])
def test_uneven_arrivals_end_members_one_after_another(
    splits: int, astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """8 ranks, ranks 2 and 5 late by 7 and 3 µs, one all-reduce: per-rank finishes differ
    and equal the binary's."""
    ranks = []
    for rank in range(8):
        late = {2: 7, 5: 3}.get(rank, 0)
        nodes = [node(1, "k", pb.COMP_NODE, dur_us=late, stream=7)] if late else []
        nodes.append(all_reduce(2, size=1 << 20, deps=(1,) if late else ()))
        ranks.append(nodes)
    trace = write_trace(tmp_path / "in", ranks)
    system = json.loads(json.dumps(RING_SYSTEM))
    system["preferred-dataset-splits"] = splits
    (tmp_path / "s.json").write_text(json.dumps(system))
    (tmp_path / "n.yml").write_text(
        "topology: [ Ring ]\nnpus_count: [ 8 ]\nbandwidth: [ 50 ]\nlatency: [ 500 ]\n"
    )
    export(
        trace,
        tmp_path / "b",
        hw=None,
        system_file=tmp_path / "s.json",
        network_file=tmp_path / "n.yml",
    )
    real, ours = both(tmp_path / "b", astra_bin[UNAWARE], 8)
    assert ours == real and len(set(real)) >= 3


def _by_duration_trace(folder: Path) -> Path:
    """Two ranks: a GATHER (replayed) and a BROADCAST of different recorded durations per
    rank, then a barrier and an all-reduce, between GPU kernels."""
    ranks = []
    for rank, (gather_us, bcast_us) in enumerate([(3, 5), (9, 2)]):
        ranks.append(
            [
                node(1, "k1", pb.COMP_NODE, dur_us=2 + rank, stream=7),
                node(2, "gather", pb.COMM_COLL_NODE, (1,), comm_type=pb.GATHER, dur_us=gather_us),
                node(3, "bcast", pb.COMM_COLL_NODE, (2,), comm_type=pb.BROADCAST, dur_us=bcast_us),
                node(4, "barrier", pb.COMM_COLL_NODE, (3,), comm_type=pb.BARRIER, dur_us=1),
                node(5, "k2", pb.COMP_NODE, (4,), dur_us=4, stream=7),
                all_reduce(6, size=1 << 20, deps=(5,)),
            ]
        )
    return write_trace(folder, ranks)


def test_by_duration_collectives_wait_each_ranks_own_time_on_the_binary(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    trace = _by_duration_trace(tmp_path / "in")
    options = ExportOptions(replay_unsupported_comms=True)
    export(trace, tmp_path / "b", options=options)
    real, ours = both(tmp_path / "b", astra_bin[UNAWARE], 2)
    assert ours == real
    # before the barrier rank 0 spent 2+3+5 µs and rank 1 3+9+2 µs (no sync on the
    # replayed collectives); the barrier's all-reduce then ends rank 0 first
    assert real[0] < real[1]


@pytest.mark.parametrize("policy", ["LIFO", "FIFO"])
def test_scheduling_policies_equal_the_binary(
    policy: str, astra_bin: dict[str, str], tmp_path: Path
) -> None:
    trace = _by_duration_trace(tmp_path / "in")
    export(trace, tmp_path / "b0", options=ExportOptions(replay_unsupported_comms=True))
    system = json.loads((tmp_path / "b0" / "system.json").read_text())
    system["scheduling-policy"] = policy
    (tmp_path / "sys.json").write_text(json.dumps(system))
    export(
        trace,
        tmp_path / "b",
        system_file=tmp_path / "sys.json",
        options=ExportOptions(replay_unsupported_comms=True),
    )
    real, ours = both(tmp_path / "b", astra_bin[UNAWARE], 2)
    assert ours == real


def test_congestion_aware_bundle_is_one_dimensional_and_equal_per_rank(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """16 ranks on h100 (two 8-GPU nodes) are 2-D for congestion-unaware; the
    congestion-aware binary rejects that, so the export writes one Switch of 16, and
    astra mode times it message by message on links like the binary."""
    trace = fixture_path(MICRO.format(kind="all_reduce", n=16))
    summary = export(trace, tmp_path / "b", backend="congestion-aware")
    network = load_astra_network(tmp_path / "b" / "network.yml")
    assert network.npus_count == (16,) and network.num_dims == 1
    assert any("congestion-aware backend (1-D only)" in n for n in summary.notes)
    real = run_bundle(tmp_path / "b", astra_bin["congestion-aware"], 16).finish_ns
    ours, _ = simulate_bundle(tmp_path / "b", "congestion-aware")
    assert ours == real == [112_918] * 16
    script = (tmp_path / "b" / "run.sh").read_text()
    assert "AstraSim_Analytical_Congestion_Aware" in script


@pytest.mark.parametrize(("trace", "groups"), FIXTURES[:3] + FIXTURES[-2:], ids=str)
def test_congestion_aware_fixture_bundles_equal_the_binary(
    trace: str, groups: str | None, astra_bin: dict[str, str], tmp_path: Path
) -> None:
    kw = {"comm_groups_file": fixture_path(groups)} if groups else {}
    summary = export(fixture_path(trace), tmp_path / "b", backend="congestion-aware", **kw)
    real = run_bundle(tmp_path / "b", astra_bin["congestion-aware"], summary.ranks).finish_ns
    ours, _ = simulate_bundle(tmp_path / "b", "congestion-aware")
    assert min(real) > 0 and ours == real


def test_congestion_aware_uneven_arrivals_and_by_duration(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    trace = _by_duration_trace(tmp_path / "in")
    options = ExportOptions(replay_unsupported_comms=True)
    export(trace, tmp_path / "b", options=options, backend="congestion-aware")
    real = run_bundle(tmp_path / "b", astra_bin["congestion-aware"], 2).finish_ns
    ours, _ = simulate_bundle(tmp_path / "b", "congestion-aware")
    assert ours == real and real[0] < real[1]


def _run_sh(bundle: Path, binary: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "ASTRA_SIM_BIN": binary}
    return subprocess.run(
        ["bash", str(bundle / "run.sh")], capture_output=True, text=True, env=env, check=False
    )


def test_run_sh_prints_the_step_time_and_fails_when_a_rank_never_finishes(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    export(fixture_path(MICRO.format(kind="all_reduce", n=4)), tmp_path / "b")
    ok = _run_sh(tmp_path / "b", astra_bin[UNAWARE])
    assert ok.returncode == 0, ok.stderr
    assert "all 4 ranks finished; step time 4897 ns" in ok.stdout
    # hand-edit rank 2: its all-reduce gets another size; the members never match, the
    # binary exits 0 with ranks unfinished
    path = tmp_path / "b" / "workload" / "all_reduce.2.et"
    meta, nodes = read_et(path)
    for attr in nodes[0].attr:
        if attr.name == "comm_size":
            attr.int64_val = 12345
    write_et(path, meta, nodes)
    bad = _run_sh(tmp_path / "b", astra_bin[UNAWARE])
    assert bad.returncode == 3, bad.stderr
    assert "never finished (ranks" in bad.stderr


def test_run_sh_prefix_with_spaces_and_command_substitution_is_inert(tmp_path: Path) -> None:
    """Issue 11, item 1: the workload prefix comes from file names; `a$(touch X) b` must
    reach ASTRA-sim as one argument and run nothing."""
    prefix = "a$(touch PWNED) b"
    trace = write_trace(tmp_path / "in", [[all_reduce(1)], [all_reduce(1)]], prefix=prefix)
    export(trace, tmp_path / "b")
    fake = tmp_path / "fake_astra.sh"
    fake.write_text(
        "#!/usr/bin/env bash\n"
        'printf "%s\\n" "$@" > "$(dirname "$0")/argv.txt"\n'
        'ls "workload/${1#--workload-configuration=workload/}".0.et >/dev/null || exit 9\n'
        'echo "sys[0] finished, 10 cycles, exposed communication 10 cycles."\n'
        'echo "sys[1] finished, 12 cycles, exposed communication 12 cycles."\n'
    )
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    done = _run_sh(tmp_path / "b", str(fake))
    assert done.returncode == 0, done.stderr
    assert "step time 12 ns" in done.stdout
    argv = (tmp_path / "argv.txt").read_text().splitlines()
    assert argv[0] == f"--workload-configuration=workload/{prefix}"
    assert not list(tmp_path.rglob("PWNED"))


def test_cli_run_reports_astra_sim_vs_lumos_per_rank(
    astra_bin: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ASTRA_SIM_BIN", astra_bin[UNAWARE])
    trace = str(fixture_path(MICRO.format(kind="all_gather", n=8)))
    out = tmp_path / "b"
    done = CliRunner().invoke(
        cli, ["export", "astra-sim", trace, "-o", str(out), "--hw", "h100", "--run"]
    )
    assert done.exit_code == 0, done.output
    assert "8 of 8 ranks identical" in done.output
    assert done.output.count("ASTRA-sim          9,222  lumos          9,222  +0.0000%") == 8


@pytest.mark.parametrize(
    "kinds",
    [(pb.ALL_REDUCE,), (pb.ALL_GATHER, pb.REDUCE_SCATTER, pb.ALL_TO_ALL, pb.ALL_REDUCE)],
    ids=["all_reduce", "mixed"],
)
def test_two_dimensional_uneven_arrivals_equal_the_binary(
    kinds: tuple[int, ...], astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """16 ranks on two h100 nodes (Switch 8 x Switch 2): each chunk runs a ring per line
    of each dimension (an all-reduce's closing all-gather the other way round), so late
    ranks 3 and 12 spread their delay to their lines first."""
    ranks = []
    for rank in range(16):
        late = {3: 7, 12: 2}.get(rank, 0)
        nodes = [node(1, "k", pb.COMP_NODE, dur_us=late, stream=7)] if late else []
        deps: tuple[int, ...] = (1,) if late else ()
        for nid, kind in enumerate(kinds, start=2):
            nodes.append(
                node(nid, f"c{nid}", pb.COMM_COLL_NODE, deps, comm_type=kind, comm_size=1 << 20)
            )
            deps = (nid,)
        ranks.append(nodes)
    trace = write_trace(tmp_path / "in", ranks)
    export(trace, tmp_path / "b")
    assert load_astra_network(tmp_path / "b" / "network.yml").npus_count == (8, 2)
    real, ours = both(tmp_path / "b", astra_bin[UNAWARE], 16)
    assert ours == real and len(set(real)) >= 8


def test_rerun_of_a_bundle_the_binary_ran_replaces_it(
    astra_bin: dict[str, str], tmp_path: Path
) -> None:
    """The binary writes its logs to a temporary folder, not `log/` in the bundle, so the
    bundle holds only what the export wrote and `--force` (the benchmark's rerun) replaces it."""
    trace = fixture_path(MICRO.format(kind="all_reduce", n=4))
    summary = export(trace, tmp_path / "b")
    first = run_bundle(tmp_path / "b", astra_bin[UNAWARE], summary.ranks).finish_ns
    assert not (tmp_path / "b" / "log").exists()
    export(trace, tmp_path / "b", force=True)
    assert run_bundle(tmp_path / "b", astra_bin[UNAWARE], summary.ranks).finish_ns == first
