#!/usr/bin/env python3
"""Several models from one server: QuantDesk's router against llama-server's (issue 18).

Both routers serve the same folder of two GGUF files, with the same ``--models-max`` and the
same ``-np``/``-c``/``-t``/``-b``/``-ub`` (each passes them on to every model's server):
  ours          quantdesk serve --models-dir DIR (no -m: the library), QUANTDESK_HOME a
                fresh temp folder (no per-model settings of the user's)
  llama-server  llama-server --models-dir DIR (its router), an empty LLAMA_CACHE
Model A is ``--model-a`` (default: the embedded SmolLM2 Q4_1); model B is ``--model-b``, by
default A requantised to Q8_0 once with ``quantdesk quantize --allow-requantize`` into
``--cache``. Both routers stay up the whole run and take turns step by step, the order
alternating from pass to pass, so each figure is a paired ratio ours / llama-server over
``--passes`` passes (median, 90% bootstrap interval). Each pass:
  1. warm throughput: both models loaded; ``--concurrency`` streams to A and as many to B at
     once, ``--max-tokens`` each (ignore_eos): aggregate generated tokens/s;
  2. RSS of the whole process tree (router and model servers, psutil) with both resident;
  3. unload B (wait until GET /models says unloaded and its process is gone): RSS again;
  4. cold switch: a streamed request for B, from sending it to its first token (the load is
     part of it); then a second request's first token with B loaded, for comparison.
Writes ``router-compare.json`` and ``router-compare.png`` into --out (after every pass, so an
interrupted run keeps what it measured), server logs into --logs, and prints a table.

  .venv/bin/python -m benchmarks.router_compare --passes 5 --concurrency 2 -t 2
"""

from __future__ import annotations

import argparse
import contextlib
import logging
import os
import sys
import tempfile
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx

from backend.bench import write_json_atomic
from backend.settings.default_model import resolve_model_path
from benchmarks.cpu_path import ours_cpu_path, paths_record
from benchmarks.peer_servers import DEFAULT_LLAMA_SERVER, ROOT, Knobs
from benchmarks.router_library import DEFAULT_CACHE, build_library, isolated_env, requantised
from benchmarks.router_load import LoadShape, first_token_ms, warm_wave
from benchmarks.router_report import summary, table, write_plot
from benchmarks.router_servers import (
    Router,
    RouterError,
    llama_server_version,
    router_specs,
    router_up,
)

DEFAULT_OUT = ROOT / "benchmarks" / "results" / "router-compare"
JSON_NAME = "router-compare.json"
PNG_NAME = "router-compare.png"


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--passes", type=int, default=3, help="paired passes (default 3)")
    p.add_argument("--model-a", default="default", help="GGUF path or 'default' (SmolLM2 Q4_1)")
    p.add_argument(
        "--model-b",
        type=Path,
        default=None,
        help="GGUF path (default: model A requantised to --b-type, made once in --cache)",
    )
    p.add_argument("--b-type", default="Q8_0", help="quant type of the default model B")
    p.add_argument("--cache", type=Path, default=DEFAULT_CACHE, help="where model B is made")
    p.add_argument("--llama-server", type=Path, default=DEFAULT_LLAMA_SERVER)
    p.add_argument("--models-max", type=int, default=2, help="both routers' --models-max")
    p.add_argument(
        "--concurrency", type=int, default=2, help="streams to each model at once (default 2)"
    )
    p.add_argument("-np", "--parallel", type=int, default=0, help="default: --concurrency")
    p.add_argument("-t", "--threads", type=int, default=2)
    p.add_argument(
        "-c",
        "--ctx-size",
        type=int,
        default=0,
        help="KV cells of each model (default: -np x (prompt + output + 128), at least 256)",
    )
    p.add_argument("-b", "--batch-size", type=int, default=512)
    p.add_argument("-ub", "--ubatch-size", type=int, default=512)
    p.add_argument("--prompt-tokens", type=int, default=64)
    p.add_argument("--max-tokens", type=int, default=64, help="output of each warm stream")
    p.add_argument(
        "--switch-max-tokens", type=int, default=8, help="output of the cold-switch requests"
    )
    p.add_argument("--startup-timeout", type=float, default=300)
    p.add_argument("--out", type=Path, default=DEFAULT_OUT)
    p.add_argument(
        "--logs",
        type=Path,
        default=None,
        help="server logs (default bench-results/router-compare-<UTC time>)",
    )
    args = p.parse_args(argv)
    small = {"--passes": args.passes, "--concurrency": args.concurrency}
    small |= {"--max-tokens": args.max_tokens, "--switch-max-tokens": args.switch_max_tokens}
    small |= {"--prompt-tokens": args.prompt_tokens, "--models-max": args.models_max}
    for flag, value in small.items():
        if value < 1:
            p.error(f"{flag} must be >= 1")
    if args.models_max < 2:
        p.error("--models-max must be >= 2: both models are resident at once")
    return args


