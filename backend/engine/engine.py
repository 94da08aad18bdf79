"""The engine facade: load a GGUF, run the scheduler, accept requests, report stats."""

from __future__ import annotations

import dataclasses
import logging
import threading
import time
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
from typing import Any

import numpy as np
from jinja2 import TemplateError

from backend.core.errors import ConfigError
from backend.engine.chat_template import ChatTemplate
from backend.engine.errors import ContextOverflowError, EngineError, ModelCannotGenerateError
from backend.engine.media.media_errors import MediaError
from backend.engine.media.media_item import MediaItem
from backend.engine.media.media_span import MediaSpan
from backend.engine.media.projector import MediaPrompt, Projector
from backend.engine.media.projector_loading import batched_media, load_projector
from backend.engine.model_runtime import ModelRuntime, gpu_offload_supported
from backend.engine.request_types import (
    EngineEvent,
    ErrorEvent,
    EventSink,
    FinishEvent,
    GenerationRequest,
    SamplingParams,
)
from backend.engine.sampler_chain import SamplerChain
from backend.engine.scheduler import Scheduler
from backend.engine.sequence import Sequence
from backend.engine.slot_files import SlotFiles
from backend.engine.speculative.speculator import Speculator
from backend.engine.stats_model import ModelStats, StatsSnapshot
from backend.engine.stop_detector import StopDetector
from backend.gguf_file.gguf_header import read_gguf_header
from backend.gguf_file.model_capabilities import capabilities
from backend.settings.default_model import DEFAULT_MODEL_ID, default_model_path, resolve_model_path
from backend.settings.engine_settings import EngineSettings
from backend.system import system_snapshot

log = logging.getLogger(__name__)


def _template_source(path: str | None) -> str | None:
    """The text of ``--chat-template-file``, or None when not given."""
    if not path:
        return None
    try:
        return Path(path).expanduser().read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"cannot read --chat-template-file {path}: {exc}") from None


