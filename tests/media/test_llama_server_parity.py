"""Our greedy answer to an image equals llama-server's ``--mmproj`` on the same files (the
peer built from the same vendored llama.cpp by benchmarks/build_llama_server.sh)."""

from __future__ import annotations

from pathlib import Path

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


def _answer(base_url: str, image: bytes) -> tuple[str, int]:
    parts = [
        {"type": "image_url", "image_url": {"url": data_url(image)}},
        {"type": "text", "text": "What is in the picture?"},
    ]
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": 16,
        "temperature": 0,
    }
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120)
    r.raise_for_status()
    out = r.json()
    return out["choices"][0]["message"]["content"], out["usage"]["prompt_tokens"]


def test_greedy_answers_to_images_match_llama_server(
    vlm_server: LiveServer, tiny_vlm: tuple[Path, Path], tmp_path: Path
) -> None:
    model, mmproj = tiny_vlm
    argv = llama_server_argv(DEFAULT_LLAMA_SERVER)
    spec = ServerSpec("llama-server", argv, extra_flags=["--mmproj", str(mmproj)])
    images = [picture(kind) for kind in ("red-square", "blue-circle", "stripes")]
    with started(spec, Knobs(model, 2, 1, 4096, 512, 512), tmp_path / "peer.log", 120) as (
        url,
        _proc,
    ):
        theirs = [_answer(url, image) for image in images]
    ours = [_answer(vlm_server.base_url, image) for image in images]
    assert ours == theirs


def _heard(base_url: str, clip_bytes: bytes) -> tuple[str, int]:
    parts = [audio_part(clip_bytes), {"type": "text", "text": "What do you hear?"}]
    body = {
        "model": "any",
        "messages": [{"role": "user", "content": parts}],
        "max_tokens": 16,
        "temperature": 0,
    }
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120)
    r.raise_for_status()
    out = r.json()
    return out["choices"][0]["message"]["content"], out["usage"]["prompt_tokens"]


def test_greedy_answers_to_audio_match_llama_server(
    audio_server: LiveServer, tiny_audio_lm: tuple[Path, Path], tmp_path: Path
) -> None:
    """A clip longer than a batch (750 positions): llama-server decodes it in batch-sized
    pieces, as we do."""
    model, mmproj = tiny_audio_lm
    argv = llama_server_argv(DEFAULT_LLAMA_SERVER)
    spec = ServerSpec("llama-server", argv, extra_flags=["--mmproj", str(mmproj)])
    clips = [clip(kind) for kind in ("low", "high", "noise")]
    with started(spec, Knobs(model, 2, 1, 4096, 512, 512), tmp_path / "peer.log", 120) as (
        url,
        _proc,
    ):
        theirs = [_heard(url, c) for c in clips]
    ours = [_heard(audio_server.base_url, c) for c in clips]
    assert ours == theirs
