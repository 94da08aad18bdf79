"""Servers on the tiny vision-language and audio-language models (the session fixtures
``tiny_vlm``, ``tiny_qwen_vl``, ``tiny_audio_lm``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.server.conftest import LiveServer, start_server, wait_healthy

# a small pixel limit, so that a 413 is cheap to provoke
MAX_PIXELS = 300 * 300


def ask_parts(server: LiveServer, parts: list[dict[str, object]], **kw: object) -> Any:
    """One greedy chat completion of a user message of ``parts`` (the openai SDK)."""
    return server.client().chat.completions.create(
        model="any",
        messages=[{"role": "user", "content": parts}],  # type: ignore[list-item,misc]
        max_tokens=12,
        temperature=0,
        **kw,  # type: ignore[arg-type]
    )


def _served(files: tuple[Path, Path], **kw: object) -> Iterator[LiveServer]:
    model, mmproj = files
    server = start_server(
        **{"model": str(model), "mmproj": str(mmproj), "ctx_size": 4096, "parallel": 2, **kw}
    )
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()


@pytest.fixture(scope="package")
def vlm_server(tiny_vlm: tuple[Path, Path]) -> Iterator[LiveServer]:
    yield from _served(tiny_vlm, media_max_pixels=MAX_PIXELS)


@pytest.fixture(scope="package")
def qwen_vl_server(tiny_qwen_vl: tuple[Path, Path]) -> Iterator[LiveServer]:
    yield from _served(tiny_qwen_vl)


# batch and micro-batch sizes that cut a 224 px Qwen2-VL image (64 tokens) in two pieces
QWEN_SMALL_BATCH = (32, 16)


@pytest.fixture(scope="package")
def qwen_vl_small_batch(tiny_qwen_vl: tuple[Path, Path]) -> Iterator[LiveServer]:
    batch, ubatch = QWEN_SMALL_BATCH
    yield from _served(tiny_qwen_vl, batch_size=batch, ubatch_size=ubatch)


# KV layouts: a stream per slot, one slot (each other request saves the session to the RAM
# tier, and a return restores it), one unified cache (prefixes are copied between sequences)
LAYOUTS = {"per-slot": {}, "one-slot": {"parallel": 1}, "unified": {"kv_unified": True}}


@pytest.fixture(scope="package", params=sorted(LAYOUTS))
def qwen_vl_layouts(
    request: pytest.FixtureRequest, tiny_qwen_vl: tuple[Path, Path]
) -> Iterator[LiveServer]:
    """The tiny Qwen2-VL served in each KV layout."""
    yield from _served(tiny_qwen_vl, **LAYOUTS[request.param])


@pytest.fixture(scope="package")
def audio_server(tiny_audio_lm: tuple[Path, Path]) -> Iterator[LiveServer]:
    yield from _served(tiny_audio_lm)
