"""Our greedy answer to an image equals llama-server's ``--mmproj`` on the same files (the
peer built from the same vendored llama.cpp by benchmarks/build_llama_server.sh)."""

from __future__ import annotations

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
from tests.media.audio_files import audio_part, clip
from tests.media.image_files import data_url, picture
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.skipif(
    not DEFAULT_LLAMA_SERVER.is_file(), reason="llama-server not built (build_llama_server.sh)"
)


Messages = list[dict[str, Any]]


def _answer(base_url: str, messages: Messages) -> tuple[str, int]:
    """The greedy answer to a conversation, and its prompt tokens."""
    body = {"model": "any", "messages": messages, "max_tokens": 16, "temperature": 0}
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120)
    r.raise_for_status()
    out = r.json()
    return out["choices"][0]["message"]["content"], out["usage"]["prompt_tokens"]


def _asked(part: dict[str, Any], question: str) -> Messages:
    return [{"role": "user", "content": [part, {"type": "text", "text": question}]}]


def _both_answer(
    ours: LiveServer, files: tuple[Path, Path], parts: list[dict[str, Any]], question: str,
    tmp_path: Path, follow_up: str | None = None,
) -> None:  # fmt: skip
    """llama-server ``--mmproj`` on the same model and projector answers each part as we
    do, and ``follow_up`` asked after its answer to the first part (a second turn)."""
    model, mmproj = files
    argv = llama_server_argv(DEFAULT_LLAMA_SERVER)
    spec = ServerSpec("llama-server", argv, extra_flags=["--mmproj", str(mmproj)])

    def answers(url: str) -> list[tuple[str, int]]:
        out = [_answer(url, _asked(part, question)) for part in parts]
        if follow_up is not None:
            turn = [
                {"role": "assistant", "content": out[0][0]},
                {"role": "user", "content": follow_up},
            ]
            out.append(_answer(url, [*_asked(parts[0], question), *turn]))
        return out

    with started(spec, Knobs(model, 2, 1, 4096, 512, 512), tmp_path / "peer.log", 120) as (
        url,
        _proc,
    ):
        theirs = answers(url)
    assert answers(ours.base_url) == theirs


def test_greedy_answers_to_images_match_llama_server(
    vlm_server: LiveServer, tiny_vlm: tuple[Path, Path], tmp_path: Path
) -> None:
    parts = [
        {"type": "image_url", "image_url": {"url": data_url(picture(kind))}}
        for kind in ("red-square", "blue-circle", "stripes")
    ]
    _both_answer(vlm_server, tiny_vlm, parts, "What is in the picture?", tmp_path)


def test_greedy_answers_to_audio_match_llama_server(
    audio_server: LiveServer, tiny_audio_lm: tuple[Path, Path], tmp_path: Path
) -> None:
    """A clip longer than a batch (750 positions): llama-server decodes it in batch-sized
    pieces, as we do."""
    parts = [audio_part(clip(kind)) for kind in ("low", "high", "noise")]
    _both_answer(audio_server, tiny_audio_lm, parts, "What do you hear?", tmp_path)


def test_greedy_answers_with_m_rope_match_llama_server(
    qwen_vl_server: LiveServer, tiny_qwen_vl: tuple[Path, Path], tmp_path: Path
) -> None:
    """Qwen2-VL's images (square and not: the text after them starts past the larger side
    of the token grid), and a follow-up turn that our prefix cache serves."""
    parts = [
        {"type": "image_url", "image_url": {"url": data_url(picture(kind, size=w, height=h))}}
        for kind, w, h in (("red-square", 56, 56), ("blue-circle", 112, 56), ("stripes", 56, 112))
    ]
    _both_answer(
        qwen_vl_server, tiny_qwen_vl, parts, "What is in the picture?", tmp_path, "And then?"
    )
