"""One loaded GGUF and its llama.cpp context, behind a small typed surface.

Only the scheduler thread decodes with it; tokenising and detokenising only read
the vocabulary and are safe from request threads.
"""

from __future__ import annotations

import ctypes
import logging
import os
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np

from backend.engine.errors import InvalidRequestError, ModelLoadError
from backend.engine.kv_geometry import GGML_TYPE_ID, kv_bytes_per_cell
from backend.llama.backend_init import init_llama_backend
from backend.llama.model_params import choose_cpu_path, model_params
from backend.llama.rpc_client import (
    SPLIT_MODES,
    ModelDevices,
    model_devices,
    split_array,
)
from backend.llama.rpc_errors import RpcError
from backend.llama.rpc_ggml import local_gpu_present
from backend.llama.tokens import token_to_piece, tokenize
from backend.settings.engine_settings import EngineSettings, rpc_endpoints, tensor_split_values

log = logging.getLogger(__name__)
_llama_log = logging.getLogger("llama_cpp.native")

_FLASH_ATTN = {
    "auto": llama_cpp.LLAMA_FLASH_ATTN_TYPE_AUTO,
    "on": llama_cpp.LLAMA_FLASH_ATTN_TYPE_ENABLED,
    "off": llama_cpp.LLAMA_FLASH_ATTN_TYPE_DISABLED,
}


def gpu_offload_supported() -> bool:
    """Whether this llama.cpp build can offload layers to a local GPU (not counting the RPC
    backend, which ``llama_supports_gpu_offload`` counts)."""
    return bool(llama_cpp.llama_supports_gpu_offload()) and local_gpu_present()


def logits_row(ctx: object, index: int, n_vocab: int) -> np.ndarray:
    """A view of the logits of batch row ``index`` (valid until the next decode)."""
    ptr = llama_cpp.llama_get_logits_ith(ctx, index)
    return np.ctypeslib.as_array(ptr, shape=(n_vocab,))


@dataclass(frozen=True)
class ModelInfo:
    path: Path
    architecture: str
    n_ctx_train: int
    n_layer: int
    n_head: int
    n_head_kv: int
    n_embd: int
    n_embd_k_gqa: int
    n_embd_v_gqa: int
    n_vocab: int
    n_params: int
    size_bytes: int
    chat_template: str | None
    bos_token: str
    eos_token: str


