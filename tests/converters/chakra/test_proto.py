"""The Chakra schema bindings: no drift from the .proto, and wire-compatible with mlc-chakra."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from lumos.converters.chakra.stream import read_et, write_et
from lumos.proto import pb
from tests.conftest import REPO


def _need(module: str) -> None:
    if importlib.util.find_spec(module) is None:
        if os.environ.get("CI"):
            pytest.fail(f"{module} must be installed in CI")
        pytest.skip(f"{module} not installed")


def test_committed_bindings_match_a_fresh_protoc_run(tmp_path: Path) -> None:
    _need("grpc_tools")
    subprocess.run(
        [sys.executable, str(REPO / "scripts" / "gen_proto.py"), str(tmp_path)], check=True
    )
    for name in ("et_def_pb2.py", "et_def_pb2.pyi"):
        assert (tmp_path / name).read_text() == (REPO / "proto" / name).read_text(), (
            f"{name} drifted: run scripts/gen_proto.py"
        )


def test_descriptor_is_byte_identical_to_mlc_chakra() -> None:
    _need("chakra")
    code = "import sys; from chakra.schema.protobuf import et_def_pb2 as m; sys.stdout.buffer.write(m.DESCRIPTOR.serialized_pb)"
    theirs = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True).stdout
    assert theirs == pb.DESCRIPTOR.serialized_pb


# mlc-chakra's own reader/writer (protolib), run in a process that never imports lumos.
MLC_ROUNDTRIP = textwrap.dedent(
    """
    import sys
    from google.protobuf import json_format
    from chakra.schema.protobuf.et_def_pb2 import GlobalMetadata, Node
    from chakra.src.third_party.utils.protolib import openFileRd, decodeMessage, encodeMessage
    src, dst = sys.argv[1], sys.argv[2]
    f = openFileRd(src)
    meta = GlobalMetadata(); decodeMessage(f, meta)
    nodes = []
    while True:
        n = Node()
        if not decodeMessage(f, n):
            break
        nodes.append(n)
    with open(dst, "wb") as out:
        encodeMessage(out, meta)
        for n in nodes:
            encodeMessage(out, n)
    print(len(nodes), sum(len(n.attr) for n in nodes), nodes[-1].name)
    """
)


def test_files_cross_read_with_mlc_chakra(tmp_path: Path) -> None:
    _need("chakra")
    ours = pb.Node(id=7, name="ncclKernel_AllReduce", type=pb.COMM_COLL_NODE, duration_micros=42)
    ours.attr.add(name="is_cpu_op", bool_val=False)
    ours.attr.add(name="comm_type", int64_val=pb.ALL_REDUCE)
    ours.attr.add(name="comm_size", int64_val=1 << 40)
    ours.attr.add(name="involved_dim", bool_list=pb.BoolList(values=[True, False]))
    ours.attr.add(name="dur_ns", int64_val=41_987)
    comp = pb.Node(id=3, name="aten::mm", type=pb.COMP_NODE, inputs=pb.IOInfo(shapes="[[4, 8]]"))
    ours.data_deps.append(3)
    write_et(tmp_path / "ours.0.et", pb.GlobalMetadata(version="0.0.4"), [comp, ours])
    script = tmp_path / "mlc_roundtrip.py"
    script.write_text(MLC_ROUNDTRIP)
    out = subprocess.run(
        [sys.executable, str(script), str(tmp_path / "ours.0.et"), str(tmp_path / "theirs.0.et")],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.split()
    assert out == ["2", "5", "ncclKernel_AllReduce"]
    # Their writer's bytes are ours, and we read their file back to the same messages.
    assert (tmp_path / "theirs.0.et").read_bytes() == (tmp_path / "ours.0.et").read_bytes()
    meta, nodes = read_et(tmp_path / "theirs.0.et")
    assert nodes == [comp, ours] and meta.version == "0.0.4"


def test_converted_captures_read_identically_by_mlc_chakra(tmp_path: Path) -> None:
    """Our converter's output goes through mlc-chakra's reader and writer unchanged."""
    _need("chakra")
    from lumos.converters.pytorch.convert import convert

    convert([str(REPO / "tests" / "data" / "captures" / "pipeline")], tmp_path / "et", prefix="pp")
    script = tmp_path / "mlc_roundtrip.py"
    script.write_text(MLC_ROUNDTRIP)
    for rank in (0, 1):
        ours = tmp_path / "et" / f"pp.{rank}.et"
        theirs = tmp_path / f"theirs.{rank}.et"
        out = subprocess.run(
            [sys.executable, str(script), str(ours), str(theirs)],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.split()
        assert int(out[0]) == len(read_et(ours)[1]) > 1000
        assert theirs.read_bytes() == ours.read_bytes()
