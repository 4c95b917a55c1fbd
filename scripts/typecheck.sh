#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping, so build a symlink tree that
# mirrors the installed import names (lumos.converters -> converters/, ...) and check it.
set -euo pipefail
MYPY=${1:-mypy}
root=$(cd "$(dirname "$0")/.." && pwd)
tree="$root/.mypy_tree"
rm -rf "$tree" && mkdir -p "$tree/lumos"
for f in "$root"/lumos/*; do ln -s "$f" "$tree/lumos/$(basename "$f")"; done
for pkg in proto converters simulator hwconfigs; do ln -s "$root/$pkg" "$tree/lumos/$pkg"; done
cd "$tree" && "$MYPY" --config-file "$root/pyproject.toml" -p lumos
