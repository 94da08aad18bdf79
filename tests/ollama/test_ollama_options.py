"""Ollama's ``options`` in our request fields (no model)."""

from __future__ import annotations

from backend.server.ollama.options import sampling_fields


def test_options_become_the_chat_fields_they_mean() -> None:
    fields = sampling_fields(
        {"temperature": 0.2, "num_predict": 7, "seed": -1, "num_keep": 24, "num_ctx": 4096}
    )
    # num_keep is what a context shift keeps (serve --context-shift); num_ctx is the
    # served model's, not a request's; seed -1 is Ollama's "random"
    assert fields == {"temperature": 0.2, "max_tokens": 7, "n_keep": 24}
