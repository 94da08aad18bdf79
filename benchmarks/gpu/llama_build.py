"""One build of the carried llama.cpp: the shared libraries our engine loads through
``LLAMA_CPP_LIB_PATH`` and the peer ``llama-server``, from the same configure.

GPU: ``-DGGML_CUDA=on -DCMAKE_CUDA_ARCHITECTURES=90-real`` (an H200), all cores. Dry run: CPU
only, two jobs. Both add ``-DGGML_RPC=on`` (the source has ggml-rpc; issue 20 adds the same
to the Makefile's llama-cpp-python build). Only the targets needed are built.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

TARGETS = ("llama", "ggml", "llama-server")
LIBS = ("libllama.so", "libggml.so", "libggml-base.so", "libggml-cpu.so")


def configure_command(src: Path, build: Path, *, cuda: bool) -> list[str]:
    cmd = [
        "cmake",
        "-S",
        str(src),
        "-B",
        str(build),
        "-DCMAKE_BUILD_TYPE=Release",
        "-DBUILD_SHARED_LIBS=ON",
        "-DGGML_NATIVE=ON",
        "-DGGML_RPC=ON",
        "-DLLAMA_CURL=OFF",
        "-DLLAMA_OPENSSL=OFF",
        "-DLLAMA_BUILD_TESTS=OFF",
        "-DLLAMA_BUILD_EXAMPLES=OFF",
        "-DLLAMA_BUILD_TOOLS=ON",
        "-DLLAMA_BUILD_SERVER=ON",
        "-DLLAMA_BUILD_APP=OFF",
        "-DLLAMA_BUILD_UI=OFF",
        "-DLLAMA_USE_PREBUILT_UI=OFF",  # no network there: the server builds without the UI
    ]
    if shutil.which("ninja"):
        cmd += ["-G", "Ninja"]
    if cuda:
        cmd += [
            "-DGGML_CUDA=ON",
            "-DCMAKE_CUDA_ARCHITECTURES=90-real",
            "-DGGML_CUDA_NCCL=OFF",  # one GPU; the image has no system NCCL
        ]
    else:
        cmd += ["-DGGML_CUDA=OFF"]
    return cmd


def build_command(build: Path, jobs: int) -> list[str]:
    return ["cmake", "--build", str(build), "--target", *TARGETS, "-j", str(jobs)]


def configured_for(build: Path) -> str | None:
    """'cuda' or 'cpu' for an existing configure of ``build``, None when there is none."""
    cache = build / "CMakeCache.txt"
    if not cache.is_file():
        return None
    text = cache.read_text(errors="replace")
    return "cuda" if "GGML_CUDA:BOOL=ON" in text else "cpu"


def lib_dir(build: Path) -> Path:
    return build / "bin"


def server_binary(build: Path) -> Path:
    return build / "bin" / "llama-server"


def missing_outputs(build: Path) -> list[str]:
    names = [*LIBS, "llama-server"]
    return [n for n in names if not (lib_dir(build) / n).exists()]


def cuda_lib_built(build: Path) -> bool:
    return (lib_dir(build) / "libggml-cuda.so").exists()


def default_jobs(cuda: bool) -> int:
    return (os.cpu_count() or 2) if cuda else 2
