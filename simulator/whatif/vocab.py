"""Which tensors of a rank have the vocabulary as an axis: the token table, the LM head,
their gradients, optimizer states and bucket views, and the logits.

A vocabulary is not a hidden dimension, but its size can be one of the sizes a hidden
edit rewrites (the grid's base: vocabulary 128 = H; or 4H, 3H, H/heads), and in a
sequence edit the logits `[B·S, V]` can look like a weight's gradient when V = B·S. What
the host ET says about a tensor's identity settles it (values `[id, storage, offset,
numel, itemsize, device]`):

* the token table: the parameter an embedding op looks up with token ids (not a position
  table, `weights.Weights.tables`); its rows are the vocabulary;
* the head: a parameter operand of the GEMM whose output reaches the loss
  (`log_softmax`, `cross_entropy_loss`, `nll_loss`), followed back from the loss through
  the ops between them (views, copies); its output's last axis is the vocabulary. A tied
  head is the token table itself;
* their optimizer states and temporaries: every tensor of the parameter's size in its
  part of the optimizer step (from the previous parameter's last in-place update to its
  own last one; in a multi-tensor (`_foreach_`) op, the same position of every list);
  their gradients: those of the gradients (`weights.Weights.grads`) seen there; their DDP
  bucket views: the bucket view a bucket copy writes a vocabulary gradient into;
* the logits: the head GEMM's output and, node by node, what ops other than GEMMs make
  from it at its size (views, `log_softmax`, the loss's backward, the gradient of the
  logits) until a GEMM contracts the vocabulary away; a storage stops being logits when
  an op that reads no logits writes it (the allocator gave it back).

Each vocabulary tensor keeps its vocabulary axis in a hidden edit (`dims.DimMap`); the
logits keep it in a sequence edit too.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.weights import Tensor, Weights, json_list, tensor_of, tensors

_GEMM = ("aten::mm", "aten::addmm", "aten::matmul", "aten::linear", "aten::bmm")
_LOSS = ("log_softmax", "cross_entropy", "nll_loss")
_WALK = 400  # nodes followed back from a loss to its head GEMM, at most


@dataclass(frozen=True, slots=True)
class Vocab:
    """A rank's vocabulary tensors (see module doc): `size` (the head's vocabulary, 0 if
    none), `rows` {storage: vocabulary} of the parameters and their gradients, `views`
    {(storage, offset, elements): vocabulary} of their DDP bucket views, `at` {node
    index: {storage: vocabulary}} of the tensors that have it at that node only
    (optimizer states and temporaries, the token table's gradient as the embedding's
    backward makes it) and `logits` {node index: storages holding logits there}."""

    size: int = 0
    rows: Mapping[int, int] = field(default_factory=dict)
    views: Mapping[Tensor, int] = field(default_factory=dict)
    at: Mapping[int, Mapping[int, int]] = field(default_factory=dict)
    logits: Mapping[int, frozenset[int]] = field(default_factory=dict)

    def rows_of(self, value: object, at: int, held: bool) -> int:
        """The vocabulary along one axis of tensor `value` at node `at` (0: none);
        `held`: the tensor is weight-shaped there (`Weights.holds`), so a parameter's or
        gradient's storage names it."""
        t = tensor_of(value)
        if t is None:
            return 0
        here = self.at.get(at, {}).get(t[0], 0)
        if here or not held:
            return here
        return self.views.get(t, 0) or self.rows.get(t[0], 0)

    def is_logits(self, value: object, at: int) -> bool:
        t = tensor_of(value)
        return t is not None and t[0] in self.logits.get(at, frozenset())


def find_vocab(nodes: Iterable[pb.Node], weights: Weights) -> Vocab:
    """A rank's `Vocab`, from its nodes and weight-shaped tensors."""
    nodes = list(nodes)
    heads = _heads(nodes, weights.params)
    tokens: set[int] = set()  # the token tables' vocabularies
    rows = dict(heads)
    for n in nodes:
        if "embedding" in n.name and "backward" not in n.name and _phase(n) != "optim":
            first = tensors(n.inputs.values)[:1]
            shape = (json_list(n.inputs.shapes) or [None])[0]
            if first and first[0][0] in weights.params and isinstance(shape, list) and shape:
                rows.setdefault(first[0][0], int(shape[0]))
                tokens.add(int(shape[0]))
    if not rows:
        return Vocab()
    at, grads = _optimizer(nodes, weights, rows)
    for i, n in enumerate(nodes):  # the token table's gradient as its backward makes it
        shape = (json_list(n.outputs.shapes) or [None])[0]
        outs = tensors(n.outputs.values)[:1]
        embedding = "embedding" in n.name and "backward" in n.name
        if embedding and outs and isinstance(shape, list) and shape and shape[0] in tokens:
            at.setdefault(i, {})[outs[0][0]] = int(shape[0])
    views = _views(nodes, weights, grads)
    size = max(heads.values(), default=max(rows.values()))
    return Vocab(size, rows | grads, views, at, _logits(nodes, set(heads)))


