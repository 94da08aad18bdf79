"""The disk tier of the session cache: saved sessions that survive a restart.

Entries come from the RAM tier (:mod:`backend.engine.session_cache`) when it evicts them
and when the engine closes. Each is one file under ``QUANTDESK_HOME/session-cache/<key>/``
(``<key>``: a digest of :func:`~backend.engine.session_key.session_key`, so other models or
KV settings never see it), laid out as::

    MAGIC (8 bytes) | header length (uint32 LE) | header (JSON) | tokens (int32 LE) | state

The header repeats the full key and gives the token count, the state's size and the SHA-256
of tokens and state. At start the headers and token lists are read into an in-memory index
(a few KB per entry); a prompt is matched against it, and only a match reads the state.
A stale (other key), truncated or corrupt entry is skipped with one log line and deleted,
never loaded. :func:`write_entry_file` and :func:`read_entry_file` are the format alone, for
one file at a path of the caller's (``POST /slots/{id}?action=save|restore`` writes a slot's
KV in it, and reads it back with the same checks).

Writes run on a writer thread of their own, never on the scheduler thread: each goes to a
temporary file, then an atomic rename. Any ``OSError`` (a full disk, a read-only folder)
costs the entry and one log line, never a request. The budget (``--cache-disk``) counts
every entry under ``session-cache/``, whichever model wrote it, least recently used (by
mtime, touched on every load) evicted first.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import os
import queue
import secrets
import shutil
import struct
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from backend.engine.sequence import common_prefix
from backend.engine.session_cache import MIB, SessionEntry, TierCounters, TierSnapshot
from backend.engine.session_key import key_digest

log = logging.getLogger(__name__)

MAGIC = b"QDKVSES1"
PREFIX = struct.Struct("<8sI")  # magic, header length
SUFFIX = ".qdkv"
FOLDER = "session-cache"
MAX_HEADER = 1 << 16


def default_disk_budget_mib(root: Path) -> int:
    """``--cache-disk`` when not given: the smaller of 4 GiB and a tenth of the free disk."""
    try:
        free = shutil.disk_usage(root).free // MIB
    except OSError:
        return 0
    return int(min(4096, free // 10))


@dataclass(eq=False)
class DiskRecord:
    """One entry file, as the index knows it."""

    path: Path
    tokens: np.ndarray
    nbytes: int


def _digest(tokens: bytes, state: memoryview | bytes) -> str:
    h = hashlib.sha256(tokens)
    h.update(state)
    return h.hexdigest()


class CorruptEntry(Exception):
    """An entry file that is not what its header says."""


def _read_header(f: Any, size: int) -> tuple[dict[str, Any], int]:
    """The header of an open entry file and the offset of its tokens."""
    raw = f.read(PREFIX.size)
    if len(raw) < PREFIX.size:
        raise CorruptEntry("shorter than its header")
    magic, length = PREFIX.unpack(raw)
    if magic != MAGIC or length > MAX_HEADER:
        raise CorruptEntry("not a session file")
    try:
        header = json.loads(f.read(length))
    except ValueError:
        raise CorruptEntry("unreadable header") from None
    if not isinstance(header, dict):
        raise CorruptEntry("unreadable header")
    start = PREFIX.size + length
    expected = start + 4 * int(header.get("n_tokens", 0)) + int(header.get("state_bytes", 0))
    if size != expected:
        raise CorruptEntry(f"truncated ({size} bytes, the header says {expected})")
    return header, start


STALE = "stale: saved by another model, build or KV setting"


@dataclass(frozen=True)
class EncodedEntry:
    """An entry laid out for its file: the header, the tokens and the state."""

    header: bytes
    tokens: bytes
    state: memoryview
    digest: str

    @property
    def size(self) -> int:
        return PREFIX.size + len(self.header) + len(self.tokens) + self.state.nbytes


def encode_entry(key: dict[str, Any], entry: SessionEntry) -> EncodedEntry:
    tokens = entry.tokens.astype("<i4").tobytes()
    state = memoryview(np.ascontiguousarray(entry.state).data).cast("B")
    digest = _digest(tokens, state)
    header = json.dumps(
        {
            "key": key,
            "n_tokens": len(entry.tokens),
            "state_bytes": state.nbytes,
            "sha256": digest,
            "created": time.time(),
        },
        sort_keys=True,
    ).encode()
    return EncodedEntry(header, tokens, state, digest)


def write_entry_file(path: Path, encoded: EncodedEntry) -> None:
    """Write ``encoded`` at ``path``: a temporary file beside it, then an atomic rename
    (a reader never sees half a file). Raises OSError."""
    # a name of its own: two writers of one file never share a temp file
    tmp = path.with_name(f".{path.name}.{os.getpid()}-{secrets.token_hex(4)}.tmp")
    try:
        with tmp.open("wb") as f:
            f.write(PREFIX.pack(MAGIC, len(encoded.header)))
            f.write(encoded.header)
            f.write(encoded.tokens)
            f.write(encoded.state)
        os.replace(tmp, path)
    except OSError:
        with contextlib.suppress(OSError):
            tmp.unlink()
        raise


def read_entry_file(path: Path, key: dict[str, Any]) -> SessionEntry:
    """The entry at ``path`` with its state, checked: the magic, the size the header gives,
    ``key`` and the checksum. Raises CorruptEntry (not such an entry, or not for ``key``)
    or OSError."""
    size = path.stat().st_size
    with path.open("rb") as f:
        header, _ = _read_header(f, size)
        if header.get("key") != key:
            raise CorruptEntry(STALE)
        data = f.read()
    n = int(header["n_tokens"])
    tokens_raw, state = data[: 4 * n], memoryview(data)[4 * n :]
    if _digest(tokens_raw, state) != header.get("sha256"):
        raise CorruptEntry("checksum mismatch")
    tokens = np.frombuffer(tokens_raw, dtype="<i4").astype(np.int32)
    return SessionEntry(tokens, np.frombuffer(state, dtype=np.uint8), on_disk=True)


class DiskStore:
    """Session entries on disk for one key, and their writer thread."""

    def __init__(self, root: Path, key: dict[str, Any], budget_bytes: int) -> None:
        self.root = root
        self.key = key
        self.dir = root / key_digest(key)
        self.budget_bytes = budget_bytes
        self.counters = TierCounters()
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)  # no write queued
        self._records: list[DiskRecord] = []
        self._queue: queue.SimpleQueue[SessionEntry | None] = queue.SimpleQueue()
        self._queued_bytes = 0
        self._queued = 0
        self._failed = False
        try:
            self.dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            log.warning("session cache on disk is off: cannot create %s: %s", self.dir, exc)
            self._failed = True
        self._load_index()
        self._writer = threading.Thread(
            target=self._write_loop, name="quantdesk-session-writer", daemon=True
        )
        self._writer.start()

    # ---- the index ------------------------------------------------------------------
    def _load_index(self) -> None:
        if self._failed:
            return
        for stale in self.dir.glob(f".*{SUFFIX}.*.tmp"):  # a write a killed server left
            with contextlib.suppress(OSError):
                if time.time() - stale.stat().st_mtime > 3600:  # not another one's, now
                    stale.unlink()
        for path in sorted(self.dir.glob(f"*{SUFFIX}"), key=_mtime):
            try:
                record = self._index_entry(path)
            except CorruptEntry as exc:
                self._discard(path, str(exc))
                continue
            except OSError as exc:
                log.warning("skipping saved session %s: %s", path.name, exc)
                continue
            self._records.append(record)
        if self._records:
            log.info(
                "session cache: %d saved sessions on disk (%.0f MiB)",
                len(self._records),
                sum(r.nbytes for r in self._records) / MIB,
            )

    def _index_entry(self, path: Path) -> DiskRecord:
        size = path.stat().st_size
        with path.open("rb") as f:
            header, _ = _read_header(f, size)
            if header.get("key") != self.key:
                raise CorruptEntry(STALE)
            n = int(header["n_tokens"])
            raw = f.read(4 * n)
        tokens = np.frombuffer(raw, dtype="<i4").astype(np.int32)
        return DiskRecord(path, tokens, size)

    def _discard(self, path: Path, why: str) -> None:
        log.warning("skipping saved session %s: %s", path.name, why)
        with contextlib.suppress(OSError):
            path.unlink()

    def best(self, target: np.ndarray, limit: int) -> tuple[DiskRecord | None, int]:
        """The entry sharing the longest prefix with ``target`` (at most ``limit``)."""
        best, best_n = None, 0
        with self._lock:
            for record in self._records:
                n = min(common_prefix(target, record.tokens), limit)
                if n > best_n:
                    best, best_n = record, n
        return best, best_n

    def holds(self, tokens: np.ndarray) -> bool:
        """A written entry holds all of ``tokens``."""
        with self._lock:
            return any(
                len(r.tokens) >= len(tokens) and common_prefix(r.tokens, tokens) == len(tokens)
                for r in self._records
            )

    # ---- reading (scheduler thread) -----------------------------------------------------
    def load(self, record: object) -> SessionEntry | None:
        """The entry of ``record`` with its state, checked against its checksum; None (and
        the file gone from the index) when it cannot be read or is corrupt."""
        assert isinstance(record, DiskRecord)
        path = record.path
        try:
            loaded = read_entry_file(path, self.key)
            os.utime(path)  # recently used: the budget evicts it last
        except CorruptEntry as exc:
            self._forget(record)
            self._discard(path, str(exc))
            return None
        except OSError as exc:
            self._forget(record)
            log.warning("skipping saved session %s: %s", path.name, exc)
            return None
        if not np.array_equal(loaded.tokens, record.tokens):
            self._forget(record)
            self._discard(path, "its tokens changed since it was indexed")
            return None
        return loaded

    def _forget(self, record: DiskRecord) -> None:
        with self._lock:
            if record in self._records:
                self._records.remove(record)

    # ---- writing (writer thread) --------------------------------------------------------
    def write(self, entry: SessionEntry) -> None:
        """Queue ``entry`` for the writer; dropped (one log line) when the queue already
        holds more than the budget, so that a slow disk cannot hold RAM without bound."""
        if self._failed or entry.nbytes > self.budget_bytes:
            return
        with self._lock:
            if self._queued_bytes + entry.nbytes > self.budget_bytes:
                log.warning("session cache: the disk writer is behind, an entry is dropped")
                return
            self._queued_bytes += entry.nbytes
            self._queued += 1
        self._queue.put(entry)

    def flush(self, timeout: float) -> bool:
        """Wait (at most ``timeout`` s) until every queued entry is written or dropped."""
        with self._lock:
            return self._drained.wait_for(lambda: not self._queued, timeout)

    def close(self, timeout: float) -> None:
        """Finish the queued writes (for at most ``timeout`` s) and stop the writer."""
        self._queue.put(None)
        self._writer.join(timeout)
        if self._writer.is_alive():
            log.warning("session cache: writes to disk still running after %.0f s", timeout)

    def _write_loop(self) -> None:
        while True:
            entry = self._queue.get()
            if entry is None:
                return
            try:
                if not self.holds(entry.tokens):
                    self._write(entry)
                    self._enforce_budget()
            except OSError as exc:
                log.warning("session cache: could not write to %s: %s", self.dir, exc)
            except Exception:  # the writer must outlive any one entry
                log.exception("session cache: writing an entry failed")
            finally:
                with self._lock:
                    self._queued_bytes -= entry.nbytes
                    self._queued -= 1
                    if not self._queued:
                        self._drained.notify_all()

    def _write(self, entry: SessionEntry) -> None:
        encoded = encode_entry(self.key, entry)
        path = self.dir / f"{time.time_ns()}-{encoded.digest[:12]}{SUFFIX}"
        write_entry_file(path, encoded)
        size = encoded.size
        record = DiskRecord(path, np.array(entry.tokens, dtype=np.int32), size)
        with self._lock:
            # entries the new one extends are the same session, earlier: drop them
            superseded = [
                r
                for r in self._records
                if len(r.tokens) <= len(record.tokens)
                and common_prefix(r.tokens, record.tokens) == len(r.tokens)
            ]
            for r in superseded:
                self._records.remove(r)
            self._records.append(record)
        for r in superseded:
            with contextlib.suppress(OSError):
                r.path.unlink()

    def _enforce_budget(self) -> None:
        """Delete the least recently used entries of every key until all fit the budget."""
        files: list[tuple[float, int, Path]] = []
        for path in self.root.glob(f"*/*{SUFFIX}"):
            try:
                st = path.stat()
            except OSError:
                continue
            files.append((st.st_mtime, st.st_size, path))
        total = sum(size for _, size, _ in files)
        if total <= self.budget_bytes:
            return
        gone: set[Path] = set()
        for _, size, path in sorted(files):
            if total <= self.budget_bytes:
                break
            try:
                path.unlink()
            except OSError:
                continue
            total -= size
            gone.add(path)
        with self._lock:
            self._records = [r for r in self._records if r.path not in gone]

    def snapshot(self) -> TierSnapshot:
        with self._lock:
            n, size = len(self._records), sum(r.nbytes for r in self._records)
        c = self.counters
        return TierSnapshot(n, size, self.budget_bytes, c.hits, c.misses, c.tokens_saved)


def _mtime(path: Path) -> float:
    try:
        return path.stat().st_mtime
    except OSError:
        return 0.0
