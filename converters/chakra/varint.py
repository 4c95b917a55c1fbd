"""Base-128 varints as Chakra frames its streams (protobuf's delimited-message framing)."""

from __future__ import annotations

MAX_VARINT_BYTES = 10


class VarintError(ValueError):
    """A varint is truncated or longer than 10 bytes; `offset` is where it starts."""

    def __init__(self, message: str, offset: int) -> None:
        super().__init__(message)
        self.offset = offset


def encode_varint(value: int) -> bytes:
    """Encode a non-negative integer as a protobuf varint."""
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """Decode one varint of `buf[pos:end]`; return (value, position after it).

    Raises VarintError if the bytes end mid-varint or it runs past 10 bytes.
    """
    if pos < end:
        b = buf[pos]
        if b < 0x80:  # the common case: frames under 128 bytes
            return b, pos + 1
    result = 0
    shift = 0
    start = pos
    while pos < end:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        if b < 0x80:
            return result, pos
        shift += 7
        if pos - start >= MAX_VARINT_BYTES:
            raise VarintError("varint longer than 10 bytes", start)
    raise VarintError("truncated varint", start)
