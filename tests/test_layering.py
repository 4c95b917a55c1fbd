"""Imports flow one way (ARCHITECTURE.md): each package imports only the layers below it.

Reads every module's imports from its source (no import side effects), so a violation is
reported with the file and line that adds it.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tests.conftest import REPO

ROOTS = {
    "lumos": "lumos",
    "proto": "lumos.proto",
    "converters": "lumos.converters",
    "simulator": "lumos.simulator",
    "hwconfigs": "lumos.hwconfigs",
}

# package prefix -> lumos prefixes it may import (besides itself); the most specific wins.
COMMON = (
    "lumos.errors",
    "lumos.progress",
    "lumos.__version__",
    "lumos.limits",
    "lumos.outputs",
    "lumos.staging",
    "lumos.leftovers",
)
ALLOWED: dict[str, tuple[str, ...]] = {
    "lumos.proto": (),
    "lumos.hwconfigs": ("lumos.errors",),
    "lumos.converters.chakra": ("lumos.errors", "lumos.proto"),
    "lumos.converters.ops": ("lumos.errors",),
    "lumos.converters.pytorch": (
        "lumos.errors",
        "lumos.proto",
        "lumos.converters.chakra",
        "lumos.converters.ops",
    ),
    "lumos.converters.astra_sim": (
        "lumos.errors",
        "lumos.proto",
        "lumos.converters.chakra",
        "lumos.hwconfigs",
    ),
    "lumos.converters": ("lumos.errors", "lumos.proto", "lumos.converters"),
    "lumos.simulator.network": (
        "lumos.errors",
        "lumos.hwconfigs",
        "lumos.simulator.network",
        "lumos.simulator.graph",
        "lumos.converters.astra_sim.config",
        "lumos.converters.astra_sim.config_files",
        # astra mode refuses what the real binary cannot finish by the pre-flight's rules
        "lumos.converters.astra_sim.preflight",
        "lumos.converters.astra_sim.groups",
    ),
    "lumos.simulator": (
        "lumos.errors",
        "lumos.proto",
        "lumos.hwconfigs",
        "lumos.converters.chakra",
        "lumos.converters.ops",
        "lumos.simulator",
    ),
    "lumos.errors": (),
    "lumos.progress": (),
    "lumos.limits": (),
    "lumos.outputs": ("lumos.leftovers",),
    "lumos.leftovers": (),
    "lumos.staging": ("lumos.outputs", "lumos.leftovers"),
    "lumos.version": (),
}


def _module_name(path: Path) -> str:
    rel = path.relative_to(REPO)
    base = ROOTS[rel.parts[0]]
    parts = list(rel.with_suffix("").parts[1:])
    if parts and parts[-1] == "__init__":
        parts.pop()
    return ".".join([base, *parts])


def _lumos_imports(path: Path) -> list[tuple[int, str]]:
    tree = ast.parse(path.read_text(), filename=str(path))
    found: list[tuple[int, str]] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.startswith("lumos")]
        elif (
            isinstance(node, ast.ImportFrom)
            and node.module
            and node.level == 0
            and node.module.startswith("lumos")
        ):
            found += [(node.lineno, f"{node.module}.{a.name}") for a in node.names]
    return found


def _rule(module: str) -> tuple[str, ...] | None:
    best = max(
        (p for p in ALLOWED if module == p or module.startswith(p + ".")), key=len, default=None
    )
    return None if best is None else (best, *COMMON, *ALLOWED[best])


def _sources() -> list[Path]:
    out: list[Path] = []
    for folder in ROOTS:
        if folder == "lumos":
            out += list((REPO / "lumos").rglob("*.py"))
        else:
            out += [p for p in (REPO / folder).rglob("*.py") if "_pb2" not in p.name]
    return sorted(out)


def test_sources_found() -> None:
    assert len(_sources()) > 80


@pytest.mark.parametrize("path", _sources(), ids=lambda p: str(p.relative_to(REPO)))
def test_imports_flow_one_way(path: Path) -> None:
    module = _module_name(path)
    allowed = _rule(module)
    if allowed is None:  # the CLI shell and the facade may import anything
        return
    bad = [
        f"{path.relative_to(REPO)}:{line} imports {name}"
        for line, name in _lumos_imports(path)
        if not any(name == a or name.startswith(a + ".") for a in allowed)
    ]
    assert not bad, "\n".join(bad)


def test_converters_never_import_the_simulator() -> None:
    for path in (REPO / "converters").rglob("*.py"):
        names = [n for _, n in _lumos_imports(path)]
        assert not [n for n in names if n.startswith("lumos.simulator")], path


def _package_modules() -> list[Path]:
    return [p for p in _sources() if p.name != "__init__.py" and "proto" not in p.parts]


def test_modules_are_small() -> None:
    sizes = sorted(len(p.read_text().splitlines()) for p in _package_modules())
    median = sizes[len(sizes) // 2] if len(sizes) % 2 else sum(sizes[len(sizes) // 2 - 1 :][:2]) / 2
    big = [
        str(p.relative_to(REPO))
        for p in _package_modules()
        if len(p.read_text().splitlines()) > 400
    ]
    assert median <= 150 and not big, (median, big)


def test_no_module_repeats_its_folder_name() -> None:
    bad = []
    for p in _package_modules():
        folder = p.parent.name.rstrip("s")
        if p.stem.startswith((f"{p.parent.name}_", f"{folder}_")) or p.stem.startswith("astra_"):
            bad.append(str(p.relative_to(REPO)))
    assert not bad
