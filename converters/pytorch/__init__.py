"""PyTorch traces → Chakra ETs: host ETs and Kineto traces loaded, linked and converted.

Readers (`host_et`, `kineto`, `json_stream`) → linker (`link`) → execution graph
(`exec_graph`, `host_graph`, `sync_edges`, `comm_tasks`) → Chakra writer (`writer`), driven
by `convert`. May import `lumos.converters.chakra` and `lumos.converters.ops`; nothing of the
simulator or the exporters.
"""
