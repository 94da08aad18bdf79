#!/usr/bin/env python3
"""Run the same load against QuantDesk's server and its peers, one server at a time.

Peers (same model file, threads, parallel slots, context and batch sizes):
  ours              .venv/bin/quantdesk serve
  llama-server      llama.cpp's C++ server (benchmarks/build_llama_server.sh builds it)
  llama-cpp-python  python -m llama_cpp.server (one request at a time by design)

Each server starts on 127.0.0.1 at a free port, is benchmarked with ``backend.bench``
(warm-up, >= 3 repetitions, medians) with and without a shared system prompt, its RSS is
sampled (psutil, whole process tree), and it is stopped before the next one starts.
With ``--interleave N`` all servers stay loaded and take turns repetition by repetition
(N passes), which keeps ratios steady when the machine's speed drifts.
Writes ``peer-compare.json`` (all results + ratios vs llama-server), ``peer-compare.png``
(absolute figures), ``peer-ratios.png`` (ratios) and the server logs into --out, and prints
a table. The machine may be shared: figures are medians and only ratios from one run mean much.

  .venv/bin/python -m benchmarks.peer_compare --concurrency 1,4,8,16 -np 16 -t 2
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import os
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import psutil

from backend.bench import (
    BenchConfig,
    BenchProgress,
    BenchResult,
    LevelResult,
    ScenarioResult,
    format_table,
    run_benchmark,
    write_json_atomic,
    write_plot,
)
from backend.settings.default_model import resolve_model_path
from benchmarks.peer_ratios import (
    BASELINE,
    paired_ratios,
    paired_table,
    ratio_table,
    ratios,
    rss_table,
    write_ratio_plot,
)
from benchmarks.peer_servers import (
    DEFAULT_LLAMA_SERVER,
    ROOT,
    Knobs,
    ServerSpec,
    eog_logit_bias,
    llama_cpp_python_argv,
    llama_server_argv,
    ours_argv,
    ours_in,
    ours_stats,
    peak_rss,
    started,
    tree_rss,
)


def bench_one(
    spec: ServerSpec,
    knobs: Knobs,
    base: BenchConfig,
    out: Path,
    timeout_s: float,
    log_name: str,
) -> BenchResult:
    config = replace(base, label=spec.name, **spec.bench_overrides)
    load_before = os.getloadavg()[0]
    with started(spec, knobs, out / log_name, timeout_s) as (url, proc):
        ps = psutil.Process(proc.pid)
        rss_loaded = tree_rss(ps)

        def progress(p: BenchProgress) -> None:
            print(f"  [{spec.name}] {p.done}/{p.total} {p.message}", flush=True)

        with peak_rss({spec.name: ps}) as peak:
            result = run_benchmark(replace(config, url=url), progress=progress)
        result.server = {
            "argv": spec.argv(knobs, 0)[1:],
            "rss_bytes_loaded": rss_loaded,
            "rss_bytes_end": tree_rss(ps),
            "rss_bytes_peak": peak[spec.name],
            "load_avg_1min": [round(load_before, 2), round(os.getloadavg()[0], 2)],
            "note": spec.note,
        }
        if spec.name.startswith("ours"):
            result.server.update(ours_stats(url))
    return result


def merge_rounds(rounds: list[BenchResult]) -> BenchResult:
    """One result per server: the repetitions of every round pooled, medians over all."""
    first = rounds[0]
    merged = BenchResult(
        label=first.label,
        url=first.url,
        model=first.model,
        endpoint=first.endpoint,
        config=first.config,
        started_at=first.started_at,
        duration_s=sum(r.duration_s for r in rounds),
        notes=list(dict.fromkeys(n for r in rounds for n in r.notes)),
        server=dict(rounds[-1].server),
    )
    pooled: dict[str, ScenarioResult] = {}
    levels: dict[tuple[str, int], LevelResult] = {}
    for r in rounds:
        for scenario in r.scenarios:
            if scenario.name not in pooled:
                pooled[scenario.name] = ScenarioResult(scenario.name, scenario.shared_prefix_tokens)
                merged.scenarios.append(pooled[scenario.name])
            for level in scenario.levels:
                at = (scenario.name, level.concurrency)
                if at not in levels:
                    levels[at] = LevelResult(level.concurrency, [])
                    pooled[scenario.name].levels.append(levels[at])
                reps = levels[at].repetitions
                reps.extend(
                    replace(rep, repetition=len(reps) + i)
                    for i, rep in enumerate(level.repetitions)
                )
    for scenario in merged.scenarios:
        scenario.levels.sort(key=lambda lv: lv.concurrency)
    for key in ("rss_bytes_loaded", "rss_bytes_peak"):
        merged.server[key] = max(r.server[key] for r in rounds)
    merged.server["load_avg_1min"] = [r.server["load_avg_1min"] for r in rounds]
    merged.server["rounds"] = len(rounds)
    return merged


def bench_interleaved(
    specs: list[ServerSpec],
    knobs: Knobs,
    base: BenchConfig,
    out: Path,
    timeout_s: float,
    passes: int,
) -> dict[str, list[BenchResult]]:
    """All servers loaded at once (an idle one uses no CPU); every repetition of every
    level runs on each server back to back, the order alternating, so a slow spell of a
    shared machine falls on all servers alike. Every (pass, level) has its own prompts,
    the same for every server."""
    results: dict[str, list[BenchResult]] = {spec.name: [] for spec in specs}
    with contextlib.ExitStack() as stack:
        urls: dict[str, str] = {}
        procs: dict[str, psutil.Process] = {}
        for spec in specs:
            url, proc = stack.enter_context(
                started(spec, knobs, out / f"{spec.name}.log", timeout_s)
            )
            urls[spec.name], procs[spec.name] = url, psutil.Process(proc.pid)
        loaded = {name: tree_rss(ps) for name, ps in procs.items()}

        def one(spec: ServerSpec, **change: Any) -> BenchResult:
            config = replace(base, label=spec.name, url=urls[spec.name], **spec.bench_overrides)
            return run_benchmark(replace(config, **change))

        with peak_rss(procs) as peak:
            for spec in specs:  # untimed warm-up of each server
                one(
                    spec,
                    concurrency=(max(base.concurrency),),
                    repetitions=1,
                    include_plain=True,
                    shared_prefix_tokens=0,
                    seed=base.seed - 1,
                )
            levels = itertools.product(range(passes), base.scenarios(), base.concurrency)
            for p, (scenario, prefix), c in levels:
                for spec in specs[p % len(specs) :] + specs[: p % len(specs)]:
                    load = os.getloadavg()[0]
                    r = one(
                        spec,
                        concurrency=(c,),
                        repetitions=1,
                        warmup=False,
                        include_plain=prefix == 0,
                        shared_prefix_tokens=prefix,
                        seed=base.seed + 1000 * (p + 1) + c,
                    )
                    rep = r.scenarios[0].levels[0].repetitions[0]
                    print(
                        f"  pass {p + 1}/{passes} {scenario} c={c} {spec.name}: "
                        f"{rep.tokens_per_s:.1f} tok/s, TTFT p99 {rep.ttft_ms_p99:.0f} ms",
                        flush=True,
                    )
                    r.server = {
                        "argv": spec.argv(knobs, 0)[1:],
                        "note": spec.note,
                        "load_avg_1min": [round(load, 2)],
                    }
                    results[spec.name].append(r)
        for spec in specs:
            extra: dict[str, Any] = {
                "rss_bytes_loaded": loaded[spec.name],
                "rss_bytes_peak": peak[spec.name],
                "rss_bytes_end": tree_rss(procs[spec.name]),
                "interleaved": True,
            }
            if spec.name.startswith("ours"):
                extra.update(ours_stats(urls[spec.name]))
            for r in results[spec.name]:
                r.server.update(extra)
    return results


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--model", default="default", help="GGUF path or 'default' (SmolLM2)")
    p.add_argument("--servers", default="ours,llama-server,llama-cpp-python")
    p.add_argument("--llama-server", type=Path, default=DEFAULT_LLAMA_SERVER)
    p.add_argument(
        "--ours-before",
        type=Path,
        default=None,
        metavar="TREE",
        help="also run QuantDesk from this checkout as server 'ours-before' (add it to "
        "--servers), to measure a change before and after in one interleaved run",
    )
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument("-np", "--parallel", type=int, default=16)
    p.add_argument(
        "-c",
        "--ctx-size",
        type=int,
        default=0,
        help="total KV cells (default: parallel x (prefix + prompt + output + 128))",
    )
    p.add_argument("-b", "--batch-size", type=int, default=512)
    p.add_argument("-ub", "--ubatch-size", type=int, default=512)
    p.add_argument(
        "--kv-unified",
        action="store_true",
        help="one KV cache for all slots on both servers (default: a stream per "
        "slot, which is llama-server's layout with an explicit -np)",
    )
    p.add_argument("--concurrency", default="1,4,8,16")
    p.add_argument("--reps", type=int, default=3, help="timed repetitions per round")
    p.add_argument(
        "--rounds",
        type=int,
        default=1,
        help="servers take turns this many times; repetitions of all rounds are "
        "pooled (fairer on a machine whose load changes)",
    )
    p.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="PASSES",
        help="load all servers at once and alternate them repetition by "
        "repetition, PASSES times (replaces --reps/--rounds; steadier ratios on a "
        "busy machine)",
    )
    p.add_argument("--requests-per-client", type=int, default=2)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument(
        "--shared-prefix-tokens",
        type=int,
        default=1000,
        help="shared system prompt of the prefix scenario (0: skip that scenario)",
    )
    p.add_argument("--no-plain", action="store_true", help="skip the scenario without prefix")
    p.add_argument(
        "--warm-prefix",
        action="store_true",
        help="one shared prefix for the whole run instead of a fresh one per repetition",
    )
    p.add_argument("--startup-timeout", type=float, default=300)
    p.add_argument(
        "--out",
        type=Path,
        default=None,
        help="output folder (default bench-results/peer-<UTC time>)",
    )
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = resolve_model_path(args.model)
    ctx = args.ctx_size or args.parallel * (
        args.shared_prefix_tokens + args.prompt_tokens + args.max_tokens + 128
    )
    knobs = Knobs(
        model,
        args.threads,
        args.parallel,
        ctx,
        args.batch_size,
        args.ubatch_size,
        kv_unified=args.kv_unified,
    )
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out: Path = args.out or ROOT / "bench-results" / f"peer-{stamp}"
    out.mkdir(parents=True, exist_ok=True)

    specs = {
        "ours": ServerSpec("ours", ours_argv),
        "llama-server": ServerSpec(BASELINE, llama_server_argv(args.llama_server)),
        "llama-cpp-python": ServerSpec(
            "llama-cpp-python",
            llama_cpp_python_argv,
            health_path="/v1/models",
            note="serves one request at a time (interrupt_requests=False so streams finish); "
            "ignores ignore_eos, so end-of-generation tokens get logit_bias -100",
            bench_overrides={"extra_body": {"logit_bias": eog_logit_bias(model)}},
        ),
    }
    if args.ours_before:
        tree = args.ours_before.resolve()
        specs["ours-before"] = ServerSpec("ours-before", ours_in(tree), cwd=tree)
    base = BenchConfig(
        url="http://127.0.0.1:1",
        concurrency=tuple(int(c) for c in args.concurrency.split(",")),
        repetitions=args.reps,
        requests_per_client=args.requests_per_client,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        shared_prefix_tokens=args.shared_prefix_tokens,
        include_plain=not args.no_plain,
        fresh_prefix_per_repetition=not args.warm_prefix,
    )
    names = [n.strip() for n in args.servers.split(",") if n.strip()]
    unknown = [n for n in names if n not in specs]
    if unknown:
        print(f"unknown server(s) {unknown}; choose from {', '.join(specs)}", file=sys.stderr)
        return 2
    failures: dict[str, str] = {}
    if "llama-server" in names and not args.llama_server.is_file():
        failures["llama-server"] = (
            f"{args.llama_server} missing: run benchmarks/build_llama_server.sh"
        )
        print(f"skipping llama-server: {failures['llama-server']}", flush=True)
        names.remove("llama-server")
    rounds: dict[str, list[BenchResult]] = {name: [] for name in names}
    started_at = time.perf_counter()

    def save(
        rounds: dict[str, list[BenchResult]],
    ) -> tuple[list[BenchResult], dict[str, Any]]:
        """Write what is measured so far (called after every server, so a long run that is
        interrupted still leaves its results)."""
        results = [merge_rounds(rs) for rs in rounds.values() if rs]
        table = ratios(results)
        summary = {
            "created_at": stamp,
            "knobs": {
                "model": str(model),
                "threads": knobs.threads,
                "parallel": knobs.parallel,
                "ctx_size": knobs.ctx,
                "batch_size": knobs.batch,
                "ubatch_size": knobs.ubatch,
            },
            "host": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg()},
            "wall_s": round(time.perf_counter() - started_at, 1),
            "failures": failures,
            "ratios_vs_llama_server": table,
            "paired_tokens_per_s_vs_llama_server": paired_ratios(results),
            "paired_tokens_per_s_vs_ours_before": {
                k: v for k, v in paired_ratios(results, "ours-before").items() if k == "ours"
            },
            "results": [r.to_dict() for r in results],
        }
        write_json_atomic(summary, out / "peer-compare.json")
        if results:
            write_plot(
                results,
                out / "peer-compare.png",
                title=f"{model.name}, -t {knobs.threads} -np {knobs.parallel} (medians)",
            )
        if table:
            write_ratio_plot(table, out / "peer-ratios.png", paired_ratios(results))
        return results, table

    if args.interleave:
        try:
            rounds.update(
                bench_interleaved(
                    [specs[n] for n in names],
                    knobs,
                    base,
                    out,
                    args.startup_timeout,
                    args.interleave,
                )
            )
        except Exception as exc:
            failures["interleaved"] = f"{type(exc).__name__}: {exc}"
            print(f"  interleaved run failed: {failures['interleaved']}", flush=True)
    # Servers take turns, round after round, so a change in the machine's load hits all alike.
    for rnd in range(0 if args.interleave else args.rounds):
        for name in names:
            if name in failures:
                continue
            print(f"== {name} (round {rnd + 1}/{args.rounds})", flush=True)
            t0 = time.perf_counter()
            try:
                rounds[name].append(
                    bench_one(
                        specs[name],
                        knobs,
                        replace(base, seed=base.seed + rnd),
                        out,
                        args.startup_timeout,
                        log_name=f"{name}-round{rnd + 1}.log",
                    )
                )
            except Exception as exc:  # report and go on with the other servers
                failures[name] = f"{type(exc).__name__}: {exc}"
                print(f"  {name} failed: {failures[name]}", flush=True)
            print(f"  {name} took {time.perf_counter() - t0:.0f} s", flush=True)
            save(rounds)
    results, table = save(rounds)

    print()
    print(format_table(results))
    print()
    if table:
        print(ratio_table(table))
        print()
        paired = paired_ratios(results)
        if paired:
            print(paired_table(paired))
            print()
    if results:
        print(rss_table(results))
    for r in results:
        for note in r.notes:
            print(f"note [{r.label}]: {note}")
    for name, why in failures.items():
        print(f"FAILED [{name}]: {why}")
    print(
        f"\nwrote {out}/peer-compare.json, peer-compare.png, peer-ratios.png "
        f"({time.perf_counter() - started_at:.0f} s)"
    )
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
