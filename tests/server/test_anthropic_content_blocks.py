"""Anthropic content blocks on text as the engine hands it over: text before a call, two
calls, ``disable_parallel_tool_use``, a call cut off by max_tokens, with the events and
indexes the SDK's stream accumulator reads. (The live tests force calls by grammar, so
the model never writes text before a call or two calls there.)"""

from __future__ import annotations

import json
from typing import Any

from anthropic.lib.streaming._messages import accumulate_event

from backend.server.anthropic.content_blocks import ContentBlocks

NAMES = frozenset({"get_weather", "get_time"})


def _call(name: str, arguments: dict[str, Any]) -> str:
    return f"<tool_call>\n{json.dumps({'name': name, 'arguments': arguments})}\n</tool_call>"


PARIS = _call("get_weather", {"city": "Paris"})
TOKYO = _call("get_time", {"zone": "Asia/Tokyo"})


def _run(
    blocks: ContentBlocks, text: str, step: int = 4, truncated: bool = False
) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    for i in range(0, len(text), step):
        events += blocks.feed(text[i : i + step])
    return events + blocks.finish(truncated=truncated)


def _accumulated(events: list[dict[str, Any]]) -> Any:
    """The message the anthropic SDK builds from these events."""
    start = {
        "type": "message_start",
        "message": {
            "id": "msg_1",
            "type": "message",
            "role": "assistant",
            "content": [],
            "model": "m",
            "stop_reason": None,
            "stop_sequence": None,
            "usage": {"input_tokens": 1, "output_tokens": 0},
        },
    }
    snapshot = accumulate_event(event=start, current_snapshot=None, json_bufs={})  # type: ignore[arg-type]
    bufs: dict[int, bytes] = {}
    for event in events:
        snapshot = accumulate_event(event=event, current_snapshot=snapshot, json_bufs=bufs)  # type: ignore[arg-type]
    return snapshot


def test_text_then_two_calls_are_three_blocks_in_order() -> None:
    blocks = ContentBlocks(NAMES)
    events = _run(blocks, "Let me check both. " + PARIS + "\n" + TOKYO)
    starts = [e for e in events if e["type"] == "content_block_start"]
    assert [(e["index"], e["content_block"]["type"]) for e in starts] == [
        (0, "text"),
        (1, "tool_use"),
        (2, "tool_use"),
    ]
    stops = [e["index"] for e in events if e["type"] == "content_block_stop"]
    assert stops == [0, 1, 2]
    assert [b["type"] for b in blocks.blocks] == ["text", "tool_use", "tool_use"]
    assert blocks.blocks[0]["text"] == "Let me check both. "
    assert blocks.blocks[1]["input"] == {"city": "Paris"}
    assert blocks.blocks[2]["name"] == "get_time"
    assert blocks.blocks[1]["id"] != blocks.blocks[2]["id"]
    message = _accumulated(events)
    assert [b.model_dump(exclude_none=True) for b in message.content] == blocks.blocks


def test_disable_parallel_tool_use_keeps_the_first_call() -> None:
    blocks = ContentBlocks(NAMES, one_call=True)
    events = _run(blocks, "Let me check. " + PARIS + "\n" + TOKYO)
    assert [b["type"] for b in blocks.blocks] == ["text", "tool_use"]
    assert blocks.blocks[1]["name"] == "get_weather"
    assert {e["index"] for e in events} == {0, 1}
    assert blocks.used_tools


def test_a_call_cut_off_by_max_tokens_is_left_out() -> None:
    cut = PARIS[: len(PARIS) // 2]
    blocks = ContentBlocks(NAMES)
    events = _run(blocks, "Let me check. " + cut, truncated=True)
    assert blocks.blocks == [{"type": "text", "text": "Let me check. "}]
    assert [e["type"] for e in events][-1] == "content_block_stop"
    # an answer that ended there for another reason keeps what the model wrote
    kept = ContentBlocks(NAMES)
    _run(kept, "Let me check. " + cut)
    assert kept.blocks[-1]["text"].endswith(cut)
