"""The Responses store keeps what fits in its byte bound, dropping the oldest first."""

from __future__ import annotations

import json
from typing import Any

from backend.server.responses.response_store import ResponseStore


def _response(n: int, text: str = "x" * 100) -> dict[str, Any]:
    return {"id": f"resp_{n}", "output": [{"type": "message", "content": text}]}


def _size(response: dict[str, Any], conversation: list[dict[str, Any]]) -> int:
    return len(json.dumps(response)) + len(json.dumps(conversation))


def test_oldest_go_first_past_the_bound() -> None:
    one = _size(_response(0), [])
    store = ResponseStore(max_bytes=3 * one)
    for n in range(5):
        assert store.put(_response(n), [])
    assert len(store) == 3
    assert store.get("resp_0") is None and store.get("resp_1") is None
    kept = store.get("resp_4")
    assert kept is not None and kept.response == _response(4)


def test_a_response_bigger_than_the_store_is_not_kept() -> None:
    store = ResponseStore(max_bytes=_size(_response(0), []))
    assert store.put(_response(0), [])
    assert not store.put(_response(1, "y" * 1000), [])
    assert store.get("resp_1") is None
    assert store.get("resp_0") is not None  # nothing was dropped for it


def test_the_conversation_counts_and_delete_frees() -> None:
    conversation = [{"type": "message", "role": "user", "content": "z" * 500}]
    store = ResponseStore(max_bytes=_size(_response(0), conversation) + _size(_response(1), []))
    assert store.put(_response(0), conversation)
    assert store.put(_response(1), [])
    assert store.put(_response(2), [])  # no room with the long conversation: resp_0 goes
    assert store.get("resp_0") is None and len(store) == 2
    assert store.delete("resp_1") and not store.delete("resp_1")
    assert store.get("resp_1") is None and len(store) == 1


def test_zero_bytes_keeps_none() -> None:
    store = ResponseStore(max_bytes=0)
    assert not store.put(_response(0), [])
    assert len(store) == 0
