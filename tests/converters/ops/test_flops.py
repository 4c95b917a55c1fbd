"""FLOPs and bytes of ATen ops from trace argument strings (host ET, Chakra IOInfo, Kineto)."""

from __future__ import annotations

import pytest

from lumos.converters.ops.args import DType, Tensor, TensorList, parse_args
from lumos.converters.ops.flops import CostKind, OpCost, Unpriced, has_kernel_formula, op_cost


def test_parse_ioinfo_strings_python_repr_and_json() -> None:
    args = parse_args("[[4, 8], [8, 16], []]", "['Tensor(float)', 'Tensor(c10::Half)', 'Int']")
    assert args[0] == Tensor((4, 8), DType.FP32)
    assert args[1] == Tensor((8, 16), DType.FP16)
    assert not isinstance(args[2], Tensor)
    nested = parse_args(
        "[[[4],[8]],[]]",
        '["GenericList[Tensor(bfloat16),Tensor(bfloat16)]","Int"]',
        '[[[1,2,0,4,2,"cuda:0"],[3,4,0,8,2,"cuda:0"]],0]',
    )
    assert isinstance(nested[0], TensorList)
    assert [t.shape for t in nested[0].tensors] == [(4,), (8,)]
    assert nested[0].tensors[1].device == "cuda:0" and nested[0].nbytes == 24


def test_garbage_strings_give_no_args() -> None:
    assert parse_args("[[4, 8", "['Tensor(float)'") == []
    assert isinstance(op_cost("aten::mm", "not a list", "[]"), Unpriced)


def test_matmul_family_flops() -> None:
    mm = op_cost("aten::mm", "[[4, 8], [8, 16]]", "['Tensor(float)', 'Tensor(float)']")
    assert isinstance(mm, OpCost) and mm.kind is CostKind.MATMUL
    assert mm.flops == 2 * 4 * 8 * 16 and mm.bytes == (32 + 128 + 64) * 4
    addmm = op_cost("aten::addmm", [[16], [4, 8], [8, 16]], ["c10::BFloat16"] * 3)
    assert isinstance(addmm, OpCost) and addmm.flops == 2 * 4 * 8 * 16 and addmm.dtype is DType.BF16
    bmm = op_cost("aten::bmm", [[3, 4, 8], [3, 8, 16]], ["float", "float"])
    assert isinstance(bmm, OpCost) and bmm.flops == 3 * 2 * 4 * 8 * 16
    linear = op_cost("aten::linear", [[2, 5, 8], [16, 8], [16]], ["float"] * 3)
    assert isinstance(linear, OpCost) and linear.flops == 2 * 10 * 8 * 16
    matmul = op_cost("aten::matmul", [[2, 1, 4, 8], [3, 8, 16]], ["float", "float"])
    assert isinstance(matmul, OpCost) and matmul.flops == 6 * 2 * 4 * 8 * 16
    assert isinstance(op_cost("aten::mm", [[4, 8], [9, 16]], ["float"] * 2), Unpriced)


def test_conv_from_host_et_values_and_backward_is_twice() -> None:
    fwd = op_cost(
        "aten::cudnn_convolution",
        "[[32,3,224,224],[64,3,7,7],[[],[]],[[],[]],[[],[]],[],[],[],[]]",
        '["Tensor(float)","Tensor(float)","GenericList[Int,Int]","GenericList[Int,Int]",'
        '"GenericList[Int,Int]","Int","Bool","Bool","Bool"]',
        '[[1,2,0,4816896,4,"cuda:0"],[3,4,0,9408,4,"cuda:0"],[3,3],[2,2],[1,1],1,false,false,true]',
    )
    assert isinstance(fwd, OpCost) and fwd.kind is CostKind.CONV and fwd.on_gpu is True
    assert fwd.flops == 2 * 32 * 64 * 112 * 112 * 3 * 7 * 7  # ResNet stem, 7.55 GFLOP
    bwd = op_cost(
        "aten::convolution_backward",
        [[32, 64, 112, 112], [32, 3, 224, 224], [64, 3, 7, 7]],
        ["float"] * 3,
    )
    assert isinstance(bwd, OpCost) and bwd.flops == 2 * fwd.flops


