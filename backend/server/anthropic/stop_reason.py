"""``stop_reason`` and ``stop_sequence`` of an answer.

The engine ends a sequence at a stop string as it does at an end-of-generation token
(``finish_reason`` "stop" either way) and never sends the stop string itself. Anthropic's
answer names the stop sequence that matched, so a request with ``stop_sequences`` asks the
engine for the chosen token of every step (``logprobs`` 0), and :class:`StopWitness` finds,
in those tokens' bytes, the stop sequence that the engine's stop detector cut at.
"""

from __future__ import annotations

import codecs

from backend.engine.request_types import FinishEvent, TokenLogprob, piece_bytes


class StopWitness:
    def __init__(self, stops: list[str]) -> None:
        self._stops = [s for s in stops if s]
        self._decoder = codecs.getincrementaldecoder("utf-8")(errors="replace")
        self._text = ""
        self.matched: str | None = None

    def add(self, tokens: list[TokenLogprob]) -> None:
        """The next generated tokens, in order."""
        for lp in tokens:
            if self.matched is not None:
                return
            self._text += self._decoder.decode(bytes(piece_bytes(lp.token)))
            # as StopDetector: after each token, the earliest stop in the text wins
            found = [(self._text.find(s), i) for i, s in enumerate(self._stops) if s in self._text]
            if found:
                self.matched = self._stops[min(found)[1]]


def stop_reason(finish: FinishEvent, used_tools: bool, stop_sequence: str | None) -> str:
    """end_turn, max_tokens, stop_sequence or tool_use."""
    if used_tools:
        return "tool_use"
    if finish.finish_reason == "length":
        return "max_tokens"
    return "stop_sequence" if stop_sequence is not None else "end_turn"
