"""How peer_compare runs the servers: one after another (``bench_one``), or all loaded and
taking turns repetition by repetition (``bench_interleaved``); ``merge_rounds`` pools the
repetitions of one server's runs into one result."""

from __future__ import annotations

import contextlib
import itertools
import os
from dataclasses import replace
from pathlib import Path
from typing import Any

import psutil

from backend.bench import (
    BenchConfig,
    BenchProgress,
    BenchResult,
    LevelResult,
    RepetitionResult,
    ScenarioResult,
    run_benchmark,
)
from backend.bench.scenario_names import PLAIN
from benchmarks.peer_servers import Knobs, ServerSpec, ours_stats, peak_rss, started, tree_rss


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
            "argv": spec.command(knobs, 0)[1:],
            "extra_flags": spec.extra_flags,
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


def _rep_line(rep: RepetitionResult) -> str:
    """One repetition's figures for the progress log."""
    line = f"{rep.tokens_per_s:.1f} tok/s, TTFT p99 {rep.ttft_ms_p99:.0f} ms"
    if rep.turn_ttft_ms_p50:
        line += ", TTFT p50 per turn " + "/".join(f"{v:.0f}" for v in rep.turn_ttft_ms_p50)
    if rep.output_similarity is not None:
        line += f", answers {rep.output_similarity:.0%} like the file"
    return line + (f", errors {rep.errors}" if rep.errors else "")


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
    shared machine falls on all servers alike. Every (pass, scenario, level) has its own
    prompts, the same for every server."""
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

        def one(spec: ServerSpec, config: BenchConfig) -> BenchResult:
            change = {"label": spec.name, "url": urls[spec.name], **spec.bench_overrides}
            return run_benchmark(replace(config, **change))

        with peak_rss(procs) as peak:
            for spec in specs:  # untimed warm-up of each server
                warm = base.only(PLAIN)
                top = (max(base.concurrency),)
                one(spec, replace(warm, concurrency=top, repetitions=1, seed=base.seed - 1))
            levels = itertools.product(range(passes), base.scenarios(), base.concurrency)
            for p, (scenario, _prefix), c in levels:
                config = replace(
                    base.only(scenario),
                    concurrency=(c,),
                    repetitions=1,
                    warmup=False,
                    seed=base.seed + 1000 * (p + 1) + c,
                )
                for spec in specs[p % len(specs) :] + specs[: p % len(specs)]:
                    load = os.getloadavg()[0]
                    r = one(spec, config)
                    rep = r.scenarios[0].levels[0].repetitions[0]
                    print(
                        f"  pass {p + 1}/{passes} {scenario} c={c} {spec.name}: {_rep_line(rep)}",
                        flush=True,
                    )
                    r.server = {
                        "argv": spec.command(knobs, 0)[1:],
                        "extra_flags": spec.extra_flags,
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
