"""The KV cache of the scheduler's context, and an exact count of the cells in use.

llama.cpp's unified KV cache shares cells between sequences after
``llama_memory_seq_cp``. :class:`KvAccounting` mirrors that: each sequence holds an
ordered list of segments (runs of positions); a copied prefix shares the source's
segments, and a segment's cells are freed only when its last holder lets it go. With a
KV stream per slot nothing is shared: a copy is a whole stream of the copy's own.

:class:`KvCache` makes each ``llama_memory_seq_*`` (and ``llama_state_seq_*``) call
together with its accounting, so the two cannot drift apart. :class:`KvAccounting` alone is
the same cache without a model: admission takes either, and tests run it in milliseconds.
"""

from __future__ import annotations

import ctypes

import llama_cpp
import numpy as np

from backend.engine.media.media_span import MediaSpan, PositionSpan, position_at


class _Segment:
    __slots__ = ("holders", "length")

    def __init__(self, length: int, holders: set[int]) -> None:
        self.length = length
        self.holders = holders


class KvAccounting:
    """Cells per sequence id, counted as llama.cpp holds them; no model involved."""

    def __init__(self, n_cells: int) -> None:
        self.n_cells = n_cells
        self.used = 0
        self._segments: dict[int, list[_Segment]] = {}

    @property
    def free(self) -> int:
        return self.n_cells - self.used

    def length(self, seq_id: int) -> int:
        """Positions ``seq_id`` holds."""
        return sum(s.length for s in self._segments.get(seq_id, ()))

    def add_cells(self, seq_id: int, n: int) -> None:
        """``n`` new cells were written for ``seq_id`` alone (by ``llama_decode``)."""
        if n <= 0:
            return
        segs = self._segments.setdefault(seq_id, [])
        if segs and segs[-1].holders == {seq_id}:
            segs[-1].length += n
        else:
            segs.append(_Segment(n, {seq_id}))
        self.used += n

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        """``dst`` (empty) now shares the first ``n`` cells of ``src`` (unified KV)."""
        assert not self._segments.get(dst), "destination sequence must be empty"
        self._split_at(src, n)
        taken: list[_Segment] = []
        covered = 0
        for seg in self._segments.get(src, []):
            if covered >= n:
                break
            seg.holders.add(dst)
            taken.append(seg)
            covered += seg.length
        self._segments[dst] = taken

    def copy_stream(self, src: int, dst: int) -> None:
        """``dst``'s stream becomes a copy of ``src``'s, whatever it held (KV per slot)."""
        self._forget(dst)
        self.add_cells(dst, self.length(src))

    def keep(self, seq_id: int, n: int) -> None:
        """Drop the cells of ``seq_id`` at positions >= ``n``."""
        self._split_at(seq_id, n)
        covered = 0
        kept: list[_Segment] = []
        for seg in self._segments.get(seq_id, []):
            if covered < n:
                kept.append(seg)
            else:
                self._release(seg, seq_id)
            covered += seg.length
        self._segments[seq_id] = kept

    def rm(self, seq_id: int) -> None:
        """Drop every cell of ``seq_id``."""
        self._forget(seq_id)

    def shift(self, seq_id: int, n_keep: int, n_discard: int, n_past: int) -> None:
        """``seq_id``'s cells ``[n_keep, n_keep + n_discard)`` dropped and the ``n_past``
        less those after them moved back (context shift: a stream of its own only)."""
        assert all(seg.holders == {seq_id} for seg in self._segments.get(seq_id, []))
        n = self.length(seq_id)
        self._forget(seq_id)
        self.add_cells(seq_id, n - n_discard)

    def bind(self, seq_id: int, media: list[MediaSpan]) -> None:
        """``seq_id`` now holds (a prefix of) a prompt with these media: their positions
        place its cells (see :meth:`KvCache.bind`). Cells are counted by index: nothing
        to do here."""

    def positions_differ(self, seq_id: int) -> bool:
        """``seq_id``'s positions are not its cell indices (an image placed with M-RoPE)."""
        return False

    def save_seq(self, seq_id: int) -> np.ndarray | None:
        """The state of ``seq_id``'s cells, to be put back by :meth:`restore_seq`; None when
        it cannot be read. Without a model there is nothing to copy: one byte per cell
        stands for it, so that byte budgets can be tested without llama.cpp."""
        return np.zeros(self.length(seq_id), dtype=np.uint8)

    def restore_seq(self, seq_id: int, state: np.ndarray, n_cells: int) -> bool:
        """``seq_id`` holds the ``n_cells`` cells saved in ``state``, whatever it held
        before; False (and ``seq_id`` empty) when the state could not be loaded."""
        self._forget(seq_id)
        self.add_cells(seq_id, n_cells)
        return True

    def _forget(self, seq_id: int) -> None:
        for seg in self._segments.pop(seq_id, []):
            self._release(seg, seq_id)

    def _release(self, seg: _Segment, seq_id: int) -> None:
        seg.holders.discard(seq_id)
        if not seg.holders:
            self.used -= seg.length

    def _split_at(self, seq_id: int, n: int) -> None:
        """Make ``n`` fall on a segment boundary of ``seq_id`` (and of every sharer)."""
        covered = 0
        for seg in self._segments.get(seq_id, []):
            if covered + seg.length > n > covered:
                head = _Segment(n - covered, set(seg.holders))
                tail = _Segment(seg.length - (n - covered), set(seg.holders))
                for holder in seg.holders:
                    lst = self._segments[holder]
                    i = lst.index(seg)
                    lst[i : i + 1] = [head, tail]
                return
            covered += seg.length
            if covered >= n:
                return


