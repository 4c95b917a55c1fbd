"""Which tensors of a rank are weight-shaped: parameters, their gradients, DDP's buckets.

A shape rewrite (`dims.DimMap`) reads an activation's axes from its layout, but a weight
`[H, H]` looks like an activation `[B·S, H]` when B·S = H (the grid's hidden-256 trace:
4·64 = 256). What the host ET says about a tensor's identity settles it, from its value
`[id, storage, offset, numel, itemsize, device]`:

* parameters (`param_storages`): what an optimizer's in-place update takes first and
  ops outside the optimizer take too; they live the whole step, so their storage names
  them anywhere;
* gradients: the tensor autograd hands to `torch::autograd::AccumulateGrad` (and DDP's
  `copy_bucket_to_grad` copies into), from that node on — before it, the storage may
  have held an activation freed earlier (the allocator reuses addresses, and ids with
  them);
* DDP's flat buckets: the storage a reducer's bucket copy (`reducer::mul_out`, or
  `reducer::copy_` with a comm hook) writes into; every view of it is a gradient;
* a learned position table `[S, X]` (S rows looked up with S positions, not with token
  ids `[B, S]`: a vocabulary can be S too): a parameter whose first axis is the
  sequence (`tables`), named by its storage, and by its shape where no other parameter
  has that shape (its gradient and optimizer states; at S = H it is `[H, H]`'s too).

Inside the optimizer step every tensor is one of these or a temporary of their shape
(`exp_avg_sq.sqrt()`), so `DimMap` treats the whole step as weight-shaped.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field

from lumos.proto import pb
from lumos.simulator.whatif import nodes as nd

_GRAD_IN = ("torch::autograd::AccumulateGrad", "torch.distributed.ddp.reducer::copy_bucket_to_grad")
_BUCKET_COPY = ("torch::distributed::reducer::mul_out", "torch::distributed::reducer::copy_")


@dataclass(frozen=True, slots=True)
class Weights:
    """A rank's weight-shaped tensors (see module doc): `params` {storage: elements},
    `grads` {storage: (elements, index of the first node where it is the gradient)},
    `buckets` (storages every view of which is a gradient), `tables` {storage: elements}
    and `table_shapes` (traced shapes of the position tables no other parameter has)."""

    params: Mapping[int, int] = field(default_factory=dict)
    grads: Mapping[int, tuple[int, int]] = field(default_factory=dict)
    buckets: frozenset[int] = frozenset()
    tables: Mapping[int, int] = field(default_factory=dict)
    table_shapes: frozenset[tuple[int, ...]] = frozenset()

    def holds(self, value: object, at: int = -1) -> bool:
        """Whether the tensor `value` at node index `at` (-1: unknown, gradients not
        counted) is a parameter, a state, a gradient or a bucket view — a parameter seen
        whole or through a view of its size (a transpose), not a broadcast of one."""
        sid = _storage(value)
        if sid is None:
            return False
        if sid in self.buckets:
            return True
        numel = _numel(value)
        if self.params.get(sid, -2) == numel or self.tables.get(sid, -2) == numel:
            return True
        grad = self.grads.get(sid)
        return grad is not None and grad[0] == numel and 0 <= grad[1] <= at

    def is_table(self, dims: list[object], value: object = None) -> bool:
        """Whether `value` is a position table, or `dims` a shape only a table has (its
        gradient, optimizer states, look-ups of all of it)."""
        sid = _storage(value)
        if sid is not None and self.tables.get(sid, -2) == _numel(value):
            return True
        return len(dims) == 2 and tuple(dims) in self.table_shapes


def find_weights(nodes: Iterable[pb.Node], seq: int = -1) -> Weights:
    """A rank's `Weights` (`seq`: the traced sequence length, for the position tables)."""
    nodes = list(nodes)
    grads: dict[int, tuple[int, int]] = {}
    buckets: set[int] = set()
    for i, n in enumerate(nodes):
        if n.name not in _GRAD_IN and n.name not in _BUCKET_COPY:
            continue
        first = json_list(n.inputs.values)[:1]
        sid = _storage(first[0]) if first else None
        if sid is None:
            continue
        if n.name in _BUCKET_COPY:
            buckets.add(sid)
        elif sid not in grads:
            grads[sid] = (_numel(first[0]), i)
    tables = _tables(nodes, seq)
    params = param_storages(nodes, seq)
    return Weights(
        params,
        grads,
        frozenset(buckets),
        {sid: _numel_of(shape) for sid, shape in tables.items() if sid not in buckets},
        frozenset(tables.values()) - _shapes_of(nodes, set(params)),
    )


