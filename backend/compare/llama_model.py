"""A thin owner of one llama.cpp model and its contexts, over llama-cpp-python's low-level API.

The batch is laid out in numpy arrays that llama.cpp reads directly (no per-token ctypes
calls), and logits come back as a zero-copy numpy view of llama.cpp's output buffer.
"""

from __future__ import annotations

import ctypes
import logging
import os
import threading
import time
from pathlib import Path
from types import TracebackType
from typing import Any

import llama_cpp
import numpy as np

from backend.compare.errors import CompareCancelledError, DecodeError, ModelLoadError
from backend.compare.metrics import F32, I32
from backend.llama.backend_init import init_llama_backend
from backend.llama.model_params import model_params
from backend.llama.tokens import token_to_piece, tokenize

log = logging.getLogger(__name__)
_llama_log = logging.getLogger("backend.compare.llama_cpp")


def default_threads() -> int:
    """CPU threads llama.cpp should use: the cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class Batch:
    """A ``llama_batch`` whose arrays are numpy buffers we own."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.token = np.zeros(capacity, dtype=np.int32)
        self.pos = np.zeros(capacity, dtype=np.int32)
        self.n_seq_id = np.ones(capacity, dtype=np.int32)
        self.seq_storage = np.zeros(capacity, dtype=np.int32)
        base = self.seq_storage.ctypes.data
        self.seq_ptrs = (base + 4 * np.arange(capacity, dtype=np.uint64)).astype(np.uint64)
        self.logits = np.zeros(capacity, dtype=np.int8)

    def fill(
        self, tokens: I32, pos: I32, seq: I32, want_logits: np.ndarray
    ) -> llama_cpp.llama_batch:
        n = tokens.size
        if n > self.capacity:
            raise DecodeError(f"batch of {n} tokens exceeds capacity {self.capacity}")
        self.token[:n] = tokens
        self.pos[:n] = pos
        self.seq_storage[:n] = seq
        self.logits[:n] = want_logits
        i32p = ctypes.POINTER(ctypes.c_int32)
        return llama_cpp.llama_batch(
            n_tokens=n,
            token=self.token.ctypes.data_as(i32p),
            embd=None,
            pos=self.pos.ctypes.data_as(i32p),
            n_seq_id=self.n_seq_id.ctypes.data_as(i32p),
            seq_id=ctypes.cast(self.seq_ptrs.ctypes.data, ctypes.POINTER(i32p)),
            logits=self.logits.ctypes.data_as(ctypes.POINTER(ctypes.c_int8)),
        )


class Context:
    """One llama.cpp context (KV cache, threads) with a reusable batch."""

    def __init__(
        self,
        model: LoadedModel,
        n_ctx: int,
        n_batch: int,
        n_seq: int,
        n_threads: int,
        cancel: threading.Event | None = None,
    ) -> None:
        params = llama_cpp.llama_context_default_params()
        params.n_ctx = n_ctx
        params.n_batch = n_batch
        params.n_ubatch = min(512, n_batch)
        params.n_seq_max = n_seq
        params.n_threads = n_threads
        params.n_threads_batch = n_threads
        params.no_perf = True
        params.kv_unified = False
        self.model = model
        self.n_vocab = model.n_vocab
        self.ctx = llama_cpp.llama_init_from_model(model.model, params)
        if not self.ctx:
            raise ModelLoadError(
                f"could not create a context of {n_ctx} tokens for {model.path.name}"
            )
        self.memory = llama_cpp.llama_get_memory(self.ctx)
        self.batch = Batch(n_batch)
        self.cancel = cancel
        if cancel is not None:
            # llama.cpp asks between graph nodes: a cancel stops a long decode within
            # milliseconds instead of after it (kept on self: ctypes must not free it)
            self._abort = llama_cpp.ggml_abort_callback(lambda _data: cancel.is_set())
            llama_cpp.llama_set_abort_callback(self.ctx, self._abort, None)

    def clear(self) -> None:
        llama_cpp.llama_memory_clear(self.memory, True)

    def decode(self, tokens: I32, pos: I32, seq: I32, want_logits: np.ndarray) -> int:
        """Decode one batch; returns how many rows of logits it produced."""
        batch = self.batch.fill(tokens, pos, seq, want_logits)
        rc = llama_cpp.llama_decode(self.ctx, batch)
        if rc != 0 and self.cancel is not None and self.cancel.is_set():
            raise CompareCancelledError("comparison cancelled")
        if rc != 0:
            raise DecodeError(f"llama_decode failed with code {rc} on {self.model.path.name}")
        return int(np.count_nonzero(want_logits))

    def logits(self, n_rows: int) -> F32:
        """Zero-copy view of the last decode's logits, in batch order (valid until next decode)."""
        ptr = llama_cpp.llama_get_logits(self.ctx)
        return np.ctypeslib.as_array(ptr, shape=(n_rows, self.n_vocab))

    def close(self) -> None:
        if self.ctx:
            llama_cpp.llama_free(self.ctx)
            self.ctx = None


