"""Quality metrics with the definitions of llama.cpp's ``llama-perplexity --kl-divergence``.

Everything here is vectorised numpy over blocks of rows (one row = one scored position,
``n_vocab`` logits). The reference distribution of each row is not kept as float logits but
in llama.cpp's compact base-file form (see :func:`encode_log_probs`): per row two float32
values (``scale``, ``min_log_prob``) followed by ``n_vocab`` uint16 codes, where

    log p_ref[i] = scale * code[i] + min_log_prob

and every logit more than 16 below the row maximum is clamped to code 0. The KL divergence
skips terms whose reference log-probability is <= -16, exactly as llama.cpp does.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

F32 = npt.NDArray[np.float32]
F64 = npt.NDArray[np.float64]
I32 = npt.NDArray[np.int32]
U16 = npt.NDArray[np.uint16]
BOOL = npt.NDArray[np.bool_]

# llama.cpp: logits further than this below the maximum share the lowest code.
LOGIT_RANGE = 16.0
# llama.cpp: KL terms with log p_ref <= -16 are skipped.
LOG_PROB_FLOOR = -16.0


def row_width(n_vocab: int) -> int:
    """uint16 words per stored row: 4 (two float32) + n_vocab rounded up to even."""
    return 2 * ((n_vocab + 1) // 2) + 4


def _log_sum_exp(logits: F32, row_max: F32) -> F32:
    shifted = logits - row_max[:, None]
    np.exp(shifted, out=shifted)
    return np.log(shifted.sum(axis=1, dtype=np.float64)).astype(np.float32)


@dataclass(frozen=True)
class ReferenceBlock:
    """Stored rows plus what the reference pass needs from its exact logits."""

    rows: U16  # (n_rows, row_width(n_vocab)) in llama.cpp's base-file form
    nll: F64  # negative log-likelihood of the next token
    top: I32  # arg-max token


def encode_log_probs(logits: F32, tokens: I32) -> ReferenceBlock:
    """llama.cpp's base-file rows for these logits, and the NLL of ``tokens[r]`` per row."""
    n_rows, n_vocab = logits.shape
    row_max = logits.max(axis=1)
    row_min = np.maximum(logits.min(axis=1), row_max - np.float32(LOGIT_RANGE))
    lse = _log_sum_exp(logits, row_max)
    min_log_prob = (row_min - row_max - lse).astype(np.float32)
    scale = ((row_max - row_min) / np.float32(65535.0)).astype(np.float32)
    inv_scale = np.divide(np.float32(1.0), scale, out=np.zeros_like(scale), where=scale > 0).astype(
        np.float32
    )

    out = np.zeros((n_rows, row_width(n_vocab)), dtype=np.uint16)
    header = np.ascontiguousarray(np.stack([scale, min_log_prob], axis=1).astype("<f4"))
    out[:, :4] = header.view("<u2")
    codes = logits - row_min[:, None]
    codes *= inv_scale[:, None]
    np.rint(codes, out=codes)
    np.clip(codes, 0, 65535, out=codes)
    codes[logits <= row_min[:, None]] = 0
    out[:, 4 : 4 + n_vocab] = codes.astype(np.uint16)

    picked = logits[np.arange(n_rows), tokens].astype(np.float64)
    nll = row_max.astype(np.float64) + lse.astype(np.float64) - picked
    return ReferenceBlock(out, nll, logits.argmax(axis=1).astype(np.int32))


def decode_log_probs(rows: U16, n_vocab: int) -> F32:
    """Reference log-probabilities from stored rows (inverse of :func:`encode_log_probs`)."""
    header = np.ascontiguousarray(rows[:, :4]).view("<f4").astype(np.float32)
    scale, min_log_prob = header[:, 0], header[:, 1]
    log_p: F32 = rows[:, 4 : 4 + n_vocab].astype(np.float32)
    log_p *= scale[:, None]
    log_p += min_log_prob[:, None]
    return log_p


@dataclass(frozen=True)
class BlockMetrics:
    """Per-position values for one block of rows."""

    nll: F64
    nll_base: F64
    kld: F64
    p_diff: F64
    same_top: BOOL


def compare_block(
    logits: F32, base_rows: U16, tokens: I32, reference_top: I32 | None = None
) -> BlockMetrics:
    """KL divergence and friends of candidate ``logits`` against stored reference rows.

    ``tokens[r]`` is the token that follows row ``r``. ``reference_top`` (the reference's
    arg-max from its exact logits) is used for "same top" when given; otherwise the arg-max
    of the stored codes, as llama.cpp does.
    """
    n_rows, n_vocab = logits.shape
    rows = np.arange(n_rows)
    row_max = logits.max(axis=1)
    top = logits.argmax(axis=1)
    log_norm = row_max + _log_sum_exp(logits, row_max)  # max + log(sum exp(l - max))
    log_p = logits - log_norm[:, None]

    log_p_base = decode_log_probs(base_rows, n_vocab)
    nll = -log_p[rows, tokens].astype(np.float64)
    nll_base = -log_p_base[rows, tokens].astype(np.float64)

    p_base = np.exp(log_p_base)
    skipped = log_p_base <= np.float32(LOG_PROB_FLOOR)
    p_base[skipped] = 0.0
    log_p_base -= log_p  # now log p_base - log p
    log_p_base[skipped] = 0.0  # llama.cpp skips these terms: no 0 * inf when log p = -inf
    kld = np.einsum("ij,ij->i", p_base, log_p_base, dtype=np.float64)

    top_base = (
        reference_top if reference_top is not None else base_rows[:, 4 : 4 + n_vocab].argmax(axis=1)
    )
    p_diff = np.exp(-nll) - np.exp(-nll_base)
    return BlockMetrics(nll, nll_base, kld, p_diff, np.asarray(top == top_base))


