#!/usr/bin/env bash
# GPU check kit, step 1 (run here, on the CPU machine): write build/gpu-carry/ (git-ignored),
# the folder a lent GPU machine needs besides the working tree: trimmed llama.cpp source, the
# llama_cpp Python package, Python 3.12 wheels the GPU image lacks. Prints its size (< 60 MiB).
#
#   benchmarks/gpu/prepare.sh                  # -> build/gpu-carry
#   benchmarks/gpu/prepare.sh --out DIR --no-wheels
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
exec "${PYTHON:-$ROOT/.venv/bin/python}" -m benchmarks.gpu.carry_prepare "$@"
