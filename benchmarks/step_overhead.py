#!/usr/bin/env python3
"""Python overhead per scheduler step, old code against new, on the real model in-process.

Each pass starts one child process per side (``PYTHONPATH`` pointing at that side's tree).
The child wraps ``llama_cpp.llama_decode`` (the module attribute, which the scheduler looks
up at every call) to time each decode, runs the engine in-process with ``-c 8192 -np 16
-t 2``, and sends waves of 16 requests together (fixed ``max_tokens`` with ``ignore_eos``,
greedy). Within a wave, the time between the end of one decode and the start of the next is
the step loop's own work: sampling, events, admission, planning and filling the batch. With
``--kv-unified`` every step is one decode, so that gap is the Python overhead per step
(with a KV stream per slot, the default, a step may be two). The scheduler thread's CPU time in
the same gaps (``time.thread_time``) is reported beside it: it leaves out the waits that
other processes on a shared machine add. The sides take turns, the order alternating per
pass, so that a slow spell of the machine lands on both.

  .venv/bin/python benchmarks/step_overhead.py --before /tmp/before [--passes 5] [--kv-unified]

Writes ``step-overhead.json`` (``step-overhead-per-slot.json``) into --out and prints a
table. The child imports only
``backend.engine.engine``, ``backend.engine.request_types``, ``backend.settings.engine_settings``
and ``backend.bench.prompts``, which both layouts have.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

from backend.bench.stats import percentile

ROOT = Path(__file__).resolve().parent.parent
FIGURES = [
    (figure, key)
    for figure in ("overhead_ms", "overhead_cpu_ms")
    for key in ("median", "p90", "mean")
]


def measure(args: argparse.Namespace) -> dict[str, Any]:
    """One side, in this process: per-step overhead figures over ``args.waves`` waves."""
    import llama_cpp

    from backend.bench.prompts import request_prompt
    from backend.engine.engine import Engine
    from backend.engine.request_types import ErrorEvent, FinishEvent, SamplingParams
    from backend.settings.engine_settings import EngineSettings

    spans: list[tuple[float, float]] = []
    cpu_spans: list[tuple[float, float]] = []
    real_decode = llama_cpp.llama_decode

    def timed_decode(ctx: Any, batch: Any) -> int:
        c0, t0 = time.thread_time(), time.perf_counter()
        rc = real_decode(ctx, batch)
        spans.append((t0, time.perf_counter()))
        cpu_spans.append((c0, time.thread_time()))
        return int(rc)

    llama_cpp.llama_decode = timed_decode
    settings = EngineSettings(
        ctx_size=args.ctx,
        parallel=args.concurrency,
        threads=args.threads,
        kv_unified=args.kv_unified,
    )
    engine = Engine(settings)
    engine.start()  # includes the warm-up request
    gaps: list[float] = []
    cpu_gaps: list[float] = []
    decodes: list[float] = []
    steps = 0
    errors: list[str] = []
    finished = threading.Semaphore(0)

    def sink(event: Any) -> None:
        if isinstance(event, ErrorEvent):
            errors.append(event.message)
            finished.release()
        elif isinstance(event, FinishEvent):
            finished.release()

    for wave in range(args.waves):
        prompts = [
            engine.tokenize(request_prompt(args.prompt_tokens, f"w{wave}r{k}"))
            for k in range(args.concurrency)
        ]
        first = len(spans)
        steps_before = engine.scheduler.stats.steps
        for tokens in prompts:
            engine.submit(
                tokens,
                max_tokens=args.max_tokens,
                sampling=SamplingParams(temperature=0.0, ignore_eos=True),
                sink=sink,
            )
        for _ in prompts:
            if not finished.acquire(timeout=600):
                raise RuntimeError("a request did not finish in 10 minutes")
        wave_spans = spans[first:]
        cpu_gaps += [b[0] - a[1] for a, b in itertools.pairwise(cpu_spans[first:])]
        steps += engine.scheduler.stats.steps - steps_before
        gaps += [b[0] - a[1] for a, b in itertools.pairwise(wave_spans)]
        decodes += [end - start for start, end in wave_spans]
    engine.close()
    if errors:
        raise RuntimeError(f"requests failed: {errors[:3]}")
    gaps_ms = [1000.0 * g for g in gaps]
    cpu_ms = [1000.0 * g for g in cpu_gaps]
    return {
        "code": str(Path(sys.modules["backend"].__file__ or "").parent.parent),
        "steps": steps,
        "decodes": len(decodes),
        "overhead_ms": {
            "median": statistics.median(gaps_ms),
            "p90": percentile(gaps_ms, 90),
            "mean": statistics.fmean(gaps_ms),
        },
        # the scheduler thread's own CPU time between decodes: what contention adds is left out
        "overhead_cpu_ms": {
            "median": statistics.median(cpu_ms),
            "p90": percentile(cpu_ms, 90),
            "mean": statistics.fmean(cpu_ms),
        },
        "decode_ms": {
            "median": 1000.0 * statistics.median(decodes),
            "mean": 1000.0 * statistics.fmean(decodes),
        },
    }


def _child(root: Path, args: argparse.Namespace) -> dict[str, Any]:
    cmd = [
        sys.executable,
        str(Path(__file__).resolve()),
        "--child",
        *("--waves", str(args.waves), "--concurrency", str(args.concurrency)),
        *("--max-tokens", str(args.max_tokens), "--prompt-tokens", str(args.prompt_tokens)),
        *("--ctx", str(args.ctx), "--threads", str(args.threads)),
        *(["--kv-unified"] if args.kv_unified else []),
    ]
    env = {**os.environ, "PYTHONPATH": str(root)}
    out = subprocess.run(cmd, env=env, cwd=root, capture_output=True, text=True, check=False)
    if out.returncode != 0:
        raise RuntimeError(f"child for {root} failed:\n{out.stderr[-4000:]}")
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    if Path(result["code"]).resolve() != root.resolve():
        raise RuntimeError(f"child imported {result['code']}, not {root}")
    return result


def _bootstrap_ratio(old: list[float], new: list[float], n: int = 10_000) -> list[float]:
    """90% bootstrap interval of median(new) / median(old) over passes."""
    rng = random.Random(0)
    ratios = sorted(
        statistics.median(rng.choices(new, k=len(new)))
        / statistics.median(rng.choices(old, k=len(old)))
        for _ in range(n)
    )
    return [ratios[int(0.05 * n)], ratios[int(0.95 * n)]]


def _git_head(root: Path) -> str:
    out = subprocess.run(
        ["git", "-C", str(root), "rev-parse", "--short", "HEAD"],
        capture_output=True,
        text=True,
        check=False,
    )
    return out.stdout.strip()


def compare(args: argparse.Namespace) -> dict[str, Any]:
    sides = {"old": Path(args.before), "new": Path(args.after)}
    runs: dict[str, list[dict[str, Any]]] = {"old": [], "new": []}
    for i in range(args.passes):
        order = ["old", "new"] if i % 2 == 0 else ["new", "old"]
        for side in order:
            load = os.getloadavg()[0]
            result = _child(sides[side], args)
            result["pass"] = i
            result["loadavg_1m"] = load
            runs[side].append(result)
            o, c = result["overhead_ms"], result["overhead_cpu_ms"]
            print(
                f"pass {i} {side}: overhead/step median {o['median']:.3f} ms, "
                f"p90 {o['p90']:.3f}, mean {o['mean']:.3f}; CPU median {c['median']:.3f}; "
                f"decode median {result['decode_ms']['median']:.2f} ms; load {load:.1f}",
                flush=True,
            )
    summary: dict[str, Any] = {}
    for figure, key in FIGURES:
        per_side = {s: [r[figure][key] for r in runs[s]] for s in runs}
        row: dict[str, Any] = {
            s: {
                "median_of_passes": statistics.median(v),
                "min": min(v),
                "max": max(v),
            }
            for s, v in per_side.items()
        }
        row["ratio_new_over_old"] = statistics.median(per_side["new"]) / statistics.median(
            per_side["old"]
        )
        row["ratio_90pct_bootstrap"] = _bootstrap_ratio(per_side["old"], per_side["new"])
        summary[f"{figure}.{key}"] = row
    return {
        "what": "Python overhead per scheduler step in ms: wall time between llama_decode "
        "calls (overhead_ms) and the scheduler thread's CPU time there (overhead_cpu_ms); "
        "per pass the median, p90 and mean over steps, then the median of passes",
        "settings": {
            "ctx": args.ctx,
            "parallel": args.concurrency,
            "threads": args.threads,
            "kv_unified": args.kv_unified,
            "concurrency": args.concurrency,
            "max_tokens": args.max_tokens,
            "prompt_tokens": args.prompt_tokens,
            "waves_per_pass": args.waves,
            "passes": args.passes,
        },
        "old": {"tree": str(sides["old"]), "commit": _git_head(sides["old"])},
        "new": {"tree": str(sides["new"]), "commit": _git_head(sides["new"])},
        "summary": summary,
        "runs": runs,
        "time": time.strftime("%Y-%m-%dT%H:%M:%S"),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--before", default="/tmp/before", help="tree of the old code")
    parser.add_argument("--after", default=str(ROOT), help="tree of the new code")
    parser.add_argument("--passes", type=int, default=5)
    parser.add_argument("--waves", type=int, default=1, help="waves of requests per child")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--max-tokens", type=int, default=128)
    parser.add_argument("--prompt-tokens", type=int, default=64)
    parser.add_argument("--ctx", type=int, default=8192)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--kv-unified", action="store_true")
    parser.add_argument("--out", default=str(ROOT / "benchmarks/results/step-overhead"))
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(measure(args)))
        return
    report = compare(args)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    name = "step-overhead.json" if args.kv_unified else "step-overhead-per-slot.json"
    (out / name).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")
    print(f"\n{'ms per step':<22} {'old':>20} {'new':>20} {'new/old [90%]':>22}")
    for key, row in report["summary"].items():
        old, new = row["old"], row["new"]
        lo, hi = row["ratio_90pct_bootstrap"]
        print(
            f"{key:<22} {old['median_of_passes']:>8.3f} [{old['min']:.3f}-{old['max']:.3f}]"
            f" {new['median_of_passes']:>8.3f} [{new['min']:.3f}-{new['max']:.3f}]"
            f" {row['ratio_new_over_old']:>8.3f} [{lo:.3f}, {hi:.3f}]"
        )
    print(f"written to {out / name}")


if __name__ == "__main__":
    main()
