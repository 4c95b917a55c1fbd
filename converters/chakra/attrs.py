"""Typed access to Chakra node attributes, with the value fields other tools expect.

Chakra stores everything beyond id/name/type in `AttributeProto`s whose value is a oneof.
ASTRA-sim and mlc-chakra read specific fields (`comm_size` as int64_val, `is_cpu_op` as
bool_val, ...); `STANDARD_FIELDS` is that table, `set_attr` writes them with the right
field, and `get_attr` reads whichever field is set.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from lumos.proto import pb

#: Standard attribute name -> the value field readers expect (reference/chakra-et.md).
STANDARD_FIELDS: dict[str, str] = {
    "is_cpu_op": "bool_val",
    "comm_type": "int64_val",
    "comm_size": "int64_val",
    "comm_src": "int32_val",
    "comm_dst": "int32_val",
    "comm_tag": "int32_val",
    "comm_priority": "int32_val",
    "pg_name": "string_val",
    "involved_dim": "bool_list",
    "num_ops": "int64_val",
    "tensor_size": "uint64_val",
    "rf_id": "int64_val",
    "fw_parent": "int64_val",
    "seq_id": "int64_val",
    "scope": "int64_val",
    "tid": "int64_val",
    "fw_tid": "int64_val",
    "op_schema": "string_val",
    "stream": "int64_val",
}

_LIST_FIELDS = {
    name
    for name, fd in pb.AttributeProto.DESCRIPTOR.fields_by_name.items()
    if name.endswith("_list")
}


def attr_value(attr: pb.AttributeProto) -> Any:
    """The Python value of an attribute (a list for *_list fields, None if unset)."""
    which = attr.WhichOneof("value")
    if which is None:
        return None
    value = getattr(attr, which)
    if which in _LIST_FIELDS:
        return list(value.values)
    return value


def attr_field(attr: pb.AttributeProto) -> str | None:
    """Which value field an attribute uses (`int64_val`, `bool_list`, ...)."""
    return attr.WhichOneof("value")


def get_attr(node: pb.Node | pb.GlobalMetadata, name: str, default: Any = None) -> Any:
    """Value of the first attribute called `name`, or `default`."""
    for attr in node.attr:
        if attr.name == name:
            return attr_value(attr)
    return default


def attrs_dict(node: pb.Node | pb.GlobalMetadata) -> dict[str, Any]:
    """All attributes of a node as a dict (last one wins on duplicate names)."""
    return {attr.name: attr_value(attr) for attr in node.attr}


def make_attr(name: str, value: Any, field: str | None = None) -> pb.AttributeProto:
    """Build an attribute; the field comes from STANDARD_FIELDS, else from the value's type."""
    field = field or STANDARD_FIELDS.get(name) or _infer_field(value)
    attr = pb.AttributeProto(name=name)
    if field in _LIST_FIELDS:
        getattr(attr, field).values.extend(value)
    else:
        setattr(attr, field, value)
    return attr


def set_attr(
    node: pb.Node | pb.GlobalMetadata, name: str, value: Any, field: str | None = None
) -> None:
    """Set (replace) attribute `name` on a node."""
    new = make_attr(name, value, field)
    for attr in node.attr:
        if attr.name == name:
            attr.CopyFrom(new)
            return
    node.attr.append(new)


def add_attrs(node: pb.Node, items: Iterable[tuple[str, Any]]) -> None:
    """Append several attributes (no de-duplication; for freshly built nodes)."""
    node.attr.extend(make_attr(name, value) for name, value in items)


def _infer_field(value: Any) -> str:
    if isinstance(value, bool):
        return "bool_val"
    if isinstance(value, int):
        return "int64_val"
    if isinstance(value, float):
        return "double_val"
    if isinstance(value, str):
        return "string_val"
    if isinstance(value, bytes):
        return "bytes_val"
    if isinstance(value, (list, tuple)):
        if all(isinstance(v, bool) for v in value) and value:
            return "bool_list"
        if all(isinstance(v, int) for v in value):
            return "int64_list"
        if all(isinstance(v, float) for v in value):
            return "double_list"
        if all(isinstance(v, str) for v in value):
            return "string_list"
    raise TypeError(f"cannot infer a Chakra attribute field for {type(value).__name__}")
