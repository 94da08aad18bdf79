"""Prefill and decode speed, and greedy outputs, with llama.cpp's extra CPU buffer types on
(AMX or CPU_REPACK, whichever this CPU and build have) against off (``-nr``), in paired
passes on one model in one process.

    .venv/bin/python -m benchmarks.cpu_paths [--model M] [--quant Q4_0] [--passes 5] [--threads 2]

The model is requantised to ``--quant`` first (the embedded SmolLM2 is Q4_1, which no repack
kernel takes; Q4_0, Q4_K and IQ4_NL are repacked on AVX2/AVX-512/NEON, and AMX takes Q4_0,
Q4_1, Q8_0 and the K-quants). Writes ``benchmarks/results/cpu-paths/<host>.json``.
"""

from __future__ import annotations

import argparse
import ctypes
import json
import platform
import random
import statistics
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import llama_cpp

from backend.llama.backend_init import init_llama_backend
from backend.llama.cpu_buffers import extra_buffer_names, path_name
from backend.settings.default_model import default_model_path
from backend.system.cpu_name import cpu_model

PROMPTS = (
    "The capital of France is",
    "def fibonacci(n):\n    ",
    "List three uses of a hash map:",
)
FTYPES = {"Q4_0": 2, "Q4_1": 3, "Q8_0": 7, "Q4_K_M": 15, "IQ4_NL": 25}
RESULTS = Path(__file__).resolve().parent / "results" / "cpu-paths"


def requantise(src: Path, dst: Path, quant: str) -> Path:
    params = llama_cpp.llama_model_quantize_default_params()
    params.ftype = FTYPES[quant]
    params.allow_requantize = True
    rc = llama_cpp.llama_model_quantize(str(src).encode(), str(dst).encode(), ctypes.byref(params))
    if rc != 0:
        raise RuntimeError(f"llama_model_quantize to {quant} returned {rc}")
    return dst


@dataclass
class Loaded:
    model: Any
    ctx: Any
    vocab: Any

    def free(self) -> None:
        llama_cpp.llama_free(self.ctx)
        llama_cpp.llama_model_free(self.model)


def load(path: Path, extra_bufts: bool, threads: int, n_ctx: int = 1024) -> Loaded:
    init_llama_backend()
    params = llama_cpp.llama_model_default_params()
    params.n_gpu_layers = 0
    params.use_extra_bufts = extra_bufts
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    assert model, f"could not load {path}"
    cparams = llama_cpp.llama_context_default_params()
    cparams.n_ctx = n_ctx
    cparams.n_batch = cparams.n_ubatch = 512
    cparams.n_threads = cparams.n_threads_batch = threads
    cparams.no_perf = True
    ctx = llama_cpp.llama_init_from_model(model, cparams)
    return Loaded(model, ctx, llama_cpp.llama_model_get_vocab(model))


def _tokenize(m: Loaded, text: str) -> list[int]:
    data = text.encode()
    buf = (llama_cpp.llama_token * (len(data) + 8))()
    n = llama_cpp.llama_tokenize(m.vocab, data, len(data), buf, len(buf), True, False)
    return list(buf[:n])


def _decode(m: Loaded, tokens: list[int]) -> None:
    arr = (llama_cpp.llama_token * len(tokens))(*tokens)
    rc = llama_cpp.llama_decode(m.ctx, llama_cpp.llama_batch_get_one(arr, len(tokens)))
    assert rc == 0, f"llama_decode returned {rc}"


def _top2(m: Loaded) -> tuple[int, float]:
    """The arg-max token of the last row and its margin over the runner-up, in logits."""
    n_vocab = llama_cpp.llama_vocab_n_tokens(m.vocab)
    logits = llama_cpp.llama_get_logits_ith(m.ctx, -1)
    row = [logits[i] for i in range(n_vocab)]
    best = max(range(n_vocab), key=row.__getitem__)
    second = max(v for i, v in enumerate(row) if i != best)
    return best, row[best] - second


def greedy(m: Loaded, prompt: str, n_new: int) -> list[tuple[int, float]]:
    """(token, margin) for ``n_new`` greedy tokens after ``prompt``."""
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(m.ctx), True)
    _decode(m, _tokenize(m, prompt))
    out: list[tuple[int, float]] = []
    for _ in range(n_new):
        token, margin = _top2(m)
        out.append((token, margin))
        if llama_cpp.llama_vocab_is_eog(m.vocab, token):
            break
        _decode(m, [token])
    return out


