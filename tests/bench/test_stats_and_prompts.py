"""Order statistics and synthetic prompts."""

from __future__ import annotations

import math

import pytest

from backend.bench.prompts import request_prompt, shared_prefix, synthetic_text
from backend.bench.stats import median, percentile


def test_percentile_interpolates_like_numpy() -> None:
    values = [5.0, 1.0, 3.0, 2.0, 4.0]
    assert percentile(values, 0) == 1.0
    assert percentile(values, 50) == 3.0
    assert percentile(values, 100) == 5.0
    assert percentile(values, 25) == 2.0
    assert percentile(list(range(101)), 99) == pytest.approx(99.0)
    assert percentile([1.0, 2.0], 99) == pytest.approx(1.99)
    assert math.isnan(percentile([], 50))
    assert median([3.0, math.nan, 1.0]) == 2.0


def test_prompts_are_deterministic_distinct_and_sized() -> None:
    assert synthetic_text(40, 7) == synthetic_text(40, 7)
    assert synthetic_text(40, 7) != synthetic_text(40, 8)
    assert len(request_prompt(64, "a").split()) == 64
    prefix = shared_prefix(1000, "x")
    assert len(prefix.split()) == 1000
    assert prefix == shared_prefix(1000, "x") != shared_prefix(1000, "y")
    assert shared_prefix(0, "x") == ""
    # distinct requests diverge within their first few words
    a, b = request_prompt(64, "1").split(), request_prompt(64, "2").split()
    assert a[:3] != b[:3]


def test_prompt_lengths_match_a_real_tokenizer(smollm2_path: object) -> None:
    """With SmolLM2's own tokenizer, n synthetic words are n tokens (give or take a few)."""
    import llama_cpp

    llm = llama_cpp.Llama(str(smollm2_path), vocab_only=True, verbose=False)
    for key in ("a", "b", "c"):
        n = len(llm.tokenize(request_prompt(64, key).encode(), add_bos=False))
        assert 62 <= n <= 66
    n = len(llm.tokenize(shared_prefix(1000, "x").encode(), add_bos=False))
    assert 990 <= n <= 1010


def test_code_file_size_with_a_real_tokenizer(smollm2_path: object) -> None:
    """The edit scenario's file is about 400 SmolLM2 tokens, whatever the key picks."""
    import llama_cpp

    from backend.bench.task_prompts import code_file

    llm = llama_cpp.Llama(str(smollm2_path), vocab_only=True, verbose=False)
    sizes = [
        len(llm.tokenize(code_file(400, str(k)).code.encode(), add_bos=False)) for k in range(12)
    ]
    assert all(360 <= n <= 440 for n in sizes), sizes
    assert len({code_file(400, str(k)).code for k in range(12)}) == 12
    assert code_file(400, "a") == code_file(400, "a")
