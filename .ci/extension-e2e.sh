#!/usr/bin/env bash
# The VS Code extension's CI: type-check, lint and unit tests, then the end-to-end test in a real VS Code
# (code-server driven headless through Debian's Chromium). Installs what is missing first; safe to run again.
#
#   CUTUNE_E2E_PYTHON  Python with cutune installed that the extension starts the server with
#                      (default: .venv/bin/python of this checkout)
#
# Takes about 4 minutes on a 2-core machine with nothing installed (code-server's native modules: ~2.5 min),
# under a minute when everything is in place.
set -euo pipefail

repo="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
extension="$repo/extension"
export CUTUNE_E2E_PYTHON="${CUTUNE_E2E_PYTHON:-$repo/.venv/bin/python}"

section() { printf '\n== %s (%s)\n' "$1" "$(date +%T)"; }

section "system packages"
missing=()
command -v chromium >/dev/null || missing+=(chromium)
command -v g++ >/dev/null || missing+=(g++)
command -v make >/dev/null || missing+=(make)
dpkg -s libkrb5-dev >/dev/null 2>&1 || missing+=(libkrb5-dev)
if ((${#missing[@]})); then
  echo "installing: ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  apt-get update -qq
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
else
  echo "chromium, g++, make and libkrb5-dev are installed"
fi

section "extension dependencies (npm ci)"
cd "$extension"
stamp="node_modules/.cutune-npm-ci"
want="$(sha256sum package-lock.json | cut -d' ' -f1)"
if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" ]]; then
  echo "node_modules matches package-lock.json"
else
  npm ci --no-audit --no-fund
  echo "$want" > "$stamp"
fi

section "code-server (e2e/install-host.sh)"
timeout 900 bash e2e/install-host.sh

section "type-check, lint, unit tests"
npm run --silent typecheck
npm run --silent lint
npm test

section "end-to-end test (Python: $CUTUNE_E2E_PYTHON)"
if [[ ! -x "$CUTUNE_E2E_PYTHON" ]]; then
  echo "CUTUNE_E2E_PYTHON=$CUTUNE_E2E_PYTHON is not an executable Python with cutune installed" >&2
  exit 1
fi
timeout 600 npm run e2e
section "done"
