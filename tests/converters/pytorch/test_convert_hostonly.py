"""Host-ET-only conversion keeps the ops that launch kernels (not just the leaves)."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from lumos.converters.chakra import conventions as cv
from lumos.converters.ops.flops import CostKind, OpCost, op_cost
from lumos.converters.pytorch.comm_tasks import CommContext
from lumos.converters.pytorch.host_et import HostTrace, load_host_et
from lumos.converters.pytorch.host_graph import build_host_tasks
from lumos.converters.pytorch.host_ops import OpRole, role_of
from lumos.converters.pytorch.json_stream import TraceFile, expand_inputs
from lumos.converters.pytorch.tasks import TaskKind, TaskTable
from lumos.hwconfigs.load import load_system
from lumos.simulator.costmodel.roofline import CostModel
from tests.conftest import fixture_path

INPUTS = "param/et_replay/tests/inputs"


@pytest.fixture(scope="module")
def resnet() -> tuple[HostTrace, TaskTable]:
    h = load_host_et(TraceFile(str(fixture_path(f"{INPUTS}/resnet_et.json.gz"))))
    return h, build_host_tasks(h, CommContext(0, 1, {}, h))[0]


@pytest.fixture(scope="module")
def dlrm() -> tuple[HostTrace, TaskTable]:
    src = next(
        f
        for f in expand_inputs([fixture_path(f"{INPUTS}/dlrm_pytorch_et.tar.gz")])
        if f.name == "dlrm_eg_0.json"
    )
    h = load_host_et(src)
    return h, build_host_tasks(h, CommContext(0, 8, {}, h))[0]


def _names(t: TaskTable) -> list[str]:
    return [t.name_of(i) for i in range(len(t))]


@pytest.mark.parametrize(
    ("name", "role"),
    [
        ("aten::cudnn_batch_norm", OpRole.KERNEL),
        ("aten::convolution_backward", OpRole.KERNEL),
        ("aten::_foreach_add_", OpRole.KERNEL),
        ("aten::max_pool2d_with_indices_backward", OpRole.OWN_KERNEL),
        ("fbgemm::permute_2D_sparse_data", OpRole.OWN_KERNEL),
        ("aten::empty_strided", OpRole.FOLD),
        ("aten::as_strided", OpRole.FOLD),
        ("aten::_local_scalar_dense", OpRole.SYNC),
        ("nccl:all_reduce", OpRole.COMM),
        ("record_param_comms", OpRole.OTHER),
        ("c10d::allreduce_", OpRole.OTHER),
        ("## forward ##", OpRole.OTHER),
    ],
)
def test_roles(name: str, role: OpRole) -> None:
    assert role_of(name) is role


def test_resnet_keeps_kernel_parents(resnet: tuple[HostTrace, TaskTable]) -> None:
    _h, t = resnet
    c = Counter(_names(t))
    # 53 conv / bn layers in the step (ResNet-50): each forward conv, bn, and backward once.
    for name in (
        "aten::cudnn_convolution",
        "aten::convolution_backward",
        "aten::cudnn_batch_norm",
        "aten::cudnn_batch_norm_backward",
    ):
        assert c[name] == 53, name
    assert c["aten::max_pool2d_with_indices_backward"] == 1
    assert c["aten::_foreach_add_"] == 2
    # their allocation children are folded, not tasks
    assert c["aten::empty"] == 0
    assert c["nccl:all_reduce"] == 5 and c["nccl:broadcast"] == 2
    assert len(t) == 1737  # the leaf-only rule gave 2746
    # the pool backward runs after the zero_ it calls for its output
    names = _names(t)
    at = names.index("aten::max_pool2d_with_indices_backward")
    assert names[at - 1] == "aten::fill_"
    # every leaf op the leaf rule kept is still accounted for (host_ops)
    cpu = np.flatnonzero(t.kind == TaskKind.CPU).tolist()
    assert sum(t.attrs.get(i, {}).get(cv.HOST_OPS, 1) for i in cpu) == 2740


def test_resnet_gpu_time_recovered(resnet: tuple[HostTrace, TaskTable]) -> None:
    """The cost model's GPU time of the kept ops on A100: the convolution backward and
    batch-norm kernels (≈ 12 ms) are no longer lost."""
    h, t = resnet
    model = CostModel.for_gpu(load_system("a100").gpu)
    total = 0
    for i in np.flatnonzero(t.kind == TaskKind.CPU).tolist():
        ins = h.io_of(int(t.host[i]))[0]
        if ins is None:
            continue
        cost = op_cost(t.name_of(i), ins.shapes, ins.types, ins.values)
        if isinstance(cost, OpCost) and cost.on_gpu is not False:
            total += model.time_ns(cost)
    assert total == pytest.approx(23.17e6, rel=0.02)


def test_dlrm_fbgemm_and_kernel_parents(dlrm: tuple[HostTrace, TaskTable]) -> None:
    _h, t = dlrm
    c = Counter(_names(t))
    assert c["aten::addmm"] == 7  # addmm <- empty: was dropped
    assert c["aten::add_"] == 37  # Adagrad's add_ <- to: 16 were dropped
    assert c["fbgemm::split_embedding_codegen_lookup_adagrad_function"] == 1
    assert c["torch::autograd::CppNode<SplitLookupFunction_adagrad_Op>"] == 1
    assert c["fbgemm::permute_2D_sparse_data"] == 2
    assert c["aten::_index_put_impl_"] == 1
    names = _names(t)
    at = names.index("aten::index")
    assert names[at - 1] == "aten::copy_"  # index casts its indices, then gathers
    assert len(t) == 794


def test_fbgemm_lookup_cost(dlrm: tuple[HostTrace, TaskTable]) -> None:
    h, t = dlrm
    at = _names(t).index("fbgemm::split_embedding_codegen_lookup_adagrad_function")
    ins = h.io_of(int(t.host[at]))[0]
    assert ins is not None
    cost = op_cost(t.name_of(at), ins.shapes, ins.types, ins.values)
    assert isinstance(cost, OpCost) and cost.kind is CostKind.MEMORY and cost.on_gpu
    # 768 rows of 48/3 fp32 + indices (768 x 8) + offsets (385 x 8) + out 128 x 48 fp32
    assert cost.bytes == 768 * 16 * 4 + 768 * 8 + 385 * 8 + 128 * 48 * 4


def test_deterministic(resnet: tuple[HostTrace, TaskTable]) -> None:
    h, t = resnet
    again, _ = build_host_tasks(h, CommContext(0, 1, {}, h))
    assert np.array_equal(again.host, t.host) and again.attrs == t.attrs