def _shapes_of(nodes: list[pb.Node], storages: set[int]) -> set[tuple[int, ...]]:
    """The shapes the optimizer updates these storages with (a position table's shape
    that another parameter has too, `[S, H]` = `[H, H]` at S = H, does not name it)."""
    out: set[tuple[int, ...]] = set()
    for n in nodes:
        if nd.tags(n)[0] != "optim" or not n.inputs.values:
            continue
        first = json_list(n.inputs.values)[:1]
        shapes = json_list(n.inputs.shapes)[:1]
        if first and _storage(first[0]) in storages and shapes and isinstance(shapes[0], list):
            out.add(tuple(d for d in shapes[0] if isinstance(d, int)))
    return out


def param_storages(nodes: Iterable[pb.Node], seq: int = -1) -> dict[int, int]:
    """Storages of the parameters and optimizer states: the tensor an optimizer's in-place
    update takes first (`addcdiv_`, `lerp_`, `addcmul_`, `mul_`, ...; not `add_`, which
    AdamW also applies to a temporary — ids are reused once a tensor is freed, so a
    temporary can carry a freed activation's storage id), where ops outside the
    optimizer take it too. Views of a parameter (a weight's transpose in a GEMM) share
    its storage. A learned position table (`seq` rows, looked up by an embedding op)
    grows with the sequence: not counted. Returns {storage: the parameter's elements}."""
    nodes = list(nodes)
    outside: set[int] = set()
    updated: dict[int, int] = {}
    for n in nodes:
        if not n.inputs.values:
            continue
        first = json_list(n.inputs.values)[:1]
        sid = _storage(first[0]) if first else None
        if nd.tags(n)[0] == "optim":
            if sid is not None and n.name.endswith("_") and not n.name.endswith("add_"):
                updated[sid] = _numel(first[0])
            continue
        outside.update(_storages(n.inputs.values))
    tables = _tables(nodes, seq)
    return {k: v for k, v in updated.items() if k in outside and k not in tables}


def _tables(nodes: list[pb.Node], seq: int) -> dict[int, tuple[int, ...]]:
    """{storage: shape} of the tables of `seq` rows an embedding op looks up with `seq`
    indices (positions `[S]` or `[1, S]`; not token ids `[B, S]`, whose table has as many
    rows as the vocabulary, which can be S too)."""
    out: dict[int, tuple[int, ...]] = {}
    for n in nodes:
        if "embedding" not in n.name and "index_select" not in n.name:
            continue
        if not n.inputs.values or nd.tags(n)[0] == "optim":
            continue
        first = json_list(n.inputs.values)[:1]
        sid = _storage(first[0]) if first else None
        shapes = json_list(n.inputs.shapes)
        shape = shapes[0] if shapes else None
        k = 2 if "index_select" in n.name else 1
        index = shapes[k] if len(shapes) > k else None
        if (
            sid is not None
            and isinstance(shape, list)
            and shape[:1] == [seq]
            and all(isinstance(d, int) for d in shape)
            and (not isinstance(index, list) or _numel_of(tuple(index)) == seq)
        ):
            out[sid] = tuple(shape)
    return out


def _numel_of(shape: tuple[object, ...]) -> int:
    out = 1
    for d in shape:
        out *= d if isinstance(d, int) else 1
    return out


def _numel(value: object) -> int:
    return (
        int(value[3])
        if isinstance(value, list) and len(value) == 6 and isinstance(value[3], int)
        else -1
    )


def _storage(value: object) -> int | None:
    """The storage id of a host-ET tensor value `[id, storage, offset, numel, size, device]`."""
    if isinstance(value, list) and len(value) == 6 and isinstance(value[1], int):
        return int(value[1])
    return None


def _storages(values_text: str) -> set[int]:
    """The storage ids of every tensor value of an op's inputs."""
    return {t[0] for t in tensors(values_text)}


#: a host-ET tensor value's (storage, offset, elements)
Tensor = tuple[int, int, int]


def tensor_of(value: object) -> Tensor | None:
    """(storage, offset, elements) of a tensor value `[id, storage, offset, numel, size,
    device]`; None for anything else."""
    if (
        isinstance(value, list)
        and len(value) == 6
        and all(isinstance(value[k], int) and not isinstance(value[k], bool) for k in (1, 2, 3))
    ):
        return (int(value[1]), int(value[2]), int(value[3]))
    return None


def tensors(values_text: str) -> list[Tensor]:
    """The tensors of an op's inputs or outputs, in order (those inside lists too)."""
    out: list[Tensor] = []
    stack: list[object] = list(reversed(json_list(values_text)))
    while stack:
        v = stack.pop()
        t = tensor_of(v)
        if t is not None:
            out.append(t)
        elif isinstance(v, list):
            stack.extend(reversed(v))
    return out


def json_list(text: str) -> list[object]:
    """`text` parsed as a JSON list ([] when empty, malformed or not a list)."""
    try:
        value = json.loads(text) if text else []
    except ValueError:
        return []
    return value if isinstance(value, list) else []
