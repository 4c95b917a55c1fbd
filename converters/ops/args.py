"""Operator arguments from trace strings: shapes, dtypes and devices as typed records.

Three producers describe an op's inputs, each slightly differently:

* PyTorch host ETs and Chakra `IOInfo`: `shapes` = `[[4,8],[8,16],[]]` (JSON or a
  Python repr with spaces), `types` = `["Tensor(float)","Int"]`, a TensorList as
  `GenericList[Tensor(float),Tensor(float)]` with nested shapes, and `values` whose
  tensors are `[tensor_id, storage_id, offset, numel, elem_bytes, device]`;
* Kineto `cpu_op` args: `Input Dims` (lists) and `Input type` (`float`, `c10::Half`,
  `c10::BFloat16`, `long int`, `Scalar`, `TensorList`), `Concrete Inputs` for scalars.

`parse_args` turns any of them into `Arg`s: a `Tensor` (shape, dtype, device), a
`TensorList`, or a `Scalar` (its value when known). Unparseable strings give no args
rather than an exception: a cost model must not stop on one odd op.
"""

from __future__ import annotations

import ast
import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import orjson


class DType(Enum):
    """Element type classes that decide the peak rate and bytes per element."""

    FP64 = "fp64"
    FP32 = "fp32"
    TF32 = "tf32"
    FP16 = "fp16"
    BF16 = "bf16"
    FP8 = "fp8"
    INT64 = "int64"
    INT32 = "int32"
    INT16 = "int16"
    INT8 = "int8"
    BOOL = "bool"
    UNKNOWN = "unknown"


ELEM_BYTES = {
    DType.FP64: 8,
    DType.FP32: 4,
    DType.TF32: 4,
    DType.FP16: 2,
    DType.BF16: 2,
    DType.FP8: 1,
    DType.INT64: 8,
    DType.INT32: 4,
    DType.INT16: 2,
    DType.INT8: 1,
    DType.BOOL: 1,
    DType.UNKNOWN: 4,
}

# Spellings seen in host ETs (`Tensor(float)`), Kineto (`c10::Half`) and torch (`float16`).
_DTYPE_NAMES = {
    DType.FP64: ("double", "float64", "c10::double"),
    DType.FP32: ("float", "float32", "c10::float"),
    DType.FP16: ("half", "float16", "c10::half"),
    DType.BF16: ("bfloat16", "c10::bfloat16"),
    DType.FP8: (
        "c10::float8_e4m3fn",
        "c10::float8_e5m2",
        "float8_e4m3fn",
        "float8_e5m2",
        "c10::float8_e4m3fnuz",
        "c10::float8_e5m2fnuz",
    ),
    DType.INT64: ("long", "long int", "int64", "c10::long", "long long", "int64_t"),
    DType.INT32: ("int", "int32", "c10::int", "unsigned int"),
    DType.INT16: ("short", "int16", "short int"),
    DType.INT8: ("char", "signed char", "unsigned char", "uint8", "int8", "c10::qint8"),
    DType.BOOL: ("bool",),
}
DTYPES = {name: dtype for dtype, names in _DTYPE_NAMES.items() for name in names}
SCALAR_TYPES = {"int", "double", "bool", "scalar", "string", "none", "device", "layout"}


@dataclass(slots=True, frozen=True)
class Tensor:
    """One tensor argument: shape, element type, device (`cuda:0`, `cpu`, or "" unknown)."""

    shape: tuple[int, ...]
    dtype: DType
    device: str = ""

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * ELEM_BYTES[self.dtype]


@dataclass(slots=True, frozen=True)
class TensorList:
    """A list-of-tensors argument (`GenericList[Tensor(...)]`, Kineto `TensorList`)."""

    tensors: tuple[Tensor, ...]

    @property
    def nbytes(self) -> int:
        return sum(t.nbytes for t in self.tensors)

    @property
    def numel(self) -> int:
        return sum(t.numel for t in self.tensors)


@dataclass(slots=True, frozen=True)
class Scalar:
    """A non-tensor argument; `value` when the trace recorded it (ints, lists, bools)."""

    value: Any = None


