"""The tiny vision-language model made here (benchmarks/tiny_vlm.py), and a server on it."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import LiveServer, start_server, wait_healthy

# a small pixel limit, so that a 413 is cheap to provoke
MAX_PIXELS = 300 * 300


@pytest.fixture(scope="session")
def tiny_vlm(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    from benchmarks.tiny_vlm import build_tiny_vlm

    return build_tiny_vlm(tmp_path_factory.mktemp("tiny-vlm"))


@pytest.fixture(scope="package")
def vlm_server(tiny_vlm: tuple[Path, Path]) -> Iterator[LiveServer]:
    model, mmproj = tiny_vlm
    server = start_server(
        model=str(model),
        mmproj=str(mmproj),
        ctx_size=4096,
        parallel=2,
        media_max_pixels=MAX_PIXELS,
    )
    wait_healthy(server.base_url)
    yield server
    server.handle.stop()
