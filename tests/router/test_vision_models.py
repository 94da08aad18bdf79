"""A vision model in the library: its projector beside it makes it one model that reads
images, through the router to the child it starts."""

from __future__ import annotations

import shutil
from collections.abc import Callable
from pathlib import Path

import httpx

from backend.hub.library import ModelLibrary
from backend.router.runner import RouterHandle
from tests.media.image_files import data_url, picture


def test_the_router_lists_a_vision_model_once_and_serves_it_images(
    start_router: Callable[..., RouterHandle],
    library: ModelLibrary,
    tiny_vlm: tuple[Path, Path],
) -> None:
    model, mmproj = tiny_vlm
    folder = library.root / "org--tiny-vision"
    folder.mkdir()
    shutil.copyfile(model, folder / "tiny-vision-F16.gguf")
    shutil.copyfile(mmproj, folder / "mmproj-tiny-vision-f16.gguf")
    router = start_router()
    cards = {
        c["id"]: c for c in httpx.get(f"{router.base_url}/v1/models", timeout=30).json()["data"]
    }
    vision_id = "org--tiny-vision/tiny-vision-F16"
    assert not any("mmproj" in model_id for model_id in cards)  # a projector is no model
    assert cards[vision_id]["modalities"] == {"vision": True, "audio": False}
    assert cards["alpha"]["modalities"] == {"vision": False, "audio": False}

    def ask(model_id: str) -> httpx.Response:
        parts = [
            {"type": "image_url", "image_url": {"url": data_url(picture("red-square"))}},
            {"type": "text", "text": "What is it?"},
        ]
        body = {
            "model": model_id,
            "messages": [{"role": "user", "content": parts}],
            "max_tokens": 4,
            "temperature": 0,
        }
        return httpx.post(f"{router.base_url}/v1/chat/completions", json=body, timeout=300)

    answer = ask(vision_id)
    assert answer.status_code == 200, answer.text
    assert answer.json()["usage"]["prompt_tokens"] > 16  # the child paired the projector
    refused = ask("alpha")  # a text-only model: the child's clear 400, relayed
    assert refused.status_code == 400 and "text only" in refused.json()["error"]["message"]
