"""JSON Schemas of every `--json` output: `envelope.json` and one `<command>.json` each.

`load("simulate")` returns the schema of `lumos simulate`'s result; the command name
uses dashes for spaces (`et-info`, `export-astra-sim`). docs/json.md explains them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent


def names() -> list[str]:
    """Every shipped schema name (file stem)."""
    return sorted(p.stem for p in ROOT.glob("*.json"))


def load(name: str) -> dict[str, Any]:
    """The schema `name` ("envelope", "simulate", "et-info", ...). Raises KeyError."""
    path = ROOT / f"{name}.json"
    if not path.is_file():
        raise KeyError(f"no JSON schema {name!r} (have: {', '.join(names())})")
    data: dict[str, Any] = json.loads(path.read_text())
    return data
