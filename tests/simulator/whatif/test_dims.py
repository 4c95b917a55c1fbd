"""Shape rewrites when the model's sizes coincide (`whatif.dims`): which axis a dimension
is comes from the tensor's layout and from whether it is a parameter, not its value
alone (host-ET tensor values `[id, storage, offset, numel, itemsize, device]`)."""

from __future__ import annotations

import json

from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.dims import DimMap, ModelDims, hidden_map, seq_map
from lumos.simulator.whatif.weights import find_weights, param_storages

# the grid's sequence-128 capture: B 4, S 128, H 128, 4 heads -> B.S = 512 = 4H, S = H
DIMS = ModelDims(batch=4, seq=128, hidden=128, heads=4)
W_FC1, W_QKV, ACT, ACT2 = 10, 11, 20, 21  # storages: two weights, two activations


def _t(tid: int, storage: int, numel: int) -> list[object]:
    return [tid, storage, 0, numel, 4, "cpu"]


def _op(
    name: str, shapes: list[object], values: list[object], phase: str, out: list[object]
) -> pb.Node:
    n = pb.Node(name=name, type=pb.COMP_NODE)
    n.inputs.shapes = json.dumps(shapes)
    n.inputs.values = json.dumps(values)
    n.outputs.values = json.dumps(out)
    nd.set_tags(n, phase, 0 if phase != "optim" else -1, -1)
    return n


def _step() -> list[pb.Node]:
    fc1, qkv = _t(1, W_FC1, 65536), _t(2, W_QKV, 49152)
    x, h = _t(30, ACT, 65536), _t(31, ACT2, 262144)
    temp = _t(40, ACT, 65536)  # an optimizer temporary that got the freed activation's ids
    return [
        _op("aten::native_layer_norm", [[512, 128]], [_t(29, 25, 65536)], "fwd", [x]),
        _op("aten::t", [[512, 128]], [fc1], "fwd", [_t(3, W_FC1, 65536)]),
        _op("aten::mm", [[512, 128], [128, 512]], [x, _t(3, W_FC1, 65536)], "fwd", [h]),
        _op("aten::mm", [[512, 512], [512, 128]], [h, fc1], "bwd", [_t(32, 22, 65536)]),
        _op("aten::sqrt", [[512, 128]], [_t(41, 23, 65536)], "optim", [temp]),
        _op(
            "aten::addcdiv_",
            [[512, 128], [512, 128], [512, 128], []],
            [fc1, temp, temp, 1],
            "optim",
            [fc1],
        ),
        _op(
            "aten::addcdiv_",
            [[384, 128], [384, 128], [384, 128], []],
            [qkv, qkv, qkv, 1],
            "optim",
            [qkv],
        ),
        _op("aten::linear", [[128, 384]], [qkv], "fwd", [_t(50, 24, 1)]),
    ]


def test_weight_storages_are_what_the_optimizer_reads_before_allocating() -> None:
    # the activation's storage came back as an optimizer temporary: not a weight
    assert param_storages(_step()) == {W_FC1: 65536, W_QKV: 49152}


def test_sequence_edit_when_tokens_equal_the_mlp_width_and_sequence_the_hidden_size() -> None:
    step = _step()
    m = seq_map(DIMS, 64).with_frozen(param_storages(step))
    fwd, bwd = step[2], step[3]
    # activations shrink along their token rows only; the weight [4H, H] = [512, 128] stays
    assert json.loads(m.rewrite(fwd.inputs.shapes, fwd.inputs.values)) == [[256, 128], [128, 512]]
    assert json.loads(m.rewrite(bwd.inputs.shapes, bwd.inputs.values)) == [[256, 512], [512, 128]]
    # an activation [B, S, H] with S = H: only the middle dimension is the sequence
    assert m.shape([4, 128, 128]) == [4, 64, 128]
    # attention [B, heads, S, D]
    assert m.shape([4, 4, 128, 32]) == [4, 4, 64, 32]


