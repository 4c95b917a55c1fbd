"""`lumos convert` under hostile conditions: the set appears whole or not at all, stale
ranks never mix in, mislabelled and partial inputs are errors, never silent guesses.

Inputs are the 2-rank DDP capture of tests/data (real host ETs and Kineto traces).
"""

from __future__ import annotations

import gzip
import json
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from lumos.cli.main import cli
from lumos.converters.chakra.attrs import get_attr
from lumos.converters.chakra.files import find_et_sources
from lumos.converters.chakra.rankset import check_rank_set
from lumos.converters.chakra.stream import EtReader
from lumos.converters.pytorch.convert import convert
from lumos.converters.pytorch.inputs import plan
from lumos.errors import LinkError, ResourceLimitError, TraceFormatError
from tests.conftest import DATA
from tests.converters.chakra.test_rank_sets import write_set

DDP = DATA / "captures" / "ddp"


def hidden(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if p.name.startswith("."))


@pytest.fixture(scope="module")
def kineto_only(tmp_path_factory: pytest.TempPathFactory) -> Path:
    folder = tmp_path_factory.mktemp("kin")
    for r in (0, 1):
        shutil.copy(DDP / f"rank{r}.kineto.json.gz", folder)
    return folder


def test_reconverting_into_a_bigger_set_removes_stale_ranks(
    tmp_path: Path, kineto_only: Path
) -> None:
    out = write_set(tmp_path / "out", 4, set_id="old-run")  # t.0..t.3 of an earlier run
    (out / "notes.txt").write_text("mine")
    convert([kineto_only], out, prefix="t")
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt", "t.0.et", "t.1.et"]
    check_rank_set(find_et_sources(out))  # one complete set
    with EtReader(out / "t.1.et") as reader:
        meta = reader.metadata
        count = sum(1 for _ in reader)
    assert get_attr(meta, "world_size") == 2 and get_attr(meta, "rank") == 1
    assert get_attr(meta, "node_count") == count > 0
    assert len(get_attr(meta, "set_id")) == 16


