"""A reasoning model's thinking, split from the answer (``--reasoning-format``), in all three
dialects: ``reasoning_content`` in chat completions, ``thinking`` blocks in /v1/messages and
``reasoning`` items in /v1/responses.

SmolLM2 never thinks on its own, so a GBNF grammar makes it write the thinking; the splitter
itself is fed the real tokenizer's pieces of such answers, one piece at a time, so that the
tags arrive cut where SmolLM2's vocabulary cuts them (``<``, ``think``, ``>``...).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import httpx
import pytest

from backend.server.reasoning import ReasoningSplit, opens_thinking, split_whole
from backend.settings import EngineSettings, ServerSettings
from tests.server.conftest import LiveServer, serving

THOUGHT = "The user says hi. I greet back."
ANSWER = "Hello there!"
WRITTEN = f"<think>\n{THOUGHT}\n</think>\n\n{ANSWER}"
GRAMMAR = f"root ::= {json.dumps(WRITTEN)}"
# what a model writes after a template that opened <think> itself
OPENED = f"{THOUGHT}\n</think>\n\n{ANSWER}"
HI = [{"role": "user", "content": "hi"}]
TIMEOUT = 120


def pieces(server: LiveServer, text: str) -> list[str]:
    """``text`` as the model's tokenizer cuts it: one string per token."""
    r = httpx.post(
        f"{server.base_url}/tokenize",
        json={"content": text, "add_special": False, "with_pieces": True},
        timeout=TIMEOUT,
    )
    assert r.status_code == 200, r.text
    out = [p["piece"] for p in r.json()["tokens"]]
    assert all(isinstance(p, str) for p in out) and "".join(out) == text
    return out


def streamed(split: ReasoningSplit, parts: list[str]) -> tuple[list[str], list[str]]:
    reasoning, content = [], []
    for part in parts:
        r, c = split.feed(part)
        reasoning.append(r)
        content.append(c)
    r, c = split.finish()
    return [*reasoning, r], [*content, c]


@pytest.mark.parametrize(
    ("text", "thinking_open", "expected"),
    [
        (WRITTEN, False, (THOUGHT, ANSWER)),
        (
            "  <think>a < b, and </thin is no tag</think>x",
            False,
            ("a < b, and </thin is no tag", "x"),
        ),
        (OPENED, True, (THOUGHT, ANSWER)),  # the template opened it
        (WRITTEN, True, (THOUGHT, ANSWER)),  # ...and the model wrote <think> again
        (ANSWER, False, ("", ANSWER)),
        (f"{ANSWER} <think>late</think>", False, ("", f"{ANSWER} <think>late</think>")),
        ("<thinking>x", False, ("", "<thinking>x")),
        ("<think>\ncut off while thinking ", False, ("cut off while thinking", "")),
        ("<thi", False, ("", "<thi")),
        ("<think>done</think>\n\n", False, ("done", "")),
    ],
)
def test_split_over_the_tokenizers_pieces(
    live_server: LiveServer, text: str, thinking_open: bool, expected: tuple[str, str]
) -> None:
    parts = pieces(live_server, text)
    reasoning, content = streamed(ReasoningSplit(thinking_open), parts)
    assert ("".join(reasoning), "".join(content)) == expected
    assert tuple(split_whole(ReasoningSplit(thinking_open), text)) == expected
    # one character at a time reads the same
    reasoning, content = streamed(ReasoningSplit(thinking_open), list(text))
    assert ("".join(reasoning), "".join(content)) == expected


def test_tags_cut_across_pieces_are_held_not_shown(live_server: LiveServer) -> None:
    parts = pieces(live_server, WRITTEN)
    assert OPEN_TAG not in parts and CLOSE_TAG not in parts  # the vocabulary cuts the tags
    reasoning, content = streamed(ReasoningSplit(), parts)
    assert all("<" not in r and ">" not in r for r in reasoning)
    assert all("<" not in c and ">" not in c for c in content if c != "")
    # the thinking streams as it comes, before the answer has begun
    first_answer = next(i for i, c in enumerate(content) if c)
    assert sum(1 for r in reasoning[:first_answer] if r) > 3


OPEN_TAG, CLOSE_TAG = "<think>", "</think>"


def test_a_template_that_opens_think() -> None:
    assert opens_thinking("<|im_start|>assistant\n<think>\n")
    assert not opens_thinking("<|im_start|>assistant\n")
    assert not opens_thinking("<think>x</think>\n<|im_start|>assistant\n")


def chat(server: LiveServer, **extra: Any) -> dict[str, Any]:
    body = {"messages": HI, "grammar": GRAMMAR, "max_tokens": 64, "temperature": 0, **extra}
    r = httpx.post(f"{server.base_url}/v1/chat/completions", json=body, timeout=TIMEOUT)
    assert r.status_code == 200, r.text
    return r.json()  # type: ignore[no-any-return]