def test_hidden_edit_when_tokens_equal_the_mlp_width() -> None:
    step = _step()
    m = hidden_map(DIMS, 256).with_frozen(param_storages(step))
    fwd, bwd = step[2], step[3]
    # token rows stay 512 although 512 is also the old 4H; weights change by value
    assert json.loads(m.rewrite(fwd.inputs.shapes, fwd.inputs.values)) == [[512, 256], [256, 1024]]
    assert json.loads(m.rewrite(bwd.inputs.shapes, bwd.inputs.values)) == [[512, 1024], [1024, 256]]
    assert m.shape([4, 128, 128]) == [4, 128, 256]


def test_malformed_tensor_values_are_not_parameters_and_do_not_raise() -> None:
    odd = [
        _op("aten::lerp_", [[4]], [[1, 2, 0, "x", 4, "cpu"]], "optim", []),
        _op("aten::mul_", [[4]], [[3, None, 0, 4, 4, "cpu"]], "optim", []),
        _op("aten::mm", [[4]], [[1, 2, 0, "x", 4, "cpu"]], "fwd", []),
    ]
    odd[0].inputs.values = "not json"
    storages = param_storages(odd)
    assert all(isinstance(k, int) for k in storages)
    m = seq_map(DIMS, 64).with_frozen(storages)
    assert json.loads(m.rewrite(odd[2].inputs.shapes, odd[2].inputs.values)) == [[4]]


# the grid's hidden-256 capture: B 4, S 64, H 256, 4 heads -> B.S = 256 = H, head size 64 = S
WIDE = ModelDims(batch=4, seq=64, hidden=256, heads=4)
GRAD, BUCKET, TABLE = 60, 61, 62  # storages: a weight's gradient, a DDP bucket, positions


def _wide_step() -> list[pb.Node]:
    """What the hidden-256 trace shows of the tensors that look alike: an activation
    `[B.S, H]` that gives its storage back before the attention projection's gradient
    `[H, H]` gets it, the gradient handed to autograd and copied into its DDP bucket, the
    learned position table `[S, H]`, and an AdamW temporary of the head's shape."""
    act, grad = _t(70, GRAD, 65536), _t(71, GRAD, 65536)
    table = _t(72, TABLE, 16384)
    return [
        _op("aten::embedding", [[64, 256], [64]], [table, _t(73, 30, 64)], "fwd", []),
        _op("aten::gelu", [[256, 256]], [act], "bwd", []),  # the storage's earlier tenant
        _op("torch::autograd::AccumulateGrad", [[256, 256]], [grad], "bwd", []),
        _op(
            "torch::distributed::reducer::mul_out",
            [[256, 256]],
            [_t(74, BUCKET, 65536)],
            "bwd",
            [],
        ),
        _op(
            "aten::mul", [[256, 256], [], [256, 256]], [grad, 0.5, _t(74, BUCKET, 65536)], "bwd", []
        ),
        _op("aten::div", [[128, 256], []], [_t(75, 31, 32768), 2.0], "optim", []),
    ]


def _new(m: DimMap, n: pb.Node, at: int) -> object:
    optim = nd.tags(n)[0] == "optim"
    return json.loads(m.rewrite(n.inputs.shapes, n.inputs.values, n.name, at, optim))


def test_hidden_edit_when_tokens_equal_the_hidden_size_keeps_weights_weight_shaped() -> None:
    step = _wide_step()
    m = hidden_map(WIDE, 128).with_weights(find_weights(step, WIDE.seq))
    # before autograd takes the storage it held an activation [B.S, H]: the rows stay
    assert _new(m, step[1], 1) == [[256, 128]]
    # the gradient [H, H] and its view in the DDP bucket: both dimensions are H
    assert _new(m, step[2], 2) == [[128, 128]]
    assert _new(m, step[3], 3) == [[128, 128]]
    assert _new(m, step[4], 4) == [[128, 128], [], [128, 128]]
    # an optimizer temporary of the head [vocabulary, H]: not tokens
    assert _new(m, step[5], 5) == [[128, 128], []]
    # the position table [S, H] with S = H/heads: only its features change
    assert _new(m, step[0], 0) == [[64, 128], [64]]
    assert (
        seq_map(WIDE, 32)
        .with_weights(find_weights(step, WIDE.seq))
        .rewrite(step[0].inputs.shapes, step[0].inputs.values, "aten::embedding", 0)
        == "[[32,256],[32]]"
    )