class ModelRuntime:
    """Model + context + vocabulary of one GGUF, created from :class:`EngineSettings`."""

    def __init__(self, model_path: Path, settings: EngineSettings, n_seq_max: int) -> None:
        init_llama_backend(_llama_log)
        self.settings = settings
        self.n_seq_max = n_seq_max
        # --no-repack (or QUANTDESK_NO_REPACK), else the CPU probe's verdict
        self.cpu_path = choose_cpu_path(True if settings.no_repack else None)
        mparams = model_params(True if settings.no_repack else None)
        mparams.n_gpu_layers = 999_999 if settings.gpu_layers < 0 else settings.gpu_layers
        mparams.split_mode = SPLIT_MODES[settings.split_mode]
        # --rpc: the workers' devices, then local GPUs; the arrays live as long as the model
        self.devices: ModelDevices | None = None
        self._split: ctypes.Array[ctypes.c_float] | None = None
        split = tensor_split_values(settings.tensor_split)
        endpoints = rpc_endpoints(settings.rpc)
        try:
            if endpoints:
                self.devices = model_devices(endpoints, split)
                self.devices.apply(mparams)
                log.info("loading across %s", ", ".join(self.devices.names))
            elif split and (array := split_array(split)) is not None:
                self._split = array
                mparams.tensor_split = array
        except RpcError as exc:
            raise ModelLoadError(str(exc)) from None
        model = llama_cpp.llama_model_load_from_file(str(model_path).encode(), mparams)
        if not model:
            raise ModelLoadError(f"llama.cpp could not load {model_path} (not a valid GGUF?)")
        self.model = model
        cparams = llama_cpp.llama_context_default_params()
        cparams.n_ctx = settings.ctx_size
        cparams.n_batch = settings.batch_size
        cparams.n_ubatch = min(settings.ubatch_size, settings.batch_size)
        cparams.n_seq_max = n_seq_max
        cparams.n_threads = settings.threads
        cparams.n_threads_batch = settings.threads_batch or settings.threads
        cparams.flash_attn_type = _FLASH_ATTN[settings.flash_attn]
        cparams.type_k = GGML_TYPE_ID[settings.cache_type_k]
        cparams.type_v = GGML_TYPE_ID[settings.cache_type_v]
        cparams.kv_unified = settings.kv_unified
        cparams.no_perf = True
        ctx = llama_cpp.llama_init_from_model(model, cparams)
        if not ctx:
            llama_cpp.llama_model_free(model)
            hint = ""
            if settings.cache_type_v not in ("f16", "f32", "bf16") and settings.flash_attn == "off":
                hint = " (a quantised V cache needs flash attention: use -fa on or auto)"
            raise ModelLoadError(
                f"llama.cpp could not create a context with n_ctx={settings.ctx_size}, "
                f"n_seq_max={n_seq_max}{hint}; the model may not fit in memory"
            )
        self.ctx = ctx
        self.vocab = llama_cpp.llama_model_get_vocab(model)
        self.memory = llama_cpp.llama_get_memory(ctx)
        # llama.cpp gives encoder-only models (BERT, nomic-bert, modern-bert...) and
        # diffusion models no KV cache: the scheduler cannot generate with them
        self.can_generate = bool(self.memory)
        self.is_diffusion = bool(llama_cpp.llama_model_is_diffusion(model))
        self.n_ctx = int(llama_cpp.llama_n_ctx(ctx))
        self.kv_unified = settings.kv_unified
        # what one sequence may hold: the whole cache, or its slot's stream
        self.n_ctx_seq = int(llama_cpp.llama_n_ctx_seq(ctx))
        self.n_batch = int(llama_cpp.llama_n_batch(ctx))
        self.n_vocab = int(llama_cpp.llama_vocab_n_tokens(self.vocab))
        self._piece_cache: dict[int, bytes] = {}
        self.eog_tokens = frozenset(
            t for t in range(self.n_vocab) if llama_cpp.llama_vocab_is_eog(self.vocab, t)
        )
        self.info = self._read_info(model_path)
        self.kv_bytes_per_cell = kv_bytes_per_cell(
            self.info.n_layer,
            self.info.n_embd_k_gqa,
            self.info.n_embd_v_gqa,
            settings.cache_type_k,
            settings.cache_type_v,
        )
        if self.devices is not None:
            spans = self.devices.placement(self.info.n_layer, mparams.n_gpu_layers)
            log.info("placement: %s", ", ".join(map(str, spans)))
        offloads = gpu_offload_supported() or self.devices is not None
        self.n_gpu_layers = min(self.info.n_layer + 1, mparams.n_gpu_layers) if offloads else 0
        log.info(
            "loaded %s: %s, %d layers, n_ctx=%d, n_seq_max=%d, KV %d bytes/cell",
            model_path.name,
            self.info.architecture,
            self.info.n_layer,
            self.n_ctx,
            n_seq_max,
            self.kv_bytes_per_cell,
        )

    # ---- metadata -------------------------------------------------------
    def meta(self, key: str) -> str | None:
        buf = ctypes.create_string_buffer(1 << 16)
        n = llama_cpp.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        if n < 0:
            return None
        if n >= len(buf):
            buf = ctypes.create_string_buffer(n + 1)
            llama_cpp.llama_model_meta_val_str(self.model, key.encode(), buf, len(buf))
        return buf.value.decode(errors="replace")

    def _meta_int(self, key: str, default: int) -> int:
        value = self.meta(key)
        try:
            return int(value) if value is not None else default
        except ValueError:
            return default

    def _read_info(self, path: Path) -> ModelInfo:
        arch = self.meta("general.architecture") or "unknown"
        n_head = int(llama_cpp.llama_model_n_head(self.model))
        n_head_kv = int(llama_cpp.llama_model_n_head_kv(self.model))
        n_embd = int(llama_cpp.llama_model_n_embd(self.model))
        head_k = self._meta_int(f"{arch}.attention.key_length", n_embd // max(n_head, 1))
        head_v = self._meta_int(f"{arch}.attention.value_length", n_embd // max(n_head, 1))
        bos = llama_cpp.llama_vocab_bos(self.vocab)
        eos = llama_cpp.llama_vocab_eos(self.vocab)
        return ModelInfo(
            path=path,
            architecture=arch,
            n_ctx_train=int(llama_cpp.llama_model_n_ctx_train(self.model)),
            n_layer=int(llama_cpp.llama_model_n_layer(self.model)),
            n_head=n_head,
            n_head_kv=n_head_kv,
            n_embd=n_embd,
            n_embd_k_gqa=head_k * n_head_kv,
            n_embd_v_gqa=head_v * n_head_kv,
            n_vocab=self.n_vocab,
            n_params=int(llama_cpp.llama_model_n_params(self.model)),
            size_bytes=os.path.getsize(path),
            chat_template=self.meta("tokenizer.chat_template"),
            bos_token=self.token_text(bos) if bos >= 0 else "",
            eos_token=self.token_text(eos) if eos >= 0 else "",
        )

    # ---- vocabulary ------------------------------------------------------
    def token_text(self, token: int) -> str:
        raw = llama_cpp.llama_vocab_get_text(self.vocab, token)
        return raw.decode(errors="replace") if raw else ""

    def tokenize(self, text: str, *, add_special: bool, parse_special: bool) -> list[int]:
        try:
            data = text.encode()
        except UnicodeEncodeError as exc:  # e.g. a lone surrogate from a JSON "\ud800" escape
            raise InvalidRequestError(f"the text is not valid Unicode: {exc.reason}") from None
        tokens = tokenize(self.vocab, data, add_special=add_special, parse_special=parse_special)
        return tokens.tolist()  # type: ignore[no-any-return]

    def token_piece(self, token: int) -> bytes:
        """The bytes a token renders to (control tokens render empty). Safe from any thread:
        a miss renders into a buffer of its own (request threads detokenise token-id
        prompts while the scheduler renders its tokens)."""
        piece = self._piece_cache.get(token)
        if piece is None:
            piece = token_to_piece(self.vocab, token)
            self._piece_cache[token] = piece
        return piece

    def detokenize(self, tokens: list[int]) -> str:
        return b"".join(self.token_piece(t) for t in tokens).decode(errors="replace")

    def fim_tokens(self) -> dict[str, int] | None:
        """The model's fill-in-the-middle tokens (pre, suf, mid, and rep/sep if any)."""
        ids = {
            "pre": llama_cpp.llama_vocab_fim_pre(self.vocab),
            "suf": llama_cpp.llama_vocab_fim_suf(self.vocab),
            "mid": llama_cpp.llama_vocab_fim_mid(self.vocab),
            "rep": llama_cpp.llama_vocab_fim_rep(self.vocab),
            "sep": llama_cpp.llama_vocab_fim_sep(self.vocab),
        }
        if min(ids["pre"], ids["suf"], ids["mid"]) < 0:
            return None
        return {k: int(v) for k, v in ids.items() if v >= 0}

    @property
    def can_shift(self) -> bool:
        """Whether the model's memory can move cells to other positions (context shift)."""
        return bool(llama_cpp.llama_memory_can_shift(self.memory))

    @property
    def add_bos(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_bos(self.vocab))

    # ---- teardown --------------------------------------------------------
    def close(self) -> None:
        if getattr(self, "ctx", None):
            llama_cpp.llama_free(self.ctx)
            self.ctx = None
        if getattr(self, "model", None):
            llama_cpp.llama_model_free(self.model)
            self.model = None
