"""``run_compare``: one reference, several candidates, the same text, prompts and settings.

1. Load the reference, tokenise the text once, run it chunk by chunk (``n_seq`` chunks per
   decode), keep its perplexity and write its log-probabilities to the base file
   (:mod:`backend.compare.base_logits`); then measure its speed and answers.
2. For each candidate: check it tokenises the text identically, run the same chunks and
   compare each scored position against the base file; speed; answers.

Only one model is loaded at a time. Progress is reported per decode; ``cancel`` is checked
between decodes and between answers.
"""

from __future__ import annotations

import logging
import threading
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from backend.compare.base_logits import BaseLogitsReader, BaseLogitsWriter
from backend.compare.errors import EvaluationTextError, IncompatibleModelsError, ModelLoadError
from backend.compare.eval_text import DEFAULT_MAX_CHARS, load_text
from backend.compare.generation import (
    ANSWER_MAX_TOKENS,
    GEN_CTX,
    answer_all,
    load_prompts,
    measure_speed,
)
from backend.compare.llama_model import LoadedModel, default_threads
from backend.compare.results import Answer, CandidateResult, CompareResult, ReferenceResult
from backend.compare.scoring import ChunkPlan, make_plan, score_candidate, score_reference
from backend.compare.scratch import base_file_bytes, check_space, scratch_folder
from backend.jobs.progress import Progress, ProgressCallback, no_progress

log = logging.getLogger(__name__)


@dataclass
class CompareConfig:
    reference: Path
    candidates: list[Path]
    text_path: Path | None = None  # None: the built-in text (Python stdlib docstrings)
    max_text_chars: int = DEFAULT_MAX_CHARS
    n_ctx: int = 512
    n_batch: int = 2048  # n_seq = n_batch // n_ctx chunks per decode, as llama-perplexity
    max_chunks: int | None = None
    prompts_path: Path | None = None  # None: assets/compare/prompts.txt
    answers: bool = True
    answer_max_tokens: int = ANSWER_MAX_TOKENS
    speed: bool = True
    threads: int | None = None
    n_gpu_layers: int = 0
    keep_base: Path | None = None  # also keep the llama.cpp-format base file here


def _facts(model: LoadedModel, path: Path) -> dict[str, object]:
    size = path.stat().st_size
    return {
        "path": str(path),
        "name": path.stem,
        "size_bytes": size,
        "n_params": model.n_params,
        # tensor bytes only, as llama.cpp counts bits per weight (not the tokenizer metadata)
        "bpw": 8.0 * model.tensor_bytes / model.n_params if model.n_params else float("nan"),
        "load_s": model.load_s,
        "prompt_tok_s": float("nan"),
        "gen_tok_s": float("nan"),
    }


def _load(path: Path, config: CompareConfig, *, vocab_only: bool = False) -> LoadedModel:
    if not path.is_file():
        raise ModelLoadError(f"model file not found: {path}")
    return LoadedModel(path, config.threads, config.n_gpu_layers, vocab_only=vocab_only)


def _check_candidates(config: CompareConfig, n_vocab: int, text: str, tokens: np.ndarray) -> None:
    """Every candidate loads and tokenises the text as the reference does: found before
    the reference pass, not hours later at that candidate's turn."""
    for path in config.candidates:
        with _load(path, config, vocab_only=True) as model:
            if model.n_vocab != n_vocab or not np.array_equal(
                model.tokenize(text, add_special=True), tokens
            ):
                raise IncompatibleModelsError(
                    f"{path.name} does not share the reference's tokenizer; "
                    "KL divergence needs the same vocabulary"
                )


def _speed_and_answers(
    model: LoadedModel,
    facts: dict[str, object],
    plan: ChunkPlan,
    prompts: list[str],
    config: CompareConfig,
    cancel: threading.Event | None,
) -> list[str]:
    if not (config.speed or config.answers):
        return []
    ctx = model.context(GEN_CTX, GEN_CTX, 1)
    try:
        if config.speed:
            speed = measure_speed(ctx, plan.tokens)
            facts["prompt_tok_s"], facts["gen_tok_s"] = speed.prompt_tok_s, speed.gen_tok_s
        return (
            answer_all(model, ctx, prompts, config.answer_max_tokens, cancel)
            if config.answers
            else []
        )
    finally:
        ctx.close()


