"""A small KL-divergence helper for the tests: mean KL(reference || candidate) per token."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import numpy.typing as npt


def _log_softmax(logits: npt.NDArray[np.float32]) -> npt.NDArray[np.float64]:
    x = logits.astype(np.float64)
    x -= x.max(axis=-1, keepdims=True)
    return x - np.log(np.exp(x).sum(axis=-1, keepdims=True))


def _chunks(model_path: Path, text: str, n_ctx: int, max_chunks: int) -> list[list[int]]:
    from llama_cpp import Llama

    llm = Llama(model_path=str(model_path), n_ctx=n_ctx, vocab_only=True, verbose=False)
    tokens = llm.tokenize(text.encode("utf-8"), add_bos=False)
    bos = llm.token_bos()
    body = n_ctx - 1
    return [[bos, *tokens[i : i + body]] for i in range(0, len(tokens), body)][:max_chunks]


def mean_kld(
    reference: Path, candidates: list[Path], text: str, *, n_ctx: int = 256, max_chunks: int = 3
) -> list[float]:
    """Mean per-token KL divergence of each candidate's next-token distribution."""
    from llama_cpp import Llama

    chunks = _chunks(reference, text, n_ctx, max_chunks)
    models = [
        Llama(model_path=str(p), n_ctx=n_ctx, logits_all=True, verbose=False, n_threads=2)
        for p in [reference, *candidates]
    ]
    totals = np.zeros(len(candidates))
    count = 0
    for chunk in chunks:
        logps = []
        for llm in models:
            llm.reset()
            llm.eval(chunk)
            logps.append(_log_softmax(np.array(llm.scores[: len(chunk)], dtype=np.float32)))
        ref = logps[0]
        p = np.exp(ref)
        for i, cand in enumerate(logps[1:]):
            totals[i] += float((p * (ref - cand)).sum())
        count += len(chunk)
    for llm in models:
        llm.close()
    return [float(t / count) for t in totals]
