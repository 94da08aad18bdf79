"""Speed of each model (a short fixed measurement) and greedy answers to the same prompts."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

import assets
from backend.compare.errors import CompareCancelledError, EvaluationTextError
from backend.compare.llama_model import Context, LoadedModel
from backend.compare.metrics import I32

SPEED_PROMPT_TOKENS = 128
SPEED_GEN_TOKENS = 32
ANSWER_MAX_TOKENS = 48
GEN_CTX = 512  # context for the speed measurement and the answers

DEFAULT_PROMPTS_FILE = Path(assets.__file__).resolve().parent / "compare" / "prompts.txt"


@dataclass(frozen=True)
class Speed:
    prompt_tok_s: float
    gen_tok_s: float


def _greedy_step(ctx: Context, token: int, pos: int) -> int:
    ctx.decode(
        np.array([token], np.int32),
        np.array([pos], np.int32),
        np.zeros(1, np.int32),
        np.ones(1, np.int8),
    )
    return int(ctx.logits(1)[0].argmax())


def measure_speed(ctx: Context, tokens: I32) -> Speed:
    """Prompt tok/s over one batch of 128 tokens, then generation tok/s over 32 greedy steps."""
    prompt = tokens[:SPEED_PROMPT_TOKENS].astype(np.int32)
    n = prompt.size
    want = np.zeros(n, np.int8)
    want[-1] = 1
    # warm-up: the first decode of a fresh context allocates its compute buffers
    ctx.clear()
    ctx.decode(prompt[:8], np.arange(8, dtype=np.int32), np.zeros(8, np.int32), want[-8:])
    ctx.clear()
    started = time.perf_counter()
    ctx.decode(prompt, np.arange(n, dtype=np.int32), np.zeros(n, np.int32), want)
    next_token = int(ctx.logits(1)[0].argmax())
    prompt_s = time.perf_counter() - started
    started = time.perf_counter()
    for i in range(SPEED_GEN_TOKENS):
        next_token = _greedy_step(ctx, next_token, n + i)
    gen_s = time.perf_counter() - started
    ctx.clear()
    return Speed(prompt_tok_s=n / prompt_s, gen_tok_s=SPEED_GEN_TOKENS / gen_s)


def greedy_answer(
    model: LoadedModel, ctx: Context, prompt: str, max_tokens: int = ANSWER_MAX_TOKENS
) -> str:
    """The model's greedy reply to ``prompt`` (chat template applied when the model has one)."""
    text, templated = model.chat_prompt(prompt)
    tokens = model.tokenize(text, add_special=True, parse_special=templated)
    tokens = tokens[-(GEN_CTX - max_tokens - 1) :]
    n = tokens.size
    want = np.zeros(n, np.int8)
    want[-1] = 1
    ctx.clear()
    ctx.decode(tokens, np.arange(n, dtype=np.int32), np.zeros(n, np.int32), want)
    token = int(ctx.logits(1)[0].argmax())
    out = bytearray()
    for i in range(max_tokens):
        if model.is_eog(token):
            break
        out += model.piece(token)
        if i + 1 < max_tokens:
            token = _greedy_step(ctx, token, n + i)
    ctx.clear()
    return out.decode("utf-8", "replace").strip()


def answer_all(
    model: LoadedModel,
    ctx: Context,
    prompts: list[str],
    max_tokens: int = ANSWER_MAX_TOKENS,
    cancel: threading.Event | None = None,
) -> list[str]:
    answers = []
    for prompt in prompts:
        if cancel is not None and cancel.is_set():
            raise CompareCancelledError("comparison cancelled")
        answers.append(greedy_answer(model, ctx, prompt, max_tokens))
    return answers


def load_prompts(path: Path | None) -> list[str]:
    """One prompt per non-empty line (``#`` starts a comment line); the default set if None."""
    source = path or DEFAULT_PROMPTS_FILE
    try:
        lines = source.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise EvaluationTextError(f"cannot read prompts {source}: {exc}") from exc
    prompts = [ln.strip() for ln in lines if ln.strip() and not ln.lstrip().startswith("#")]
    if not prompts:
        raise EvaluationTextError(f"no prompts in {source}")
    return prompts
