#!/usr/bin/env bash
# Build the llama-cpp-python wheel QuantDesk pins, with our patches applied to its vendored
# llama.cpp (packaging/llama-cpp/patches/*.patch, paths relative to vendor/llama.cpp).
#   build_wheel.sh PYTHON VERSION OUT_DIR      (CMAKE_ARGS from the environment)
# The Makefile keys its wheel cache by the version, the cmake flags, the CPU and these patches.
set -euo pipefail
python=$1 version=$2 out=$3
here=$(cd "$(dirname "$0")" && pwd)
work=$(mktemp -d "${TMPDIR:-/tmp}/quantdesk-llama-src.XXXXXX")
trap 'rm -rf "$work"' EXIT

"$python" -m pip download -q --no-deps --no-binary :all: -d "$work" "llama-cpp-python==$version"
tar xzf "$work"/llama_cpp_python-"$version".tar.gz -C "$work"
src="$work/llama_cpp_python-$version"
for p in "$here"/patches/*.patch; do
    [ -e "$p" ] || continue
    echo "applying $(basename "$p") to the vendored llama.cpp"
    if command -v patch >/dev/null; then
        patch -d "$src/vendor/llama.cpp" -p1 --forward --quiet < "$p"
    else
        (cd "$src/vendor/llama.cpp" && git apply -p1 "$p")
    fi
done
"$python" -m pip wheel --no-deps --no-cache-dir -w "$out" "$src"
