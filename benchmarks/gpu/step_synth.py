"""Step: a synthetic Llama with random weights, converted by llama.cpp's convert_hf_to_gguf.py.

GPU: ~1.26B parameters (TinyLlama's shape with full multi-head attention, so that the KV
cache of serve's largest context, 1M cells, is larger than an H200: 22 layers, hidden 2048,
32 heads, FFN 5632, vocab 32000), initialised on the GPU in bf16. Dry run: ~31M parameters,
12 layers, hidden 512 (K-quants apply; 1M cells of f32 KV exceed this machine's RAM).
The tokenizer is a SentencePiece BPE trained here on Python's own docstrings (no download);
the converter pads its vocabulary up to the config's with unused tokens.

    python -m benchmarks.gpu.step_synth --size gpu|tiny --out WORK/models
"""

from __future__ import annotations

import argparse
import json
import logging
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from benchmarks.gpu.kit_env import KitPaths, emit
from benchmarks.sp_tokenizer import train_sentencepiece

log = logging.getLogger("gpu-kit.synth")

SHAPES: dict[str, dict[str, Any]] = {
    "gpu": {
        "vocab_size": 32000,
        "hidden_size": 2048,
        "intermediate_size": 5632,
        "num_hidden_layers": 22,
        "num_attention_heads": 32,
        "num_key_value_heads": 32,
        "max_position_embeddings": 4096,
    },
    "tiny": {
        "vocab_size": 1024,
        "hidden_size": 512,
        "intermediate_size": 1024,
        "num_hidden_layers": 12,
        "num_attention_heads": 8,
        "num_key_value_heads": 8,
        "max_position_embeddings": 2048,
    },
}
TOKENIZER_PIECES = {"gpu": 2000, "tiny": 600}


def corpus_text(limit_chars: int = 2_000_000) -> str:
    """English text without a download: docstrings of the standard library's modules."""
    import importlib
    import inspect

    parts: list[str] = []
    total = 0
    for name in sorted(sys.stdlib_module_names):
        if name.startswith("_") or name in {"antigravity", "this", "idlelib", "turtledemo"}:
            continue
        try:
            module = importlib.import_module(name)
        except Exception:
            continue
        for _, obj in inspect.getmembers(module):
            doc = inspect.getdoc(obj) if callable(obj) else None
            if doc:
                parts.append(doc)
                total += len(doc)
        if total > limit_chars:
            break
    return "\n".join(parts)


def train_tokenizer(folder: Path, pieces: int) -> None:
    train_sentencepiece(
        folder,
        pieces,
        corpus_text(),
        hard_vocab_limit=False,
        input_sentence_size=200_000,
        shuffle_input_sentence=True,
    )
    (folder / "tokenizer_config.json").write_text(
        json.dumps(
            {
                "tokenizer_class": "LlamaTokenizer",
                "bos_token": "<s>",
                "eos_token": "</s>",
                "unk_token": "<unk>",
                "add_bos_token": True,
                "add_eos_token": False,
            }
        ),
        encoding="utf-8",
    )


def build_model(folder: Path, size: str, seed: int = 0) -> int:
    """Write config.json + safetensors; returns the parameter count."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(seed)
    config = LlamaConfig(**SHAPES[size], bos_token_id=1, eos_token_id=2, tie_word_embeddings=False)
    device = "cuda" if size == "gpu" and torch.cuda.is_available() else "cpu"
    with torch.device(device):
        model = LlamaForCausalLM(config)
    dtype = torch.bfloat16 if device == "cuda" else torch.float32
    model = model.to(dtype=dtype)  # type: ignore[call-arg]
    n_params = sum(p.numel() for p in model.parameters())
    model.save_pretrained(folder, safe_serialization=True)
    return int(n_params)


def convert(paths: KitPaths, folder: Path, out: Path) -> None:
    script = paths.llama_src / "convert_hf_to_gguf.py"
    cmd = [sys.executable, str(script), str(folder), "--outtype", "f16", "--outfile", str(out)]
    subprocess.run(cmd, check=True)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--size", choices=sorted(SHAPES), required=True)
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s")
    paths = KitPaths.from_env()
    hf = paths.work / "hf-synth"
    hf.mkdir(parents=True, exist_ok=True)
    paths.models.mkdir(parents=True, exist_ok=True)
    timings: dict[str, float] = {}
    t = time.perf_counter()
    train_tokenizer(hf, TOKENIZER_PIECES[args.size])
    timings["tokenizer_s"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    n_params = build_model(hf, args.size)
    timings["weights_s"] = round(time.perf_counter() - t, 1)
    t = time.perf_counter()
    out = paths.model("F16")
    convert(paths, hf, out)
    timings["convert_s"] = round(time.perf_counter() - t, 1)
    emit(
        {
            "ok": out.is_file(),
            "n_params": n_params,
            "shape": SHAPES[args.size],
            "f16_bytes": out.stat().st_size if out.is_file() else None,
            **timings,
        }
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
