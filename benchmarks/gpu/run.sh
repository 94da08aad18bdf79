#!/usr/bin/env bash
# GPU check kit, step 2: run on a lent GPU machine (one H200, CUDA 13, no network) with
# build/gpu-carry/ carried beside the working tree (benchmarks/gpu/prepare.sh writes it).
# One command, ~9 minutes at most: builds llama.cpp with CUDA (shared libs + llama-server),
# makes a synthetic ~1.3B Llama, quantises it, then checks fit vs NVML, speed vs llama-server,
# /v1/stats under load, partial offload, an over-big context and KLD on GPU vs CPU.
# Writes OUT_DIR/gpu_kit.json, OUT_DIR/summary.txt, OUT_DIR/logs.txt (+ peer-ratios.png).
#
#   benchmarks/gpu/run.sh "$OUT/gpu-kit"              # on the GPU machine
#   benchmarks/gpu/run.sh /tmp/gpu-kit --dry-run      # here: CPU build, tiny model
#
# Environment: QD_GPU_PYTHON (default python3 there, .venv/bin/python in a dry run),
# QD_GPU_CARRY, QD_GPU_BUILD, QD_GPU_WORK (default build/gpu-carry, build/gpu-kit/...).
set -uo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
if [[ $# -lt 1 || "$1" == -* ]]; then
    echo "usage: $0 OUT_DIR [--dry-run] [--budget SECONDS]" >&2
    exit 2
fi
OUT_DIR="$1"
shift
if [[ " $* " == *" --dry-run "* && -x "$ROOT/.venv/bin/python" ]]; then
    PY="${QD_GPU_PYTHON:-$ROOT/.venv/bin/python}"
else
    PY="${QD_GPU_PYTHON:-python3}"
fi
LIMIT=585  # under the device tool's 600 s per command
[[ " $* " == *" --dry-run "* ]] && LIMIT=4000  # a CPU build on 2 cores takes ~15-30 min
if ! command -v nvcc >/dev/null; then  # CMake needs nvcc; the toolkit may not be on PATH
    for d in /usr/local/cuda/bin /usr/local/cuda-*/bin; do
        [[ -x "$d/nvcc" ]] && export PATH="$d:$PATH" && break
    done
fi
export QD_GPU_PYTHON="$PY" PYTHONUNBUFFERED=1
cd "$ROOT"
mkdir -p "$OUT_DIR"
# the kit keeps its own budget; this is the backstop (it still writes what it has on TERM)
exec timeout --signal=TERM --kill-after=20 "${QD_GPU_TIMEOUT:-$LIMIT}" \
    "$PY" -m benchmarks.gpu.kit "$OUT_DIR" "$@"
