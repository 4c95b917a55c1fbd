"""`whatif -o` and `estimate -o` follow convert's rules for a rank-set output.

An existing set of the prefix is replaced only with `--force`, and only if lumos wrote
it (the user's own ETs are never deleted); the refusal comes before the work; the set
appears all at once (a failure midway leaves the folder as it was, and no staging
folder); what is written is self-describing (rank, world size, node count, set id).
"""

from __future__ import annotations

from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.rankset import check_rank_set
from lumos.converters.chakra.set_output import check_set_output
from lumos.converters.chakra.stream import EtReader, write_et
from lumos.errors import LumosError, OutputError
from lumos.simulator.whatif.etset import write_etset
from tests.converters.chakra.test_rank_sets import rank_nodes, write_set
from tests.simulator.whatif.builders import training_step

ESTIMATE = ["estimate", "--model", "llama2-7b", "--tp", "2", "--dp", "1"]


def snapshot(folder: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(folder.iterdir())}


def meta_of(path: Path) -> dict[str, object]:
    with EtReader(path) as reader:
        meta = reader.metadata
        count = sum(1 for _ in reader)
    names = ("rank", "world_size", "node_count", "set_id", "producer")
    return {"count": count, **{n: get_attr(meta, n) for n in names}}


@pytest.fixture
def whatif_in(tmp_path: Path) -> Path:
    return write_etset(training_step(layers=2), tmp_path / "in")[0].parent


def test_whatif_output_refused_without_force_replaced_with_it(
    whatif_in: Path, tmp_path: Path
) -> None:
    out = tmp_path / "out"
    args = ["whatif", str(whatif_in), "--slow-rank", "1=1.5", "-o", str(out)]
    first = CliRunner().invoke(cli, args)
    assert first.exit_code == 0, first.output
    check_rank_set(find_et_sources(out))  # a complete, self-describing set
    meta = meta_of(out / "whatif.1.et")
    assert meta["rank"] == 1 and meta["world_size"] == 2 and meta["node_count"] == meta["count"]
    assert str(meta["producer"]).startswith("lumos") and str(meta["set_id"]).startswith("whatif-")
    before = snapshot(out)
    again = CliRunner().invoke(cli, args)
    assert again.exit_code == 5 and "already holds whatif.*.et files" in again.output
    assert snapshot(out) == before
    forced = CliRunner().invoke(cli, [*args, "--force"])
    assert forced.exit_code == 0, forced.output
    assert meta_of(out / "whatif.1.et")["set_id"] != meta["set_id"]
    assert sorted(p.name for p in out.iterdir()) == ["whatif.0.et", "whatif.1.et"]


def test_force_never_replaces_ets_lumos_did_not_write(whatif_in: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    out.mkdir()
    write_et(out / "whatif.3.et", None, rank_nodes(3))  # the user's own ET, no set_id
    before = snapshot(out)
    args = ["whatif", str(whatif_in), "--slow-rank", "1=1.5", "-o", str(out), "--force"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 5 and "whatif.3.et that lumos did not write" in result.output
    assert snapshot(out) == before
    with pytest.raises(LumosError, match="lumos did not write"):
        check_set_output(out, "whatif", force=True)
    write_set(tmp_path / "ours", 2)  # a set lumos wrote may be replaced
    check_set_output(tmp_path / "ours", "t", force=True)


def test_estimate_output_refused_before_the_work_and_replaced_with_force(
    tmp_path: Path,
) -> None:
    out = tmp_path / "ets"
    first = CliRunner().invoke(cli, [*ESTIMATE, "-o", str(out)])
    assert first.exit_code == 0, first.output
    before = snapshot(out)
    again = CliRunner().invoke(cli, [*ESTIMATE, "--tp", "1", "-o", str(out)])
    assert again.exit_code == 5 and "pass --force" in again.output
    assert "iteration time" not in again.output  # refused before estimating
    assert snapshot(out) == before
    forced = CliRunner().invoke(cli, [*ESTIMATE, "-o", str(out), "--force"])
    assert forced.exit_code == 0, forced.output
    dash = CliRunner().invoke(cli, [*ESTIMATE, "-o", "-"])
    assert dash.exit_code == 6 and "stdout" in dash.output
    assert not (Path.cwd() / "-").exists()


def test_estimate_refusal_of_foreign_ets_names_only_options_it_has(tmp_path: Path) -> None:
    """`estimate` writes a fixed prefix: its refusal to replace the user's own ETs said
    "choose another folder or --prefix", an option `estimate` does not have."""
    out = tmp_path / "ets"
    out.mkdir()
    write_et(out / "estimate.0.et", None, rank_nodes(0))  # the user's own ET, no set_id
    before = snapshot(out)
    result = CliRunner().invoke(cli, [*ESTIMATE, "-o", str(out), "--force"])
    assert result.exit_code == 5 and "estimate.0.et that lumos did not write" in result.output
    assert "choose another folder" in result.output and "--prefix" not in result.output
    assert snapshot(out) == before


def test_estimate_output_failing_midway_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from lumos.simulator.workload import etwrite

    written: list[Path] = []

    def failing(path: Path, *args: object) -> None:
        if written:
            raise OutputError(f"{path}: cannot write: no space left on device")
        written.append(path)
        write_et(path, *args)  # type: ignore[arg-type]

    monkeypatch.setattr(etwrite, "write_et", failing)
    args = [*ESTIMATE, "--pp", "2", "--gbs", "4", "-o", str(tmp_path / "ets")]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 6 and "no space left" in result.output
    assert len(written) == 1
    assert list(tmp_path.iterdir()) == []  # no set, no staging folder
