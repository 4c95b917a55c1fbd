"""The model's sizes as the trace shows them, and the shape rewrites that change them.

`infer_dims` reads batch, sequence and hidden size from the activations that enter the
layers' layer norms (`[B, S, H]`) and the head count from the attention inputs
(`[B, heads, S, H/heads]`). `DimMap` rewrites tensor shapes dimension by dimension: a
dimension equal to a traced size becomes the new size (hidden: H, 3H for fused QKV, 4H
for the MLP, H/heads; sequence: S and the flattened B·S), so every op's new shapes — and
from them its FLOPs and bytes — follow from the traced ones.

Sizes can coincide (a sequence of 128 at hidden 128; B·S = 4·128 = 512 = the MLP's 4H;
B·S = 4·64 = 256 = H and a head size of 64 = S at hidden 256), so a value alone does not
say which axis a dimension is. The layout says it for activations: `[B, S, X]` (and its
broadcast `[1, S, X]`) has the sequence in its middle dimension and features in its
last; attention's `[B, heads, S, D]` the sequence in its third (its fourth only when D
is not S), `[B, S, heads, D]` in its second, `[B, heads, S]` in its last; token ids
`[B, S]`, positions `[S]` and targets `[B·S]` have no feature axis; rows of tokens
`[B·S, X]` or a transposed activation `[X, B·S]` have one, and when X = B·S a GEMM's
shared dimension tells which (a product of two such activations is a weight's gradient:
it contracts over the tokens). The weight-shaped tensors (`weights.Weights`: parameters,
optimizer states, gradients once autograd hands them over, DDP's bucket views, and
everything inside the optimizer step) are left alone by a sequence or batch edit and
rewritten by value by a hidden edit, whatever their shape — except a learned position
table `[S, X]`, whose rows are the sequence, and the vocabulary's axis of the token
table, the head, their gradients and states, and the logits (`vocab.Vocab`), whatever
size the vocabulary equals.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd
from lumos.simulator.whatif.vocab import Vocab
from lumos.simulator.whatif.weights import Weights, json_list


@dataclass(frozen=True, slots=True)
class ModelDims:
    """Batch (per rank, per micro-batch as traced), sequence, hidden size, heads."""

    batch: int
    seq: int
    hidden: int
    heads: int


def _shapes(n: pb.Node) -> list[object]:
    try:
        value = json.loads(n.inputs.shapes) if n.inputs.shapes else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []


def infer_dims(nodes: Iterable[pb.Node]) -> ModelDims | None:
    """Sizes from the layers' layer-norm inputs and attention inputs; None if not found."""
    acts: Counter[tuple[int, int, int]] = Counter()
    heads: Counter[int] = Counter()
    for n in nodes:
        if nd.tags(n)[1] < 0:
            continue
        shapes = _shapes(n)
        first = shapes[0] if shapes else None
        if not isinstance(first, list) or not all(isinstance(d, int) for d in first):
            continue
        if "layer_norm" in n.name and len(first) == 3:
            acts[(first[0], first[1], first[2])] += 1
        elif "attention" in n.name and len(first) == 4:
            heads[first[1]] += 1
    if not acts:
        return None
    b, s, h = acts.most_common(1)[0][0]
    return ModelDims(b, s, h, heads.most_common(1)[0][0] if heads else 1)


#: GEMMs: the positions of their two matrix operands `[.., m, k] @ [.., k, n]`
_GEMMS = {"aten::mm": (0, 1), "aten::matmul": (0, 1), "aten::bmm": (0, 1)}
_GEMMS |= {"aten::addmm": (1, 2), "aten::baddbmm": (1, 2), "aten::addbmm": (1, 2)}


