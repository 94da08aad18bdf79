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

  .venv/bin/python benchmarks/peer_compare.py --concurrency 1,4,8,16 -np 16 -t 2
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import math
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
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
from backend.bench.paired import paired_ratio
from backend.settings.default_model import resolve_model_path

ROOT = Path(__file__).resolve().parent.parent
VENV_BIN = Path(sys.executable).parent
DEFAULT_LLAMA_SERVER = ROOT / "build" / "peers" / "llama-server" / "bin" / "llama-server"
BASELINE = "llama-server"


@dataclass
class Knobs:
    model: Path
    threads: int
    parallel: int
    ctx: int
    batch: int
    ubatch: int
    kv_unified: bool = False


@dataclass
class ServerSpec:
    name: str
    argv: Callable[[Knobs, int], list[str]]
    health_path: str = "/health"
    bench_overrides: dict[str, Any] = field(default_factory=dict)
    note: str = ""
    cwd: Path = ROOT


def _ours(k: Knobs, port: int) -> list[str]:
    return _ours_in(ROOT)(k, port)


def _ours_in(tree: Path) -> Callable[[Knobs, int], list[str]]:
    """QuantDesk from another checkout (``git worktree add``) of this repo, e.g. the code
    before a change: same venv, that tree's packages (it runs with ``cwd=tree``)."""
    new_layout = (tree / "backend" / "entrypoints" / "main.py").is_file()
    module = "backend.entrypoints.main" if new_layout else "backend.cli.main"

    def argv(k: Knobs, port: int) -> list[str]:
        return _ours_argv(module, k, port)

    return argv