Arg = Tensor | TensorList | Scalar


def parse_text(text: Any) -> Any:
    """A list from a JSON string, a Python-repr string, or an already parsed value."""
    if not isinstance(text, (str, bytes)):
        return text
    if not text:
        return []
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        pass
    try:
        return ast.literal_eval(text if isinstance(text, str) else text.decode())
    except (ValueError, SyntaxError, MemoryError, RecursionError):
        return None


def dtype_of(type_name: str) -> DType | None:
    """The dtype of a tensor type string, or None when the argument is not a tensor."""
    t = type_name.strip()
    if t.startswith("Tensor(") and t.endswith(")"):
        return DTYPES.get(t[7:-1].strip().lower(), DType.UNKNOWN)
    if t in ("Tensor", "TensorList"):
        return DType.UNKNOWN
    low = t.lower()
    if low in SCALAR_TYPES or low.startswith(("genericlist", "tuple", "optional", "scalarlist")):
        return None
    return DTYPES.get(low)


def _list_item_types(type_name: str) -> list[str]:
    """`GenericList[Tensor(float),Tensor(float)]` -> the item type strings."""
    inner = type_name[type_name.index("[") + 1 : type_name.rindex("]")]
    items, depth, start = [], 0, 0
    for i, ch in enumerate(inner):
        if ch in "([":
            depth += 1
        elif ch in ")]":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(inner[start:i])
            start = i + 1
    if inner[start:]:
        items.append(inner[start:])
    return [s.strip() for s in items]


def _shape(value: Any) -> tuple[int, ...] | None:
    if isinstance(value, list) and all(isinstance(d, int) for d in value):
        return tuple(value)
    return None


def _device(value: Any) -> str:
    """Device of a host-ET tensor value `[id, storage, offset, numel, elem_bytes, device]`."""
    if isinstance(value, list) and len(value) >= 6 and isinstance(value[5], str):
        return value[5]
    return ""


def _tensor_list(shape: Any, type_name: str, value: Any) -> Arg:
    shapes = shape if isinstance(shape, list) else []
    item_types = _list_item_types(type_name) if "[" in type_name else []
    values = value if isinstance(value, list) else []
    tensors = []
    for j, s in enumerate(shapes):
        dims = _shape(s)
        if dims is None:
            continue
        dt = dtype_of(item_types[j]) if j < len(item_types) else DType.UNKNOWN
        dev = _device(values[j]) if j < len(values) else ""
        tensors.append(Tensor(dims, dt or DType.UNKNOWN, dev))
    return TensorList(tuple(tensors)) if tensors else Scalar(value)


def parse_args(shapes: Any, types: Any, values: Any = None) -> list[Arg]:
    """Typed arguments from a trace's shapes / types (/ values) strings or lists."""
    shape_list, type_list = parse_text(shapes), parse_text(types)
    value_list = parse_text(values) if values is not None else None
    if not isinstance(shape_list, list) or not isinstance(type_list, list):
        return []
    if not isinstance(value_list, list):
        value_list = []
    args: list[Arg] = []
    for i, type_name in enumerate(type_list):
        shape = shape_list[i] if i < len(shape_list) else []
        value = value_list[i] if i < len(value_list) else None
        name = str(type_name)
        if name.startswith("GenericList[Tensor") or name == "TensorList":
            args.append(_tensor_list(shape, name, value))
            continue
        dt = dtype_of(name)
        dims = _shape(shape)
        if dt is not None and dims is not None:
            args.append(Tensor(dims, dt, _device(value)))
        else:
            args.append(Scalar(value))
    return args


def tensors(args: list[Arg]) -> list[Tensor]:
    """The plain tensor arguments, in order."""
    return [a for a in args if isinstance(a, Tensor)]


def all_tensors(args: list[Arg]) -> list[Tensor]:
    """Every tensor, including the members of tensor lists."""
    out: list[Tensor] = []
    for a in args:
        if isinstance(a, Tensor):
            out.append(a)
        elif isinstance(a, TensorList):
            out.extend(a.tensors)
    return out