def _heads(nodes: list[pb.Node], params: Mapping[int, int]) -> dict[int, int]:
    """{storage: vocabulary} of the parameters of the GEMMs whose outputs reach a loss."""
    out: dict[int, int] = {}
    for i, n in enumerate(nodes):
        if not any(k in n.name for k in _LOSS) or "backward" in n.name or _phase(n) == "optim":
            continue
        first = tensors(n.inputs.values)[:1]
        storage = first[0][0] if first else None
        for j in range(i - 1, max(-1, i - _WALK), -1):
            m = nodes[j]
            if storage is None or storage not in {t[0] for t in tensors(m.outputs.values)}:
                continue
            if m.name in _GEMM:
                shapes = json_list(m.outputs.shapes)
                last = shapes[0][-1] if shapes and isinstance(shapes[0], list) else None
                for t in tensors(m.inputs.values):
                    if isinstance(last, int) and params.get(t[0], -1) == t[2]:
                        out[t[0]] = last
                break
            ins = tensors(m.inputs.values)
            storage = ins[0][0] if ins else None
    return out


def _optimizer(
    nodes: list[pb.Node], weights: Weights, rows: Mapping[int, int]
) -> tuple[dict[int, dict[int, int]], dict[int, int]]:
    """({node index: {storage: vocabulary}} of the optimizer's tensors of the vocabulary
    parameters' sizes, {storage: vocabulary} of those parameters' gradients)."""
    at: dict[int, dict[int, int]] = {}
    grads: dict[int, int] = {}
    optim = [i for i, n in enumerate(nodes) if _phase(n) == "optim"]
    last: dict[int, int] = {}
    for i in optim:
        first = tensors(nodes[i].inputs.values)[:1]
        if first and first[0][0] in weights.params and nodes[i].name.endswith("_"):
            last[first[0][0]] = i
    start = optim[0] if optim else 0
    for sid, end in sorted(last.items(), key=lambda kv: kv[1]):
        v, numel = rows.get(sid, 0), weights.params[sid]
        for i in (k for k in optim if start <= k <= end) if v else ():
            for t in tensors(nodes[i].inputs.values) + tensors(nodes[i].outputs.values):
                if t[2] == numel:
                    at.setdefault(i, {})[t[0]] = v
                    if weights.grads.get(t[0], (-1, -1))[0] == numel:
                        grads[t[0]] = v
        start = end + 1
    for i in optim:  # multi-tensor ops: the same position of every list
        lists = [x for x in json_list(nodes[i].inputs.values) if isinstance(x, list)]
        lists = [[tensor_of(y) for y in x] for x in lists if x and tensor_of(x[0]) is not None]
        for k, t in enumerate(lists[0] if lists else []):
            v = rows.get(t[0], 0) if t is not None else 0
            for u in (x[k] for x in lists if v and len(x) > k):
                if u is not None:
                    at.setdefault(i, {})[u[0]] = v
                    if u[0] in weights.grads:
                        grads[u[0]] = v
    return at, grads


def _views(nodes: list[pb.Node], weights: Weights, grads: Mapping[int, int]) -> dict[Tensor, int]:
    """The bucket views that vocabulary gradients are copied into (an op that reads the
    gradient and a bucket view of its size: the bucket copy's `mul`, `copy_`)."""
    out: dict[Tensor, int] = {}
    for i, n in enumerate(nodes):
        if _phase(n) == "optim":
            continue
        ts = tensors(n.inputs.values)
        for g in ts:
            v = grads.get(g[0], 0)
            if not v or not weights.holds(list((0, *g, 0, "")), i):
                continue
            for b in ts:
                if b[0] in weights.buckets and b[2] == g[2]:
                    out[b] = v
    return out


def _logits(nodes: list[pb.Node], heads: set[int]) -> dict[int, frozenset[int]]:
    """{node index: storages holding logits there} (module doc)."""
    out: dict[int, frozenset[int]] = {}
    live: set[int] = set()
    for i, n in enumerate(nodes):
        if _phase(n) == "optim" or not heads:
            continue
        ins, outs = tensors(n.inputs.values), tensors(n.outputs.values)
        read = [t for t in ins if t[0] in live]
        marked = {t[0] for t in read}
        if n.name in _GEMM:
            seed = not read and any(t[0] in heads for t in ins)
            for t in outs:
                (live.add if seed else live.discard)(t[0])
        else:
            sizes = {t[2] for t in read}
            for t in outs:
                (live.add if t[2] in sizes else live.discard)(t[0])
        marked |= {t[0] for t in outs if t[0] in live}
        if marked:
            out[i] = frozenset(marked)
    return out


def _phase(n: pb.Node) -> str:
    return nd.tags(n)[0]
