"""Host-ET loading: every schema version in the fixtures parses into the same columns."""

from __future__ import annotations

import pytest

from lumos.converters.pytorch.host_et import load_host_et
from lumos.converters.pytorch.json_stream import TraceFile, expand_inputs
from tests.conftest import DATA, fixture_path

INPUTS = "param/et_replay/tests/inputs"


def _one(path: str, name: str | None = None) -> TraceFile:
    files = expand_inputs([fixture_path(path)])
    return next(f for f in files if name is None or f.name == name)


@pytest.mark.parametrize(
    ("path", "member", "schema", "nodes", "comm_nodes", "groups"),
    [
        (f"{INPUTS}/dlrm_pytorch_et.tar.gz", "dlrm_eg_0.json", "1.0.1", 1675, 13, 0),
        (
            "astra-sim/my_test/inputs/workload/result/eg.rank_0.pt.trace.json.gz",
            None,
            "1.0.2-chakra.0.0.4",
            4801,
            9,
            0,
        ),
        ("chakra/tests/data/1.0.2-chakra.0.0.4.tgz", None, "1.0.2-chakra.0.0.4", 263, 20, 1),
        (f"{INPUTS}/resnet_et.json.gz", None, "1.1.0-chakra.0.0.4", 14392, 27, 1),
        (f"{INPUTS}/hf_GPT2_et.json.tar.gz", None, "1.1.0-chakra.0.0.4", 27156, 0, 0),
    ],
)
def test_schema_versions_load(
    path: str, member: str | None, schema: str, nodes: int, comm_nodes: int, groups: int
) -> None:
    host = load_host_et(_one(path, member))
    assert host.schema.version == schema
    assert len(host) == nodes
    assert len(host.comm) == comm_nodes  # record_param_comms nodes, parsed
    assert len(host.process_groups) == groups
    assert (host.id[1:] > host.id[:-1]).all()  # rows sorted by id


def test_captures_1_1_1_and_row_records() -> None:
    host = load_host_et(TraceFile(str(DATA / "captures/pipeline/rank0.host_et.json.gz")))
    assert host.schema.version == "1.1.1-chakra.0.0.4"
    assert len(host) == 1357
    assert [g["pg_name"] for g in host.process_groups] == ["0"]
    send = host.op(host.row_of_id()[282])
    assert send.name == "c10d::send" and send.inputs is not None
    assert send.inputs.types == '["GenericList[Tensor(float)]","Object","Int","Int"]'
    assert send.inputs.values.endswith(',"<Object>",1,0]')  # peer 1, tag 0
    gloo = host.op(host.row_of_id()[283])
    assert (gloo.name, gloo.parent) == ("gloo:send", 282)


def test_1_0_1_flat_layout_fields() -> None:
    host = load_host_et(_one(f"{INPUTS}/dlrm_pytorch_et.tar.gz", "dlrm_eg_0.json"))
    op = host.op(host.row_of_id()[3])
    assert (op.name, op.rf_id, op.parent, op.tid) == ("## zero_grad ##", 1, 2, 1)
    comm = next(iter(host.comm.values()))
    assert comm.collective in ("all_to_all", "allreduce", "alltoall", "all_reduce", "wait")
