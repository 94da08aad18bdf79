"""Sentence embeddings from the already-loaded model, in a context of their own.

The scheduler's context generates text; embeddings need a context created with
``embeddings=True`` and a pooling type, so :class:`Embedder` makes a second, small
llama.cpp context on the same ``llama_model`` (the weights are shared, not loaded
again). It is created on first use, guarded by a lock, and never touches the
scheduler's context or KV cache. Calls block: run them off the event loop.
:class:`PooledContext` is that machinery; the reranker (``reranker.py``) runs on it too,
with rank pooling.

Pooling: ``--pooling`` when serve was given it, else the model's own pooling type when
its GGUF declares one (embedding models such as BGE or nomic-embed do), else mean pooling
over the tokens. Pooled vectors are L2-normalised by default, as OpenAI's are (llama-server's
``embd_normalize`` chooses another norm). With pooling none (``--pooling none``, or a GGUF
that declares it) each token gets its vector, as llama.cpp computes it, not normalised. A
reranker (rank pooling declared or asked for, or an encoder with a one-output
classification head and no pooling declared) does not embed.
"""

from __future__ import annotations

import ctypes
import logging
import threading
from collections.abc import Callable

import llama_cpp
import numpy as np

from backend.engine.errors import EngineError, InvalidRequestError
from backend.engine.model_runtime import ModelRuntime
from backend.gguf_file.errors import GGUFFormatError
from backend.gguf_file.gguf_header import read_gguf_header

log = logging.getLogger(__name__)

# Tokens one embedding input may have (and the context size), at most.
MAX_EMBED_CTX = 2048
# Sequences packed into one llama_decode.
MAX_SEQS_PER_DECODE = 16
# ``--pooling``'s names (llama-server's) and llama.cpp's pooling types
POOLING_TYPES = {
    "none": llama_cpp.LLAMA_POOLING_TYPE_NONE,
    "mean": llama_cpp.LLAMA_POOLING_TYPE_MEAN,
    "cls": llama_cpp.LLAMA_POOLING_TYPE_CLS,
    "last": llama_cpp.LLAMA_POOLING_TYPE_LAST,
    "rank": llama_cpp.LLAMA_POOLING_TYPE_RANK,
}
# llama-server's embd_normalize: -1 none, 0 max absolute (int16 range), 1 taxicab,
# 2 Euclidean (its default and ours), p > 2 the p-norm
EUCLIDEAN = 2
# The classification head llama.cpp's rank pooling runs on the first token: an optional
# dense layer (``cls``, then tanh) and an output projection (``cls.output``), as the
# converter writes them for *ForSequenceClassification models (bge-reranker, jina-reranker).
RANK_HEAD_TENSORS = ("cls.output.weight", "cls.weight")


class EmbeddingUnsupportedError(InvalidRequestError):
    """The loaded model cannot produce embeddings."""


class EmbeddingInputTooLongError(InvalidRequestError):
    """One input has more tokens than the embedding context holds."""


class EmbeddingCancelledError(EngineError):
    """The caller asked to stop (its client went away) before all inputs were run."""


def declared_pooling(runtime: ModelRuntime) -> int | None:
    """The pooling type the GGUF declares (``{arch}.pooling_type``), or None."""
    declared = runtime.meta(f"{runtime.info.architecture}.pooling_type")
    if declared is None:
        return None
    try:
        return int(declared)
    except ValueError:
        return None


def rank_head_outputs(runtime: ModelRuntime) -> int | None:
    """How many outputs the GGUF's classification head has (the rows of its last
    projection), or None when it has none. Read from the file's tensor infos."""
    try:
        header = read_gguf_header(runtime.info.path)
    except (GGUFFormatError, OSError) as exc:
        log.warning("cannot read the tensor list of %s: %s", runtime.info.path.name, exc)
        return None
    for name in RANK_HEAD_TENSORS:
        tensor = header.tensor(name)
        if tensor is not None:
            return tensor.shape[1] if len(tensor.shape) > 1 else 1
    return None


def is_implicit_reranker(runtime: ModelRuntime) -> bool:
    """An encoder (no KV cache) that declares no pooling and carries a classification head
    with one output: a cross-encoder converted by llama.cpp's converter, which writes no
    pooling type for *ForSequenceClassification models (llama-server needs ``--rerank``)."""
    return (
        not runtime.can_generate
        and declared_pooling(runtime) is None
        and rank_head_outputs(runtime) == 1
    )


