"""ASTRA-sim config files: the repository's own examples load, round-trip, and bad files are refused."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from lumos.converters.astra_sim.config import (
    AstraCommGroups,
    AstraMemoryConfig,
    AstraTopology,
    CollectiveOptimization,
    MemoryType,
    SchedulingPolicy,
)
from lumos.converters.astra_sim.config_files import (
    dump_astra_comm_groups,
    dump_astra_memory,
    dump_astra_network,
    dump_astra_system,
    load_astra_comm_groups,
    load_astra_memory,
    load_astra_network,
    load_astra_system,
    system_from_dict,
)
from lumos.errors import ConfigError
from tests.astra_cases import RING_4CHUNKS
from tests.conftest import fixture_path

HGX_SYSTEM = "astra-sim/examples/system/native_collectives/HGX-H100-validated.json"
HGX_NETWORK = "astra-sim/examples/network/analytical/HGX-H100-validated.yml"
NO_MEMORY = "astra-sim/examples/remote_memory/analytical/no_memory_expansion.json"


def test_hgx_h100_example_loads() -> None:
    system = load_astra_system(fixture_path(HGX_SYSTEM))
    assert system.scheduling_policy is SchedulingPolicy.LIFO
    assert system.active_chunks_per_dimension == 2
    assert system.preferred_dataset_splits == 4
    assert system.collective_optimization is CollectiveOptimization.LOCAL_BW_AWARE
    assert system.local_mem_bw_gbps == 3350
    assert system.all_reduce_implementation == ("ring",)
    network = load_astra_network(fixture_path(HGX_NETWORK))
    assert network.topology == (AstraTopology.SWITCH,)
    assert network.npus_count == (8,)
    assert network.bandwidth_gbps == (400.0,)
    assert network.latency_ns == (936.25,)
    assert network.num_npus == 8
    memory = load_astra_memory(fixture_path(NO_MEMORY))
    assert memory.memory_type is MemoryType.NO_MEMORY_EXPANSION


def test_round_trip_writes_every_key(tmp_path: Path) -> None:
    system = load_astra_system(fixture_path(HGX_SYSTEM))
    dump_astra_system(system, tmp_path / "system.json")
    written = json.loads((tmp_path / "system.json").read_text())
    assert written["roofline-enabled"] == 0 and "peak-perf" in written
    assert written["boost-mode"] == 0
    assert load_astra_system(tmp_path / "system.json") == system
    network = load_astra_network(fixture_path(HGX_NETWORK))
    dump_astra_network(network, tmp_path / "network.yml")
    assert (tmp_path / "network.yml").read_text().splitlines()[0] == "topology: [ Switch ]"
    assert load_astra_network(tmp_path / "network.yml") == network
    dump_astra_memory(AstraMemoryConfig(), tmp_path / "memory.json")
    assert json.loads((tmp_path / "memory.json").read_text()) == {
        "memory-type": "NO_MEMORY_EXPANSION"
    }
    groups = AstraCommGroups(((1, (0, 1, 2, 3)), (2, (4, 5, 6, 7))))
    dump_astra_comm_groups(groups, tmp_path / "comm_group.json")
    assert json.loads((tmp_path / "comm_group.json").read_text()) == {
        "1": [0, 1, 2, 3],
        "2": [4, 5, 6, 7],
    }
    assert load_astra_comm_groups(tmp_path / "comm_group.json") == groups


def test_unknown_system_key_names_file_and_suggests(tmp_path: Path) -> None:
    path = tmp_path / "sys.json"
    path.write_text(json.dumps({**RING_4CHUNKS, "endpoint-dealy": 10}))
    with pytest.raises(
        ConfigError,
        match=r"sys\.json: unknown system key 'endpoint-dealy'; did you mean 'endpoint-delay'",
    ):
        load_astra_system(path)


def test_missing_and_bad_values_are_refused() -> None:
    missing = {k: v for k, v in RING_4CHUNKS.items() if k != "preferred-dataset-splits"}
    with pytest.raises(ConfigError, match=r"missing system key.*preferred-dataset-splits"):
        system_from_dict(missing, "s.json")
    with pytest.raises(ConfigError, match="preferred-dataset-splits must be >= 1"):
        system_from_dict({**RING_4CHUNKS, "preferred-dataset-splits": 0}, "s.json")
    with pytest.raises(ConfigError, match="did you mean 'ring'"):
        system_from_dict({**RING_4CHUNKS, "all-reduce-implementation": ["rign"]}, "s.json")
    with pytest.raises(ConfigError, match="same length"):
        system_from_dict({**RING_4CHUNKS, "all-gather-implementation": ["ring", "ring"]}, "s.json")
    assert (
        system_from_dict({**RING_4CHUNKS, "all-to-all-implementation": ["direct8"]}).num_dims == 1
    )


def test_network_and_groups_errors(tmp_path: Path) -> None:
    net = tmp_path / "n.yml"
    net.write_text("topology: [Ring]\nnpus_count: [8]\nbandwidth: [50]\nlatancy: [500]\n")
    with pytest.raises(
        ConfigError, match=r"n\.yml: unknown network key 'latancy'; did you mean 'latency'"
    ):
        load_astra_network(net)
    net.write_text("topology: [Ring, Switch]\nnpus_count: [8]\nbandwidth: [50]\nlatency: [500]\n")
    with pytest.raises(ConfigError, match="one entry per dimension"):
        load_astra_network(net)
    groups = tmp_path / "g.json"
    groups.write_text('{"0": [0, 1]}')
    with pytest.raises(ConfigError, match="reserved"):
        load_astra_comm_groups(groups)


def test_astra_config_fifo_is_refused_not_read(tmp_path: Path) -> None:
    """Was: a FIFO named as system.json / network.yml / comm groups blocked the read
    forever (`Path.read_text` on a pipe nobody writes)."""
    import os

    from lumos.converters.astra_sim.config_files import load_pg_ranks

    fifo = tmp_path / "network.yml"
    os.mkfifo(fifo)
    for load in (load_astra_network, load_astra_system, load_astra_comm_groups, load_pg_ranks):
        with pytest.raises(ConfigError, match="is a device, FIFO or socket"):
            load(fifo)


def test_astra_network_yaml_past_the_config_size_limit_is_refused(tmp_path: Path) -> None:
    """Was: the analytical network YAML had no size cap (every other config has
    LUMOS_MAX_CONFIG_BYTES); a 2 MB file of one long list was parsed whole."""
    from lumos.errors import ResourceLimitError

    big = tmp_path / "network.yml"
    real = fixture_path(HGX_NETWORK).read_text()
    big.write_text(real + "# " + "x" * (2 << 20) + "\n")
    with pytest.raises(ResourceLimitError, match="LUMOS_MAX_CONFIG_BYTES"):
        load_astra_network(big)
    small = tmp_path / "ok.yml"
    small.write_text(real)
    assert (
        load_astra_network(small).npus_count
        == load_astra_network(fixture_path(HGX_NETWORK)).npus_count
    )


@pytest.mark.parametrize(
    ("value", "key"),
    [
        ("bandwidth: [5.0e-5]", "bandwidth"),  # GB/s written as PB/s
        ("bandwidth: [4.0e+11]", "bandwidth"),  # bit/s
        ("latency: [5.0e-7]", "latency"),  # seconds
        ("latency: [1.0e+300]", "latency"),
    ],
)
def test_network_figures_in_other_units_are_refused(tmp_path: Path, value: str, key: str) -> None:
    """Before: `simulate --mode astra` priced a 5e-5 GB/s ring (exit 0, every compute
    share 0.0 %), and `export` copied it into a bundle whose own pre-flight then refused
    the `5e-05` it wrote (YAML 1.1 reads it as text)."""
    net = tmp_path / "n.yml"
    good = {"bandwidth": "bandwidth: [50.0]", "latency": "latency: [500.0]"}
    good[key] = value
    net.write_text("topology: [Ring]\nnpus_count: [2]\n" + "\n".join(good.values()) + "\n")
    with pytest.raises(ConfigError, match=rf"n\.yml: {key} is .*, outside .* is it in other units"):
        load_astra_network(net)


def test_network_yaml_floats_read_back_as_numbers(tmp_path: Path) -> None:
    """`str(1e-05)` is `1e-05`, which YAML 1.1 (PyYAML) reads as text; written with a
    point and a signed exponent it is a float to both PyYAML and yaml-cpp."""
    import yaml

    from lumos.converters.astra_sim.config import AstraNetworkConfig

    net = AstraNetworkConfig((AstraTopology.RING,), (2,), (1e-05,), (1e16,))
    dump_astra_network(net, tmp_path / "n.yml")
    data = yaml.safe_load((tmp_path / "n.yml").read_text())
    assert data["bandwidth"] == [1e-05] and data["latency"] == [1e16]