@dataclass(frozen=True, slots=True)
class DimMap:
    """Rewrite of tensor dimensions: {old size: new size} (other sizes stay).

    `axis` ("hidden", "seq" or "batch") and `dims` turn on the layout rules of the module
    doc; `weights` names the weight-shaped tensors (see `with_weights`), `vocab` those
    with a vocabulary axis."""

    sizes: Mapping[int, int]
    leading_only: bool = False  # rewrite only each tensor's first dimension (batch)
    axis: str = ""
    dims: ModelDims | None = None
    weights: Weights = field(default_factory=Weights)
    vocab: Vocab = field(default_factory=Vocab)

    def with_weights(self, weights: Weights, vocab: Vocab | None = None) -> DimMap:
        """This map for one rank with these weight-shaped tensors: a sequence or batch
        edit leaves them as they are, a hidden edit rewrites them by value (a position
        table `[S, X]` along its own axes, a vocabulary tensor all but its vocabulary
        axis: `vocab`)."""
        return DimMap(
            self.sizes, self.leading_only, self.axis, self.dims, weights, vocab or Vocab()
        )

    def with_frozen(self, storages: Mapping[int, int]) -> DimMap:
        """`with_weights` with these parameter storages only ({storage: elements})."""
        return self.with_weights(Weights(params=storages))

    def _options(self, dims: list[object]) -> list[set[int] | None]:
        """The position sets this map may rewrite in `dims` (None: any, by value), the
        usual reading first; two when the layout is ambiguous: a 2-D tensor whose both
        dimensions are B·S (rows of tokens, or a transposed activation `[X, B·S]`, with
        X = B·S) — a GEMM's shared dimension tells which (`rewrite`)."""
        d = self.dims
        if d is None or not self.axis or not dims:
            return [None]
        tokens = d.batch * d.seq
        if len(dims) == 2 and tokens in dims and 1 not in dims:  # [B·S, X], or [X, B·S]
            ats = [0, 1] if dims[0] == dims[1] else [0 if dims[0] == tokens else 1]
            return [{at} if self.axis == "seq" else {1 - at} for at in ats]
        return [self._axes(dims, d)]

    def _axes(self, dims: list[object], d: ModelDims) -> set[int] | None:
        seq = self.axis == "seq"
        if len(dims) == 1 and dims[0] in (d.seq, d.batch * d.seq) and self.axis != "batch":
            return {0} if seq else set()  # positions [S] or targets [B·S], not features
        if dims[0] != d.batch and (dims[0] != 1 or len(dims) != 3):  # [1, S, X] broadcasts
            return None
        if len(dims) == 2 and dims[1] == d.seq and self.axis != "batch":  # [B, S] token ids
            return {1} if seq else set()
        if len(dims) == 3 and self.axis != "batch" and dims[1] == d.seq:  # [B, S, X]
            return {1} if seq else {2}
        if len(dims) == 3 and dims[1:] == [d.heads, d.seq] and d.heads > 1:  # [B, heads, S]
            return {2} if seq else set()
        if len(dims) == 4 and dims[1] == d.heads and d.heads > 1:  # [B, heads, S, D]
            head = d.hidden // d.heads
            if seq:
                return {2} if head == d.seq else {2, 3}
            return {3} if self.axis == "hidden" else None
        if len(dims) == 4 and dims[1:3] == [d.seq, d.heads] and d.heads > 1:  # [B, S, heads, D]
            return {1} if seq else {3}
        return None

    def shape(
        self, dims: list[object], by_value: bool = False, axes: set[int] | None = None
    ) -> list[object]:
        """`dims` rewritten: at `axes` if given, else by value or by the layout's usual
        reading (`_options`)."""
        if axes is None and not by_value:
            axes = self._options(dims)[0]
        return [
            self.sizes.get(d, d)
            if isinstance(d, int)
            and not isinstance(d, bool)
            and (k == 0 or not self.leading_only)
            and (axes is None or k in axes)
            else d
            for k, d in enumerate(dims)
        ]

    def _choices(self, x: list[object], v: object, at: int, optim: bool) -> list[list[object]]:
        """The shapes one tensor (value `v`, at node index `at`) may take, best first."""
        lead = len(x) - 2  # a position table [S, X], a look-up of all of it, or [1, S, X]
        if lead >= 0 and self.weights.is_table(x[lead:], v) and all(d == 1 for d in x[:lead]):
            return [self.shape(x, axes={lead} if self.axis == "seq" else {lead + 1})]
        held = optim or self.weights.holds(v, at)
        if held and self.axis in ("seq", "batch"):
            return [x]
        if self.axis == "hidden":
            rows = self.vocab.rows_of(v, at, held)
            if rows:  # [V, H], its transpose, its states: all but one V axis, the first first
                return self._keeping(x, rows, last=False)
            if self.vocab.is_logits(v, at):
                return [x]
        if held:
            return [self.shape(x, by_value=True)]
        if self.axis == "seq" and self.vocab.is_logits(v, at):
            return self._keeping(x, self.vocab.size, last=True)
        out: list[list[object]] = []
        for axes in self._options(x):
            new = self.shape(x, by_value=axes is None, axes=axes)
            if new not in out:
                out.append(new)
        return out

    def _keeping(self, x: list[object], vocab: int, last: bool) -> list[list[object]]:
        """`x` rewritten by value except at one dimension equal to the vocabulary, one
        shape per such dimension (the last one first if `last`, else the first)."""
        at = [k for k, d in enumerate(x) if d == vocab]
        if not at:
            return [self.shape(x, by_value=True)]
        out: list[list[object]] = []
        for k in reversed(at) if last else at:
            new = self.shape(x, axes=set(range(len(x))) - {k})
            if new not in out:
                out.append(new)
        return out

    def rewrite(
        self,
        shapes_text: str,
        values_text: str = "",
        op: str = "",
        at: int = -1,
        optim: bool = False,
    ) -> str:
        """The shapes string of op `op` (node index `at`; `optim`: in the optimizer step)
        with every tensor's dimensions rewritten (weight-shaped tensors, named by their
        values in `values_text`, by the rules of `with_weights`). A GEMM's operands keep
        their shared dimension equal: where one operand's layout is ambiguous, the
        reading that agrees with the other's is taken."""
        try:
            shapes = json.loads(shapes_text)
        except ValueError:
            return shapes_text
        values = json_list(values_text)

        def walk(x: object, v: object) -> object:
            if isinstance(x, list) and x and all(isinstance(d, int) for d in x):
                return self._choices(x, v, at, optim)[0]
            if isinstance(x, list):
                vs = v if isinstance(v, list) and len(v) == len(x) else [None] * len(x)
                return [walk(y, w) for y, w in zip(x, vs, strict=True)]
            return x

        out = walk(shapes, values)
        if op in _GEMMS and isinstance(shapes, list) and isinstance(out, list):
            self._agree(shapes, values, out, _GEMMS[op], at, optim)
        return json.dumps(out, separators=(",", ":"))

    def _agree(
        self,
        shapes: list[object],
        values: list[object],
        out: list[object],
        pos: tuple[int, int],
        at: int,
        optim: bool,
    ) -> None:
        """Operands `pos` of a GEMM in `out` re-read so that `a[-1] == b[-2]` holds after
        the rewrite as it did before (in place; left as they are if no reading does)."""
        a, b = pos
        if max(a, b) >= len(shapes):
            return
        x, y = shapes[a], shapes[b]
        if not (_matrix(x) and _matrix(y)) or x[-1] != y[-2]:  # type: ignore[index]
            return
        va = values[a] if a < len(values) else None
        vb = values[b] if b < len(values) else None
        xs = self._choices(x, va, at, optim)  # type: ignore[arg-type]
        ys = self._choices(y, vb, at, optim)  # type: ignore[arg-type]
        if len(xs) == len(ys) == 2:  # two activations: a weight's gradient, over the tokens
            xs = xs[::-1]
        pick = next(((p, q) for p in xs for q in ys if p[-1] == q[-2]), None)
        if pick is not None:
            out[a], out[b] = pick