def choose_pooling(runtime: ModelRuntime) -> int:
    """The pooling type for the embedding context: ``--pooling``, else the GGUF's, else
    mean (llama-server: none); raises if the model can't embed."""
    info = runtime.info
    model = runtime.model
    if llama_cpp.llama_model_has_encoder(model) and llama_cpp.llama_model_has_decoder(model):
        raise EmbeddingUnsupportedError(
            f"the model '{info.path.name}' ({info.architecture}) is an encoder-decoder model; "
            "embeddings need a decoder-only or encoder-only model",
            param="model",
        )
    asked = runtime.settings.pooling
    pooling = POOLING_TYPES[asked] if asked is not None else declared_pooling(runtime)
    if pooling == llama_cpp.LLAMA_POOLING_TYPE_RANK or (
        pooling is None and is_implicit_reranker(runtime)
    ):
        if asked is not None:
            why = "served with --pooling rank"
        elif pooling is not None:
            why = "rank pooling"
        else:
            why = "a classification head with one output"
        raise EmbeddingUnsupportedError(
            f"the model '{info.path.name}' is a reranker ({why}): it scores query/document "
            "pairs on /v1/rerank and does not produce embeddings",
            param="model",
        )
    if pooling is None:
        return int(llama_cpp.LLAMA_POOLING_TYPE_MEAN)
    return pooling


def normalized(rows: np.ndarray, norm: int = EUCLIDEAN) -> np.ndarray:
    """``rows`` (float32, one vector per row) scaled as llama.cpp's ``common_embd_normalize``
    scales each: ``norm`` -1 not at all, 0 to an int16 range by the largest magnitude,
    p >= 1 to unit p-norm. A zero row stays zero."""
    if norm == -1:
        return rows
    magnitude = np.abs(rows.astype(np.float64))
    largest = magnitude.max(axis=1, keepdims=True)
    if norm == 0:
        scale = largest / 32760.0
    elif norm == EUCLIDEAN:
        scale = np.sqrt((magnitude * magnitude).sum(axis=1, keepdims=True))
    else:  # the p-norm, computed relative to the largest magnitude so that no power overflows
        safe = np.where(largest > 0, largest, 1.0)
        scale = safe * ((magnitude / safe) ** norm).sum(axis=1, keepdims=True) ** (1.0 / norm)
    factor = np.divide(1.0, scale, out=np.zeros_like(scale), where=scale > 0)
    return (rows * factor).astype(np.float32)


