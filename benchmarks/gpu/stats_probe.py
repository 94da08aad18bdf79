"""Live values under load: our ``/v1/stats`` and the dashboard's VRAM source (pynvml through
``backend.system.gpu_info``), sampled side by side while a benchmark runs, then judged."""

from __future__ import annotations

import contextlib
import itertools
import shutil
import subprocess
import threading
import time
from collections.abc import Iterator
from typing import Any

import httpx

from backend.system.gpu_info import gpu_snapshot


def _nvidia_smi_used() -> int | None:
    """An independent reading (nvidia-smi, MiB) of GPU 0's used memory, in bytes."""
    if shutil.which("nvidia-smi") is None:
        return None
    with contextlib.suppress(Exception):
        out = subprocess.run(
            ["nvidia-smi", "--query-gpu=memory.used", "--format=csv,noheader,nounits", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=10,
        ).stdout.strip()
        return int(float(out.splitlines()[0])) << 20
    return None


def _sample(url: str) -> dict[str, Any]:
    t = time.monotonic()
    try:
        stats = httpx.get(url + "/v1/stats", timeout=2).json()
    except (httpx.HTTPError, ValueError) as exc:
        return {"t": t, "error": str(exc)}
    gpus, note = gpu_snapshot()
    system = stats.get("system", {})
    stat_gpus = system.get("gpus") or []
    return {
        "t": t,
        "stats_vram_used": stat_gpus[0]["vram_used_bytes"] if stat_gpus else None,
        "stats_vram_total": stat_gpus[0]["vram_total_bytes"] if stat_gpus else None,
        "stats_gpu_note": system.get("gpu_note"),
        "pynvml_vram_used": gpus[0].vram_used_bytes if gpus else None,
        "pynvml_note": note,
        "running": stats.get("requests", {}).get("running"),
        "queued": stats.get("requests", {}).get("queued"),
        "gen_tokens_per_s": stats.get("tokens", {}).get("gen_tokens_per_s"),
        "generated_total": stats.get("tokens", {}).get("generated_total"),
        "kv_cells_used": stats.get("kv", {}).get("cells_used"),
        "kv_cells_total": stats.get("kv", {}).get("cells_total"),
        "rss_bytes": system.get("rss_bytes"),
        "cpu_pct": system.get("cpu_pct"),
    }


@contextlib.contextmanager
def sampling(url: str, every_s: float = 0.5) -> Iterator[list[dict[str, Any]]]:
    samples: list[dict[str, Any]] = []
    stop = threading.Event()
    smi: list[int | None] = []

    def loop() -> None:
        while not stop.wait(every_s):
            samples.append(_sample(url))
            if len(samples) == 10:  # once, well into the load
                smi.append(_nvidia_smi_used())

    thread = threading.Thread(target=loop, daemon=True)
    thread.start()
    try:
        yield samples
    finally:
        stop.set()
        thread.join()
        if smi:
            samples.append({"nvidia_smi_vram_used": smi[0]})


def judge(samples: list[dict[str, Any]], parallel: int, expect_gpu: bool) -> dict[str, Any]:
    """Plausibility of the live values (each check: True, False or None for not applicable)."""
    live = [s for s in samples if "t" in s and "error" not in s]
    smi = next((s["nvidia_smi_vram_used"] for s in samples if "nvidia_smi_vram_used" in s), None)
    checks: dict[str, bool | None] = {}
    checks["samples_answered"] = bool(live) and len(live) >= len(samples) * 0.9 - 1
    checks["running_within_slots"] = bool(live) and all(
        0 <= (s["running"] or 0) <= parallel for s in live
    )
    checks["saw_requests_running"] = any((s["running"] or 0) > 0 for s in live)
    checks["gen_tokens_per_s_positive"] = any((s["gen_tokens_per_s"] or 0) > 0 for s in live)
    checks["generated_total_monotonic"] = all(
        (b["generated_total"] or 0) >= (a["generated_total"] or 0)
        for a, b in itertools.pairwise(live)
    )
    checks["kv_cells_within_total"] = bool(live) and all(
        0 <= (s["kv_cells_used"] or 0) <= (s["kv_cells_total"] or 0) for s in live
    )
    checks["kv_cells_used_under_load"] = any((s["kv_cells_used"] or 0) > 0 for s in live)
    pairs = [s for s in live if s["stats_vram_used"] is not None and s["pynvml_vram_used"]]
    if expect_gpu:
        total = next((s["stats_vram_total"] for s in pairs), None)
        checks["stats_lists_gpu"] = bool(pairs)
        # /v1/stats and the dashboard read NVML a fraction of a second apart: within 2%
        checks["stats_vram_matches_pynvml"] = bool(pairs) and all(
            abs(s["stats_vram_used"] - s["pynvml_vram_used"]) <= 0.02 * (total or 1) for s in pairs
        )
        checks["nvidia_smi_agrees"] = (
            None
            if smi is None or not pairs
            else abs(smi - pairs[len(pairs) // 2]["pynvml_vram_used"]) <= 0.03 * (total or 1)
        )
    else:  # no GPU: both must say so instead of inventing numbers
        checks["stats_lists_gpu"] = None
        checks["no_gpu_note_in_stats"] = bool(live) and all(
            s["stats_vram_used"] is None and s["stats_gpu_note"] for s in live
        )
    vram = [s["pynvml_vram_used"] for s in live if s["pynvml_vram_used"]]
    return {
        "ok": all(v is not False for v in checks.values()),
        "checks": checks,
        "n_samples": len(live),
        "max_running": max((s["running"] or 0 for s in live), default=0),
        "max_gen_tokens_per_s": max((s["gen_tokens_per_s"] or 0 for s in live), default=0),
        "max_kv_cells_used": max((s["kv_cells_used"] or 0 for s in live), default=0),
        "vram_used_min_max": [min(vram), max(vram)] if vram else None,
        "nvidia_smi_vram_used": smi,
        "gpu_note": next((s["stats_gpu_note"] for s in live if s["stats_gpu_note"]), None),
    }
