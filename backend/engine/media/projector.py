"""A model's multimodal projector (``--mmproj``), through libmtmd.

It turns a rendered prompt, with a media marker where each image or audio clip goes, into
the prompt's tokens and one :class:`MediaSpan` per image or clip: libmtmd tokenises the
text around the markers (adding the model's own delimiters) and its vision or audio
encoder turns each into embeddings, copied out at once. Encoding runs on the request's
thread, before the request reaches the scheduler, so a long encode never holds up another
stream's step; one encode runs at a time (libmtmd keeps one output buffer). Recently
encoded media are kept by content hash: an agent that sends the same screenshot again
encodes it once.
"""

from __future__ import annotations

import ctypes
import hashlib
import logging
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import llama_cpp
import numpy as np
from llama_cpp import mtmd_cpp as mtmd

from backend.engine.errors import ModelLoadError
from backend.engine.media.audio_clip import AudioClip
from backend.engine.media.media_errors import MediaError
from backend.engine.media.media_item import MediaItem
from backend.engine.media.media_span import MediaSpan, placeholder_ids
from backend.engine.stats_model import MediaStats
from backend.llama.log_hook import route_mtmd_log

log = logging.getLogger(__name__)

MARKER = "<__media__>"
_KEPT_EMBD_BYTES = 64 * 1024 * 1024


@dataclass
class MediaPrompt:
    """A prompt's tokens (an image's positions hold placeholder ids) and its images."""

    tokens: list[int]
    spans: list[MediaSpan]


class EncodeCancelled(Exception):
    """The request went away before its images were encoded."""


