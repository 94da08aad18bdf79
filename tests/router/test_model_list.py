"""GET /v1/models and GET /models describe every library model from its GGUF header
(architecture, and ``type``: ``llm`` or ``embeddings``) without reading an unchanged file
again: the header facts are kept per (path, size, mtime); a changed file is read anew."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

import backend.hub.library as library_module
from backend.hub.library import ModelLibrary
from backend.router.runner import RouterHandle
from tests.router.conftest import EMBEDDED

pytestmark = pytest.mark.model  # the tiny BERT is converted with torch


def _cards(handle: RouterHandle, path: str = "/v1/models") -> dict[str, dict[str, Any]]:
    data = httpx.get(f"{handle.base_url}{path}", timeout=30).json()["data"]
    return {card["id"]: card for card in data}


def test_a_poll_reads_only_the_headers_of_changed_files(
    start_router: Callable[..., RouterHandle],
    bert_library: ModelLibrary,
    tiny_bert_gguf: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    reads: list[str] = []
    read_header = library_module.read_gguf_header

    def counted(path: Path | str) -> Any:  # the real reader, counted
        reads.append(Path(path).name)
        return read_header(path)

    monkeypatch.setattr(library_module, "read_gguf_header", counted)
    router = start_router()
    cards = _cards(router)
    assert {m: (c["architecture"], c["type"]) for m, c in cards.items()} == {
        EMBEDDED: ("llama", "llm"),
        "alpha": ("llama", "llm"),
        "beta": ("llama", "llm"),
        "tiny-bert": ("bert", "embeddings"),
    }
    reads.clear()
    assert _cards(router) == cards
    assert _cards(router, "/models").keys() == cards.keys()
    assert reads == []  # nothing changed: no header read again

    alpha = bert_library.root / "alpha.gguf"
    staged = alpha.with_name("alpha.staged")
    shutil.copyfile(tiny_bert_gguf, staged)
    os.replace(staged, alpha)  # alpha is now another model, as after a re-download
    cards = _cards(router)
    assert reads == ["alpha.gguf"]
    assert (cards["alpha"]["architecture"], cards["alpha"]["type"]) == ("bert", "embeddings")
    assert cards["beta"]["type"] == "llm"
