"""Perplexity passes over the evaluation tokens, the way ``llama-perplexity`` runs them.

The text is tokenised once and cut into ``n_chunk`` chunks of ``n_ctx`` tokens. The first
token of every chunk becomes BOS (when the vocabulary adds one) and only the second half of
each chunk is scored: row ``j`` (position ``n_ctx//2 + j``) predicts the next token. ``n_seq``
chunks go into one ``llama_decode``, each as its own sequence id, like llama-perplexity's
``n_seq = n_batch / n_ctx``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from backend.compare.base_logits import BaseLogitsReader, BaseLogitsWriter, scored_per_chunk
from backend.compare.errors import CompareCancelledError
from backend.compare.llama_model import Context, LoadedModel
from backend.compare.metrics import (
    F32,
    F64,
    I32,
    U16,
    BlockMetrics,
    KldAccumulator,
    KldSummary,
    ReferenceBlock,
    compare_block,
    encode_log_probs,
    perplexity,
)

log = logging.getLogger(__name__)

ROW_BLOCK = 64  # rows of n_vocab processed at once by numpy (SmolLM2: 12 MiB per float array)

# (done, total) after each decode
StepCallback = Callable[[int, int], None]


@dataclass(frozen=True)
class ChunkPlan:
    """Which tokens are evaluated and how they are batched."""

    tokens: I32  # (n_chunk * n_ctx,) original tokens, as stored in the base file
    n_ctx: int
    n_seq: int
    add_bos: bool
    bos: int

    @property
    def n_chunk(self) -> int:
        return self.tokens.size // self.n_ctx

    @property
    def first(self) -> int:
        return self.n_ctx // 2

    @property
    def n_groups(self) -> int:
        return -(-self.n_chunk // self.n_seq)


def make_plan(
    all_tokens: I32, n_ctx: int, n_batch: int, max_chunks: int | None, add_bos: bool, bos: int
) -> ChunkPlan:
    n_chunk = all_tokens.size // n_ctx
    if max_chunks is not None:
        n_chunk = min(n_chunk, max_chunks)
    n_seq = max(1, min(n_batch // n_ctx, n_chunk))
    return ChunkPlan(all_tokens[: n_chunk * n_ctx].astype(np.int32), n_ctx, n_seq, add_bos, bos)


def _check(cancel: threading.Event | None) -> None:
    if cancel is not None and cancel.is_set():
        raise CompareCancelledError("comparison cancelled")


def iter_group_logits(
    ctx: Context, plan: ChunkPlan, cancel: threading.Event | None, on_step: StepCallback | None
) -> Iterator[tuple[int, int, F32]]:
    """Yield ``(first_chunk, n_chunks, logits)`` per decode, logits shaped
    ``(n_chunks * scored_per_chunk, n_vocab)`` in chunk order.

    The arrays are views of llama.cpp's buffer: consume each before asking for the next.
    """
    n_ctx, first = plan.n_ctx, plan.first
    per_chunk = scored_per_chunk(n_ctx)
    chunks = plan.tokens.reshape(plan.n_chunk, n_ctx)
    pos_one = np.arange(n_ctx, dtype=np.int32)
    want_one = (pos_one >= first) & (pos_one < n_ctx - 1)
    for group, start in enumerate(range(0, plan.n_chunk, plan.n_seq)):
        _check(cancel)
        n_seq_batch = min(plan.n_seq, plan.n_chunk - start)
        tokens = chunks[start : start + n_seq_batch].copy()
        if plan.add_bos:
            tokens[:, 0] = plan.bos
        ctx.clear()
        ctx.decode(
            tokens.reshape(-1),
            np.tile(pos_one, n_seq_batch),
            np.repeat(np.arange(n_seq_batch, dtype=np.int32), n_ctx),
            np.tile(want_one, n_seq_batch),
        )
        yield start, n_seq_batch, ctx.logits(n_seq_batch * per_chunk)
        if on_step is not None:
            on_step(group + 1, plan.n_groups)


def _targets(plan: ChunkPlan, start: int, n_chunks: int) -> I32:
    """The token after each scored position of chunks ``start .. start + n_chunks - 1``."""
    chunks = plan.tokens.reshape(plan.n_chunk, plan.n_ctx)[start : start + n_chunks]
    return np.ascontiguousarray(chunks[:, plan.first + 1 :]).reshape(-1)


def _encode_blocks(pool: ThreadPoolExecutor, logits: F32, targets: I32) -> list[ReferenceBlock]:
    """Encode rows in blocks of ROW_BLOCK on the pool's threads (numpy releases the GIL)."""

    def one(r: int) -> ReferenceBlock:
        return encode_log_probs(logits[r : r + ROW_BLOCK], targets[r : r + ROW_BLOCK])

    return list(pool.map(one, range(0, logits.shape[0], ROW_BLOCK)))


def _compare_blocks(
    pool: ThreadPoolExecutor, logits: F32, rows: U16, targets: I32, top: I32 | None
) -> list[BlockMetrics]:
    def one(r: int) -> BlockMetrics:
        sl = slice(r, r + ROW_BLOCK)
        ref_top = None if top is None else top[sl]
        return compare_block(logits[sl], np.asarray(rows[sl]), targets[sl], ref_top)

    return list(pool.map(one, range(0, logits.shape[0], ROW_BLOCK)))


@dataclass(frozen=True)
class ReferencePass:
    """What the reference pass leaves behind besides the base file."""

    ppl: float
    ppl_unc: float
    nll: F64
    top: I32  # the reference's exact arg-max at each scored position


def score_reference(
    model: LoadedModel,
    ctx: Context,
    plan: ChunkPlan,
    writer: BaseLogitsWriter,
    cancel: threading.Event | None = None,
    on_step: StepCallback | None = None,
) -> ReferencePass:
    """Perplexity of the reference; writes its log-probabilities to ``writer``."""
    nll_parts: list[F64] = []
    top_parts: list[I32] = []
    with ThreadPoolExecutor(max_workers=model.n_threads) as pool:
        for start, n_chunks, logits in iter_group_logits(ctx, plan, cancel, on_step):
            targets = _targets(plan, start, n_chunks)
            for block in _encode_blocks(pool, logits, targets):
                writer.write_rows(block.rows)
                nll_parts.append(block.nll)
                top_parts.append(block.top)
    nll = np.concatenate(nll_parts)
    ppl, unc = perplexity(nll)
    log.info("reference %s: PPL %.4f over %d positions", model.path.name, ppl, nll.size)
    return ReferencePass(ppl, unc, nll, np.concatenate(top_parts).astype(np.int32))


def score_candidate(
    ctx: Context,
    plan: ChunkPlan,
    base: BaseLogitsReader,
    reference_top: I32 | None,
    cancel: threading.Event | None = None,
    on_step: StepCallback | None = None,
) -> KldSummary:
    """KL divergence, PPL ratio, Δp and top agreement of a candidate against the base file."""
    acc = KldAccumulator()
    per_chunk = base.per_chunk
    with ThreadPoolExecutor(max_workers=ctx.model.n_threads) as pool:
        for start, n_chunks, logits in iter_group_logits(ctx, plan, cancel, on_step):
            targets = _targets(plan, start, n_chunks)
            row0 = start * per_chunk
            rows = base.rows(row0, n_chunks * per_chunk)
            top = (
                reference_top[row0 : row0 + logits.shape[0]] if reference_top is not None else None
            )
            for block in _compare_blocks(pool, logits, rows, targets, top):
                acc.add(block)
    return acc.summary()
