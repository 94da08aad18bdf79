"""``quantdesk doctor``: what this machine and this llama.cpp build can do, and which CPU
path model loads take (AMX, repack or plain) and why."""

from __future__ import annotations

import argparse
import json
import platform
import sys
from typing import Any

from backend.llama.cpu_probe import forget_verdict
from backend.llama.model_params import choose_cpu_path
from backend.llama.rpc_ggml import local_gpu_present
from backend.system.cpu_name import cpu_model


def register(subparsers: Any) -> None:
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "doctor",
        help="what this machine and llama.cpp build can do, and the CPU path loads take",
        description="Print the CPU, its AMX/AVX flags, llama.cpp's extra CPU buffer types and "
        "the CPU path model loads take (AMX, repack or plain) with the reason; the first run "
        "on a machine probes the repacked kernels in a child process once.",
    )
    parser.add_argument(
        "-nr", "--no-repack", action="store_true", help="as serve's -nr: extra buffers off"
    )
    parser.add_argument(
        "--json", action="store_true", help="the CPU path as JSON (what benchmarks record)"
    )
    parser.add_argument(
        "--reprobe", action="store_true", help="forget the kept CPU probe verdict and probe again"
    )
    parser.set_defaults(handler=run)


def _cpu_features() -> list[str]:
    import llama_cpp

    wanted = ("amx_int8", "avx512_vnni", "avx512", "avx2", "neon", "sve")
    info = llama_cpp.llama_print_system_info().decode(errors="replace")
    # "CPU : SSE3 = 1 | AVX2 = 1 | ... | AMX_INT8 = 1 | ..."
    flags = {
        key.strip().lower(): value.strip()
        for key, sep, value in (
            part.partition("=") for part in info.replace("CPU :", "|").split("|")
        )
        if sep
    }
    return [name.upper() for name in wanted if flags.get(name) == "1"]


def run(args: argparse.Namespace) -> int:
    import llama_cpp

    if args.reprobe:
        forget_verdict()
    choice = choose_cpu_path(True if args.no_repack else None)
    if args.json:
        sys.stdout.write(json.dumps(choice.to_json()) + "\n")
        return 0
    lines = [
        f"CPU:           {cpu_model()} ({platform.machine()})",
        f"llama.cpp:     llama-cpp-python {llama_cpp.__version__}, "
        f"compiled for {' '.join(_cpu_features()) or 'no SIMD flags reported'}",
        f"extra buffers: {', '.join(choice.extra_buffers) or 'none in this build'}",
        f"CPU path:      {choice.path} ({choice.reason})",
        f"local GPU:     {'yes' if local_gpu_present() else 'no'}",
        f"RPC backend:   {'yes' if llama_cpp.llama_supports_rpc() else 'no'}",
    ]
    sys.stdout.write("\n".join(lines) + "\n")
    return 0
