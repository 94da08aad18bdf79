"""Time ``quantdesk compare`` against llama.cpp's ``llama-perplexity`` on the same work.

Work: SmolLM2-135M requantised to F16 (reference) and 4 quants (Q8_0, Q6_K, Q4_K_M, Q2_K),
~8k tokens of the built-in text (16 chunks of 512), 4 chunks per decode, the same threads.

* ours:   ``run_compare`` (reference pass writing the base file, then 4 candidate passes),
          with answers and the speed measurement switched off, since llama-perplexity has
          neither;
* theirs: ``llama-perplexity --kl-divergence-base BASE`` on the F16, then
          ``llama-perplexity --kl-divergence`` for each quant.

Both sides run ``--reps`` times, alternating which goes first; the medians and their ratio
are written as JSON, with each side's numbers (PPL, mean KLD, same-top %) so that the two
implementations can be checked against each other. As a format check, llama-perplexity also
reads *our* base file for one quant. The machine is shared: quote the ratio, not the times.

Build llama-perplexity from the llama.cpp sources in the llama-cpp-python sdist::

    cmake -B build -DLLAMA_CURL=OFF && cmake --build build --target llama-perplexity -j2

Usage::

    .venv/bin/python benchmarks/compare_vs_llama_perplexity.py --llama-perplexity PATH
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import llama_cpp

from backend.compare.compare import CompareConfig, run_compare
from backend.compare.eval_text import stdlib_docstring_text
from backend.settings.default_model import default_model_path

QUANTS = {"Q8_0": 7, "Q6_K": 18, "Q4_K_M": 15, "Q2_K": 10}
F16 = 1


def quantize(src: Path, dst: Path, ftype: int) -> Path:
    if dst.exists():
        return dst
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = ftype
    params.allow_requantize = True
    if llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params)):
        raise SystemExit(f"quantising {dst.name} failed")
    return dst


def find_llama_perplexity(given: str | None) -> Path:
    candidates = [
        given,
        os.environ.get("LLAMA_PERPLEXITY"),
        shutil.which("llama-perplexity"),
        "/tmp/lcpp_src/llama.cpp/build/bin/llama-perplexity",
    ]
    for c in candidates:
        if c and Path(c).is_file():
            return Path(c)
    raise SystemExit(
        "llama-perplexity not found: build it (see the docstring) and pass --llama-perplexity PATH"
    )


def parse_llama_output(text: str) -> dict[str, float]:
    patterns = {
        "ppl": r"Mean PPL\(Q\)\s*:\s*([\d.]+)",
        "ppl_ratio": r"Mean PPL\(Q\)/PPL\(base\)\s*:\s*([\d.]+)",
        "kld_mean": r"Mean\s+KLD:\s*([\d.eE+-]+)",
        "kld_p99": r"99\.0%\s+KLD:\s*([\d.eE+-]+)",
        "rms_dp_pct": r"RMS Δp\s*:\s*([\d.]+)",
        "same_top_pct": r"Same top p:\s*([\d.]+)",
        "final_ppl": r"Final estimate: PPL = ([\d.]+)",
    }
    out = {}
    for key, pat in patterns.items():
        m = re.search(pat, text)
        if m:
            out[key] = float(m.group(1))
    return out


def run_theirs(
    exe: Path,
    models: dict[str, Path],
    text: Path,
    work: Path,
    args: argparse.Namespace,
    base: Path | None = None,
) -> tuple[float, dict[str, dict[str, float]]]:
    common = [
        "-c",
        str(args.ctx),
        "-b",
        str(args.batch),
        "--chunks",
        str(args.chunks),
        "-t",
        str(args.threads),
        "-ngl",
        "0",
    ]
    results: dict[str, dict[str, float]] = {}
    started = time.perf_counter()
    own_base = base is None
    base = base or work / "llama_base.kld"
    if own_base:
        p = subprocess.run(
            [
                str(exe),
                "-m",
                str(models["F16"]),
                "-f",
                str(text),
                "--kl-divergence-base",
                str(base),
                *common,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results["F16"] = parse_llama_output(p.stdout + p.stderr)
    for name in QUANTS:
        if not own_base and name != "Q4_K_M":
            continue
        p = subprocess.run(
            [
                str(exe),
                "-m",
                str(models[name]),
                "--kl-divergence-base",
                str(base),
                "--kl-divergence",
                *common,
            ],
            capture_output=True,
            text=True,
            check=True,
        )
        results[name] = parse_llama_output(p.stdout + p.stderr)
    return time.perf_counter() - started, results


def run_ours(
    models: dict[str, Path], text: Path, work: Path, args: argparse.Namespace
) -> tuple[float, dict[str, dict[str, float]]]:
    config = CompareConfig(
        reference=models["F16"],
        candidates=[models[n] for n in QUANTS],
        text_path=text,
        n_ctx=args.ctx,
        n_batch=args.batch,
        max_chunks=args.chunks,
        answers=False,
        speed=False,
        threads=args.threads,
        keep_base=work / "ours_base.kld",
    )
    started = time.perf_counter()
    result = run_compare(config)
    elapsed = time.perf_counter() - started
    numbers = {"F16": {"ppl": result.reference.ppl}}
    for name, c in zip(QUANTS, result.candidates, strict=True):
        numbers[name] = {
            k: getattr(c, k)
            for k in ("ppl", "ppl_ratio", "kld_mean", "kld_p99", "rms_dp_pct", "same_top_pct")
        }
    return elapsed, numbers


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--llama-perplexity", default=None)
    parser.add_argument("--work", type=Path, default=Path("/tmp/quantdesk-compare-bench"))
    parser.add_argument("--ctx", type=int, default=512)
    parser.add_argument("--batch", type=int, default=2048)
    parser.add_argument("--chunks", type=int, default=16)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--reps", type=int, default=1)
    parser.add_argument(
        "--out", type=Path, default=Path("benchmarks/results/compare_vs_llama_perplexity.json")
    )
    args = parser.parse_args()

    exe = find_llama_perplexity(args.llama_perplexity)
    args.work.mkdir(parents=True, exist_ok=True)
    models = {"F16": quantize(default_model_path(), args.work / "smollm2-F16.gguf", F16)}
    for name, ftype in QUANTS.items():
        models[name] = quantize(models["F16"], args.work / f"smollm2-{name}.gguf", ftype)
    text = args.work / "eval.txt"
    text.write_text(stdlib_docstring_text(60_000).text, encoding="utf-8")

    ours_t: list[float] = []
    theirs_t: list[float] = []
    ours_n: dict[str, dict[str, float]] = {}
    theirs_n: dict[str, dict[str, float]] = {}
    for rep in range(args.reps):
        order = ("ours", "theirs") if rep % 2 == 0 else ("theirs", "ours")
        for side in order:
            if side == "ours":
                t, ours_n = run_ours(models, text, args.work, args)
                ours_t.append(t)
            else:
                t, theirs_n = run_theirs(exe, models, text, args.work, args)
                theirs_t.append(t)
            print(f"rep {rep + 1}: {side} {t:.1f} s", flush=True)

    # llama-perplexity reading our base file: the format is the same
    _, compat = run_theirs(exe, models, text, args.work, args, base=args.work / "ours_base.kld")

    ours_med, theirs_med = statistics.median(ours_t), statistics.median(theirs_t)
    report: dict[str, Any] = {
        "work": f"F16 reference + {len(QUANTS)} quants of SmolLM2-135M, {args.chunks} chunks of "
        f"{args.ctx} tokens, batch {args.batch}, {args.threads} threads",
        "llama_perplexity": str(exe),
        "reps": args.reps,
        "ours_s": ours_t,
        "llama_perplexity_s": theirs_t,
        "ours_median_s": ours_med,
        "llama_perplexity_median_s": theirs_med,
        "ratio_ours_over_llama": ours_med / theirs_med,
        "target_ratio_max": 2.0,
        "numbers_ours": ours_n,
        "numbers_llama_perplexity": theirs_n,
        "llama_perplexity_on_our_base_file": compat,
        "load_avg": os.getloadavg(),
        "note": "shared machine: compare the ratio, not absolute times",
    }
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps(report, indent=2))
    print(
        json.dumps(
            {
                k: report[k]
                for k in ("ours_median_s", "llama_perplexity_median_s", "ratio_ours_over_llama")
            },
            indent=2,
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
