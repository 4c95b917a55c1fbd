"""Upper bounds on a model spec's sizes, checked once the spec's values are read.

Each integer dimension (hidden, FFN, vocabulary, heads, experts, sequence, ...) must be at
most `LUMOS_MAX_WIDTH` and the layers at most `LUMOS_MAX_LAYERS`: a hostile or mistyped
spec (`hidden: 1000000000000`) is refused naming its key before any FLOP or byte count is
formed, instead of overflowing 64 bits deep in the step or pricing a step of hours.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from lumos.limits import MAX_LAYERS, MAX_WIDTH

#: keys that count something other than a width (layers have their own limit)
_NOT_WIDTHS = frozenset({"layers", "mtp_layers", "first_dense", "moe_every", "window_every"})


def check_sizes(values: Mapping[str, Any], where: str) -> None:
    """Raises ResourceLimitError naming `where` and the first key past its limit."""
    MAX_LAYERS.check(values["layers"] + values["mtp_layers"], f"{where}: layers (decoder + MTP)")
    for key, value in values.items():
        if key in _NOT_WIDTHS or isinstance(value, bool) or not isinstance(value, int):
            continue
        MAX_WIDTH.check(abs(value), f"{where}: {key}")
