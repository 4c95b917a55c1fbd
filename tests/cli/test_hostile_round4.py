"""Hostile input, round 4: round 3's leftovers, and every numeric flag bounded.

Before (main 659d94c): a rank file whose metadata said `node_count: -5` was "nodes were
appended"; `estimate --mbs 1000000000` was exit 5 from a 64-bit product naming no flag;
a what-if that scaled a node past 64-bit nanoseconds named the node but not its file;
a rank file stating 9 million nodes was read (115 MB, 1.2 GB of columns, 17 s) before the
limit refused it, and `whatif` read any number of nodes (a 9-million-node file: SIGSEGV
in a 2.5 GB cap). Leftover 5 (a config.json's missing key naming its model type) landed
with 196fa6b and is tested there.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import click
import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.cli.options import Bounded, FiniteFloatRange
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.varint import encode_varint
from lumos.errors import ResourceLimitError
from lumos.proto import pb
from lumos.simulator import read_ranks
from lumos.simulator.whatif.etset import load_etset
from tests.converters.astra_sim.test_export import gpu


def run(*args: str, env: dict[str, str] | None = None) -> tuple[int, str]:
    result = CliRunner().invoke(cli, list(args), env=env)
    assert result.exception is None or isinstance(result.exception, SystemExit), result.output
    assert "Traceback" not in result.output and "internal error" not in result.output
    return result.exit_code, result.stdout if "--json" in args else result.output


def _raw_et(path: Path, count: int, nodes: list[pb.Node], tail: bytes = b"") -> None:
    """An ET whose metadata states `count` nodes whatever it holds (write_et would
    refuse), then `tail` (bytes that are no frame)."""
    meta = pb.GlobalMetadata(version="0.0.4")
    meta.attr.append(make_attr("node_count", count))
    with open(path, "wb") as f:
        for message in (meta, *nodes):
            body = message.SerializeToString()
            f.write(encode_varint(len(body)) + body)
        f.write(tail)


def _pair(folder: Path, count: int, tail: bytes = b"") -> Path:
    folder.mkdir(parents=True)
    for rank in range(2):
        _raw_et(folder / f"t.{rank}.et", count, [gpu(1), gpu(2, deps=(1,))], tail)
    return folder


# --- leftover 1: a negative node_count ----------------------------------------------------


@pytest.mark.parametrize(
    "command",
    [["simulate"], ["et", "info"], ["whatif"], ["export", "astra-sim", "--hw", "h100", "-o"]],
    ids=["simulate", "et-info", "whatif", "export"],
)
def test_negative_node_count_names_the_file_and_field(tmp_path: Path, command: list[str]) -> None:
    """Was: "holds 2 nodes but its metadata says -5: nodes were appended", which blames
    the file's end; the header is what is wrong."""
    folder = _pair(tmp_path / "et", -5)
    args = [*command, str(tmp_path / "out")] if command[-1] == "-o" else command
    code, out = run(*args, str(folder))
    assert code == 3, out
    assert "t.0.et: metadata node_count is -5: not a node count (0 or more)" in out
    assert "appended" not in out and not (tmp_path / "out").exists()


def test_negative_node_count_in_validate_is_reported_per_file(tmp_path: Path) -> None:
    code, out = run("et", "validate", str(_pair(tmp_path / "et", -5)))
    assert code == 1 and out.count("metadata node_count is -5") == 2, out


# --- leftover 2: every numeric flag bounded -------------------------------------------------


def _numeric_options(command: click.Command) -> list[click.Option]:
    return [
        p
        for p in command.params
        if isinstance(p, click.Option)
        and not p.is_flag
        and not p.count  # -v / -q
        and isinstance(p.type, (click.types.IntParamType, click.types.FloatParamType))
    ]


@pytest.mark.parametrize("name", ["estimate", "whatif", "simulate", "sweep", "convert"])
def test_every_numeric_flag_has_an_upper_bound(name: str) -> None:
    """The audit as a rule: an integer flag is `Bounded` (its bound a resource limit or a
    number), a float flag a finite range; a plain `int` / `IntRange(min=1)` let
    `--mbs 10^9` through to a 64-bit product."""
    command = _command(name)
    unbounded = [
        o.name
        for o in _numeric_options(command)
        if not isinstance(o.type, (Bounded, FiniteFloatRange))
        and not (isinstance(o.type, click.IntRange) and o.type.max is not None)
    ]
    assert not unbounded, f"{name}: numeric flags without an upper bound: {unbounded}"


def _command(name: str) -> click.Command:
    """A sub-command (imported on first use, as the CLI does)."""
    assert isinstance(cli, click.Group)
    command = cli.get_command(click.Context(cli), name)
    assert command is not None
    return command


def _flags(name: str) -> list[str]:
    command = _command(name)
    return [o.opts[-1] for o in _numeric_options(command) if isinstance(o.type, Bounded)]


@pytest.mark.parametrize("flag", _flags("estimate"))
def test_absurd_estimate_flags_are_usage_errors_naming_the_flag_and_bound(flag: str) -> None:
    """Was: `--mbs 10^9` exit 5 ("a FLOP or byte count ... exceeds 64 bits", no flag named),
    `--dp` / `--seq 10^12` exit 7 from the plan; others exit 4 or 0."""
    code, out = run("estimate", "--model", "llama3-8b", flag, str(10**12), "--json")
    error = json.loads(out)["error"]
    assert code == 2 and error["type"] == "BadParameter", out
    assert f"'{flag}': 1,000,000,000,000 is above" in error["message"]
    assert "the most lumos takes (LUMOS_MAX_" in error["message"]