def run_compare(
    config: CompareConfig,
    progress: ProgressCallback = no_progress,
    cancel: threading.Event | None = None,
) -> CompareResult:
    if not config.candidates:
        raise ModelLoadError("give at least one candidate GGUF")
    text = load_text(config.text_path, config.max_text_chars)
    prompts = load_prompts(config.prompts_path) if config.answers else []
    phases = 1 + len(config.candidates)  # phase 0: the reference; phase k: candidate k
    with scratch_folder() as tmp:
        base_path = config.keep_base or tmp / "reference.kld"
        progress(Progress("reference", 0, 1, f"loading {config.reference.name}", 0, 0, phases))
        with _load(config.reference, config) as ref_model:
            tokens = ref_model.tokenize(text.text, add_special=True)
            if tokens.size < 2 * config.n_ctx:
                raise EvaluationTextError(
                    f"the text has {tokens.size} tokens; at least {2 * config.n_ctx} are needed "
                    f"for --ctx {config.n_ctx}"
                )
            _check_candidates(config, ref_model.n_vocab, text.text, tokens)
            plan = make_plan(
                tokens,
                config.n_ctx,
                config.n_batch,
                config.max_chunks,
                ref_model.add_bos,
                ref_model.bos,
            )
            log.info(
                "%d tokens, %d chunks of %d, %d per decode",
                tokens.size,
                plan.n_chunk,
                plan.n_ctx,
                plan.n_seq,
            )
            check_space(base_path, base_file_bytes(plan.n_chunk, plan.n_ctx, ref_model.n_vocab))
            n_seq_ctx = plan.n_ctx * plan.n_seq
            ctx = ref_model.context(n_seq_ctx, n_seq_ctx, plan.n_seq, cancel)
            writer = BaseLogitsWriter(base_path, plan.n_ctx, ref_model.n_vocab, plan.tokens)

            group_tokens = plan.n_seq * plan.n_ctx

            def ref_step(done: int, total: int) -> None:
                name = config.reference.name
                progress(Progress("reference", done, total, name, done * group_tokens, 0, phases))

            try:
                ref_pass = score_reference(ref_model, ctx, plan, writer, cancel, ref_step)
                writer.commit()
            except BaseException:
                writer.abort()
                raise
            finally:
                ctx.close()
            ref_facts = _facts(ref_model, config.reference)
            if config.answers or config.speed:
                message = f"{config.reference.name}: speed, answers"
                progress(Progress("answers", 0, 1, message, 0, 0, phases))
            ref_answers = _speed_and_answers(ref_model, ref_facts, plan, prompts, config, cancel)
        reference = ReferenceResult(**ref_facts, ppl=ref_pass.ppl, ppl_unc=ref_pass.ppl_unc)  # type: ignore[arg-type]

        base = BaseLogitsReader(base_path)
        candidates: list[CandidateResult] = []
        cand_answers: list[list[str]] = []
        for index, path in enumerate(config.candidates, start=1):
            stage = f"candidate {index}/{len(config.candidates)}"
            loading = f"loading {path.name}"
            progress(Progress(stage, 0, plan.n_groups, loading, 0, index, phases))
            with _load(path, config) as model:  # its tokenizer was checked up front
                base.check_matches(plan.n_ctx, model.n_vocab, plan.tokens)
                ctx = model.context(n_seq_ctx, n_seq_ctx, plan.n_seq, cancel)

                def cand_step(
                    done: int,
                    total: int,
                    stage: str = stage,
                    name: str = path.name,
                    phase: int = index,
                ) -> None:
                    tokens = done * group_tokens
                    progress(Progress(stage, done, total, name, tokens, phase, phases))

                started = time.perf_counter()
                try:
                    summary = score_candidate(ctx, plan, base, ref_pass.top, cancel, cand_step)
                finally:
                    ctx.close()
                eval_s = time.perf_counter() - started
                facts = _facts(model, path)
                if config.answers or config.speed:
                    message = f"{path.name}: speed, answers"
                    progress(Progress("answers", 0, 1, message, 0, index, phases))
                cand_answers.append(_speed_and_answers(model, facts, plan, prompts, config, cancel))
            candidates.append(
                CandidateResult(
                    **facts,  # type: ignore[arg-type]
                    ppl=summary.ppl,
                    ppl_unc=summary.ppl_unc,
                    ppl_ratio=summary.ppl_ratio,
                    ln_ppl_ratio=summary.ln_ppl_ratio,
                    kld_mean=summary.kld_mean,
                    kld_mean_unc=summary.kld_mean_unc,
                    kld_max=summary.kld_max,
                    kld_p99=summary.kld_p99,
                    kld_p90=summary.kld_p90,
                    kld_median=summary.kld_median,
                    rms_dp_pct=summary.rms_dp_pct,
                    mean_dp_pct=summary.mean_dp_pct,
                    max_abs_dp_pct=summary.max_abs_dp_pct,
                    same_top_pct=summary.same_top_pct,
                    ln_ppl_ratio_unc=summary.ln_ppl_ratio_unc,
                    same_top_pct_unc=summary.same_top_pct_unc,
                    eval_s=eval_s,
                )
            )
            log.info(
                "%s: KLD %.5f, PPL ratio %.4f, same top %.2f%%",
                path.name,
                summary.kld_mean,
                summary.ppl_ratio,
                summary.same_top_pct,
            )
        del base  # release the memory map before the temp folder goes

    answers = [
        Answer(prompt=p, reference=ref_answers[i], candidates=[a[i] for a in cand_answers])
        for i, p in enumerate(prompts)
    ]
    settings = {
        "n_ctx": plan.n_ctx,
        "n_seq": plan.n_seq,
        "n_chunk": plan.n_chunk,
        "scored_tokens": int(ref_pass.nll.size),
        "text_tokens": int(tokens.size),
        "text_source": text.source,
        "threads": config.threads or default_threads(),
        "base_file_format": "llama.cpp kld-base (uint16 log-softmax, per-row scale/min)",
        "base_file": str(config.keep_base) if config.keep_base else None,
    }
    return CompareResult(reference, candidates, answers, settings)
