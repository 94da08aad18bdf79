"""Incremental detokenisation with stop strings detected across token boundaries.

Text that might be the start of a stop string is held back until it is either
confirmed (the sequence stops and the stop string is never emitted) or ruled out.
The bytes of a multi-byte character split across tokens are held until it is whole, so
neither the text sent nor the stop matching ever sees half a character.
"""

from __future__ import annotations

import codecs


class StopDetector:
    def __init__(self, stops: list[str]) -> None:
        self._stops = [s for s in stops if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._pending = ""
        self.stopped = False

    def feed(self, piece: bytes) -> str:
        """Add a token's bytes; return the text that is now safe to emit."""
        if self.stopped:
            return ""
        self._pending += self._decoder.decode(piece)
        if not self._stops:
            out, self._pending = self._pending, ""
            return out
        cut = -1
        for stop in self._stops:
            idx = self._pending.find(stop)
            if idx != -1 and (cut == -1 or idx < cut):
                cut = idx
        if cut != -1:
            self.stopped = True
            out = self._pending[:cut]
            self._pending = ""
            return out
        hold = self._held_suffix_len()
        if hold:
            out, self._pending = self._pending[:-hold], self._pending[-hold:]
        else:
            out, self._pending = self._pending, ""
        return out

    def flush(self) -> str:
        """The sequence ended for another reason: release what was held back. The bytes of
        a character cut off by the end (max_tokens inside an emoji) are dropped, as
        llama-server does, rather than sent as U+FFFD."""
        if self.stopped:
            return ""
        out = self._pending
        self._pending = ""
        self._decoder.reset()
        return out

    def _held_suffix_len(self) -> int:
        best = 0
        text = self._pending
        for stop in self._stops:
            for n in range(min(len(stop) - 1, len(text)), best, -1):
                if text.endswith(stop[:n]):
                    best = n
                    break
        return best