def test_gemm_operands_keep_their_shared_dimension_when_tokens_equal_the_hidden_size() -> None:
    m = hidden_map(WIDE, 128)
    # fc2's weight gradient: x^T [H, B.S] @ gelu output [B.S, 4H] contracts over tokens
    assert json.loads(m.rewrite("[[256,256],[256,1024]]", op="aten::mm")) == [
        [128, 256],
        [256, 512],
    ]
    # the attention projection's: both operands [256, 256], a product of activations
    assert json.loads(m.rewrite("[[256,256],[256,256]]", op="aten::mm")) == [
        [128, 256],
        [256, 128],
    ]
    # a forward GEMM against a weight (by value): the activation's rows stay
    w = hidden_map(WIDE, 128).with_frozen({BUCKET: 196608})
    shapes = "[[768],[256,256],[256,768],[],[]]"
    values = json.dumps([_t(1, 2, 768), _t(3, 4, 65536), _t(5, BUCKET, 196608), 1, 1])
    assert json.loads(w.rewrite(shapes, values, "aten::addmm")) == [
        [384],
        [256, 128],
        [128, 384],
        [],
        [],
    ]


def test_hidden_edit_when_the_head_size_equals_the_sequence() -> None:
    m = hidden_map(WIDE, 128)
    assert m.shape([4, 64, 4, 64]) == [4, 64, 4, 32]  # [B, S, heads, D] before the transpose
    assert m.shape([4, 4, 64, 64]) == [4, 4, 64, 32]  # [B, heads, S, D]
    assert m.shape([4, 4, 64]) == [4, 4, 64]  # the attention's log-sum-exp [B, heads, S]
    assert m.shape([4, 64]) == [4, 64]  # token ids [B, S]
    s = seq_map(WIDE, 32)
    assert s.shape([4, 64, 4, 64]) == [4, 32, 4, 64]
    assert s.shape([4, 4, 64]) == [4, 4, 32]
    assert s.shape([4, 64]) == [4, 32]


def test_sequence_edit_when_the_sequence_equals_hidden_size_and_vocabulary() -> None:
    # the grid's sequence-128 capture: S = H = vocabulary = 128, so the token table, the
    # position table and the attention projection are all [128, 128]
    tok, pos, proj = _t(80, 81, 16384), _t(82, 83, 16384), _t(84, 85, 16384)
    step = [
        _op("aten::embedding", [[128, 128], [4, 128]], [tok, _t(86, 87, 512)], "fwd", []),
        _op("aten::embedding", [[128, 128], [128]], [pos, _t(88, 89, 128)], "fwd", []),
        _op("aten::linear", [[4, 128, 128], [128, 128]], [_t(90, 91, 65536), proj], "fwd", []),
        *[_op("aten::lerp_", [[128, 128]], [p], "optim", []) for p in (tok, pos, proj)],
        _op("aten::sqrt", [[128, 128]], [_t(92, 93, 16384)], "optim", []),
    ]
    weights = find_weights(step, DIMS.seq)
    assert dict(weights.tables) == {83: 16384}  # token ids [B, S] do not look up positions
    m = seq_map(DIMS, 64).with_weights(weights)
    assert _new(m, step[0], 0) == [[128, 128], [4, 64]]
    assert _new(m, step[1], 1) == [[64, 128], [64]]
    assert _new(m, step[2], 2) == [[4, 64, 128], [128, 128]]
    assert _new(m, step[4], 4) == [[64, 128]]  # the table, named by its storage
    assert _new(m, step[5], 5) == [[128, 128]]  # the projection's
    # a temporary of that shape could be either's: the parameters' reading (by shape, a
    # position table only where no other parameter has its shape)
    assert _new(m, step[6], 6) == [[128, 128]]
