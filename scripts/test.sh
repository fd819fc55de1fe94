#!/usr/bin/env bash
# Installs cutune with its test dependencies into .venv and runs every check that needs no GPU:
# ruff (lint + format), mypy, the Python test suite (GPU tests skip with a reason), and the VS Code
# extension's unit and end-to-end tests.
set -euo pipefail
cd "$(dirname "$0")/.."
python3 -m venv .venv
.venv/bin/pip install -q --upgrade pip >/dev/null
.venv/bin/pip install -q -e '.[test]'
# the real-kernel corpus (tests/corpus): flashinfer's CUDA sources, without torch & co. (pip extras cannot say --no-deps)
.venv/bin/pip install -q --no-deps 'flashinfer-python==0.6.0'
# a CPU build of PyTorch beside the environment, not in it (taken from disk, no download): the compile tests of
# files whose headers reach torch use its headers, while every other test builds as where torch is absent
.venv/bin/pip install -q --no-deps --target .cutune/torch-site 'torch==2.13.0'
# DeepSpeed's csrc/ and llama.cpp's ggml-cuda/ from their sdists, unpacked into .corpus/ (never built)
bash scripts/corpus.sh >/dev/null
.venv/bin/ruff check server tests benchmarks
.venv/bin/ruff format --check server tests benchmarks
.venv/bin/mypy server/cutune
# a throwaway PostgreSQL (loopback only) for the tests of workers sharing one study over an RDB URL
pg_dir=$(mktemp -d /tmp/cutune-pg.XXXXXX)
trap 'bash scripts/postgres.sh stop "$pg_dir"; rm -rf "$pg_dir"' EXIT
CUTUNE_TEST_POSTGRES_URL=$(bash scripts/postgres.sh start "$pg_dir")
export CUTUNE_TEST_POSTGRES_URL
# one worker a core, up to 4 (the tests are independent: each has its own directories, ports and studies)
.venv/bin/pytest -q -ra -n auto --maxprocesses 4
if [ "${CUTUNE_SKIP_EXTENSION:-0}" != "1" ]; then
  CUTUNE_E2E_PYTHON="$PWD/.venv/bin/python" bash .ci/extension-e2e.sh
fi
