"""Which conversion a rank file comes from: `set_id_of` names one run of `convert`.

Files that share the id come from the same run, so a stale rank of an earlier run is
told apart from the set (`converters.chakra.rankset`). The set itself is written all at
once by `converters.chakra.set_output`.
"""

from __future__ import annotations

import hashlib
import os

from lumos import __version__
from lumos.converters.pytorch.inputs import RankInputs


def set_id_of(inputs: list[RankInputs], world: int, step: int | None, prefix: str) -> str:
    """An id for one conversion: the same inputs and options give the same id."""
    digest = hashlib.sha256(f"{__version__}|{world}|{step}|{prefix}".encode())
    for item in inputs:
        for f in (item.host, item.kineto):
            if f is None:
                continue
            try:
                st = os.stat(f.archive or f.path)
                digest.update(f"{item.rank}|{f.path}|{st.st_size}|{st.st_mtime_ns}".encode())
            except OSError:
                digest.update(f"{item.rank}|{f.path}".encode())
    return digest.hexdigest()[:16]
