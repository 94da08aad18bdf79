"""Fit verdicts for Hub files, read from the GGUF headers the (stand-in) Hub serves; no Qt."""

from __future__ import annotations

from app.page_models.fit_adapter import estimate, remote_fits
from app.storage.app_settings import AppSettings
from tests.hub.conftest import (  # noqa: F401  (fixtures)
    GGUF_FILE,
    GGUF_REPO,
    SPLIT_FILES,
    SPLIT_REPO,
    hub,
    hub_server,
    tiny_safetensors,
)
from tests.hub.hub_stand_in import HubStandIn


def test_a_hub_gguf_is_judged_from_its_header_alone(
    hub: HubStandIn,  # noqa: F811
    settings: AppSettings,
) -> None:
    fits = remote_fits(GGUF_REPO, [GGUF_FILE], settings.server)
    assert list(fits) == [GGUF_FILE]
    # a 98 MB model with a 1024-token context fits any machine that runs these tests
    assert fits[GGUF_FILE].verdict == "fits", fits[GGUF_FILE].message
    reads = [
        r.headers.get("range", "")
        for r in hub.requests
        if r.method == "GET" and (r.path.endswith(GGUF_FILE) or r.path.startswith("/_cdn/"))
    ]
    assert reads and all(r.startswith("bytes=") for r in reads), reads  # never the whole file


def test_a_split_model_is_judged_by_its_first_part_and_bad_headers_are_unknown(
    hub: HubStandIn,  # noqa: F811
    settings: AppSettings,
) -> None:
    fits = remote_fits(SPLIT_REPO, SPLIT_FILES, settings.server)
    assert list(fits) == [SPLIT_FILES[0]]  # the other parts are not read
    assert fits[SPLIT_FILES[0]].verdict == "unknown"  # its bytes are no GGUF
    assert fits[SPLIT_FILES[0]].message.startswith("could not read the header")


def test_the_server_pages_fit_bar_counts_the_draft_model(settings: AppSettings) -> None:
    alone = estimate(settings.server.model_copy(update={"model": "default"}))
    both = estimate(
        settings.server.model_copy(update={"model": "default", "model_draft": "default"})
    )
    assert alone.verdict == both.verdict == "fits"
    assert both.ram_needed > alone.ram_needed