def _matrix(x: object) -> bool:
    return isinstance(x, list) and len(x) >= 2 and all(isinstance(d, int) for d in x)


def hidden_map(d: ModelDims, hidden: int, ffn: int | None = None) -> DimMap:
    """Hidden size H -> `hidden` (FFN 4H -> `ffn`, default 4·hidden; heads kept)."""
    sizes = {d.hidden: hidden, 3 * d.hidden: 3 * hidden, 4 * d.hidden: ffn or 4 * hidden}
    if d.heads > 1 and d.hidden % d.heads == 0 and hidden % d.heads == 0:
        sizes.setdefault(d.hidden // d.heads, hidden // d.heads)
    return DimMap({k: v for k, v in sizes.items() if k != v}, axis="hidden", dims=d)


def seq_map(d: ModelDims, seq: int) -> DimMap:
    """Sequence length S -> `seq` (and the flattened batch·S rows of the GEMMs)."""
    sizes = {d.seq: seq, d.batch * d.seq: d.batch * seq}
    return DimMap({k: v for k, v in sizes.items() if k != v}, axis="seq", dims=d)


def batch_map(d: ModelDims, batch: int) -> DimMap:
    """Batch B -> `batch` (micro-batching; also the flattened B·S rows), on leading
    dimensions only (a head count equal to B stays)."""
    sizes = {d.batch: batch, d.batch * d.seq: batch * d.seq}
    return DimMap({k: v for k, v in sizes.items() if k != v}, leading_only=True, axis="batch")
