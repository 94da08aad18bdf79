"""llama-server's slot actions (``POST /slots/{id}?action=save|restore|erase``): a slot's
tokens and KV written to a file of the caller's choosing, read back into any idle slot, or
dropped.

With a KV stream per slot (the default layout) a slot is a llama.cpp sequence id whose idle
state is a prefix-cache entry (:class:`~backend.engine.admission.PerSlotAdmission`). A save
copies that entry's cells to host memory on the scheduler thread, between two steps
(:meth:`~backend.engine.scheduler.Scheduler.between_steps`), then writes the file on the
caller's thread. A restore reads and checks the file on the caller's thread, then loads it
into the slot between two steps: the slot's entry is then the file's tokens, and the next
prompt sharing them reuses their KV as for any cached prefix (what the slot cached before
is kept by the session tiers, as when a request takes a slot). An erase drops the slot's
KV and entry, unsaved.

The file is the disk tier's entry format (:mod:`backend.engine.session_disk_store`), with
its key (model fingerprint, llama.cpp build, KV settings) and checksum: a truncated,
corrupt or foreign file is refused before the slot is touched. It is not llama-server's
format, so files do not move between the two servers.

Refused, with a reason: a slot that is processing a request (llama-server waits for it
instead), ``--kv-unified`` (no fixed slots: sequences take any id), models whose KV cannot
be cut back to a prefix (recurrent, hybrid) or whose sliding-window layers keep only their
window in a saved state (a later prompt sharing part of the slot would read cells that are
not there), and a slot holding an image placed with M-RoPE (its positions are not its
cells, which the file does not record).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import Any, TypeVar

import llama_cpp
import numpy as np

from backend.engine.admission import PerSlotAdmission
from backend.engine.errors import EngineError, InvalidRequestError
from backend.engine.scheduler import Scheduler
from backend.engine.session_cache import SessionEntry
from backend.engine.session_disk_store import (
    CorruptEntry,
    encode_entry,
    read_entry_file,
    write_entry_file,
)
from backend.engine.session_key import session_key
from backend.engine.session_setup import cannot_cut

log = logging.getLogger(__name__)

T = TypeVar("T")

WAIT_S = 600.0  # for the scheduler thread to take a slot action (it does between steps)


class SlotActionError(InvalidRequestError):
    """A slot action that cannot be done: a bad slot id, a busy slot, an unusable file."""

    def __init__(self, message: str, *, param: str | None = None, code: str) -> None:
        super().__init__(message, param=param)
        self.code = code


@dataclass(frozen=True)
class SlotFileResult:
    """What a save or a restore moved: tokens, file bytes, milliseconds."""

    n_tokens: int
    n_bytes: int
    ms: float


class SlotFiles:
    """The slot actions of one engine (thread-safe; each call blocks its caller's thread)."""

    def __init__(self, scheduler: Scheduler) -> None:
        self._scheduler = scheduler
        self._rt = scheduler.rt

    @cached_property
    def _key(self) -> dict[str, Any]:
        return session_key(self._rt)

    @property
    def n_slots(self) -> int:
        return self._scheduler.parallel

    def unsupported(self) -> str | None:
        """Why this engine's slots cannot be saved or restored, or None."""
        rt = self._rt
        if not rt.can_generate:
            return "the model has no KV cache (it serves embeddings only)"
        if rt.kv_unified:
            return (
                "with --kv-unified there are no fixed slots (sequences take any KV id); run "
                "with a KV stream per slot (the default) to save and restore slots"
            )
        if cannot_cut(rt):
            return "a recurrent or hybrid model's state cannot be restored as a slot prefix"
        if int(llama_cpp.llama_model_n_swa(rt.model)) > 0:
            return (
                "a sliding-window model's saved state holds only its window, which a later "
                "prompt sharing part of the slot cannot reuse"
            )
        return None

    # ---- the actions (the caller's thread) ---------------------------------------------
    def save(self, slot: int, path: Path) -> SlotFileResult:
        """Write idle ``slot``'s tokens and KV to ``path``."""
        t = time.perf_counter()
        entry = self._between_steps(lambda: self._take(slot))
        encoded = encode_entry(self._key, entry)
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            write_entry_file(path, encoded)
        except OSError as exc:
            raise EngineError(f"Unable to save slot {slot}: {exc}") from exc
        ms = 1000 * (time.perf_counter() - t)
        n = len(entry.tokens)
        log.info("slot %d saved to %s: %d tokens, %d bytes", slot, path, n, encoded.size)
        return SlotFileResult(len(entry.tokens), encoded.size, ms)

    def restore(self, slot: int, path: Path) -> SlotFileResult:
        """Load the file at ``path`` into idle ``slot``; a file that cannot be read, is
        corrupt or was saved by another model, build or KV setting changes nothing."""
        t = time.perf_counter()
        try:
            entry = read_entry_file(path, self._key)
            n_bytes = path.stat().st_size
        except FileNotFoundError:
            raise SlotActionError(
                f"Unable to restore slot: no file {path.name}", param="filename", code="not_found"
            ) from None
        except (CorruptEntry, OSError) as exc:
            raise SlotActionError(
                f"Unable to restore slot: {path.name}: {exc}", param="filename", code="bad_file"
            ) from None
        self._check_tokens(entry, path.name)
        self._between_steps(lambda: self._put(slot, entry))
        ms = 1000 * (time.perf_counter() - t)
        log.info("slot %d restored from %s: %d tokens", slot, path, len(entry.tokens))
        return SlotFileResult(len(entry.tokens), n_bytes, ms)

    def erase(self, slot: int) -> int:
        """Empty idle ``slot``; the tokens it held."""
        return self._between_steps(lambda: self._erase(slot))

    def _check_tokens(self, entry: SessionEntry, name: str) -> None:
        rt = self._rt
        if len(entry.tokens) > rt.n_ctx_seq:
            raise SlotActionError(
                f"Unable to restore slot: {name} holds {len(entry.tokens)} tokens, more than "
                f"a slot's context of {rt.n_ctx_seq}",
                param="filename",
                code="bad_file",
            )
        tokens = entry.tokens
        if len(tokens) and not (int(tokens.min()) >= 0 and int(tokens.max()) < rt.n_vocab):
            raise SlotActionError(
                f"Unable to restore slot: {name} holds token ids outside the vocabulary",
                param="filename",
                code="bad_file",
            )

    def _between_steps(self, work: Callable[[], T]) -> T:
        return self._scheduler.between_steps(work).result(timeout=WAIT_S)

    # ---- on the scheduler thread, between steps ---------------------------------------
    def _admission(self, slot: int) -> PerSlotAdmission:
        """The per-slot admission, once ``slot`` is known to exist and be idle."""
        reason = self.unsupported()
        admission = self._scheduler.admission
        if reason is not None or not isinstance(admission, PerSlotAdmission):
            raise SlotActionError(reason or "no fixed slots", code="not_supported")
        if not 0 <= slot < self.n_slots:
            raise SlotActionError(
                f"Invalid slot ID {slot}: this server has slots 0 to {self.n_slots - 1}",
                param="id_slot",
                code="invalid_slot",
            )
        if any(seq.seq_id == slot for seq in self._scheduler.running):
            raise SlotActionError(
                f"slot {slot} is processing a request; retry once it is idle (GET /slots)",
                param="id_slot",
                code="slot_busy",
            )
        return admission

    def _take(self, slot: int) -> SessionEntry:
        admission = self._admission(slot)
        cached = admission.cache.get(slot)
        if cached is None:
            return SessionEntry(np.zeros(0, np.int32), np.zeros(0, np.uint8))
        kv = self._scheduler.kv
        if kv.positions_differ(slot):
            raise SlotActionError(
                f"slot {slot} holds an image placed with M-RoPE, which a slot file cannot record",
                param="id_slot",
                code="not_supported",
            )
        state = kv.save_seq(slot)
        if state is None:
            raise EngineError(f"Unable to save slot {slot}: llama.cpp gave no state")
        return SessionEntry(np.array(cached.tokens, dtype=np.int32), state)

    def _put(self, slot: int, entry: SessionEntry) -> None:
        if not self._admission(slot).restore_slot(slot, entry):
            raise SlotActionError(
                f"Unable to restore slot {slot}: llama.cpp could not load the state (the slot "
                "is now empty)",
                param="filename",
                code="bad_file",
            )

    def _erase(self, slot: int) -> int:
        return self._admission(slot).erase_slot(slot)
