#!/usr/bin/env bash
# Build the installable plugin package (dist/*.lbpkg) with `lbp build`, shipping only what the
# plugin needs at run time. `lbp build` honours .gitignore only, so the build runs in a staging
# copy whose .gitignore also excludes tests, benchmarks, scripts and docs.
#
#   scripts/build.sh            # uses .venv/bin/lbp (pip install -r requirements-dev.txt)
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
LBP="${LBP:-$ROOT/.venv/bin/lbp}"
[ -x "$LBP" ] || LBP="$(command -v lbp)" || { echo "lbp not found: pip install langbot-plugin" >&2; exit 2; }
STAGE="$(mktemp -d)"
trap 'rm -rf "$STAGE"' EXIT
cd "$ROOT"
SHIPPED=(manifest.yaml main.py requirements.txt assets components lucidrag README.md readme)
if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
  git ls-files -z -- "${SHIPPED[@]}" | xargs -0 -I{} cp --parents {} "$STAGE/"
else  # a source archive without .git ("Download ZIP"): the same paths; .gitignore drops caches
  cp -R --parents "${SHIPPED[@]}" "$STAGE/"
fi
cp .gitignore "$STAGE/.gitignore"
printf 'tests/\nbench/\nscripts/\ndocs/\n.ci/\n' >> "$STAGE/.gitignore"
mkdir -p "$ROOT/dist"
(cd "$STAGE" && "$LBP" build -o "$ROOT/dist" >/dev/null)
ls -l "$ROOT"/dist/*
