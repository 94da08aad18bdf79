"""``think``: a model whose template opens a reasoning block streams its thinking in
``message.thinking`` (``thinking`` on generate), and ``think: false`` leaves it out; a model
without one answers ``think: true`` with Ollama's 400 (test_ollama_client)."""

from __future__ import annotations

from collections.abc import Iterator

import ollama
import pytest

from tests.ollama.conftest import GREEDY, MODEL, templated_server
from tests.server.conftest import LiveServer

# SmolLM2 never closes the block this template opens: all it writes is thinking
THINKING_TEMPLATE = (
    "{%- for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n<think>\n{%- endif %}"
)


@pytest.fixture(scope="module")
def thinking_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    yield from templated_server(tmp_path_factory, THINKING_TEMPLATE, ctx_size=4096, parallel=2)


def test_thinking_is_its_own_field_and_think_false_leaves_it_out(
    thinking_server: LiveServer,
) -> None:
    c = ollama.Client(host=thinking_server.base_url)
    assert "thinking" in (c.show(MODEL).capabilities or [])
    ask = [{"role": "user", "content": "Is the sea blue?"}]
    options = {**GREEDY, "num_predict": 12}
    thought = c.chat(model=MODEL, messages=ask, options=options, think=True)
    assert thought.message.thinking and not thought.message.content
    parts = list(c.chat(model=MODEL, messages=ask, options=options, stream=True))
    assert "".join(p.message.thinking or "" for p in parts) == thought.message.thinking
    quiet = c.chat(model=MODEL, messages=ask, options=options, think=False)
    assert quiet.message.thinking is None and quiet.eval_count == thought.eval_count
    generated = c.generate(model=MODEL, prompt="Is the sea blue?", options=options, think="low")
    assert generated.thinking == thought.message.thinking


def test_the_chat_windows_stream_reads_the_thinking_apart(thinking_server: LiveServer) -> None:
    """``reasoning_content`` deltas reach the Chat page as ("thinking", text), shown in its
    collapsible block; the answer's text stays apart."""
    import threading

    from app.workers.chat_stream import stream_reply

    events: list[object] = []
    payload = {"messages": [{"role": "user", "content": "Is the sea blue?"}], "max_tokens": 8}
    stream_reply(thinking_server.base_url, {**payload, "temperature": 0}, "", events.append,
                 threading.Event())  # fmt: skip
    thoughts = [e[1] for e in events if isinstance(e, tuple) and e[0] == "thinking"]
    assert thoughts and not [e for e in events if isinstance(e, str) and e.strip()]