class Projector:
    """One mmproj GGUF bound to a loaded text model. Thread-safe."""

    def __init__(self, path: Path, model: object, *, n_threads: int, use_gpu: bool) -> None:
        route_mtmd_log()
        params = mtmd.mtmd_context_params_default()
        params.use_gpu = use_gpu
        params.n_threads = n_threads
        params.print_timings = False
        params.warmup = True
        params.media_marker = MARKER.encode()
        ctx = mtmd.mtmd_init_from_file(str(path).encode(), model, params)
        if not ctx:
            raise ModelLoadError(
                f"libmtmd could not load the projector {path} (not an mmproj GGUF, or not "
                "made for this model?)"
            )
        self.path = path
        self.ctx = ctx
        # an image's name in the caches (and its placeholder ids) covers the projector too:
        # a KV entry saved to disk with one projector is never restored for another
        stat = path.stat()
        self._fingerprint = f"{path.name}:{stat.st_size}:{stat.st_mtime_ns}"
        self.vision = bool(mtmd.mtmd_support_vision(ctx))
        self.audio = bool(mtmd.mtmd_support_audio(ctx))
        self.mrope = bool(mtmd.mtmd_decode_use_mrope(ctx))
        self.n_embd = int(llama_cpp.llama_model_n_embd_inp(model))
        self._lock = threading.Lock()
        self._kept: OrderedDict[str, np.ndarray] = OrderedDict()
        self._kept_bytes = 0
        self.encoded = self.reused = 0
        self.encode_s = 0.0
        log.info(
            "projector %s: vision %s, audio %s",
            path.name,
            "yes" if self.vision else "no",
            "yes" if self.audio else "no",
        )

    def stats(self) -> MediaStats:
        with self._lock:
            avg = 1000.0 * self.encode_s / self.encoded if self.encoded else 0.0
            return MediaStats(
                images_encoded=self.encoded, images_reused=self.reused, encode_ms_avg=avg
            )

    def close(self) -> None:
        if self.ctx:
            mtmd.mtmd_free(self.ctx)
            self.ctx = None

    def tokenize(
        self,
        text: str,
        media: list[MediaItem],
        *,
        add_special: bool,
        cancelled: Callable[[], bool] = lambda: False,
    ) -> MediaPrompt:
        """Tokenise ``text`` (one :data:`MARKER` per image or clip, in order) and encode
        the media. MediaError when libmtmd refuses them; EncodeCancelled when ``cancelled``
        turns true between two encodes."""
        bitmaps = (mtmd.mtmd_bitmap_p_ctypes * max(len(media), 1))()
        made: list[mtmd.mtmd_bitmap_p] = []
        chunks = mtmd.mtmd_input_chunks_init()
        try:
            for i, item in enumerate(media):
                bitmap = self._bitmap(item, i)
                made.append(bitmap)
                mtmd.mtmd_bitmap_set_id(bitmap, self._media_id(item.digest).encode())
                bitmaps[i] = bitmap
            encoded = text.encode("utf-8")
            inp = mtmd.mtmd_input_text(encoded, len(encoded), add_special, True)
            rc = mtmd.mtmd_tokenize(self.ctx, chunks, ctypes.byref(inp), bitmaps, len(media))
            if rc == 1:
                raise MediaError(
                    f"the prompt has a different number of media markers than the {len(media)} "
                    "images and clips sent",
                    param="messages",
                )
            if rc != 0:
                raise MediaError(f"libmtmd could not preprocess the media (error {rc})")
            return self._read_chunks(chunks, cancelled)
        finally:
            mtmd.mtmd_input_chunks_free(chunks)
            for bitmap in made:
                mtmd.mtmd_bitmap_free(bitmap)

    def _bitmap(self, item: MediaItem, i: int) -> mtmd.mtmd_bitmap_p:
        """libmtmd's bitmap for an image's pixels, or for a clip decoded (miniaudio, as
        llama-server does) and resampled to the encoder's rate."""
        if isinstance(item, AudioClip):
            if not self.audio:
                raise MediaError(f"the projector {self.path.name} takes no audio", param="messages")
            buf = (ctypes.c_ubyte * len(item.data)).from_buffer_copy(item.data)
            bitmap = mtmd.mtmd_helper_bitmap_init_from_buf(self.ctx, buf, len(item.data), False)
            if not bitmap:
                raise MediaError(
                    f"audio {i}: the {item.format.upper()} data could not be decoded (corrupt "
                    "or truncated?)",
                    param="messages",
                )
            return bitmap
        if not self.vision:
            raise MediaError(f"the projector {self.path.name} takes no images", param="messages")
        pixels = (ctypes.c_uint8 * len(item.rgb)).from_buffer_copy(item.rgb)
        bitmap = mtmd.mtmd_bitmap_init(item.width, item.height, pixels)
        if not bitmap:
            raise MediaError(f"image {i}: libmtmd could not take it", param="messages")
        return bitmap

    def _media_id(self, digest: str) -> str:
        return hashlib.sha256(f"{digest}:{self._fingerprint}".encode()).hexdigest()

    def _read_chunks(self, chunks: object, cancelled: Callable[[], bool]) -> MediaPrompt:
        tokens: list[int] = []
        spans: list[MediaSpan] = []
        for k in range(mtmd.mtmd_input_chunks_size(chunks)):
            chunk = mtmd.mtmd_input_chunks_get(chunks, k)
            kind = mtmd.mtmd_input_chunk_get_type(chunk)
            if kind == mtmd.MTMD_INPUT_CHUNK_TYPE_TEXT:
                n = ctypes.c_size_t(0)
                ptr = mtmd.mtmd_input_chunk_get_tokens_text(chunk, ctypes.byref(n))
                tokens.extend(ptr[i] for i in range(n.value))
                continue
            if cancelled():
                raise EncodeCancelled
            n_tokens = int(mtmd.mtmd_input_chunk_get_n_tokens(chunk))
            digest = (mtmd.mtmd_input_chunk_get_id(chunk) or b"").decode()
            embd = self._embeddings(chunk, digest, n_tokens)
            non_causal = bool(mtmd.mtmd_decode_use_non_causal(self.ctx, chunk))
            span = MediaSpan(len(tokens), n_tokens, digest, embd, non_causal)
            if self.mrope:
                span.n_pos = int(mtmd.mtmd_input_chunk_get_n_pos(chunk))
                span.rel_pos, span.moves = mrope_sections(chunk, kind, n_tokens)
            spans.append(span)
            tokens.extend(placeholder_ids(digest, n_tokens))
        return MediaPrompt(tokens, spans)

    def _embeddings(self, chunk: object, digest: str, n_tokens: int) -> np.ndarray:
        """The chunk's embeddings: encoded now, or kept from an earlier request."""
        key = f"{digest}:{n_tokens}"
        with self._lock:
            kept = self._kept.get(key)
            if kept is not None:
                self._kept.move_to_end(key)
                self.reused += 1
                return kept
            t0 = time.perf_counter()
            if mtmd.mtmd_encode_chunk(self.ctx, chunk) != 0:
                raise MediaError("the encoder failed on an image or clip", param="messages")
            self.encoded += 1
            self.encode_s += time.perf_counter() - t0
            out = mtmd.mtmd_get_output_embd(self.ctx)
            embd = np.ctypeslib.as_array(out, shape=(n_tokens * self.n_embd,)).copy()
            embd = embd.reshape(n_tokens, self.n_embd)
            self._kept[key] = embd
            self._kept_bytes += embd.nbytes
            while self._kept_bytes > _KEPT_EMBD_BYTES and len(self._kept) > 1:
                _, old = self._kept.popitem(last=False)
                self._kept_bytes -= old.nbytes
            return embd


def mrope_sections(chunk: object, kind: int, n_tokens: int) -> tuple[np.ndarray, np.ndarray]:
    """An M-RoPE chunk's position sections (time, row, column, unused) at first position
    0, and which of them move with the first position: libmtmd's own layout, read at
    first positions 0 and 1 (both 4 x n_tokens). Audio counts on in every section, as
    libmtmd decodes it."""
    if kind != mtmd.MTMD_INPUT_CHUNK_TYPE_IMAGE:
        rel = np.tile(np.arange(n_tokens, dtype=np.int32), (4, 1))
        return rel, np.ones((4, n_tokens), dtype=np.int32)
    image = mtmd.mtmd_input_chunk_get_tokens_image(chunk)
    at = []
    for pos_0 in (0, 1):
        out = (mtmd.mtmd_decoder_pos * n_tokens)()
        mtmd.mtmd_helper_image_get_decoder_pos(image, pos_0, out)
        # fields t, x, y, z; llama_batch's section order is time, row (y), column (x), z
        txyz = np.frombuffer(memoryview(out), dtype=np.uint32).reshape(n_tokens, 4).astype(np.int64)
        at.append(txyz[:, [0, 2, 1, 3]].T)
    return at[0].astype(np.int32), (at[1] - at[0]).astype(np.int32)
