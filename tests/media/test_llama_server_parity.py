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
from tests.media.conftest import QWEN_SMALL_BATCH
from tests.media.image_files import data_url, picture
from tests.server.conftest import LiveServer

pytestmark = pytest.mark.skipif(
    not DEFAULT_LLAMA_SERVER.is_file(), reason="llama-server not built (build_llama_server.sh)"
)


Messages = list[dict[str, Any]]


# how far our log-probabilities may be from llama-server's (the same kernels; batches of
# other shapes round differently)
LOGPROB_TOLERANCE = 0.02


class Answer:
    """A greedy answer, its prompt tokens, and the top log-probabilities of its first
    tokens: a wrong position shifts those even where the text stays the same."""

    def __init__(self, body: dict[str, Any]) -> None:
        choice = body["choices"][0]
        self.text: str = choice["message"]["content"]
        self.prompt_tokens: int = body["usage"]["prompt_tokens"]
        self.top = [
            {t["token"]: t["logprob"] for t in entry["top_logprobs"]}
            for entry in choice["logprobs"]["content"][:4]
        ]

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Answer):
            return NotImplemented
        if (self.text, self.prompt_tokens) != (other.text, other.prompt_tokens):
            return False
        return all(
            abs(ours[token] - theirs.get(token, -1e9)) <= LOGPROB_TOLERANCE
            for ours, theirs in zip(self.top, other.top, strict=True)
            for token in ours
            if ours[token] > -5  # the likely ones: far tails differ by rounding
        )

    def __repr__(self) -> str:
        return f"Answer({self.text!r}, {self.prompt_tokens}, {self.top})"


def _answer(base_url: str, messages: Messages) -> Answer:
    """The greedy answer to a conversation."""
    body = {
        "model": "any",
        "messages": messages,
        "max_tokens": 16,
        "temperature": 0,
        "logprobs": True,
        "top_logprobs": 3,
    }
    r = httpx.post(f"{base_url}/v1/chat/completions", json=body, timeout=120)
    r.raise_for_status()
    return Answer(r.json())


def _asked(part: dict[str, Any] | list[dict[str, Any]], question: str) -> Messages:
    """A user turn of one media part (or several) and a question."""
    parts = part if isinstance(part, list) else [part]
    return [{"role": "user", "content": [*parts, {"type": "text", "text": question}]}]


def _both_answer(
    ours: LiveServer, files: tuple[Path, Path], parts: list[Any], question: str,
    tmp_path: Path, follow_up: str | None = None, batch: tuple[int, int] = (512, 512),
) -> None:  # fmt: skip
    """llama-server ``--mmproj`` on the same model and projector (and ``batch``: batch and
    micro-batch sizes, as ours) answers each part as we do, and ``follow_up`` asked after
    its answer to the first part (a second turn)."""
    model, mmproj = files
    argv = llama_server_argv(DEFAULT_LLAMA_SERVER)
    spec = ServerSpec("llama-server", argv, extra_flags=["--mmproj", str(mmproj)])

    def answers(url: str) -> list[Answer]:
        out = [_answer(url, _asked(part, question)) for part in parts]
        if follow_up is not None:
            turn = [
                {"role": "assistant", "content": out[0].text},
                {"role": "user", "content": follow_up},
            ]
            out.append(_answer(url, [*_asked(parts[0], question), *turn]))
        return out

    knobs = Knobs(model, 2, 1, 4096, *batch)
    with started(spec, knobs, tmp_path / "peer.log", 120) as (url, _proc):
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


def test_m_rope_images_longer_than_a_batch_match_llama_server(
    qwen_vl_small_batch: LiveServer, tiny_qwen_vl: tuple[Path, Path], tmp_path: Path
) -> None:
    """With a batch of 32 and micro-batches of 16, a 224 px image (64 tokens on an 8 x 8
    grid) is decoded in two pieces that share its first position, as llama-server does;
    and two images in one message."""

    def part(kind: str, size: int, height: int | None = None) -> dict[str, Any]:
        url = data_url(picture(kind, size=size, height=height))
        return {"type": "image_url", "image_url": {"url": url}}

    parts = [
        part("stripes", 224),
        part("red-square", 224, 112),
        [part("blue-circle", 56), part("stripes", 112, 56)],
    ]
    _both_answer(
        qwen_vl_small_batch, tiny_qwen_vl, parts, "What is in the picture?", tmp_path,
        "And then?", batch=QWEN_SMALL_BATCH,
    )  # fmt: skip
