"""A foreign `.et` (no `node_count`: we did not write it) cut at a frame boundary is warned
about when its graph shows the cut: an unfinished last ProfilerStep, or dependencies on
ids above the last one. Files we write are checked by their count (an error).

The nodes follow mlc-chakra's converter layout: CPU ops with `is_cpu_op`, Kineto times in
`start_time_micros` / `duration_micros`, the `ProfilerStep#N` op first, ops inside it
as its children; GPU kernels depend on their launching op.
"""

from __future__ import annotations

from pathlib import Path

from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import make_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.stream import iter_frames, write_et
from lumos.converters.chakra.validate import validate_sources
from lumos.proto import pb

T0 = 4_458_676_417_000  # Kineto's steady clock, µs


def foreign_step(ops: int = 40, with_start_ns: bool = False) -> list[pb.Node]:
    """ProfilerStep#7 (1,975 µs for 40 ops); `ops` launches 49 µs apart, each with its
    kernel; the step ends 5 µs after its last op."""
    step = pb.Node(id=1, name="ProfilerStep#7", type=pb.COMP_NODE)
    step.start_time_micros, step.duration_micros = T0, 15 + ops * 49
    step.attr.extend([make_attr("is_cpu_op", True)])
    nodes = [step]
    for k in range(ops):
        start = T0 + 10 + k * 49
        op = pb.Node(id=2 + 2 * k, name=f"aten::mm_{k}", type=pb.COMP_NODE)
        op.start_time_micros, op.duration_micros = start, 40
        op.ctrl_deps.append(1 if k == 0 else 2 * k)
        kernel = pb.Node(id=3 + 2 * k, name=f"gemm_{k}", type=pb.COMP_NODE)
        kernel.start_time_micros, kernel.duration_micros = start + 5, 30
        kernel.data_deps.append(op.id)
        op.attr.append(make_attr("is_cpu_op", True))
        kernel.attr.extend([make_attr("is_cpu_op", False), make_attr("stream", 7)])
        if with_start_ns:
            for n in (op, kernel):
                n.attr.append(make_attr("start_ns", (n.start_time_micros - T0) * 1000))
                n.attr.append(make_attr("dur_ns", n.duration_micros * 1000))
        nodes += [op, kernel]
    if with_start_ns:
        step.attr.extend(
            [make_attr("start_ns", 0), make_attr("dur_ns", step.duration_micros * 1000)]
        )
    return nodes


def write_foreign(folder: Path, nodes: list[pb.Node], keep: int | None = None) -> Path:
    """`t.0.et` as a foreign tool writes it (no rank-set metadata), cut after `keep` nodes
    at a frame boundary."""
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / "t.0.et"
    write_et(path, pb.GlobalMetadata(version="0.0.4"), nodes)
    if keep is not None:
        cut_after(path, keep)
    return path


def cut_after(path: Path, keep: int) -> None:
    """Keep the metadata frame and the first `keep` node frames, exactly."""
    with open(path, "rb") as f:
        starts = [offset for offset, _ in iter_frames(f, str(path))]
    path.write_bytes(path.read_bytes()[: starts[keep + 1]])


def warnings(folder: Path) -> list[str]:
    report = validate_sources(find_et_sources(folder))
    assert not report.errors, report.errors
    return [p.message for p in report.problems if p.code == "cut-short"]


def test_whole_foreign_step_has_no_cut_warning(tmp_path: Path) -> None:
    write_foreign(tmp_path, foreign_step())
    assert warnings(tmp_path) == []


def test_foreign_step_cut_at_a_frame_boundary_is_warned(tmp_path: Path) -> None:
    path = write_foreign(tmp_path, foreign_step(), keep=41)  # the step and 20 of 40 ops
    (sign,) = warnings(tmp_path)
    assert "looks cut short: ProfilerStep#7 lasts 1,975 µs" in sign
    assert "stops after 50% of it" in sign  # op 20 of 40: its kernel ends at 976 µs
    result = CliRunner().invoke(cli, ["et", "validate", str(tmp_path)])
    assert result.exit_code == 0 and "cut short" in result.output and path.name in result.output


def test_simulate_notes_a_cut_step_naming_the_file(tmp_path: Path) -> None:
    write_foreign(tmp_path, foreign_step(with_start_ns=True), keep=21)  # 10 of 40 ops
    result = CliRunner().invoke(cli, ["simulate", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert "t.0.et: looks cut short: ProfilerStep#7" in result.output
    whole = CliRunner().invoke(cli, ["simulate", str(write_foreign(tmp_path, foreign_step(True)))])
    assert whole.exit_code == 0 and "cut short" not in whole.output


def test_dependencies_beyond_the_last_id_are_a_cut(tmp_path: Path) -> None:
    """A producer that numbers and writes kernels before the ops that launch them (as
    mlc-chakra's kernel -> op edges do): the cut leaves kernels waiting for ids beyond the
    file's last one, which no whole file has."""
    step, *rest = foreign_step(ops=10)
    kernels = [n for n in rest if n.name.startswith("gemm")]
    ops = [n for n in rest if n.name.startswith("aten")]
    for k, (kernel, op) in enumerate(zip(kernels, ops, strict=True)):
        kernel.id, op.id = 2 + k, 12 + k
        del kernel.data_deps[:]
        kernel.data_deps.append(op.id)
        del op.ctrl_deps[:]
        op.ctrl_deps.append(1)
    write_foreign(tmp_path, [step, *kernels, *ops])
    assert warnings(tmp_path) == []
    cut_after(tmp_path / "t.0.et", 11)  # the step and the 10 kernels only
    report = validate_sources(find_et_sources(tmp_path))
    cut = [p.message for p in report.problems if p.code == "cut-short"]
    assert any("10 dependencies name ids above its last id 11 (12, 13" in m for m in cut)
    result = CliRunner().invoke(cli, ["simulate", str(tmp_path)])
    assert (
        result.exit_code == 3 and "ids above the file's last id 11: it looks cut" in result.output
    )


def test_our_own_cut_file_is_an_error_not_a_warning(tmp_path: Path) -> None:
    from tests.converters.chakra.test_rank_sets import write_set

    folder = write_set(tmp_path, 1)
    cut_after(folder / "t.0.et", 1)
    report = validate_sources(find_et_sources(folder))
    assert [p.code for p in report.problems] == ["unreadable"]
