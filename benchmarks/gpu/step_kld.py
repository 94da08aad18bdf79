"""Step: ``quantdesk compare`` of Q4_K_M against Q8_0 on the GPU (``--n-gpu-layers 99``) and on
the CPU (``--n-gpu-layers 0``), same text and chunks: the mean KLD must agree within noise
(three standard errors of the difference, or 5% of the value, whichever is larger).

    python -m benchmarks.gpu.step_kld --chunks 4 --ctx 512 --threads T
"""

from __future__ import annotations

import argparse
import json
import math
import subprocess
import time
from typing import Any

from benchmarks.gpu.kit_env import KitPaths
from benchmarks.gpu.step_common import run_step

KEYS = ("kld_mean", "kld_mean_unc", "kld_p99", "same_top_pct", "ppl_ratio", "eval_s")


def compare(paths: KitPaths, ngl: int, args: argparse.Namespace) -> dict[str, Any]:
    out = paths.work / f"compare-ngl{ngl}.json"
    cmd = paths.quantdesk(
        "compare",
        str(paths.model("Q4_K_M")),
        "--reference",
        str(paths.model("Q8_0")),
        "--no-answers",
        "--no-speed",
        "--chunks",
        str(args.chunks),
        "--ctx",
        str(args.ctx),
        "--batch",
        str(args.ctx),
        "--threads",
        str(args.threads),
        "--n-gpu-layers",
        str(ngl),
        "--json",
        str(out),
    )
    t = time.perf_counter()
    log = paths.logs / f"compare-ngl{ngl}.log"
    with log.open("wb") as fh:
        rc = subprocess.run(
            cmd, stdout=fh, stderr=subprocess.STDOUT, timeout=args.timeout
        ).returncode
    if rc != 0:
        raise RuntimeError(f"compare --n-gpu-layers {ngl} exited {rc}; see {log.name}")
    data = json.loads(out.read_text())
    cand = data["candidates"][0]
    return {"seconds": round(time.perf_counter() - t, 1)} | {k: cand.get(k) for k in KEYS}


def main() -> dict[str, Any]:
    p = argparse.ArgumentParser()
    p.add_argument("--chunks", type=int, required=True)
    p.add_argument("--ctx", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--timeout", type=float, default=240)
    args = p.parse_args()
    paths = KitPaths.from_env()
    paths.logs.mkdir(parents=True, exist_ok=True)
    gpu = compare(paths, 99, args)
    cpu = compare(paths, 0, args)
    a, b = gpu["kld_mean"], cpu["kld_mean"]
    if a is None or b is None:
        return {"ok": False, "gpu": gpu, "cpu": cpu, "error": "no KLD measured"}
    noise = 3 * math.hypot(gpu["kld_mean_unc"] or 0.0, cpu["kld_mean_unc"] or 0.0)
    tolerance = max(noise, 0.05 * max(abs(a), abs(b)))
    return {
        "ok": abs(a - b) <= tolerance,
        "gpu": gpu,
        "cpu": cpu,
        "kld_difference": a - b,
        "tolerance": tolerance,
        "settings": {"chunks": args.chunks, "ctx": args.ctx},
    }


if __name__ == "__main__":
    raise SystemExit(run_step(main))
