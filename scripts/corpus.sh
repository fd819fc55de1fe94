#!/usr/bin/env bash
# Fetches the production CUDA sources no one here wrote, for the corpus tests and benchmarks (tests/corpus):
# the DeepSpeed sdist's csrc/ and the llama-cpp-python sdist's ggml (ggml-cuda and the headers it includes),
# downloaded from the package index as source archives, without their dependencies, never built.
# flashinfer-python (its wheel ships its CUDA headers) is pip-installed --no-deps by scripts/test.sh.
# Usage: scripts/corpus.sh [DIR]   (default: .corpus/ at the repository root; kept between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-${CUTUNE_CORPUS:-.corpus}}
deepspeed=deepspeed-0.18.2
llama=llama_cpp_python-0.3.16
mkdir -p "$dest"
if [ ! -d "$dest/$deepspeed/csrc" ] || [ ! -d "$dest/$llama/vendor/llama.cpp/ggml/src/ggml-cuda" ]; then
  archives=$(mktemp -d)
  trap 'rm -rf "$archives"' EXIT
  python3 -m pip download -q --no-deps --no-binary :all: -d "$archives" \
    "deepspeed==${deepspeed#deepspeed-}" "llama-cpp-python==${llama#llama_cpp_python-}" 2>&1 | grep -v '^WARNING' || true
  tar xzf "$archives/$deepspeed.tar.gz" -C "$dest" "$deepspeed/csrc"
  tar xzf "$archives/$llama.tar.gz" -C "$dest" "$llama/vendor/llama.cpp/ggml/src" "$llama/vendor/llama.cpp/ggml/include"
fi
echo "$dest"