class LoadedModel:
    """A GGUF loaded with llama.cpp; use as a context manager so it is always freed."""

    def __init__(
        self,
        path: Path,
        n_threads: int | None = None,
        n_gpu_layers: int = 0,
        *,
        vocab_only: bool = False,
    ) -> None:
        init_llama_backend(_llama_log)
        self.path = path
        self.n_threads = n_threads or default_threads()
        # the tokenizer alone needs no CPU path (no weights); else QUANTDESK_NO_REPACK / probe
        params = llama_cpp.llama_model_default_params() if vocab_only else model_params()
        params.n_gpu_layers = n_gpu_layers
        params.vocab_only = vocab_only  # the tokenizer alone: loads in milliseconds
        started = time.perf_counter()
        self.model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
        self.load_s = time.perf_counter() - started
        if not self.model:
            raise ModelLoadError(f"llama.cpp could not load {path}")
        self.vocab = llama_cpp.llama_model_get_vocab(self.model)
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self.n_params = int(llama_cpp.llama_model_n_params(self.model))
        self.tensor_bytes = int(llama_cpp.llama_model_size(self.model))
        self.add_bos = bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))
        self.bos = int(llama_cpp.llama_vocab_bos(self.vocab))
        self._contexts: list[Context] = []

    def tokenize(self, text: str, add_special: bool = True, parse_special: bool = False) -> I32:
        data = text.encode("utf-8")
        return tokenize(self.vocab, data, add_special=add_special, parse_special=parse_special)

    def piece(self, token: int) -> bytes:
        return token_to_piece(self.vocab, token)

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self.vocab, token))

    def chat_prompt(self, user_text: str) -> tuple[str, bool]:
        """The model's chat template applied to one user turn; (prompt, template_used)."""
        template = llama_cpp.llama_model_chat_template(self.model, None)
        if not template:
            return user_text, False
        messages = (llama_cpp.llama_chat_message * 1)()
        messages[0].role = b"user"
        messages[0].content = user_text.encode("utf-8")
        size = 4 * len(user_text) + 512
        buf = ctypes.create_string_buffer(size)
        n = llama_cpp.llama_chat_apply_template(template, messages, 1, True, buf, size)
        if n > size:
            buf = ctypes.create_string_buffer(n)
            n = llama_cpp.llama_chat_apply_template(template, messages, 1, True, buf, n)
        if n < 0:  # a template llama.cpp cannot run natively
            return user_text, False
        return buf.raw[:n].decode("utf-8", "replace"), True

    def context(
        self, n_ctx: int, n_batch: int, n_seq: int = 1, cancel: threading.Event | None = None
    ) -> Context:
        ctx = Context(self, n_ctx, n_batch, n_seq, self.n_threads, cancel)
        self._contexts.append(ctx)
        return ctx

    def close(self) -> None:
        for ctx in self._contexts:
            ctx.close()
        self._contexts.clear()
        if self.model:
            llama_cpp.llama_model_free(self.model)
            self.model = None

    def __enter__(self) -> LoadedModel:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()

    def describe(self) -> dict[str, Any]:
        return {"n_vocab": self.n_vocab, "n_params": self.n_params, "add_bos": self.add_bos}
