"""Hostile configs, metadata and limits: one clear error each, fast, never a traceback.

Each case is what the issue-11 audit found still breaking: JSON and YAML nested past
Python's recursion limit (RecursionError, exit 70), a YAML alias bomb (hung), Python
tags and duplicate keys in YAML, `export --comm-groups` reading the file unchecked,
malformed `process_groups` metadata (five different tracebacks in `export`), garbage
`LUMOS_MAX_*` values (silently ignored), and plans past every bound (hung for minutes or
an OverflowError).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.stream import with_node_count, write_et
from lumos.proto import pb
from tests.astra_cases import RING_SYSTEM as SYSTEM
from tests.conftest import REPO
from tests.converters.chakra.test_rank_sets import write_set

DEEP = "[" * 100_000 + "]" * 100_000
NETWORK = "topology: [Ring]\nnpus_count: [2]\nbandwidth: [50.0]\nlatency: [500.0]\n"
H100 = (REPO / "hwconfigs" / "systems" / "h100.yaml").read_text()
#: nine levels of nine aliases: 387 million values from 600 bytes
LAUGHS = (
    "["
    + ", ".join(
        ['&a0 ["lol","lol","lol","lol","lol","lol","lol","lol","lol"]']
        + [f"&a{i} [" + ",".join([f"*a{i - 1}"] * 9) + "]" for i in range(1, 9)]
    )
    + "]"
)


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    return result.exit_code, result.output


@pytest.fixture
def trace(tmp_path: Path) -> str:
    write_set(tmp_path / "set", 2)
    return str(tmp_path / "set" / "t")


def _write(tmp_path: Path, name: str, text: str) -> str:
    path = tmp_path / name
    path.write_text(text)
    return str(path)


def test_json_and_yaml_nested_past_the_recursion_limit(tmp_path: Path, trace: str) -> None:
    system = _write(tmp_path, "system.json", '{"scheduling-policy": ' + DEEP + "}")
    network = _write(tmp_path, "network.yml", NETWORK)
    groups = _write(tmp_path, "groups.json", '{"1": ' + DEEP + "}")
    hw = _write(tmp_path, "hw.yaml", "name: " + "[" * 50_000 + "]" * 50_000 + "\n")
    cases = [
        ["--astra-sim-system", system, "--astra-sim-network", network],
        ["--comm-groups", groups],
        ["--hw", hw],
    ]
    for extra in cases:
        code, out = run("simulate", trace, *extra)
        assert code == 4 and "nested too deeply" in out, out


@pytest.mark.parametrize(
    ("where", "old"),
    [("name", "name: h100"), ("num_nodes", "num_nodes: 64"), ("all_to_all", "all_to_all: direct")],
)
def test_yaml_alias_bomb_is_refused_before_it_expands(
    tmp_path: Path, trace: str, where: str, old: str
) -> None:
    hw = _write(tmp_path, "hw.yaml", H100.replace(old, f"{where}: {LAUGHS}"))
    began = time.process_time()
    code, out = run("simulate", trace, "--hw", hw)
    assert code == 4 and "alias bomb" in out, out
    assert time.process_time() - began < 5  # was: no end (repr of 387M values)


def test_yaml_python_tags_and_repeated_keys(tmp_path: Path, trace: str) -> None:
    marker = tmp_path / "pwned"
    tag = f"!!python/object/apply:os.system ['touch {marker}']"
    hw = _write(tmp_path, "hw.yaml", H100.replace("node: hgx_h100", f"node: {tag}"))
    code, out = run("simulate", trace, "--hw", hw)
    assert code == 4 and "could not determine a constructor" in out and not marker.exists()
    net = _write(tmp_path, "network.yml", NETWORK.replace("[Ring]", tag))
    system = _write(tmp_path, "system.json", json.dumps(SYSTEM))
    code, out = run("simulate", trace, "--astra-sim-system", system, "--astra-sim-network", net)
    assert code == 4 and not marker.exists()
    twice = _write(tmp_path, "twice.yaml", H100 + "num_nodes: 4\n")  # was: 4 taken silently
    code, out = run("simulate", trace, "--hw", twice)
    assert code == 4 and "key 'num_nodes' given twice" in out


@pytest.mark.parametrize(
    "text",
    ["x", "[[0, 1]]", '{"1": "ab"}', '{"1": [1e999]}', '{"1": [0, -1]}', '{"1": [[0]]}', DEEP],
    ids=["not-json", "list", "string", "infinite", "negative", "nested", "deep"],
)
def test_export_checks_a_comm_group_file_like_simulate(
    tmp_path: Path, trace: str, text: str
) -> None:
    """`export --comm-groups` parsed the file unchecked: six of these were exit 70."""
    groups = _write(tmp_path, "groups.json", text)
    for args in (
        ["simulate", trace, "--comm-groups", groups],
        ["export", "astra-sim", trace, "--hw", "h100", "-o", str(tmp_path / "b"),
         "--comm-groups", groups],
    ):  # fmt: skip
        code, out = run(*args)
        assert code == 4 and "groups.json" in out, out
    assert not (tmp_path / "b").exists()


@pytest.mark.parametrize(
    "text",
    ["x", "[1, 2]", DEEP, '{"0": "ab"}', '{"0": [0, 1e999]}', '{"0": [-1, 0]}'],
    ids=["not-json", "list", "deep", "string", "infinite", "negative"],
)
def test_malformed_process_groups_metadata(tmp_path: Path, text: str) -> None:
    """A rank set whose metadata `process_groups` is malformed: validate names it, export
    refuses naming the file (was JSONDecodeError, AttributeError, ValueError,
    OverflowError, RecursionError: exit 70), simulate ignores it (no traceback)."""
    folder = tmp_path / "set"
    folder.mkdir()
    for rank in range(2):
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend(
            [
                make_attr("rank", rank),
                make_attr("world_size", 2),
                make_attr("set_id", "a"),
                make_attr("process_groups", text),
            ]
        )
        node = pb.Node(id=1, name="mm", type=pb.COMP_NODE, duration_micros=5)
        write_et(folder / f"t.{rank}.et", with_node_count(meta, 1), [node])
    code, out = run("et", "validate", str(folder))
    assert code == 1 and "process-groups-malformed" in out
    code, out = run(
        "export", "astra-sim", str(folder / "t"), "--hw", "h100", "-o", str(tmp_path / "b")
    )
    assert code == 5 and "t.0.et: metadata process_groups is not" in out, out
    assert run("simulate", str(folder / "t"))[0] == 0


@pytest.mark.parametrize("value", ["abc", "0", "-1", "2.5", "1e400", "nan"])
def test_garbage_limit_values_are_config_errors(trace: str, value: str) -> None:
    """A LUMOS_MAX_* value that is no whole number >= 1 was ignored (or refused every
    input); now it is one error naming the variable."""
    code, out = run("simulate", trace, env={"LUMOS_MAX_RANKS": value})
    assert code == 4 and f"LUMOS_MAX_RANKS={value!r}: not a whole number >= 1" in out


def test_whole_limit_values_in_any_spelling_work(trace: str) -> None:
    for value in ("1e6", "1_000_000", " 4096 ", ""):
        assert run("simulate", trace, env={"LUMOS_MAX_RANKS": value})[0] == 0
    code, out = run("simulate", trace, env={"LUMOS_MAX_RANKS": "1"})
    assert code == 7 and "LUMOS_MAX_RANKS" in out


@pytest.mark.parametrize(
    ("args", "code", "message"),
    [
        # round 4: a flag past its own bound is a usage error naming it (was exit 7)
        (["--tp", "8", "--pp", "8", "--dp", "1000000000"], 2, "'--dp': 1,000,000,000 is above"),
        (["--tp", "8", "--pp", "8", "--gbs", "1000000000"], 7, "LUMOS_MAX_MICROBATCHES"),
        # round 4: was exit 5, "exceeds 64 bits", naming no flag
        (["--tp", "8", "--pp", "8", "--mbs", "1000000000"], 2, "'--mbs': 1,000,000,000 is above"),
        (["--tp", "8", "--pp", "8", "--mbs", "100000"], 7, "(mbs x seq) is 204,800,000"),
        (["--tp", "8", "--pp", "8", "--seq", "1000000000"], 2, "16,777,216, the most lumos"),
    ],
    ids=["world", "microbatches", "mbs", "mbs-x-seq", "seq"],
)
def test_plans_past_every_bound_end_quickly(args: list[str], code: int, message: str) -> None:
    """Were: no end in sight (dp or gbs 1e9: minutes, gigabytes) or OverflowError (70)."""
    began = time.process_time()
    got, out = run("estimate", "--model", "gpt3-175b", *args)
    assert got == code and message in out, out
    assert time.process_time() - began < 5


@pytest.mark.parametrize(
    ("spec", "args"),
    [
        ({"layers": 100_000_000}, []),
        ({"layers": 4, "experts": 8, "top_k": 2, "mtp_layers": 100_000_000}, ["--pp", "2"]),
        ({"layers": 4}, ["--pp", "2", "--pp-layout", "E(t|)*999999999999L"]),
        ({"layers": 4}, ["--pp", "2", "--pp-layout", "Et*" + "9" * 40 + "L"]),
    ],
    ids=["layers", "mtp-layers", "layout-group", "layout-digits"],
)
def test_models_and_layouts_past_the_layer_bound_end_quickly(
    tmp_path: Path, spec: dict[str, int], args: list[str]
) -> None:
    """Were: no end in sight (1e8 decoder or MTP layers: the generator built them all) and
    `internal error: MemoryError` (a pipeline layout repeated 1e12 times, expanded first)."""
    base = {"hidden": 256, "heads": 8, "ffn": 512, "vocab": 1024}
    model = _write(tmp_path, "m.yaml", json.dumps(base | spec))
    began = time.process_time()
    got, out = run("estimate", "--model", model, "--dp", "2", "--gbs", "8", "--seq", "128", *args)
    assert got == 7 and "LUMOS_MAX_LAYERS" in out, out
    assert time.process_time() - began < 5


def test_hardware_with_more_gpus_than_ranks_allowed(tmp_path: Path, trace: str) -> None:
    hw = _write(tmp_path, "hw.yaml", H100.replace("num_nodes: 64", "num_nodes: 1000000000"))
    code, out = run("simulate", trace, "--hw", hw)
    assert code == 7 and "GPUs (num_nodes x gpus)" in out


def test_trace_names_cannot_drive_the_terminal_or_break_rich_markup(tmp_path: Path) -> None:
    """Audit finding: a pg_name `[/]` made `et info` exit 70 (rich MarkupError), and an op
    name's OSC 52 sequence (write the clipboard) reached the terminal through simulate's
    critical-path table. Trace text is printed with its control characters escaped."""
    folder = tmp_path / "set"
    folder.mkdir()
    hostile = "[/] [link=file:///etc/passwd]x[/link] \x1b]52;c;cHduZWQ=\x07\u202e"
    for rank in range(2):
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend(
            [
                make_attr("rank", rank),
                make_attr("world_size", 2),
                make_attr("process_groups", json.dumps({"[/]": [0, 1]})),
            ]
        )
        comp = pb.Node(id=1, name=hostile, type=pb.COMP_NODE, duration_micros=5)
        coll = pb.Node(id=2, name="allreduce", type=pb.COMM_COLL_NODE, duration_micros=5)
        coll.data_deps.append(1)
        coll.attr.extend(
            [
                make_attr("comm_type", pb.ALL_REDUCE),
                make_attr("comm_size", 4096),
                make_attr("pg_name", "[/]"),
            ]
        )
        write_et(folder / f"t.{rank}.et", with_node_count(meta, 2), [comp, coll])
    for args in (["et", "info", str(folder)], ["simulate", str(folder / "t")]):
        code, out = run(*args)
        assert code == 0 and "\x1b" not in out and "\u202e" not in out, out
    code, out = run("simulate", str(folder / "t"))
    assert "\\x1b]52;c;" in out  # shown, escaped


def test_a_100k_character_name_prints_in_bounded_time(tmp_path: Path) -> None:
    """Fuzz finding: rich wrapped a 100,000-character pg_name in `et info` for 43 s
    (quadratic); names are cut to 80 characters for the terminal. GraphML and DOT of
    names with control characters stay parseable."""
    import xml.etree.ElementTree as ET

    long = "n" * 100_000
    folder = tmp_path / "set"
    folder.mkdir()
    for rank in range(2):
        meta = pb.GlobalMetadata(version="0.0.4")
        meta.attr.extend([make_attr("rank", rank), make_attr("world_size", 2)])
        comp = pb.Node(id=1, name="a\x00b\x1b[2J", type=pb.COMP_NODE, duration_micros=5)
        coll = pb.Node(id=2, name="ar", type=pb.COMM_COLL_NODE, duration_micros=5)
        coll.attr.extend([make_attr("comm_type", pb.ALL_REDUCE), make_attr("comm_size", 64),
                          make_attr("pg_name", long)])  # fmt: skip
        write_et(folder / f"t.{rank}.et", with_node_count(meta, 2), [comp, coll])
    began = time.process_time()
    code, out = run("et", "info", str(folder))
    assert code == 0 and "nnn..." in out and time.process_time() - began < 5
    for name in ("g.graphml", "g.dot"):
        assert run("et", "graph", str(folder / "t"), "-o", str(tmp_path / name))[0] == 0
    ET.parse(tmp_path / "g.graphml")  # was: not well-formed (NUL and ESC in XML)
    assert '"a\\\\x00b\\\\x1b[2J\\nCOMP_NODE"' in (tmp_path / "g.dot").read_text()