def test_a_bound_is_the_limit_it_names_and_moves_with_it() -> None:
    """The bound of a flag fed by a limit is read when the flag is: raising the variable
    lets a genuine value through to the plan (which checks its own products)."""
    code, out = run("estimate", "--model", "llama3-8b", "--mbs", "65536")
    assert code == 7 and "tokens of one micro-batch (mbs x seq) is 536,870,912" in out, out
    code, out = run("estimate", "--model", "llama3-8b", "--mbs", str(1 << 25))
    assert code == 2 and "'--mbs': 33,554,432 is above 16,777,216" in out, out
    raised = {"LUMOS_MAX_WIDTH": str(1 << 30)}
    code, out = run("estimate", "--model", "llama3-8b", "--mbs", str(1 << 25), env=raised)
    assert code == 7 and "(mbs x seq) is 274,877,906,944, above the limit of 1,073," in out, out


@pytest.mark.parametrize("value", ["nan", "inf", "-1", "1e3"])
def test_moe_load_factor_takes_finite_numbers_only(value: str) -> None:
    """`--moe-load-factor nan` passed click's FloatRange (NaN compares false)."""
    code, out = run("estimate", "--model", "mixtral-8x7b", "--moe-load-factor", value)
    assert code == 2 and "'--moe-load-factor'" in out, out


# --- leftover 4: an oversized rank file is refused from its header --------------------------


def test_oversized_rank_file_is_refused_from_its_header(tmp_path: Path) -> None:
    """The header states 9 million nodes: refused before a node is decoded. Bytes after
    the header that are no frame show it (reading on would be exit 3, cut short)."""
    folder = _pair(tmp_path / "et", 9_000_000, tail=b"\xff\xff")
    for command in (["simulate"], ["whatif"]):
        code, out = run(*command, str(folder))
        assert code == 7, out
        assert "t.0.et: nodes of one rank's ET (its metadata's node_count) is 9,000,000" in out


def test_oversized_rank_file_is_refused_before_the_workers_read_its_parts(
    tmp_path: Path, monkeypatch: Any
) -> None:
    """A big plain file is read in byte ranges by worker processes, each decoding its
    part whatever the first part's header said: 17 s and 1.2 GB for a 115 MB file of 9
    million nodes, now 0.7 s (the header is read before any worker starts)."""
    folder = _pair(tmp_path / "et", 5_000)
    monkeypatch.setattr(read_ranks, "PARALLEL_BYTES", 0)
    monkeypatch.setenv("LUMOS_MAX_RANK_NODES", "1000")
    sources = [read_ranks.EtSource("t", r, str(p)) for r, p in enumerate(sorted(folder.iterdir()))]
    with pytest.raises(ResourceLimitError, match=r"t\.0\.et: nodes of one rank's ET \(its"):
        next(read_ranks.read_sources(sources, repair=False, jobs=2))


def test_whatif_holds_no_more_nodes_than_the_limits(tmp_path: Path, monkeypatch: Any) -> None:
    """`whatif` held every node of any trace as protobuf messages (9 million tiny nodes
    that state no count: SIGSEGV in a 2.5 GB cap); now a rank stops at
    LUMOS_MAX_RANK_NODES and the step at LUMOS_MAX_NODES, counted as nodes are read."""
    folder = tmp_path / "et"
    folder.mkdir()
    for rank in range(2):  # no node_count: counted while read
        with open(folder / f"t.{rank}.et", "wb") as f:
            for message in (pb.GlobalMetadata(version="0.0.4"), *(gpu(i) for i in range(1, 61))):
                body = message.SerializeToString()
                f.write(encode_varint(len(body)) + body)
    assert len(load_etset(folder).ranks) == 2
    monkeypatch.setenv("LUMOS_MAX_RANK_NODES", "50")
    with pytest.raises(ResourceLimitError, match=r"t\.0\.et: nodes of one rank's ET is 51"):
        load_etset(folder)
    monkeypatch.setenv("LUMOS_MAX_RANK_NODES", "100")
    monkeypatch.setenv("LUMOS_MAX_NODES", "100")
    with pytest.raises(ResourceLimitError, match=r"t\.1\.et: nodes of the traced step up"):
        load_etset(folder)


# --- leftover 3: a what-if's 64-bit overflow names the file ----------------------------------


def test_whatif_overflow_names_the_file_and_rank(tmp_path: Path) -> None:
    """Was: "the edit makes node 6 ('aten::addmm') last ... ns, past the 64-bit
    nanosecond clock", naming no file or rank (node ids repeat across ranks)."""
    from lumos.simulator.whatif.etset import write_etset
    from tests.simulator.whatif.builders import training_step

    folder = tmp_path / "trace"
    write_etset(training_step(layers=2), folder)
    width = str(1 << 24)
    code, out = run("whatif", str(folder), "--hidden", width, "--ffn", width, "--seq", width)
    assert code == 4, out
    assert (
        f"{folder / 'whatif.0.et'}: rank 0 (and 1 more rank(s) with it): the edit makes node" in out
    )


@pytest.mark.parametrize(
    "args", [["estimate", "--model", "llama3-8b", "--tp", "2"], ["estimate", "-h"]]
)
def test_a_garbage_limit_variable_behind_a_flag_bound_is_still_one_config_error(
    args: list[str],
) -> None:
    """A flag's bound reads its LUMOS_MAX_* variable while click parses: a garbage value
    must stay exit 4 naming it (the first cut ended in a traceback there), and `-h`
    must still print."""
    code, out = run(*args, env={"LUMOS_MAX_RANKS": "abc"})
    if "-h" in args:
        assert code == 0 and "--tp INTEGER" in out, out
    else:
        assert code == 4 and "LUMOS_MAX_RANKS='abc': not a whole number >= 1" in out, out
