"""The documented exit codes: one table in --help and the docs, used by every failure.

Each case is one of the tracebacks hostile input used to produce, now one error line
with its documented code.
"""

from __future__ import annotations

import json
import tarfile
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.exits import EXIT_CODES, exit_code, exit_codes_markdown
from lumos.cli.main import cli
from lumos.errors import OutputError, RankSetError, ResourceLimitError, TraceFormatError
from tests.conftest import REPO, fixture_path
from tests.converters.chakra.test_rank_sets import write_set


def run(*args: str) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args))
    assert "Traceback" not in result.output
    return result.exit_code, result.output


def test_help_and_docs_show_the_same_table() -> None:
    code, text = run("--help")
    assert code == 0
    for number, meaning in EXIT_CODES:
        assert f"{number:>3}  {meaning}" in text
    assert (REPO / "docs" / "exit-codes.md").read_text() == exit_codes_markdown()


@pytest.mark.parametrize(
    ("exc", "code"),
    [
        (RankSetError(["x"]), 1),
        (TraceFormatError("f", "bad"), 3),
        (OutputError("full"), 6),
        (ResourceLimitError("world size", 10**9, 10, "LUMOS_MAX_RANKS"), 7),
        (KeyboardInterrupt(), 130),
        (ZeroDivisionError(), 70),
    ],
)
def test_each_error_class_has_its_code(exc: BaseException, code: int) -> None:
    assert exit_code(exc) == code


def test_list_shaped_comm_group_json_is_a_config_error(tmp_path: Path) -> None:
    write_set(tmp_path / "set", 2)
    groups = tmp_path / "groups.json"
    groups.write_text(json.dumps([[0, 1]]))
    code, out = run("simulate", str(tmp_path / "set" / "t"), "--comm-groups", str(groups))
    assert code == 4 and "expected an object" in out


@pytest.mark.parametrize(
    ("text", "message"),
    [
        (b"name: x\nnode: hgx_h100\nfabric: ndr_rail_fat_tree\nnum_nodes: .nan\n", "num_nodes"),
        (b"\xff\xfe not utf-8", "not UTF-8"),
    ],
)
def test_nan_and_non_utf8_hw_configs_are_config_errors(
    tmp_path: Path, text: bytes, message: str
) -> None:
    write_set(tmp_path / "set", 2)
    hw = tmp_path / "hw.yaml"
    hw.write_bytes(text)
    code, out = run("simulate", str(tmp_path / "set" / "t"), "--hw", str(hw))
    assert code == 4 and message in out


def test_astra_active_chunks_bomb_is_a_limit(tmp_path: Path) -> None:
    system = json.loads(
        fixture_path(
            "astra-sim/examples/system/native_collectives/HGX-H100-validated.json"
        ).read_text()
    )
    system["active-chunks-per-dimension"] = 10**9
    path = tmp_path / "system.json"
    path.write_text(json.dumps(system))
    write_set(tmp_path / "set", 2)
    code, out = run(
        "export", "astra-sim", str(tmp_path / "set" / "t"), "--hw", "h100",
        "--astra-sim-system", str(path), "-o", str(tmp_path / "b"),
    )  # fmt: skip
    assert code == 7 and "LUMOS_MAX_CHUNKS" in out and not (tmp_path / "b").exists()


def test_truncated_plain_tar_is_one_error(tmp_path: Path) -> None:
    folder = write_set(tmp_path / "set", 2)
    archive = tmp_path / "set.tar"
    with tarfile.open(archive, "w") as tar:
        for p in sorted(folder.iterdir()):
            tar.add(p, arcname=p.name)
    archive.write_bytes(archive.read_bytes()[:700])
    code, out = run("et", "validate", str(archive))
    assert code in (1, 3) and "set.tar" in out


def test_time_past_64_bits_is_a_simulation_error(tmp_path: Path) -> None:
    """Found by the fuzz harness: a 1e300 ns latency overflowed the scheduler's arrays.
    Such a network file is now refused when read (exit 4, a latency outside the band
    hardware has); two chained kernels of the longest duration that fits 64-bit ns each
    still reach the clock's own guard."""
    from lumos.simulator.graph_build import MAX_DURATION_US
    from tests.converters.astra_sim.test_export import gpu, write_trace

    network = tmp_path / "network.yml"
    network.write_text(
        "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50.0]\nlatency: [1.0e+300]\n"
    )
    write_set(tmp_path / "set", 2)
    system = fixture_path("astra-sim/examples/system/native_collectives/HGX-H100-validated.json")
    code, out = run(
        "simulate", str(tmp_path / "set" / "t"),
        "--astra-sim-system", str(system), "--astra-sim-network", str(network),
    )  # fmt: skip
    assert code == 4 and "latency is 1e+300, outside the 1 to 1e+09 ns" in out, out
    long = [gpu(1, dur_us=MAX_DURATION_US), gpu(2, dur_us=MAX_DURATION_US, deps=(1,))]
    code, out = run("simulate", str(write_trace(tmp_path / "long", [long, long])))
    assert code == 5 and "exceeds 64-bit nanoseconds" in out, out


def test_gzip_bomb_stops_at_the_ratio_limit(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Issue 11 item 7: a small .json.gz / .et.gz expanding to gigabytes. The ratio is
    checked once past GZIP_RATIO_AFTER (64 MB; lowered here to keep the file small)."""
    import gzip

    from lumos.converters.chakra import compressed

    monkeypatch.setattr(compressed, "GZIP_RATIO_AFTER", 1 << 20)
    kineto = tmp_path / "k"
    kineto.mkdir()
    (kineto / "rank0.kineto.json.gz").write_bytes(
        gzip.compress(b'{"traceEvents":[' + b" " * (8 << 20) + b"]}")
    )
    code, out = run("convert", str(kineto), "-o", str(tmp_path / "out"))
    assert code == 7 and "gzip expansion ratio" in out and "LUMOS_MAX_GZIP_RATIO" in out
    assert not (tmp_path / "out").exists()
    folder = write_set(tmp_path / "set", 1)
    et = folder / "t.0.et"
    gz = folder / "t.0.et.gz"
    gz.write_bytes(gzip.compress(et.read_bytes() + bytes(8 << 20)))
    et.unlink()
    code, out = run("simulate", str(folder / "t"))
    assert code == 7 and "LUMOS_MAX_GZIP_RATIO" in out


def test_frame_claiming_3_gb_is_refused_from_its_header(tmp_path: Path) -> None:
    """Issue 11 item 7: a .et frame header claiming 3 GB; every reader refuses it before
    allocating (the ET reader of validate / to-json / export, and simulate's)."""
    from lumos.converters.chakra.varint import encode_varint

    folder = write_set(tmp_path / "set", 2)
    path = folder / "t.1.et"
    path.write_bytes(path.read_bytes() + encode_varint(3 << 30) + bytes(64))
    for args in (
        ["simulate", str(folder / "t")],
        ["et", "to-json", str(path), "-o", str(tmp_path / "x.json")],
        ["export", "astra-sim", str(folder / "t"), "--hw", "h100", "-o", str(tmp_path / "b")],
    ):
        code, out = run(*args)
        assert code == 7 and "3,221,225,472" in out and "LUMOS_MAX_FRAME_BYTES" in out, out
    code, out = run("et", "validate", str(folder))
    assert code == 1 and "LUMOS_MAX_FRAME_BYTES" in out  # validate reports it as a problem
