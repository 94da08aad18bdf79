"""Anthropic's Messages API through the router, with the official anthropic SDK: Claude
Code's ``claude-...`` names reach the model an unnamed request would (under /v1/messages
only), and a model that dies mid-stream ends the stream with Anthropic's ``error`` event."""

from __future__ import annotations

import logging
import os
import signal
from collections.abc import Callable

import anthropic
import httpx
import pytest

from backend.router.runner import RouterHandle

pytestmark = pytest.mark.model

CLAUDE = "claude-sonnet-4-5-20250929"
HAIKU = "claude-haiku-4-5"
QUESTION = [{"role": "user", "content": "Say hello."}]
CHOICE_LOG = "backend.router.model_choice"


def _anthropic(router: RouterHandle) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=router.base_url, api_key="unused", max_retries=0)


def _load(router: RouterHandle, model: str) -> None:
    r = httpx.post(f"{router.base_url}/models/load", json={"model": model}, timeout=300)
    assert r.status_code == 200, r.text


def test_claude_names_reach_the_loaded_model_under_messages_only(
    start_router: Callable[..., RouterHandle], caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger=CHOICE_LOG)
    router = start_router()
    client = _anthropic(router)
    # nothing loaded, nothing preloaded, three models: no rule picks one, so the name's 404
    with pytest.raises(anthropic.NotFoundError) as info:
        client.messages.create(model=CLAUDE, max_tokens=4, messages=QUESTION)
    assert info.value.body["error"]["type"] == "not_found_error"  # type: ignore[index]
    assert f"the model '{CLAUDE}' does not exist" in str(info.value)
    _load(router, "beta")
    for _ in range(2):
        message = client.messages.create(model=CLAUDE, max_tokens=4, messages=QUESTION)
        assert message.type == "message" and message.content[0].type == "text"
    with client.messages.stream(model=HAIKU, max_tokens=4, messages=QUESTION) as stream:
        streamed = stream.get_final_message()
    assert streamed.stop_reason == "max_tokens" and streamed.usage.output_tokens == 4
    count = client.messages.count_tokens(model=HAIKU, messages=QUESTION)
    assert count.input_tokens > 0
    # a library name under /v1/messages is that model, loaded beside the other
    named = client.messages.create(model="alpha", max_tokens=4, messages=QUESTION)
    assert named.type == "message"
    states = {m: router.pool.entry(m).state for m in ("alpha", "beta")}
    assert states == {"alpha": "loaded", "beta": "loaded"}
    assert router.pool.entry("beta").loads == 1 and router.pool.entry("alpha").loads == 1
    # elsewhere an unknown name stays a 404 (OpenAI's shape)
    r = httpx.post(
        f"{router.base_url}/v1/chat/completions",
        json={"model": CLAUDE, "messages": QUESTION, "max_tokens": 4},
        timeout=60,
    )
    assert r.status_code == 404 and r.json()["error"]["code"] == "model_not_found"
    said = [r.getMessage() for r in caplog.records if r.name == CHOICE_LOG]
    assert len([m for m in said if CLAUDE in m]) == 1  # once, however many requests
    assert len([m for m in said if HAIKU in m]) == 1
    assert f"no library model is named '{CLAUDE}'" in said[0] and "beta" in said[0]


def test_a_model_that_dies_mid_stream_ends_it_with_an_anthropic_error_event(
    start_router: Callable[..., RouterHandle],
) -> None:
    router = start_router()
    client = _anthropic(router)
    story = [{"role": "user", "content": "Write a long story about a lighthouse keeper."}]
    texts: list[object] = []
    with (
        pytest.raises(anthropic.APIStatusError) as info,
        client.messages.stream(
            model="alpha", max_tokens=400, messages=story, extra_body={"temperature": 0}
        ) as stream,
    ):
        for event in stream:
            if event.type == "content_block_delta" and not texts:
                child = router.pool.entry("alpha").child
                assert child is not None
                os.kill(child.pid, signal.SIGKILL)
            if event.type == "content_block_delta":
                texts.append(event)
    body = info.value.body
    assert isinstance(body, dict) and body["type"] == "error"
    assert body["error"]["type"] == "api_error"
    assert "the model 'alpha' stopped while answering" in body["error"]["message"]
    # the router has seen the exit before it told the client: the reason is in the message
    assert "exited unexpectedly (code -9)" in body["error"]["message"]
    # and on the wire: a named error event, as the Messages API sends it
    assert router.pool.entry("alpha").state == "failed"
    lines: list[str] = []
    with httpx.stream(
        "POST",
        f"{router.base_url}/v1/messages",
        json={"model": "alpha", "max_tokens": 400, "messages": story, "stream": True},
        timeout=300,
    ) as r:
        for line in r.iter_lines():
            if line == "event: content_block_delta" and "event: content_block_delta" not in lines:
                child = router.pool.entry("alpha").child
                assert child is not None
                os.kill(child.pid, signal.SIGKILL)
            lines.append(line)
    assert "event: error" in lines
    data = lines[lines.index("event: error") + 1]
    assert data.startswith('data: {"type": "error", "error": {"type": "api_error"')
