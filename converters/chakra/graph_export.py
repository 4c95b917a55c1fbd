"""Chakra ETs as networkx graphs, for GraphML or DOT export of small traces."""

from __future__ import annotations

from collections.abc import Iterable
from typing import IO

import networkx as nx

from lumos.converters.chakra.attrs import attr_value
from lumos.converters.chakra.files import EtSource
from lumos.converters.chakra.info import NODE_TYPE_NAMES
from lumos.errors import LumosError
from lumos.outputs import printable

#: Above this many nodes a drawing is unreadable and the files get large.
DEFAULT_MAX_NODES = 50_000


def to_networkx(sources: Iterable[EtSource], *, max_nodes: int = DEFAULT_MAX_NODES) -> nx.DiGraph:
    """One DiGraph of all ranks: node keys `"<rank>:<id>"`, edges dependency → dependent.

    Raises LumosError if the trace has more than `max_nodes` nodes.
    """
    graph = nx.DiGraph()
    for source in sources:
        with source.open() as reader:
            for node in reader:
                if graph.number_of_nodes() >= max_nodes:
                    raise LumosError(
                        f"{source.path}: more than {max_nodes} nodes; graph export is for small "
                        "traces (raise --max-nodes to force)"
                    )
                key = f"{source.rank}:{node.id}"
                attrs = {  # control characters escaped: GraphML (XML) cannot hold them
                    "label": printable(node.name),
                    "type": NODE_TYPE_NAMES.get(node.type, "?"),
                    "rank": source.rank,
                }
                attrs["duration_micros"] = node.duration_micros
                for attr in node.attr:
                    value = attr_value(attr)
                    if isinstance(value, str):
                        attrs[printable(attr.name)] = printable(value)
                    elif isinstance(value, (bool, int, float)):
                        attrs[printable(attr.name)] = value
                graph.add_node(key, **attrs)
                for dep in node.data_deps:
                    graph.add_edge(f"{source.rank}:{dep}", key, kind="data")
                for dep in node.ctrl_deps:
                    graph.add_edge(f"{source.rank}:{dep}", key, kind="ctrl")
    return graph


def _dot_quote(text: object) -> str:
    return '"' + str(text).replace("\\", "\\\\").replace('"', '\\"') + '"'


def write_dot(graph: nx.DiGraph, out: IO[bytes]) -> None:
    """Write Graphviz DOT (UTF-8, no pydot needed) to a binary stream; ctrl edges dashed."""
    out.write(b"digraph chakra {\n  node [shape=box, fontsize=10];\n")
    for key, data in graph.nodes(data=True):
        # DOT's line break `\n` goes in after quoting, so it is not escaped itself
        label = _dot_quote(data.get("label", key))[:-1] + "\\n" + f'{data.get("type", "")}"'
        out.write(f"  {_dot_quote(key)} [label={label}];\n".encode())
    for a, b, data in graph.edges(data=True):
        style = " [style=dashed]" if data.get("kind") == "ctrl" else ""
        out.write(f"  {_dot_quote(a)} -> {_dot_quote(b)}{style};\n".encode())
    out.write(b"}\n")


def write_graphml(graph: nx.DiGraph, out: IO[bytes]) -> None:
    """Write GraphML through networkx to a binary stream."""
    nx.write_graphml(graph, out)
