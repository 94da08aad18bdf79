"""Exact count of KV cells in use when sequences share prefixes.

llama.cpp's unified KV cache shares cells between sequences after
``llama_memory_seq_cp``. We mirror that: each sequence holds an ordered list of
segments (runs of positions); a copied prefix shares the source's segments, and
a segment's cells are freed only when its last holder lets it go.
"""

from __future__ import annotations


class _Segment:
    __slots__ = ("holders", "length")

    def __init__(self, length: int, holders: set[int]) -> None:
        self.length = length
        self.holders = holders


class KvAccounting:
    def __init__(self, n_cells: int) -> None:
        self.n_cells = n_cells
        self.used = 0
        self._segments: dict[int, list[_Segment]] = {}

    @property
    def free(self) -> int:
        return self.n_cells - self.used

    def length(self, seq_id: int) -> int:
        return sum(s.length for s in self._segments.get(seq_id, ()))

    def extend(self, seq_id: int, n: int) -> None:
        """``n`` new cells were written for ``seq_id`` alone."""
        if n <= 0:
            return
        segs = self._segments.setdefault(seq_id, [])
        if segs and segs[-1].holders == {seq_id}:
            segs[-1].length += n
        else:
            segs.append(_Segment(n, {seq_id}))
        self.used += n

    def copy_prefix(self, src: int, dst: int, n: int) -> None:
        """``dst`` (empty) now shares the first ``n`` cells of ``src``."""
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

    def truncate(self, seq_id: int, n: int) -> None:
        """Drop the cells of ``seq_id`` at positions >= ``n``."""
        self._split_at(seq_id, n)
        segs = self._segments.get(seq_id, [])
        covered = 0
        keep: list[_Segment] = []
        for seg in segs:
            if covered < n:
                keep.append(seg)
            else:
                self._release(seg, seq_id)
            covered += seg.length
        self._segments[seq_id] = keep

    def remove(self, seq_id: int) -> None:
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
