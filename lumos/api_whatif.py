"""The facade's what-if: `lumos.whatif(trace, layers=..., dp=..., ...)` edits a traced
step and returns both simulations as a typed `WhatIfPrediction` (`lumos.api` re-exports
it beside `convert`, `simulate`, `compare` and `export_astra_sim`).

The keyword arguments are `lumos whatif`'s options; `.to_json()` is exactly the `result`
of `lumos whatif --json` (schema `lumos/schemas/whatif.json`).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas

    from lumos.simulator.result import SimResult
    from lumos.simulator.whatif.api import WhatIfResult
    from lumos.simulator.whatif.etset import EtSet


@dataclass(frozen=True, slots=True)
class WhatIfPrediction:
    """The traced and the predicted step (`raw`: simulations, structure, edited ETs)."""

    raw: WhatIfResult
    written: tuple[Path, ...] = ()
    explain: bool = False

    @property
    def base(self) -> SimResult:
        return self.raw.base

    @property
    def predicted(self) -> SimResult:
        return self.raw.predicted

    @property
    def step_ns(self) -> int:
        """Predicted step time (ns)."""
        return self.raw.predicted.iteration_time_ns

    @property
    def base_step_ns(self) -> int:
        """The traced step as replayed (ns)."""
        return self.raw.base.iteration_time_ns

    @property
    def edits(self) -> list[str]:
        """One note per edit applied."""
        return list(self.raw.notes)

    def to_json(self) -> dict[str, Any]:
        """The `result` of `lumos whatif --json`."""
        from lumos.simulator.whatif.api import result_json

        return result_json(self.raw, list(self.written), self.explain)

    def to_pandas(self) -> pandas.DataFrame:
        """One row per (rank, which: base/predicted): step and breakdown parts."""
        from lumos.api import _pandas

        rows = []
        for which in ("base", "predicted"):
            for r in self.to_json()[which]["ranks"]:
                rows.append({"which": which, **r})
        return _pandas().DataFrame(rows).set_index(["rank", "which"])


def whatif(
    trace: str | Path | EtSet,
    *,
    output: str | Path | None = None,
    prefix: str = "whatif",
    force: bool = False,
    explain: bool = False,
    slow_ranks: dict[int, float] | None = None,
    slow_links: dict[int, float] | None = None,
    **edits: Any,
) -> WhatIfPrediction:
    """Edit TRACE's step and simulate it beside the traced one (`-o` as `output`).

    `edits` are `WhatIf`'s fields: layers, hidden, ffn, seq, tp, dp, pp, schedule, vp,
    microbatches, hw, base_hw, jitter, seed, normalise (False: edit the step as traced,
    `--as-traced`). Raises ConfigError for an unknown edit or
    an impossible one, TraceFormatError for an unreadable trace, LumosError (before any
    work) when `output` already holds `<prefix>.*.et` files and `force` is off.
    """
    from dataclasses import fields

    from lumos.converters.chakra.set_output import check_set_output
    from lumos.errors import ConfigError
    from lumos.simulator.whatif.api import WhatIf, run_whatif
    from lumos.simulator.whatif.etset import write_etset

    known = {f.name for f in fields(WhatIf)} - {"slow_ranks", "slow_links"}
    unknown = sorted(set(edits) - known)
    if unknown:
        raise ConfigError(f"unknown what-if edit(s): {', '.join(unknown)}")
    spec = WhatIf(
        **edits,
        slow_ranks=tuple(sorted((slow_ranks or {}).items())),
        slow_links=tuple(sorted((slow_links or {}).items())),
    )
    if output is not None:
        check_set_output(Path(output), prefix, force=force)
    res = run_whatif(trace, spec)
    written = write_etset(res.edited, output, prefix, force=force) if output is not None else []
    return WhatIfPrediction(res, tuple(written), explain)
