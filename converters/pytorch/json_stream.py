"""Fast, bounded-memory reading of big JSON trace files (host ETs and Kineto traces).

Both formats are one JSON object whose bulk is a single array (`nodes` or
`traceEvents`). Parsing the whole document at once holds every element as a Python
dict (≈1 KB each); instead `read_array_document` decompresses the text in chunks,
cuts the array at element boundaries and hands orjson one batch at a time, so a caller
can turn each batch into compact records and drop the dicts. Cuts are looked for before
the elements' usual first key (`"ph"`, `"id"`), and a cut is accepted only if the batch
parses as a JSON array, so a separator-looking string inside a name can never split an
element. `TraceFile` names one input: a file (`.json`, `.json.gz`) or a member
of a tar archive.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

import orjson

from lumos.converters.chakra.archive import is_tar, open_member, open_tar
from lumos.converters.chakra.compressed import decompressing
from lumos.errors import TraceFormatError

CHUNK_BYTES = 2 << 20


@dataclass(frozen=True, slots=True)
class TraceFile:
    """One JSON trace: a plain or gzip file, or a member of a tar archive."""

    path: str  # display name: file path, or "archive.tar:member"
    archive: str | None = None
    member: str | None = None

    @property
    def name(self) -> str:
        return Path(self.member or self.path).name

    def open(self) -> IO[bytes]:
        """A binary stream of the decompressed JSON text."""
        if self.archive is None:
            raw: IO[bytes] = open(self.path, "rb")  # noqa: SIM115 - caller closes
        else:
            raw = open_member(self.archive, self.member or "", self.path)
        return decompressing(raw, self.path, CHUNK_BYTES)


def expand_inputs(paths: list[str | Path]) -> list[TraceFile]:
    """Files, folders and tar archives → the JSON trace files in them, sorted by name."""
    out: list[TraceFile] = []
    for given in paths:
        path = Path(given)
        if path.is_dir():
            out += expand_inputs(sorted(p for p in path.iterdir() if _is_trace_name(p.name)))
        elif path.is_file() and _is_tar(path):
            with open_tar(path) as tar:
                for member in tar.getmembers():
                    base = Path(member.name).name
                    if member.isfile() and not base.startswith("._") and _is_trace_name(base):
                        out.append(TraceFile(f"{path}:{member.name}", str(path), member.name))
        elif path.is_file():
            out.append(TraceFile(str(path)))
        else:
            raise TraceFormatError(str(path), "no such file or folder")
    return out


def _is_tar(path: Path) -> bool:
    name = path.name
    if name.endswith((".tar", ".tgz", ".tar.gz")):
        return True
    return not name.endswith((".json", ".json.gz")) and is_tar(path)


def _is_trace_name(name: str) -> bool:
    return not name.startswith(".") and (name.endswith((".json", ".json.gz")) or "." not in name)


def read_array_document(
    source: TraceFile,
    array_key: str,
    on_batch: Callable[[list[Any]], None],
    *,
    on_header: Callable[[dict[str, Any]], None] | None = None,
    chunk_bytes: int = CHUNK_BYTES,
) -> dict[str, Any]:
    """Stream `source`, calling `on_batch` with consecutive slices of `array_key`'s array.

    Returns the document's other top-level keys; `on_header` first gets those that come
    before the array. A document without the key is parsed whole and returned as is
    (`on_batch` is never called).
    Raises TraceFormatError if the text is not valid JSON.
    """
    key = b'"' + array_key.encode() + b'"'
    with source.open() as stream:
        buf = b""
        while key not in buf:
            chunk = stream.read(chunk_bytes)
            if not chunk:
                return _loads_object(source, buf)
            buf += chunk
        pos = buf.index(key)
        header = buf[:pos]
        open_at = buf.index(b"[", pos + len(key)) if b"[" in buf[pos:] else -1
        if open_at < 0:
            return _loads_object(source, buf + stream.read())
        head = _loads_object(source, header.rstrip().rstrip(b",") + b"}")
        if on_header is not None:
            on_header(head)
        buf = buf[open_at + 1 :]
        lead = _element_lead(buf)
        for batch, rest in _batches(stream, buf, chunk_bytes, lead):
            if batch is not None:
                on_batch(batch)
            else:
                tail = rest
    meta = _loads_object(source, b'{"__items__": [' + tail)
    meta.update(head)
    items = meta.pop("__items__", [])
    if items:
        on_batch(items)
    return meta


def _element_lead(buf: bytes) -> bytes:
    """The opening of the array's first element (`{"ph"`), used to spot boundaries."""
    match = _LEAD.match(buf)
    return match.group(1) if match else b""


