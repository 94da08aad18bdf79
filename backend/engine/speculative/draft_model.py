"""A small draft model (llama-server's ``-md``/``--model-draft``, ``--spec-type draft-simple``).

A second llama.cpp context on the draft GGUF, laid out like the served one (same ``-c``,
sequence ids and KV layout), so each sequence drafts in the draft sequence of the same
id. The draft KV follows each sequence by common prefix: what the draft context holds past
the sequence's tokens (rejected draft tokens, another request's tokens) is trimmed and
the tokens it lacks are decoded, so after a step that accepted part of a draft only the
few new tokens are. Drafting is greedy, for every drafting sequence at once: one batch
catches them up (reading the first draft token at each one's last row), then one decode
per draft position extends every sequence that still drafts. A sequence stops at its
``n_max`` or at a token the draft model gives less than ``p_min``.

The vocabularies must agree token for token, or the drafts would name other tokens in the
served model: :func:`vocab_mismatch` applies llama.cpp's own check
(``common_speculative_are_compatible``) before the draft's weights are loaded.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import llama_cpp
import numpy as np

from backend.engine.errors import ModelLoadError
from backend.engine.model_runtime import ModelRuntime, logits_row
from backend.engine.sequence import common_prefix
from backend.engine.speculative.draft_policy import DecodeCost
from backend.llama.backend_init import init_llama_backend
from backend.settings.engine_settings import EngineSettings

log = logging.getLogger(__name__)

# llama.cpp's SPEC_VOCAB_MAX_SIZE_DIFFERENCE and SPEC_VOCAB_CHECK_START_TOKEN_ID
MAX_VOCAB_SIZE_DIFFERENCE = 128
CHECK_FROM_TOKEN = 5


def _texts(vocab: object, n: int) -> list[bytes | None]:
    return [llama_cpp.llama_vocab_get_text(vocab, i) for i in range(CHECK_FROM_TOKEN, n)]


def _shown(text: bytes | None) -> str:
    return repr((text or b"").decode(errors="replace"))


def vocab_mismatch(target: object, draft: object) -> str | None:
    """Why the draft vocabulary cannot draft for the target one, or None when it can:
    the same tokenizer type, BOS and EOS, sizes within 128 and the same text for every
    token from id 5 on."""
    vt, vd = llama_cpp.llama_vocab_type(target), llama_cpp.llama_vocab_type(draft)
    if vt != vd:
        return f"their tokenizer types differ (target {vt}, draft {vd})"
    for name in ("bos", "eos"):
        adds = getattr(llama_cpp, f"llama_vocab_get_add_{name}")
        token = getattr(llama_cpp, f"llama_vocab_{name}")
        add_t, add_d = bool(adds(target)), bool(adds(draft))
        if add_t != add_d or (add_t and token(target) != token(draft)):
            return (
                f"their {name.upper()} tokens differ (target: id {token(target)}, added "
                f"{add_t}; draft: id {token(draft)}, added {add_d})"
            )
    nt, nd = llama_cpp.llama_vocab_n_tokens(target), llama_cpp.llama_vocab_n_tokens(draft)
    if abs(nt - nd) > MAX_VOCAB_SIZE_DIFFERENCE:
        return (
            f"their vocabulary sizes differ by more than {MAX_VOCAB_SIZE_DIFFERENCE} "
            f"(target {nt}, draft {nd})"
        )
    n = min(nt, nd)
    texts_t, texts_d = _texts(target, n), _texts(draft, n)
    if texts_t != texts_d:
        i = next(i for i, (a, b) in enumerate(zip(texts_t, texts_d, strict=True)) if a != b)
        return (
            f"token {i + CHECK_FROM_TOKEN} differs (target {_shown(texts_t[i])}, "
            f"draft {_shown(texts_d[i])})"
        )
    return None


def check_draft_vocab(target: ModelRuntime, path: Path) -> None:
    """Raise :class:`ModelLoadError` unless the GGUF at ``path`` can draft for ``target``;
    reads only the draft's vocabulary."""
    init_llama_backend(logging.getLogger("llama_cpp.native"))
    params = llama_cpp.llama_model_default_params()
    params.vocab_only = True
    model = llama_cpp.llama_model_load_from_file(str(path).encode(), params)
    if not model:
        raise ModelLoadError(f"llama.cpp could not load the draft model {path} (not a valid GGUF?)")
    try:
        reason = vocab_mismatch(target.vocab, llama_cpp.llama_model_get_vocab(model))
    finally:
        llama_cpp.llama_model_free(model)
    if reason is not None:
        raise ModelLoadError(
            f"the draft model {path.name} cannot draft for {target.info.path.name}: {reason}; "
            "speculative decoding needs a draft model with the same tokenizer"
        )


