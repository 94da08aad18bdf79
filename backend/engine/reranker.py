"""Relevance scores of (query, document) pairs from a reranker GGUF, with llama.cpp's rank
pooling.

A reranker is a cross-encoder: it reads the query and one document as one sequence and a
classification head on its first token (the last one for Qwen3 rerankers) gives the
score. llama.cpp builds that head into the graph when the context's pooling type is rank,
and ``llama_get_embeddings_seq`` then returns the head's outputs; the score is the first,
a raw logit as llama-server reports it (no sigmoid). The context is a
:class:`~backend.engine.embedder.PooledContext` of its own on the loaded model, created on
first use and guarded by a lock like the embedder's; a call packs up to 16 pairs into
one ``llama_decode``. Calls block: run them off the event loop.

Which GGUF is a reranker:

- one that declares ``{arch}.pooling_type`` = rank (4) and holds a classification head
  (``cls`` and/or ``cls.output`` tensors): Qwen3 rerankers, and any file converted with
  ``--rerank`` in mind;
- an encoder (no KV cache: BERT, XLM-RoBERTa...) that declares no pooling type and whose
  head has exactly one output: what llama.cpp's converter writes for
  ``XLMRobertaForSequenceClassification`` (bge-reranker) and kin, which it does not mark
  as rank (llama-server needs ``--rerank`` for them).

A converted ``BertForSequenceClassification`` (ms-marco-MiniLM and other BERT
cross-encoders) is served too, as llama-server serves it, with a warning: the converter
drops BERT's pooler, the dense+tanh layer its classifier reads, so its scores are not the
original model's (tests/server/test_rerank_gguf.py shows it).

Pairs are formatted as llama-server's ``format_prompt_rerank`` does: with the model's
``rerank`` chat template when it has one (``{query}`` and ``{document}`` filled in,
special tokens parsed), else ``[BOS] query [EOS] [SEP] document [EOS]`` with each special
token present only where the vocabulary adds it (BERT: ``[CLS] q [SEP] d [SEP]``; XLM-R:
``<s> q </s></s> d </s>``, which is how transformers encodes a pair for these models).
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from functools import cached_property

import llama_cpp

from backend.engine.embedder import (
    MAX_EMBED_CTX,
    RANK_HEAD_TENSORS,
    PooledContext,
    declared_pooling,
    rank_head_outputs,
)
from backend.engine.errors import InvalidRequestError
from backend.engine.model_runtime import ModelRuntime
from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import read_gguf_header

log = logging.getLogger(__name__)

_TEMPLATE_FIELD = re.compile(r"\{(query|document)\}")
_EXAMPLES = "a reranker GGUF such as bge-reranker or jina-reranker"


class NotARerankerError(InvalidRequestError):
    """The loaded model is not a reranker; the message says why."""


class RerankInputTooLongError(InvalidRequestError):
    """A query/document pair has more tokens than the rerank context holds."""


def rerank_refusal(runtime: ModelRuntime) -> str | None:
    """Why ``runtime``'s model cannot rerank, or None when it is a reranker."""
    declared = declared_pooling(runtime)
    head = rank_head_outputs(runtime)
    arch = runtime.info.architecture
    if declared == llama_cpp.LLAMA_POOLING_TYPE_RANK:
        if head is None:
            return (
                "its GGUF declares rank pooling but holds no classification head "
                f"({' or '.join(RANK_HEAD_TENSORS)}) to score with"
            )
        return None
    if declared is None and not runtime.can_generate and head is not None:
        if head == 1:
            return None
        return (
            f"its classification head has {head} outputs; a reranker's has one, the relevance score"
        )
    if runtime.is_diffusion:
        return f"it is a diffusion model ({arch}); /v1/rerank needs {_EXAMPLES}"
    if runtime.can_generate:
        return f"it is a text generation model ({arch}); /v1/rerank needs {_EXAMPLES}"
    return (
        f"it is an embedding model ({arch}): it serves /v1/embeddings; /v1/rerank needs {_EXAMPLES}"
    )


def _pooler_dropped(runtime: ModelRuntime) -> bool:
    """A BERT GGUF whose head is ``cls.output`` alone: BertForSequenceClassification, whose
    pooler (dense + tanh, which llama.cpp would run as ``cls``) the converter leaves out."""
    if runtime.info.architecture != "bert":
        return False
    try:
        header = read_gguf_header(runtime.info.path)
    except (GGUFFormatError, OSError):
        return False
    return header.tensor("cls.output.weight") is not None and header.tensor("cls.weight") is None


