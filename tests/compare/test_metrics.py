"""Each metric on small distributions whose values are worked out by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from backend.compare.metrics import (
    BlockMetrics,
    KldAccumulator,
    compare_block,
    decode_log_probs,
    encode_log_probs,
    mean_and_uncertainty,
    percentile,
    row_width,
)

LN2 = math.log(2.0)


def _logits(*probs: list[float]) -> np.ndarray:
    return np.log(np.array(probs, dtype=np.float64)).astype(np.float32)


def _tokens(*ids: int) -> np.ndarray:
    return np.array(ids, dtype=np.int32)


def test_row_width_matches_llama_cpp() -> None:
    assert row_width(3) == 8  # 4 header words + 3 rounded up to 4
    assert row_width(49152) == 49156


def test_encoding_round_trip_is_within_one_step() -> None:
    rng = np.random.default_rng(0)
    logits = (rng.standard_normal((5, 1000)) * 4).astype(np.float32)
    block = encode_log_probs(logits, _tokens(1, 2, 3, 4, 5))
    decoded = decode_log_probs(block.rows, 1000)
    exact = logits - np.log(np.exp(logits.astype(np.float64)).sum(axis=1, keepdims=True))
    near_top = logits > logits.max(axis=1, keepdims=True) - 16
    step = 16.0 / 65535
    assert np.max(np.abs(decoded - exact)[near_top]) <= step
    # exact NLL of the picked tokens
    want = -exact[np.arange(5), [1, 2, 3, 4, 5]]
    assert np.allclose(block.nll, want, atol=1e-5)
    assert np.array_equal(block.top, logits.argmax(axis=1))


def test_kld_of_hand_computed_pair() -> None:
    # p = (1/2, 1/4, 1/4), q = (1/4, 1/2, 1/4):
    # KL(p||q) = 1/2 ln 2 + 1/4 ln(1/2) + 0 = ln(2)/4
    ref = encode_log_probs(_logits([0.5, 0.25, 0.25]), _tokens(0))
    m = compare_block(_logits([0.25, 0.5, 0.25]), ref.rows, _tokens(0))
    assert m.kld[0] == pytest.approx(LN2 / 4, abs=1e-4)
    assert m.nll[0] == pytest.approx(math.log(4), abs=1e-5)  # candidate p(token 0) = 1/4
    assert m.nll_base[0] == pytest.approx(math.log(2), abs=1e-4)  # reference p = 1/2
    assert m.p_diff[0] == pytest.approx(0.25 - 0.5, abs=1e-4)
    assert not m.same_top[0]  # reference top is 0, candidate top is 1


def test_identical_distributions_have_zero_kld_and_same_top() -> None:
    logits = _logits([0.7, 0.2, 0.1], [0.1, 0.1, 0.8])
    ref = encode_log_probs(logits, _tokens(2, 2))
    m = compare_block(logits, ref.rows, _tokens(2, 2), ref.top)
    assert np.all(np.abs(m.kld) < 1e-6)
    assert np.all(m.same_top)
    assert np.allclose(m.p_diff, 0.0, atol=1e-4)


def test_kld_skips_reference_terms_below_minus_16() -> None:
    # reference puts e^-30 on token 1: that term is dropped, so KL = 1 * (0 - ln(1/2)) = ln 2
    ref = encode_log_probs(np.array([[0.0, -30.0]], dtype=np.float32), _tokens(0))
    m = compare_block(np.array([[0.0, 0.0]], dtype=np.float32), ref.rows, _tokens(0))
    assert m.kld[0] == pytest.approx(LN2, abs=1e-4)


def test_same_top_falls_back_to_stored_codes() -> None:
    ref = encode_log_probs(_logits([0.1, 0.6, 0.3]), _tokens(0))
    assert compare_block(_logits([0.2, 0.5, 0.3]), ref.rows, _tokens(0)).same_top[0]
    assert not compare_block(_logits([0.5, 0.2, 0.3]), ref.rows, _tokens(0)).same_top[0]


def test_percentile_is_llama_cpp_linear_interpolation() -> None:
    values = np.array([1.0, 2.0, 3.0, 4.0, 5.0])
    assert percentile(values, 0.9) == pytest.approx(4.6)  # p = 0.9 * 4 = 3.6 -> 4 + 0.6
    assert percentile(values, 0.99) == pytest.approx(4.96)
    assert percentile(values, 0.5) == pytest.approx(3.0)


def test_mean_and_uncertainty_needs_more_than_ten_values() -> None:
    assert mean_and_uncertainty(np.array([1.0, 3.0])) == (2.0, 0.0)
    values = np.arange(12, dtype=np.float64)
    mean, unc = mean_and_uncertainty(values)
    assert mean == pytest.approx(5.5)
    assert unc == pytest.approx(np.sqrt(np.var(values) / 11))


def test_summary_combines_blocks() -> None:
    acc = KldAccumulator()
    acc.add(
        BlockMetrics(
            nll=np.array([1.0, 2.0]),
            nll_base=np.array([1.0, 1.0]),
            kld=np.array([0.1, 0.3]),
            p_diff=np.array([0.1, -0.1]),
            same_top=np.array([True, False]),
        )
    )
    acc.add(
        BlockMetrics(
            nll=np.array([3.0, 2.0]),
            nll_base=np.array([2.0, 2.0]),
            kld=np.array([0.0, 0.2]),
            p_diff=np.array([0.2, 0.0]),
            same_top=np.array([True, True]),
        )
    )
    s = acc.summary()
    assert s.count == 4
    assert s.ppl == pytest.approx(math.exp(2.0))
    assert s.ppl_base == pytest.approx(math.exp(1.5))
    assert s.ppl_ratio == pytest.approx(math.exp(0.5))
    assert s.kld_mean == pytest.approx(0.15)
    assert s.kld_max == pytest.approx(0.3)
    assert s.kld_median == pytest.approx(0.15)  # mean of the middle two, 0.1 and 0.2
    assert s.kld_p90 == pytest.approx(0.27)  # sorted 0, .1, .2, .3; p = 2.7 -> .2 + .7 * .1
    assert s.rms_dp_pct == pytest.approx(100 * math.sqrt((0.01 + 0.01 + 0.04) / 4))
    assert s.same_top_pct == pytest.approx(75.0)


def test_a_dropped_reference_term_stays_finite_against_minus_infinity() -> None:
    """A candidate that rules a token out (-inf) where the reference's term is skipped:
    llama.cpp skips the term, so the divergence is finite (no 0 * inf = NaN)."""
    ref = encode_log_probs(np.array([[0.0, -30.0]], dtype=np.float32), _tokens(0))
    cand = np.array([[0.0, -np.inf]], dtype=np.float32)
    m = compare_block(cand, ref.rows, _tokens(0))
    assert np.isfinite(m.kld[0]) and m.kld[0] == pytest.approx(0.0, abs=1e-4)


def test_ratio_and_same_top_uncertainties_follow_llama_cpp() -> None:
    rng = np.random.default_rng(3)
    nll_base = rng.gamma(2.0, 1.0, 400)
    nll = nll_base + rng.normal(0.05, 0.1, 400)  # a close quant: strongly correlated NLLs
    same = rng.random(400) < 0.9
    acc = KldAccumulator()
    acc.add(BlockMetrics(nll, nll_base, np.abs(nll - nll_base), nll * 0, same))
    s = acc.summary()
    n = nll.size
    diff = nll - nll_base  # var(a - b) = var a + var b - 2 cov: the paired standard error
    assert s.ln_ppl_ratio_unc == pytest.approx(np.sqrt(np.var(diff) / (n - 1)), rel=1e-6)
    # pairing matters: treating the two runs as independent would be ~10x wider here
    unpaired = np.sqrt((np.var(nll) + np.var(nll_base)) / (n - 1))
    assert s.ln_ppl_ratio_unc < unpaired / 5
    p = same.mean()
    assert s.same_top_pct_unc == pytest.approx(100 * np.sqrt(p * (1 - p) / (n - 1)))
