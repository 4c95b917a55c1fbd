"""Packaging and documentation hygiene: every sub-package is shipped, docs match code."""

from __future__ import annotations

import tomllib

from lumos.converters.chakra.conventions import attributes_markdown
from tests.conftest import REPO

TOP = {
    "lumos": "lumos",
    "proto": "lumos.proto",
    "converters": "lumos.converters",
    "simulator": "lumos.simulator",
    "hwconfigs": "lumos.hwconfigs",
}


def test_every_package_folder_is_listed_in_pyproject() -> None:
    listed = set(
        tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]
    )
    found = set()
    for folder, name in TOP.items():
        for path in (REPO / folder).rglob("*"):
            # a folder of Python modules or of shipped data is a package to list
            if path.suffix in {".py", ".yaml", ".proto"} and "__pycache__" not in path.parts:
                rel = path.parent.relative_to(REPO / folder).parts
                found.add(".".join((name, *rel)))
    assert found == listed


def test_attribute_docs_are_generated_from_code() -> None:
    assert (REPO / "docs" / "attributes.md").read_text() == attributes_markdown(), (
        "regenerate docs/attributes.md"
    )
