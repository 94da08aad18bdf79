"""Which projector an engine loads, and what a prompt with images must satisfy."""

from __future__ import annotations

import logging
from pathlib import Path

from backend.engine.errors import ModelLoadError
from backend.engine.media.media_errors import MediaError
from backend.engine.media.media_span import MediaSpan
from backend.engine.media.projector import Projector
from backend.gguf_file.projector_file import projector_path
from backend.settings.engine_settings import EngineSettings

log = logging.getLogger(__name__)


def load_projector(
    settings: EngineSettings, model_path: Path, model: object, *, use_gpu: bool, model_id: str
) -> Projector | None:
    """The ``--mmproj`` projector (its errors are the load's), or the one beside the model
    (its errors only mean text only)."""
    path = projector_path(model_path, settings.mmproj, settings.no_mmproj)
    if path is None:
        return None
    try:
        projector = Projector(path, model, n_threads=settings.threads, use_gpu=use_gpu)
    except ModelLoadError as exc:
        if settings.mmproj:
            raise
        log.warning("%s; serving %s as text only", exc, model_id)
        return None
    return projector


def batched_media(
    media: list[MediaSpan], n_prompt: int, *, n_batch: int, n_ubatch: int, scored: bool
) -> list[MediaSpan]:
    """A prompt's media as the scheduler decodes them, a span a call. A span read with
    causal attention (audio, most images, M-RoPE ones too) longer than a batch is cut into
    batch-sized pieces, decoded one after another as llama-server does; one read with
    non-causal attention (Gemma 3's images) must fit one micro-batch. Text must end the
    prompt, and no image is scored."""
    if scored:
        raise MediaError("prompt_logprobs cannot score a prompt with images", param="messages")
    out: list[MediaSpan] = []
    for span in media:
        if not span.non_causal:
            out.extend(span.pieces(n_batch))
            continue
        room = min(n_batch, n_ubatch)
        if span.n_tokens > room:
            raise MediaError(
                f"an image takes {span.n_tokens} tokens, more than one micro-batch holds "
                f"({room}): raise --batch-size and --ubatch-size",
                param="messages",
            )
        out.append(span)
    if media and media[-1].end >= n_prompt:
        raise MediaError("a prompt cannot end with an image", param="messages")
    return out