def first_divergence(
    a: list[tuple[int, float]], b: list[tuple[int, float]]
) -> dict[str, Any] | None:
    for i, ((ta, ma), (tb, mb)) in enumerate(zip(a, b, strict=False)):
        if ta != tb:
            return {"position": i, "tokens": [ta, tb], "margins": [round(ma, 4), round(mb, 4)]}
    if len(a) != len(b):
        return {"position": min(len(a), len(b)), "tokens": [], "margins": []}
    return None


def speed(m: Loaded, n_prompt: int, n_gen: int) -> tuple[float, float]:
    """Prefill and decode tokens/s: ``n_prompt`` tokens in one batch, then ``n_gen`` single
    tokens (decode is timed on fixed tokens, so both paths do the same work)."""
    llama_cpp.llama_memory_clear(llama_cpp.llama_get_memory(m.ctx), True)
    rng = random.Random(0)
    n_vocab = llama_cpp.llama_vocab_n_tokens(m.vocab)
    prompt = [rng.randrange(100, n_vocab) for _ in range(n_prompt)]
    t0 = time.perf_counter()
    _decode(m, prompt)
    t1 = time.perf_counter()
    for i in range(n_gen):
        _decode(m, [prompt[i % n_prompt]])
    t2 = time.perf_counter()
    return n_prompt / (t1 - t0), n_gen / (t2 - t1)


def _interval(values: list[float]) -> list[float]:
    """Median and a 90% bootstrap interval of the median."""
    rng = random.Random(1)
    meds = sorted(statistics.median(rng.choices(values, k=len(values))) for _ in range(2000))
    return [round(statistics.median(values), 3), round(meds[100], 3), round(meds[1899], 3)]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    ap.add_argument("--model", type=Path, default=None)
    ap.add_argument("--quant", default="Q4_0", choices=sorted(FTYPES))
    ap.add_argument("--passes", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--prompt-tokens", type=int, default=256)
    ap.add_argument("--gen-tokens", type=int, default=64)
    ap.add_argument("--out", type=Path, default=RESULTS)
    args = ap.parse_args()
    names = extra_buffer_names()
    with tempfile.TemporaryDirectory() as tmp:
        model = requantise(args.model or default_model_path(), Path(tmp) / "m.gguf", args.quant)
        on, off = load(model, True, args.threads), load(model, False, args.threads)
        outputs = {p: (greedy(on, p, 32), greedy(off, p, 32)) for p in PROMPTS}
        rows: list[dict[str, float]] = []
        for i in range(args.passes):  # paired passes, the order alternating
            order = [("on", on), ("off", off)] if i % 2 == 0 else [("off", off), ("on", on)]
            got = {k: speed(m, args.prompt_tokens, args.gen_tokens) for k, m in order}
            rows.append(
                {
                    "prefill_on": got["on"][0],
                    "prefill_off": got["off"][0],
                    "decode_on": got["on"][1],
                    "decode_off": got["off"][1],
                }
            )
            print(f"pass {i + 1}: " + ", ".join(f"{k} {v:.1f}" for k, v in rows[-1].items()))
        on.free()
        off.free()
    result = {
        "cpu": cpu_model(),
        "extra_buffers": list(names),
        "path_on": path_name(True, names),
        "quant": args.quant,
        "threads": args.threads,
        "passes": args.passes,
        "prompt_tokens": args.prompt_tokens,
        "gen_tokens": args.gen_tokens,
        "prefill_ratio_on_over_off": _interval([r["prefill_on"] / r["prefill_off"] for r in rows]),
        "decode_ratio_on_over_off": _interval([r["decode_on"] / r["decode_off"] for r in rows]),
        "prefill_tok_s": {k: _interval([r[f"prefill_{k}"] for r in rows]) for k in ("on", "off")},
        "decode_tok_s": {k: _interval([r[f"decode_{k}"] for r in rows]) for k in ("on", "off")},
        "greedy_identical": {p: first_divergence(a, b) is None for p, (a, b) in outputs.items()},
        "first_divergence": {p: first_divergence(a, b) for p, (a, b) in outputs.items()},
        "passes_raw": rows,
    }
    args.out.mkdir(parents=True, exist_ok=True)
    host = "amx" if "AMX" in names else platform.machine()
    path = args.out / f"{host}-{args.quant}.json"
    path.write_text(json.dumps(result, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: v for k, v in result.items() if k != "passes_raw"}, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
