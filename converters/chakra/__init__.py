"""The Chakra ET format: streaming `.et` I/O, wire encoding, validation, JSON, summaries.

Anything that reads or writes a Chakra file goes through here. It imports nothing of lumos
but `lumos.errors` and `lumos.proto`, so the simulator, the exporters and outside tools can
use it without pulling in a trace parser.
"""
