"""llama-server's --context-shift: a long generation that fills its slot drops half of what
follows its first n_keep tokens and keeps going, and says ``truncated``; without the flag
(llama-server's default too) it stops at the context length, also ``truncated``."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from benchmarks.peer_servers import (
    DEFAULT_LLAMA_SERVER,
    Knobs,
    ServerSpec,
    llama_server_argv,
    started,
)
from tests.server.conftest import LiveServer, start_server, wait_healthy

SLOT = 256  # one slot of 256 cells (the least -c takes): a 300-token answer fills it
PROMPT = "Write a long story about a lighthouse keeper and the sea, with many details."
HTTP = httpx.Client(timeout=300)


@pytest.fixture(scope="module")
def shifting_server() -> Iterator[LiveServer]:
    server = start_server(ctx_size=SLOT, parallel=1, context_shift=True)
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


def complete(base_url: str, **body: Any) -> dict[str, Any]:
    body = {"prompt": PROMPT, "temperature": 0, "n_predict": 300, "ignore_eos": True, **body}
    r = HTTP.post(f"{base_url}/completion", json=body)
    assert r.status_code == 200, r.text
    out: dict[str, Any] = r.json()
    return out


def test_a_generation_longer_than_the_slot_keeps_going_when_shifting(
    shifting_server: LiveServer,
) -> None:
    out = complete(shifting_server.base_url)
    assert out["tokens_predicted"] == 300 > SLOT
    assert out["truncated"] is True and out["stop_type"] == "limit"
    # the slot's cache keeps only what no shift touched: the next request still works
    again = complete(shifting_server.base_url, n_predict=8)
    assert again["tokens_predicted"] == 8 and again["truncated"] is False
    assert again["content"] == out["content"][: len(again["content"])]


def test_n_keep_minus_one_keeps_the_prompt(shifting_server: LiveServer) -> None:
    out = complete(shifting_server.base_url, n_keep=-1, n_discard=32)
    assert out["tokens_predicted"] == 300 and out["truncated"] is True


def test_without_the_flag_it_stops_at_the_context_length() -> None:
    server = start_server(ctx_size=SLOT, parallel=1)
    try:
        wait_healthy(server.base_url)
        out = complete(server.base_url)
    finally:
        server.handle.stop()
    assert out["truncated"] is True and out["stop_type"] == "limit"
    assert out["tokens_predicted"] + out["tokens_evaluated"] == SLOT  # the slot's cells


@pytest.mark.skipif(not DEFAULT_LLAMA_SERVER.is_file(), reason="llama-server not built")
def test_the_shifted_answer_is_llama_servers(
    shifting_server: LiveServer, smollm2_path: Path, tmp_path: Path
) -> None:
    """The same model, slot and request through llama-server --context-shift: the same
    greedy text, past the shift."""
    spec = ServerSpec(
        "llama-server", llama_server_argv(DEFAULT_LLAMA_SERVER), extra_flags=["--context-shift"]
    )
    with started(spec, Knobs(smollm2_path, 2, 1, SLOT, SLOT, SLOT), tmp_path / "peer.log", 120) as (
        url,
        _proc,
    ):
        theirs = complete(url)
    ours = complete(shifting_server.base_url)
    assert theirs["tokens_predicted"] == ours["tokens_predicted"] == 300
    assert ours["content"] == theirs["content"]


def test_a_scored_prompt_stops_at_the_context_instead_of_shifting(
    shifting_server: LiveServer,
) -> None:
    """echo + logprobs scores every prompt row by index: such a request is not shifted
    (it once took the engine down); it stops at the context length, and the server goes on."""
    body = {"prompt": PROMPT * 13, "max_tokens": 100, "echo": True, "logprobs": 0}  # ~210
    r = HTTP.post(f"{shifting_server.base_url}/v1/completions", json=body)
    assert r.status_code == 200, r.text
    assert r.json()["choices"][0]["finish_reason"] == "length"
    assert complete(shifting_server.base_url, n_predict=4)["tokens_predicted"] == 4
