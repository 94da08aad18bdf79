"""A server on the tiny vision-language model (the session fixture ``tiny_vlm``)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.server.conftest import LiveServer, start_server, wait_healthy

# a small pixel limit, so that a 413 is cheap to provoke
MAX_PIXELS = 300 * 300


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