def percentile(sorted_values: F64, fraction: float) -> float:
    """llama.cpp's percentile: linear interpolation between neighbours of sorted values."""
    if sorted_values.size == 0:
        return float("nan")
    return float(np.percentile(sorted_values, 100.0 * fraction, method="linear"))


def mean_and_uncertainty(values: F64) -> tuple[float, float]:
    """Mean and its standard error, as llama.cpp reports them (0 below 11 samples)."""
    count = values.size
    if count == 0:
        return float("nan"), 0.0
    mean = float(values.mean())
    var = float(np.mean(values * values)) - mean * mean
    unc = float(np.sqrt(var / (count - 1))) if var > 0 and count > 10 else 0.0
    return mean, unc


@dataclass(frozen=True)
class KldSummary:
    """What ``llama-perplexity --kl-divergence`` prints, percentages 0-100."""

    count: int
    ppl: float
    ppl_unc: float
    ppl_base: float
    ln_ppl_ratio: float
    ppl_ratio: float
    kld_mean: float
    kld_mean_unc: float
    kld_max: float
    kld_p99: float
    kld_p90: float
    kld_median: float
    rms_dp_pct: float
    mean_dp_pct: float
    max_abs_dp_pct: float
    same_top_pct: float
    ln_ppl_ratio_unc: float = 0.0  # llama.cpp's, from the covariance of the two NLLs
    same_top_pct_unc: float = 0.0


@dataclass
class KldAccumulator:
    """Collects :class:`BlockMetrics` over a run and summarises them."""

    _parts: list[BlockMetrics] = field(default_factory=list)

    def add(self, block: BlockMetrics) -> None:
        self._parts.append(block)

    @property
    def count(self) -> int:
        return sum(p.nll.size for p in self._parts)

    def summary(self) -> KldSummary:
        if not self._parts:
            raise ValueError("no scored positions")
        nll = np.concatenate([p.nll for p in self._parts])
        nll_base = np.concatenate([p.nll_base for p in self._parts])
        kld = np.sort(np.concatenate([p.kld for p in self._parts]))
        p_diff = np.concatenate([p.p_diff for p in self._parts])
        same = np.concatenate([p.same_top for p in self._parts])

        mean_nll, unc_nll = mean_and_uncertainty(nll)
        mean_nll_base, unc_nll_base = mean_and_uncertainty(nll_base)
        ln_ratio = mean_nll - mean_nll_base
        n = nll.size
        cov = float(np.mean(nll * nll_base) - mean_nll * mean_nll_base) / (n - 1) if n > 1 else 0.0
        ln_ratio_var = unc_nll**2 + unc_nll_base**2 - 2.0 * cov
        same_p = float(same.mean())
        kld_mean, kld_unc = mean_and_uncertainty(kld)
        return KldSummary(
            count=int(nll.size),
            ppl=float(np.exp(mean_nll)),
            ppl_unc=float(np.exp(mean_nll) * unc_nll),
            ppl_base=float(np.exp(mean_nll_base)),
            ln_ppl_ratio=ln_ratio,
            ppl_ratio=float(np.exp(ln_ratio)),
            kld_mean=kld_mean,
            kld_mean_unc=kld_unc,
            kld_max=float(kld[-1]),
            kld_p99=percentile(kld, 0.99),
            kld_p90=percentile(kld, 0.90),
            kld_median=float(np.median(kld)),
            rms_dp_pct=100.0 * float(np.sqrt(np.mean(p_diff * p_diff))),
            mean_dp_pct=100.0 * float(p_diff.mean()),
            max_abs_dp_pct=100.0 * float(np.abs(p_diff).max()),
            same_top_pct=100.0 * same_p,
            ln_ppl_ratio_unc=float(np.sqrt(ln_ratio_var)) if ln_ratio_var > 0 and n > 10 else 0.0,
            same_top_pct_unc=100.0 * float(np.sqrt(same_p * (1.0 - same_p) / (n - 1)))
            if n > 10
            else 0.0,
        )


def perplexity(nll: F64) -> tuple[float, float]:
    """PPL and its uncertainty from per-position negative log-likelihoods."""
    mean, unc = mean_and_uncertainty(nll)
    return float(np.exp(mean)), float(np.exp(mean) * unc)
