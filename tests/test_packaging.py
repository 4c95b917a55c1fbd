"""Packaging and documentation hygiene: every sub-package is shipped, docs match code."""

from __future__ import annotations

import tomllib

from lumos.converters.conventions import attributes_markdown
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
        for init in (REPO / folder).rglob("__init__.py"):
            rel = init.parent.relative_to(REPO / folder).parts
            found.add(".".join((name, *rel)))
    assert found == listed


def test_attribute_docs_are_generated_from_code() -> None:
    assert (REPO / "docs" / "attributes.md").read_text() == attributes_markdown(), (
        "regenerate docs/attributes.md"
    )
