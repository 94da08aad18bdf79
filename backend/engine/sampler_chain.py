"""Build one llama.cpp sampler chain per sequence from :class:`SamplingParams`.

A C++ exception or ``GGML_ABORT`` inside llama.cpp cannot be caught through ctypes: it
ends the process. The grammar sampler is the one part of a chain that throws on the
tokens it is given (accepting a token the grammar does not allow, or any token once the
grammar is complete), so a chain with a grammar never lets llama.cpp pick and accept in
one call: it applies the chain to the logits, checks that the pick is a token the grammar
allows, and only then accepts it. A complete grammar ends the sequence (``GRAMMAR_DONE``),
whatever ``ignore_eos`` says; a grammar that no token can continue fails this request
alone (:class:`GrammarDeadEndError`).
"""

from __future__ import annotations

import ctypes
import math
import random

import llama_cpp
import numpy as np

from backend.engine.errors import GrammarDeadEndError, InvalidRequestError
from backend.engine.grammar_check import check_grammar
from backend.engine.model_runtime import logits_row
from backend.engine.request_types import SamplingParams

# What :meth:`SamplerChain.sample` returns when the grammar is complete: end the sequence.
GRAMMAR_DONE = -1

# llama_token_data as numpy sees it: (id int32, logit float32, p float32), 12 bytes.
_TOKEN_DATA = np.dtype([("id", "<i4"), ("logit", "<f4"), ("p", "<f4")])


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
        self._grammar: object | None = None
        if params.grammar:
            try:
                check_grammar(params.grammar)
            except InvalidRequestError:
                self.close()
                raise
            grammar = llama_cpp.llama_sampler_init_grammar(vocab, params.grammar.encode(), b"root")
            if not grammar:
                self.close()
                raise InvalidRequestError(
                    "the grammar could not be parsed (GBNF with a 'root' rule, no left recursion)",
                    param="grammar",
                )
            add(grammar)
            self._grammar = grammar
            self._eog_token = min(eog, default=None)  # any end token tells completion
            self._candidates = np.empty(n_vocab, dtype=_TOKEN_DATA)
            self._ids = np.arange(n_vocab, dtype=np.int32)
            self._array = llama_cpp.llama_token_data_array(
                data=self._candidates.ctypes.data_as(ctypes.POINTER(llama_cpp.llama_token_data)),
                size=n_vocab,
                selected=-1,
                sorted=False,
            )
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
        """Sample from the logits of ``batch_index`` and accept the token; with a grammar,
        ``GRAMMAR_DONE`` when the grammar is complete."""
        if self._grammar is not None:
            return self._sample_checked(ctx, batch_index)
        if self._argmax_skip is not None:
            # Plain greedy: numpy's argmax over the logits row (first maximum, like
            # llama.cpp's greedy sampler) instead of building a candidate array of the
            # whole vocabulary; a biased winner goes through the chain.
            token = int(logits_row(ctx, batch_index, self.n_vocab).argmax())
            if token not in self._argmax_skip:
                return token
        return int(llama_cpp.llama_sampler_sample(self.chain, ctx, batch_index))

    def _sample_checked(self, ctx: object, batch_index: int) -> int:
        """Apply the chain, check the pick, accept it: never hand llama.cpp's grammar a
        token it would throw on."""
        cand = self._candidates
        cand["id"] = self._ids
        cand["logit"] = logits_row(ctx, batch_index, self.n_vocab)
        cand["p"] = 0.0
        arr = self._array
        arr.size = self.n_vocab
        arr.selected = -1
        arr.sorted = False
        llama_cpp.llama_sampler_apply(self.chain, ctypes.byref(arr))
        selected = int(arr.selected)
        if 0 <= selected < int(arr.size):
            picked = arr.data[selected]
            if math.isfinite(picked.logit):
                token = int(picked.id)
                llama_cpp.llama_sampler_accept(self.chain, token)
                return token
        # No token is allowed: either the grammar is complete (only an end token would
        # be, and ignore_eos or a bias ruled it out) or nothing can continue it.
        if self.grammar_complete():
            return GRAMMAR_DONE
        raise GrammarDeadEndError(
            "no token can continue the grammar (is every token it needs banned by "
            "logit_bias, or does it need characters the model's vocabulary lacks?)"
        )

    def grammar_complete(self) -> bool:
        """Whether the grammar allows an end token now (it has matched a whole ``root``)."""
        if self._grammar is None or self._eog_token is None:
            return False
        one = (llama_cpp.llama_token_data * 1)()
        one[0].id = self._eog_token  # type: ignore[assignment]
        one[0].logit = 0.0
        arr = llama_cpp.llama_token_data_array(data=one, size=1, selected=-1, sorted=False)
        llama_cpp.llama_sampler_apply(self._grammar, ctypes.byref(arr))
        return math.isfinite(one[0].logit)

    def close(self) -> None:
        if self.chain:
            llama_cpp.llama_sampler_free(self.chain)
            self.chain = None
