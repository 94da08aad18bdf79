"""The reference's log-probabilities on disk, in llama.cpp's ``--kl-divergence-base`` format.

We chose llama.cpp's own compact form over keeping the top-k tokens: every scored position
keeps the *whole* distribution as uint16 codes of the log-softmax with a per-row float32
scale and minimum (see :func:`backend.compare.metrics.encode_log_probs`). The quantisation
step is at most 16/65535 nats, so the KL divergence is over the full vocabulary and exact to
about 1e-4 nats per token, while top-k would drop the tail mass that low-bit quants move.
It costs 2 bytes per vocabulary entry per scored position (SmolLM2: 96 KiB per position),
half of float32, and the file is byte-compatible with
``llama-perplexity --kl-divergence --kl-divergence-base FILE``.

Layout (little-endian): ``b"_logits_"``, uint32 n_ctx, int32 n_vocab, int32 n_chunk,
int32 tokens[n_chunk * n_ctx], then for each chunk ``n_ctx - 1 - n_ctx // 2`` rows of
``row_width(n_vocab)`` uint16.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import BinaryIO

import numpy as np

from backend.compare.errors import BaseLogitsError
from backend.compare.metrics import I32, U16, row_width

MAGIC = b"_logits_"
HEADER_BYTES = len(MAGIC) + 4 + 4 + 4


def scored_per_chunk(n_ctx: int) -> int:
    """Positions scored per chunk: the second half, minus the last (it has no next token)."""
    return n_ctx - 1 - n_ctx // 2


class BaseLogitsWriter:
    """Appends reference rows chunk by chunk to ``<path>.part``; :meth:`commit` renames it."""

    def __init__(self, path: Path, n_ctx: int, n_vocab: int, tokens: I32) -> None:
        if tokens.size % n_ctx:
            raise BaseLogitsError("token count is not a whole number of chunks")
        self.path = path
        self.part = path.with_name(path.name + ".part")
        self.n_ctx = n_ctx
        self.n_vocab = n_vocab
        self.n_chunk = tokens.size // n_ctx
        self._rows_written = 0
        self._fh: BinaryIO | None = self.part.open("wb")
        self._fh.write(MAGIC)
        self._fh.write(np.array([n_ctx], dtype="<u4").tobytes())
        self._fh.write(np.array([n_vocab, self.n_chunk], dtype="<i4").tobytes())
        self._fh.write(tokens.astype("<i4").tobytes())

    def write_rows(self, rows: U16) -> None:
        if self._fh is None:
            raise BaseLogitsError("base logits file already closed")
        if rows.shape[1] != row_width(self.n_vocab):
            raise BaseLogitsError("row width does not match the vocabulary")
        self._fh.write(np.ascontiguousarray(rows, dtype="<u2").tobytes())
        self._rows_written += rows.shape[0]

    def commit(self) -> Path:
        expected = self.n_chunk * scored_per_chunk(self.n_ctx)
        if self._rows_written != expected:
            self.abort()
            raise BaseLogitsError(f"wrote {self._rows_written} rows, expected {expected}")
        assert self._fh is not None
        self._fh.close()
        self._fh = None
        os.replace(self.part, self.path)
        return self.path

    def abort(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None
        self.part.unlink(missing_ok=True)


class BaseLogitsReader:
    """Memory-maps a base file and checks that it belongs to this run."""

    def __init__(self, path: Path) -> None:
        try:
            with path.open("rb") as fh:
                head = fh.read(HEADER_BYTES)
        except OSError as exc:
            raise BaseLogitsError(f"cannot read reference logits {path}: {exc}") from exc
        if len(head) < HEADER_BYTES or head[: len(MAGIC)] != MAGIC:
            raise BaseLogitsError(f"{path} is not a llama.cpp KL-divergence base file")
        self.path = path
        self.n_ctx = int(np.frombuffer(head, dtype="<u4", count=1, offset=8)[0])
        n_vocab, n_chunk = np.frombuffer(head, dtype="<i4", count=2, offset=12)
        self.n_vocab, self.n_chunk = int(n_vocab), int(n_chunk)
        n_tokens = self.n_ctx * self.n_chunk
        self.tokens: I32 = np.fromfile(path, dtype="<i4", count=n_tokens, offset=HEADER_BYTES)
        self.per_chunk = scored_per_chunk(self.n_ctx)
        width = row_width(self.n_vocab)
        offset = HEADER_BYTES + 4 * n_tokens
        expected = offset + 2 * width * self.per_chunk * self.n_chunk
        if self.tokens.size != n_tokens or path.stat().st_size != expected:
            raise BaseLogitsError(f"{path} is truncated or malformed")
        self._rows: U16 = np.memmap(
            path,
            dtype="<u2",
            mode="r",
            offset=offset,
            shape=(self.n_chunk * self.per_chunk, width),
        )

    def check_matches(self, n_ctx: int, n_vocab: int, tokens: I32) -> None:
        if self.n_ctx != n_ctx or self.n_vocab != n_vocab:
            raise BaseLogitsError(
                f"{self.path} was made with n_ctx={self.n_ctx}, n_vocab={self.n_vocab}; "
                f"this run uses n_ctx={n_ctx}, n_vocab={n_vocab}"
            )
        if not np.array_equal(self.tokens, tokens[: self.tokens.size]) or (
            tokens.size != self.tokens.size
        ):
            raise BaseLogitsError(f"{self.path} was made from a different text")

    def chunk_rows(self, chunk: int) -> U16:
        return self.rows(chunk * self.per_chunk, self.per_chunk)

    def rows(self, start: int, count: int) -> U16:
        """Rows ``start .. start + count - 1`` (chunk-major), as a view of the mapped file."""
        return self._rows[start : start + count]