def public(path: Path | str) -> str:
    """A path as the JSON shows it: relative to the repository, else its name alone."""
    path = Path(os.path.abspath(path))  # links kept: .venv/bin/python, not /usr/bin/python3
    try:
        return str(path.relative_to(ROOT))
    except ValueError:
        return path.name


def _progress(text: str) -> None:
    print(text, flush=True)


def run_pass(
    p: int,
    routers: list[Router],
    shape: LoadShape,
    models: tuple[str, str],
    b_file: str,
    args: argparse.Namespace,
) -> dict[str, Any]:
    """One pass: each step on every router back to back, the order turned by the pass."""
    a, b = models
    order = routers[p % len(routers) :] + routers[: p % len(routers)]
    row: dict[str, Any] = {"pass": p + 1, "order": [r.name for r in order]}
    for r in order:
        r.load(a)
        r.load(b)
        fig = row[r.name] = {"load_avg_1min": round(os.getloadavg()[0], 2)}
        wave = warm_wave(r.url, shape, [a, b], args.concurrency, tag=f"pass{p + 1}")
        fig["tokens_per_s"] = None if wave.errors else round(wave.tokens_per_s, 2)
        fig["wave"] = wave.to_dict()
        _progress(
            f"  pass {p + 1} {r.name}: {wave.tokens_per_s:.1f} tok/s with both models"
            + (f", errors {wave.errors}" if wave.errors else "")
        )
    for r in order:
        row[r.name]["rss_both_bytes"] = r.rss()
        row[r.name]["processes_both"] = len(r.tree())
    for r in order:
        row[r.name]["unload_s"] = round(r.unload(b, b_file), 3)
        row[r.name]["rss_one_bytes"] = r.rss()
        row[r.name]["processes_one"] = len(r.tree())
        row[r.name]["state_before_switch"] = r.states().get(b)
    for r in order:
        fig = row[r.name]
        cold = first_token_ms(r.url, shape, b, f"pass{p + 1}:cold", args.switch_max_tokens)
        warm = first_token_ms(r.url, shape, b, f"pass{p + 1}:warm", args.switch_max_tokens)
        fig["cold_switch_ttft_ms"], fig["warm_ttft_ms"] = round(cold, 1), round(warm, 1)
        fig["state_after_switch"] = r.states().get(b)
        mib = {k: fig[k] / 2**20 for k in ("rss_both_bytes", "rss_one_bytes")}
        _progress(
            f"  pass {p + 1} {r.name}: cold switch {cold:.0f} ms (then {warm:.0f} ms), RSS "
            f"{mib['rss_both_bytes']:.0f} MiB with both, {mib['rss_one_bytes']:.0f} MiB with one"
        )
    return row


def describe(
    args: argparse.Namespace, knobs: Knobs, models: dict[str, tuple[str, Path]], stamp: str
) -> dict[str, Any]:
    """The run's settings, models and command lines for the JSON (no machine paths)."""
    return {
        "created_at": stamp,
        "knobs": {
            "threads": knobs.threads,
            "parallel": knobs.parallel,
            "ctx_size": knobs.ctx,
            "batch_size": knobs.batch,
            "ubatch_size": knobs.ubatch,
            "models_max": args.models_max,
            "streams_per_model": args.concurrency,
            "prompt_tokens": args.prompt_tokens,
            "max_tokens": args.max_tokens,
            "switch_max_tokens": args.switch_max_tokens,
        },
        "models": {
            name: {"id": model_id, "file": public(path), "bytes": path.stat().st_size}
            for name, (model_id, path) in models.items()
        },
        "servers": {
            s.name: [public(a) if "/" in a else a for a in s.command(knobs, 0)]
            for s in router_specs(args.llama_server, args.models_max)
        },
        "llama_server_version": llama_server_version(args.llama_server),
    }