class Engine:
    """Owns the model and the scheduler thread. Thread-safe entry points:
    :meth:`tokenize`, :meth:`submit`, :meth:`cancel`, :meth:`stats`."""

    def __init__(self, settings: EngineSettings) -> None:
        self.settings = settings
        self.model_path: Path = resolve_model_path(settings.model)
        custom = _template_source(settings.chat_template_file)  # before the slow load
        if settings.model_alias:
            self.model_id = settings.model_alias
        elif self.model_path == default_model_path():
            self.model_id = DEFAULT_MODEL_ID
        else:
            self.model_id = self.model_path.name.removesuffix(".gguf")
        t0 = time.perf_counter()
        self.runtime = ModelRuntime(self.model_path, settings, n_seq_max=settings.n_seq_max)
        self.load_seconds = time.perf_counter() - t0
        info = self.runtime.info
        try:
            self.chat_template = ChatTemplate(
                custom or info.chat_template, bos_token=info.bos_token, eos_token=info.eos_token
            )
        except TemplateError as exc:
            where = f"--chat-template-file {settings.chat_template_file}" if custom else "the GGUF"
            self.runtime.close()
            raise ConfigError(f"the chat template of {where} does not parse: {exc}") from None
        self.projector: Projector | None = None
        try:
            self.projector = load_projector(
                settings,
                self.model_path,
                self.runtime.model,
                use_gpu=self.runtime.n_gpu_layers > 0,
                model_id=self.model_id,
            )
            self.speculator = Speculator.create(settings, self.runtime)
        except Exception:
            if self.projector is not None:
                self.projector.close()
            self.runtime.close()
            raise
        self.scheduler = Scheduler(
            self.runtime,
            parallel=settings.parallel,
            cache_entries=settings.prefix_cache_entries,
            max_queue=settings.max_queue,
            speculator=self.speculator,
        )
        self.arrivals = self.scheduler.arrivals
        self.ready = False
        self.created = int(time.time())

    @property
    def accepts_images(self) -> bool:
        return self.projector is not None and self.projector.vision

    @property
    def accepts_audio(self) -> bool:
        return self.projector is not None and self.projector.audio

    @cached_property
    def capabilities(self) -> list[str]:
        """Ollama's capability names for the served model (``model_capabilities``): the
        loaded model's own facts, its template as served."""
        pooling = read_gguf_header(self.model_path).arch_get("pooling_type")
        return capabilities(
            generates=self.can_generate,
            embeds=not self.can_generate or (isinstance(pooling, int) and pooling in (1, 2, 3)),
            template=self.chat_template.source if self.can_generate else None,
            fim=self.runtime.fim_tokens() is not None,
            modalities=self.modalities(),
        )

    def modalities(self) -> dict[str, bool]:
        """What the model reads besides text (llama-server's ``/props`` shape)."""
        return {"vision": self.accepts_images, "audio": self.accepts_audio}

    def tokenize_with_media(
        self,
        text: str,
        media: list[MediaItem],
        *,
        add_special: bool,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> MediaPrompt:
        """``text`` with one media marker per image or clip tokenised, the media encoded."""
        if self.projector is None:
            raise MediaError(
                f"model '{self.model_id}' takes text only and cannot read images or audio (it "
                "has no projector: load one with --mmproj)",
                param="messages",
            )
        return self.projector.tokenize(text, media, add_special=add_special, cancelled=cancelled)

    def render_chat_with_media(
        self,
        messages: list[dict[str, Any]],
        media: list[MediaItem],
        cancelled: Callable[[], bool] = lambda: False,
        **kwargs: Any,
    ) -> MediaPrompt:
        """:meth:`render_chat` for messages whose text holds a media marker per image or
        clip."""
        text, add_special = self._rendered(messages, **kwargs)
        return self.tokenize_with_media(text, media, add_special=add_special, cancelled=cancelled)

    def _rendered(self, messages: list[dict[str, Any]], **kwargs: Any) -> tuple[str, bool]:
        """The chat template's text, and whether tokenising it adds BOS (not twice)."""
        text = self.chat_template.render(messages, **kwargs)
        bos = self.runtime.info.bos_token
        return text, not (bos and text.startswith(bos))

    @property
    def n_ctx(self) -> int:
        """Tokens one request may hold (a slot's stream, unless --kv-unified)."""
        return self.runtime.n_ctx_seq

    @property
    def can_generate(self) -> bool:
        """False for a model without a KV cache (an embedding model such as BERT): it
        serves /v1/embeddings (and tokenize) only."""
        return self.runtime.can_generate

    def check_can_generate(self) -> None:
        """Raise a clear 400-class error when the model cannot generate text."""
        if self.runtime.can_generate:
            return
        if self.runtime.is_diffusion:
            raise ModelCannotGenerateError(
                f"model '{self.model_id}' is a diffusion model: this server cannot generate "
                "with it",
                param="model",
            )
        raise ModelCannotGenerateError(
            f"model '{self.model_id}' is an embedding model: it serves /v1/embeddings only",
            param="model",
        )

    def start(self, *, warmup: bool = True) -> None:
        self.scheduler.start()
        if warmup and self.can_generate:
            self._warmup()
        self.ready = True

    def _warmup(self) -> None:
        done = threading.Event()
        errors: list[str] = []

        def sink(event: EngineEvent) -> None:
            if isinstance(event, ErrorEvent):
                errors.append(event.message)
                done.set()
            elif isinstance(event, FinishEvent):
                done.set()

        tokens = self.tokenize("Hello", add_special=True, parse_special=False)
        self.submit(tokens, max_tokens=2, sampling=SamplingParams(temperature=0.0), sink=sink)
        if not done.wait(timeout=300) or errors:
            raise EngineError(f"warm-up generation failed: {errors or 'timed out'}")
        self.scheduler.stats.reset_traffic()
        self.scheduler.reset_session_counters()

    def close(self) -> None:
        self.scheduler.close()
        if self.speculator is not None:
            self.speculator.close()
        if self.projector is not None:
            self.projector.close()
        self.runtime.close()

    # ---- requests ------------------------------------------------------------
    def tokenize(
        self, text: str, *, add_special: bool = True, parse_special: bool = True
    ) -> list[int]:
        return self.runtime.tokenize(text, add_special=add_special, parse_special=parse_special)

    def render_chat(self, messages: list[dict[str, Any]], **kwargs: Any) -> list[int]:
        """Apply the chat template and tokenise, without a duplicated BOS."""
        text, add_special = self._rendered(messages, **kwargs)
        return self.tokenize(text, add_special=add_special, parse_special=True)

    def resolve_max_tokens(
        self, n_prompt: int, max_tokens: int | None, limit: int, *, strict: bool = False
    ) -> int:
        """How many tokens the request may generate. A prompt that fills the context alone
        is refused. A ``max_tokens`` past the room left is cut to that room, so the answer
        ends with ``length`` when the context is full, as llama-server and Ollama do
        (clients send 4096, 8192 or 32000 whatever the context); ``strict`` refuses it
        instead, as OpenAI does. Never truncates the prompt silently. With
        --context-shift the answer may outgrow the context: only ``limit`` bounds it."""
        n_ctx = self.n_ctx
        if n_prompt >= n_ctx:
            raise ContextOverflowError(
                f"the prompt has {n_prompt} tokens but the context holds {n_ctx}",
                param="messages",
            )
        if self.scheduler.shifts_context:  # a full context shifts: no room to cut to
            return limit if max_tokens is None else max_tokens
        room = n_ctx - n_prompt
        if max_tokens is None:
            return min(limit, room)
        if max_tokens > room and strict:
            raise ContextOverflowError(
                f"the prompt has {n_prompt} tokens and max_tokens is {max_tokens}: "
                f"{n_prompt + max_tokens} exceeds the context of {n_ctx} tokens",
                param="max_tokens",
            )
        return min(max_tokens, room)

    def submit(
        self,
        prompt_tokens: list[int],
        *,
        max_tokens: int,
        sampling: SamplingParams,
        sink: EventSink,
        stop: list[str] | None = None,
        prompt_logprobs: int | None = None,
        media: list[MediaSpan] | None = None,
    ) -> GenerationRequest:
        """Queue a sequence; raises QueueFullError or InvalidRequestError at once.
        ``media``: the prompt's images (from :meth:`render_chat_with_media`)."""
        self.check_can_generate()
        if media:
            media = batched_media(
                media,
                len(prompt_tokens),
                n_batch=self.runtime.n_batch,
                n_ubatch=self.settings.ubatch_size,
                scored=prompt_logprobs is not None,
            )
            # no drafts: a drafter would propose, or prefill a draft model with, image ids
            sampling = dataclasses.replace(sampling, draft_n_max=0)
        request = GenerationRequest(
            prompt_tokens=list(prompt_tokens),
            max_tokens=max_tokens,
            sampling=sampling,
            sink=sink,
            stop=list(stop or []),
            prompt_logprobs=prompt_logprobs,
        )
        rt = self.runtime
        sampler = SamplerChain(sampling, rt.vocab, rt.n_vocab, rt.eog_tokens)
        seq = Sequence(
            request=request,
            sampler=sampler,
            detector=StopDetector(request.stop),
            tokens=list(prompt_tokens),
            prompt_array=np.asarray(prompt_tokens, dtype=np.int32),
            n_prompt=len(prompt_tokens),
            media=list(media or []),
        )
        try:
            self.scheduler.submit(seq)
        except Exception:
            sampler.close()
            raise
        return request

    def cancel(self, request_id: int) -> None:
        self.scheduler.cancel(request_id)

    @cached_property
    def slot_files(self) -> SlotFiles:
        """llama-server's slot save, restore and erase (``POST /slots/{id}``)."""
        return SlotFiles(self.scheduler)

    # ---- stats -----------------------------------------------------------------
    def stats(self) -> StatsSnapshot:
        snap = self.scheduler.stats.snapshot(self._model_stats, system_snapshot(), ready=self.ready)
        if self.projector is not None:
            snap = snap.model_copy(update={"media": self.projector.stats()})
        return snap

    @cached_property
    def _model_stats(self) -> ModelStats:
        """The model section of the stats: fixed once the model is loaded."""
        info = self.runtime.info
        s = self.settings
        return ModelStats(
            id=self.model_id,
            path=str(self.model_path),
            architecture=info.architecture,
            n_ctx=self.runtime.n_ctx,
            n_ctx_seq=self.runtime.n_ctx_seq,
            kv_unified=self.runtime.kv_unified,
            n_ctx_train=info.n_ctx_train,
            n_parallel=s.parallel,
            n_layer=info.n_layer,
            n_params=info.n_params,
            n_gpu_layers=self.runtime.n_gpu_layers,
            gpu_offload_supported=gpu_offload_supported(),
            size_bytes=info.size_bytes,
            cache_type_k=s.cache_type_k,
            cache_type_v=s.cache_type_v,
            flash_attn=s.flash_attn,
            n_batch=self.runtime.n_batch,
            threads=s.threads,
            load_seconds=self.load_seconds,
            cpu_path=self.runtime.cpu_path.path,
            cpu_path_reason=self.runtime.cpu_path.reason,
            extra_buffers=list(self.runtime.cpu_path.extra_buffers),
            vision=self.accepts_images,
            audio=self.accepts_audio,
        )