def test_chat_completions_reasoning_content(live_server: LiveServer) -> None:
    message = chat(live_server)["choices"][0]["message"]
    assert message["reasoning_content"] == THOUGHT
    assert message["content"] == ANSWER
    # per request, as llama-server takes it: none leaves the text as written
    message = chat(live_server, reasoning_format="none")["choices"][0]["message"]
    assert message["content"] == WRITTEN and "reasoning_content" not in message

    client = live_server.client()
    stream = client.chat.completions.create(
        model="x",
        messages=HI,  # type: ignore[arg-type]
        max_tokens=64,
        temperature=0,
        stream=True,
        extra_body={"grammar": GRAMMAR},
    )
    kinds, reasoning, content = [], [], []
    for chunk in stream:
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        extra = delta.model_extra or {}
        if extra.get("reasoning_content"):
            kinds.append("reasoning")
            reasoning.append(extra["reasoning_content"])
        if delta.content:
            kinds.append("content")
            content.append(delta.content)
    assert "".join(reasoning) == THOUGHT and "".join(content) == ANSWER
    assert len(reasoning) > 1  # streamed piece by piece
    assert kinds == sorted(kinds, key=lambda k: k != "reasoning")  # all reasoning first


def test_messages_thinking_blocks(live_server: LiveServer) -> None:
    client = anthropic.Anthropic(base_url=live_server.base_url, api_key="x", max_retries=0)
    extra = {"grammar": GRAMMAR, "temperature": 0}
    message = client.messages.create(
        model="x",
        max_tokens=64,
        messages=HI,  # type: ignore[arg-type]
        thinking={"type": "enabled", "budget_tokens": 1024},
        extra_body=extra,
    )
    assert [b.type for b in message.content] == ["thinking", "text"]
    thinking, text = message.content
    assert thinking.type == "thinking" and thinking.thinking == THOUGHT
    assert thinking.signature == ""
    assert text.type == "text" and text.text == ANSWER
    assert message.stop_reason == "end_turn"

    with client.messages.stream(
        model="x",
        max_tokens=64,
        messages=HI,  # type: ignore[arg-type]
        thinking={"type": "enabled", "budget_tokens": 1024},
        extra_body=extra,
    ) as stream:
        deltas = [e.delta.type for e in stream if e.type == "content_block_delta"]
        final = stream.get_final_message()
    assert [b.type for b in final.content] == ["thinking", "text"]
    assert final.content[0].thinking == THOUGHT  # type: ignore[union-attr]
    assert final.content[1].text == ANSWER  # type: ignore[union-attr]
    assert deltas.count("thinking_delta") > 1 and deltas.count("signature_delta") == 1
    assert deltas.index("signature_delta") < deltas.index("text_delta")


def test_responses_reasoning_items(live_server: LiveServer) -> None:
    client = live_server.client()
    response = client.responses.create(
        model="x",
        input="hi",
        max_output_tokens=64,
        temperature=0,
        extra_body={"grammar": GRAMMAR},
    )
    assert [item.type for item in response.output] == ["reasoning", "message"]
    reasoning = response.output[0]
    assert reasoning.type == "reasoning" and reasoning.content is not None
    assert reasoning.content[0].text == THOUGHT
    assert response.output_text == ANSWER

    with client.responses.stream(
        model="x",
        input="hi",
        max_output_tokens=64,
        temperature=0,
        extra_body={"grammar": GRAMMAR},
    ) as stream:
        events = list(stream)
        final = stream.get_final_response()
    thought = "".join(e.delta for e in events if e.type == "response.reasoning_text.delta")
    assert thought == THOUGHT
    done = [e for e in events if e.type == "response.reasoning_text.done"]
    assert len(done) == 1 and done[0].text == THOUGHT
    assert [item.type for item in final.output] == ["reasoning", "message"]
    assert final.output_text == ANSWER


OPENING_TEMPLATE = (
    "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    "{% if add_generation_prompt %}<|im_start|>assistant\n<think>\n{% endif %}"
)


@pytest.fixture(scope="module")
def thinking_template_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveServer]:
    """A server whose chat template opens <think> itself, started with --reasoning-format
    given: the flag's value comes from the test's parameter."""
    template: Path = tmp_path_factory.mktemp("template") / "think.jinja"
    template.write_text(OPENING_TEMPLATE)
    engine = EngineSettings(ctx_size=4096, parallel=2, threads=2, chat_template_file=str(template))
    server = ServerSettings(host="127.0.0.1", port=0, reasoning_format="deepseek")
    yield from serving(engine, server)


def test_a_template_that_opens_think_end_to_end(thinking_template_server: LiveServer) -> None:
    """The template wrote ``<think>``; the model (held by the grammar) goes on thinking
    from its first token and closes it."""
    grammar = f"root ::= {json.dumps(OPENED)}"
    message = chat(thinking_template_server, grammar=grammar)["choices"][0]["message"]
    assert message["reasoning_content"] == THOUGHT and message["content"] == ANSWER
    # cut off while thinking: all of it is reasoning, none is answer
    cut = chat(thinking_template_server, grammar=grammar, max_tokens=3)["choices"][0]
    assert cut["finish_reason"] == "length"
    assert cut["message"]["content"] == "" and THOUGHT.startswith(
        cut["message"]["reasoning_content"]
    )
    message = chat(thinking_template_server, grammar=grammar, reasoning_format="none")
    assert message["choices"][0]["message"]["content"] == OPENED


def test_the_flag_is_a_serve_option() -> None:
    from backend.entrypoints.main import build_parser
    from backend.settings.flags import settings_from_args

    args = build_parser().parse_args(["serve", "--reasoning-format", "none"])
    assert settings_from_args(ServerSettings, args).reasoning_format == "none"
    assert ServerSettings().reasoning_format == "auto"
    with pytest.raises(SystemExit):
        build_parser().parse_args(["serve", "--reasoning-format", "bogus"])
