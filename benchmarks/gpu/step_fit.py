"""Step: ``quantdesk models fit`` against what NVML measures after the load, for ``-ngl`` all,
half and 0; each server also answers a short wave of requests (partial offload works).

Measured: device VRAM used before the server starts and after it is ready (the delta holds
weights, KV, compute buffers and the CUDA context, which the fit's 512 MiB reserve is for),
the VRAM NVML charges to the server's processes, and the peak during the requests. Dry run:
no NVML; the server's RSS stands beside the estimate's RAM figure instead.

    python -m benchmarks.gpu.step_fit --model M --ctx C --parallel N --threads T
"""

from __future__ import annotations

import threading
import time
from typing import Any

import psutil

from benchmarks.gpu.kit_env import KitPaths
from benchmarks.gpu.step_common import (
    ServeKnobs,
    fit_json,
    fit_summary,
    nvml_device,
    nvml_process_used,
    nvml_used,
    ours_spec,
    run_step,
    server_step_args,
    serving,
    small_load,
    tree_pids,
)
from benchmarks.peer_servers import ours_stats, tree_rss

MiB = 1 << 20


def _judge(fit: dict[str, Any], measured: int | None) -> dict[str, Any]:
    """Estimate against measurement: ratio and the dangerous direction (an estimate below
    what was used, beyond the 512 MiB the fit keeps free for the CUDA context)."""
    if measured is None:
        return {"vram_ratio_measured_over_estimate": None, "estimate_too_low": None}
    estimate = int(fit.get("gpu_bytes") or 0)
    ratio = round(measured / estimate, 3) if estimate else None
    return {
        "vram_ratio_measured_over_estimate": ratio,
        "vram_gap_mib": round((measured - estimate) / MiB, 1),
        "estimate_too_low": measured > estimate + 512 * MiB,
    }


def one_setting(paths: KitPaths, sk: ServeKnobs, label: str, handle: Any) -> dict[str, Any]:
    fit = fit_json(paths, sk)
    before = nvml_used(handle)
    out: dict[str, Any] = {"ngl": sk.ngl, "fit": fit_summary(fit), "vram_before": before}
    log = paths.logs / f"fit-{label}.log"
    t = time.perf_counter()
    with serving(ours_spec(paths, sk, f"ours-ngl-{label}"), sk, log, 180) as (url, proc):
        out["load_s"] = round(time.perf_counter() - t, 1)
        pids = tree_pids(proc.pid)
        loaded = nvml_used(handle)
        out["vram_after_load"] = loaded
        out["vram_delta_load"] = None if loaded is None or before is None else loaded - before
        out["vram_process"] = nvml_process_used(handle, pids)
        out["rss_after_load"] = tree_rss(psutil.Process(proc.pid))
        stats = ours_stats(url)
        out["stats_kv_bytes_total"] = stats.get("kv_bytes_total")
        peak = [loaded or 0]
        stop = threading.Event()

        def sample() -> None:
            while not stop.wait(0.2):
                used = nvml_used(handle)
                if used is not None:
                    peak[0] = max(peak[0], used)

        sampler = threading.Thread(target=sample, daemon=True)
        sampler.start()
        try:
            out["load"] = small_load(url, 2 if sk.ngl != 0 else 1, 16, 32)
        finally:
            stop.set()
            sampler.join()
        out["vram_peak_delta"] = None if before is None or handle is None else peak[0] - before
        from benchmarks.gpu.step_common import get_json

        model = get_json(url + "/v1/stats").get("model", {})
        out["served_n_gpu_layers"] = model.get("n_gpu_layers")
        out["gpu_offload_supported"] = model.get("gpu_offload_supported")
    out.update(_judge(fit, out["vram_peak_delta"]))
    out["ok"] = not out["load"]["errors"]
    return out


def main() -> dict[str, Any]:
    args, paths = server_step_args(n_layer=True)
    handle = nvml_device()
    settings = {"all": -1, "half": args.n_layer // 2, "zero": 0}
    results: dict[str, Any] = {}
    for label, ngl in settings.items():
        sk = ServeKnobs(
            model=paths.models / args.model,
            threads=args.threads,
            parallel=args.parallel,
            ctx=args.ctx,
            batch=512,
            ubatch=512,
            ngl=ngl,
        )
        try:
            results[label] = one_setting(paths, sk, label, handle)
        except Exception as exc:
            results[label] = {"ok": False, "ngl": ngl, "error": f"{type(exc).__name__}: {exc}"}
    return {
        "ok": all(r.get("ok") for r in results.values()),
        "nvml": handle is not None,
        "settings": results,
    }


if __name__ == "__main__":
    raise SystemExit(run_step(main))
