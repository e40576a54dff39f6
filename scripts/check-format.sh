#!/usr/bin/env bash
# Fails, naming them, when Swift files of the repository differ from what the toolchain's `swift format` makes of them
# with the repository's .swift-format (120 columns). To format: swift format format -i -r --parallel Sources Tests Package.swift
set -euo pipefail
cd "$(dirname "$0")/.."
copy=$(mktemp -d)
trap 'rm -rf "$copy"' EXIT
git ls-files -z -- '*.swift' | xargs -0 cp --parents -t "$copy"
(cd "$copy" && swift format format -i -r --parallel --configuration "$OLDPWD/.swift-format" .)
unformatted=$(git ls-files -- '*.swift' | while IFS= read -r file; do cmp -s "$file" "$copy/$file" || echo "$file"; done)
if [ -n "$unformatted" ]; then
    echo "these files are not formatted as .swift-format says (swift format format -i FILE):" >&2
    echo "$unformatted" >&2
    exit 1
fi
