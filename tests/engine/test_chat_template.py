"""Chat template rendering: assistant prefill (continue_final_message) and custom templates."""

from __future__ import annotations

import pytest

from backend.engine.chat_template import CHATML_TEMPLATE, ChatTemplate
from backend.engine.errors import InvalidRequestError

CHAT = [
    {"role": "user", "content": "Name a tree."},
    {"role": "assistant", "content": "Whill"},
]


def test_the_final_assistant_message_is_left_open() -> None:
    t = ChatTemplate(CHATML_TEMPLATE, bos_token="", eos_token="<|im_end|>")
    closed = t.render(CHAT, add_generation_prompt=True)
    assert closed.endswith("Whill<|im_end|>\n<|im_start|>assistant\n")
    open_ = t.render(CHAT, continue_final_message=True)
    assert open_.endswith("<|im_start|>assistant\nWhill")
    assert closed.startswith(open_)


def test_a_template_that_changes_the_content_cannot_be_continued() -> None:
    shouting = "{% for m in messages %}{{ m['content'] | upper }}{% endfor %}"
    t = ChatTemplate(shouting, bos_token="", eos_token="")
    with pytest.raises(InvalidRequestError, match="cannot be continued"):
        t.render(CHAT, continue_final_message=True)
