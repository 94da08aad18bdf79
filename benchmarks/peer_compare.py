#!/usr/bin/env python3
"""Run the same load against QuantDesk's server and its peers, one server at a time.

Peers (same model file, threads, parallel slots, context and batch sizes):
  ours              .venv/bin/quantdesk serve
  ours-b            the same again with other flags (--ours-b-flags), e.g. no speculation
  llama-server      llama.cpp's C++ server (benchmarks/build_llama_server.sh builds it)
  llama-cpp-python  python -m llama_cpp.server (one request at a time by design)

Each server starts on 127.0.0.1 at a free port, is benchmarked with ``backend.bench``
(warm-up, >= 3 repetitions, medians) in the scenarios of --scenarios (default with and
without a shared system prompt; also follow-up, edit, story), its RSS is
sampled (psutil, whole process tree), and it is stopped before the next one starts.
With ``--interleave N`` all servers stay loaded and take turns repetition by repetition
(N passes), which keeps ratios steady when the machine's speed drifts.
Writes ``peer-compare.json`` (all results + ratios vs llama-server), ``peer-compare.png``
(absolute figures), ``peer-ratios.png`` (ratios) and the server logs into --out, and prints
a table. The machine may be shared: figures are medians and only ratios from one run mean much.

  .venv/bin/python -m benchmarks.peer_compare --concurrency 1,4,8,16 -np 16 -t 2
  .venv/bin/python -m benchmarks.peer_compare --servers ours,ours-b,llama-server \\
      --scenarios edit,story --ours-flags "--spec-type ngram-simple" \\
      --llama-server-flags "--spec-type ngram-simple" --interleave 4 --concurrency 1
"""

from __future__ import annotations

import os
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from backend.bench import (
    BenchConfig,
    BenchError,
    BenchResult,
    format_table,
    write_json_atomic,
    write_plot,
)
from backend.entrypoints.bench_cmd import scenario_fields
from backend.settings.default_model import resolve_model_path
from benchmarks import peer_args
from benchmarks.cpu_path import ours_cpu_path, paths_record
from benchmarks.peer_ratios import (
    BASELINE,
    paired_ratios,
    paired_table,
    paired_turn_ratios,
    ratio_table,
    ratios,
    rss_table,
    turn_table,
    write_ratio_plot,
)
from benchmarks.peer_runs import bench_interleaved, bench_one, merge_rounds
from benchmarks.peer_servers import ROOT, Knobs


def parse_args(argv: list[str] | None = None) -> Any:
    return peer_args.parse_args(argv, __doc__)


def _pairs(results: list[BenchResult]) -> dict[str, Any]:
    """Paired ratios of the JSON: tok/s and follow-up TTFT per turn vs llama-server, and
    ours vs ours-before / ours-b (tok/s and TTFT per turn) when those ran."""
    out: dict[str, Any] = {
        "paired_tokens_per_s_vs_llama_server": paired_ratios(results),
        "paired_turn_ttft_vs_llama_server": paired_turn_ratios(results),
    }
    for other in ("ours-before", "ours-b"):
        key = other.replace("-", "_")
        tps = paired_ratios(results, other)
        turns = paired_turn_ratios(results, other)
        out[f"paired_tokens_per_s_vs_{key}"] = {k: v for k, v in tps.items() if k == "ours"}
        out[f"paired_turn_ttft_vs_{key}"] = {k: v for k, v in turns.items() if k == "ours"}
    return out


def _print_summary(results: list[BenchResult], table: dict[str, Any]) -> None:
    print()
    print(format_table(results))
    print()
    if table:
        print(ratio_table(table))
        print()
    pairs = _pairs(results)
    for baseline in (BASELINE, "ours-b", "ours-before"):
        key = baseline.replace("-", "_")
        if tps := pairs[f"paired_tokens_per_s_vs_{key}"]:
            print(paired_table(tps, baseline) + "\n")
        if turns := pairs[f"paired_turn_ttft_vs_{key}"]:
            print(turn_table(turns, baseline) + "\n")
    if results:
        print(rss_table(results))
    for r in results:
        for note in r.notes:
            print(f"note [{r.label}]: {note}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    model = resolve_model_path(args.model)
    base = BenchConfig(
        url="http://127.0.0.1:1",
        concurrency=tuple(int(c) for c in args.concurrency.split(",")),
        repetitions=args.reps,
        requests_per_client=args.requests_per_client,
        prompt_tokens=args.prompt_tokens,
        max_tokens=args.max_tokens,
        fresh_prefix_per_repetition=not args.warm_prefix,
        **scenario_fields(args),
    )
    try:
        base.validate()
    except BenchError as exc:
        print(exc, file=sys.stderr)
        return 2
    ctx = args.ctx_size or args.parallel * (base.request_tokens_max() + 96)
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

    specs = peer_args.server_specs(args, model)
    names = [n.strip() for n in args.servers.split(",") if n.strip()]
    unknown = [n for n in names if n not in specs]
    if unknown:
        print(f"unknown server(s) {unknown}; choose from {', '.join(specs)}", file=sys.stderr)
        return 2
    failures: dict[str, str] = {}
    if BASELINE in names and not args.llama_server.is_file():
        failures[BASELINE] = f"{args.llama_server} missing: run benchmarks/build_llama_server.sh"
        print(f"skipping llama-server: {failures[BASELINE]}", flush=True)
        names.remove(BASELINE)
    rounds: dict[str, list[BenchResult]] = {name: [] for name in names}
    started_at = time.perf_counter()

    def save(rounds: dict[str, list[BenchResult]]) -> tuple[list[BenchResult], dict[str, Any]]:
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
            "scenarios": [name for name, _ in base.scenarios()],
            "server_flags": {name: specs[name].extra_flags for name in names},
            "host": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg()},
            "cpu_path": paths_record(ours_cpu_path()),
            "wall_s": round(time.perf_counter() - started_at, 1),
            "failures": failures,
            "ratios_vs_llama_server": table,
            **_pairs(results),
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
    _print_summary(results, table)
    for name, why in failures.items():
        print(f"FAILED [{name}]: {why}")
    print(
        f"\nwrote {out}/peer-compare.json, peer-compare.png, peer-ratios.png "
        f"({time.perf_counter() - started_at:.0f} s)"
    )
    return 0 if results else 1


if __name__ == "__main__":
    sys.exit(main())
