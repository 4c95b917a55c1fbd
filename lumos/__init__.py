"""lumos: Chakra execution traces from distributed PyTorch training, simulated and exported.

The top-level package is the thin shell (version, errors, CLI) and the Python facade:
`lumos.convert`, `lumos.simulate`, `lumos.compare`, `lumos.export_astra_sim`,
`lumos.estimate`, `lumos.whatif` (see `lumos.api`), loaded on first use so `import lumos`
stays light. The work lives in `lumos.converters` (trace formats), `lumos.simulator`
(event-driven simulation) and `lumos.hwconfigs` (hardware data); `lumos.proto` holds the
Chakra schema bindings.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

#: pyproject.toml's version, written here so no command pays for importlib.metadata
#: (~50 ms); tests/cli/test_cli_et.py checks it against the installed package's
__version__ = "0.1.0"

if TYPE_CHECKING:
    from lumos.api import compare, convert, estimate, export_astra_sim, simulate, whatif

_FACADE = ("convert", "simulate", "compare", "export_astra_sim", "estimate", "whatif")
__all__ = [
    "__version__",
    "compare",
    "convert",
    "estimate",
    "export_astra_sim",
    "simulate",
    "whatif",
]


def __getattr__(name: str) -> Any:
    """`lumos.simulate` and friends, imported from `lumos.api` on first access."""
    if name in _FACADE:
        from lumos import api

        return getattr(api, name)
    raise AttributeError(f"module 'lumos' has no attribute {name!r}")
