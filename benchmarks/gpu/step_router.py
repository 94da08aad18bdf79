"""Step: the router gives a model's memory back when it unloads (issue 18 measured RSS only).

``quantdesk serve --models-dir`` (library mode, ``-ngl`` all) loads the Q4_K_M model with
``POST /models/load``, then unloads it with ``POST /models/unload``. NVML's device VRAM is
read before the load, after it and after the unload (polled until it settles), and the
router's process tree RSS beside it. Passing: what the load took comes back, within 64 MiB
on the GPU (the router itself holds no CUDA context) and 96 MiB of RSS.

    python -m benchmarks.gpu.step_router --model synth-Q4_K_M.gguf --ctx C --parallel N ...
"""

from __future__ import annotations

import time
from typing import Any

import httpx
import psutil

from benchmarks.gpu.step_common import (
    ServeKnobs,
    nvml_device,
    nvml_used,
    run_step,
    server_step_args,
)
from benchmarks.peer_servers import Knobs, ServerSpec, shared_flags, started, tree_rss

MiB = 1 << 20
VRAM_SLACK = 64 * MiB
RSS_SLACK = 96 * MiB


def _settled(read: Any, target: int, slack: int, timeout_s: float = 15.0) -> int | None:
    """Poll ``read()`` until it is within ``slack`` of ``target`` or the time is up."""
    deadline = time.monotonic() + timeout_s
    value = read()
    while value is not None and value > target + slack and time.monotonic() < deadline:
        time.sleep(0.25)
        value = read()
    return value


def main() -> dict[str, Any]:
    args, paths = server_step_args(n_layer=False)
    sk = ServeKnobs(paths.models / args.model, args.threads, args.parallel, args.ctx, 512, 512, -1)

    def argv(k: Knobs, port: int) -> list[str]:
        head = paths.quantdesk("serve", "--models-dir", str(paths.models), "--spec-type", "none")
        return head + shared_flags(k, port) + sk.engine_flags()

    spec = ServerSpec("router", argv, cwd=paths.root)
    handle = nvml_device()
    model_id = args.model.removesuffix(".gguf")
    out: dict[str, Any] = {"model": model_id, "nvml": handle is not None}
    with started(spec, sk.knobs(), paths.logs / "router.log", 180) as (url, proc):
        router = psutil.Process(proc.pid)
        time.sleep(1.0)  # the fork server starts beside the router
        out["vram_before"] = before = nvml_used(handle)
        out["rss_before"] = rss_before = tree_rss(router)
        t = time.perf_counter()
        r = httpx.post(f"{url}/models/load", json={"model": model_id}, timeout=300)
        out["load_status"] = r.status_code
        if r.status_code != 200:
            out.update(ok=False, error=r.text[:400])
            return out
        out["load_s"] = round(time.perf_counter() - t, 1)
        cards = {c["id"]: c for c in httpx.get(f"{url}/v1/models", timeout=30).json()["data"]}
        out["estimate_bytes"] = cards.get(model_id, {}).get("memory_bytes")
        out["vram_loaded"] = loaded = nvml_used(handle)
        out["rss_loaded"] = rss_loaded = tree_rss(router)
        r = httpx.post(f"{url}/models/unload", json={"model": model_id}, timeout=120)
        out["unload_status"] = r.status_code
        out["vram_after"] = after = (
            _settled(lambda: nvml_used(handle), before, VRAM_SLACK) if before is not None else None
        )
        out["rss_after"] = rss_after = _settled(lambda: tree_rss(router), rss_before, RSS_SLACK)
    if before is not None and loaded is not None and after is not None:
        out["vram_taken_mib"] = round((loaded - before) / MiB, 1)
        out["vram_left_mib"] = round((after - before) / MiB, 1)
    out["rss_taken_mib"] = round((rss_loaded - rss_before) / MiB, 1)
    out["rss_left_mib"] = round(((rss_after or 0) - rss_before) / MiB, 1)
    vram_ok = after is None or before is None or after <= before + VRAM_SLACK
    rss_ok = rss_after is not None and rss_after <= rss_before + RSS_SLACK
    out["ok"] = out["unload_status"] == 200 and vram_ok and rss_ok
    return out


if __name__ == "__main__":
    raise SystemExit(run_step(main))