class PooledContext:
    """A lazily created ``embeddings=True`` context on ``runtime.model`` that runs token
    lists, up to MAX_SEQS_PER_DECODE per ``llama_decode``, and returns each one's pooled
    row of ``n_out`` floats. Subclasses choose the pooling type (and refuse a model)."""

    kind = "embedding"  # for logs and errors

    def __init__(self, runtime: ModelRuntime, *, n_out: int, max_ctx: int) -> None:
        self.runtime = runtime
        n_train = runtime.info.n_ctx_train
        self.n_ctx = min(max_ctx, n_train) if n_train > 0 else max_ctx
        self.n_out = n_out
        self._lock = threading.Lock()
        self._ctx: llama_cpp.llama_context_p | None = None
        self._batch: llama_cpp.llama_batch | None = None
        self._failure: InvalidRequestError | None = None
        self._pooling: int | None = None
        self._closed = False

    def choose_pooling(self) -> int:
        """The context's pooling type; raises an InvalidRequestError for a model it
        cannot serve (remembered: the next call raises it again)."""
        raise NotImplementedError

    def chosen_pooling(self) -> int:
        """:meth:`choose_pooling`'s answer, asked once: the model and the settings do not
        change (a refusal is remembered too)."""
        if self._failure is not None:
            raise self._failure
        if self._pooling is None:
            try:
                self._pooling = self.choose_pooling()
            except InvalidRequestError as exc:
                self._failure = exc
                raise
        return self._pooling

    # ---- lifecycle ---------------------------------------------------------------
    def _ensure_context(self) -> llama_cpp.llama_context_p:
        if self._closed:
            raise EngineError(f"the {self.kind} context has been closed")
        if self._failure is not None:
            raise self._failure
        if self._ctx is not None:
            return self._ctx
        pooling = self.chosen_pooling()
        settings = self.runtime.settings
        params = llama_cpp.llama_context_default_params()
        params.embeddings = True
        params.pooling_type = pooling
        params.n_ctx = self.n_ctx
        params.n_batch = self.n_ctx
        params.n_ubatch = self.n_ctx  # a whole input in one ubatch (needed by non-causal models)
        params.n_seq_max = MAX_SEQS_PER_DECODE
        params.kv_unified = True
        params.n_threads = settings.threads
        params.n_threads_batch = settings.threads_batch or settings.threads
        params.no_perf = True
        ctx = llama_cpp.llama_init_from_model(self.runtime.model, params)
        if not ctx:
            self._failure = EmbeddingUnsupportedError(
                f"llama.cpp could not create the {self.kind} context for "
                f"'{self.runtime.info.path.name}' "
                f"(n_ctx={self.n_ctx}, pooling={pooling})",
                param="model",
            )
            raise self._failure
        self._ctx = ctx
        self._batch = llama_cpp.llama_batch_init(self.n_ctx, 0, 1)
        log.info(
            "%s context ready: n_ctx=%d, pooling=%d, %d floats per sequence",
            self.kind,
            self.n_ctx,
            int(llama_cpp.llama_pooling_type(ctx)),
            self.n_out,
        )
        return ctx

    @property
    def pooling_type(self) -> int | None:
        """The pooling type of the context llama.cpp made (None before the first call)."""
        with self._lock:
            return int(llama_cpp.llama_pooling_type(self._ctx)) if self._ctx else None

    def close(self) -> None:
        """Free the context (before the model is freed). Waits for a running call."""
        with self._lock:
            self._closed = True
            if self._batch is not None:
                llama_cpp.llama_batch_free(self._batch)
                self._batch = None
            if self._ctx is not None:
                llama_cpp.llama_free(self._ctx)
                self._ctx = None

    # ---- work --------------------------------------------------------------------
    def run(
        self, inputs: list[list[int]], should_stop: Callable[[], bool] | None = None
    ) -> np.ndarray:
        """The pooled rows, shape ``(len(inputs), n_out)``, of non-empty inputs no longer
        than ``n_ctx`` (the caller checks that, with errors that name its fields).

        ``should_stop`` is asked before each decode: when it answers True,
        :class:`EmbeddingCancelledError` is raised and the context is free for the next
        caller.
        """
        rows = self.run_rows(inputs, should_stop)
        if any(len(r) != 1 for r in rows):
            raise EngineError(f"the {self.kind} context pools none: it gives a row per token")
        return np.concatenate(rows) if rows else np.empty((0, self.n_out), dtype=np.float32)

    def run_rows(
        self, inputs: list[list[int]], should_stop: Callable[[], bool] | None = None
    ) -> list[np.ndarray]:
        """Each input's rows of ``n_out`` floats: its pooled row, shape ``(1, n_out)``, or,
        when the context pools none, a row per token, shape ``(len(input), n_out)``.
        Inputs and ``should_stop`` as for :meth:`run`."""
        out: list[np.ndarray] = []
        with self._lock:
            ctx = self._ensure_context()
            start = 0
            while start < len(inputs):
                if should_stop is not None and should_stop():
                    raise EmbeddingCancelledError(
                        f"{self.kind} stopped after {start} of {len(inputs)} sequences"
                    )
                end, used = start, 0
                while (
                    end < len(inputs)
                    and end - start < MAX_SEQS_PER_DECODE
                    and used + len(inputs[end]) <= self.n_ctx
                ):
                    used += len(inputs[end])
                    end += 1
                out += self._decode_group(ctx, inputs[start:end])
                start = end
        return out

    def _decode_group(
        self, ctx: llama_cpp.llama_context_p, group: list[list[int]]
    ) -> list[np.ndarray]:
        batch = self._batch
        assert batch is not None
        i = 0
        for sid, tokens in enumerate(group):
            for pos, token in enumerate(tokens):
                batch.token[i] = token
                batch.pos[i] = pos  # type: ignore[call-overload]  # ctypes stub is wrong
                batch.n_seq_id[i] = 1
                batch.seq_id[i][0] = sid
                batch.logits[i] = 1
                i += 1
        batch.n_tokens = i
        memory = llama_cpp.llama_get_memory(ctx)
        try:
            rc = llama_cpp.llama_decode(ctx, batch)
            if rc != 0:
                raise EngineError(f"llama_decode failed in the {self.kind} context (code {rc})")
            if llama_cpp.llama_pooling_type(ctx) == llama_cpp.LLAMA_POOLING_TYPE_NONE:
                return self._token_rows(ctx, group)
            rows: list[np.ndarray] = []
            for sid in range(len(group)):
                ptr = llama_cpp.llama_get_embeddings_seq(ctx, sid)
                if not ptr:
                    raise EngineError(f"llama.cpp returned no pooled output for sequence {sid}")
                rows.append(self._floats(ptr, 1))
            return rows
        finally:
            if memory:
                llama_cpp.llama_memory_clear(memory, True)

    def _token_rows(
        self, ctx: llama_cpp.llama_context_p, group: list[list[int]]
    ) -> list[np.ndarray]:
        """Each sequence's per-token rows, read by batch position (llama.cpp maps a batch
        position to its output row)."""
        rows: list[np.ndarray] = []
        i = 0
        for tokens in group:
            seq = np.empty((len(tokens), self.n_out), dtype=np.float32)
            for j in range(len(tokens)):
                ptr = llama_cpp.llama_get_embeddings_ith(ctx, i)
                if not ptr:
                    raise EngineError(f"llama.cpp returned no output for batch position {i}")
                seq[j] = self._floats(ptr, 1)[0]
                i += 1
            rows.append(seq)
        return rows

    def _floats(self, ptr: ctypes.Array[ctypes.c_float], n_rows: int) -> np.ndarray:
        """A copy of ``n_rows`` rows of ``n_out`` floats at ``ptr``, shape ``(n_rows, n_out)``."""
        view = np.ctypeslib.as_array(
            ctypes.cast(ptr, ctypes.POINTER(ctypes.c_float)), shape=(n_rows, self.n_out)
        )
        return view.copy()


