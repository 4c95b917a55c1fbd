"""Shape rewrites when the vocabulary equals a size an edit rewrites (`whatif.vocab`): the
token table, the head, their gradients, optimizer states and DDP bucket views keep the
vocabulary axis, and the logits keep theirs, whatever other size the vocabulary equals.
Hand-made steps in the host-ET layout (values `[id, storage, offset, numel, itemsize,
device]`, the grid base's op names and order)."""

from __future__ import annotations

import json
from collections.abc import Sequence

from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.dims import DimMap, ModelDims, hidden_map, seq_map
from lumos.simulator.whatif.vocab import find_vocab
from lumos.simulator.whatif.weights import find_weights

TOK, HEAD, W1 = 1, 2, 3  # parameter storages
LOGITS, LSM, GN, GL, HG, TG, W1G, BUCKET, BUCKET2, TMP, TMP2 = range(10, 21)
Y, GY, IDS, TGT = 30, 31, 32, 33
Pairs = Sequence[tuple[object, object]]


def _t(storage: int, numel: int, offset: int = 0, tid: int = 0) -> list[object]:
    return [tid or storage + 500, storage, offset, numel, 4, "cpu"]


def _op(name: str, phase: str, ins: Pairs, outs: Pairs = ()) -> pb.Node:
    """One op: `ins`/`outs` as (shape, value) pairs."""
    n = pb.Node(name=name, type=pb.COMP_NODE)
    n.inputs.shapes = json.dumps([s for s, _ in ins])
    n.inputs.values = json.dumps([v for _, v in ins])
    n.outputs.shapes = json.dumps([s for s, _ in outs])
    n.outputs.values = json.dumps([v for _, v in outs])
    nd.set_tags(n, phase, -1, -1)
    return n


def _step(b: int, s: int, h: int, v: int, tied: bool = False) -> list[pb.Node]:
    """Token embedding, one layer weight `[H, H]`, the head `[V, H]` (the token table when
    `tied`), cross entropy, the backward with DDP's bucket copies, AdamW per parameter."""
    t, vh, hh = b * s, v * h, h * h
    head = TOK if tied else HEAD
    ids, tgt = (_t(IDS, t), [b, s]), (_t(TGT, t), [t])
    y2d, logits = ([t, h], _t(Y, t * h)), ([t, v], _t(LOGITS, t * v))
    lsm, gn, gl = ([t, v], _t(LSM, t * v)), ([t, v], _t(GN, t * v)), ([t, v], _t(GL, t * v))
    hg, tg = ([v, h], _t(HG, vh)), ([v, h], _t(TG, vh))
    step = [
        _op("aten::embedding", "fwd", [([v, h], _t(TOK, vh)), ([b, s], ids[0]), ([], -1)]),
        _op("aten::linear", "fwd", [([b, s, h], _t(40, t * h)), ([h, h], _t(W1, hh))]),
        _op("aten::t", "fwd", [([v, h], _t(head, vh))], [([h, v], _t(head, vh, tid=9))]),
        _op("aten::mm", "fwd", [y2d, ([h, v], _t(head, vh, tid=9))], [logits]),
        _op("aten::view", "fwd", [logits, ([], [b, s, v])], [([b, s, v], _t(LOGITS, t * v))]),
        _op("aten::cross_entropy_loss", "fwd", [logits, (tgt[1], tgt[0])], [([], _t(50, 1))]),
        _op("aten::log_softmax", "fwd", [logits, ([], 1)], [lsm]),
        _op("aten::nll_loss_forward", "fwd", [lsm, (tgt[1], tgt[0])], [([], _t(50, 1))]),
        _op("aten::nll_loss_backward", "bwd", [([], _t(51, 1)), lsm, (tgt[1], tgt[0])], [gn]),
        _op("aten::_log_softmax_backward_data", "bwd", [gn, lsm, ([], 1)], [gl]),
        _op("aten::t", "bwd", [gl], [([v, t], _t(GL, t * v))]),
        _op("aten::mm", "bwd", [([v, t], _t(GL, t * v)), y2d], [hg]),  # the head's gradient
        _op("aten::mm", "bwd", [gl, ([v, h], _t(head, vh))], [([t, h], _t(GY, t * h))]),
        # the logits' storage given back to an activation of the same size
        _op("aten::add", "bwd", [([t, h], _t(GY, t * h))] * 2, [([t, h], _t(LOGITS, t * h))]),
        _op("aten::gelu", "bwd", [([t, h], _t(LOGITS, t * h))]),
        _op("aten::embedding_backward", "bwd", [([b, s, h], _t(41, t * h)), ids[::-1]], [tg]),
    ]
    if tied:
        step.append(_op("aten::add", "bwd", [hg, tg], [([v, h], _t(TG, vh))]))
    grads = [] if tied else [(hg, _t(BUCKET, vh))]
    grads += [(([h, h], _t(W1G, hh)), _t(BUCKET, hh, 0 if tied else vh)), (tg, _t(BUCKET2, vh))]
    for (shape, g), view in grads:
        step.append(_op("torch::autograd::AccumulateGrad", "bwd", [(shape, g)]))
        step.append(_op("torch::distributed::reducer::mul_out", "bwd", [(shape, view)]))
        step.append(_op("aten::mul", "bwd", [(shape, g), ([], 0.5), (shape, view)]))
    params = [(TOK, [v, h], TG), (W1, [h, h], W1G)] + ([] if tied else [(HEAD, [v, h], HG)])
    for p, shape, g in params:
        n = shape[0] * shape[1]
        pv, gv, m, sq = _t(p, n), _t(g, n), _t(p + 100, n), _t(p + 200, n)
        step += [
            _op("aten::mul_", "optim", [(shape, pv), ([], 0.99)]),
            _op("aten::lerp_", "optim", [(shape, m), (shape, gv), ([], 0.1)]),
            _op("aten::addcmul_", "optim", [(shape, sq), (shape, gv), (shape, gv), ([], 0.001)]),
            _op("aten::sqrt", "optim", [(shape, sq)], [(shape, _t(TMP, n))]),
            _op("aten::div", "optim", [(shape, _t(TMP, n)), ([], 2.0)], [(shape, _t(TMP2, n))]),
            _op("aten::addcdiv_", "optim", [(shape, pv), (shape, m), (shape, _t(TMP2, n))]),
        ]
    return step