def measure(
    args: argparse.Namespace,
    knobs: Knobs,
    models: tuple[str, str],
    b_file: str,
    logs: Path,
    on_pass: Callable[[dict[str, Any]], object],
) -> None:
    """Start both routers, warm them up, run the passes (``on_pass`` after each one)."""
    shape = LoadShape(args.prompt_tokens, args.max_tokens)
    with contextlib.ExitStack() as stack:
        routers = [
            stack.enter_context(router_up(s, knobs, logs / f"{s.name}.log", args.startup_timeout))
            for s in router_specs(args.llama_server, args.models_max)
        ]
        _progress("warm-up: both models loaded and used once on each router")
        for r in routers:
            for model in models:
                r.load(model)
            warm_wave(r.url, shape, list(models), 1, tag="warm-up")
        for p in range(args.passes):
            on_pass(run_pass(p, routers, shape, models, b_file, args))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if not args.llama_server.is_file():
        print(f"{args.llama_server} missing: run benchmarks/build_llama_server.sh", file=sys.stderr)
        return 2
    model_a = resolve_model_path(args.model_a)
    model_b = args.model_b or requantised(model_a, args.b_type, args.cache, args.threads)
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    logs: Path = args.logs or ROOT / "bench-results" / f"router-compare-{stamp}"
    logs.mkdir(parents=True, exist_ok=True)
    parallel = args.parallel or args.concurrency
    longest = args.prompt_tokens + max(args.max_tokens, args.switch_max_tokens)
    ctx = args.ctx_size or max(256, parallel * (longest + 128))
    started_at = time.perf_counter()
    passes: list[dict[str, Any]] = []
    failures: list[str] = []

    with tempfile.TemporaryDirectory(prefix="router-compare-") as tmp:
        home = Path(tmp) / "home"
        with isolated_env(home, Path(tmp) / "llama-cache"):
            models_dir = (home / "models").resolve()
            id_a, id_b = build_library(models_dir, [model_a, model_b])
            knobs = Knobs(
                models_dir, args.threads, parallel, ctx, args.batch_size, args.ubatch_size
            )
            meta = describe(args, knobs, {"A": (id_a, model_a), "B": (id_b, model_b)}, stamp)
            title = (
                f"{id_a} + {id_b}: ours vs llama-server routers, -t {args.threads} "
                f"-np {parallel} -c {ctx}, {args.concurrency} streams per model"
            )

            def save(row: dict[str, Any] | None = None) -> dict[str, Any]:
                passes.extend([row] if row else [])
                figures = summary(passes)
                data = {
                    **meta,
                    "host": {"cpus": os.cpu_count(), "load_avg_at_end": os.getloadavg()},
                    "cpu_path": paths_record(ours_cpu_path()),
                    "wall_s": round(time.perf_counter() - started_at, 1),
                    "failures": failures,
                    "figures": figures,
                    "passes": passes,
                }
                write_json_atomic(data, args.out / JSON_NAME)
                if passes:
                    write_plot(passes, figures, args.out / PNG_NAME, title)
                return figures

            try:
                measure(args, knobs, (id_a, id_b), model_b.name, logs, save)
            except (RouterError, RuntimeError, httpx.HTTPError, OSError) as exc:
                failures.append(f"{type(exc).__name__}: {exc}")
                _progress(f"FAILED: {failures[-1]} (logs in {logs})")
            figures = save()

    print()
    print(table(figures))
    print(f"\nwrote {args.out / JSON_NAME} and {PNG_NAME}, logs in {logs} "
          f"({time.perf_counter() - started_at:.0f} s)")  # fmt: skip
    return 0 if passes and not failures else 1


if __name__ == "__main__":
    sys.exit(main())