class KvCache(KvAccounting):
    """The ``llama_memory`` of one context: each change is made there and counted here.

    :meth:`save_seq` and :meth:`restore_seq` copy a sequence's cells to host memory and
    back (``llama_state_seq_get_data``/``set_data``). The bytes are llama.cpp's own sequence
    format (positions, then K and V rows per layer); they load only into a context of the
    same model, KV types and layout."""

    def __init__(
        self, ctx: llama_cpp.llama_context_p, memory: llama_cpp.llama_memory_t, n_cells: int
    ) -> None:
        super().__init__(n_cells)
        self._ctx = ctx
        self._memory = memory
        self._spans: dict[int, list[PositionSpan]] = {}

    def bind(self, seq_id: int, media: list[MediaSpan]) -> None:
        """llama.cpp's calls name positions, the accounting cells: the same numbers, except
        after an image placed with M-RoPE (fewer positions than cells). The media of the
        prompt ``seq_id`` holds map one to the other; a copy or a cut prefix keeps the
        source's, which agree with any prompt sharing that prefix."""
        spans = [p for span in media if (p := span.position_span()) is not None]
        if spans:
            self._spans[seq_id] = spans
        else:
            self._spans.pop(seq_id, None)

    def positions_differ(self, seq_id: int) -> bool:
        return bool(self._spans.get(seq_id))

    def _pos(self, seq_id: int, n: int) -> int:
        spans = self._spans.get(seq_id)
        return position_at(spans, n) if spans else n

    def _copy_spans(self, src: int, dst: int) -> None:
        spans = self._spans.get(src)
        if spans:
            self._spans[dst] = spans
        else:
            self._spans.pop(dst, None)

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        llama_cpp.llama_memory_seq_cp(self._memory, src, dst, 0, self._pos(src, n))
        super().copy_prefix(src, dst, n)
        self._copy_spans(src, dst)

    def copy_stream(self, src: int, dst: int) -> None:
        # cross-stream copies are whole-stream; llama.cpp applies them at the next decode
        llama_cpp.llama_memory_seq_cp(self._memory, src, dst, -1, -1)
        super().copy_stream(src, dst)
        self._copy_spans(src, dst)

    def keep(self, seq_id: int, n: int) -> None:
        llama_cpp.llama_memory_seq_rm(self._memory, seq_id, self._pos(seq_id, n), -1)
        super().keep(seq_id, n)

    def shift(self, seq_id: int, n_keep: int, n_discard: int, n_past: int) -> None:
        mem = self._memory
        llama_cpp.llama_memory_seq_rm(mem, seq_id, n_keep, n_keep + n_discard)
        llama_cpp.llama_memory_seq_add(mem, seq_id, n_keep + n_discard, n_past, -n_discard)
        super().shift(seq_id, n_keep, n_discard, n_past)

    def rm(self, seq_id: int) -> None:
        llama_cpp.llama_memory_seq_rm(self._memory, seq_id, -1, -1)
        super().rm(seq_id)
        self._spans.pop(seq_id, None)

    def save_seq(self, seq_id: int) -> np.ndarray | None:
        size = llama_cpp.llama_state_seq_get_size(self._ctx, seq_id)
        if size <= 0:
            return None
        state = np.empty(size, dtype=np.uint8)  # not zero-filled: llama.cpp writes it all
        written = llama_cpp.llama_state_seq_get_data(
            self._ctx, state.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)), size, seq_id
        )
        return state[:written] if written > 0 else None

    def restore_seq(self, seq_id: int, state: np.ndarray, n_cells: int) -> bool:
        # llama.cpp empties seq_id first, and empties it again when the load fails
        read = llama_cpp.llama_state_seq_set_data(
            self._ctx,
            state.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8)),
            state.nbytes,
            seq_id,
        )
        if read <= 0:
            super().rm(seq_id)
            return False
        return super().restore_seq(seq_id, state, n_cells)