def _edit(step: list[pb.Node], m: DimMap, dims: ModelDims) -> DimMap:
    weights = find_weights(step, dims.seq)
    return m.with_weights(weights, find_vocab(step, weights))


def _ins(m: DimMap, step: list[pb.Node], name: str, k: int = 0) -> object:
    """The rewritten input shapes of the `k`-th op `name`."""
    at = [i for i, n in enumerate(step) if n.name == name][k]
    n = step[at]
    optim = nd.tags(n)[0] == "optim"
    return json.loads(m.rewrite(n.inputs.shapes, n.inputs.values, n.name, at, optim))


def _outs(m: DimMap, step: list[pb.Node], name: str) -> object:
    at = next(i for i, n in enumerate(step) if n.name == name)
    return json.loads(m.rewrite(step[at].outputs.shapes, step[at].outputs.values, "", at))


def _buckets(m: DimMap, step: list[pb.Node]) -> list[object]:
    return [
        _ins(m, step, "torch::distributed::reducer::mul_out", k)[0]  # type: ignore[index]
        for k in range(sum(n.name == "torch::distributed::reducer::mul_out" for n in step))
    ]


def test_hidden_edit_keeps_the_vocabulary_when_it_equals_the_hidden_size() -> None:
    # the grid's base: vocabulary 128 = H; here V = H = 16, B.S = 8, edited to H = 32
    dims = ModelDims(batch=2, seq=4, hidden=16, heads=2)
    step = _step(2, 4, 16, 16)
    m = _edit(step, hidden_map(dims, 32), dims)
    assert _ins(m, step, "aten::embedding") == [[16, 32], [2, 4], []]
    assert _ins(m, step, "aten::mm", 0) == [[8, 32], [32, 16]]  # the head: logits [B.S, V]
    assert _ins(m, step, "aten::view") == [[8, 16], []]
    assert _outs(m, step, "aten::view") == [[2, 4, 16]]
    assert _ins(m, step, "aten::cross_entropy_loss") == [[8, 16], [8]]
    assert _ins(m, step, "aten::_log_softmax_backward_data") == [[8, 16], [8, 16], []]
    assert _ins(m, step, "aten::mm", 1) == [[16, 8], [8, 32]]  # the head's gradient
    assert _ins(m, step, "aten::mm", 2) == [[8, 16], [16, 32]]  # the gradient of its input
    # the logits' storage given back to an activation [B.S, H]: rewritten as one
    assert _ins(m, step, "aten::gelu") == [[8, 32]]
    # DDP's bucket views: the head and the token table [V, H'], the layer [H', H']
    assert _buckets(m, step) == [[16, 32], [32, 32], [16, 32]]
    # AdamW: every state and temporary of a vocabulary parameter keeps its rows
    assert [_ins(m, step, "aten::sqrt", k) for k in range(3)] == [
        [[16, 32]],
        [[32, 32]],
        [[16, 32]],
    ]
    assert _ins(m, step, "aten::addcdiv_", 2) == [[16, 32]] * 3


