"""A reasoning model's thinking, split from its answer as the text streams in.

As llama-server's ``--reasoning-format`` (``auto``/``deepseek``) does: text between
``<think>`` and ``</think>`` at the start of the answer is reasoning, the rest is the
answer. A chat template that opens ``<think>`` itself at the end of the generation prompt
(Qwen3's and DeepSeek-R1's thinking modes) leaves the model inside the thinking from its
first token; a ``<think>`` the model writes again there is dropped. Each dialect gives the
reasoning its own shape: ``reasoning_content`` in chat completions, ``thinking`` blocks in
``/v1/messages`` and ``reasoning`` output items in ``/v1/responses``; ``none`` leaves the
text as it came.

Tags split across token pieces (``<th`` + ``ink>``) are held until they can be told
apart from text; so is whitespace at the edges of the reasoning and at the start of the
answer, which is dropped, so that a streamed answer reads as the whole one does.
"""

from __future__ import annotations

from typing import NamedTuple

from backend.settings.server_settings import ReasoningFormat

OPEN, CLOSE = "<think>", "</think>"


class Split(NamedTuple):
    """What one piece of text added: reasoning first, then answer (the reasoning always
    comes before the answer, so one piece never has them the other way round)."""

    reasoning: str
    content: str


def opens_thinking(prompt_text: str) -> bool:
    """Whether a rendered prompt ends inside an open ``<think>`` (the template started it)."""
    return prompt_text.rstrip().endswith(OPEN)


def _partial_tag(text: str, tag: str) -> int:
    """Length of the longest end of ``text`` that begins ``tag`` (it may be the tag coming)."""
    for n in range(min(len(tag) - 1, len(text)), 0, -1):
        if text.endswith(tag[:n]):
            return n
    return 0


class ReasoningSplit:
    """Split streamed text into reasoning and answer; :meth:`finish` gives what was held."""

    def __init__(self, thinking_open: bool = False) -> None:
        """``thinking_open``: the prompt ended with ``<think>``, the model starts thinking."""
        self._state = "thinking" if thinking_open else "start"
        self._reopen_dropped = not thinking_open  # a repeated <think> is still to be dropped
        self._reasoning_started = False  # leading whitespace of the reasoning is dropped
        self._buf = ""
        self.reasoning = ""  # all the reasoning so far
        self.saw_reasoning = thinking_open

    def feed(self, text: str) -> Split:
        self._buf += text
        reasoning = content = ""
        if self._state == "start":
            head = self._buf.lstrip()
            if head.startswith(OPEN):
                self._buf = head[len(OPEN) :]
                self._state = "thinking"
                self._reopen_dropped = True
                self.saw_reasoning = True
            elif OPEN.startswith(head):  # nothing yet, or maybe the tag's beginning
                return Split("", "")
            else:
                self._state = "answer"
        if self._state == "thinking":
            if not self._reopen_dropped:
                head = self._buf.lstrip()
                if head.startswith(OPEN):
                    self._buf = head[len(OPEN) :]
                elif OPEN.startswith(head):
                    return Split("", "")
                self._reopen_dropped = True
            end = self._buf.find(CLOSE)
            if end != -1:
                reasoning = self._reasoning_text(self._buf[:end].rstrip())
                self._buf = self._buf[end + len(CLOSE) :].lstrip()
                self._state = "after"
            else:
                held = _partial_tag(self._buf, CLOSE)
                body = self._buf[: len(self._buf) - held]
                kept = body.rstrip()  # whitespace may end the reasoning: held till more comes
                reasoning = self._reasoning_text(kept)
                self._buf = self._buf[len(kept) :]
        if self._state == "after":  # whitespace between </think> and the answer is dropped
            self._buf = self._buf.lstrip()
            if not self._buf:
                return Split(reasoning, "")
            self._state = "answer"
        if self._state == "answer":
            content, self._buf = self._buf, ""
        return Split(reasoning, content)

    def finish(self) -> Split:
        """The text still held: an unclosed ``<think>`` (the answer ran out of tokens while
        thinking) is reasoning, an unfinished tag at the start is answer."""
        rest, self._buf = self._buf, ""
        if self._state == "thinking":
            return Split(self._reasoning_text(rest.strip()), "")
        if self._state == "after":
            return Split("", "")
        return Split("", rest)

    def _reasoning_text(self, text: str) -> str:
        if not self._reasoning_started:
            text = text.lstrip()
            self._reasoning_started = bool(text)
        self.reasoning += text
        return text


def reasoning_split(mode: ReasoningFormat, thinking_open: bool) -> ReasoningSplit | None:
    """The splitter for one answer, or None when reasoning stays in the text (``none``)."""
    return None if mode == "none" else ReasoningSplit(thinking_open)


def split_whole(split: ReasoningSplit | None, text: str) -> Split:
    """A whole answer's reasoning and text (``split`` None: all text)."""
    if split is None:
        return Split("", text)
    first, last = split.feed(text), split.finish()
    return Split(first.reasoning + last.reasoning, first.content + last.content)