def test_attention_causal_halves_and_backward_is_2_5x() -> None:
    q = [2, 8, 128, 64]
    full = op_cost(
        "aten::_scaled_dot_product_flash_attention",
        [q, q, q, [], []],
        ["c10::Half"] * 3 + ["Scalar", "Scalar"],
    )
    causal = op_cost(
        "aten::_scaled_dot_product_flash_attention",
        [q, q, q, [], []],
        ["c10::Half"] * 3 + ["Double", "Bool"],
        [None, None, None, 0.0, True],
    )
    assert isinstance(full, OpCost) and full.flops == 4 * 2 * 8 * 128 * 128 * 64
    assert isinstance(causal, OpCost) and causal.flops == full.flops / 2
    bwd = op_cost(
        "aten::_scaled_dot_product_flash_attention_backward", [q, q, q, q], ["c10::Half"] * 4
    )
    assert isinstance(bwd, OpCost) and bwd.flops == pytest.approx(2.5 * full.flops)


@pytest.mark.parametrize(
    ("name", "shapes", "types", "kind", "nbytes"),
    [
        (
            "aten::add_",
            [[32, 64], [64], []],
            ["float", "float", "Scalar"],
            CostKind.MEMORY,
            (2048 + 64 + 2048) * 4,
        ),
        ("aten::gelu", [[10, 10]], ["c10::BFloat16"], CostKind.MEMORY, 400),
        (
            "aten::native_layer_norm",
            [[8, 512], [], [512], [512]],
            ["float", "", "float", "float"],
            CostKind.REDUCTION,
            2 * 8 * 512 * 4 + 2 * 512 * 4,
        ),
        (
            "aten::_softmax",
            [[4, 100], [], []],
            ["c10::Half", "Scalar", "Scalar"],
            CostKind.REDUCTION,
            2 * 400 * 2,
        ),
        (
            "aten::sum",
            [[16, 1], [], [], []],
            ["float", "", "Scalar", ""],
            CostKind.REDUCTION,
            64 + 4,
        ),
        (
            "aten::copy_",
            [[351], [351], []],
            ["long int", "long int", "Scalar"],
            CostKind.MEMORY,
            2 * 351 * 8,
        ),
        (
            "aten::embedding",
            [[1000, 64], [4, 10]],
            ["float", "long int"],
            CostKind.MEMORY,
            2 * 40 * 64 * 4 + 40 * 8,
        ),
        ("aten::view", [[64], [[]]], ["Tensor(float)", "GenericList[Int]"], CostKind.NO_KERNEL, 0),
    ],
)
def test_memory_bound_ops(
    name: str, shapes: list, types: list, kind: CostKind, nbytes: int
) -> None:
    cost = op_cost(name, shapes, types)
    assert isinstance(cost, OpCost) and cost.kind is kind
    assert cost.bytes == nbytes


def test_cross_device_copy_is_a_transfer_and_foreach_covers_lists() -> None:
    h2d = op_cost(
        "aten::copy_",
        "[[64],[64],[]]",
        '["Tensor(float)","Tensor(float)","Bool"]',
        '[[1,2,0,64,4,"cuda:0"],[3,4,0,64,4,"cpu"],false]',
    )
    assert isinstance(h2d, OpCost) and h2d.kind is CostKind.TRANSFER
    adam = op_cost(
        "aten::_fused_adamw_",
        [[[10], [20]]] * 4,
        ["GenericList[Tensor(float),Tensor(float)]"] * 4,
    )
    assert isinstance(adam, OpCost) and adam.bytes == (4 * 30 + 3 * 30) * 4


def test_unknown_ops_say_why() -> None:
    cost = op_cost("fbgemm::jagged_to_padded_dense", [[4]], ["int"])
    assert isinstance(cost, Unpriced) and "no cost formula" in cost.reason
    assert has_kernel_formula("aten::convolution_backward")
    assert not has_kernel_formula("aten::empty") and not has_kernel_formula("my::op")
