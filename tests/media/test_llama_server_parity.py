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


def _answer(base_url: str, part: dict[str, Any], question: str) -> tuple[str, int]:
    """The greedy answer to one media part and a question, and its prompt tokens."""
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": [part, {"type": "text", "text": question}]}],
        "max_tokens": 16,
        "temperature": 0,
    }
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120)
    r.raise_for_status()
    out = r.json()
    return out["choices"][0]["message"]["content"], out["usage"]["prompt_tokens"]


def _both_answer(
    ours: LiveServer, files: tuple[Path, Path], parts: list[dict[str, Any]], question: str,
    tmp_path: Path,
) -> None:  # fmt: skip
    """llama-server ``--mmproj`` on the same model and projector answers each part as we do."""
    model, mmproj = files
    argv = llama_server_argv(DEFAULT_LLAMA_SERVER)
    spec = ServerSpec("llama-server", argv, extra_flags=["--mmproj", str(mmproj)])
    with started(spec, Knobs(model, 2, 1, 4096, 512, 512), tmp_path / "peer.log", 120) as (
        url,
        _proc,
    ):
        theirs = [_answer(url, part, question) for part in parts]
    assert [_answer(ours.base_url, part, question) for part in parts] == theirs


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
