#!/usr/bin/env bash
# The dependency ranges tested at their lower bounds: installs cutune with every direct dependency at the
# lowest version pyproject.toml allows (uv's `--resolution lowest-direct`; pip has no such mode) into
# .venv-lowest, and runs the CPU tests that exercise those dependencies (CLI, tuning, spec, language server;
# not the PostgreSQL ones, which need a database server). About 4-5 minutes on 2 cores: not in CI.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv --clear .venv-lowest
.venv-lowest/bin/pip install -q --upgrade pip uv >/dev/null
.venv-lowest/bin/uv pip install -q --python .venv-lowest/bin/python --resolution lowest-direct -e '.[test]'
echo "lowest direct dependencies:"
.venv-lowest/bin/uv pip list --python .venv-lowest/bin/python 2>/dev/null \
  | grep -E -i '^(tree-sitter|tree-sitter-cuda|optuna|sqlalchemy|pygls|lsprotocol|openai|typer|rich|numpy|jsonschema|pytest|pytest-lsp|pytest-asyncio) ' \
  || true
.venv-lowest/bin/python -m pytest -q -p no:cacheprovider -m "not gpu" -k "not postgres" \
  tests/test_cli.py tests/tune tests/spec/test_schema.py tests/lsp/test_errors.py tests/lsp/test_lenses.py "$@"