def _ours_argv(module: str, k: Knobs, port: int) -> list[str]:
    return [
        str(VENV_BIN / "python"),
        "-m",
        module,
        "serve",
        "--model",
        str(k.model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "-np",
        str(k.parallel),
        "-t",
        str(k.threads),
        "-tb",
        str(k.threads),
        "-c",
        str(k.ctx),
        "-b",
        str(k.batch),
        "-ub",
        str(k.ubatch),
    ] + ([] if k.kv_unified else ["--kv-per-slot"])


def _llama_server(binary: Path) -> Callable[[Knobs, int], list[str]]:
    def argv(k: Knobs, port: int) -> list[str]:
        return [
            str(binary),
            "-m",
            str(k.model),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "-np",
            str(k.parallel),
            "-t",
            str(k.threads),
            "-tb",
            str(k.threads),
            "-c",
            str(k.ctx),
            "-b",
            str(k.batch),
            "-ub",
            str(k.ubatch),
            "--no-webui",
        ] + (["-kvu"] if k.kv_unified else [])

    return argv


def _llama_cpp_python(k: Knobs, port: int) -> list[str]:
    # one sequence at a time: its context only needs to hold one request
    return [
        str(VENV_BIN / "python"),
        "-m",
        "llama_cpp.server",
        "--model",
        str(k.model),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_threads",
        str(k.threads),
        "--n_threads_batch",
        str(k.threads),
        "--n_ctx",
        str(max(2048, k.ctx // k.parallel)),
        "--n_batch",
        str(k.batch),
        "--n_ubatch",
        str(k.ubatch),
        "--interrupt_requests",
        "False",
    ]


def eog_logit_bias(model: Path) -> dict[str, float]:
    """Ban end-of-generation tokens: the way to fix the output length on a server that
    ignores ``ignore_eos`` but honours ``logit_bias`` (llama-cpp-python's)."""
    import llama_cpp

    llm = llama_cpp.Llama(str(model), vocab_only=True, verbose=False)
    vocab = llama_cpp.llama_model_get_vocab(llm.model)
    n_vocab = llama_cpp.llama_vocab_n_tokens(vocab)
    return {str(i): -100.0 for i in range(n_vocab) if llama_cpp.llama_vocab_is_eog(vocab, i)}


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def tree_rss(proc: psutil.Process) -> int:
    total = 0
    for p in [proc, *proc.children(recursive=True)]:
        with contextlib.suppress(psutil.Error):
            total += p.memory_info().rss
    return total


@contextlib.contextmanager
def started(
    spec: ServerSpec, knobs: Knobs, log_path: Path, timeout_s: float
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    port = free_port()
    argv = spec.argv(knobs, port)
    url = f"http://127.0.0.1:{port}"
    with log_path.open("wb") as log:
        log.write((" ".join(argv) + "\n").encode())
        log.flush()
        proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, cwd=spec.cwd)
        try:
            deadline = time.monotonic() + timeout_s
            while True:
                if proc.poll() is not None:
                    raise RuntimeError(f"{spec.name} exited with {proc.returncode}; see {log_path}")
                with contextlib.suppress(httpx.HTTPError):
                    if httpx.get(url + spec.health_path, timeout=2).status_code == 200:
                        break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{spec.name} not healthy after {timeout_s:.0f} s")
                time.sleep(0.5)
            yield url, proc
        finally:
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(timeout=10)


@contextlib.contextmanager
def peak_rss(procs: dict[str, psutil.Process]) -> Iterator[dict[str, int]]:
    """Sample each process tree's RSS every 0.5 s; yields name -> peak so far."""
    peak = {name: tree_rss(ps) for name, ps in procs.items()}
    stop = threading.Event()

    def sample() -> None:
        while not stop.wait(0.5):
            for name, ps in procs.items():
                with contextlib.suppress(psutil.Error):
                    peak[name] = max(peak[name], tree_rss(ps))

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    try:
        yield peak
    finally:
        stop.set()
        sampler.join()


def ours_stats(url: str) -> dict[str, Any]:
    """Model and KV sizes from our /v1/stats, for the RSS target (model + KV + 400 MB)."""
    try:
        stats = httpx.get(url + "/v1/stats", timeout=5).json()
    except (httpx.HTTPError, ValueError):
        return {}
    return {
        "model_size_bytes": stats.get("model", {}).get("size_bytes"),
        "kv_bytes_total": stats.get("kv", {}).get("bytes_total"),
        "prefix_cache": stats.get("prefix_cache"),
        "step": stats.get("step"),
    }


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


RATIO_FIELDS = ("tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50", "requests_per_s")


def _against_baseline(
    results: list[BenchResult], baseline: str = BASELINE
) -> Iterator[tuple[str, str, LevelResult, LevelResult]]:
    """(server, scenario, its level, the baseline's same level) for every level both ran."""
    base = next((r for r in results if r.label == baseline), None)
    if base is None:
        return
    for result in results:
        if result is base:
            continue
        for scenario in result.scenarios:
            base_scenario = base.scenario(scenario.name)
            for level in scenario.levels:
                base_level = base_scenario.level(level.concurrency) if base_scenario else None
                if base_level is not None:
                    yield result.label, scenario.name, level, base_level


def ratios(results: list[BenchResult]) -> dict[str, Any]:
    """Each server's medians divided by llama-server's, per scenario and concurrency."""
    out: dict[str, Any] = {}
    for label, scenario, level, base_level in _against_baseline(results):
        row: dict[str, Any] = {"concurrency": level.concurrency}
        for name in RATIO_FIELDS:
            a, b = level.median_of(name), base_level.median_of(name)
            row[name] = round(a / b, 3) if b and not math.isnan(a / b) else None
        out.setdefault(label, {}).setdefault(scenario, []).append(row)
    return out


def paired_ratios(results: list[BenchResult], baseline: str = BASELINE) -> dict[str, Any]:
    """Tokens/s of each server over the baseline's (llama-server's), repetition by repetition
    (with --interleave, the two ran back to back on the same prompts): the per-pass ratios,
    their median, a 90% bootstrap interval of it and the share of passes at >= 1."""
    out: dict[str, Any] = {}
    for label, scenario, level, base_level in _against_baseline(results, baseline):
        pr = paired_ratio(level, base_level)
        if pr is not None:
            rows = out.setdefault(label, {}).setdefault(scenario, [])
            rows.append({"concurrency": level.concurrency, **pr.to_dict()})
    return out


def paired_table(table: dict[str, Any]) -> str:
    lines = [
        f"tokens/s over {BASELINE}'s, pass by pass (median, 90% bootstrap interval, "
        "share of passes >= 1)"
    ]
    for label, scenarios in table.items():
        for scenario, rows in scenarios.items():
            for row in rows:
                lo, hi = row["interval"]
                lines.append(
                    f"{label:<18} {scenario:<14} {row['concurrency']:>4} "
                    f"{row['median']:>6.2f}  [{lo:.2f}, {hi:.2f}]  "
                    f"{row['share_at_least_one']:.0%} of {len(row['ratios'])}"
                )
    return "\n".join(lines)


def ratio_table(table: dict[str, Any]) -> str:
    lines = [
        f"ratios vs {BASELINE} (>1 tok/s is better; <1 latency is better)",
        f"{'server':<18} {'scenario':<14} {'conc':>4} {'tok/s':>7} {'TTFT50':>7} "
        f"{'TTFT99':>7} {'ITL50':>7}",
    ]
    for label, scenarios in table.items():
        for scenario, rows in scenarios.items():
            for row in rows:
                cells = [
                    "-" if row[k] is None else f"{row[k]:.2f}"
                    for k in ("tokens_per_s", "ttft_ms_p50", "ttft_ms_p99", "itl_ms_p50")
                ]
                lines.append(
                    f"{label:<18} {scenario:<14} {row['concurrency']:>4} "
                    + " ".join(f"{c:>7}" for c in cells)
                )
    return "\n".join(lines)


def rss_table(results: list[BenchResult]) -> str:
    lines = [f"{'server':<18} {'RSS loaded':>11} {'RSS peak':>10} {'RSS end':>10}"]
    for r in results:
        mb = {k: r.server[f"rss_bytes_{k}"] / 2**20 for k in ("loaded", "peak", "end")}
        lines.append(
            f"{r.label:<18} {mb['loaded']:>8.0f} MB {mb['peak']:>7.0f} MB {mb['end']:>7.0f} MB"
        )
    ours = next((r for r in results if r.label == "ours"), None)
    if ours and ours.server.get("model_size_bytes") and ours.server.get("kv_bytes_total"):
        budget = ours.server["model_size_bytes"] + ours.server["kv_bytes_total"] + 400 * 2**20
        lines.append(f"ours: target RSS <= model + KV + 400 MB = {budget / 2**20:.0f} MB")
    return "\n".join(lines)


def write_ratio_plot(
    table: dict[str, Any], path: Path, paired: dict[str, Any] | None = None
) -> Path:
    """Ratios of medians; with ``paired`` (from :func:`paired_ratios`), the tokens/s
    panel also shows each level's 90% interval of the paired median as an error bar."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    from matplotlib.figure import Figure

    fig = Figure(figsize=(11, 4.5), layout="constrained")
    ax_tps, ax_ttft = fig.subplots(1, 2)
    for i, (label, scenarios) in enumerate(table.items()):
        for j, (scenario, rows) in enumerate(scenarios.items()):
            style = dict(color=f"C{i}", marker="os"[j % 2], linestyle="-" if j == 0 else "--")
            xs = [row["concurrency"] for row in rows]
            for ax, key in ((ax_tps, "tokens_per_s"), (ax_ttft, "ttft_ms_p99")):
                ys = [math.nan if row[key] is None else row[key] for row in rows]
                ax.plot(xs, ys, label=f"{label} / {scenario}", **style)  # type: ignore[arg-type]
            bars = (paired or {}).get(label, {}).get(scenario, [])
            if bars:
                mid = [b["median"] for b in bars]
                ax_tps.errorbar(
                    [b["concurrency"] for b in bars],
                    mid,
                    fmt="none",
                    ecolor=f"C{i}",
                    capsize=4,
                    alpha=0.6,
                    yerr=[
                        [m - b["interval"][0] for m, b in zip(mid, bars, strict=True)],
                        [b["interval"][1] - m for m, b in zip(mid, bars, strict=True)],
                    ],
                )
    low, high = ax_tps.get_ylim()
    ax_tps.set_ylim(min(low, 0.9), max(high, 1.1))  # a few % should look like a few %
    ax_tps.axhline(1.0, color="grey", lw=1)
    ax_tps.set_title(
        f"aggregate tokens/s ÷ {BASELINE} (higher is better)"
        + ("\nbars: 90% interval of the paired per-pass median" if paired else "")
    )
    ax_ttft.axhline(1.0, color="grey", lw=1)
    ax_ttft.axhline(0.2, color="green", lw=1, ls=":")
    ax_ttft.set_title(f"TTFT p99 ÷ {BASELINE}\n(lower is better; 0.2 dotted)")
    ax_ttft.set_yscale("log")
    levels = sorted(
        {row["concurrency"] for sc in table.values() for rows in sc.values() for row in rows}
    )
    for ax in (ax_tps, ax_ttft):
        ax.set_xscale("log", base=2)
        ax.set_xticks(levels, [str(c) for c in levels])
        ax.minorticks_off()
        ax.set_xlabel("concurrent clients")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=7)
    tmp = path.with_name(f".{path.stem}.tmp.png")
    fig.savefig(tmp, dpi=110)
    os.replace(tmp, path)
    return path


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
        "ours": ServerSpec("ours", _ours),
        "llama-server": ServerSpec(BASELINE, _llama_server(args.llama_server)),
        "llama-cpp-python": ServerSpec(
            "llama-cpp-python",
            _llama_cpp_python,
            health_path="/v1/models",
            note="serves one request at a time (interrupt_requests=False so streams finish); "
            "ignores ignore_eos, so end-of-generation tokens get logit_bias -100",
            bench_overrides={"extra_body": {"logit_bias": eog_logit_bias(model)}},
        ),
    }
    if args.ours_before:
        tree = args.ours_before.resolve()
        specs["ours-before"] = ServerSpec("ours-before", _ours_in(tree), cwd=tree)
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
