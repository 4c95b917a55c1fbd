"""lumos: Chakra execution traces from distributed PyTorch training, simulated and exported.

The top-level package is the thin shell (version, errors, CLI). The work lives in
`lumos.converters` (trace formats), `lumos.simulator` (event-driven simulation) and
`lumos.hwconfigs` (hardware data); `lumos.proto` holds the Chakra schema bindings.
"""

from importlib.metadata import PackageNotFoundError, version

try:
    __version__ = version("lumos")
except PackageNotFoundError:  # running from a source tree that was never installed
    __version__ = "0.0.0+unknown"

__all__ = ["__version__"]