def _common_lead(buf: bytes, but: bytes) -> bytes:
    """The most common key right after a `},{` other than `but` (when the first fails)."""
    keys = Counter(k for k in _NEXT_KEY.findall(buf, max(0, len(buf) - (4 << 20))) if k != but)
    return keys.most_common(1)[0][0] if keys else b""


_LEAD = re.compile(rb'\s*\{\s*("[^"]{1,40}")')
_NEXT_KEY = re.compile(rb'\}\s*,\s*\{\s*("[^"]{1,40}")')


def _batches(
    stream: IO[bytes], buf: bytes, chunk_bytes: int, lead: bytes
) -> Iterator[tuple[list[Any] | None, bytes]]:
    """Yield (batch, b"") for each complete slice, then (None, tail-after-last-cut).

    If several chunks pass without a cut, the first element's key was not the usual one
    (e.g. a metadata event first): the most common key after `},{` is tried instead.
    """
    tried = {lead}
    while True:
        chunk = stream.read(chunk_bytes)
        if not chunk:
            yield None, buf
            return
        buf += chunk
        cut = _find_cut(buf, lead)
        if cut is None:
            if len(buf) > 3 * chunk_bytes:
                other = _common_lead(buf, lead)
                if other and other not in tried:
                    tried.add(other)
                    lead = other
            continue
        batch, buf = cut
        yield batch, b""


def _find_cut(buf: bytes, lead: bytes) -> tuple[list[Any], bytes] | None:
    """Parse the longest prefix of `buf` that ends at an element boundary.

    A boundary is `}` `,` `{` followed by the same first key as the array's first
    element; nested lists of objects rarely share it, and a wrong guess only costs a
    failed parse before the next candidate is tried.
    """
    for tries, close in enumerate(_boundary_iter(buf, len(buf), lead)):
        if tries >= 8:
            return None
        try:
            batch = orjson.loads(b"[" + buf[: close + 1] + b"]")
        except orjson.JSONDecodeError:
            continue
        return batch, buf[buf.index(b",", close) + 1 :]
    return None


def _boundary_iter(buf: bytes, end: int, lead: bytes) -> Iterator[int]:
    """Positions of `}` that close an element, searching backwards from `end`."""
    pattern = re.compile(rb"\}\s*,\s*\{\s*" + re.escape(lead)) if lead else _ANY_BOUNDARY
    start = max(0, end - (256 << 10))
    while True:
        found = [m.start() for m in pattern.finditer(buf, start, end)]
        if found:
            yield from reversed(found)
            return
        if start == 0:
            return
        end, start = start + 256, max(0, start - (256 << 10))


_ANY_BOUNDARY = re.compile(rb"\}\s*,\s*\{")


def _loads_object(source: TraceFile, text: bytes) -> dict[str, Any]:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        raise TraceFormatError(source.path, f"not valid JSON: {exc}") from None
    if not isinstance(value, dict):
        raise TraceFormatError(source.path, "top level is not a JSON object")
    return value


def load_json(source: TraceFile) -> dict[str, Any]:
    """Parse a whole (small) JSON document."""
    with source.open() as stream:
        return _loads_object(source, stream.read())