def test_hidden_edit_keeps_a_tied_vocabulary_and_one_four_times_the_hidden_size() -> None:
    dims = ModelDims(batch=2, seq=4, hidden=16, heads=2)
    tied = _step(2, 4, 16, 16, tied=True)  # the head is the token table
    m = _edit(tied, hidden_map(dims, 32), dims)
    assert _ins(m, tied, "aten::embedding") == [[16, 32], [2, 4], []]
    assert _ins(m, tied, "aten::mm", 0) == [[8, 32], [32, 16]]
    assert _ins(m, tied, "aten::cross_entropy_loss") == [[8, 16], [8]]
    assert _buckets(m, tied) == [[32, 32], [16, 32]]
    assert [_ins(m, tied, "aten::sqrt", k) for k in range(2)] == [[[16, 32]], [[32, 32]]]
    wide = _step(2, 4, 16, 64)  # V = 4H = the MLP width, which becomes 128
    m = _edit(wide, hidden_map(dims, 32), dims)
    assert _ins(m, wide, "aten::embedding") == [[64, 32], [2, 4], []]
    assert _ins(m, wide, "aten::mm", 0) == [[8, 32], [32, 64]]
    assert _ins(m, wide, "aten::log_softmax") == [[8, 64], []]
    assert _buckets(m, wide) == [[64, 32], [32, 32], [64, 32]]


def test_sequence_edit_keeps_the_vocabulary_when_it_equals_the_tokens() -> None:
    # V = B.S = 8: the logits [B.S, V] and their transpose look like a square weight
    dims = ModelDims(batch=2, seq=4, hidden=16, heads=2)
    step = _step(2, 4, 16, 8)
    m = _edit(step, seq_map(dims, 8), dims)
    assert _ins(m, step, "aten::mm", 0) == [[16, 16], [16, 8]]
    assert _ins(m, step, "aten::cross_entropy_loss") == [[16, 8], [16]]
    assert _ins(m, step, "aten::t", 1) == [[16, 8]]  # the logits' gradient [B.S, V]
    assert _ins(m, step, "aten::mm", 1) == [[8, 16], [16, 16]]
    assert _ins(m, step, "aten::mm", 2) == [[16, 8], [8, 16]]
    assert _ins(m, step, "aten::embedding") == [[8, 16], [2, 8], []]
    assert _buckets(m, step) == [[8, 16], [16, 16], [8, 16]]


def test_hidden_edit_says_which_vocabulary_it_kept(tmp_path: object) -> None:
    """The committed DDP capture (hidden 64, batch 4 x sequence 32: vocabulary 128 = B·S =
    2H): `--hidden 128` names the vocabulary it kept, and the token table becomes
    [128, 128] (vocabulary x the new hidden size), not [256, 128]."""
    from pathlib import Path

    from lumos.converters.pytorch.convert import convert
    from lumos.simulator.whatif.api import WhatIf, apply_edits, recover
    from lumos.simulator.whatif.etset import load_etset
    from tests.conftest import DATA

    out = Path(str(tmp_path)) / "et"
    convert([DATA / "captures" / "ddp"], out, prefix="ddp")
    edited, notes = apply_edits(recover(load_etset(out)), WhatIf(hidden=128))
    assert any(n.startswith("vocabulary: 128 kept on the token table") for n in notes)
    tables = [
        json.loads(n.inputs.shapes)[0]
        for n in edited.ranks[0].nodes
        if n.name == "aten::embedding" and n.inputs.shapes
    ]
    assert [128, 128] in tables and [256, 128] not in tables