class Reranker(PooledContext):
    """Scores (query, document) pairs with a rank-pooling context on ``runtime.model``."""

    kind = "rerank"

    def __init__(self, runtime: ModelRuntime, *, max_ctx: int = MAX_EMBED_CTX) -> None:
        # llama.cpp reads n_cls_out floats per sequence (1 unless the GGUF lists more labels)
        n_cls_out = int(llama_cpp.llama_model_n_cls_out(runtime.model))
        super().__init__(runtime, n_out=max(1, n_cls_out), max_ctx=max_ctx)

    @cached_property
    def refusal(self) -> str | None:
        """Why this model cannot rerank (None: it can). Reads the GGUF's tensor list once."""
        return rerank_refusal(self.runtime)

    def check_model(self) -> None:
        """Raise :class:`NotARerankerError` unless the model is a reranker."""
        if self.refusal is not None:
            raise NotARerankerError(self.refusal, param="model")

    def choose_pooling(self) -> int:
        self.check_model()
        if _pooler_dropped(self.runtime):
            log.warning(
                "%s looks like a converted BertForSequenceClassification (a cls.output head "
                "and no cls dense layer): llama.cpp's converter drops BERT's pooler, which "
                "that head reads, so its scores are not the original model's",
                self.runtime.info.path.name,
            )
        return int(llama_cpp.LLAMA_POOLING_TYPE_RANK)

    # ---- formatting ---------------------------------------------------------------
    @cached_property
    def template(self) -> str | None:
        """The model's ``rerank`` chat template, if its GGUF has one."""
        raw = llama_cpp.llama_model_chat_template(self.runtime.model, b"rerank")
        return raw.decode(errors="replace") if raw else None

    def format_pairs(self, query: str, documents: list[str]) -> list[list[int]]:
        """The token sequence of each (query, document) pair, as llama-server builds it."""
        runtime = self.runtime
        template = self.template
        if template is not None:
            fields = {"query": query}

            def fill(document: str) -> str:  # one pass: a query's "{document}" stays text
                fields["document"] = document
                return _TEMPLATE_FIELD.sub(lambda m: fields[m.group(1)], template)

            return [
                runtime.tokenize(fill(d), add_special=False, parse_special=True) for d in documents
            ]
        vocab = runtime.vocab
        eos = int(llama_cpp.llama_vocab_eos(vocab))
        sep = int(llama_cpp.llama_vocab_sep(vocab))
        if eos < 0:
            eos = sep
        head = [int(llama_cpp.llama_vocab_bos(vocab))] if runtime.add_bos else []
        add_eos = bool(llama_cpp.llama_vocab_get_add_eos(vocab)) and eos >= 0
        add_sep = bool(llama_cpp.llama_vocab_get_add_sep(vocab)) and sep >= 0
        middle = ([eos] if add_eos else []) + ([sep] if add_sep else [])
        tail = [eos] if add_eos else []
        query_tokens = runtime.tokenize(query, add_special=False, parse_special=False)
        prefix = head + query_tokens + middle
        return [
            prefix + runtime.tokenize(d, add_special=False, parse_special=False) + tail
            for d in documents
        ]

    # ---- scoring ------------------------------------------------------------------
    def check_lengths(self, pairs: list[list[int]]) -> None:
        """Raise a clear error for a pair with no tokens or more than the context holds."""
        for i, tokens in enumerate(pairs):
            if not tokens:
                raise InvalidRequestError(
                    f"documents[{i}]: the query and the document make no tokens",
                    param="documents",
                )
            if len(tokens) > self.n_ctx:
                raise RerankInputTooLongError(
                    f"documents[{i}]: the query and the document make {len(tokens)} tokens "
                    f"but the rerank context holds {self.n_ctx}; shorten them",
                    param="documents",
                )

    def score(
        self, pairs: list[list[int]], should_stop: Callable[[], bool] | None = None
    ) -> list[float]:
        """The relevance score (the head's first output, a raw logit) of each pair.

        ``should_stop`` is asked before each decode; when it answers True,
        :class:`~backend.engine.embedder.EmbeddingCancelledError` is raised.
        """
        self.check_model()
        self.check_lengths(pairs)
        return [float(row[0]) for row in self.run(pairs, should_stop)]
