"""Step: a context too big for the memory gets the fit verdict, and ``quantdesk serve`` gives a
clear refusal (an exit with a message) or a fallback that serves, not a crash.

The context is the smallest of ``-c`` up to serve's 1M cells whose KV cache (f16, else f32)
is at least 1.1x the memory it must fit in: VRAM with ``-ngl all`` on a GPU, RAM in the dry
run (where the server runs under an address-space limit, so the allocation fails here
without touching the shared machine's RAM).

    python -m benchmarks.gpu.step_oversize --model M --threads T
"""

from __future__ import annotations

import argparse
import contextlib
import re
import signal
import subprocess
import time
from typing import Any

import httpx
import psutil

from benchmarks.gpu.kit_env import KitPaths
from benchmarks.gpu.step_common import (
    ServeKnobs,
    _limit_address_space,
    fit_json,
    fit_summary,
    nvml_device,
    run_step,
)
from benchmarks.peer_servers import free_port

MAX_CTX = 1_048_576
CRASH = re.compile(r"(CUDA error|out of memory|Segmentation fault|core dumped|Aborted|GGML_ASSERT)")


def capacity_bytes(gpu: bool) -> int:
    if gpu:
        import pynvml

        handle = nvml_device()
        return int(pynvml.nvmlDeviceGetMemoryInfo(handle).total)
    return int(psutil.virtual_memory().total)


def pick_context(paths: KitPaths, model: str, threads: int, gpu: bool) -> ServeKnobs | None:
    """The knobs of the over-big context, or None when even 1M f32 cells would fit."""
    want = 1.1 * capacity_bytes(gpu)
    for cache in ("f16", "f32"):
        sk = ServeKnobs(paths.models / model, threads, 1, 4096, 512, 512, -1, cache_type=cache)
        per_cell = int(fit_json(paths, sk)["kv_bytes"]) / sk.ctx
        ctx = min(MAX_CTX, -(-int(want / per_cell) // 256) * 256)
        if per_cell * ctx >= want:
            sk.ctx = ctx
            return sk
    return None


def try_serve(paths: KitPaths, sk: ServeKnobs, timeout_s: float) -> dict[str, Any]:
    """Start serve with the over-big context; wait for it to exit or become healthy."""
    port = free_port()
    argv = paths.quantdesk(
        "serve",
        "--model",
        str(sk.model),
        "--port",
        str(port),
        "-c",
        str(sk.ctx),
        "-np",
        "1",
        "-t",
        str(sk.threads),
        *sk.engine_flags(),
    )
    log = paths.logs / "oversize-serve.log"
    limit = _limit_address_space if paths.dry_run else None
    t = time.perf_counter()
    outcome: dict[str, Any] = {"argv": argv[3:]}
    with log.open("wb") as fh:
        proc = subprocess.Popen(argv, stdout=fh, stderr=subprocess.STDOUT, preexec_fn=limit)
        deadline = time.monotonic() + timeout_s
        healthy = False
        while proc.poll() is None and time.monotonic() < deadline:
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(f"http://127.0.0.1:{port}/health", timeout=2).status_code == 200:
                    healthy = True
                    break
            time.sleep(0.5)
        outcome["seconds"] = round(time.perf_counter() - t, 1)
        if healthy:  # a fallback: does it answer?
            with contextlib.suppress(httpx.HTTPError, ValueError):
                stats = httpx.get(f"http://127.0.0.1:{port}/v1/stats", timeout=5).json()
                outcome["served_n_ctx"] = stats.get("model", {}).get("n_ctx")
                outcome["served_n_gpu_layers"] = stats.get("model", {}).get("n_gpu_layers")
            proc.terminate()
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(timeout=30)
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    rc = proc.returncode
    text = log.read_text(errors="replace")
    tail = [line for line in text.splitlines() if line.strip()][-12:]
    error_lines = [line for line in text.splitlines() if "error" in line.lower()][-3:]
    outcome.update(
        {
            "healthy": healthy,
            "exit_code": rc,
            "killed_by_signal": signal.Signals(-rc).name if rc is not None and rc < 0 else None,
            "crash_marks": sorted(set(CRASH.findall(text))),
            "error_lines": error_lines,
            "log_tail": tail,
        }
    )
    refused = not healthy and rc is not None and rc > 0 and bool(error_lines)
    crashed = (rc is not None and rc < 0 and not healthy) or rc in (134, 139)
    outcome["verdict"] = (
        "fallback" if healthy else "clear_refusal" if refused and not crashed else "crash"
    )
    return outcome


def main() -> dict[str, Any]:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--timeout", type=float, default=120)
    args = p.parse_args()
    paths = KitPaths.from_env()
    paths.logs.mkdir(parents=True, exist_ok=True)
    gpu = not paths.dry_run
    sk = pick_context(paths, args.model, args.threads, gpu)
    if sk is None:
        return {"ok": False, "error": "even -c 1M with an f32 cache fits: model too small"}
    fit = fit_summary(fit_json(paths, sk))
    serve = try_serve(paths, sk, args.timeout)
    verdict_ok = fit["verdict"] != "fits"
    return {
        "ok": verdict_ok and serve["verdict"] in ("clear_refusal", "fallback"),
        "memory": "VRAM" if gpu else "RAM (dry run, address space limited)",
        "capacity_bytes": capacity_bytes(gpu),
        "ctx": sk.ctx,
        "cache_type": sk.cache_type,
        "fit": fit,
        "serve": serve,
    }


if __name__ == "__main__":
    raise SystemExit(run_step(main))
