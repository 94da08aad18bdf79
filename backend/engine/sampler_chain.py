"""Build one llama.cpp sampler chain per sequence from :class:`SamplingParams`."""

from __future__ import annotations

import random

import llama_cpp

from backend.engine.errors import InvalidRequestError
from backend.engine.request_types import SamplingParams


class SamplerChain:
    """Owns a ``llama_sampler`` chain; free it with :meth:`close`."""

    def __init__(
        self, params: SamplingParams, vocab: object, n_vocab: int, eog: frozenset[int]
    ) -> None:
        sparams = llama_cpp.llama_sampler_chain_default_params()
        sparams.no_perf = True
        self.chain = llama_cpp.llama_sampler_chain_init(sparams)
        add = self._add
        bias = dict(params.logit_bias)
        if params.ignore_eos:
            for token in eog:
                bias[token] = float("-inf")
        if bias:
            for token in bias:
                if not 0 <= token < n_vocab:
                    self.close()
                    raise InvalidRequestError(
                        f"logit_bias token {token} is outside the vocabulary (0..{n_vocab - 1})",
                        param="logit_bias",
                    )
            arr = (llama_cpp.llama_logit_bias * len(bias))()
            for i, (token, value) in enumerate(bias.items()):
                arr[i].token = token  # type: ignore[assignment]
                arr[i].bias = value
            self._keep = arr
            add(llama_cpp.llama_sampler_init_logit_bias(n_vocab, len(bias), arr))
        if params.grammar:
            grammar = llama_cpp.llama_sampler_init_grammar(vocab, params.grammar.encode(), b"root")
            if not grammar:
                self.close()
                raise InvalidRequestError("the grammar could not be parsed", param="grammar")
            add(grammar)
        if (
            params.repeat_penalty != 1.0
            or params.presence_penalty != 0.0
            or params.frequency_penalty != 0.0
        ):
            add(
                llama_cpp.llama_sampler_init_penalties(
                    n_vocab,
                    params.penalty_last_n,
                    params.repeat_penalty,
                    params.frequency_penalty,
                    params.presence_penalty,
                )
            )
        if params.greedy:
            add(llama_cpp.llama_sampler_init_greedy())
            return
        if params.top_k > 0:
            add(llama_cpp.llama_sampler_init_top_k(params.top_k))
        if params.top_p < 1.0:
            add(llama_cpp.llama_sampler_init_top_p(params.top_p, 1))
        if params.min_p > 0.0:
            add(llama_cpp.llama_sampler_init_min_p(params.min_p, 1))
        add(llama_cpp.llama_sampler_init_temp(params.temperature))
        seed = (
            params.seed if params.seed is not None and params.seed >= 0 else random.getrandbits(32)
        )
        add(llama_cpp.llama_sampler_init_dist(seed & 0xFFFFFFFF))

    def _add(self, sampler: object) -> None:
        llama_cpp.llama_sampler_chain_add(self.chain, sampler)

    def sample(self, ctx: object, batch_index: int) -> int:
        """Sample from the logits of ``batch_index`` and accept the token."""
        return int(llama_cpp.llama_sampler_sample(self.chain, ctx, batch_index))

    def close(self) -> None:
        if self.chain:
            llama_cpp.llama_sampler_free(self.chain)
            self.chain = None