def test_failing_rank_leaves_the_old_set_untouched(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    shutil.copy(DDP / "rank0.kineto.json.gz", inputs)
    (inputs / "rank1.kineto.json.gz").write_bytes(
        (DDP / "rank1.kineto.json.gz").read_bytes()[:20000]
    )
    out = write_set(tmp_path / "out", 2, set_id="old-run")
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    with pytest.raises(TraceFormatError, match=r"rank1\.kineto\.json\.gz"):
        convert([inputs], out, prefix="t")
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before  # no staging left
    fresh = tmp_path / "fresh"
    with pytest.raises(TraceFormatError):
        convert([inputs], fresh, prefix="t")
    assert not fresh.exists() and hidden(tmp_path) == []


def test_host_ets_for_more_ranks_than_kineto_traces_is_an_error(tmp_path: Path) -> None:
    shutil.copy(DDP / "rank0.host_et.json.gz", tmp_path)
    shutil.copy(DDP / "rank1.host_et.json.gz", tmp_path)
    shutil.copy(DDP / "rank0.kineto.json.gz", tmp_path)
    with pytest.raises(
        LinkError, match=r"1 of 2 ranks have a host ET but no Kineto trace \(ranks \[1\]\)"
    ):
        convert([tmp_path], tmp_path / "out")
    assert not (tmp_path / "out").exists()
    result = convert([tmp_path], tmp_path / "out", allow_host_only=True)
    assert [p for p in result.problems if "durations are estimated" in p]


def test_kineto_rank_disagreeing_with_its_name_names_both(tmp_path: Path) -> None:
    shutil.copy(DDP / "rank0.kineto.json.gz", tmp_path / "rank5.kineto.json.gz")
    with pytest.raises(
        TraceFormatError, match=r"name says rank 5 but distributedInfo\.rank says 0"
    ):
        plan([tmp_path])


def test_lone_host_et_keeps_the_rank_its_name_states(tmp_path: Path) -> None:
    shutil.copy(DDP / "rank1.host_et.json.gz", tmp_path / "rank1.host_et.json.gz")
    (item,) = plan([tmp_path])
    assert item.rank == 1


def test_huge_world_size_in_a_header_is_bounded(tmp_path: Path) -> None:
    text = gzip.decompress((DDP / "rank0.kineto.json.gz").read_bytes())
    bomb = text.replace(b'"world_size": 2', b'"world_size": 1000000000', 1)
    (tmp_path / "rank0.kineto.json").write_bytes(bomb)
    with pytest.raises(ResourceLimitError, match="LUMOS_MAX_RANKS"):
        plan([tmp_path])


@pytest.mark.parametrize(
    ("make", "message"),
    [
        pytest.param(lambda d: None, "no PyTorch host ET or Kineto trace", id="empty-folder"),
        pytest.param(
            lambda d: (d / "notes.txt").write_text("hi"),
            "no PyTorch host ET or Kineto trace",
            id="unrelated-files",
        ),
        pytest.param(lambda d: write_set(d, 2), "already converted", id="folder-of-et-files"),
    ],
)
def test_convert_without_traces_is_one_clear_error(
    tmp_path: Path, make: object, message: str
) -> None:
    folder = tmp_path / "in"
    folder.mkdir()
    make(folder)  # type: ignore[operator]
    result = CliRunner().invoke(cli, ["convert", str(folder), "-o", str(tmp_path / "out")])
    assert result.exit_code == 3, result.output
    assert message in result.output
    assert "Traceback" not in result.output and not (tmp_path / "out").exists()


@pytest.mark.parametrize(
    ("event", "message"),
    [
        ('"name": 7', "'name' is 7, not a string"),
        ('"cat": {"a": 1}', "'cat' is {'a': 1}, not a string"),
    ],
)
def test_kineto_event_with_wrong_json_types_is_named(
    tmp_path: Path, event: str, message: str
) -> None:
    fields = {"name": '"aten::mm"', "cat": '"cpu_op"'}
    key = event.split(":")[0].strip('"')
    fields[key] = event.split(": ", 1)[1]
    bad = tmp_path / "rank0.kineto.json"
    bad.write_text(
        f'{{"traceEvents": [{{"ph":"X","cat":{fields["cat"]},"name":{fields["name"]},'
        '"ts":10,"dur":5,"pid":1,"tid":1}]}'
    )
    with pytest.raises(TraceFormatError, match=re.escape(message)):
        convert([bad], tmp_path / "out")


def test_negative_kineto_duration_is_named(tmp_path: Path) -> None:
    bad = tmp_path / "rank0.kineto.json"
    bad.write_text(
        '{"traceEvents": [{"ph":"X","cat":"cpu_op","name":"aten::mm","ts":10,"dur":-5,'
        '"pid":1,"tid":1}]}'
    )
    with pytest.raises(TraceFormatError, match="'aten::mm': negative 'dur'"):
        convert([bad], tmp_path / "out")


@pytest.mark.parametrize(
    ("header", "event", "message"),
    [
        ('"distributedInfo": 1.5,', '"ts":10', "distributedInfo is 1.5, not an object"),
        ("", '"ts":1e308', "'ts' is 1e+308, not a number of µs"),
        ("", '"ts":10,"pid":1180591620717411303424', "'pid' is 1.1805916207174113e+21, past"),
    ],
)
def test_fuzz_found_kineto_values_are_named_errors(
    tmp_path: Path, header: str, event: str, message: str
) -> None:
    """Found by scripts/fuzz_harness.py: each was a TypeError/OverflowError or garbage."""
    bad = tmp_path / "rank0.kineto.json"
    bad.write_text(
        '{"schemaVersion": 1, ' + header + ' "traceEvents": [{"ph":"X","cat":"cpu_op",'
        '"name":"aten::mm",' + event + ',"dur":5,"tid":1}]}'
    )
    with pytest.raises(TraceFormatError, match=re.escape(message)):
        convert([bad], tmp_path / "out")


@pytest.mark.parametrize("prefix", ["x\ny", "a\tb", "esc\x1b[2J", "del\x7f"])
def test_prefix_with_control_characters_is_refused(
    kineto_only: Path, tmp_path: Path, prefix: str
) -> None:
    """Before: `--prefix $'x\\ny'` wrote `x\\ny.0.et`, a set no lumos command finds again
    (`no Chakra ET files found`) and a name that breaks line-based tools."""
    out = tmp_path / "out"
    result = CliRunner().invoke(
        cli, ["convert", str(kineto_only), "-o", str(out), "--prefix", prefix]
    )
    assert result.exit_code == 6, result.output
    assert "must be a plain file name" in result.output and "control character" in result.output
    assert not out.exists()


@pytest.mark.parametrize(
    ("field", "where"),
    [
        ("pid", "event"),
        ("tid", "event"),
        ("correlation", "args"),
        ("External id", "args"),
        ("Record function id", "args"),
    ],
)
def test_kineto_ids_past_64_bits_name_the_event_and_field(
    tmp_path: Path, field: str, where: str
) -> None:
    """Before: `(event #-1 of a batch): malformed event: Python int too large to convert
    to C long`, naming neither the event nor the field."""
    event: dict[str, object] = {"ph": "X", "cat": "cpu_op", "name": "aten::mm", "ts": 10}
    event.update(dur=5, pid=1, tid=1, args={"External id": 3})
    target = event if where == "event" else event["args"]
    target[field] = 2**63  # type: ignore[index]
    bad = tmp_path / "rank0.kineto.json"
    bad.write_text(json.dumps({"traceEvents": [event]}))
    message = f"event 'aten::mm': '{field}' is 9223372036854775808, past 64 bits"
    with pytest.raises(TraceFormatError, match=re.escape(message)):
        convert([bad], tmp_path / "out")


def test_min_link_rate_nan_is_a_usage_error(kineto_only: Path, tmp_path: Path) -> None:
    """Before: click's FloatRange let NaN through (every comparison with it is false), and
    a rank linking 100 % of its ops was refused as `below the nan% threshold ()`."""
    out = tmp_path / "out"
    args = ["convert", str(DDP), "-o", str(out), "--min-link-rate", "nan"]
    result = CliRunner().invoke(cli, args)
    assert result.exit_code == 2, result.output
    assert "--min-link-rate" in result.output and "nan" in result.output
    assert not out.exists()
