#!/usr/bin/env bash
# Build llama.cpp's C++ llama-server from the llama.cpp that llama-cpp-python's sdist vendors,
# so the peer runs the very kernels our engine runs. Nothing is committed: the sdist, sources
# and binary live under $PEER_DIR (default: build/peers, git-ignored).
#
#   benchmarks/build_llama_server.sh            # -> build/peers/llama-server/bin/llama-server
#   JOBS=4 PEER_DIR=/tmp/peers benchmarks/build_llama_server.sh
#
# Needs: cmake, a C++ compiler, the project venv (.venv) for 'pip download'.
set -euo pipefail

HERE="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
ROOT="$(cd "$HERE/.." && pwd)"
PEER_DIR="${PEER_DIR:-$ROOT/build/peers}"
JOBS="${JOBS:-2}"
LLAMA_CPP_PYTHON_VERSION="${LLAMA_CPP_PYTHON_VERSION:-0.3.36}"
PIP="${PIP:-$ROOT/.venv/bin/pip}"

SDIST_DIR="$PEER_DIR/sdist"
SRC_DIR="$PEER_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION"
BUILD_DIR="$PEER_DIR/llama-server"
BIN="$BUILD_DIR/bin/llama-server"

if [[ -x "$BIN" ]]; then
    echo "already built: $BIN"
    exit 0
fi

mkdir -p "$SDIST_DIR"
if [[ ! -d "$SRC_DIR" ]]; then
    "$PIP" download --no-deps --no-binary :all: \
        "llama-cpp-python==$LLAMA_CPP_PYTHON_VERSION" -d "$SDIST_DIR"
    tar -xzf "$SDIST_DIR/llama_cpp_python-$LLAMA_CPP_PYTHON_VERSION.tar.gz" -C "$PEER_DIR"
    # the same fixes our wheel carries (the AMX tile config), so both run the same kernels
    for p in "$ROOT"/packaging/llama-cpp/patches/*.patch; do
        patch -d "$SRC_DIR/vendor/llama.cpp" -p1 --forward --quiet < "$p"
    done
fi

cmake -S "$SRC_DIR/vendor/llama.cpp" -B "$BUILD_DIR" \
    -DCMAKE_BUILD_TYPE=Release \
    -DLLAMA_CURL=OFF \
    -DLLAMA_OPENSSL=OFF \
    -DGGML_NATIVE=ON \
    -DLLAMA_BUILD_TESTS=OFF \
    -DLLAMA_BUILD_EXAMPLES=OFF \
    -DLLAMA_BUILD_SERVER=ON
cmake --build "$BUILD_DIR" --target llama-server -j"$JOBS"

test -x "$BIN"
echo "built: $BIN"
