"""Step: ``quantdesk serve -ngl all`` against ``llama-server -ngl 99`` on the same file, with
the same ``-c``/``-np``/``-b``/``-ub``/flash attention/KV types, interleaved pass by pass as
``peer_compare.py --interleave`` does; tok/s and TTFT p50/p99 per concurrency level, paired
ratios with bootstrap intervals. While it runs, ``stats_probe`` samples our ``/v1/stats``
and pynvml side by side.

    python -m benchmarks.gpu.step_peer --model M --levels 1,8,32,64 --parallel 64 ...
"""

from __future__ import annotations

import argparse
import contextlib
import json
from typing import Any

from backend.bench import BenchConfig, BenchResult
from benchmarks.cpu_path import ours_cpu_path, paths_record
from benchmarks.gpu import stats_probe
from benchmarks.gpu.kit_env import KitPaths
from benchmarks.gpu.step_common import ServeKnobs, llama_server_spec, ours_spec, run_step
from benchmarks.peer_ratios import paired_ratios, ratios, write_ratio_plot
from benchmarks.peer_runs import bench_interleaved, merge_rounds


def _level_rows(result: BenchResult) -> list[dict[str, Any]]:
    rows = []
    for scenario in result.scenarios:
        for level in scenario.levels:
            rows.append(
                {
                    "scenario": scenario.name,
                    "concurrency": level.concurrency,
                    **{
                        k: level.median_of(k)
                        for k in ("tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50")
                    },
                    "errors": sum(r.errors for r in level.repetitions),
                }
            )
    return rows


def main() -> dict[str, Any]:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--levels", required=True)
    p.add_argument("--parallel", type=int, required=True)
    p.add_argument("--ctx", type=int, required=True)
    p.add_argument("--threads", type=int, required=True)
    p.add_argument("--prompt-tokens", type=int, required=True)
    p.add_argument("--max-tokens", type=int, required=True)
    p.add_argument("--passes", type=int, default=2)
    p.add_argument("--gpu", action="store_true")
    args = p.parse_args()
    paths = KitPaths.from_env()
    paths.logs.mkdir(parents=True, exist_ok=True)
    sk = ServeKnobs(
        model=paths.models / args.model,
        threads=args.threads,
        parallel=args.parallel,
        ctx=args.ctx,
        batch=2048,
        ubatch=512,
        ngl=-1,
    )
    specs = [ours_spec(paths, sk), llama_server_spec(paths, sk)]
    base = BenchConfig(
        url="http://127.0.0.1:1",
        concurrency=tuple(int(c) for c in args.levels.split(",")),
        repetitions=1,
        requests_per_client=2,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        shared_prefix_tokens=0,
        request_timeout_s=120,
    )
    base.validate()
    # bench_interleaved starts both servers itself; ours' URL is known at its first request,
    # so the probe starts there (wrapping the benchmark function peer_runs calls).
    import benchmarks.peer_runs as peer_runs

    original = peer_runs.run_benchmark
    with contextlib.ExitStack() as stack:
        probe: list[list[dict[str, Any]]] = []

        def run_with_probe(config: BenchConfig, **kw: Any) -> BenchResult:
            if config.label == "ours" and not probe:
                probe.append(stack.enter_context(stats_probe.sampling(config.url)))
            return original(config, **kw)

        peer_runs.run_benchmark = run_with_probe  # type: ignore[assignment]
        try:
            rounds = bench_interleaved(specs, sk.knobs(), base, paths.logs, 300, args.passes)
        finally:
            peer_runs.run_benchmark = original
    samples = probe[0] if probe else []
    results = [merge_rounds(rs) for rs in rounds.values() if rs]
    paired = paired_ratios(results)
    table = ratios(results)
    plot = paths.out / "peer-ratios.png"
    if table:
        write_ratio_plot(table, plot, paired)
    judged = stats_probe.judge(samples, args.parallel, args.gpu)
    (paths.work / "stats-samples.json").write_text(json.dumps(samples), encoding="utf-8")
    errors = sum(row["errors"] for r in results for row in _level_rows(r))
    return {
        "ok": bool(paired) and errors == 0,
        "cpu_path": paths_record(ours_cpu_path(paths.quantdesk())),
        "knobs": {
            "parallel": sk.parallel,
            "ctx": sk.ctx,
            "batch": sk.batch,
            "ubatch": sk.ubatch,
            "threads": sk.threads,
            "flash_attn": sk.flash_attn,
            "cache_type": sk.cache_type,
            "passes": args.passes,
            "prompt_tokens": base.prompt_tokens,
            "max_tokens": base.max_tokens,
            "requests_per_client": base.requests_per_client,
        },
        "argv": {s.name: s.command(sk.knobs(), 0)[1:] for s in specs},
        "medians": {r.label: _level_rows(r) for r in results},
        "ratios_vs_llama_server": table,
        "paired_tokens_per_s_vs_llama_server": paired,
        "stats_under_load": judged,
        "plot": plot.name if table else None,
        "errors": errors,
    }


if __name__ == "__main__":
    raise SystemExit(run_step(main))
