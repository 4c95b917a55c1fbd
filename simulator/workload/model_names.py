"""How a model name a user types finds a built-in spec (`lumos estimate --model NAME`).

Users name models as their hubs do — `meta-llama/Llama-3.1-70B`, `Meta-Llama-3-8B-Instruct`,
`Llama-2-7b-hf`, `Mixtral-8x7B-v0.1` — while the built-ins (`models.yaml`) are short keys
(`llama3.1-70b`, `llama3-8b`, `llama2-7b`, `mixtral-8x7b`). `builtin_key` maps the first onto
the second by rules that never change the architecture: case, the hub's organisation, Meta's
`Meta-` prefix, a `-hf` / `-base` / `-instruct` / `-chat` tag (fine-tunes share the base's
shape), the hyphen in `llama-3.1` / `nemotron-4`, and a few hub names listed in `_RELEASES` (the
`-v0.1` of the first Mistral/Mixtral releases: a later release with another vocabulary,
`mistral-7b-v0.3`, stays unknown). A name no rule
maps is unknown, with the closest built-ins offered. A file given instead of a name is
named by `file_name`.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Collection
from pathlib import Path

#: hub tags of fine-tunes and format conversions, which keep the base model's shape
_TAGS = re.compile(r"-(hf|base|instruct|chat)(?=-|$)")
#: hub names of the built-ins that the rules alone do not reach: the first (`v0.1`) Mistral
#: releases, release dates and expert counts in the name
_RELEASES = {
    "mistral-7b-v0.1": "mistral-7b",
    "mixtral-8x7b-v0.1": "mixtral-8x7b",
    "mixtral-8x22b-v0.1": "mixtral-8x22b",
    "mistral-nemo-2407": "mistral-nemo-12b",
    "llama4-scout-17b-16e": "llama4-scout",
    "llama4-maverick-17b-128e": "llama4-maverick",
    # Nemotron-H's hub names end in their context length (`Nemotron-H-56B-Base-8K`)
    **{f"nemotron-h-{size}-8k": f"nemotron-h-{size}" for size in ("8b", "47b", "56b")},
}


def _spellings(text: str) -> list[str]:
    """The candidate keys of `text`, from the plainest reading to the most rewritten."""
    key = text.strip().lower()
    out = [key]
    if key.count("/") == 1:  # a hub id: organisation/model
        key = key.split("/", 1)[1]
        out.append(key)
    if key.startswith("meta-llama-"):
        key = key[len("meta-") :]
    key = _TAGS.sub("", key)
    key = re.sub(r"^(llama|nemotron)-(\d)", r"\1\2", key)
    key = _RELEASES.get(key, key)
    out.append(key)
    return out


def builtin_key(text: str, builtins: Collection[str]) -> str | None:
    """The built-in that `text` names (module doc), or None."""
    for key in _spellings(text):
        if key in builtins:
            return key
    return None


def closest(text: str, builtins: Collection[str], n: int = 3) -> list[str]:
    """Up to `n` built-ins spelled most like `text` (after `builtin_key`'s rewriting)."""
    return difflib.get_close_matches(_spellings(text)[-1], sorted(builtins), n=n, cutoff=0.6)


def path_exists(path: Path) -> bool:
    """Whether something is at `path` (False for a name the OS refuses, e.g. too long)."""
    try:
        return path.exists()
    except OSError:
        return False


def file_name(path: Path) -> str:
    """A spec's default name: its file's stem, or for `…/Llama-3.1-8B/config.json` (a
    Hugging Face download) its folder's name."""
    if path.stem == "config" and path.resolve().parent.name:
        return path.resolve().parent.name
    return path.stem