@dataclass
class DraftRequest:
    """One sequence to draft for: its id, its tokens (the last one not decoded by the
    served model yet), the most tokens to draft and the probability to stop under."""

    seq_id: int
    tokens: list[int]
    n_max: int
    p_min: float
    draft: list[int] = field(default_factory=list)


@dataclass
class _Held:
    """What a draft sequence holds in the draft KV: ``source[:synced]`` then ``extra``."""

    source: list[int]
    synced: int
    extra: list[int] = field(default_factory=list)

    @property
    def length(self) -> int:
        return self.synced + len(self.extra)


class DraftModel:
    """The draft context; only the scheduler thread drafts with it."""

    def __init__(self, path: Path, settings: EngineSettings, target: ModelRuntime) -> None:
        check_draft_vocab(target, path)
        draft_settings = settings.model_copy(
            update={
                "model": str(path),
                "gpu_layers": settings.gpu_layers_draft,
                "cache_type_k": "f16",
                "cache_type_v": "f16",
            }
        )
        self.rt = ModelRuntime(path, draft_settings, n_seq_max=target.n_seq_max)
        rt = self.rt
        llama_cpp.llama_set_n_threads(
            rt.ctx, settings.threads, settings.threads_batch or settings.threads
        )
        self._target_vocab = target.n_vocab
        self._n_batch = rt.n_batch
        self._batch = llama_cpp.llama_batch_init(self._n_batch, 0, 1)
        self._held: dict[int, _Held] = {}
        # what one draft decode costs by rows (set by the speculator, which weighs it)
        self.cost: DecodeCost | None = None
        self._decodes = 0  # sequential decodes in the current draft() call

    def close(self) -> None:
        if self._batch is not None:
            llama_cpp.llama_batch_free(self._batch)
            self._batch = None
        self.rt.close()

    # ---- drafting ---------------------------------------------------------------
    def draft(self, requests: list[DraftRequest]) -> None:
        """Fill each request's ``draft``. A failed decode leaves the drafts empty (the
        step then runs without them) and clears the draft KV, which the next call rebuilds."""
        requests = sorted(requests, key=lambda r: r.seq_id)  # runs of slots, for llama.cpp
        t = time.perf_counter()
        self._decodes = 0
        pending = [self._sync(r) for r in requests]
        self._make_room(requests, pending)
        try:
            self._catch_up(requests, pending)
            self._extend([r for r in requests if r.draft and len(r.draft) < r.n_max])
            if self.cost is not None and self._decodes:
                # what one draft token really cost: the whole call (catching up, reading
                # logits, the p_min check) per sequential decode, not the bare decode
                seconds = (time.perf_counter() - t) / self._decodes
                self.cost.observe(len(requests), seconds)
        except _DecodeFailed as exc:
            log.warning("draft model decode failed (code %d): drafting restarts", exc.rc)
            for r in requests:
                r.draft = []
            llama_cpp.llama_memory_clear(self.rt.memory, True)
            self._held.clear()

    def _sync(self, r: DraftRequest) -> list[int]:
        """Trim the draft sequence to its common prefix with ``r.tokens`` (leaving at least
        the last token to decode); returns the tokens it lacks."""
        held = self._held.get(r.seq_id)
        tokens = r.tokens
        keep = 0
        if held is not None:
            if held.source is tokens:  # the same sequence, grown since: compare the tail
                keep = held.synced
                for a, b in zip(held.extra, tokens[held.synced :], strict=False):
                    if a != b:
                        break
                    keep += 1
            else:
                held_tokens = held.source[: held.synced] + held.extra
                keep = common_prefix(_array(held_tokens), _array(tokens))
            keep = min(keep, len(tokens) - 1)
            if keep < held.length:
                llama_cpp.llama_memory_seq_rm(self.rt.memory, r.seq_id, keep, -1)
        self._held[r.seq_id] = _Held(tokens, keep)
        return tokens[keep:]

    def _make_room(self, requests: list[DraftRequest], pending: list[list[int]]) -> None:
        """With one KV shared by every sequence, drop the draft sequences nobody drafts in
        now when the cache could not take this call's tokens beside them."""
        if not self.rt.kv_unified:
            return  # a stream per slot: each sequence has its own room
        need = sum(len(p) + r.n_max for r, p in zip(requests, pending, strict=True))
        used = sum(h.length for h in self._held.values())
        if used + need <= self.rt.n_ctx:
            return
        drafting = {r.seq_id for r in requests}
        for seq_id in [s for s in self._held if s not in drafting]:
            llama_cpp.llama_memory_seq_rm(self.rt.memory, seq_id, -1, -1)
            del self._held[seq_id]

    def _catch_up(self, requests: list[DraftRequest], pending: list[list[int]]) -> None:
        """Decode what each draft sequence lacks, in chunks of ``n_batch``; each one's
        last row gives its first draft token."""
        rows = [
            (r, token, len(r.tokens) - len(toks) + j, j == len(toks) - 1)
            for r, toks in zip(requests, pending, strict=True)
            for j, token in enumerate(toks)
        ]
        batch = self._batch
        for start in range(0, len(rows), self._n_batch):
            chunk = rows[start : start + self._n_batch]
            for i, (r, token, pos, last) in enumerate(chunk):
                _set_row(batch, i, token, pos, r.seq_id, last)
            batch.n_tokens = len(chunk)
            self._decode()
            for i, (r, _, _, last) in enumerate(chunk):
                if last:
                    self._next_token(r, i)
        for r, toks in zip(requests, pending, strict=True):
            self._held[r.seq_id].synced += len(toks)

    def _extend(self, drafting: list[DraftRequest]) -> None:
        """One decode per draft position, for every sequence still drafting."""
        batch = self._batch
        while drafting:
            for i, r in enumerate(drafting):
                _set_row(batch, i, r.draft[-1], len(r.tokens) + len(r.draft) - 1, r.seq_id, True)
                self._held[r.seq_id].extra.append(r.draft[-1])
            batch.n_tokens = len(drafting)
            self._decode()
            grown = [self._next_token(r, i) for i, r in enumerate(drafting)]
            drafting = [r for r, ok in zip(drafting, grown, strict=True) if ok]
            drafting = [r for r in drafting if len(r.draft) < r.n_max]

    def _next_token(self, r: DraftRequest, row: int) -> bool:
        """Append the draft model's greedy token at ``row`` to ``r.draft`` unless its
        probability is under ``r.p_min`` or the served model lacks it."""
        logits = logits_row(self.rt.ctx, row, self.rt.n_vocab)
        token = int(logits.argmax())
        if token >= self._target_vocab:
            return False
        if r.p_min > 0.0:
            top = logits[token]
            if 1.0 / float(np.exp(logits - top).sum()) < r.p_min:
                return False
        r.draft.append(token)
        return True

    def _decode(self) -> None:
        self._decodes += 1
        rc = llama_cpp.llama_decode(self.rt.ctx, self._batch)
        if rc != 0:
            raise _DecodeFailed(rc)


class _DecodeFailed(Exception):
    def __init__(self, rc: int) -> None:
        super().__init__(rc)
        self.rc = rc


def _set_row(batch: Any, i: int, token: int, pos: int, seq_id: int, logits: bool) -> None:
    batch.token[i] = token
    batch.pos[i] = pos
    batch.n_seq_id[i] = 1
    batch.seq_id[i][0] = seq_id
    batch.logits[i] = 1 if logits else 0


def _array(tokens: list[int]) -> np.ndarray:
    return np.asarray(tokens, dtype=np.int32)
