#!/usr/bin/env bash
# Fetches the held-out corpus: production CUDA no rule here was written against, for the generality benchmarks
# (python benchmarks/transform_report.py --corpus vllm): vLLM's csrc/, from its source archive on the package
# index. pip cannot download that archive without building its metadata (which needs torch), so the archive is
# fetched from the index's simple API (PEP 691) directly; nothing is built or installed.
# Usage: scripts/held_out.sh [DIR]   (default: .corpus/ at the repository root; kept between runs)
set -euo pipefail
cd "$(dirname "$0")/.."
dest=${1:-${CUTUNE_CORPUS:-.corpus}}
vllm=vllm-0.33.0
mkdir -p "$dest"
if [ ! -d "$dest/$vllm/csrc" ]; then
  archive=$(mktemp --suffix=.tar.gz)
  trap 'rm -f "$archive"' EXIT
  python3 - "$vllm.tar.gz" "$archive" <<'PY'
import hashlib, json, sys, urllib.request
name, out = sys.argv[1], sys.argv[2]
index = urllib.request.Request("https://pypi.org/simple/vllm/", headers={"Accept": "application/vnd.pypi.simple.v1+json"})
try:
    files = json.load(urllib.request.urlopen(index, timeout=60))["files"]
    found = next((f for f in files if f["filename"] == name), None)
    if found is None:
        sys.exit(f"{name}: not on the package index")
    urllib.request.urlretrieve(found["url"], out)
except (OSError, ValueError, KeyError) as e:
    sys.exit(f"{name}: could not fetch it from the package index: {e}")
with open(out, "rb") as archive:
    if hashlib.sha256(archive.read()).hexdigest() != found["hashes"]["sha256"]:
        sys.exit(f"{name}: the download does not match the index's sha256")
PY
  tar xzf "$archive" -C "$dest" "$vllm/csrc"
fi
echo "$dest"
