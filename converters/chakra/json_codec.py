"""Chakra ET ↔ JSON: valid JSON (one document) or JSON Lines, and back, losslessly.

mlc-chakra's jsonizer writes concatenated objects that no JSON parser accepts; here
`.json` is one document `{"metadata": {...}, "nodes": [...]}` and `.jsonl` is one object
per line, the metadata first. Field names are the proto's; 64-bit integers follow the
proto3 JSON mapping (strings), so converting back reproduces the file byte for byte.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import IO, Any, TypeVar

import orjson
from google.protobuf import json_format

from lumos.converters.chakra.compressed import open_file
from lumos.converters.chakra.files import EtSource
from lumos.converters.chakra.stream import EtWriter, declared_count, with_node_count
from lumos.errors import TraceFormatError
from lumos.proto import pb


def _to_dict(message: Any) -> dict[str, Any]:
    return json_format.MessageToDict(message, preserving_proto_field_name=True)


def write_json(source: EtSource, out: IO[bytes], *, lines: bool) -> int:
    """Render one ET to JSON (or JSON Lines); return the node count."""
    count = 0
    with source.open() as reader:
        meta = _to_dict(reader.metadata)
        if lines:
            out.write(orjson.dumps({"metadata": meta}) + b"\n")
            for node in reader:
                out.write(orjson.dumps(_to_dict(node)) + b"\n")
                count += 1
            return count
        out.write(b'{"metadata":' + orjson.dumps(meta) + b',"nodes":[')
        for node in reader:
            if count:
                out.write(b",\n")
            out.write(orjson.dumps(_to_dict(node)))
            count += 1
        out.write(b"]}\n")
    return count


def _iter_json_doc(path: str) -> Iterator[Any]:
    with open_file(path) as f:
        data = f.read()
    try:
        doc = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(path, f"invalid JSON: {exc}") from None
    if not isinstance(doc, dict) or "metadata" not in doc or not isinstance(doc.get("nodes"), list):
        raise TraceFormatError(path, 'expected {"metadata": {...}, "nodes": [...]}')
    yield doc["metadata"]
    yield from doc["nodes"]


def _iter_json_lines(path: str) -> Iterator[Any]:
    with open_file(path) as f:
        for lineno, line in enumerate(f, 1):
            if not line.strip():
                continue
            try:
                obj = orjson.loads(line)
            except orjson.JSONDecodeError as exc:
                raise TraceFormatError(
                    path, f"invalid JSON: {exc}", where=f"line {lineno}"
                ) from None
            if lineno == 1:
                if not isinstance(obj, dict) or "metadata" not in obj:
                    raise TraceFormatError(
                        path, 'first line must be {"metadata": {...}}', where="line 1"
                    )
                obj = obj["metadata"]
            yield obj


def json_to_et(path: str | os.PathLike[str], out: str | os.PathLike[str]) -> int:
    """Convert a `.json` / `.jsonl` rendering back to a `.et` file; return the node count."""
    name = str(path)
    items = _iter_json_lines(name) if name.endswith(".jsonl") else _iter_json_doc(name)
    meta = pb.GlobalMetadata()
    first = next(items, None)
    if not isinstance(first, dict):
        raise TraceFormatError(name, f"bad metadata: expected an object, got {first!r:.60}")
    _parse(first, meta, name, "metadata")
    nodes: Iterable[pb.Node] = (
        _parse(obj, pb.Node(), name, f"node #{index}") for index, obj in enumerate(items)
    )
    if declared_count(meta) is not None:  # nodes may have been edited: state the new count
        nodes = list(nodes)
        meta = with_node_count(meta, len(nodes))
    with EtWriter(Path(out), meta) as writer:
        writer.write_all(nodes)
        return writer.count


_M = TypeVar("_M", pb.Node, pb.GlobalMetadata)


def _parse(obj: object, message: _M, name: str, where: str) -> _M:
    """`obj` into `message`. Raises TraceFormatError naming the file and the item."""
    if not isinstance(obj, dict):
        raise TraceFormatError(name, f"expected an object, got {obj!r:.60}", where=where)
    try:
        json_format.ParseDict(obj, message)
    except (json_format.ParseError, TypeError, ValueError, AttributeError) as exc:
        raise TraceFormatError(name, f"bad {where.split(' ')[0]}: {exc}", where=where) from None
    return message
