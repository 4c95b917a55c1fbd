#!/usr/bin/env bash
# mypy cannot follow setuptools' package-dir mapping, so build a symlink tree that
# mirrors the installed import names (lumos.converters -> converters/, ...) and check it.
# Each run gets its own tree, so concurrent runs do not trip over each other.
set -euo pipefail
MYPY=${1:-mypy}
[[ -x "$MYPY" ]] && MYPY=$(realpath "$MYPY")
root=$(cd "$(dirname "$0")/.." && pwd)
tree=$(mktemp -d "${TMPDIR:-/tmp}/lumos-mypy.XXXXXX")
trap 'rm -rf "$tree"' EXIT
mkdir -p "$tree/lumos"
for f in "$root"/lumos/*; do ln -s "$f" "$tree/lumos/$(basename "$f")"; done
for pkg in proto converters simulator hwconfigs; do ln -s "$root/$pkg" "$tree/lumos/$pkg"; done
cd "$tree" && "$MYPY" --config-file "$root/pyproject.toml" --cache-dir "$root/.mypy_cache" -p lumos
