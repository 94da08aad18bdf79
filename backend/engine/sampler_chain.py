"""Build one llama.cpp sampler chain per sequence from :class:`SamplingParams`."""

from __future__ import annotations

import random

import llama_cpp

from backend.engine.errors import InvalidRequestError
from backend.engine.model_runtime import logits_row
from backend.engine.request_types import SamplingParams


class SamplerChain:
    """Owns a ``llama_sampler`` chain; free it with :meth:`close`."""

    # plain greedy: the biased tokens that send a winner through the chain (None: no fast path)
    _argmax_skip: frozenset[int] | None = None

    def __init__(
        self, params: SamplingParams, vocab: object, n_vocab: int, eog: frozenset[int]
    ) -> None:
        self.n_vocab = n_vocab
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
        penalised = (
            params.repeat_penalty != 1.0
            or params.presence_penalty != 0.0
            or params.frequency_penalty != 0.0
        )
        if penalised:
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
            # Stateless greedy with only negative biases: an unbiased argmax is the answer.
            if not params.grammar and not penalised and all(v <= 0 for v in bias.values()):
                self._argmax_skip = frozenset(bias)
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
        if self._argmax_skip is not None:
            # Plain greedy: numpy's argmax over the logits row (first maximum, like
            # llama.cpp's greedy sampler) instead of building a candidate array of the
            # whole vocabulary; a biased winner goes through the chain.
            token = int(logits_row(ctx, batch_index, self.n_vocab).argmax())
            if token not in self._argmax_skip:
                return token
        return int(llama_cpp.llama_sampler_sample(self.chain, ctx, batch_index))

    def close(self) -> None:
        if self.chain:
            llama_cpp.llama_sampler_free(self.chain)
            self.chain = None