class Embedder(PooledContext):
    """Embeds token lists with a lazily created embedding context on ``runtime.model``."""

    def __init__(self, runtime: ModelRuntime, *, max_ctx: int = MAX_EMBED_CTX) -> None:
        n_embd = int(llama_cpp.llama_model_n_embd_out(runtime.model)) or runtime.info.n_embd
        super().__init__(runtime, n_out=n_embd, max_ctx=max_ctx)

    @property
    def n_embd(self) -> int:
        return self.n_out

    def choose_pooling(self) -> int:
        return choose_pooling(self.runtime)

    def check_lengths(self, inputs: list[list[int]]) -> None:
        """Raise a clear error for an empty input or one longer than the context."""
        for i, tokens in enumerate(inputs):
            if not tokens:
                raise InvalidRequestError(f"input[{i}] is empty", param="input")
            if len(tokens) > self.n_ctx:
                raise EmbeddingInputTooLongError(
                    f"input[{i}] is too large: it has {len(tokens)} tokens but the embedding "
                    f"context holds {self.n_ctx}; shorten it or split it",
                    param="input",
                )

    @property
    def pools_none(self) -> bool:
        """Whether this model embeds per token (pooling none); raises as
        :func:`choose_pooling` does for a model that cannot embed."""
        return self.chosen_pooling() == llama_cpp.LLAMA_POOLING_TYPE_NONE

    def embed(
        self,
        inputs: list[list[int]],
        should_stop: Callable[[], bool] | None = None,
        *,
        norm: int = EUCLIDEAN,
    ) -> np.ndarray:
        """One float32 row per input, shape ``(len(inputs), n_embd)``, scaled by ``norm``
        (:func:`normalized`; by default to unit length).

        ``should_stop`` is asked before each decode (up to MAX_SEQS_PER_DECODE inputs):
        when it answers True, :class:`EmbeddingCancelledError` is raised and the context
        is free for the next caller.
        """
        self.check_lengths(inputs)
        return normalized(self.run(inputs, should_stop), norm)

    def embed_tokens(
        self,
        inputs: list[list[int]],
        should_stop: Callable[[], bool] | None = None,
        *,
        norm: int = EUCLIDEAN,
    ) -> list[np.ndarray]:
        """What llama-server's /embeddings gives each input: with pooling none, its tokens'
        rows as llama.cpp computes them, shape ``(len(input), n_embd)``, not normalised
        (``norm`` is ignored, as there); else its pooled row, shape ``(1, n_embd)``, scaled
        by ``norm`` as :meth:`embed` scales it."""
        self.check_lengths(inputs)
        rows = self.run_rows(inputs, should_stop)
        if self.pools_none:
            return rows
        return [normalized(r, norm) for r in rows]
